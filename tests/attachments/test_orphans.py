"""The orphan sweep (issue 35): references to a run that was never recorded (a start that
crashed between its blobs and its record) are freed once past the grace, in every journal
(memory, SQLite, a real redis-server, a real postgres), and a recorded run's never are."""

from __future__ import annotations

import asyncio
import sqlite3

import anyio
import pytest

from loopgate.contracts.messages import Message
from loopgate.contracts.parts import ImagePart
from loopgate.gateway.hub.attachments import Attachments
from loopgate.gateway.hub.orphans import MAX_PASS_INTERVAL_S, OrphanSweep
from loopgate.gateway.hub.table import RunTable
from loopgate.gateway.journal.blobs import BlobStore
from loopgate.gateway.journal.memory import MemoryJournal
from loopgate.gateway.server import GatewayServer
from loopgate.gateway.settings import Settings
from tests.attachments.support import PNG, PNG_B64, answer_text, sha
from tests.attachments.test_blob_store import IMAGE, LOOP, image_of, start, usage
from tests.attachments.test_blob_store import journal as journal
from tests.gateway.harness import running_gateway
from tests.postgres.conftest import postgres_server, postgres_url  # noqa: F401  (fixtures)
from tests.redis.conftest import redis_server, redis_url  # noqa: F401  (fixtures)
from tests.waiting import wait_until

GHOST = "run-that-never-was"
GHOST_BYTES = b"the bytes of a start that crashed"
GRACE_S = 0.2


def keep_ghost(spec: str, server: GatewayServer) -> None:
    """What a start that died before its record leaves: a blob and a reference to its run,
    written as the journal's own store writes them."""
    blobs = {f"sha256:{sha(GHOST_BYTES)}": GHOST_BYTES}
    if spec == "memory":
        asyncio.run(server.hub.journal.blobs.keep(GHOST, blobs, 1 << 20))
    elif spec.startswith("sqlite:"):
        with sqlite3.connect(spec.removeprefix("sqlite:")) as conn:
            [(ref, raw)] = blobs.items()
            conn.execute("INSERT INTO blobs VALUES (?,?,?)", (ref, raw, len(raw)))
            conn.execute("INSERT INTO blob_refs VALUES (?,?)", (GHOST, ref))
            conn.execute("UPDATE blob_usage SET bytes = bytes + ?", (len(raw),))
    else:
        asyncio.run(_keep_remote(spec, blobs))


async def _keep_remote(spec: str, blobs: dict[str, bytes]) -> None:
    store: BlobStore
    if spec.startswith("redis"):
        from loopgate.gateway.journal.redis_blobs import RedisBlobs
        from loopgate.gateway.journal.redis_link import RedisLink

        link = RedisLink(spec, max_events=1, max_age_s=1)
        await link.open()
        try:
            await RedisBlobs(link).keep(GHOST, blobs, 1 << 20)
        finally:
            await link.close()
        return
    from loopgate.gateway.journal.postgres_blobs import PostgresBlobs
    from loopgate.gateway.journal.postgres_link import PostgresLink

    pg = PostgresLink(spec)
    await pg.open()
    try:
        store = PostgresBlobs(pg)
        await store.keep(GHOST, blobs, 1 << 20)
    finally:
        await pg.close()


def test_references_of_a_run_never_recorded_are_swept_and_the_store_emptied(
    journal: str,
) -> None:
    settings = {"loop": LOOP, "journal": journal, "attachment_orphan_grace_s": GRACE_S}
    with running_gateway(**settings) as (_, server):
        keep_ghost(journal, server)
        assert usage(journal, server) == (1, len(GHOST_BYTES))
        wait_until(lambda: usage(journal, server) == (0, 0), 20, "the orphan's blob freed")


def test_a_recorded_runs_references_are_never_swept(journal: str) -> None:
    settings = {"loop": LOOP, "journal": journal, "attachment_orphan_grace_s": GRACE_S}
    with running_gateway(**settings) as (base, server):
        run = start(base, [{"role": "user", "content": [IMAGE]}])
        answer_text(base, run["id"])
        keep_ghost(journal, server)
        # The ghost gone means passes a grace apart looked at every referrer: the run's too.
        wait_until(lambda: usage(journal, server) == (1, len(PNG)), 20, "only the orphan freed")
        assert sha(image_of(base, run["id"])) == sha(PNG)


def test_an_orphan_is_forgotten_only_once_past_the_grace() -> None:
    now = [0]
    journal = MemoryJournal()
    grace_ns = int(600 * 1e9)
    attachments = Attachments(journal.blobs, 1 << 20)
    sweep = OrphanSweep(journal, RunTable(10), attachments, Settings(), lambda: now[0])

    async def passes() -> None:
        await journal.blobs.keep(GHOST, {"sha256:x": GHOST_BYTES}, 1 << 20)
        assert await sweep.sweep() == 0  # first seen without a record
        now[0] = grace_ns - 1
        assert await sweep.sweep() == 0
        assert await journal.blobs.usage() == (1, len(GHOST_BYTES))
        now[0] += int(MAX_PASS_INTERVAL_S * 1e9)  # the next pass due
        assert await sweep.sweep() == 1
        assert await journal.blobs.usage() == (0, 0)

    anyio.run(passes)


def test_a_start_under_way_is_not_an_orphan() -> None:
    now = [0]
    journal = MemoryJournal()
    attachments = Attachments(journal.blobs, 1 << 20)
    sweep = OrphanSweep(journal, RunTable(10), attachments, Settings(), lambda: now[0])

    async def passes() -> None:
        image = ImagePart(media_type="image/png", data=PNG_B64, name="dot.png")
        await attachments.keep("starting", [Message(role="user", content=[image])])
        for at in (0, int(1e12), int(2e12)):
            now[0] = at
            assert await sweep.sweep() == 0
        assert await journal.blobs.usage() == (1, len(PNG))

    anyio.run(passes)


@pytest.mark.parametrize("grace", [0.0, 86_401.0])
def test_the_grace_is_bounded(grace: float) -> None:
    with pytest.raises(ValueError, match="attachment_orphan_grace_s"):
        Settings(attachment_orphan_grace_s=grace)
