"""Reference-loop overhead per LoopEvent, and the cost of wrapping events in envelopes.

    .venv/bin/python -m benchmarks.loop_overhead [--turns 300] [--repeat 7]

(1) loop      CoreLoop + ScriptedProvider(delay_s=0) + DemoTools into a no-op sink: events/s and
              µs per event, for the default run (2 rounds, 2 parallel tools) and a long plain
              answer (deltas only). "provider" is the scripted model alone (planning + chunk
              iteration, no loop), so "loop only" = loop − provider is what the CoreLoop adds.
(2) envelope  per event: Envelope(...) + encode_envelope, against bare msgspec.json.encode of
              the same envelope-shaped dict, and of the bare data dict.

Target: loop overhead < 20 µs/event. Every case is measured in each of ``--repeat`` rounds,
interleaved (the order rotates each round); each figure is the median and the range over rounds —
never the best one, whose order flips under load. "loop only" is paired within a round.
"""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import anyio  # noqa: E402
import msgspec  # noqa: E402

from benchmarks._common import fmt_range, median_range, table  # noqa: E402
from loopgate.contracts.envelope import Envelope, encode_envelope  # noqa: E402
from loopgate.contracts.messages import Message  # noqa: E402
from loopgate.gateway.reference.core import CoreLoop  # noqa: E402
from loopgate.gateway.reference.scripted import ScriptedProvider  # noqa: E402
from loopgate.gateway.reference.tools import DemoTools  # noqa: E402
from loopgate.gateway.reference.types import ModelRequest  # noqa: E402

PROMPTS = {
    "default (2 rounds, 2 tools)": "What time is it, and what is 12 times 34?",
    "plain (deltas only)": "plain: " + " ".join(f"word{i}" for i in range(40)),
}
TARGET_US = 20.0


async def _noop(kind: str, data: dict[str, Any]) -> None:
    return None


def bench_loop(prompt: str, turns: int, workspace: Path) -> tuple[int, float]:
    """(events per turn, seconds for ``turns`` turns)."""
    loop = CoreLoop(ScriptedProvider(delay_s=0), DemoTools(workspace))
    history = [Message(role="user", content=prompt)]
    count = 0

    async def counting(kind: str, data: dict[str, Any]) -> None:
        nonlocal count
        count += 1

    async def run() -> float:
        await loop.run_turn(history, counting)  # warm-up, and counts the events of one turn
        start = time.perf_counter()
        for _ in range(turns):
            await loop.run_turn(history, _noop)
        return time.perf_counter() - start

    elapsed = anyio.run(run)
    return count, elapsed


def bench_provider(prompt: str, turns: int, workspace: Path) -> float:
    """Seconds the scripted model alone needs for the same requests the loop makes."""
    requests: list[ModelRequest] = []

    class Capture(ScriptedProvider):
        def stream(self, request: ModelRequest) -> Any:
            requests.append(ModelRequest(messages=list(request.messages), tools=request.tools))
            return super().stream(request)

    loop = CoreLoop(Capture(delay_s=0), DemoTools(workspace))
    provider = ScriptedProvider(delay_s=0)

    async def run() -> float:
        await loop.run_turn([Message(role="user", content=prompt)], _noop)
        start = time.perf_counter()
        for _ in range(turns):
            for request in requests:
                async for _chunk in provider.stream(request):
                    pass
        return time.perf_counter() - start

    return anyio.run(run)


def collect_events(prompt: str, workspace: Path) -> list[tuple[str, dict[str, Any]]]:
    events: list[tuple[str, dict[str, Any]]] = []

    async def sink(kind: str, data: dict[str, Any]) -> None:
        events.append((kind, data))

    loop = CoreLoop(ScriptedProvider(delay_s=0), DemoTools(workspace))
    anyio.run(loop.run_turn, [Message(role="user", content=prompt)], sink)
    return events


def timed_ns(fn: Callable[[], None], events: int) -> float:
    gc.collect()
    start = time.perf_counter_ns()
    fn()
    return (time.perf_counter_ns() - start) / events


def rotated(items: list[Any], n: int) -> list[Any]:
    """``items`` starting at ``n``: each round puts a different one first."""
    k = n % len(items)
    return items[k:] + items[:k]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=300, help="turns per measurement")
    parser.add_argument("--repeat", type=int, default=7, help="interleaved rounds")
    args = parser.parse_args(argv)
    report(args.turns, args.repeat)
    return 0


