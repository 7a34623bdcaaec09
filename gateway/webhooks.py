"""Webhook delivery: the gateway's :class:`contracts.webhooks.Outbox`.

Jobs (an A2A task's push notifications: following its run and posting what changes) run in a
task group of their own, started with the app and cancelled when it stops; how many may run
at once is bounded. A delivery is a POST that is retried on a network error, a timeout, a 5xx
or a 429, waiting ``backoff_s`` × 2ⁿ (at most ``backoff_max_s``) in between, ``attempts``
times in all; any other answer ends it. Its job waits, never the run: a run's events are in
the journal, and a job that falls behind its run catches up from there.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from urllib.parse import urlsplit

import anyio
import httpx
from anyio.abc import TaskGroup

from ..contracts.webhooks import Webhook

log = logging.getLogger("loopgate.webhooks")
RETRIED = frozenset({408, 425, 429, 500, 502, 503, 504})


class WebhookOutbox:
    def __init__(
        self,
        *,
        timeout_s: float = 10.0,
        attempts: int = 5,
        backoff_s: float = 0.5,
        backoff_max_s: float = 30.0,
        max_jobs: int = 1_000,
    ) -> None:
        self.timeout_s = timeout_s
        self.attempts = attempts
        self.backoff_s = backoff_s
        self.backoff_max_s = backoff_max_s
        self.max_jobs = max_jobs
        self.jobs = 0
        # Jobs given before the outbox first runs (runs ended while the gateway starts): they
        # start with it. None once it has run: a job given after it stopped is refused.
        self._waiting: list[Callable[[], Awaitable[None]]] | None = []
        self._group: TaskGroup | None = None
        self._client: httpx.AsyncClient | None = None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[WebhookOutbox]:
        """Jobs run while this is open; leaving it cancels those still going."""
        # Redirects are not followed: the URL checked against the allowlist is the one posted.
        async with (
            httpx.AsyncClient(timeout=self.timeout_s, follow_redirects=False) as client,
            anyio.create_task_group() as group,
        ):
            self._client, self._group = client, group
            waiting, self._waiting = self._waiting or [], None
            for job in waiting:
                group.start_soon(self._run, job)
            try:
                yield self
            finally:
                self._group = None
                group.cancel_scope.cancel()
        self._client = None

    def start_soon(self, job: Callable[[], Awaitable[None]]) -> bool:
        group = self._group
        if self.jobs >= self.max_jobs or (group is None and self._waiting is None):
            return False
        self.jobs += 1
        if group is None:
            assert self._waiting is not None
            self._waiting.append(job)
        else:
            group.start_soon(self._run, job)
        return True

    async def _run(self, job: Callable[[], Awaitable[None]]) -> None:
        try:
            await job()
        except Exception:
            log.exception("a webhook job failed")
        finally:
            self.jobs -= 1

    async def deliver(self, hook: Webhook) -> bool:
        client = self._client
        if client is None:
            return False
        where = _where(hook.url)
        headers = {"content-type": "application/json", **hook.headers}
        for attempt in range(self.attempts):
            if attempt:
                await anyio.sleep(min(self.backoff_s * 2 ** (attempt - 1), self.backoff_max_s))
            try:
                response = await client.post(hook.url, content=hook.body, headers=headers)
            except httpx.HTTPError as exc:
                log.info("webhook %s: %s (attempt %d)", where, type(exc).__name__, attempt + 1)
                continue
            if response.is_success:
                return True
            if response.status_code not in RETRIED:
                log.warning("webhook %s answered %d: not retried", where, response.status_code)
                return False
        log.warning("webhook %s given up after %d attempts", where, self.attempts)
        return False


def _where(url: str) -> str:
    """The URL's scheme, host and port only (its user, password, path and query may carry a
    secret), for the log."""
    parts = urlsplit(url)
    try:
        port = f":{parts.port}" if parts.port is not None else ""
    except ValueError:
        port = ""
    return f"{parts.scheme}://{parts.hostname or '?'}{port}"
