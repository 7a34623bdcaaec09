"""One blocking read per instance for all the runs it follows of other instances
(gateway.journal.redis_follow): one connection however many views, a view added while that
read is blocked is fed at once, and a Redis that lost its scripts (a restart, SCRIPT FLUSH)
costs a retried commit, not the events."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
import pytest
import redis.asyncio as aioredis

from loopgate.contracts.envelope import LoopEvent
from loopgate.contracts.ports import CutOff, StartRun
from loopgate.gateway.app import build_hub
from loopgate.gateway.hub import Hub
from loopgate.gateway.hub.run import RunSubscription
from loopgate.gateway.journal import redis_follow, redis_link
from loopgate.gateway.journal.redis_streams import RedisJournal
from loopgate.gateway.settings import Settings

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def hub(url: str) -> AsyncIterator[Hub]:
    async with build_hub(Settings(journal=url, scripted_delay_s=0.0)) as h:
        yield h


def delta(text: str) -> LoopEvent:
    return LoopEvent("content_delta", {"delta": text})


def instance_of(h: Hub) -> str:
    journal = h.journal
    assert isinstance(journal, RedisJournal)
    return f"{journal.link.prefix}:{journal.link.instance}"


async def connections(url: str, name_prefix: str) -> list[dict[str, Any]]:
    client = aioredis.Redis.from_url(url.split("?")[0])
    try:
        listed: list[dict[str, Any]] = await client.client_list()
    finally:
        await client.aclose()
    return [c for c in listed if c["name"].startswith(name_prefix)]


async def next_deltas(sub: RunSubscription, count: int) -> list[str]:
    seen: list[str] = []
    with anyio.fail_after(10):
        while len(seen) < count:
            seen += [e.data["delta"] for e in await sub.next_batch()]
    return seen


async def test_twenty_views_are_fed_by_one_blocked_connection(redis_url: str) -> None:
    async with hub(redis_url) as a, hub(redis_url) as b, AsyncExitStack() as stack:
        ids = [(await a.start(StartRun(source="ingest"))).id for _ in range(20)]
        subs = [await stack.enter_async_context(b.subscribe(run_id)) for run_id in ids]
        for i, run_id in enumerate(ids):
            await a.push(run_id, delta(f"first {i}"))
        for i, sub in enumerate(subs):
            assert await next_deltas(sub, 1) == [f"first {i}"]
        # Every view is live; B waits on all of them with one read on one connection.
        ours = await connections(redis_url, instance_of(b))
        blocked = [c for c in ours if c["cmd"] == "xread"]
        assert len(blocked) == 1 and blocked[0]["name"].endswith(":follow")
        assert len(ours) <= 4
        for i, run_id in enumerate(ids):
            await a.push(run_id, delta(f"second {i}"))
        for i, sub in enumerate(subs):
            assert await next_deltas(sub, 1) == [f"second {i}"]


async def test_a_view_added_while_the_read_is_blocked_is_fed_at_once(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A read that would block for a minute: only the wake can make it include a new view.
    monkeypatch.setattr(redis_follow, "BLOCK_MS", 60_000)
    async with hub(redis_url) as a, hub(redis_url) as b:
        first = (await a.start(StartRun(source="ingest"))).id
        second = (await a.start(StartRun(source="ingest"))).id
        async with b.subscribe(first) as one:
            await a.push(first, delta("one"))
            assert await next_deltas(one, 1) == ["one"]
            # B's read is blocked on the first run's stream alone.
            async with b.subscribe(second) as two:
                await a.push(second, delta("two"))
                assert await next_deltas(two, 1) == ["two"]
            await a.push(first, delta("one again"))
            assert await next_deltas(one, 1) == ["one again"]


async def test_commits_go_on_after_redis_forgets_its_scripts(redis_url: str) -> None:
    async with hub(redis_url) as a, hub(redis_url) as b:
        run_id = (await a.start(StartRun(source="ingest"))).id
        await a.push(run_id, delta("before"))
        client = aioredis.Redis.from_url(redis_url.split("?")[0])
        try:
            await client.script_flush()
        finally:
            await client.aclose()
        with anyio.fail_after(10):
            await a.push(run_id, delta("after"))
        history = await b.history(run_id)
        assert [(e.seq, e.data["delta"]) for e in history] == [(1, "before"), (2, "after")]


async def test_socket_timeouts_outlast_the_blocking_commands(redis_url: str) -> None:
    # redis-py's own default (5 s) would end the 10 s wait for an owner's answer, or a long
    # follower read, as a network error.
    journal = RedisJournal(redis_url)
    await journal.open()
    try:
        main = journal.link.client().connection_pool.connection_kwargs["socket_timeout"]
        reader = journal.link.reader.connection_pool.connection_kwargs["socket_timeout"]
    finally:
        await journal.aclose()
    assert main > redis_link.COMMAND_TIMEOUT_S
    assert reader > redis_follow.BLOCK_MS / 1000


async def test_a_view_that_cannot_be_fed_is_let_go_and_the_others_go_on(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with hub(redis_url) as a, hub(redis_url) as b:
        broken = (await a.start(StartRun(source="ingest"))).id
        fine = (await a.start(StartRun(source="ingest"))).id
        remote = b.remote
        assert remote is not None
        deliver = remote._deliver

        def faulty(run: Any, batch: Any, sizes: Any) -> None:
            if run.id == broken:
                raise RuntimeError("a bug in one view")
            deliver(run, batch, sizes)

        monkeypatch.setattr(remote, "_deliver", faulty)
        async with b.subscribe(fine) as other:
            with pytest.raises(CutOff) as cut:
                async with b.subscribe(broken) as sub:
                    await a.push(broken, delta("lost here"))
                    with anyio.fail_after(10):
                        while True:
                            await sub.next_batch()
            assert cut.value.cursor == 0  # resumable: from Redis, or on another instance
            await a.push(fine, delta("still here"))
            assert await next_deltas(other, 1) == ["still here"]
