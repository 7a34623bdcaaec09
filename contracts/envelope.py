"""The gateway's event envelope and the LoopEvent it wraps."""

from __future__ import annotations

import re
from typing import Any

import msgspec

from contracts.events import PayloadError, payload_view


class LoopEvent(msgspec.Struct, frozen=True):
    """What a core loop emits: a kind and its payload. Unknown kinds are legal."""

    kind: str
    data: dict[str, Any] = msgspec.field(default_factory=dict)


class Envelope(msgspec.Struct, frozen=True):
    """One accepted event: the SSE id and resume cursor is ``seq`` (gapless from 1 per run)."""

    run_id: str
    seq: int
    ts: int
    kind: str
    data: dict[str, Any]


class EnvelopeError(ValueError):
    """Input that is not a valid envelope or LoopEvent; the message says what was wrong."""


_envelope_decoder = msgspec.json.Decoder(Envelope)
_event_decoder = msgspec.json.Decoder(LoopEvent)
_encoder = msgspec.json.Encoder()


# Kinds become SSE event names and metric labels: a newline or a megabyte there is an attack.
_KIND = re.compile(r"[A-Za-z0-9_.:-]{1,64}")


def _validated(kind: str, data: dict[str, Any]) -> None:
    if not _KIND.fullmatch(kind):
        raise EnvelopeError("kind must be 1-64 characters of letters, digits, '_', '.', ':' or '-'")
    try:
        payload_view(kind, data)
    except PayloadError as exc:
        raise EnvelopeError(str(exc)) from None


def decode_envelope(raw: bytes | str) -> Envelope:
    """Decode and validate one envelope; unknown kinds and payload keys are kept."""
    try:
        env = _envelope_decoder.decode(raw)
    except msgspec.DecodeError as exc:
        raise EnvelopeError(_describe(exc)) from None
    if env.seq < 1:
        raise EnvelopeError("seq must be >= 1")
    _validated(env.kind, env.data)
    return env


def decode_event(raw: bytes | str) -> LoopEvent:
    """Decode and validate one LoopEvent (``{"kind", "data"}``) pushed by an external loop."""
    try:
        event = _event_decoder.decode(raw)
    except msgspec.DecodeError as exc:
        raise EnvelopeError(_describe(exc)) from None
    _validated(event.kind, event.data)
    return event


def validate_event(kind: str, data: dict[str, Any]) -> LoopEvent:
    """Validate an in-process event the same way a decoded one is."""
    _validated(kind, data)
    return LoopEvent(kind, data)


def encode_envelope(env: Envelope) -> bytes:
    return _encoder.encode(env)


def _describe(exc: msgspec.DecodeError) -> str:
    text = str(exc)
    if text.startswith("JSON is malformed") or "truncated" in text:
        return f"malformed JSON ({text})"
    return text.replace("$.", "")


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
        raw = msgspec.json.decode(line)
        if not isinstance(raw, dict) or not isinstance(raw.get("kind"), str):
            raise ValueError(f"{source}:{number}: not an envelope")
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