def report(turns: int, repeat: int) -> dict[str, Any]:
    """Measure and print; what was measured, for the smoke test."""
    print(
        f"python {sys.version.split()[0]}, anyio backend asyncio, {repeat} interleaved "
        "rounds: median (lowest … highest)",
        flush=True,
    )
    loop_us: dict[str, list[float]] = {label: [] for label in PROMPTS}
    provider_us: dict[str, list[float]] = {label: [] for label in PROMPTS}
    only_us: dict[str, list[float]] = {label: [] for label in PROMPTS}
    counts: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp)
        for n in range(repeat):
            # Every round measures every case, in a rotated order and with the loop and the
            # provider alone swapping places, so drift in the machine's load falls on all.
            for label in rotated(list(PROMPTS), n):
                prompt = PROMPTS[label]
                if n % 2:
                    provider_s = bench_provider(prompt, turns, workspace)
                    count, loop_s = bench_loop(prompt, turns, workspace)
                else:
                    count, loop_s = bench_loop(prompt, turns, workspace)
                    provider_s = bench_provider(prompt, turns, workspace)
                counts[label] = count
                total = count * turns
                loop_us[label].append(loop_s / total * 1e6)
                provider_us[label].append(provider_s / total * 1e6)
                # Paired within the round: both halves saw the same load.
                only_us[label].append((loop_s - provider_s) / total * 1e6)
            print(f"  round {n + 1}/{repeat} done", flush=True)
        events = collect_events(PROMPTS["default (2 rounds, 2 tools)"], workspace)

    rows = []
    for label in PROMPTS:
        rows.append(
            (
                label,
                counts[label],
                f"{1e6 / median_range(loop_us[label])[0]:,.0f}",
                fmt_range(loop_us[label], ".2f"),
                fmt_range(provider_us[label], ".2f"),
                fmt_range(only_us[label], ".2f"),
            )
        )
    table(
        "(1) reference loop, µs per event",
        ("turn", "events/turn", "events/s", "µs/event", "provider", "loop only"),
        rows,
    )

    n = len(events)
    reps = max(1, 20_000 // n)
    now = time.time_ns()
    encode = msgspec.json.encode

    def envelope() -> None:
        for _ in range(reps):
            for seq, (kind, data) in enumerate(events, 1):
                encode_envelope(Envelope("run-bench", seq, now, kind, data))

    def bare_envelope_dict() -> None:
        for _ in range(reps):
            for seq, (kind, data) in enumerate(events, 1):
                encode({"run_id": "run-bench", "seq": seq, "ts": now, "kind": kind, "data": data})

    def bare_data() -> None:
        for _ in range(reps):
            for _kind, data in events:
                encode(data)

    paths: dict[str, Callable[[], None]] = {
        "Envelope + encode_envelope": envelope,
        "msgspec.json.encode(envelope-shaped dict)": bare_envelope_dict,
        "msgspec.json.encode(data dict only)": bare_data,
    }
    ns: dict[str, list[float]] = {name: [] for name in paths}
    ratio: dict[str, list[float]] = {name: [] for name in paths}
    for r in range(repeat):
        got = {name: timed_ns(paths[name], n * reps) for name in rotated(list(paths), r)}
        for name, value in got.items():
            ns[name].append(value)
            ratio[name].append(value / got["Envelope + encode_envelope"])
    table(
        f"(2) encoding, ns per event ({n} events of the default run)",
        ("path", "ns/event", "ratio to Envelope (per round)"),
        [(name, fmt_range(ns[name], ".0f"), fmt_range(ratio[name], ".2f")) for name in paths],
    )

    worst = max(median_range(v)[0] for v in only_us.values())
    verdict = "OK" if worst < TARGET_US else "OVER TARGET"
    print(
        f"\nloop overhead (median of the worst case, loop only): {worst:.2f} µs/event — "
        f"target < {TARGET_US:.0f} µs: {verdict}",
        flush=True,
    )
    return {"loop_us": loop_us, "only_us": only_us, "ns": ns, "counts": counts, "worst": worst}


if __name__ == "__main__":
    sys.exit(main())
