"""JSON-RPC 2.0 as received, for ACP and loopgate's JSON-RPC API alike: parsing and shape checks.

Two steps, so that a batch's items stay independent: :func:`parse` turns bytes into a JSON value
(one -32700 for the whole message if that fails), then :func:`classify` judges each item on its
own: a call (request or notification), a reply to one of our server→client requests, or an
invalid item that gets its own error (-32600, or what :class:`Rules` says). What each protocol
asks beyond the spec is its :class:`Rules`; the detail texts are shared.
"""

from __future__ import annotations

from typing import Any, Final, cast

import msgspec

from ...contracts import json_input
from ...contracts.client_errors import describe_input_error
from .rpc_errors import INVALID_PARAMS, INVALID_REQUEST

JSONRPC: Final = "2.0"
Id = str | int | float | None


class Rules(msgspec.Struct, frozen=True, kw_only=True):
    """What a protocol accepts beyond the spec's shape."""

    batches: bool = True
    # ACP's schema: an id is an integer or a string (the spec also allows fractions).
    integer_ids: bool = False
    # ACP's methods take named params only: anything but an object (or null) is -32602.
    named_params: bool = False
    # ACP: a method name must not be empty (the spec takes any string).
    named_methods: bool = False


SPEC = Rules()
ACP = Rules(batches=False, integer_ids=True, named_params=True, named_methods=True)


class Call(msgspec.Struct, frozen=True):
    """A request from the client (``notification`` = no ``id``: it is never answered)."""

    method: str
    params: list[Any] | dict[str, Any] | None
    id: Id
    notification: bool


class Reply(msgspec.Struct, frozen=True):
    """A response from the client to one of our server→client requests."""

    id: Id
    result: Any
    error: Any
    failed: bool


class Invalid(msgspec.Struct, frozen=True):
    """Not a valid request object; answered with ``code`` (``id`` when one could be read)."""

    id: Id
    detail: str
    code: int = INVALID_REQUEST


class ParseFailure(Exception):
    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


def parse(raw: bytes | str, max_depth: int = json_input.DEFAULT_MAX_DEPTH) -> Any:
    """The JSON value of a message; :class:`ParseFailure` says why it is not JSON (or nested
    deeper than ``max_depth``)."""
    try:
        return json_input.decode(raw, max_depth=max_depth)
    except json_input.JsonTooDeep as exc:
        raise ParseFailure(describe_input_error(exc)) from None
    except msgspec.DecodeError as exc:
        # msgspec's text describes the input (position, character), never our internals.
        raise ParseFailure(f"not valid JSON: {describe_input_error(exc, root='message')}") from None


def batch_items(doc: Any, rules: Rules = SPEC) -> list[Any] | Invalid:
    """The items of a batch, or why it is refused as a whole (``[]`` is one -32600, not an
    empty answer). How many items a batch may hold is the protocol's own bound."""
    if not rules.batches:
        return Invalid(None, "batches are not supported")
    items = cast("list[Any]", doc)
    if not items:
        return Invalid(None, "empty batch")
    return items


def valid_id(value: Any, rules: Rules = SPEC) -> bool:
    # bool is an int in Python but not a JSON number.
    allowed = (str, int) if rules.integer_ids else (str, int, float)
    return value is None or type(value) in allowed


def classify(value: Any, rules: Rules = SPEC) -> Call | Reply | Invalid:
    if not isinstance(value, dict):
        return Invalid(None, f"a request must be a JSON object, got {json_type(value)}")
    item = cast("dict[str, Any]", value)
    has_id = "id" in item
    rid = item.get("id")
    readable = rid if has_id and valid_id(rid, rules) else None
    if item.get("jsonrpc") != JSONRPC:
        return Invalid(readable, 'member "jsonrpc" must be exactly "2.0"')
    if has_id and not valid_id(rid, rules):
        kinds = "a string or an integer" if rules.integer_ids else "a string, a number or null"
        return Invalid(None, f'member "id" must be {kinds}, got {json_type(rid)}')
    if "method" not in item:
        if has_id and ("result" in item) != ("error" in item):
            return Reply(rid, item.get("result"), item.get("error"), "error" in item)
        return Invalid(readable, 'a request needs a "method" member')
    method = item["method"]
    if not isinstance(method, str) or (rules.named_methods and not method):
        what = "an empty string" if isinstance(method, str) else json_type(method)
        must = "a non-empty string" if rules.named_methods else "a string"
        return Invalid(readable, f'member "method" must be {must}, got {what}')
    params: Any = item.get("params")
    if rules.named_params:
        if params is not None and not isinstance(params, dict):
            detail = f"params must be an object, got {json_type(params)}"
            return Invalid(readable, detail, INVALID_PARAMS)
    elif "params" in item and not isinstance(params, list | dict):
        return Invalid(
            readable, f'member "params" must be an array or an object, got {json_type(params)}'
        )
    return Call(method, cast("list[Any] | dict[str, Any] | None", params), rid, not has_id)


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"
