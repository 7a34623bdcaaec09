"""Binding a call's params to its method: named or positional, ``_meta``'s trace context read
off, and msgspec's complaints turned into -32602 naming the param."""

from __future__ import annotations

import re
from typing import Any

import msgspec

from ...contracts.client_errors import describe_input_error
from .errors import RpcError, invalid_params
from .methods import Method, Trace

TRACEPARENT = re.compile(r"[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")
# After normalising: "… - at `runId`" names the param; "at `params`" is the whole object.
_AT_PATH = re.compile(r"at `(?!params[`\[])([^.`\[]+)")
_FIELD = re.compile(r"field `([^`]+)`")


def bind(method: Method, params: list[Any] | dict[str, Any] | None) -> tuple[Any, Trace | None]:
    """The method's typed params and the trace context their ``_meta`` carried, or -32602."""
    typ = method.params
    trace = None
    if isinstance(params, dict) and "_meta" in params:
        params = dict(params)
        trace = meta_trace(params.pop("_meta"))
    if isinstance(typ, type) and issubclass(typ, msgspec.Struct):
        if params is None:
            params = {}
        elif isinstance(params, list):
            params = positional(method, typ, params)
    elif params is None:
        params = []
    try:
        return msgspec.convert(params, typ), trace
    except msgspec.ValidationError as exc:
        raise describe(exc) from None


def positional(method: Method, typ: type[msgspec.Struct], values: list[Any]) -> dict[str, Any]:
    names = [f.encode_name for f in msgspec.structs.fields(typ)]
    if len(values) > len(names):
        takes = f"at most {len(names)} ({', '.join(names)})" if names else "none"
        raise invalid_params(
            None, f"{method.name} takes {takes} positional params; got {len(values)}"
        )
    return dict(zip(names, values, strict=False))


def meta_trace(meta: Any) -> Trace | None:
    """The trace context in ``_meta``, if its traceparent is valid. W3C Trace Context: a
    malformed traceparent is ignored (a new trace starts), not an error; so is a tracestate
    that is not text (the hub drops one over 8,192 characters)."""
    if not isinstance(meta, dict):
        raise invalid_params("_meta", "`_meta` must be an object")
    value = meta.get("traceparent")
    if isinstance(value, str) and TRACEPARENT.fullmatch(value) and value[:2] != "ff":
        state = meta.get("tracestate")
        return Trace(value, state if isinstance(state, str) and state else None)
    return None


def describe(exc: msgspec.ValidationError) -> RpcError:
    raw = describe_input_error(exc, root="params")
    match = _AT_PATH.search(raw) or _FIELD.search(raw)
    detail = raw.replace(" - at `params`", "")
    if raw.startswith("Expected `object`") and " - at " not in detail:
        detail = "params must be an object or an array"
    return invalid_params(match.group(1) if match else None, detail)
