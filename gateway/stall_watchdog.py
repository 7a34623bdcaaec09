"""Noticing that the event loop stopped running, and who stopped it.

Everything the gateway serves shares one event loop: a plugged Python loop that blocks it
(``time.sleep``, a synchronous HTTP client, a long computation) freezes every client, health
checks included. A heartbeat task on the loop stamps the time; a monitor thread reads the stamp,
and when the loop has not run for ``stall_warning_s`` it logs one WARNING for that stall with
where the loop's thread is (its innermost frame) and which run's Python loop it was driving.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from types import FrameType

import anyio

from .plugs.python import stepping_run

log = logging.getLogger("loopgate.stall")

# At most this many stall warnings per window; the next after it says how many were not
# logged. More than one: a stall of no interest (a slow start-up) must not hide the next.
MAX_WARNINGS = 5
WINDOW_S = 60.0
# How many runs a warning names (a frame names at most one; this bounds a strange stack).
MAX_NAMED = 5


class StallWatchdog:
    """A hub service (``Hub.services``): runs as long as the hub does."""

    def __init__(
        self,
        threshold_s: float,
        loop_name: str | None,
        *,
        max_warnings: int = MAX_WARNINGS,
        window_s: float = WINDOW_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.threshold_s = threshold_s
        self.loop_name = loop_name
        self.max_warnings = max_warnings
        self.window_s = window_s
        self.clock = clock
        # The heartbeat's period: a stall is noticed within a quarter of its threshold.
        self.tick_s = min(threshold_s / 4, 0.25)
        self.beat = clock()
        self._logged: deque[float] = deque()  # when the warnings of the window were logged
        self._unlogged = 0

    async def run(self) -> None:
        stop = threading.Event()
        monitor = threading.Thread(
            target=self._monitor,
            args=(threading.get_ident(), stop),
            name="loopgate stall watchdog",
            daemon=True,
        )
        self.beat = self.clock()
        monitor.start()
        try:
            while True:
                self.beat = self.clock()
                await anyio.sleep(self.tick_s)
        finally:
            stop.set()  # it ends within a tick; nothing here waits for it

    def _monitor(self, loop_thread: int, stop: threading.Event) -> None:
        reported = None  # the beat of the stall last noticed: once per stall
        logged = False
        while not stop.wait(self.tick_s):
            beat = self.beat
            if beat == reported:
                continue
            if reported is not None and logged:
                # Over (the loop stamped a new beat): how long it was, now that it is known.
                log.info("the event loop ran again after %.1f s", beat - reported)
            reported, logged = None, False
            quiet = self.clock() - beat
            if quiet >= self.threshold_s:
                reported = beat
                logged = self._notice(quiet, sys._current_frames().get(loop_thread))

    def _notice(self, quiet: float, frame: FrameType | None) -> bool:
        """Log the stall unless ``max_warnings`` were in the last ``window_s``; True if so."""
        now = self.clock()
        logged = self._logged
        while logged and logged[0] <= now - self.window_s:
            logged.popleft()
        if len(logged) >= self.max_warnings:
            self._unlogged += 1
            return False
        logged.append(now)
        unlogged, self._unlogged = self._unlogged, 0
        message = self.describe(quiet, frame)
        if unlogged:
            message += f" ({unlogged} more stalls since the last warning were not logged)"
        log.warning("%s", message)
        return True

    def describe(self, quiet: float, frame: FrameType | None) -> str:
        where, runs = _locate(frame)
        said = f"the event loop has not run for {quiet:.1f} s; every client waits meanwhile"
        if runs and self.loop_name is not None:
            named = ", ".join(runs[:MAX_NAMED])
            said += (
                f": the loop {self.loop_name} is blocking it in run {named}{where}; "
                "a loop that blocks should run with --loop-runner thread (docs/loops.md)"
            )
        elif where:
            said += f":{where}"
        return said


def _locate(frame: FrameType | None) -> tuple[str, list[str]]:
    """Where the stuck thread is (its innermost frame), and the runs of the Python loops
    whose steps are on its stack."""
    if frame is None:
        return "", []
    code = frame.f_code
    where = f" at {code.co_filename}:{frame.f_lineno} in {code.co_name}"
    runs: list[str] = []
    walk: FrameType | None = frame
    while walk is not None:
        run_id = stepping_run(walk)
        if run_id is not None and run_id not in runs:
            runs.append(run_id)
        walk = walk.f_back
    return where, runs
