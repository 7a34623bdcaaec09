"""Three `loopgate serve` processes sharing runs through PostgreSQL, with Redis as their bus
(``--journal postgresql://… --bus redis://…``): the Redis journal's tests of instances
(tests/redis/test_instances.py) run here as they are, on three instances of this kind."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import pytest

from tests.gateway.sse_client import envelopes, read_stream
from tests.postgres.conftest import with_schema
from tests.redis.test_instances import (
    bases,
    deltas,
    first_events,
    instances,
    push,
    test_a_hundred_clients_over_three_instances_receive_identical_streams,
    test_a_run_started_on_one_instance_is_listed_described_and_streamed_on_another,
    test_pushes_to_any_instance_reach_the_run_in_order,
    test_start_on_a_stream_from_b_cancel_from_c,
)

__all__ = [
    "test_a_hundred_clients_over_three_instances_receive_identical_streams",
    "test_a_run_started_on_one_instance_is_listed_described_and_streamed_on_another",
    "test_pushes_to_any_instance_reach_the_run_in_order",
    "test_start_on_a_stream_from_b_cancel_from_c",
]


@pytest.fixture(scope="module")
def trio(postgres_server: str, redis_server: str) -> Iterator[list[str]]:
    sep = "&" if "?" in redis_server else "?"
    bus = f"{redis_server}{sep}prefix=t{uuid.uuid4().hex[:12]}"
    with instances(with_schema(postgres_server), 3, "--bus", bus) as procs:
        yield bases(procs)


def test_a_killed_owner_leaves_its_run_to_be_ended_once_by_a_survivor(
    postgres_url: str, redis_url: str
) -> None:
    with instances(postgres_url, 3, "--bus", redis_url + "&lease=1") as procs:
        (a, proc_a), (b, _), (c, _) = procs
        run_id = httpx.post(f"{a}/v1/runs", json={"source": "ingest"}).json()["id"]
        push(a, run_id, *deltas(0, 30))
        before = first_events(b, run_id, 12)
        proc_a.kill()  # mid-run, without a word
        proc_a.wait()
        rest = envelopes(read_stream(b, run_id, headers={"last-event-id": "12"}))
        whole = before + rest
        assert [e["seq"] for e in whole] == list(range(1, 32))
        assert [e["data"] for e in whole[:30]] == [d["data"] for d in deltas(0, 30)]
        assert whole[-1]["data"] == {"status": "failed", "reason": "owner_lost"}
        assert [e["kind"] for e in whole].count("completion") == 1
        assert envelopes(read_stream(c, run_id)) == whole
        assert httpx.get(f"{c}/v1/runs/{run_id}").json()["status"] == "failed"
