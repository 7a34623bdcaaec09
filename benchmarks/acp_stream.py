"""ACP session/update messages per second and added latency, to a real SDK client over stdio.

    .venv/bin/python benchmarks/acp_stream.py [--events 20000] [--paced 400] [--interval-ms 2]

The client is the official Python SDK (``acp.spawn_agent_process``, which validates every
update into its pydantic models) in this process; each agent is a child process on its stdio.
Three agents side by side, in one run, over the same recorded envelopes (every conformance
stream, concatenated and repeated):

  loopgate   ``loopgate acp``'s code path: the hub publishes the envelopes (a bench source in
             place of the loop), AcpAgent follows the run, AcpProjector → session/update →
             the SDK's Connection → loopgate's NDJSON transport
  sdk        the official agent path: ``acp.run_agent`` + ``AgentSideConnection.session_update``
             with schema models, sending the already-projected updates (no hub, no projector)
  floor      pre-encoded JSON lines written straight to stdout (what the pipe and the client
             cost on their own)

Throughput: a ``flood`` prompt (every envelope as fast as possible); updates/s counted at the
client from the prompt request to its answer. Latency: a ``paced`` prompt (one text update
every --interval-ms, carrying the time it was produced); latency = client receipt - production,
so loopgate's number includes the hub, the subscription wake-up, projection and encoding.
Added latency = loopgate's median - floor's median.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import acp  # noqa: E402
import anyio  # noqa: E402
import anyio.lowlevel  # noqa: E402

from conformance.runner import load_stream, stream_paths  # noqa: E402
from loopgate.adapters.acp.projector import AcpProjector, SessionUpdate  # noqa: E402
from loopgate.contracts.contract import is_terminal_completion  # noqa: E402
from loopgate.contracts.projector import ProjectorContext  # noqa: E402

SESSION = "sess_bench"
SCRIPT = str(Path(__file__).resolve())


def flood_events(count: int) -> list[tuple[str, dict[str, Any]]]:
    """Every recorded event but terminals and gateway events, repeated up to ``count``."""
    base = [
        (e.kind, e.data)
        for path in stream_paths()
        for e in load_stream(path)
        if not is_terminal_completion(e.kind, e.data) and e.kind not in ("completion",)
    ]
    return [base[i % len(base)] for i in range(count)]


def projected(events: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    from loopgate.contracts.envelope import Envelope

    p = AcpProjector(ProjectorContext(run_id="bench", thread_id=SESSION))
    out: list[dict[str, Any]] = []
    for seq, (kind, data) in enumerate(events, 1):
        out.extend(
            i.params
            for i in p.feed(Envelope("bench", seq, 0, kind, data))
            if isinstance(i, SessionUpdate)
        )
    return out


def parse_prompt(text: str) -> tuple[str, int, float]:
    mode, count, interval = [*text.split(), "0", "0"][:3]
    return mode, int(count), float(interval) / 1000


# --- the agents (child processes) ------------------------------------------------------------


def agent_loopgate(events: int) -> None:
    from loopgate.contracts.projector import StdioOptions
    from loopgate.gateway.app import endpoint_limits
    from loopgate.gateway.commands.stdio import reserve_stdout, stdio_streams
    from loopgate.gateway.hub import Hub
    from loopgate.gateway.journal import open_journal
    from loopgate.gateway.registry import stdio_adapter
    from loopgate.gateway.settings import Settings

    class Producer:
        def __init__(self, hub: Any, run: Any, text: str) -> None:
            self.hub, self.run_, self.text = hub, run, text
            self.scope = anyio.CancelScope()

        async def run(self) -> None:
            mode, count, interval = parse_prompt(self.text)
            with self.scope:
                if mode == "flood":
                    for n, (kind, data) in enumerate(flood_events(count), 1):
                        self.hub.publish(self.run_, kind, data)
                        if not n % 64:
                            await anyio.lowlevel.checkpoint()  # as a live producer yields
                else:
                    for _ in range(count):
                        await anyio.sleep(interval)
                        self.hub.publish(
                            self.run_, "content_delta", {"delta": f"{time.time_ns()} "}
                        )
            self.hub.publish(self.run_, "completion", {"status": "completed", "reason": "stop"})

        def cancel(self) -> None:
            self.scope.cancel()

        def steer(self, content: str) -> str | None:
            return "no"

        def respond(self, request_id: str, decision: str) -> str | None:
            return "no"

    class BenchSource:
        def prepare(self, request: Any) -> str:
            return request.input[-1].content

        def producer(self, hub: Any, run: Any, prepared: str) -> Producer:
            return Producer(hub, run, prepared)

    settings = Settings(max_events_per_run=10_000_000, subscriber_max_lag=10_000_000)

    async def main(protocol_fd: int) -> None:
        read, write = await stdio_streams(protocol_fd, settings.max_line_bytes + 1)
        options = StdioOptions(limits=endpoint_limits(settings))
        async with Hub(settings, open_journal("memory"), {"loop": BenchSource()}) as hub:
            await stdio_adapter("acp").serve_stdio(hub, options, read, write)

    anyio.run(main, reserve_stdout())


def agent_sdk(events: int) -> None:
    from acp import schema

    ready = projected(flood_events(events))  # the projection is not the SDK's cost

    models = {
        "agent_message_chunk": schema.AgentMessageChunk,
        "agent_thought_chunk": schema.AgentThoughtChunk,
        "tool_call": schema.ToolCallStart,
        "tool_call_update": schema.ToolCallProgress,
    }

    class Agent:
        conn: Any = None

        def on_connect(self, conn: Any) -> None:
            self.conn = conn

        async def initialize(self, protocol_version: int, **kw: Any) -> Any:
            return schema.InitializeResponse(protocol_version=protocol_version)

        async def new_session(self, cwd: str, mcp_servers: Any = None, **kw: Any) -> Any:
            return schema.NewSessionResponse(session_id=SESSION)

        async def prompt(self, prompt: Any, session_id: str, **kw: Any) -> Any:
            mode, count, interval = parse_prompt(prompt[0].text)
            if mode == "flood":
                for params in ready if count == events else projected(flood_events(count)):
                    update = params["update"]
                    model = models[update["sessionUpdate"]].model_validate(update)
                    await self.conn.session_update(session_id=session_id, update=model)
            else:
                for _ in range(count):
                    await asyncio.sleep(interval)
                    await self.conn.session_update(
                        session_id=session_id,
                        update=acp.update_agent_message_text(f"{time.time_ns()} "),
                    )
            return schema.PromptResponse(stop_reason="end_turn")

    asyncio.run(acp.run_agent(Agent()))


def encoded(count: int) -> list[bytes]:
    return [
        json.dumps({"jsonrpc": "2.0", "method": "session/update", "params": p}).encode() + b"\n"
        for p in projected(flood_events(count))
    ]


def agent_floor(events: int) -> None:
    out = sys.stdout.buffer
    ready = encoded(events)

    def send(message: dict[str, Any]) -> None:
        out.write(json.dumps(message, separators=(",", ":")).encode() + b"\n")
        out.flush()

    for raw in sys.stdin.buffer:
        message = json.loads(raw)
        method, rid = message.get("method"), message.get("id")
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": rid, "result": {"protocolVersion": 1}})
        elif method == "session/new":
            send({"jsonrpc": "2.0", "id": rid, "result": {"sessionId": SESSION}})
        elif method == "session/prompt":
            mode, count, interval = parse_prompt(message["params"]["prompt"][0]["text"])
            if mode == "flood":
                for line in ready if count == events else encoded(count):
                    out.write(line)
                out.flush()
            else:
                for _ in range(count):
                    time.sleep(interval)
                    update = {
                        "sessionUpdate": "agent_message_chunk",
                        "content": {"type": "text", "text": f"{time.time_ns()} "},
                    }
                    send(
                        {
                            "jsonrpc": "2.0",
                            "method": "session/update",
                            "params": {"sessionId": SESSION, "update": update},
                        }
                    )
            send({"jsonrpc": "2.0", "id": rid, "result": {"stopReason": "end_turn"}})


AGENTS = {"loopgate": agent_loopgate, "sdk": agent_sdk, "floor": agent_floor}


# --- the client (this process) ----------------------------------------------------------------


class Counter:
    def __init__(self) -> None:
        self.count = 0
        self.latencies_ns: list[int] = []
        self.paced = False

    async def session_update(self, session_id: str, update: Any, **kw: Any) -> None:
        self.count += 1
        if self.paced and update.session_update == "agent_message_chunk":
            self.latencies_ns.append(time.time_ns() - int(update.content.text.split()[0]))

    async def request_permission(self, *args: Any, **kw: Any) -> Any:
        return {"outcome": {"outcome": "cancelled"}}


async def measure(agent: str, events: int, paced: int, interval_ms: float) -> dict[str, Any]:
    client = Counter()
    env = {"PYTHONPATH": str(ROOT)}
    async with acp.spawn_agent_process(
        client,
        sys.executable,
        SCRIPT,
        "--agent",
        agent,
        "--events",
        str(events),
        env=env,
        cwd=ROOT,
        transport_kwargs={"stderr": subprocess.DEVNULL, "limit": 64 << 20},
    ) as (conn, _proc):
        await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        session = (await conn.new_session(cwd=str(ROOT), mcp_servers=[])).session_id
        await conn.prompt(session_id=session, prompt=[acp.text_block("flood 500")])  # warm-up
        client.count = 0
        t0 = time.perf_counter()
        await conn.prompt(session_id=session, prompt=[acp.text_block(f"flood {events}")])
        elapsed = time.perf_counter() - t0
        updates = client.count
        client.paced = True
        await conn.prompt(
            session_id=session, prompt=[acp.text_block(f"paced {paced} {interval_ms}")]
        )
    lat = sorted(client.latencies_ns)
    return {
        "updates": updates,
        "seconds": elapsed,
        "per_s": updates / elapsed,
        "p50_us": statistics.median(lat) / 1000,
        "p99_us": lat[int(len(lat) * 0.99) - 1] / 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=20000, help="envelopes in the flood")
    parser.add_argument("--paced", type=int, default=400, help="updates in the latency run")
    parser.add_argument("--interval-ms", type=float, default=2.0)
    parser.add_argument("--agent", choices=sorted(AGENTS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.agent:
        AGENTS[args.agent](args.events)
        return
    os.environ.setdefault("PYTHONHASHSEED", "0")
    results = {
        name: anyio.run(measure, name, args.events, args.paced, args.interval_ms)
        for name in ("floor", "sdk", "loopgate")
    }
    print(f"{'agent':<10} {'updates':>8} {'updates/s':>11} {'p50 µs':>9} {'p99 µs':>9}")
    for name, r in results.items():
        print(
            f"{name:<10} {r['updates']:>8} {r['per_s']:>11,.0f} {r['p50_us']:>9.0f} "
            f"{r['p99_us']:>9.0f}"
        )
    lg, sdk, floor = results["loopgate"], results["sdk"], results["floor"]
    print(
        f"\nthroughput: loopgate/floor = {lg['per_s'] / floor['per_s']:.2f}, "
        f"loopgate/sdk = {lg['per_s'] / sdk['per_s']:.2f}"
    )
    print(
        f"added latency per update (p50): loopgate - floor = "
        f"{lg['p50_us'] - floor['p50_us']:.0f} µs; sdk - floor = "
        f"{sdk['p50_us'] - floor['p50_us']:.0f} µs"
    )


if __name__ == "__main__":
    main()
