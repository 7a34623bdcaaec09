"""Takeover after a crash and graceful deploys with the PostgreSQL journal and a Redis bus
(``--journal postgresql://… --bus redis://…``): tests/redis/test_takeover.py's cases."""

from __future__ import annotations

from tests.redis.takeover_support import killed_owner_resumed, stopped_owner_hands_over


def test_a_killed_owners_reference_run_is_finished_by_a_survivor(
    postgres_url: str, redis_url: str
) -> None:
    killed_owner_resumed(postgres_url, "--bus", redis_url + "&lease=1")


def test_a_run_of_an_instance_stopped_with_sigterm_completes_on_another(
    postgres_url: str, redis_url: str
) -> None:
    stopped_owner_hands_over(postgres_url, "--bus", redis_url + "&lease=60")
