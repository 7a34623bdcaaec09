"""One gateway instance's link to the Redis of a shared journal: its clients, where its keys
are, what its URL sets, and what Redis out of reach means to a request.

Both halves of the Redis journal go through it: the storage of runs
(gateway.journal.redis_streams) and this instance's membership among the others
(gateway.journal.redis_membership).
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Callable, Coroutine
from typing import Any, Protocol, TypeVar, cast

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import OutOfMemoryError, RedisError, ResponseError

from ...contracts.ports import Unavailable
from . import redis_follow
from .redis_connect import DEFAULT_POOL_WAIT_S, PoolBusy, RedisTarget

log = logging.getLogger("loopgate.journal")

T = TypeVar("T", int, float)
Method = TypeVar("Method", bound=Callable[..., Coroutine[Any, Any, Any]])

UNAVAILABLE = "the shared journal (Redis) does not answer; retry shortly"
BUSY = "this instance's connections to the shared journal (Redis) are all busy; retry shortly"
FULL = (
    "Redis is full (maxmemory reached, with maxmemory-policy noeviction): nothing more can be "
    "committed until it has room"
)
DEFAULT_LEASE_S = 10.0
MAX_POOL_WAIT_S = 60.0
DEFAULT_PREFIX = "loopgate"
# The longest a command sent to another instance waits for its answer (a blocking read).
COMMAND_TIMEOUT_S = 10.0
SOCKET_SLACK_S = 5.0


class RedisLink:
    def __init__(
        self,
        url: str,
        *,
        max_events: int,
        max_age_s: float,
        lease_s: float | None = None,
        prefix: str | None = None,
    ) -> None:
        self.target = RedisTarget.parse(url)
        params = self.target.ours
        # One server's URL as the Redis client takes it (for a Sentinel URL: as given).
        self.url = self.target.url
        # Commits acknowledged only once on this many replicas (WAIT): what a failover
        # cannot take back. 0: once on the primary.
        self.replicas = _number(params, "replicas", 0)
        if self.replicas < 0:
            raise ValueError(f"replicas must be 0 or more, got {self.replicas}")
        self.lease_s = lease_s if lease_s is not None else _number(params, "lease", DEFAULT_LEASE_S)
        if self.lease_s <= 0:
            raise ValueError(f"the Redis lease must be positive, got {self.lease_s}")
        self.prefix = prefix or params.get("prefix", DEFAULT_PREFIX)
        self.pool_wait_s = _number(params, "pool_wait", DEFAULT_POOL_WAIT_S)
        if not 0 < self.pool_wait_s <= MAX_POOL_WAIT_S:
            raise ValueError(
                f"the Redis URL's pool_wait must be above 0 and at most {MAX_POOL_WAIT_S:g} s, "
                f"got {self.pool_wait_s:g}"
            )
        # What a run keeps: a stream is capped at ``max_events`` entries, and a finished
        # run's keys expire ``max_age_ms`` after its end.
        self.max_events = max_events
        self.max_age_ms = max(int(max_age_s * 1000), 1)
        self.instance = uuid.uuid4().hex[:16]
        # Any: redis-py annotates each reply as the union of every shape a reply may take.
        self._client: Any = None
        # The follower's own connection: its blocking read holds it.
        self.reader: Any = None

    # --- keys -----------------------------------------------------------------------------

    def run_keys(self, run_id: str) -> list[str]:
        """A run's events, last seq, record and owner: one hash tag, one Cluster slot."""
        p = f"{self.prefix}:{{{run_id}}}"
        return [f"{p}:events", f"{p}:seq", f"{p}:record", f"{p}:owner"]

    def claim_key(self, run_id: str) -> str:
        return f"{self.prefix}:{{{run_id}}}:claim"

    def key(self, *parts: str) -> str:
        return ":".join((self.prefix, *parts))

    def lease_key(self, instance: str) -> str:
        return self.key("instance", instance)

    def owned_key(self, instance: str) -> str:
        """The runs an instance owns while they run (what survivors end if it dies)."""
        return self.key("owned", instance)

    def lease_ms(self) -> int:
        return max(int(self.lease_s * 1000), 1)

    async def leases(self, instances: list[str]) -> tuple[bool, list[bool]]:
        """Whether this instance's lease is there, and each of ``instances``'s (one round
        trip): one that finds its own gone has stalled, and judges no other."""
        pipe = self.client().pipeline(transaction=False)
        pipe.exists(self.lease_key(self.instance))
        for instance in instances:
            pipe.exists(self.lease_key(instance))
        mine, *alive = await pipe.execute()
        return bool(mine), [bool(a) for a in alive]

    # --- connections ----------------------------------------------------------------------

    async def open(self) -> None:
        # Named, so that CLIENT LIST says which instance holds which connection. The socket
        # timeouts outlast the blocking commands each client sends (redis-py's default of 5 s
        # would end a 10 s BLPOP as a network error); a timeout in the URL still wins.
        name = f"{self.prefix}:{self.instance}"
        client = self.target.client(
            self.pool_wait_s,
            decode_responses=False,
            client_name=name,
            socket_timeout=COMMAND_TIMEOUT_S + SOCKET_SLACK_S,
        )
        try:
            await self._check_memory_policy(client)
        except BaseException:
            await client.aclose()
            raise
        self._client = client
        self.reader = self.target.client(
            decode_responses=False,
            single_connection_client=True,
            client_name=f"{name}:follow",
            socket_timeout=redis_follow.BLOCK_MS / 1000 + SOCKET_SLACK_S,
        )

    async def _check_memory_policy(self, client: Any) -> None:
        """A ValueError for a Redis that evicts keys when full; a warning for one that nothing
        bounds (docs/scale.md: Redis settings)."""
        try:
            memory = dict(await client.info("memory"))
        except ResponseError:
            return  # INFO refused (a managed Redis may): nothing to tell from
        refusal = self.target.eviction_refusal(memory)
        if refusal is not None:
            raise ValueError(refusal)
        if not int(memory.get("maxmemory") or 0):
            log.warning(
                "journal: Redis at %s has no maxmemory: nothing bounds what it holds "
                "(docs/scale.md: Redis settings)",
                self.target.where,
            )

    @property
    def closed(self) -> bool:
        return self._client is None

    def client(self) -> Any:
        """The client (its pool) of everything but the follower's read: the runs, the
        instances, and what else lives in this Redis (the quotas' counters); RuntimeError
        before it opens and after it closes."""
        if self._client is None:
            raise RuntimeError("the journal is closed")
        return self._client

    async def drop_idle_connections(self) -> None:
        """One connection failed: the pool's idle ones, as old, are likely stale too (a Redis
        restart out of their sight). They connect anew when next used."""
        await self.client().connection_pool.disconnect(inuse_connections=False)

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()
            await self.reader.aclose()


