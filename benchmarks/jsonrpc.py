"""JSON-RPC: loopgate's adapter vs the same calls dispatched by bare jsonrpcserver, one server.

    .venv/bin/python -m benchmarks.jsonrpc [--quick]

One uvicorn process serves both sides over the same hub:
  loopgate  POST /rpc and GET /rpc/ws (adapters/jsonrpc: msgspec parse, per-item dispatch,
            typed params, the session's subscription pump)
  bare      POST /bare/rpc and GET /bare/ws: jsonrpcserver 5.0.9 ``async_dispatch`` (jsonschema
            validation, json.dumps) with a ``run.get`` returning the same result, and a
            ``run.subscribe`` whose pump sends each notification with json.dumps

(a) requests/s of ``run.get`` over HTTP/1.1 keep-alive (8 connections, a minimal raw client so
    the client costs little); (b) notifications/s of a subscription over the WebSocket (a
    finished run of N events, from the first event to ``run.end``). Best of 3 rounds, sides
    alternating. Ratios are loopgate / bare (> 1 = loopgate faster).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from benchmarks._common import free_port, server_process, table

RUN_ID = "bench-run"


# --- the server -------------------------------------------------------------------------------


def build_app(events: int) -> Any:
    import anyio
    import msgspec
    from jsonrpcserver import Success, async_dispatch
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route, WebSocketRoute
    from starlette.websockets import WebSocket

    from loopgate.adapters.jsonrpc import ADAPTER
    from loopgate.adapters.jsonrpc.methods import run_view
    from loopgate.contracts.envelope import LoopEvent
    from loopgate.contracts.ports import StartRun
    from loopgate.gateway.app import build_hub, endpoint_limits
    from loopgate.gateway.settings import Settings

    settings = Settings(
        max_events_per_run=events + 10, subscriber_max_lag=events + 10, max_batch=512
    )
    hub = build_hub(settings)

    async def bare_get(runId: str) -> Any:
        return Success(msgspec.to_builtins(run_view(await hub.get(runId))))

    async def bare_rpc(request: Request) -> Response:
        reply = await async_dispatch((await request.body()).decode(), methods={"run.get": bare_get})
        return (
            Response(reply, media_type="application/json") if reply else Response(status_code=204)
        )

    async def bare_ws(websocket: WebSocket) -> None:
        await websocket.accept()
        async with anyio.create_task_group() as tg:

            async def pump(run_id: str, sid: str) -> None:
                async with hub.subscribe(run_id) as sub:
                    while not sub.done:
                        for env in await sub.next_batch():
                            note = {"jsonrpc": "2.0", "method": "run.event",
                                    "params": {"subscription": sid,
                                               "event": msgspec.to_builtins(env)}}  # fmt: skip
                            await websocket.send_text(json.dumps(note))
                    end = {"jsonrpc": "2.0", "method": "run.end",
                           "params": {"subscription": sid, "runId": run_id,
                                      "lastSeq": sub.cursor}}  # fmt: skip
                    await websocket.send_text(json.dumps(end))

            async def subscribe(runId: str) -> Any:
                tg.start_soon(pump, runId, "sub_1")
                return Success({"subscription": "sub_1", "runId": runId})

            methods = {"run.subscribe": subscribe, "run.get": bare_get}
            while True:
                message = await websocket.receive()
                if message["type"] == "websocket.disconnect":
                    break
                reply = await async_dispatch(message.get("text") or "", methods=methods)
                if reply:
                    await websocket.send_text(reply)
            tg.cancel_scope.cancel()

    async def health(request: Request) -> Response:
        return JSONResponse({"ok": True})

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with hub:
            await hub.start(StartRun(source="ingest", run_id=RUN_ID))
            delta = LoopEvent("content_delta", {"delta": "a few words "})
            for _ in range(events - 1):
                await hub.push(RUN_ID, delta)
            await hub.push(RUN_ID, LoopEvent("completion", {"status": "completed"}))
            yield

    routes = [
        Route("/healthz", health),
        Route("/bare/rpc", bare_rpc, methods=["POST"]),
        WebSocketRoute("/bare/ws", bare_ws),
        *ADAPTER.routes(hub, endpoint_limits(settings)),
    ]
    return Starlette(routes=routes, lifespan=lifespan)


def serve(port: int, events: int) -> None:
    import uvicorn

    uvicorn.run(build_app(events), host="127.0.0.1", port=port, log_level="warning")


# --- the clients ------------------------------------------------------------------------------


async def http_rate(port: int, path: str, requests: int, connections: int = 8) -> float:
    body = json.dumps(
        {"jsonrpc": "2.0", "method": "run.get", "params": {"runId": RUN_ID}, "id": 1}
    ).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    message = head + body
    per_connection = requests // connections

    async def worker() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        for _ in range(per_connection):
            writer.write(message)
            headers = await reader.readuntil(b"\r\n\r\n")
            assert headers.startswith(b"HTTP/1.1 200"), headers
            length = int(headers.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
            reply = await reader.readexactly(length)
            assert b'"result"' in reply, reply
        writer.close()

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(connections)))
    return per_connection * connections / (time.perf_counter() - started)


async def ws_rate(port: int, path: str) -> tuple[float, int]:
    from websockets.asyncio.client import connect

    async with connect(f"ws://127.0.0.1:{port}{path}", max_size=None) as ws:
        started = time.perf_counter()
        await ws.send(
            json.dumps(
                {"jsonrpc": "2.0", "id": 1, "method": "run.subscribe", "params": {"runId": RUN_ID}}
            )
        )
        notes = 0
        async for raw in ws:
            message = json.loads(raw)
            method = message.get("method")
            if method == "run.event":
                notes += 1
            elif method == "run.end":
                notes += 1
                break
        return notes / (time.perf_counter() - started), notes


async def measure(port: int, requests: int, rounds: int) -> dict[str, dict[str, float]]:
    best: dict[str, dict[str, float]] = {"loopgate": {}, "bare": {}}
    paths = {"loopgate": ("/rpc", "/rpc/ws"), "bare": ("/bare/rpc", "/bare/ws")}
    await http_rate(port, "/rpc", 400)  # warm up both sides
    await http_rate(port, "/bare/rpc", 400)
    for _ in range(rounds):
        for side, (http_path, ws_path) in paths.items():
            rate = await http_rate(port, http_path, requests)
            best[side]["http"] = max(best[side].get("http", 0.0), rate)
            notes, count = await ws_rate(port, ws_path)
            best[side]["ws"] = max(best[side].get("ws", 0.0), notes)
            best[side]["count"] = count
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer requests and events")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--events", type=int, default=20_000, help=argparse.SUPPRESS)
    args = parser.parse_args()
    events = 2_000 if args.quick else args.events
    if args.serve:
        serve(args.serve, events)
        return 0
    port = free_port()
    argv = [sys.executable, "-m", "benchmarks.jsonrpc", "--serve", str(port),
            "--events", str(events)]  # fmt: skip
    requests = 800 if args.quick else 8_000
    with server_process(argv, port, "/healthz"):
        best = asyncio.run(measure(port, requests, 1 if args.quick else 3))
    ours, bare = best["loopgate"], best["bare"]
    table(
        f"JSON-RPC on one uvicorn process ({requests} run.get requests over 8 keep-alive "
        f"connections; a subscription to a finished run of {events} events)",
        ["measure", "loopgate", "bare jsonrpcserver", "ratio"],
        [
            ["run.get requests/s (HTTP)", f"{ours['http']:,.0f}", f"{bare['http']:,.0f}",
             f"{ours['http'] / bare['http']:.2f}x"],
            ["notifications/s (WebSocket)", f"{ours['ws']:,.0f}", f"{bare['ws']:,.0f}",
             f"{ours['ws'] / bare['ws']:.2f}x"],
        ],
    )  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
