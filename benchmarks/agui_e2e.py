"""AG-UI end to end: loopgate's ``POST /agui`` against pydantic-ai's AG-UI adapter.

    .venv/bin/python -m benchmarks.agui_e2e [--quick] [--rounds 3] [--seconds 4]
                                            [--clients 1 10 50] [--pacing 0 0.002]

Both sides run the same agent turn — the scripted model's default turn for ``PROMPT``: reasoning,
a little text, two parallel tool calls (clock, calculate), then a second round of reasoning and
the answer — and stream it as AG-UI events over SSE:

  loopgate   ``loopgate serve`` (the real gateway app, the embedded scripted model,
             ``--scripted-delay`` for pacing), in its own process
  pydantic   pydantic-ai's ``AGUIAdapter.dispatch_request`` on a Starlette route, an ``Agent``
             whose ``FunctionModel`` streams exactly the chunks loopgate's scripted model streams
             for the same prompt (captured from a loopgate turn before the servers start:
             reasoning and text deltas, tool-call argument fragments), with the same seven
             demo tools offered and clock and calculate doing the same work; it sleeps the same
             delay before each chunk as the scripted model does. Its own process.

Both under uvicorn on 127.0.0.1 with the same settings: no access log, h11 on asyncio's event
loop (loopgate's stack). The
load comes from a separate client process (raw asyncio sockets, keep-alive, HTTP/1.1 chunked
decoding; it parses the SSE only enough to time the first and last event and count frames):
N clients each send a run, read its stream to the end, and send the next.

Per round: runs/s and server CPU per run over a window after a warm-up (runs that complete in
the window; CPU of the server process and everything under it, from /proc, never the
client's), TTFB (request sent → first SSE event) and TTLB (→ the terminal event) p50/p99 over
those runs. Rounds are interleaved A,B then B,A, … so drift in the machine's load hits both;
each cell reports the median and range over rounds, and every round is printed as it ends. A
round that hangs is killed at a timeout and recorded as failed; the rest goes on.

Targets (issue #15), as ratios of loopgate to pydantic-ai in the same run: zero delay ≥ 10×
runs/s and ≤ 0.1× CPU per run; 2 ms-paced ≥ 8× runs/s; TTFB and TTLB p99 ≤ 0.5× at 10 and 50
clients. With pacing, a run lasts at least chunks × delay on either side, so runs/s can never
exceed clients / that; the "ceiling" column says where that bound, not the server, decides.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# Only the standard library and benchmarks._common at module level: the anchor server and the
# client process import this module too, and must not carry loopgate's import cost or state.
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

PROMPT = "What time is it, and what is 25 * 16 + 2?"
SIDES = ("loopgate", "pydantic-ai")


# --- the model stream both sides play ----------------------------------------------------------


def scripted_rounds(prompt: str = PROMPT) -> list[list[dict[str, Any]]]:
    """The chunks loopgate's scripted model streams for ``prompt``, round by round, as JSON.

    Captured from a real CoreLoop turn with the demo tools, as the gateway runs it. Finish and
    usage chunks become ``pause``: they carry no delta but the scripted model sleeps before them
    too, so the anchor sleeps as often.
    """
    import anyio

    from loopgate.contracts.messages import Message
    from loopgate.gateway.reference.core import CoreLoop
    from loopgate.gateway.reference.scripted import ScriptedProvider
    from loopgate.gateway.reference.tools import DemoTools
    from loopgate.gateway.reference.types import (
        ModelChunk,
        ReasoningChunk,
        TextChunk,
        ToolCallChunk,
    )

    rounds: list[list[ModelChunk]] = []

    class Capture(ScriptedProvider):
        def stream(self, request: Any) -> AsyncIterator[ModelChunk]:
            return self._capture(super().stream(request))

        async def _capture(self, source: AsyncIterator[ModelChunk]) -> AsyncIterator[ModelChunk]:
            got: list[ModelChunk] = []
            rounds.append(got)
            async for chunk in source:
                got.append(chunk)
                yield chunk

    events: list[tuple[str, dict[str, Any]]] = []

    async def sink(kind: str, data: dict[str, Any]) -> None:
        events.append((kind, data))

    with tempfile.TemporaryDirectory() as tmp:
        loop = CoreLoop(Capture(delay_s=0), DemoTools(Path(tmp)))
        anyio.run(loop.run_turn, [Message(role="user", content=prompt)], sink)
    # The chunks are what the run's events say the model streamed, delta for delta.
    for kind, chunk_type in (("content_delta", TextChunk), ("reasoning_delta", ReasoningChunk)):
        streamed = [c.delta for r in rounds for c in r if isinstance(c, chunk_type)]
        assert streamed == [d["delta"] for k, d in events if k == kind], kind

    out: list[list[dict[str, Any]]] = []
    for chunks in rounds:
        script: list[dict[str, Any]] = []
        for c in chunks:
            if isinstance(c, TextChunk):
                script.append({"text": c.delta})
            elif isinstance(c, ReasoningChunk):
                script.append({"reasoning": c.delta})
            elif isinstance(c, ToolCallChunk):
                script.append({"tool": [c.index, c.id, c.name, c.arguments]})
            else:
                script.append({"pause": type(c).__name__})
        out.append(script)
    return out


# --- the anchor: pydantic-ai's AG-UI adapter -----------------------------------------------------


def anchor_app(script: list[list[dict[str, Any]]], delay_s: float) -> Any:
    """A Starlette app serving pydantic-ai's AG-UI adapter on ``POST /agui``."""
    import datetime as dt

    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse
    from pydantic_ai.models.function import (
        AgentInfo,
        DeltaThinkingPart,
        DeltaToolCall,
        FunctionModel,
    )
    from pydantic_ai.ui.ag_ui import AGUIAdapter
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import PlainTextResponse, Response
    from starlette.routing import Route

    from loopgate.gateway.reference.tools import (
        calculate as evaluate,  # the same arithmetic as loopgate's
    )

    # Thinking and tool calls are parts keyed by a vendor id; keep thinking's apart from the
    # tool calls' indexes (0, 1, …) so one never continues the other.
    thinking_part = 1_000

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        round_ = sum(isinstance(m, ModelResponse) for m in messages)
        for chunk in script[min(round_, len(script) - 1)]:
            if delay_s:
                await asyncio.sleep(delay_s)
            if "text" in chunk:
                yield chunk["text"]
            elif "reasoning" in chunk:
                yield {thinking_part: DeltaThinkingPart(content=chunk["reasoning"])}
            elif "tool" in chunk:
                index, call_id, name, arguments = chunk["tool"]
                yield {index: DeltaToolCall(name=name, json_args=arguments, tool_call_id=call_id)}

    agent: Agent[None, str] = Agent(FunctionModel(stream_function=stream, model_name="scripted"))

    # The demo tools loopgate offers its model, with the same docstrings; clock and calculate do
    # the same work, the others are never called.
    @agent.tool_plain
    async def clock() -> str:
        """The current date and time in UTC (ISO 8601)."""
        return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat()

    @agent.tool_plain
    async def calculate(expression: str) -> str:
        """Evaluate an arithmetic expression (+ - * / // % ** and parens)."""
        value = evaluate(expression)
        return repr(value) if isinstance(value, float) else str(value)

    @agent.tool_plain
    async def read_file(path: str) -> str:
        """Read a UTF-8 text file inside the workspace (relative path)."""
        raise NotImplementedError

    @agent.tool_plain
    async def sleep(seconds: float) -> str:
        """Wait for a number of seconds (at most 60)."""
        raise NotImplementedError

    @agent.tool_plain
    async def ask_user(question: str) -> str:
        """Ask the user a question; the turn pauses until they answer."""
        raise NotImplementedError

    @agent.tool_plain
    async def write_note(name: str, text: str) -> str:
        """Write a markdown note to notes/<name>.md in the workspace."""
        raise NotImplementedError

    @agent.tool_plain
    async def lorem(size: int) -> str:
        """Generate deterministic filler text of a given size in characters."""
        raise NotImplementedError

    async def agui(request: Request) -> Response:
        return await AGUIAdapter.dispatch_request(request, agent=agent)

    async def health(request: Request) -> Response:
        return PlainTextResponse("ok")

    return Starlette(routes=[Route("/agui", agui, methods=["POST"]), Route("/healthz", health)])


