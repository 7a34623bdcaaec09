"""Loops that say who asked for their run, plugged each of the three ways, and a reference-loop
tool that does the same.

Each answers with one ``content_delta`` whose text is JSON: ``principal`` (what its context
or request says of who asked) and ``received`` (everything it was handed, as text: the whole
request, and for HTTP its headers), so a test can look for a credential in all of it.

``python -m tests.plugs.whoami`` is the stdio child (``--loop-cmd``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Iterator
from typing import Any

import msgspec
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from loopgate.contracts.loop import RunContext
from loopgate.gateway.reference.types import LoopContext

# --tools tests.plugs.whoami offers this one function, not the loops.
__all__ = ["who_is_asking"]

Event = dict[str, Any]


def answer(principal: Any, received: str) -> Iterator[Event]:
    text = json.dumps({"principal": principal, "received": received})
    yield {"kind": "content_delta", "data": {"delta": text}}
    yield {"kind": "completion", "data": {"status": "completed", "reason": "stop"}}


async def python_loop(ctx: RunContext) -> AsyncIterator[Event]:
    """``--loop tests.plugs.whoami:python_loop``"""
    received = msgspec.json.encode(ctx.request).decode()
    for item in answer(msgspec.to_builtins(ctx.principal), received):
        yield item


def http_app() -> Starlette:
    """An HTTP loop (``--loop-url BASE/loop``) answering from the JSON body it was POSTed."""

    async def loop(request: Request) -> Response:
        raw = await request.body()
        body = json.loads(raw)
        received = json.dumps(dict(request.headers)) + raw.decode()

        async def lines() -> AsyncIterator[bytes]:
            for item in answer(body.get("principal"), received):
                yield json.dumps(item).encode() + b"\n"

        return StreamingResponse(lines(), media_type="application/x-ndjson")

    return Starlette(routes=[Route("/loop", loop, methods=["POST"])])


def who_is_asking(ctx: LoopContext, topic: str = "") -> str:
    """Say who asked for this run.

    Args:
        topic: What the question was about.
    """
    principal = ctx.principal
    if not principal.may("start"):
        return "refused: a reader may not use this tool"
    return json.dumps({"subject": principal.subject, "tenant": principal.tenant})


def stdio_main() -> None:
    """The stdio child: answers each ``run.start`` from its params, line by line."""

    def write(message: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()

    for line in sys.stdin:
        message = json.loads(line)
        if message.get("method") != "run.start":
            continue  # no run here lives long enough to be cancelled or steered
        params = message["params"]
        write({"jsonrpc": "2.0", "id": message["id"], "result": None})
        for item in answer(params.get("principal"), line):
            write(
                {
                    "jsonrpc": "2.0",
                    "method": "run.event",
                    "params": {"run_id": params["run_id"], **item},
                }
            )


if __name__ == "__main__":
    stdio_main()
