"""How the Redis journal writes runs, threads and events into Redis, and reads them back.

A run's events are a Stream whose entry ids are ``<seq>-0`` and whose fields are ``t`` (the
timestamp, ns), ``k`` (the kind) and ``d`` (the payload's JSON); its record and a thread's are
JSON strings.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ...contracts.envelope import Envelope
from ...contracts.ports import ThreadInfo
from .base import RunRecord

encode = msgspec.json.Encoder().encode
decode_record = msgspec.json.Decoder(RunRecord).decode
decode_thread = msgspec.json.Decoder(ThreadInfo).decode
_decode_data = msgspec.json.Decoder(dict[str, Any]).decode
_pack = msgspec.msgpack.Encoder().encode

# An event queued for its run's next commit (seq, ts, kind, encoded data), by run.
Row = tuple[int, int, str, bytes]
Rows = dict[str, list[Row]]


def pack_rows(rows: list[Row]) -> bytes:
    """A run's events as the append script takes them: one MessagePack array of 3n strings."""
    # Strings only: the cmsgpack of Redis 7.0 reads no MessagePack ``bin``, and a payload is
    # JSON, hence UTF-8, so as a ``str`` it arrives byte for byte.
    flat: list[str] = []
    for _seq, ts, kind, data in rows:
        flat += (str(ts), kind, data.decode())
    return _pack(flat)


def from_entry(run_id: str, entry_id: bytes, fields: dict[bytes, bytes]) -> Envelope:
    seq = int(entry_id.split(b"-", 1)[0])
    return Envelope(
        run_id, seq, int(fields[b"t"]), fields[b"k"].decode(), _decode_data(fields[b"d"])
    )


def sized_from_entry(
    run_id: str, entry_id: bytes, fields: dict[bytes, bytes]
) -> tuple[Envelope, int]:
    """The envelope, and the size of its encoded payload (what the hub counts it as)."""
    return from_entry(run_id, entry_id, fields), len(fields[b"d"])
