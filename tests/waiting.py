"""Waiting for a condition a test can observe (a server's state, a file, a log line), bounded:
the way a test waits for work in the background, never a pause of a guessed length."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

T = TypeVar("T")
POLL_S = 0.02  # how often the condition is asked: short beside any timeout here


def wait_until(predicate: Callable[[], T | None], timeout: float, what: str) -> T:
    """Ask ``predicate`` until it returns something truthy, and return that."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:g} s: {what}")
        time.sleep(POLL_S)


async def until(read: Callable[[], Awaitable[T]], holds: Callable[[T], object] = bool) -> T:
    """Await ``read`` until what it returns ``holds``, and return that; the caller bounds the
    wait (``with anyio.fail_after(…)``)."""
    while not holds(value := await read()):  # noqa: ASYNC110 - what is read has no event
        await anyio.sleep(POLL_S)
    return value
