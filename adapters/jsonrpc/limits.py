"""The bounds of the JSON-RPC adapter, derived from the gateway's endpoint limits."""

from __future__ import annotations

from typing import Any

import msgspec

from ...contracts.json_input import DEFAULT_MAX_DEPTH
from ...contracts.limits import EndpointLimits


class RpcLimits(msgspec.Struct, frozen=True, kw_only=True):
    # One HTTP body, WebSocket message or stdio line. Kept at or below the WebSocket frame limit
    # so an oversized message gets a JSON-RPC error instead of uvicorn's close 1009.
    max_message_bytes: int = 1 << 20
    max_batch: int = 100  # items in one batch request
    max_subscriptions: int = 64  # open subscriptions per connection
    # Server→client requests (permission questions) awaiting the client's answer, per connection;
    # the oldest is forgotten beyond this (the hub times unanswered questions out anyway).
    max_pending_requests: int = 256
    # A streaming client that accepts no bytes for this long is disconnected (it can resume).
    write_timeout_s: float = 30.0
    # JSON nested deeper than this is a -32700 (contracts.json_input).
    max_json_depth: int = DEFAULT_MAX_DEPTH
    # One response's bytes: a batch's items past it are not run (each gets -32009), and a page
    # of run.events ends before it. 13 KB of batched run.events must not build a gigabyte.
    max_batch_response_bytes: int = 8 << 20

    def __post_init__(self) -> None:
        for name in self.__struct_fields__:
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")

    @classmethod
    def from_endpoint(cls, limits: EndpointLimits, **overrides: Any) -> RpcLimits:
        values: dict[str, Any] = {
            "max_message_bytes": min(limits.max_body_bytes, limits.max_frame_bytes),
            "write_timeout_s": limits.write_timeout_s,
            "max_json_depth": limits.max_json_depth,
            "max_batch_response_bytes": limits.max_batch_response_bytes,
        }
        return cls._with(values, overrides)

    @classmethod
    def from_stdio(cls, limits: EndpointLimits, **overrides: Any) -> RpcLimits:
        """Over stdio a message is a line: ``max_line_bytes`` bounds it."""
        values: dict[str, Any] = {
            "max_message_bytes": limits.max_line_bytes,
            "write_timeout_s": limits.write_timeout_s,
            "max_json_depth": limits.max_json_depth,
            "max_batch_response_bytes": limits.max_batch_response_bytes,
        }
        return cls._with(values, overrides)

    @classmethod
    def _with(cls, values: dict[str, Any], overrides: dict[str, Any]) -> RpcLimits:
        # Converted, not passed as keywords: a bad override is a ValidationError naming it.
        return msgspec.convert({**values, **overrides}, cls)
