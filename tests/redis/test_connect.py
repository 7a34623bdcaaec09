"""Reading a ``--journal`` Redis URL (gateway/journal/redis_connect.py)."""

from __future__ import annotations

import pytest

from loopgate.gateway.journal.redis_connect import RedisTarget
from loopgate.gateway.settings import Settings


def test_one_server_keeps_the_clients_query_and_takes_ours_apart() -> None:
    target = RedisTarget.parse(
        "rediss://:pw@redis.internal:6380/2?ssl_ca_certs=/ca.pem&lease=5&prefix=prod&replicas=1"
    )
    assert target.url == "rediss://:pw@redis.internal:6380/2?ssl_ca_certs=%2Fca.pem"
    assert target.ours == {"lease": "5", "prefix": "prod", "replicas": "1"}
    assert target.where == "redis.internal:6380" and "pw" not in target.where


def test_a_sentinel_url_lists_sentinels_then_the_service_then_the_db() -> None:
    target = RedisTarget.parse(
        "redis+sentinel://:secret@s1:26380,s2,[::1]:26381/mymaster/3"
        "?sentinel_password=sp&socket_timeout=2.5&prefix=prod"
    )
    assert target.sentinels == (("s1", 26380), ("s2", 26379), ("::1", 26381))
    assert target.service == "mymaster"
    assert target.options["db"] == 3 and target.options["password"] == "secret"
    assert target.options["socket_timeout"] == 2.5
    assert target.sentinel_options == {"password": "sp"}
    assert target.ours == {"prefix": "prod"}
    assert "secret" not in target.where and "mymaster" in target.where


def test_a_sentinel_url_without_a_db_uses_db_0() -> None:
    assert RedisTarget.parse("redis+sentinel://127.0.0.1:26379/lg").options["db"] == 0


@pytest.mark.parametrize(
    "url",
    [
        "redis+sentinel://127.0.0.1:26379",  # no service
        "redis+sentinel:///lg",  # no sentinel
        "redis+sentinel://host:port/lg",  # a port that is no number
        "redis+sentinel://h:1/lg/0/extra",
    ],
)
def test_a_malformed_sentinel_url_says_what_it_should_be(url: str) -> None:
    with pytest.raises(ValueError, match="Sentinel"):
        RedisTarget.parse(url)


def test_settings_take_a_sentinel_journal() -> None:
    assert Settings(journal="redis+sentinel://127.0.0.1:26379/lg").journal.startswith("redis+")
    with pytest.raises(ValueError, match="redis\\+sentinel"):
        Settings(journal="mongodb://x")
