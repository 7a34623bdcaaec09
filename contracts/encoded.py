"""Envelopes as the hub keeps a finished run's: their JSON, stored once, read without decoding.

A finished run's envelopes are kept as each one's JSON, exactly as ``encode_envelope`` makes
it, followed by a comma, run after run in a ``bytes`` object. ``offsets[i] - base`` is where
envelope ``i`` (seq ``i + 1``) starts in it; it ends one byte (its comma) before
``offsets[i + 1] - base``. So the envelopes of a batch are one contiguous slice: decoded into
:class:`Envelope` objects with one call (``[`` + slice + ``]`` is a JSON array), or written as
they are (native SSE frames each from its bytes, and never decodes them).
"""

from __future__ import annotations

from array import array
from typing import Protocol, runtime_checkable

import msgspec

from .envelope import Envelope
from .ports import Subscription

_decode_list = msgspec.json.Decoder(list[Envelope]).decode


class EncodedEnvelopes:
    """The envelopes with seqs ``start + 1`` … ``end`` of one run, as stored."""

    __slots__ = ("base", "blob", "end", "offsets", "start")

    def __init__(
        self,
        blob: bytes,
        base: int,
        offsets: array[int],
        start: int,
        end: int,
    ) -> None:
        self.blob = blob
        self.base = base
        self.offsets = offsets
        self.start = start
        self.end = end

    def __len__(self) -> int:
        return self.end - self.start

    @property
    def nbytes(self) -> int:
        """The bytes of these envelopes' JSON (with their commas)."""
        return self.offsets[self.end] - self.offsets[self.start]

    def decode(self) -> list[Envelope]:
        """The envelopes as objects: one decode of the whole slice."""
        if self.end <= self.start:
            return []
        # One copy of the slice, into the array's brackets.
        text = bytearray(b"[")
        start, end = self.offsets[self.start] - self.base, self.offsets[self.end] - self.base
        text += memoryview(self.blob)[start : end - 1]
        text += b"]"
        envelopes: list[Envelope] = _decode_list(text)
        return envelopes

    def format(self, template: bytes) -> bytes:
        """Each envelope as ``template % (seq, json)``, joined: SSE frames, say."""
        blob, offsets = self.blob, self.offsets
        # Each envelope is followed by its comma, which is not framed.
        base, comma = self.base, self.base + 1
        return b"".join(
            [
                template % (i + 1, blob[offsets[i] - base : offsets[i + 1] - comma])
                for i in range(self.start, self.end)
            ]
        )


@runtime_checkable
class EncodedSubscription(Subscription, Protocol):
    """A subscription that can hand out envelopes as the hub stores them (a finished run's),
    for a reader that writes them as they are instead of decoding them."""

    async def next_encoded(
        self, max_wait: float | None = None
    ) -> list[Envelope] | EncodedEnvelopes:
        """``next_batch``, but a batch the hub holds encoded comes as it is."""
        ...
