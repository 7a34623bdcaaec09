"""A finished run's events compacted: their JSON in a few bytes objects, and their offsets.

A running run keeps its events as :class:`Envelope` objects (live subscribers take them as they
are, and recent events are the ones read). Once it has finished and its terminal event is
committed, nothing is added to it again, and objects are the expensive way to keep it: about
500 bytes of Python objects per event, every one of which the cyclic collector scans on each
full pass. Compacted, an event costs its JSON plus a few bytes of offset and kind, in a few
objects per run that the collector does not look into (``bytes`` and ``array`` hold no
references).

Layout (``contracts/encoded.py``): ``offsets`` counts the bytes of every envelope's JSON and comma
as if the run were one string. It is held in chunks of about ``COMPACT_CHUNK_BYTES`` (one
envelope at least), ``chunks[k]`` starting with envelope ``firsts[k]``. A run is not one
object of its whole size: malloc serves allocations that big from their own mappings and, once
one is freed, serves everything up to its size from the heap, where freed memory stays
resident (measured: 5 clients of a compacted 38 MiB run left RSS 60 MiB higher than of the
same run as objects). Chunks keep every allocation the size of an event or of a write.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import Sequence

import msgspec

from ...contracts.encoded import EncodedEnvelopes
from ...contracts.envelope import Envelope

_encoder = msgspec.json.Encoder()
_UINT32 = 1 << 32


class CompactEvents:
    """A finished run's envelopes (seq ``i + 1`` at index ``i``), as stored.

    Filled a chunk at a time (``add``): the hub compacts a run from its first event on, a
    chunk per step, and lets each chunk's objects go as soon as it is encoded, so compacting
    never holds a run twice. ``seal`` once it is whole.
    """

    __slots__ = ("chunks", "firsts", "offsets")

    def __init__(self) -> None:
        self.chunks: tuple[bytes, ...] = ()
        self.firsts: array[int] = array("q", [0])
        self.offsets: array[int] = array("q", [0])

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @property
    def nbytes(self) -> int:
        """What the hub counts it as holding: its JSON and offsets."""
        return (
            self.offsets[-1]
            + self.offsets.itemsize * len(self.offsets)
            + self.firsts.itemsize * len(self.firsts)
        )

    def add(self, envelopes: Sequence[Envelope]) -> None:
        """The run's next envelopes, as one chunk."""
        blob = bytearray()
        offsets = self.offsets
        base = offsets[-1]
        encode_into = _encoder.encode_into
        for envelope in envelopes:
            encode_into(envelope, blob, -1)
            blob += b","
            offsets.append(base + len(blob))
        # Encoded into one growing buffer, then copied once: measured against encoding each
        # envelope on its own and joining them, this left RSS 40-80 MiB lower under the
        # loads of benchmarks/soak.py (what malloc keeps of the buffers differs, not the
        # bytes held). A tuple of bytes: the collector stops tracking it; a list it would
        # scan on every pass.
        self.chunks += (bytes(blob),)
        self.firsts.append(len(offsets) - 1)

    def seal(self) -> None:
        """Whole: narrower arrays where the values fit (a run under 4 GiB)."""
        if self.offsets[-1] < _UINT32:
            self.offsets, self.firsts = array("I", self.offsets), array("I", self.firsts)

    def batch(self, start: int, end: int, max_bytes: int) -> EncodedEnvelopes:
        """Envelopes from index ``start`` (seq ``start + 1``), not decoded: at most up to
        ``end``, within one chunk, and at most ``max_bytes`` of JSON beyond the first (which
        goes whatever its size)."""
        chunk = self._chunk(start)
        end = min(end, self.firsts[chunk + 1])
        offsets = self.offsets
        if offsets[end] - offsets[start] > max_bytes:
            fits = bisect_right(offsets, offsets[start] + max_bytes, start + 1, end + 1) - 1
            end = max(fits, start + 1)
        return self._view(chunk, start, end)

    def decode(self, start: int, end: int) -> list[Envelope]:
        """Envelopes ``start`` … ``end - 1`` as objects: one decode per chunk."""
        envelopes: list[Envelope] = []
        end = min(end, len(self))
        while start < end:
            chunk = self._chunk(start)
            stop = min(end, self.firsts[chunk + 1])
            envelopes += self._view(chunk, start, stop).decode()
            start = stop
        return envelopes

    def _chunk(self, index: int) -> int:
        return 0 if len(self.chunks) == 1 else bisect_right(self.firsts, index) - 1

    def _view(self, chunk: int, start: int, end: int) -> EncodedEnvelopes:
        base = self.offsets[self.firsts[chunk]]
        return EncodedEnvelopes(self.chunks[chunk], base, self.offsets, start, end)