class Linked(Protocol):
    link: RedisLink


def reaching(method: Method) -> Method:
    """A read or command of a request: Redis out of reach is the port's Unavailable (a 503
    with Retry-After over HTTP, a retry-later error elsewhere), not an internal error."""

    @functools.wraps(method)
    async def reaching(*args: Any, **kwargs: Any) -> Any:
        try:
            return await method(*args, **kwargs)
        except PoolBusy:
            log.warning(
                "journal: a request's %s found every Redis connection of this instance in use "
                "(the journal URL's max_connections and pool_wait)",
                method.__name__,
            )
            raise Unavailable(BUSY, retry_after=1) from None
        except (RedisError, OSError):
            log.warning("journal: Redis did not answer a request's %s", method.__name__)
            raise Unavailable(UNAVAILABLE, retry_after=1) from None

    # The method's own type: an async def, which pyright holds to the Journal protocol's
    # (a types.CoroutineType), where a Callable[P, Coroutine] would not do.
    return cast(Method, reaching)


def reading(method: Method) -> Method:
    """A read of a request (``reaching``), tried once more on a fresh connection when its
    connection fails: after Redis restarted, or a network path dropped its state, every idle
    connection in the pool is stale, and each would fail one request (its server side gone,
    unseen until written to). The pool's idle connections go at the first failure, so the
    retry, and the requests after it, connect anew. Reads only: a write retried after a lost
    reply could be applied twice."""

    @functools.wraps(method)
    async def reading(linked: Linked, /, *args: Any, **kwargs: Any) -> Any:
        try:
            return await method(linked, *args, **kwargs)
        except RedisConnectionError:
            await linked.link.drop_idle_connections()
        return await method(linked, *args, **kwargs)

    return reaching(cast(Method, reading))


def trouble(exc: BaseException) -> str:
    """What a failed command says of Redis, in words for readiness (never its message: it
    may quote a host or a script)."""
    if isinstance(exc, OutOfMemoryError):
        return FULL
    if isinstance(exc, PoolBusy):
        return "every connection to Redis is busy"
    if isinstance(exc, ResponseError):
        return "Redis refuses the journal's commands"
    return "Redis does not answer"


def _number(params: dict[str, str], name: str, default: T) -> T:
    """One of our URL parameters as a number of ``default``'s type, or a ValueError naming it."""
    if name not in params:
        return default
    try:
        return type(default)(params[name])
    except ValueError:
        raise ValueError(f"the Redis URL's {name} must be a number, got {params[name]!r}") from None