def serve_anchor(port: int, script_path: str, delay_s: float) -> None:
    import uvicorn

    script = json.loads(Path(script_path).read_text())
    # As loopgate's server: the same uvicorn parser and event loop, no access log
    # (loopgate's --log-level warning silences it), no proxy headers.
    uvicorn.run(
        anchor_app(script, delay_s),
        host="127.0.0.1",
        port=port,
        log_level="warning",
        access_log=False,
        proxy_headers=False,
        **STACK_UVICORN,  # type: ignore[arg-type]
    )


# --- the client process ------------------------------------------------------------------------


def run_body(run_id: str) -> bytes:
    return AGUI_BODY.replace("RUN_ID", run_id).encode()


AGUI_BODY = json.dumps(
    {
        "threadId": "thread-RUN_ID",
        "runId": "RUN_ID",
        "protocolVersion": "1.0",
        "messages": [{"id": "m1", "role": "user", "content": PROMPT}],
        "tools": [],
        "context": [],
        "state": {},
        "forwardedProps": {},
    }
)
AGUI_ROUTE = Route("/agui", AGUI_BODY, '"RUN_FINISHED"')


# --- the orchestrator --------------------------------------------------------------------------

METRICS = ("runs_per_s", "cpu_ms_per_run", "ttfb_p50", "ttfb_p99", "ttlb_p50", "ttlb_p99")


