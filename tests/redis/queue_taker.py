"""A worker that takes one run from the shared queue and then starts nothing: a process for a
test to kill (-9) between a take and the run's start, with the take the gateway's own code
(gateway.journal.redis_queue), under a lease of its own.

``python -m tests.redis.queue_taker REDIS_URL``, or ``… POSTGRES_URL BUS_URL`` for a PostgreSQL
journal with its Redis bus: prints the id it took, then waits for stdin to close (the test
kills it first)."""

from __future__ import annotations

import sys

import anyio

from loopgate.gateway.journal.postgres import PostgresJournal
from loopgate.gateway.journal.redis_streams import RedisJournal

TAKE_S = 30.0


async def main(url: str, bus: str | None = None) -> None:
    journal = PostgresJournal(url, bus=bus) if bus is not None else RedisJournal(url)
    await journal.open()
    queue = journal.cluster.run_queue
    assert queue is not None
    async with anyio.create_task_group() as tg:
        # Its lease renewed as a live instance's is, until the process dies.
        tg.start_soon(journal.cluster.serve)
        print("ready", flush=True)
        taken = await queue.take(TAKE_S)
        print(taken, flush=True)
        await anyio.to_thread.run_sync(sys.stdin.read)
        tg.cancel_scope.cancel()


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:3])
