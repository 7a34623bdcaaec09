"""The stall watchdog on a real event loop, blocked for real: one warning per stall, at most
``max_warnings`` per ``window_s``, the next counting those not logged; the line it is blocked
on named. A stall of the busy machine's own (not the test's) may add a warning: the assertions
pick the test's out by the line named."""

from __future__ import annotations

import logging
import re
import threading
import time

import anyio
import pytest

from loopgate.gateway.stall_watchdog import StallWatchdog

pytestmark = pytest.mark.anyio

THRESHOLD_S = 0.3


def stall_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "loopgate.stall" and r.levelno == logging.WARNING
    ]


class StallEnded(logging.Handler):
    """Set when the watchdog logs (from its thread) that a stall is over."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.seen = threading.Event()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("the event loop ran again after "):
            self.messages.append(record.getMessage())
            self.seen.set()


async def watched_stalls(
    watchdog: StallWatchdog, stalls: int, *, until_over: bool = False
) -> list[str]:
    """Block the event loop ``stalls`` times under the watchdog; ``until_over``: then wait (5 s
    at most) for it to log that the last stall is over. Returns what it logged of their ends
    (read here: its thread may still be handing the record to other handlers)."""
    ended = StallEnded()
    logger = logging.getLogger("loopgate.stall")
    logger.addHandler(ended)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(watchdog.run)
            for _ in range(stalls):
                await anyio.sleep(THRESHOLD_S)  # a few beats first: the stall is a new one
                time.sleep(THRESHOLD_S * 4)  # noqa: ASYNC251 (the stall under test)
            if until_over:
                assert await anyio.to_thread.run_sync(ended.seen.wait, 5)
            tg.cancel_scope.cancel()
    finally:
        logger.removeHandler(ended)
    return ended.messages


async def test_a_stall_is_logged_once_with_where_the_loop_is(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "loopgate.stall")  # the end of a stall is told at info
    watchdog = StallWatchdog(THRESHOLD_S, "python:some:loop")
    ended = await watched_stalls(watchdog, 1, until_over=True)
    (warning,) = [w for w in stall_warnings(caplog) if "in watched_stalls" in w]
    assert warning.startswith("the event loop has not run for ")
    # No Python loop was being driven: the line it is blocked on, and no run named.
    assert "test_stall_watchdog.py" in warning
    assert "python:some:loop" not in warning
    assert ended  # "the event loop ran again after N s", at least for the test's stall


async def test_stalls_past_the_window_s_allowance_are_counted_into_the_next_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock_offset = [0.0]
    watchdog = StallWatchdog(
        THRESHOLD_S,
        None,
        max_warnings=1,
        window_s=60,
        clock=lambda: time.monotonic() + clock_offset[0],
    )
    await watched_stalls(watchdog, 3)
    assert len(stall_warnings(caplog)) == 1
    caplog.set_level(logging.INFO, "loopgate.stall")
    clock_offset[0] = 61  # a window on: the next stall is logged, with those in between
    await watched_stalls(watchdog, 1, until_over=True)
    _, second = stall_warnings(caplog)
    counted = re.search(r"\((\d+) more stalls since the last warning were not logged\)$", second)
    assert counted is not None, second
    assert int(counted.group(1)) >= 2  # the test's two (and any of the machine's own)
