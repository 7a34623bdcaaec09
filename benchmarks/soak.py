"""Soak: the reliability loads of docs/reliability.md, each a named part printing its figures.

    .venv/bin/python -m benchmarks.soak durability memory        # every part named, in order
    .venv/bin/python -m benchmarks.soak durability --trials 200
    .venv/bin/python -m benchmarks.soak memory --repo /path/to/an/older/checkout

Parts so far:

- ``durability``: ``kill -9`` trials against ``loopgate serve --journal sqlite:…``
  (benchmarks/crash_trials.py): events acknowledged, lost, duplicated, seqs reused, resumed
  streams that were not exactly the rest, time from SIGKILL to answering again.
- ``memory``: peak RSS of ``loopgate serve`` (the kernel's high-water mark) under 4 ingest runs
  of 1.9 MiB events, the memory journal past its byte bound, the SQLite journal serving runs
  it no longer holds, and 5 SSE clients that never read a big run.
- ``slowloris``: 1,500 connections that never finish their request head, against the defaults
  and without the connection cap; then more idle connections than file descriptors (server CPU
  from /proc, log lines, 503s).
- ``slowbody``: 1,200 connections that send a request body a byte a second, against the
  defaults: 408s at the body deadline, 503s past the cap, and a health check meanwhile.
- ``flood``: a client that sends as fast as it can and reads nothing, on each WebSocket
  (``/acp``, ``/rpc/ws``, ``/agui/ws``, ingest) and on ``loopgate acp`` / ``loopgate rpc``'s
  stdin: frames taken, peak RSS, time to the cut-off, log lines.

A new part is a function taking the parsed options, registered with ``@part``; its own flags
go in ``add_options``. It prints one table (``benchmarks._common.table``).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from benchmarks import crash_trials, hostile_loads, memory_loads
from benchmarks._common import free_port, table


@dataclass
class Part:
    name: str
    run: Callable[[argparse.Namespace], None]
    add_options: Callable[[argparse.ArgumentParser], None] | None = None


PARTS: dict[str, Part] = {}


def part(
    name: str, add_options: Callable[[argparse.ArgumentParser], None] | None = None
) -> Callable[[Callable[[argparse.Namespace], None]], Callable[[argparse.Namespace], None]]:
    def register(fn: Callable[[argparse.Namespace], None]) -> Callable[[argparse.Namespace], None]:
        PARTS[name] = Part(name, fn, add_options)
        return fn

    return register


def use_repo(args: argparse.Namespace) -> None:
    """Run the gateway of another checkout (a before/after comparison)."""
    if args.repo:
        crash_trials.REPO = memory_loads.REPO = Path(args.repo).resolve()


# --- durability ----------------------------------------------------------------------------


def durability_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--trials", type=int, default=50, help="kill -9 trials per mode")
    parser.add_argument("--full-trials", type=int, default=10, help="… with synchronous=full")


@part("durability", durability_options)
def durability(args: argparse.Namespace) -> None:
    use_repo(args)
    rows = []
    for mode, trials in (("normal", args.trials), ("full", args.full_trials)):
        if not trials:
            continue
        env = {"LOOPGATE_JOURNAL_SYNCHRONOUS": mode}
        with (
            tempfile.TemporaryDirectory() as tmp,
            crash_trials.gateway(Path(tmp) / "journal.sqlite3", free_port(), env=env) as gw,
        ):
            results = [crash_trials.run_trial(gw, 1000 + n) for n in range(trials)]
        recover = [r.recover_s for r in results]
        rows.append(
            [
                f"synchronous={mode}",
                trials,
                f"{sum(r.acked for r in results):,}",
                sum(r.lost for r in results),
                sum(r.duplicated for r in results),
                sum(r.reused for r in results),
                sum(r.resume_errors for r in results),
                f"{statistics.median(recover):.2f} / {max(recover):.2f}",
            ]
        )
        for r in results:
            for problem in r.problems:
                print(f"  trial {r.trial}: {problem}")
    header = ["journal", "trials", "acknowledged", "lost", "duplicated", "seq reused"]
    header += ["resume wrong", "recover s p50 / max"]
    table("durability: kill -9 at seeded moments (3 runs per trial, 2 NDJSON + 1 WS)", header, rows)


# --- memory --------------------------------------------------------------------------------


def memory_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--big-run-mib", type=int, default=243, help="the run the non-reading clients ask for"
    )


@part("memory", memory_options)
def memory(args: argparse.Namespace) -> None:
    use_repo(args)
    phases: list[memory_loads.Phase] = []
    with memory_loads.serve() as server:
        phases.append(measured(memory_loads.ingest_runs, server))
        phases.append(measured(memory_loads.over_the_bound, server))
    with (
        tempfile.TemporaryDirectory() as tmp,
        memory_loads.serve("--journal", f"sqlite:{tmp}/journal.sqlite3") as server,
    ):
        phases.append(measured(sqlite_reread, server))
    # One run as big as the issue's, so its bounds are raised for it; the clients' writes
    # are bounded by max_batch_bytes whatever the run.
    big = args.big_run_mib << 20
    env = {
        "LOOPGATE_MAX_RUN_RETAINED_BYTES": str(big + (16 << 20)),
        "LOOPGATE_MAX_RETAINED_BYTES": str(big + (16 << 20)),
        "LOOPGATE_MAX_RUN_BYTES": str(big + (16 << 20)),
        "LOOPGATE_WRITE_TIMEOUT_S": "5",
    }
    with memory_loads.serve(env=env) as server:
        with httpx.Client(base_url=server.base, timeout=120) as client:
            events = big // memory_loads.BIG_EVENT
            run_id = memory_loads.push_run(client, events, memory_loads.BIG_EVENT).run_id
        for round_ in (1, 2):
            phase = measured(memory_loads.stuck_readers, server, run_id)
            phase.name += f" on a {args.big_run_mib} MiB run, round {round_}"
            phases.append(phase)
    rows = [
        [
            p.name,
            f"{p.rss_before_mib:.0f}",
            f"{p.peak_mib:.0f}",
            f"{p.peak_mib - p.rss_before_mib:+.0f}",
            f"{p.rss_after_mib:.0f}",
            p.detail,
        ]
        for p in phases
    ]
    header = ["load", "RSS before MiB", "peak MiB", "peak − before", "after MiB", "what"]
    table("memory: loopgate serve, default bounds unless said", header, rows)


def measured(
    load: Callable[..., memory_loads.Phase], server: memory_loads.Server, *args: Any
) -> memory_loads.Phase:
    """The load's figures, or how far it got when it failed (an older gateway may not cope)."""
    before = server.rss()
    try:
        return load(server, *args)
    except Exception as exc:
        name = load.__name__.replace("_", " ")
        return memory_loads.Phase(name, before, server.peak(), server.rss(), f"failed: {exc!r}")