@dataclass
class Cell(Case):
    """One (pacing, clients) case: every round's result per side, and failures."""

    pacing: float
    clients: int


@dataclass
class Config:
    rounds: int = 3
    seconds: float = 4.0
    clients: tuple[int, ...] = (1, 10, 50)
    pacings: tuple[float, ...] = (0.0, 0.002)
    round_timeout_s: float = 120.0
    min_runs: int = 20  # finished runs a window must hold (and two per client) to close
    warm_up: bool = True  # an unrecorded round per server before the first recorded one


def sample_frames(port: int) -> dict[str, int]:
    """One run's AG-UI frames by type: the sanity check that both sides stream the same turn."""
    import httpx

    with httpx.stream(
        "POST",
        f"http://127.0.0.1:{port}/agui",
        content=run_body(f"sample-{time.time_ns()}"),
        headers={"content-type": "application/json", "accept": "text/event-stream"},
        timeout=30,
    ) as response:
        text = response.read().decode()
    counts: dict[str, int] = {}
    for frame in text.split("\n\n"):
        for line in frame.splitlines():
            if line.startswith("data:"):
                kind = json.loads(line[5:])["type"]
                counts[kind] = counts.get(kind, 0) + 1
    return counts


def fmt(value: float | None, spec: str) -> str:
    return "—" if value is None else f"{value:{spec}}"


def print_round(cell: Cell, side: str, n: int, result: dict[str, Any]) -> None:
    head = f"  {cell.pacing * 1e3:g} ms, {cell.clients:>2} clients, round {n}, {side:<11}"
    if "failed" in result:
        say(f"{head} FAILED: {result['failed']}")
        return
    say(
        f"{head} {result['runs_per_s']:>8,.1f} runs/s  "
        f"cpu {fmt(result['cpu_ms_per_run'], '.2f')} ms/run  "
        f"ttfb p50/p99 {fmt(result['ttfb_p50'], '.1f')}/{fmt(result['ttfb_p99'], '.1f')} ms  "
        f"ttlb p50/p99 {fmt(result['ttlb_p50'], '.1f')}/{fmt(result['ttlb_p99'], '.1f')} ms  "
        f"({result['runs']:.0f} runs, {result['finished']} finished, {result['frames']} "
        f"frames/run, {result['window_s']:.1f} s, server "
        f"{result['server_cpu_pct']:.0f} % cpu, client {result['client_cpu_pct']:.0f} %"
        + (f", {result['errors']} errors: {result['first_error']}" if result["errors"] else "")
        + ")"
    )


def measure(config: Config, cells: list[Cell], chunks: int) -> None:
    """Run every case, appending to ``cells`` as results come: an interrupt keeps them."""
    script_file = Path(tempfile.mkstemp(prefix="loopgate-agui-script-", suffix=".json")[1])
    script_file.write_text(json.dumps(scripted_rounds()))
    try:
        for pacing in config.pacings:
            measure_pacing(config, cells, pacing, script_file, chunks)
    finally:
        script_file.unlink(missing_ok=True)


