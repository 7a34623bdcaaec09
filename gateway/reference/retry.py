"""When a failed model request is tried again without a hook asking: the retry policy.

A failure is retried when the provider calls it retryable (HTTP 408/429/5xx, a connection lost
or a timeout) and nothing of the response reached clients yet: a delta already shown cannot be
taken back, so a stream cut after its first delta fails the request. Waits grow exponentially
from ``retry_initial_delay_ms`` with jitter (so clients hit by one outage do not come back in
step), a server's ``Retry-After`` is honoured, and ``retry_max_attempts`` and
``retry_max_total_ms`` bound the whole.
"""

from __future__ import annotations

import email.utils
import math
import random
import time

from .config import LoopConfig
from .types import ProviderError

# Jitter: each wait is between this share of its back-off and the whole of it.
_JITTER_FLOOR = 0.5
# Retry-After longer than this (in seconds) is not a date we trust to be meant for us.
_MAX_RETRY_AFTER_S = 86_400.0


class RetryPlan:
    """One model request's retries: its first failure's time and what each failure gets."""

    __slots__ = ("_cfg", "_first_failure", "_rng")

    def __init__(self, cfg: LoopConfig, rng: random.Random | None = None) -> None:
        self._cfg = cfg
        self._first_failure: float | None = None
        self._rng = rng or random.Random()

    def decide(self, cause: BaseException, attempt: int, streamed: bool) -> tuple[int | None, str]:
        """The wait in ms before trying again (``None``: do not), and why not when not."""
        now = time.monotonic()
        if self._first_failure is None:
            self._first_failure = now
        if not isinstance(cause, ProviderError) or not cause.retryable:
            return None, ""
        if streamed:
            # Said by llm_response (retryable, no retryInMs); the message stays the provider's.
            return None, ""
        cfg = self._cfg
        if attempt >= cfg.retry_max_attempts:
            return None, f"gave up after {attempt} attempts"
        if cause.retry_after_s is not None:
            delay_ms = math.ceil(cause.retry_after_s * 1000)
            if delay_ms > cfg.retry_max_delay_ms:
                return None, (
                    f"the server asked to wait {cause.retry_after_s:g} s, longer than "
                    f"retry_max_delay_ms ({cfg.retry_max_delay_ms} ms)"
                )
        else:
            backoff = min(cfg.retry_max_delay_ms, cfg.retry_initial_delay_ms * 2 ** (attempt - 1))
            delay_ms = round(backoff * self._rng.uniform(_JITTER_FLOOR, 1.0))
        spent_ms = (now - self._first_failure) * 1000
        if spent_ms + delay_ms > cfg.retry_max_total_ms:
            return None, f"gave up after {attempt} attempts (retry_max_total_ms reached)"
        return delay_ms, ""


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """``Retry-After`` in seconds (delta-seconds or an HTTP date); ``None`` if absent or bad."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        seconds = float(int(value[:12]))
    else:
        try:
            when = email.utils.parsedate_to_datetime(value[:64])
        except (TypeError, ValueError, IndexError):
            return None
        if when is None or when.tzinfo is None:
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    if seconds > _MAX_RETRY_AFTER_S:
        return None
    return max(0.0, seconds)
