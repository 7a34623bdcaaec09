"""The sample loop behind the HTTP plug's protocol (a Starlette app), plus endpoints that
misbehave in each way the gateway must survive."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.plugs.remote_context import RemoteContext
from tests.plugs.sample_loop import sample

NDJSON = "application/x-ndjson"
TYPED = {
    "ndjson": "application/ndjson",
    "jsonl": "application/jsonl",
    "json-lines": "Application/JSON-Lines; charset=utf-8",
}


def sample_app() -> Starlette:
    runs: dict[str, RemoteContext] = {}
    # What the gateway sent, for the tests: each request's headers and body, each command.
    seen: dict[str, list[Any]] = {"requests": [], "commands": []}

    async def loop(request: Request) -> Response:
        # /typed/KIND answers with another of the NDJSON media types the gateway accepts.
        media = TYPED.get(request.path_params.get("kind", ""), NDJSON)
        body = await request.json()
        seen["requests"].append({"headers": dict(request.headers), "body": body})
        send, receive = anyio.create_memory_object_stream[dict[str, Any]](64)
        ctx = RemoteContext(body, send.send)
        runs[ctx.run_id] = ctx

        async def produce() -> None:
            async with send:
                try:
                    async for item in sample(ctx):
                        await send.send(item)
                except RuntimeError:
                    return  # "raise": the stream just ends, as a crashed loop's would

        async def lines() -> AsyncIterator[bytes]:
            async with anyio.create_task_group() as tg:
                tg.start_soon(produce)
                async with receive:
                    async for item in receive:
                        if isinstance(item, dict) and item.get("kind") is None and "data" in item:
                            yield b'{"data": {}}\n'  # "nokind"
                        else:
                            yield json.dumps(item).encode() + b"\n"
            runs.pop(ctx.run_id, None)

        return StreamingResponse(lines(), headers={"content-type": media})

    async def commands(request: Request) -> Response:
        command = await request.json()
        seen["commands"].append(command)
        ctx = runs.get(command.get("run_id"))
        if ctx is None:
            return JSONResponse({"detail": "no such run"}, 409)
        ctx.command(command["type"], command)
        return JSONResponse({"ok": True})

    async def status500(request: Request) -> Response:
        return Response("boom: secret internals", 500)

    async def html(request: Request) -> Response:
        return Response("<html>hi</html>", media_type="text/html")

    async def hang(request: Request) -> Response:
        await anyio.sleep(3600)  # never answers: the gateway's first-event timeout ends it
        return Response()

    async def drop(request: Request) -> Response:
        async def lines() -> AsyncIterator[bytes]:
            yield b'{"kind": "content_delta", "data": {"delta": "half"}}\n'
            raise ConnectionAbortedError("drop the connection")

        return StreamingResponse(lines(), media_type=NDJSON)

    async def garbage(request: Request) -> Response:
        return Response(b"this is not json\n", media_type=NDJSON)

    async def too_long(request: Request) -> Response:
        return Response(b"x" * (3 << 20) + b"\n", media_type=NDJSON)  # past the 2 MiB default

    app = Starlette(
        routes=[
            Route("/loop", loop, methods=["POST"]),
            Route("/loop/commands", commands, methods=["POST"]),
            # The same loop without a command endpoint: steering is refused, cancel closes.
            Route("/plain", loop, methods=["POST"]),
            Route("/typed/{kind}", loop, methods=["POST"]),
            Route("/status500", status500, methods=["POST"]),
            Route("/html", html, methods=["POST"]),
            Route("/hang", hang, methods=["POST"]),
            Route("/drop", drop, methods=["POST"]),
            Route("/garbage", garbage, methods=["POST"]),
            Route("/toolong", too_long, methods=["POST"]),
        ]
    )
    app.state.seen = seen
    return app
