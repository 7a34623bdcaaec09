"""Requests the gateway refuses before any adapter sees them, and how an adapter shapes them.

The gateway itself answers a missing or wrong token (401), a cross-site request (403), a Host
it does not serve (421), a path it has no endpoint for (404) and a method an endpoint does not
take (405). By default that answer is an RFC 9457 problem. A protocol whose clients read errors
in a shape of their own (the OpenAI SDKs read ``{"error": {"message", …}}`` and show nothing
else) says so by implementing :class:`ShapesRefusals`: the gateway then answers in that shape
on the endpoints the adapter serves, and on the unknown paths under its ``refusal_prefixes``.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol, TypeGuard

import msgspec

from .projector import Adapter

# What was wrong, for an adapter that words each case its own way (OpenAI's invalid_api_key).
Reason = Literal[
    "no_credentials",
    "wrong_credentials",
    "origin_refused",
    "host_refused",
    "no_endpoint",
    "method_not_allowed",
    "refused",
]


class Refusal(msgspec.Struct, frozen=True, kw_only=True):
    status: int
    detail: str  # what was wrong, in words a user can act on (never an exception's text)
    reason: Reason = "refused"
    headers: dict[str, str] = msgspec.field(default_factory=dict[str, str])


class ClaimsPaths(Adapter, Protocol):
    """An adapter whose protocol owns every path under its ``refusal_prefixes``, known or not."""

    # Paths whose unknown endpoints are this protocol's (``/v1`` for OpenAI: every path of
    # OpenAI's API loopgate does not serve). The longest prefix of any adapter wins.
    refusal_prefixes: tuple[str, ...]


class ShapesRefusals(ClaimsPaths, Protocol):
    """An adapter that answers the gateway's refusals in its protocol's error shape."""

    def refusal_response(self, refusal: Refusal) -> Any:
        """The ASGI response (a Starlette ``Response``) that answers ``refusal``."""
        ...


def claims_paths(adapter: Adapter) -> TypeGuard[ClaimsPaths]:
    return isinstance(getattr(adapter, "refusal_prefixes", None), tuple)


def shapes_refusals(adapter: Adapter) -> TypeGuard[ShapesRefusals]:
    return claims_paths(adapter) and callable(getattr(adapter, "refusal_response", None))
