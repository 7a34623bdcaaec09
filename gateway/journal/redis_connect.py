"""Where the Redis journal connects: one server (``redis://``, ``rediss://``) or the primary
that Redis Sentinel names (``redis+sentinel://``), and loopgate's own URL parameters.

A Sentinel URL lists the sentinels and names the monitored service, then the database:
``redis+sentinel://[[USER]:PASSWORD@]HOST:PORT[,HOST:PORT…]/SERVICE[/DB]``. The password is
the primary's (``sentinel_password=`` in the query is the sentinels' own, if they have one).
Its clients ask the sentinels for the primary when they connect, and again after a
connection fails, so a failover costs the commits under way a retry, not the gateway.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

import redis
import redis.asyncio as aioredis
import redis.asyncio.sentinel as aiosentinel
import redis.sentinel
from redis.asyncio.connection import parse_url
from redis.exceptions import AuthenticationError, RedisError, ResponseError
from redis.exceptions import ConnectionError as RedisConnectionError

SENTINEL = "redis+sentinel://"
# Query parameters that are loopgate's, not the Redis client's (docs/scale.md).
OURS = ("lease", "prefix", "replicas", "pool_wait")
# How long a command waits for one of the pool's connections to come free (``pool_wait``).
DEFAULT_POOL_WAIT_S = 5.0
DEFAULT_SENTINEL_PORT = 26379
# redis-py's Sentinel classes carry no annotations.
_AsyncSentinel: Any = aiosentinel.Sentinel
_SyncSentinel: Any = redis.sentinel.Sentinel


class PoolBusy(RedisError):
    """Every connection of the pool stayed in use for the whole wait: the connections are
    not at fault (not a ConnectionError, which drops the idle ones as stale)."""


class WaitingPool(aioredis.BlockingConnectionPool):
    """redis-py's blocking pool, whose timeout is :class:`PoolBusy`."""

    async def get_connection(self, *args: Any, **kwargs: Any) -> Any:
        try:
            # redis-py leaves this method unannotated.
            return await super().get_connection(*args, **kwargs)  # type: ignore[no-untyped-call]
        except RedisConnectionError as exc:
            if isinstance(exc.__cause__, TimeoutError):
                raise PoolBusy("every pooled connection stayed in use") from None
            raise


