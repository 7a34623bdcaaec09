"""A run's webhook when its instance is killed mid-run, with the PostgreSQL journal and Redis
as the bus: the survivor whose row lock ended the run ``owner_lost`` sends it, once."""

from __future__ import annotations

from tests.redis.test_webhook_owner_lost import survivor_sends_the_webhook


def test_a_survivor_sends_the_webhook_of_a_run_whose_owner_was_killed(
    postgres_url: str, redis_url: str
) -> None:
    survivor_sends_the_webhook(postgres_url, "--bus", redis_url + "&lease=1")