def measure_pacing(
    config: Config, cells: list[Cell], pacing: float, script: Path, chunks: int
) -> None:
    ports = {side: free_port() for side in SIDES}
    argv = {
        "loopgate": serve_argv(ports["loopgate"], "--scripted-delay", str(pacing)),
        "pydantic-ai": [
            sys.executable,
            "-m",
            "benchmarks.agui_e2e",
            "--serve-anchor",
            str(ports["pydantic-ai"]),
            str(script),
            str(pacing),
        ],
    }
    servers = [(argv[side], ports[side], "/healthz") for side in SIDES]
    with server_processes(servers) as procs:
        pids = {side: proc.pid for side, proc in zip(SIDES, procs, strict=True)}
        say(f"\npacing {pacing * 1e3:g} ms per chunk; servers up: {pids}")
        for side in SIDES:
            frames = sample_frames(ports[side])
            deltas = {k: v for k, v in frames.items() if k.endswith("_CONTENT")}
            say(f"  {side:<11} one run: {sum(frames.values())} frames, content deltas {deltas}")
        # Warm both (imports, caches, the allocator) before anything is recorded.
        for side in SIDES if config.warm_up else ():
            load_round(
                AGUI_ROUTE,
                ports[side],
                pids[side],
                4,
                min(1.0, config.seconds),
                "warm",
                60,
                config.min_runs,
            )
        for clients in config.clients:
            cell = Cell(SIDES, pacing, clients)
            cells.append(cell)
            for n in range(1, config.rounds + 1):
                # A,B then B,A: whichever side goes second in one round goes first in the next.
                order = SIDES if n % 2 else SIDES[::-1]
                for side in order:
                    result = load_round(
                        AGUI_ROUTE,
                        ports[side],
                        pids[side],
                        clients,
                        config.seconds,
                        f"{side[0]}{pacing}-{clients}-{n}",
                        config.round_timeout_s,
                        config.min_runs,
                    )
                    if "failed" in result:
                        cell.failures[side].append(result["failed"])
                    else:
                        cell.rounds[side].append(result)
                    print_round(cell, side, n, result)
            print_cell(cell, chunks)


def print_cell(cell: Cell, chunks: int) -> None:
    for side in SIDES:
        say(
            f"  = {side:<11} runs/s {fmt_range(cell.values(side, 'runs_per_s'), ',.1f')}, "
            f"cpu ms/run {fmt_range(cell.values(side, 'cpu_ms_per_run'), '.2f')}, "
            f"ttlb p99 {fmt_range(cell.values(side, 'ttlb_p99'), '.1f')} ms"
        )
    ratio = cell.ratio("runs_per_s")
    ceiling = f", pacing ceiling {ceiling_runs(cell, chunks):,.0f} runs/s" if cell.pacing else ""
    say(f"  = loopgate / pydantic-ai runs/s {fmt(ratio, '.2f')}x{ceiling}")


def ceiling_runs(cell: Cell, chunks: int) -> float:
    """Runs/s no server can beat with paced chunks: every client waits chunks × delay per run."""
    return cell.clients / (chunks * cell.pacing)


@dataclass
class Verdict:
    name: str
    value: float | None
    target: str
    met: bool | None


def verdicts(cells: list[Cell]) -> list[Verdict]:
    out: list[Verdict] = []
    for cell in cells:
        where = f"{cell.pacing * 1e3:g} ms, {cell.clients} clients"
        runs = cell.ratio("runs_per_s")
        if cell.pacing == 0:
            cpu = cell.ratio("cpu_ms_per_run")
            out.append(Verdict(f"runs/s ({where})", runs, ">= 10x", _at_least(runs, 10)))
            out.append(Verdict(f"CPU/run ({where})", cpu, "<= 0.1x", _at_most(cpu, 0.1)))
        else:
            out.append(Verdict(f"runs/s ({where})", runs, ">= 8x", _at_least(runs, 8)))
        if cell.clients in (10, 50):
            for metric in ("ttfb_p99", "ttlb_p99"):
                value = cell.ratio(metric)
                out.append(Verdict(f"{metric} ({where})", value, "<= 0.5x", _at_most(value, 0.5)))
    return out


