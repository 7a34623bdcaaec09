"""What the hub side of telemetry tells the span side: a run began, its events, how it was
delivered. In-process these are handed over as objects; to the trace worker they travel as
length-prefixed msgpack frames ``[codes, messages]`` (a code per message says its type), in
the order they happened."""

from __future__ import annotations

import struct
from typing import Any

import msgspec

from contracts.envelope import Envelope
from contracts.messages import Message

# A frame's length prefix; frames are written by loopgate only, but a bound keeps a corrupt
# stream from asking the worker for gigabytes.
HEADER = struct.Struct(">I")
MAX_FRAME_BYTES = 256 << 20

# The structs below hold plain data that never refers back to them (no cycles possible), so
# they are kept out of the garbage collector (gc=False): thousands wait in the worker's queue.


class SpanRef(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """A span context as it travels: hex ids (msgpack has no 128-bit ints), W3C tracestate."""

    trace_id: str
    span_id: str
    sampled: bool
    tracestate: str = ""
    remote: bool = False


class RunOpened(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    run_id: str
    thread_id: str
    source: str
    created_at: int
    agent_name: str
    provider_name: str
    # The run span's own context (decided on the hub side, where clients are told of it) and
    # the caller's, if any.
    root: SpanRef
    parent: SpanRef | None = None
    input: tuple[Message, ...] = ()


class RunSummary(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """How the run was delivered as of its end, sent just before its terminal event: per
    subscription (closed or still streaming) its consumer, whether it was cut off and how many
    events it was handed. The span side turns this into the run span's attributes."""

    run_id: str
    # (consumer, subscriptions, cut-offs, events delivered): closed ones summed by consumer,
    # open ones one each. Raw counts: the hub side does no formatting.
    deliveries: list[tuple[str, int, int, int]]


class DeliveryClosed(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """One subscription ended: its whole ``deliver`` span, under the span ``parent`` names."""

    parent: SpanRef
    run_id: str
    consumer: str
    start_ns: int
    end_ns: int
    cursor: int
    delivered: int
    complete: bool
    # The lag it exceeded when it was cut off; None when it was not.
    cut_off_lag: int | None = None


Message_ = RunOpened | RunSummary | DeliveryClosed | Envelope
_CODES: dict[type, int] = {Envelope: 0, RunOpened: 1, RunSummary: 2, DeliveryClosed: 3}
_TYPES: tuple[type, ...] = (Envelope, RunOpened, RunSummary, DeliveryClosed)


class FrameError(ValueError):
    pass


class FrameEncoder:
    def __init__(self) -> None:
        self._encoder = msgspec.msgpack.Encoder()

    def encode(self, messages: list[Any]) -> bytes:
        # Codes by C-level iteration: this runs in the gateway's process for every message.
        codes = list(map(_CODES.__getitem__, map(type, messages)))
        body = self._encoder.encode((codes, messages))
        return HEADER.pack(len(body)) + body


class FrameDecoder:
    def __init__(self) -> None:
        self._frame = msgspec.msgpack.Decoder(tuple[list[int], list[msgspec.Raw]])
        self._decoders = [msgspec.msgpack.Decoder(t) for t in _TYPES]

    def decode(self, body: bytes) -> list[Message_]:
        try:
            codes, raws = self._frame.decode(body)
            if len(codes) != len(raws) or any(not 0 <= c < len(_TYPES) for c in codes):
                raise FrameError("a telemetry frame's codes do not match its messages")
            decoders = self._decoders
            return [decoders[code].decode(raw) for code, raw in zip(codes, raws, strict=True)]
        except msgspec.DecodeError as exc:
            raise FrameError("a telemetry frame could not be decoded") from exc
