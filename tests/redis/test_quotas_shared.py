"""Quotas counted in the journal's Redis: two `loopgate serve` processes share every count; a
dead instance's slots come back one lease after its last renewal; a Redis out of reach refuses
starts (503), never lets them through."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import anyio
import httpx
import pytest

from loopgate.adapters.shared.problem import problem_for
from loopgate.contracts.ports import StartRun, Unavailable
from loopgate.gateway.app import build_hub
from loopgate.gateway.identity.quota_redis import RedisLedger
from loopgate.gateway.identity.quotas import Hold, Limits, Party
from loopgate.gateway.journal.redis_streams import RedisJournal
from loopgate.gateway.settings import Settings
from tests.fakes.redis_server import RedisProcess
from tests.identity import principals
from tests.identity.quota_keys import finish, push, refused, start, started, write_quota_keys
from tests.redis.test_instances import instances as shared_instances

Procs = list[tuple[str, subprocess.Popen[bytes]]]


def instances(
    redis_url: str, keys_file: Path, *flags: str, env: dict[str, str] | None = None
) -> AbstractContextManager[Procs]:
    """Two gateways on one Redis with one keys file, started side by side."""
    return shared_instances(
        redis_url, 2, *flags, env={"LOOPGATE_KEYS_FILE": str(keys_file), **(env or {})}
    )


def admitted_within(http: httpx.Client, who: principals.TestKey, seconds: float) -> str:
    """Start a run as ``who`` as soon as the shared counters let it (refused starts take
    nothing); its id. What frees a slot on another instance reaches Redis on its own time."""
    deadline = time.monotonic() + seconds
    while True:
        response = start(http, who)
        if response.status_code in (200, 201):
            run_id: str = response.json()["id"]
            return run_id
        refused(response, "concurrent_runs")
        assert time.monotonic() < deadline, "the slot never came back"


def test_two_instances_share_every_count(redis_url: str, tmp_path: Path) -> None:
    keys = write_quota_keys(tmp_path / "keys.json")
    alice, carol, bob = keys["alice"], keys["carol"], keys["bob"]
    flags = ("--quota-concurrent-runs", "1", "--quota-runs-per-minute", "3")
    env = {"LOOPGATE_TENANT_QUOTA_TOKENS_PER_DAY": "50"}
    with (
        instances(redis_url, tmp_path / "keys.json", *flags, env=env) as procs,
        httpx.Client(base_url=procs[0][0], timeout=20) as a,
        httpx.Client(base_url=procs[1][0], timeout=20) as b,
    ):
        # Concurrency: alice's run on A holds her only slot on B too; carol's are her own.
        first = started(a, alice)
        problem = refused(start(b, alice), "concurrent_runs")
        assert "this principal is 1 " in problem["detail"]
        finish(b, carol, started(b, carol))
        # Ended on A (pushed through B, which forwards to the owner): the slot comes back.
        finish(b, alice, first)
        second = admitted_within(b, alice, 10)
        refused(start(a, alice), "concurrent_runs")
        finish(a, alice, second)
        # Runs per minute, counted on both: two starts so far, the third is the last.
        finish(a, alice, admitted_within(a, alice, 10))
        refused(start(b, alice), "runs_per_minute")
        refused(start(a, alice), "runs_per_minute")

        # Tokens per day of tenant globex: spent on A, as the run goes.
        run_id = started(a, bob)
        push(a, bob, run_id, ("llm_response", {"promptTokens": 40, "completionTokens": 10}))
        finish(a, bob, run_id)
        # A sends what it counted before its own next check: refused there, so it is in Redis…
        refused(start(a, bob), "tokens_per_day")
        # …and B, which counted none of it, refuses too.
        problem = refused(start(b, bob), "tokens_per_day")
        assert "tenant 'globex' is 50 " in problem["detail"]
        # Another tenant's day is its own.
        finish(b, carol, started(b, carol))


def test_a_dead_instances_slots_come_back_after_its_lease(
    redis_server: str, tmp_path: Path
) -> None:
    keys = write_quota_keys(tmp_path / "keys.json")
    alice = keys["alice"]
    sep = "&" if "?" in redis_server else "?"
    url = f"{redis_server}{sep}prefix=q{os.getpid()}{time.monotonic_ns()}&lease=1"
    with instances(url, tmp_path / "keys.json", "--quota-concurrent-runs", "1") as procs:
        (base_a, proc_a), (base_b, _) = procs
        with httpx.Client(base_url=base_a, timeout=20) as a:
            started(a, alice)
        with httpx.Client(base_url=base_b, timeout=20) as b:
            refused(start(b, alice), "concurrent_runs")
            proc_a.kill()  # no drain, no release: only its lease runs out
            proc_a.wait()
            killed = time.monotonic()
            admitted_within(b, alice, 15)
            took = time.monotonic() - killed
        print(f"a killed instance's slot came back in {took:.2f} s (lease 1 s)")
        assert took < 10


def test_refused_starts_that_outgrow_a_pipe_leave_an_instance_answering(
    redis_url: str, tmp_path: Path
) -> None:
    # Each refused start writes an audit line of about 150 bytes to stderr: a thousand fill a
    # pipe's 64 KiB twice over. A gateway whose stderr nothing read would stop in a write
    # (as the test above once did, polling while the lease ran out), and this start hang.
    keys = write_quota_keys(tmp_path / "keys.json")
    alice = keys["alice"]
    with (
        instances(redis_url, tmp_path / "keys.json", "--quota-concurrent-runs", "1") as procs,
        httpx.Client(base_url=procs[0][0], timeout=20) as a,
    ):
        first = started(a, alice)
        for _ in range(1000):
            refused(start(a, alice), "concurrent_runs")
        finish(a, alice, first)
        finish(a, alice, admitted_within(a, alice, 10))


@pytest.fixture
def durable_redis(tmp_path: Path) -> Iterator[RedisProcess]:
    with RedisProcess("--dir", str(tmp_path), "--save", "") as server:
        yield server


def _hold(limits: Limits) -> Hold:
    return Hold(principal=Party("acme", "alice", limits), tenant=Party("acme", None, Limits()))


@pytest.mark.anyio
async def test_a_redis_out_of_reach_refuses_starts(durable_redis: RedisProcess) -> None:
    settings = Settings(journal=durable_redis.url, scripted_delay_s=0.0, quota_concurrent_runs=5)
    async with build_hub(settings) as hub:
        await hub.start(StartRun(source="ingest"))
        durable_redis.kill()
        with anyio.fail_after(30), pytest.raises(Unavailable) as away:
            await hub.start(StartRun(source="ingest"))
        problem = problem_for(away.value)
        assert problem is not None and problem.status == 503
        assert problem.headers == {"retry-after": "1"}
        durable_redis.start()


@pytest.mark.anyio
async def test_a_slow_redis_refuses_a_start_within_the_bound(redis_url: str) -> None:
    journal = RedisJournal(redis_url)
    await journal.open()
    try:
        ledger = RedisLedger(journal.link, timeout_s=0.5)
        limits = Limits(concurrent_runs=1)
        assert await ledger.admit(_hold(limits)) is None
        refusal = await ledger.admit(_hold(limits))
        assert refusal is not None and refusal.quota == "concurrent_runs"
        # Every write paused for 5 s: the check waits its bound, then refuses (fail closed).
        await journal.link.client().execute_command("CLIENT", "PAUSE", "5000", "WRITE")
        began = time.monotonic()
        with pytest.raises(Unavailable):
            await ledger.admit(_hold(Limits(concurrent_runs=3)))
        took = time.monotonic() - began
        print(f"a paused Redis refused the start in {took:.2f} s (bound 0.5 s)")
        assert took < 3
        await journal.link.client().execute_command("CLIENT", "UNPAUSE")
    finally:
        await journal.aclose()
