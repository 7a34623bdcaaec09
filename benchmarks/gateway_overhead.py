"""Gateway overhead: one loop behind loopgate and behind the minimal endpoint of each protocol.

    .venv/bin/python -m benchmarks.gateway_overhead [--quick] [--rounds 3] [--seconds 4]
        [--clients 1 10 50] [--deltas 30] [--routes openai agui vercel]

Both sides serve the same loop — an async generator yielding ``--deltas`` content deltas, a
turn of the event loop before each (as a model stream read off a socket would give), then
its completion — and stream it over SSE on three routes:

  loopgate  ``loopgate serve --loop benchmarks.gateway_overhead:deltas_loop``: the real
            gateway (hub, journal in memory, projectors, every default), in its own process
  minimal   one Starlette app with a 30-line endpoint per protocol that runs the generator and
            writes that protocol's frames with msgspec as it goes: what a team serving one
            protocol from one loop writes, with nothing it does not need (no run record, no
            resumption, no fan-out, no limits). Its own process.

Routes: ``openai`` (``POST /v1/chat/completions``, ``stream: true``: chunks, then ``[DONE]``),
``agui`` (``POST /agui``: RUN_STARTED … RUN_FINISHED) and ``vercel`` (``POST /vercel``: the UI
message stream, then ``[DONE]``). Both under uvicorn on 127.0.0.1 with the same settings (h11,
asyncio, no access log). The load is benchmarks/_sse_load.py's (a client process of its own,
raw sockets): N clients each send a run, read its stream to the end, and send the next.

Per route and client count, rounds are interleaved (loopgate, minimal, then minimal, loopgate,
…) so drift in the machine's load hits both; each cell is the median and range over rounds of
runs/s, server CPU per run (the server process and everything under it, from /proc), and
p50/p99 of the first event (TTFB) and the last (TTLB). Targets (issue 37), as ratios of
loopgate to minimal in the same run: CPU per run ≤ 1.05×, runs/s ≥ 0.95×.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# Only the standard library and the benchmarks' own helpers at module level: the minimal
# server imports this module too, and must not carry loopgate's import cost.
from benchmarks._common import (  # noqa: E402
    STACK,
    STACK_UVICORN,
    fmt_range,
    free_port,
    say,
    serve_argv,
    server_processes,
    table,
)
from benchmarks._sse_load import Case, Route, load_round  # noqa: E402

SIDES = ("loopgate", "minimal")
DELTAS_ENV = "LOOPGATE_BENCH_DELTAS"
PROMPT = "hello"
ROUTES = {
    "openai": Route(
        "/v1/chat/completions",
        json.dumps(
            {"model": "loopgate", "stream": True, "messages": [{"role": "user", "content": PROMPT}]}
        ),
        "data: [DONE]",
    ),
    "agui": Route(
        "/agui",
        json.dumps(
            {
                "threadId": "thread-RUN_ID",
                "runId": "RUN_ID",
                "messages": [{"id": "m1", "role": "user", "content": PROMPT}],
                "tools": [],
                "context": [],
                "state": {},
                "forwardedProps": {},
            }
        ),
        '"RUN_FINISHED"',
    ),
    "vercel": Route(
        "/vercel",
        json.dumps(
            {
                "id": "chat-RUN_ID",
                "messages": [
                    {"id": "m1", "role": "user", "parts": [{"type": "text", "text": PROMPT}]}
                ],
            }
        ),
        "data: [DONE]",
    ),
}


# --- the loop both sides serve ------------------------------------------------------------------


def deltas() -> int:
    return int(os.environ.get(DELTAS_ENV, "30"))


async def tokens() -> AsyncIterator[str]:
    """The loop's text: ``deltas()`` tokens, each after a turn of the event loop."""
    for i in range(deltas()):
        await asyncio.sleep(0)
        yield f"tok{i} "


async def deltas_loop(ctx: Any) -> AsyncIterator[dict[str, Any]]:
    """The loop as loopgate plugs it in (``--loop``)."""
    async for token in tokens():
        yield {"kind": "content_delta", "data": {"delta": token}}
    yield {"kind": "completion", "data": {"status": "completed"}}


# --- the minimal endpoints ----------------------------------------------------------------------