@dataclass(frozen=True)
class RedisTarget:
    """A parsed ``--journal`` Redis URL."""

    url: str  # the URL as the Redis client takes it (one server), without our parameters
    ours: dict[str, str] = field(default_factory=dict)
    sentinels: tuple[tuple[str, int], ...] = ()
    service: str = ""
    # For Sentinel: the primary's connection settings (db, password, timeouts…) and the
    # sentinels' own.
    options: dict[str, Any] = field(default_factory=dict)
    sentinel_options: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def parse(cls, spec: str) -> RedisTarget:
        parts = urlsplit(spec)
        ours: dict[str, str] = {}
        theirs: list[tuple[str, str]] = []
        for key, value in parse_qsl(parts.query):
            if key in OURS:
                ours[key] = value
            else:
                theirs.append((key, value))
        if not spec.startswith(SENTINEL):
            return cls(urlunsplit(parts._replace(query=urlencode(theirs))), ours)
        userinfo, _, hosts = parts.netloc.rpartition("@")
        sentinels = tuple(_host_port(h) for h in hosts.split(",") if h)
        path = [p for p in parts.path.split("/") if p]
        if not sentinels or not path or len(path) > 2:
            raise ValueError(
                "a Sentinel journal is redis+sentinel://HOST:PORT[,HOST:PORT…]/SERVICE[/DB]"
            )
        sentinel_options: dict[str, Any] = {}
        options_query = []
        for key, value in theirs:
            if key == "sentinel_password":
                sentinel_options["password"] = value
            else:
                options_query.append((key, value))
        # The Redis client's own reading of the rest (types of timeouts, db, credentials).
        db = path[1] if len(path) > 1 else "0"
        auth = f"{userinfo}@" if userinfo else ""
        options: dict[str, Any] = dict(
            parse_url(f"redis://{auth}primary/{db}?{urlencode(options_query)}")
        )
        options.pop("host", None)
        return cls(
            spec,
            ours,
            sentinels=sentinels,
            service=unquote(path[0]),
            options=options,
            sentinel_options=sentinel_options,
        )

    @property
    def where(self) -> str:
        """What the URL names, for messages: never its credentials."""
        if self.sentinels:
            hosts = ",".join(f"{h}:{p}" for h, p in self.sentinels)
            return f"the primary of {self.service!r} (Sentinel at {hosts})"
        parts = urlsplit(self.url)
        return f"{parts.hostname}:{parts.port or 6379}"

    def client(self, pool_wait_s: float = DEFAULT_POOL_WAIT_S, **kwargs: Any) -> aioredis.Redis:
        """A client with a connection pool of its own (so a blocking read on one holds none
        of another's connections). Past the pool's ``max_connections`` (the URL's; redis-py's
        default, 100) a command waits up to ``pool_wait_s`` for a connection to come free,
        then fails as a connection error (503): redis-py's plain pool refuses it at once, so
        a burst of requests past the pool was 503 with Redis idle."""
        if not self.sentinels:
            if kwargs.get("single_connection_client"):
                return aioredis.Redis.from_url(self.url, **kwargs)
            pool = WaitingPool.from_url(self.url, timeout=pool_wait_s, **kwargs)
            return aioredis.Redis.from_pool(pool)
        kwargs.pop("single_connection_client", None)  # its own pool is what that asks for
        sentinel = _AsyncSentinel(
            list(self.sentinels),
            sentinel_kwargs={"socket_timeout": kwargs.get("socket_timeout")}
            | self.sentinel_options,
        )
        client: aioredis.Redis = sentinel.master_for(self.service, **{**kwargs, **self.options})
        return client

    def ping(self, timeout_s: float = 5.0) -> None:
        """A ValueError saying why, if the Redis of this URL does not answer: for a command
        to say at start-up, rather than fail its first commit."""
        timeouts = {"socket_connect_timeout": timeout_s, "socket_timeout": timeout_s}
        client: redis.Redis
        if self.sentinels:
            sentinel = _SyncSentinel(
                list(self.sentinels), sentinel_kwargs=timeouts | self.sentinel_options
            )
            client = sentinel.master_for(self.service, **{**timeouts, **self.options})
        else:
            client = redis.Redis.from_url(self.url, **timeouts)
        try:
            client.ping()
            refusal = self.eviction_refusal(_memory_info(client))
        except AuthenticationError:
            raise ValueError(f"--journal: Redis at {self.where} refused the credentials") from None
        except (RedisError, OSError) as exc:
            raise ValueError(f"--journal: cannot reach Redis at {self.where} ({exc})") from None
        finally:
            client.close()
        if refusal is not None:
            raise ValueError(refusal)

    def eviction_refusal(self, memory: dict[str, Any]) -> str | None:
        """Why a Redis whose ``INFO memory`` this is cannot hold the journal, or None: one
        that evicts keys when full would drop leases (runs ended as their owner's) and runs'
        records and events, without a word."""
        policy = memory.get("maxmemory_policy")
        if policy is None or policy == "noeviction":
            return None
        return (
            f"--journal: Redis at {self.where} evicts keys when it is full (maxmemory-policy "
            f"{policy}): the journal's leases, runs and events would vanish without a word; "
            "give it maxmemory-policy noeviction (docs/scale.md)"
        )


def _memory_info(client: redis.Redis) -> dict[str, Any]:
    """``INFO memory``, or nothing where the server refuses INFO (a managed one may)."""
    try:
        return dict(client.info("memory"))
    except ResponseError:
        return {}


def _host_port(text: str) -> tuple[str, int]:
    """``HOST:PORT``, ``HOST`` (the sentinels' port) or ``[V6]:PORT``."""
    host, sep, port = text.rpartition(":")
    if not sep or host.endswith(":") or (host.startswith("[") and not host.endswith("]")):
        host, port = text, ""
    try:
        return host.strip("[]"), int(port) if port else DEFAULT_SENTINEL_PORT
    except ValueError:
        raise ValueError(f"a Sentinel journal's sentinel {text!r} is not HOST:PORT") from None
