"""Per-item dispatch: one message (a request or a batch) in, the bytes to answer with out.

jsonrpcserver 5.0.9 validates a batch as a whole and answers ``[valid, {"foo": 1}]`` with one
error, and it puts ``str(exception)`` into -32603; so every item is judged and run on its own
here, and unexpected exceptions become a -32603 that says nothing about the server.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ...contracts.client_errors import ClientError, client_message
from ...contracts.limits import EndpointLimits
from ...contracts.ports import (
    Forbidden,
    LimitReached,
    RunExists,
    RunFinished,
    RunGone,
    RunNotFound,
    RunService,
    ThreadNotFound,
)
from ..shared.jsonrpc import (
    Call,
    Invalid,
    ParseFailure,
    Reply,
    batch_items,
    classify,
    parse,
)
from ..shared.rpc_errors import (
    FORBIDDEN,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    LIMIT_REACHED,
    METHOD_NOT_FOUND,
    RESPONSE_LIMIT,
    RUN_EXISTS,
    RUN_FINISHED,
    RUN_GONE,
    RUN_NOT_FOUND,
    TOO_LARGE,
)
from .binding import bind
from .errors import RpcError, error_object
from .limits import RpcLimits
from .methods import (
    METHODS,
    NO_START_LIMITS,
    NO_TRACE,
    CallContext,
    Method,
    Streams,
    Trace,
)
from .openrpc import with_discover
from .protocol import Failure, Success, encode, invalid, parse_error

log = logging.getLogger("loopgate.jsonrpc")

# What a streaming connection does with a client's reply to a server→client request.
ReplyHandler = Callable[[Reply], Awaitable[None]]


class TooLarge(bytes):
    """A -32006 reply: the message or batch refused whole for its size, none of it run (over
    HTTP, a 413: a client that checks the status fails each call of its batch at once, where
    an error with ``id: null`` matches none of them)."""


def too_large(detail: str) -> TooLarge:
    return TooLarge(encode(Failure(error=error_object(TOO_LARGE, detail), id=None)))


def error_for(exc: Exception) -> dict[str, Any] | None:
    """The error object for a port exception, or None if it is not one of ours."""
    if isinstance(exc, RpcError):
        return exc.error_object()
    if isinstance(exc, RunGone):
        return error_object(RUN_GONE, client_message(exc), runId=exc.run_id)
    if isinstance(exc, ThreadNotFound):
        # Someone else's thread (a run.start continuing it): not found, as their runs are.
        # (Its run_id is the thread's id.)
        return error_object(RUN_NOT_FOUND, f"no thread with id {exc.run_id!r}", threadId=exc.run_id)
    if isinstance(exc, RunNotFound):
        return error_object(RUN_NOT_FOUND, f"no run with id {exc.run_id!r}", runId=exc.run_id)
    if isinstance(exc, RunFinished):
        return error_object(
            RUN_FINISHED,
            f"run {exc.run_id!r} has already finished ({exc.status})",
            runId=exc.run_id,
            status=exc.status,
        )
    if isinstance(exc, LimitReached):
        return error_object(LIMIT_REACHED, exc.detail, retryAfter=exc.retry_after)
    if isinstance(exc, Forbidden):
        return error_object(FORBIDDEN, exc.detail)
    if isinstance(exc, RunExists):
        return error_object(
            RUN_EXISTS, f"a run with id {exc.run_id!r} already exists", runId=exc.run_id
        )
    if isinstance(exc, ClientError):
        # The run service refusing what the call asked (a steering message over the limit…):
        # the params' fault, in our words. Any other exception stays a plain -32603.
        return error_object(INVALID_PARAMS, exc.message)
    return None


class Dispatcher:
    """Parses, validates and runs JSON-RPC messages against a method table. Stateless: a
    streaming connection passes itself as ``streams`` for the methods that need one."""

    def __init__(
        self,
        service: RunService,
        limits: RpcLimits,
        methods: Mapping[str, Method] = METHODS,
        *,
        start_limits: EndpointLimits = NO_START_LIMITS,
    ) -> None:
        self.service = service
        self.limits = limits
        # What run.start is bound by (a thread's turn, webhooks): the gateway's.
        self.start_limits = start_limits
        self.methods = with_discover(methods)

    async def handle(
        self,
        raw: bytes | str,
        *,
        streams: Streams | None = None,
        on_reply: ReplyHandler | None = None,
        trace: Trace = NO_TRACE,
    ) -> bytes | None:
        """The response bytes for one message, or None when nothing is to be sent."""
        size = len(raw) if isinstance(raw, bytes) else len(raw.encode())
        if size > self.limits.max_message_bytes:
            return too_large(
                f"message is {size} bytes; the limit is {self.limits.max_message_bytes}"
            )
        try:
            doc = parse(raw, self.limits.max_json_depth)
        except ParseFailure as exc:
            return parse_error(exc.detail)
        if isinstance(doc, list):
            items = batch_items(doc)
            if isinstance(items, Invalid):
                return encode(invalid(items))
            if len(items) > self.limits.max_batch:
                return too_large(
                    f"batch has {len(items)} items; the limit is {self.limits.max_batch}"
                )
            return await self.batch(items, streams, on_reply, trace)
        limit = self.limits.max_batch_response_bytes
        answer = await self.item(doc, streams, on_reply, trace, limit)
        return None if answer is None else encode(answer)

    async def batch(
        self,
        items: list[Any],
        streams: Streams | None,
        on_reply: ReplyHandler | None,
        trace: Trace,
    ) -> bytes | None:
        """The batch's response, its items answered in order and encoded as they come.

        Once the response holds ``max_batch_response_bytes``, the calls left are not run at
        all: each gets a -32009 naming the limit. Notifications still run (they add nothing to
        the response, and their effect was asked for)."""
        limit = self.limits.max_batch_response_bytes
        parts: list[bytes] = []
        used = 2  # the brackets
        for item in items:
            if used < limit:
                answer = await self.item(item, streams, on_reply, trace, limit - used)
            else:
                answer = await self.past_limit(item, streams, on_reply, trace)
            if answer is not None:
                part = encode(answer)
                parts.append(part)
                used += len(part) + 1
        # Byte for byte what encode(list_of_answers) gives.
        return b"[" + b",".join(parts) + b"]" if parts else None

    async def past_limit(
        self,
        item: Any,
        streams: Streams | None,
        on_reply: ReplyHandler | None,
        trace: Trace,
    ) -> Success | Failure | None:
        kind = classify(item)
        if isinstance(kind, Call) and not kind.notification:
            limit = self.limits.max_batch_response_bytes
            detail = (
                f"the batch's response reached its limit of {limit} bytes before this item, "
                "so it was not run; send it again in another request"
            )
            return Failure(error=error_object(RESPONSE_LIMIT, detail, limit=limit), id=kind.id)
        return await self.item(item, streams, on_reply, trace, 0)

    async def item(
        self,
        item: Any,
        streams: Streams | None,
        on_reply: ReplyHandler | None,
        trace: Trace,
        max_result_bytes: int,
    ) -> Success | Failure | None:
        kind = classify(item)
        if isinstance(kind, Call):
            return await self.call(kind, streams, trace, max_result_bytes)
        if isinstance(kind, Reply):
            if on_reply is not None:
                await on_reply(kind)
                return None  # a response is never answered
            kind = Invalid(
                kind.id,
                "a response object is only meaningful on a streaming connection, "
                "where the server sends requests",
            )
        return invalid(kind)

    async def call(
        self, call: Call, streams: Streams | None, trace: Trace, max_result_bytes: int
    ) -> Success | Failure | None:
        method = self.methods.get(call.method)
        try:
            if method is None:
                raise RpcError(
                    METHOD_NOT_FOUND,
                    f"no method {call.method!r}; rpc.discover lists the methods",
                )
            params, meta_trace = bind(method, call.params)
            # The call's own context, else the transport's (HTTP headers); never a mix.
            ctx = CallContext(
                self.service, streams, meta_trace or trace, max_result_bytes, self.start_limits
            )
            result = await method.handler(ctx, params)
        except Exception as exc:
            error = error_for(exc)
            if error is None:
                log.exception("method %s failed", call.method)
                error = error_object(INTERNAL_ERROR, "internal error; the server log has details")
            return None if call.notification else Failure(error=error, id=call.id)
        return None if call.notification else Success(result=result, id=call.id)