def minimal_app() -> Any:
    """One endpoint per protocol, each the least that protocol's clients accept."""
    import uuid

    import msgspec
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import PlainTextResponse, Response, StreamingResponse
    from starlette.routing import Route as Path_

    encode = msgspec.json.encode
    decode = msgspec.json.decode
    sse = {"cache-control": "no-cache"}

    def frame(obj: object) -> bytes:
        return b"data: " + encode(obj) + b"\n\n"

    async def openai(request: Request) -> Response:
        body = decode(await request.body())
        run = f"chatcmpl-{uuid.uuid4().hex}"
        created, model = int(time.time()), body["model"]

        def chunk(delta: dict[str, str], finish: str | None) -> bytes:
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
            return frame(
                {
                    "object": "chat.completion.chunk",
                    "id": run,
                    "created": created,
                    "model": model,
                    "choices": [choice],
                }
            )

        async def stream() -> AsyncIterator[bytes]:
            first = True
            async for token in tokens():
                yield chunk(
                    {"role": "assistant", "content": token} if first else {"content": token}, None
                )
                first = False
            yield chunk({}, "stop")
            yield b"data: [DONE]\n\n"

        return StreamingResponse(stream(), media_type="text/event-stream", headers=sse)

    async def agui(request: Request) -> Response:
        body = decode(await request.body())
        thread, run = body["threadId"], body["runId"]
        message = f"{run}:msg"

        async def stream() -> AsyncIterator[bytes]:
            yield frame({"type": "RUN_STARTED", "threadId": thread, "runId": run})
            yield frame({"type": "TEXT_MESSAGE_START", "messageId": message, "role": "assistant"})
            async for token in tokens():
                yield frame({"type": "TEXT_MESSAGE_CONTENT", "messageId": message, "delta": token})
            yield frame({"type": "TEXT_MESSAGE_END", "messageId": message})
            yield frame({"type": "RUN_FINISHED", "threadId": thread, "runId": run})

        return StreamingResponse(stream(), media_type="text/event-stream", headers=sse)

    async def vercel(request: Request) -> Response:
        decode(await request.body())
        message = f"msg-{uuid.uuid4().hex}"

        async def stream() -> AsyncIterator[bytes]:
            yield frame({"type": "start", "messageId": message})
            yield frame({"type": "start-step"})
            yield frame({"type": "text-start", "id": message})
            async for token in tokens():
                yield frame({"type": "text-delta", "id": message, "delta": token})
            yield frame({"type": "text-end", "id": message})
            yield frame({"type": "finish-step"})
            yield frame({"type": "finish", "finishReason": "stop"})
            yield b"data: [DONE]\n\n"

        headers = {**sse, "x-vercel-ai-ui-message-stream": "v1"}
        return StreamingResponse(stream(), media_type="text/event-stream", headers=headers)

    async def health(request: Request) -> Response:
        return PlainTextResponse("ok")

    return Starlette(
        routes=[
            Path_("/v1/chat/completions", openai, methods=["POST"]),
            Path_("/agui", agui, methods=["POST"]),
            Path_("/vercel", vercel, methods=["POST"]),
            Path_("/healthz", health),
        ]
    )


def serve_minimal(port: int) -> None:
    import uvicorn

    uvicorn.run(
        minimal_app(),
        host="127.0.0.1",
        port=port,
        log_level="warning",
        access_log=False,
        proxy_headers=False,
        **STACK_UVICORN,  # type: ignore[arg-type]
    )


# --- the orchestrator ---------------------------------------------------------------------------

METRICS = ("runs_per_s", "cpu_ms_per_run", "ttfb_p50", "ttfb_p99", "ttlb_p50", "ttlb_p99")


@dataclass
class Cell(Case):
    route: str
    clients: int


@dataclass
class Config:
    rounds: int = 3
    seconds: float = 4.0
    clients: tuple[int, ...] = (1, 10, 50)
    routes: tuple[str, ...] = tuple(ROUTES)
    deltas: int = 30
    round_timeout_s: float = 120.0


def measure(config: Config, cells: list[Cell]) -> None:
    ports = {side: free_port() for side in SIDES}
    servers = [
        (
            serve_argv(ports["loopgate"], "--loop", "benchmarks.gateway_overhead:deltas_loop"),
            ports["loopgate"],
            "/healthz",
        ),
        (
            [
                sys.executable,
                "-m",
                "benchmarks.gateway_overhead",
                "--serve-minimal",
                str(ports["minimal"]),
            ],
            ports["minimal"],
            "/healthz",
        ),
    ]
    with server_processes(servers, env={DELTAS_ENV: str(config.deltas)}) as procs:
        pids = {side: proc.pid for side, proc in zip(SIDES, procs, strict=True)}
        for name in config.routes:
            route = ROUTES[name]
            for side in SIDES:  # a warm-up round each, unrecorded (imports, caches)
                load_round(route, ports[side], pids[side], 1, 0.5, f"warm-{side}", 60)
            for clients in config.clients:
                cell = Cell(SIDES, name, clients)
                cells.append(cell)
                for n in range(config.rounds):
                    order = SIDES if n % 2 == 0 else SIDES[::-1]
                    for side in order:
                        result = load_round(
                            route,
                            ports[side],
                            pids[side],
                            clients,
                            config.seconds,
                            f"{side}-{name}-{clients}-{n}",
                            config.round_timeout_s,
                        )
                        if "failed" in result or result.get("errors"):
                            cell.failures[side].append(
                                result.get("failed") or str(result.get("first_error"))
                            )
                        if "failed" not in result:
                            cell.rounds[side].append(result)
                        say(
                            f"  {name:6} {clients:>3} clients  {side:8} round {n + 1}: "
                            + fmt_round(result)
                        )


