"""Redis with replicas: the journal follows Sentinel's primary through a failover
(``redis+sentinel://``), and ``replicas=N`` acknowledges only what N replicas have.

Real servers: a primary, a replica and one sentinel (quorum 1), started here."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import pytest
import redis

from loopgate.contracts.envelope import LoopEvent
from loopgate.contracts.ports import StartRun
from loopgate.gateway.app import build_hub
from loopgate.gateway.settings import Settings
from tests.fakes.redis_server import RedisProcess

pytestmark = pytest.mark.anyio
SERVICE = "lg"
NOTHING_PERSISTED = ("--save", "", "--appendonly", "no")


def until(check: Callable[[], object], what: str, timeout: float = 30.0) -> None:
    """Poll a server's state (replication, Sentinel's view) until ``check()`` holds."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def replica_of(primary: RedisProcess, where: Path) -> RedisProcess:
    """A replica of ``primary``, synced; it keeps the copy it loads in ``where``."""
    replica = RedisProcess(
        *NOTHING_PERSISTED, "--replicaof", "127.0.0.1", str(primary.port), cwd=where
    )
    replica.start()
    client = redis.Redis(port=replica.port)
    until(lambda: client.info("replication")["master_link_status"] == "up", "the replica's sync")
    return replica


class Deployment:
    def __init__(self, where: Path) -> None:
        self.primary = RedisProcess(*NOTHING_PERSISTED, cwd=where).start()
        self.replica = replica_of(self.primary, where)
        conf = where / "sentinel.conf"
        conf.write_text(
            f"sentinel monitor {SERVICE} 127.0.0.1 {self.primary.port} 1\n"
            f"sentinel down-after-milliseconds {SERVICE} 1000\n"
            f"sentinel failover-timeout {SERVICE} 10000\n"
        )
        self.sentinel = RedisProcess(str(conf), "--sentinel", cwd=where).start()
        sentinel = redis.Redis(port=self.sentinel.port)
        until(
            lambda: any(r["port"] == self.replica.port for r in sentinel.sentinel_slaves(SERVICE)),
            "Sentinel to know the replica",
        )

    @property
    def url(self) -> str:
        return f"redis+sentinel://127.0.0.1:{self.sentinel.port}/{SERVICE}/0"

    def primary_port(self) -> int:
        sentinel = redis.Redis(port=self.sentinel.port)
        _, port = sentinel.sentinel_get_master_addr_by_name(SERVICE)
        return int(port)

    def stop(self) -> None:
        for server in (self.sentinel, self.replica, self.primary):
            server.kill()


@pytest.fixture
def deployment(tmp_path: Path) -> Iterator[Deployment]:
    d = Deployment(tmp_path)
    try:
        yield d
    finally:
        d.stop()


def delta(i: int) -> LoopEvent:
    return LoopEvent("content_delta", {"delta": f"d{i}"})


async def test_the_journal_follows_the_primary_through_a_failover(deployment: Deployment) -> None:
    async with build_hub(Settings(journal=deployment.url, scripted_delay_s=0.0)) as hub:
        run_id = (await hub.start(StartRun(source="ingest"))).id
        for i in range(1, 21):
            await hub.push_nowait(run_id, delta(i))
        await hub.wait_committed(run_id, 20)
        # On the replica too, before the primary goes (replication is asynchronous).
        assert redis.Redis(port=deployment.primary.port).wait(1, 5000) == 1
        deployment.primary.kill()
        for i in range(21, 41):
            await hub.push_nowait(run_id, delta(i))
        with anyio.fail_after(60):
            await hub.wait_committed(run_id, 40)
        assert deployment.primary_port() == deployment.replica.port
        await hub.push(run_id, LoopEvent("completion", {"status": "completed"}))
        history = await hub.history(run_id)
        assert [e.seq for e in history] == list(range(1, 42))
        assert [e.data["delta"] for e in history[:40]] == [f"d{i}" for i in range(1, 41)]
    # Written on the replica that is the primary now.
    stream = redis.Redis(port=deployment.replica.port).xrange(f"loopgate:{{{run_id}}}:events")
    assert len(stream) == 41


class Heard(logging.Handler):
    """Sets ``event`` when a log record says ``words``."""

    def __init__(self, words: str) -> None:
        super().__init__()
        self.words = words
        self.event = anyio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.words in record.getMessage():
            self.event.set()


async def test_with_replicas_a_push_is_acknowledged_once_a_replica_has_it(tmp_path: Path) -> None:
    primary = RedisProcess(*NOTHING_PERSISTED, cwd=tmp_path).start()
    replica = replica_of(primary, tmp_path)
    heard = Heard("not yet on 1 replicas")
    logger = logging.getLogger("loopgate.journal")
    logger.addHandler(heard)
    try:
        settings = Settings(journal=f"{primary.url}?replicas=1", scripted_delay_s=0.0)
        async with build_hub(settings) as hub:
            run_id = (await hub.start(StartRun(source="ingest"))).id
            await hub.push(run_id, delta(1))
            replica.kill()
            async with anyio.create_task_group() as tg:
                tg.start_soon(hub.push, run_id, delta(2))
                with anyio.fail_after(30):
                    await heard.event.wait()
                # On the primary, but neither acknowledged nor shown: a failover now could
                # take it back.
                assert hub.run(run_id).committed == 1
                replica = await anyio.to_thread.run_sync(replica_of, primary, tmp_path)
            assert hub.run(run_id).committed == 2
            history = await hub.history(run_id)
            assert [e.data["delta"] for e in history] == ["d1", "d2"]
    finally:
        logger.removeHandler(heard)
        replica.kill()
        primary.kill()
