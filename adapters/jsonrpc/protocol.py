"""JSON-RPC 2.0 on the wire: the messages we send, and the classification of what we receive.

Parsing is two steps so that a batch's items stay independent: ``parse`` turns bytes into
JSON values (one -32700 for the whole message if that fails), then ``classify`` judges each item
on its own: a call (request or notification), a reply to one of our server→client requests, or
an invalid item that gets its own -32600.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from adapters.jsonrpc.errors import INVALID_REQUEST, PARSE_ERROR, error_object
from contracts import json_input
from contracts.client_errors import describe_input_error

JSONRPC = "2.0"
Id = str | int | float | None


class Success(msgspec.Struct, kw_only=True):
    jsonrpc: Literal["2.0"] = JSONRPC
    result: Any
    id: Id


class Failure(msgspec.Struct, kw_only=True):
    jsonrpc: Literal["2.0"] = JSONRPC
    error: dict[str, Any]
    id: Id


class Notification(msgspec.Struct, kw_only=True):
    """A server→client notification (``run.event``, ``run.end``)."""

    jsonrpc: Literal["2.0"] = JSONRPC
    method: str
    params: dict[str, Any]


class Request(msgspec.Struct, kw_only=True):
    """A server→client request (``run.permission``); the client answers with a response."""

    jsonrpc: Literal["2.0"] = JSONRPC
    id: str
    method: str
    params: dict[str, Any]


Response = Success | Failure


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
    """Not a valid request object; answered with -32600 (``id`` when one could be read)."""

    id: Id
    detail: str


class ParseFailure(Exception):
    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


encode = msgspec.json.Encoder().encode


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


def valid_id(value: Any) -> bool:
    # bool is an int in Python but not a JSON number.
    return value is None or (type(value) in (str, int, float))


def classify(item: Any) -> Call | Reply | Invalid:
    if not isinstance(item, dict):
        return Invalid(None, f"a request must be a JSON object, got {json_type(item)}")
    has_id = "id" in item
    rid = item.get("id")
    readable = rid if has_id and valid_id(rid) else None
    if item.get("jsonrpc") != JSONRPC:
        return Invalid(readable, 'member "jsonrpc" must be exactly "2.0"')
    if has_id and not valid_id(rid):
        detail = f'member "id" must be a string, a number or null, got {json_type(rid)}'
        return Invalid(None, detail)
    if "method" not in item:
        if has_id and ("result" in item) != ("error" in item):
            return Reply(rid, item.get("result"), item.get("error"), "error" in item)
        return Invalid(readable, 'a request needs a "method" member')
    method = item["method"]
    if not isinstance(method, str):
        return Invalid(readable, f'member "method" must be a string, got {json_type(method)}')
    params = item.get("params")
    if "params" in item and not isinstance(params, list | dict):
        return Invalid(
            readable, f'member "params" must be an array or an object, got {json_type(params)}'
        )
    return Call(method, params, rid, not has_id)


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


def failure(rid: Id, error: dict[str, Any]) -> Failure:
    return Failure(error=error, id=rid)


def parse_error(detail: str) -> bytes:
    return encode(Failure(error=error_object(PARSE_ERROR, detail), id=None))


def invalid(item: Invalid) -> Failure:
    return Failure(error=error_object(INVALID_REQUEST, item.detail), id=item.id)
