"""Reference-loop overhead per LoopEvent, and the cost of wrapping events in envelopes.

    .venv/bin/python benchmarks/loop_overhead.py [--turns 300] [--repeat 5]

(1) loop      CoreLoop + ScriptedProvider(delay_s=0) + DemoTools into a no-op sink: events/s and
              µs per event, for the default run (2 rounds, 2 parallel tools) and a long plain
              answer (deltas only). "provider" is the scripted model alone (planning + chunk
              iteration, no loop), so "loop only" = loop − provider is what the CoreLoop adds.
(2) envelope  per event: Envelope(...) + encode_envelope, against bare msgspec.json.encode of
              the same envelope-shaped dict, and of the bare data dict.

Target: loop overhead < 20 µs/event. Best of ``--repeat`` runs is reported.
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

from contracts.envelope import Envelope, encode_envelope  # noqa: E402
from contracts.messages import Message  # noqa: E402
from gateway.loop.core import CoreLoop  # noqa: E402
from gateway.loop.scripted import ScriptedProvider  # noqa: E402
from gateway.loop.tools import DemoTools  # noqa: E402
from gateway.loop.types import ModelRequest  # noqa: E402

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


def per_event_ns(fn: Callable[[], None], events: int, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter_ns()
        fn()
        best = min(best, (time.perf_counter_ns() - start) / events)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    print(f"python {sys.version.split()[0]}, anyio backend asyncio, best of {args.repeat}")
    print()
    header = (
        f"{'(1) reference loop':<30} {'events/turn':>11} {'events/s':>10} "
        f"{'µs/event':>9} {'provider':>9} {'loop only':>10}"
    )
    print(header)
    print("-" * len(header))
    worst_loop_only = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp)
        for label, prompt in PROMPTS.items():
            runs = [bench_loop(prompt, args.turns, workspace) for _ in range(args.repeat)]
            count = runs[0][0]
            elapsed = min(r[1] for r in runs)
            provider_s = min(bench_provider(prompt, args.turns, workspace) for _ in range(3))
            total_events = count * args.turns
            us_event = elapsed / total_events * 1e6
            provider_us = provider_s / total_events * 1e6
            loop_only = us_event - provider_us
            worst_loop_only = max(worst_loop_only, loop_only)
            print(
                f"{label:<30} {count:>11} {total_events / elapsed:>10,.0f} "
                f"{us_event:>9.2f} {provider_us:>9.2f} {loop_only:>10.2f}"
            )
        events = collect_events(PROMPTS["default (2 rounds, 2 tools)"], workspace)

    print()
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

    env_ns = per_event_ns(envelope, n * reps, args.repeat)
    dict_ns = per_event_ns(bare_envelope_dict, n * reps, args.repeat)
    data_ns = per_event_ns(bare_data, n * reps, args.repeat)
    header = f"{'(2) encoding, per event':<42} {'ns/event':>9} {'ratio':>7}"
    print(header)
    print("-" * len(header))
    print(f"{'Envelope + encode_envelope':<42} {env_ns:>9.0f} {1.0:>7.2f}")
    print(
        f"{'msgspec.json.encode(envelope-shaped dict)':<42} {dict_ns:>9.0f} "
        f"{dict_ns / env_ns:>7.2f}"
    )
    print(f"{'msgspec.json.encode(data dict only)':<42} {data_ns:>9.0f} {data_ns / env_ns:>7.2f}")
    print(f"envelope / bare dict = {env_ns / dict_ns:.2f}×  ({n} events of the default run)")
    print()
    verdict = "OK" if worst_loop_only < TARGET_US else "OVER TARGET"
    print(
        f"loop overhead (worst, loop only): {worst_loop_only:.2f} µs/event — target "
        f"< {TARGET_US:.0f} µs: {verdict}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
