"""AG-UI frames per second: loopgate's projector + encoder against the official Python path.

    .venv/bin/python -m benchmarks.agui_encode [--seconds 3] [--rounds 9] [--streams a.jsonl …]

One run, three paths over the same recorded envelopes (the largest conformance streams, or a
synthetic multi-round stream when none are recorded yet), repeated:

  loopgate   envelopes → AguiProjector.feed → AguiAdapter.render, per envelope, as a live
             subscriber does it (the projection work is included in our time)
  official   the final event dicts → ag_ui.core pydantic model → ag_ui.encoder.EventEncoder
             → UTF-8 bytes (projection NOT included: this is only the official encoding)
  limit      the final event dicts → bare msgspec.json.encode + SSE framing

Every path runs in each of ``--rounds`` interleaved rounds (the order rotates); the table gives
the median and range of frames/s, and ratios paired within each round (median and range).

Targets: loopgate ≥ 10× official, and within 3× of the limit (judged on the median ratio).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import msgspec  # noqa: E402
from ag_ui.core import events as agui_events  # noqa: E402
from ag_ui.encoder import EventEncoder  # noqa: E402

from benchmarks._common import (  # noqa: E402
    fmt_range,
    interleaved_rounds,
    median_range,
    projector_path,
    table,
)
from conformance.runner import TARGETS, load_stream, stream_paths  # noqa: E402
from loopgate.adapters.agui import AguiAdapter  # noqa: E402
from loopgate.contracts.envelope import Envelope  # noqa: E402
from loopgate.contracts.projector import ProjectorContext  # noqa: E402

PROTOCOL_VERSION = TARGETS["agui"].protocol_version
MAX_STREAMS = 6


def synthetic_stream(run_id: str = "bench", rounds: int = 4) -> list[Envelope]:
    """A realistic turn: reasoning, token-sized text deltas, parallel tools, usage, completion."""
    events: list[tuple[str, dict[str, Any]]] = []
    words = "The forecast for Oslo shows light rain through the afternoon, clearing by night. "
    for n in range(1, rounds + 1):
        events.append(("stage_start", {"model": "gpt-x"}))
        events.append(("llm_request", {"round": n, "attempt": 1}))
        events += [("reasoning_delta", {"delta": words[i : i + 5]}) for i in range(0, 80, 5)]
        text = words * 3
        events += [("content_delta", {"delta": text[i : i + 4]}) for i in range(0, len(text), 4)]
        usage = {"promptTokens": 900 * n, "completionTokens": 120, "totalTokens": 900 * n + 120}
        events.append(("llm_response", {"round": n, "attempt": 1, "model": "gpt-x", **usage}))
        if n == rounds:
            break
        for k in range(2):
            call = {"id": f"call-{n}-{k}", "name": "weather", "round": n}
            events.append(("tool_call_start", {**call, "arguments": {"city": "Oslo", "day": k}}))
        for k in range(2):
            events.append(
                (
                    "tool_call_result",
                    {
                        "id": f"call-{n}-{k}",
                        "name": "weather",
                        "success": True,
                        "durationMs": 31,
                        "resultPreview": words * 3,
                    },
                )
            )
        events.append(("stage_complete", {"round": n, "toolCallCount": 2, "elapsedMs": 812}))
        events.append(("completion", {"status": "executing", "round": n}))
    events.append(("completion", {"status": "completed", "reason": "stop", "round": rounds}))
    t0 = 1_700_000_000_000_000_000
    return [
        Envelope(run_id, seq, t0 + seq * 7_000_000, kind, data)
        for seq, (kind, data) in enumerate(events, start=1)
    ]


def pick_streams(paths: list[Path]) -> list[tuple[str, list[Envelope]]]:
    """The largest streams, preferring ones that add event kinds not yet covered."""
    loaded = sorted(
        ((p.stem, load_stream(p)) for p in paths), key=lambda item: len(item[1]), reverse=True
    )
    chosen: list[tuple[str, list[Envelope]]] = []
    kinds: set[str] = set()
    for name, envs in loaded:
        new = {e.kind for e in envs} - kinds
        if len(chosen) < 2 or new:
            chosen.append((name, envs))
            kinds |= new
        if len(chosen) == MAX_STREAMS:
            break
    return chosen or [("synthetic", synthetic_stream())]


def loopgate_path(streams: list[list[Envelope]], batch: int) -> Callable[[], int]:
    """Feed every envelope; render each ``batch`` envelopes' events with one ``render`` call
    (``benchmarks._common.projector_path``)."""
    contexts = [
        ProjectorContext(
            run_id=s[0].run_id, thread_id=s[0].run_id, protocol_version=PROTOCOL_VERSION
        )
        for s in streams
    ]
    return projector_path(AguiAdapter(), contexts, streams, batch, len(final_dicts(streams)))


def final_dicts(streams: list[list[Envelope]]) -> list[dict[str, Any]]:
    adapter = AguiAdapter()
    dicts: list[dict[str, Any]] = []
    for envelopes in streams:
        rid = envelopes[0].run_id
        p = adapter.projector(
            ProjectorContext(run_id=rid, thread_id=rid, protocol_version=PROTOCOL_VERSION)
        )
        out = p.start()
        for envelope in envelopes:
            out += p.feed(envelope)
        out += p.close()
        dicts += [adapter.to_builtins(m) for m in out]
    return dicts


def official_path(dicts: list[dict[str, Any]]) -> Callable[[], int]:
    by_type = {
        cls.model_fields["type"].default.value: cls
        for cls in vars(agui_events).values()
        if isinstance(cls, type)
        and issubclass(cls, agui_events.BaseEvent)
        and cls is not agui_events.BaseEvent
        and "type" in cls.model_fields
        and cls.model_fields["type"].default is not None
    }
    models = [by_type[d["type"]] for d in dicts]
    encoder = EventEncoder()

    def run() -> int:
        encode = encoder.encode
        for model, d in zip(models, dicts, strict=True):
            encode(model.model_validate(d)).encode()
        return len(dicts)

    return run


def limit_path(dicts: list[dict[str, Any]]) -> Callable[[], int]:
    encode = msgspec.json.Encoder().encode

    def run() -> int:
        for d in dicts:
            b"data: %b\n\n" % encode(d)  # the cheapest framing measured
        return len(dicts)

    return run


def measure(
    paths: dict[str, Callable[[], int]], seconds: float, rounds: int
) -> dict[str, list[float]]:
    """Frames/s of each path in every one of ``rounds`` interleaved rounds."""
    return interleaved_rounds(paths, seconds, rounds)


def paired(results: dict[str, list[float]], name: str, other: str) -> list[float]:
    """``name`` / ``other`` round by round: both measured moments apart, under the same load."""
    return [a / b for a, b in zip(results[name], results[other], strict=True)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="time per path, all rounds")
    parser.add_argument("--rounds", type=int, default=9, help="interleaved rounds")
    parser.add_argument("--streams", nargs="*", type=Path, help="stream files (default: ours)")
    parser.add_argument("--batch", type=int, default=32, help="envelopes per render when draining")
    args = parser.parse_args(argv)

    picked = pick_streams(args.streams if args.streams is not None else stream_paths())
    streams = [envs for _, envs in picked]
    dicts = final_dicts(streams)
    envelopes = sum(len(s) for s in streams)
    kinds = sorted({e.kind for s in streams for e in s})
    print(f"streams: {', '.join(name for name, _ in picked)}")
    print(f"{envelopes} envelopes ({len(kinds)} kinds) -> {len(dicts)} AG-UI frames per pass")
    print(f"python {sys.version.split()[0]}, msgspec {msgspec.__version__}\n")

    live, drain = "loopgate live (batch 1)", f"loopgate drain (batch {args.batch})"
    official, limit = "official (pydantic+EventEncoder)", "limit (msgspec dict encode)"
    results = measure(
        {
            live: loopgate_path(streams, 1),
            drain: loopgate_path(streams, args.batch),
            official: official_path(dicts),
            limit: limit_path(dicts),
        },
        args.seconds,
        args.rounds,
    )
    print(f"{args.rounds} interleaved rounds: median (lowest … highest); ratios paired per round")
    table(
        "AG-UI frames/s",
        ("path", "frames/s", "vs official", "vs limit"),
        [
            (
                name,
                fmt_range(results[name]),
                fmt_range(paired(results, name, official), ".1f") + "x",
                fmt_range(paired(results, name, limit), ".2f") + "x",
            )
            for name in results
        ],
    )
    ok = True
    print()
    for name in (live, drain):
        speedup = median_range(paired(results, name, official))[0]
        gap = median_range(paired(results, limit, name))[0]
        met = speedup >= 10 and gap <= 3
        ok = ok and (met or name == live)
        print(
            f"{name}: {speedup:.1f}x the official path (target >= 10x), "
            f"{gap:.2f}x slower than the limit (target <= 3x){'' if met else '  <- misses'}"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