def sqlite_reread(
    server: memory_loads.Server, runs: int = 24, events: int = 8
) -> memory_loads.Phase:
    """Finished runs past the memory bound with SQLite: they leave memory, are read back."""
    before = server.rss()
    server.reset_peak()
    started = time.monotonic()
    with httpx.Client(base_url=server.base, timeout=120) as client:
        ids = [
            memory_loads.push_run(client, events, memory_loads.BIG_EVENT).run_id
            for _ in range(runs)
        ]
        read = 0
        for run_id in ids:
            with client.stream("GET", f"/v1/runs/{run_id}/events") as response:
                read += sum(len(chunk) for chunk in response.iter_bytes())
    detail = (
        f"{runs} runs × {events} × 1.9 MiB, then each read back whole "
        f"({read / 2**20:.0f} MiB in {time.monotonic() - started:.0f} s)"
    )
    return memory_loads.Phase(
        "SQLite journal over the bound", before, server.peak(), server.rss(), detail
    )


# --- slowloris and flood (benchmarks/hostile_loads.py) ---------------------------------------


def slowloris_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sockets", type=int, default=1500, help="slowloris sockets")
    parser.add_argument("--nofile", type=int, default=256, help="the fd limit of the EMFILE load")


@part("slowloris", slowloris_options)
def slowloris(args: argparse.Namespace) -> None:
    use_repo(args)
    hostile_loads.REPO = memory_loads.REPO
    hostile_loads.slowloris_part(args.sockets, args.nofile)


def slow_body_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--slow-bodies", type=int, default=1200, help="slow-body sockets")


@part("slowbody", slow_body_options)
def slow_body(args: argparse.Namespace) -> None:
    use_repo(args)
    hostile_loads.REPO = memory_loads.REPO
    hostile_loads.slow_body_part(args.slow_bodies)


def flood_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--flood-write-timeout", default="5", help="the server's --write-timeout for the floods"
    )


@part("flood", flood_options)
def flood(args: argparse.Namespace) -> None:
    use_repo(args)
    hostile_loads.REPO = memory_loads.REPO
    hostile_loads.flood_part(args.flood_write_timeout)


# --- the command ---------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("parts", nargs="+", choices=sorted(PARTS), help="the parts to run")
    parser.add_argument("--repo", help="run another checkout's gateway (before/after)")
    for p in PARTS.values():
        if p.add_options is not None:
            p.add_options(parser)
    args = parser.parse_args(argv)
    for name in args.parts:
        started = time.monotonic()
        PARTS[name].run(args)
        print(f"({name}: {time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
