"""The PostgreSQL side of the shared run queue (gateway.journal.postgres_queue), on a journal of
this process with its Redis bus, against real postgres and redis-server processes: a begin and a
cancel of one waiting run racing each other, one wins; a begin PostgreSQL did not confirm is
undone, and its run given back to the queue's front, to be begun again."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator

import anyio
import psycopg
import pytest

from loopgate.contracts.ports import RunExists
from loopgate.gateway.journal.base import RunRecord, SharedRunQueue
from loopgate.gateway.journal.postgres import PostgresJournal
from tests.postgres.test_journal import count

pytestmark = pytest.mark.anyio


@pytest.fixture
async def journal(postgres_url: str, redis_url: str) -> AsyncIterator[PostgresJournal]:
    # A second's statement timeout: a statement blocked on a locked row fails within it.
    opened = PostgresJournal(f"{postgres_url}&statement_timeout=1", bus=redis_url)
    await opened.open()
    try:
        yield opened
    finally:
        await opened.aclose()


def queue_of(journal: PostgresJournal) -> SharedRunQueue:
    queue = journal.cluster.run_queue
    assert queue is not None
    return queue  # type: ignore[no-any-return]


def waiting(run_id: str) -> RunRecord:
    return RunRecord(
        id=run_id,
        thread_id=run_id,
        source="loop",
        state="queued",
        status=None,
        created_at=time.time_ns(),
    )


async def taken(queue: SharedRunQueue, run_id: str) -> RunRecord:
    """The run, taken from the queue's front, with its record."""
    assert await queue.take(1.0) == run_id
    found = await queue.entry(run_id)
    assert found is not None and found[1] == b'{"input": "hi"}'
    return found[0]


async def race(queue: SharedRunQueue, record: RunRecord) -> dict[str, bool]:
    """A begin of the run and a cancel of it at once: what each answered."""
    outcomes: dict[str, bool] = {}

    async def begin() -> None:
        outcomes["begun"] = await queue.begin(record)

    async def cancel() -> None:
        outcomes["cancelled"] = await queue.end(record.id, "cancelled", "cancelled")

    async with anyio.create_task_group() as tg:
        tg.start_soon(begin)
        tg.start_soon(cancel)
    return outcomes


async def test_a_begin_and_a_cancel_racing_for_a_waiting_run_one_wins(
    journal: PostgresJournal, postgres_url: str
) -> None:
    queue = queue_of(journal)
    for _ in range(5):
        run_id = f"run_{uuid.uuid4().hex}"
        assert await queue.push(waiting(run_id), b'{"input": "hi"}', 10) == 1
        with pytest.raises(RunExists):
            await queue.push(waiting(run_id), b"{}", 10)
        outcomes = await race(queue, await taken(queue, run_id))
        assert sorted(outcomes.values()) == [False, True]
        sql = f"SELECT count(*) FROM events WHERE run_id = '{run_id}'"
        assert count(postgres_url, sql) == (1 if outcomes["cancelled"] else 0)
        assert await queue.position(run_id) is None


async def test_a_begin_postgresql_did_not_confirm_is_undone_and_the_run_queued_again(
    journal: PostgresJournal, postgres_url: str
) -> None:
    queue = queue_of(journal)
    run_id = f"run_{uuid.uuid4().hex}"
    await queue.push(waiting(run_id), b'{"input": "hi"}', 10)
    record = await taken(queue, run_id)
    base, schema = postgres_url.split("?schema=")
    with psycopg.connect(base) as other, other.transaction():
        # The row held by another transaction: the begin's statement times out.
        other.execute(f'SELECT 1 FROM "{schema}".runs WHERE id = %s FOR UPDATE', (run_id,))
        with pytest.raises(psycopg.Error):
            await queue.begin(record)
    assert await queue.position(run_id) is None  # still this taker's
    await queue.requeue_lost()
    assert await queue.position(run_id) == 1
    record = await taken(queue, run_id)
    assert await queue.begin(record)
    sql = f"SELECT count(*) FROM runs WHERE id = '{run_id}' AND state = 'running'"
    assert count(postgres_url, sql) == 1