def _at_least(value: float | None, bound: float) -> bool | None:
    return None if value is None else value >= bound


def _at_most(value: float | None, bound: float) -> bool | None:
    return None if value is None else value <= bound


def report(cells: list[Cell], chunks: int) -> list[Verdict]:
    rows = []
    for cell in cells:
        for side in SIDES:
            rounds = cell.rounds[side]
            rows.append(
                (
                    f"{cell.pacing * 1e3:g}",
                    cell.clients,
                    side,
                    f"{len(rounds)}"
                    + (f" ({len(cell.failures[side])} failed)" * bool(cell.failures[side])),
                    fmt_range(cell.values(side, "runs_per_s"), ",.1f"),
                    fmt_range(cell.values(side, "cpu_ms_per_run"), ".2f"),
                    fmt_range(cell.values(side, "ttfb_p50"), ".1f"),
                    fmt_range(cell.values(side, "ttfb_p99"), ".1f"),
                    fmt_range(cell.values(side, "ttlb_p50"), ".1f"),
                    fmt_range(cell.values(side, "ttlb_p99"), ".1f"),
                )
            )
    table(
        "AG-UI end to end, median (range) over rounds; times in ms",
        (
            "pacing ms",
            "clients",
            "server",
            "rounds",
            "runs/s",
            "CPU ms/run",
            "TTFB p50",
            "TTFB p99",
            "TTLB p50",
            "TTLB p99",
        ),
        rows,
    )
    ratio_rows = []
    for cell in cells:
        ratio_rows.append(
            (
                f"{cell.pacing * 1e3:g}",
                cell.clients,
                *(fmt(cell.ratio(m), ".3f") for m in METRICS),
                f"{ceiling_runs(cell, chunks):,.0f}" if cell.pacing else "—",
            )
        )
    table(
        "loopgate / pydantic-ai (ratio of the medians)",
        ("pacing ms", "clients", *METRICS, "pacing ceiling runs/s"),
        ratio_rows,
    )
    found = verdicts(cells)
    table(
        "targets",
        ("measure", "loopgate / pydantic-ai", "target", "verdict"),
        [
            (
                v.name,
                fmt(v.value, ".3f") + "x" * (v.value is not None),
                v.target,
                {True: "met", False: "MISSED", None: "no data"}[v.met],
            )
            for v in found
        ],
    )
    return found


def run(config: Config) -> tuple[list[Cell], list[Verdict]]:
    cells: list[Cell] = []
    script = scripted_rounds()
    chunks = sum(len(r) for r in script)
    say(
        f"python {sys.version.split()[0]}; uvicorn stack {STACK}; {config.rounds} "
        f"rounds × {config.seconds:g} s per "
        f"side and case; prompt {PROMPT!r}: {chunks} model chunks in {len(script)} rounds"
    )
    try:
        measure(config, cells, chunks)
    finally:
        # Whatever ended the run (a server that would not start, Ctrl-C), report what we have.
        found = report(cells, chunks)
    return cells, found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a short run (smoke test)")
    parser.add_argument("--rounds", type=int, help="rounds per side and case (default 3)")
    parser.add_argument("--seconds", type=float, help="seconds per round (default 4)")
    parser.add_argument("--clients", type=int, nargs="+", help="concurrent clients (1 10 50)")
    parser.add_argument("--pacing", type=float, nargs="+", help="seconds per chunk (0 0.002)")
    parser.add_argument("--serve-anchor", nargs="+", help=argparse.SUPPRESS)  # internal
    args = parser.parse_args(argv)
    if args.serve_anchor:
        port, script, delay = args.serve_anchor
        serve_anchor(int(port), script, float(delay))
        return 0
    config = Config(rounds=2, seconds=1.0, clients=(1, 10)) if args.quick else Config()
    if args.rounds:
        config.rounds = args.rounds
    if args.seconds:
        config.seconds = args.seconds
    if args.clients:
        config.clients = tuple(args.clients)
    if args.pacing is not None:
        config.pacings = tuple(args.pacing)
    run(config)
    return 0


if __name__ == "__main__":
    sys.exit(main())
