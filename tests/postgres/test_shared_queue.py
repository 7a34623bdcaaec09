"""The run queue shared by instances of a PostgreSQL journal with a Redis bus, with roles
(docs/scale.md: roles and the run queue): the Redis journal's tests of the queue
(tests/redis/test_shared_queue.py) run here as they are, on an api instance and a worker of
this kind; and a Redis killed (-9) while runs wait loses none of them: their records are
PostgreSQL's, and a worker queues them again once Redis is back."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.fakes.redis_server import RedisProcess
from tests.postgres.conftest import with_schema
from tests.redis.test_shared_queue import (
    Pair,
    busy,
    cancel,
    events,
    info,
    roles,
    start,
    test_a_queued_run_cancelled_ends_cancelled_once_and_never_runs,
    test_a_run_started_on_the_api_instance_runs_on_the_worker,
    test_a_run_whose_taker_is_killed_before_it_starts_is_taken_again,
    test_runs_past_the_workers_room_wait_in_order_and_a_full_queue_is_429,
)

__all__ = [
    "test_a_queued_run_cancelled_ends_cancelled_once_and_never_runs",
    "test_a_run_started_on_the_api_instance_runs_on_the_worker",
    "test_a_run_whose_taker_is_killed_before_it_starts_is_taken_again",
    "test_runs_past_the_workers_room_wait_in_order_and_a_full_queue_is_429",
]


def bus_of(redis_url: str, *params: str) -> str:
    sep = "&" if "?" in redis_url else "?"
    return f"{redis_url}{sep}" + "&".join((f"prefix=t{uuid.uuid4().hex[:12]}", *params))


@pytest.fixture(scope="module")
def pair(postgres_server: str, redis_server: str) -> Iterator[Pair]:
    """The pair on a PostgreSQL schema and a Redis prefix of their own."""
    journal, bus = with_schema(postgres_server), bus_of(redis_server)
    with roles(journal, [journal, f"{bus}&lease=1"], "--bus", bus) as both:
        yield both


def test_runs_waiting_when_redis_is_killed_run_once_it_is_back(
    postgres_url: str, volatile_redis: RedisProcess
) -> None:
    bus = bus_of(volatile_redis.url, "lease=1")
    with roles(postgres_url, [], "--bus", bus) as pair:
        api, worker = pair.api, pair.worker
        slow = busy(api)
        waiting = [start(api, "hello"), start(api, "think")]
        assert [w["queue_position"] for w in waiting] == [1, 2]
        volatile_redis.kill()  # the queue's ids and entries go with it; the rows stay
        volatile_redis.start()
        # The slow run's owner cancels it itself (no Redis needed); the worker has room, and
        # puts the lost runs back in the queue (oldest first) within about a lease.
        cancel(worker, slow)
        ran = [events(api, w["id"]) for w in waiting]
        for run in ran:
            assert [e["seq"] for e in run] == list(range(1, len(run) + 1))
            assert [e["kind"] for e in run].count("completion") == 1
            assert run[-1]["data"]["status"] == "completed"
        assert ran[1][0]["ts"] > ran[0][-1]["ts"]
        logged = pair.logged()
        for w in waiting:
            assert f"run {w['id']}: its queue entry was lost with Redis; queued again" in logged
            assert info(api, w["id"])["state"] == "finished"
