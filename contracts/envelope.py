"""The gateway's event envelope and the LoopEvent it wraps."""

from __future__ import annotations

import re
from typing import Any

import msgspec

from . import json_input
from .client_errors import ClientError, describe_input_error
from .events import PAYLOAD_TYPES


class LoopEvent(msgspec.Struct, frozen=True):
    """What a core loop emits: a kind and its payload. Unknown kinds are legal."""

    kind: str
    data: dict[str, Any] = msgspec.field(default_factory=dict)


# gc=False: the cyclic collector never tracks envelopes (a running run holds thousands, and a
# full collection would scan each). Safe because an envelope cannot be part of a cycle: it is
# frozen, and only its ``data`` (a JSON payload: builtins) could point back at it. Its ``data``
# is tracked as any dict is. (The docstring is the JSON Schema's description.)
class Envelope(msgspec.Struct, frozen=True, gc=False):
    """One accepted event: the SSE id and resume cursor is ``seq`` (gapless from 1 per run)."""

    run_id: str
    seq: int
    ts: int
    kind: str
    data: dict[str, Any]


class EnvelopeError(ClientError):
    """Input that is not a valid envelope or LoopEvent; the message says what was wrong.

    Only the envelope's own shape is checked (``kind`` a string of the allowed characters,
    ``data`` an object): payload fields are the contract's tolerant part (contracts.oddities).
    """


_envelope_decoder = msgspec.json.Decoder(Envelope)
_event_decoder = msgspec.json.Decoder(LoopEvent)
_encoder = msgspec.json.Encoder()


# Kinds become SSE event names and metric labels: a newline or a megabyte there is an attack.
_KIND = re.compile(r"[A-Za-z0-9_.:-]{1,64}")


def _validated(kind: str) -> None:
    # The contract's kinds are nearly every event: a set lookup, not a regex match, for them.
    if kind not in PAYLOAD_TYPES and not _KIND.fullmatch(kind):
        raise EnvelopeError("kind must be 1-64 characters of letters, digits, '_', '.', ':' or '-'")


def decode_envelope(raw: bytes | str, *, max_depth: int = json_input.DEFAULT_MAX_DEPTH) -> Envelope:
    """Decode one envelope, checking its shape; unknown kinds and payload keys are kept, and so
    are known fields of a foreign type."""
    try:
        env: Envelope = json_input.decode(raw, decoder=_envelope_decoder, max_depth=max_depth)
    except msgspec.DecodeError as exc:
        raise EnvelopeError(_describe(exc)) from None
    if env.seq < 1:
        raise EnvelopeError("seq must be >= 1")
    _validated(env.kind)
    return env


def decode_event(raw: bytes | str, *, max_depth: int = json_input.DEFAULT_MAX_DEPTH) -> LoopEvent:
    """Decode one LoopEvent (``{"kind", "data"}``) pushed by an external loop, checking its
    shape the same way."""
    try:
        event: LoopEvent = json_input.decode(raw, decoder=_event_decoder, max_depth=max_depth)
    except msgspec.DecodeError as exc:
        raise EnvelopeError(_describe(exc)) from None
    _validated(event.kind)
    return event


def validate_event(kind: str, data: dict[str, Any]) -> LoopEvent:
    """Check an in-process event's shape the same way a decoded one is."""
    if type(kind) is not str or type(data) is not dict:
        raise EnvelopeError("an event is a string kind and a data object")
    _validated(kind)
    return LoopEvent(kind, data)


def encode_envelope(env: Envelope) -> bytes:
    return _encoder.encode(env)


def _describe(exc: msgspec.DecodeError) -> str:
    text = describe_input_error(exc, root="event")
    if isinstance(exc, json_input.JsonTooDeep):
        return text
    if text.startswith("JSON is malformed") or "truncated" in text:
        return f"malformed JSON ({text})"
    return text


def envelope_schema() -> dict[str, Any]:
    """JSON Schema of the envelope, generated from the type (committed as schema/)."""
    return msgspec.json.schema(Envelope)


def decode_recording(data: bytes, run_id: str, source: str) -> list[Envelope]:
    """A recording (NDJSON envelopes) as recorded, unvalidated beyond its shape: odd payloads
    must reach projectors as they are. Lines in the bare LoopEvent form (``{"kind", "data"}``)
    get ``run_id``, their place as seq and ts 0; ``source`` names the file in errors."""
    envelopes: list[Envelope] = []
    for number, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        try:
            raw = json_input.decode(line)
        except msgspec.DecodeError as exc:
            raise EnvelopeError(f"{source}:{number}: {_describe(exc)}") from None
        if (
            not isinstance(raw, dict)
            or not isinstance(raw.get("kind"), str)
            or not isinstance(raw.get("data", {}), dict)
        ):
            raise EnvelopeError(f"{source}:{number}: not an envelope")
        envelopes.append(
            Envelope(
                run_id=raw.get("run_id", run_id),
                seq=raw.get("seq", len(envelopes) + 1),
                ts=raw.get("ts", 0),
                kind=raw["kind"],
                data=raw.get("data", {}),
            )
        )
    return envelopes