def fmt_round(result: dict[str, Any]) -> str:
    if "failed" in result:
        return f"FAILED ({result['failed']})"
    return (
        f"{result['runs_per_s']:,.0f} runs/s, {result['cpu_ms_per_run'] or 0:.3f} ms CPU/run, "
        f"TTFB p99 {result['ttfb_p99'] or 0:.2f} ms, TTLB p99 {result['ttlb_p99'] or 0:.2f} ms"
        + (f", {result['errors']} errors" if result.get("errors") else "")
    )


def report(cells: list[Cell]) -> list[str]:
    """Print the tables; return the targets missed."""
    missed: list[str] = []
    for name in dict.fromkeys(c.route for c in cells):
        rows = []
        for cell in (c for c in cells if c.route == name):
            for metric, spec in (
                ("runs_per_s", ",.0f"),
                ("cpu_ms_per_run", ".3f"),
                ("ttfb_p50", ".2f"),
                ("ttfb_p99", ".2f"),
                ("ttlb_p99", ".2f"),
            ):
                ratio = cell.ratio(metric)
                rows.append(
                    (
                        cell.clients,
                        metric,
                        fmt_range(cell.values("loopgate", metric), spec),
                        fmt_range(cell.values("minimal", metric), spec),
                        f"{ratio:.2f}×" if ratio is not None else "—",
                    )
                )
            cpu, rate = cell.ratio("cpu_ms_per_run"), cell.ratio("runs_per_s")
            if cpu is not None and cpu > 1.05:
                missed.append(f"{name} at {cell.clients}: CPU/run {cpu:.2f}× (target ≤ 1.05×)")
            if rate is not None and rate < 0.95:
                missed.append(f"{name} at {cell.clients}: runs/s {rate:.2f}× (target ≥ 0.95×)")
            for side in SIDES:
                if cell.failures[side]:
                    missed.append(f"{name} at {cell.clients}, {side}: {cell.failures[side][0]}")
        table(
            f"{name}: loopgate vs the minimal endpoint (median [min … max] over rounds; ms)",
            ("clients", "metric", "loopgate", "minimal", "ratio"),
            rows,
        )
    say("targets: " + ("all met" if not missed else "; ".join(missed)))
    return missed


def run(config: Config) -> tuple[list[Cell], list[str]]:
    say(
        f"python {sys.version.split()[0]}; uvicorn stack {STACK}; {config.deltas} deltas a run; "
        f"{config.rounds} rounds × {config.seconds:g} s per side and case"
    )
    cells: list[Cell] = []
    try:
        measure(config, cells)
    finally:
        missed = report(cells)
    return cells, missed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a short run (smoke test)")
    parser.add_argument("--rounds", type=int, help="rounds per side and case (default 3)")
    parser.add_argument("--seconds", type=float, help="seconds per round (default 4)")
    parser.add_argument("--clients", type=int, nargs="+", help="concurrent clients (1 10 50)")
    parser.add_argument("--deltas", type=int, help="content deltas per run (default 30)")
    parser.add_argument("--routes", nargs="+", choices=sorted(ROUTES), help="default: all")
    parser.add_argument("--serve-minimal", type=int, help=argparse.SUPPRESS)  # internal
    args = parser.parse_args(argv)
    if args.serve_minimal:
        serve_minimal(args.serve_minimal)
        return 0
    config = Config(rounds=1, seconds=1.0, clients=(1, 4)) if args.quick else Config()
    if args.rounds:
        config.rounds = args.rounds
    if args.seconds:
        config.seconds = args.seconds
    if args.clients:
        config.clients = tuple(args.clients)
    if args.deltas:
        config.deltas = args.deltas
    if args.routes:
        config.routes = tuple(args.routes)
    run(config)
    return 0


if __name__ == "__main__":
    sys.exit(main())
