"""Chat-completion chunks per second: loopgate's projector + encoder against the official SDK's
models.

    .venv/bin/python -m benchmarks.openai_chunks [--seconds 2] [--rounds 7] [--check]

One run, four paths over the same recorded envelopes (the largest conformance streams, as
``benchmarks.agui_encode`` picks them), repeated:

  loopgate   envelopes → OpenAIProjector.feed → OpenAIAdapter.render (SSE ``data:`` lines), per
             envelope as a live subscriber does it, or 32 envelopes per render as one that
             drains a backlog (the projection work is included in our time)
  official   the final chunk dicts → ``ChatCompletionChunk.model_validate`` (openai's pydantic
             model) → ``model_dump_json`` → the same framing (projection NOT included: only
             building and serialising the official models)
  limit      the final chunk dicts → a bare ``msgspec.json.encode`` + the same framing

Every path runs in each of ``--rounds`` interleaved rounds (the order rotates); the table gives
the median and range of chunks/s, and ratios paired within each round.

Targets: loopgate ≥ 5× official, and within 3× of the limit (judged on the median ratio).
``--check`` exits 1 when the drained path misses one (the figures depend on the machine's load).
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
import openai  # noqa: E402
from openai.types.chat import ChatCompletionChunk  # noqa: E402

from benchmarks._common import fmt_range, median_range, projector_path, table  # noqa: E402
from benchmarks.agui_encode import measure, paired, pick_streams  # noqa: E402
from conformance.runner import stream_paths  # noqa: E402
from loopgate.adapters.openai import OpenAIAdapter  # noqa: E402
from loopgate.adapters.openai.projector import CREATED, INCLUDE_USAGE, MODEL  # noqa: E402
from loopgate.contracts.envelope import Envelope  # noqa: E402
from loopgate.contracts.projector import ProjectorContext  # noqa: E402

SPEEDUP_TARGET = 5.0
GAP_TARGET = 3.0


def context(envelopes: list[Envelope]) -> ProjectorContext:
    """As the endpoint makes it: a model name, a creation time, usage asked for."""
    rid = envelopes[0].run_id
    options = {MODEL: "loopgate-scripted", CREATED: 1_796_000_000, INCLUDE_USAGE: True}
    return ProjectorContext(run_id=rid, thread_id=rid, options=options)


def final_dicts(streams: list[list[Envelope]]) -> list[dict[str, Any]]:
    """Every chunk a client receives for the streams (the error and [DONE] lines left out:
    they are not chunks, and there is at most one of each per stream)."""
    adapter = OpenAIAdapter()
    dicts: list[dict[str, Any]] = []
    for envelopes in streams:
        projector = adapter.projector(context(envelopes))
        out = projector.start()
        for envelope in envelopes:
            out += projector.feed(envelope)
        out += projector.close()
        dicts += [
            d for m in out if isinstance(d := adapter.to_builtins(m), dict) and "error" not in d
        ]
    return dicts


def loopgate_path(streams: list[list[Envelope]], batch: int) -> Callable[[], int]:
    """Feed every envelope; render each feed's chunks (batch 1), or every ``batch``
    envelopes' chunks with one render (``benchmarks._common.projector_path``)."""
    contexts = [context(s) for s in streams]
    return projector_path(OpenAIAdapter(), contexts, streams, batch, len(final_dicts(streams)))


def official_path(dicts: list[dict[str, Any]]) -> Callable[[], int]:
    def run() -> int:
        validate = ChatCompletionChunk.model_validate
        for d in dicts:
            b"data: %b\n\n" % validate(d).model_dump_json(exclude_unset=True).encode()
        return len(dicts)

    return run


def limit_path(dicts: list[dict[str, Any]]) -> Callable[[], int]:
    encode = msgspec.json.Encoder().encode

    def run() -> int:
        for d in dicts:
            b"data: %b\n\n" % encode(d)
        return len(dicts)

    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="time per path, all rounds")
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds")
    parser.add_argument("--streams", nargs="*", type=Path, help="stream files (default: ours)")
    parser.add_argument("--batch", type=int, default=32, help="envelopes per render when draining")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args(argv)

    picked = pick_streams(args.streams if args.streams is not None else stream_paths())
    streams = [envs for _, envs in picked]
    dicts = final_dicts(streams)
    deltas = sum(1 for d in dicts if d["choices"] and "loopgate" not in d)
    print(f"streams: {', '.join(name for name, _ in picked)}")
    print(
        f"{sum(len(s) for s in streams)} envelopes -> {len(dicts)} chunks per pass "
        f"({deltas} with a delta, the rest carrying an event or the usage)"
    )
    print(
        f"python {sys.version.split()[0]}, msgspec {msgspec.__version__}, "
        f"openai {openai.__version__}\n"
    )

    live, drain = "loopgate live (batch 1)", f"loopgate drain (batch {args.batch})"
    official, limit = "official (ChatCompletionChunk)", "limit (msgspec dict encode)"
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
        "chat.completion.chunk/s",
        ("path", "chunks/s", "vs official", "vs limit"),
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
    met_all = True
    print()
    for name in (live, drain):
        speedup = median_range(paired(results, name, official))[0]
        gap = median_range(paired(results, limit, name))[0]
        met = speedup >= SPEEDUP_TARGET and gap <= GAP_TARGET
        met_all = met_all and (met or name == live)
        print(
            f"{name}: {speedup:.1f}x the official path (target >= {SPEEDUP_TARGET:.0f}x), "
            f"{gap:.2f}x slower than the limit (target <= {GAP_TARGET:.0f}x)"
            f"{'' if met else '  <- misses'}"
        )
    return 1 if args.check and not met_all else 0


if __name__ == "__main__":
    sys.exit(main())
