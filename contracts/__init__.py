"""loopgate's vocabulary: the runtime contract, LoopEvent payloads, the envelope and the ports."""

from .contract import RuntimeContract, is_terminal_completion, load_contract
from .envelope import (
    Envelope,
    EnvelopeError,
    LoopEvent,
    decode_envelope,
    decode_event,
    encode_envelope,
    validate_event,
)
from .events import PAYLOAD_TYPES, PayloadError, payload_view

__all__ = [
    "PAYLOAD_TYPES",
    "Envelope",
    "EnvelopeError",
    "LoopEvent",
    "PayloadError",
    "RuntimeContract",
    "decode_envelope",
    "decode_event",
    "encode_envelope",
    "is_terminal_completion",
    "load_contract",
    "payload_view",
    "validate_event",
]
