"""One blocking read for every run an instance follows (the views of gateway.hub.remote).

A view of another instance's run is fed from that run's stream as the owner commits to it.
Rather than a blocking ``XREAD`` per view — a connection each, held for as long as the view
lives — the instance has one reader on one connection of its own, blocked on all the streams
it follows at once (``XREAD BLOCK … STREAMS k1 k2 … id1 id2 …``). A stream followed while
that read is blocked would wait for the read's timeout to be included, so ``watch`` adds an
entry to a *wake* stream of the instance's own that every read includes: the read returns at
once and the next one covers the new stream. The wake stream is read from the last id seen,
never ``$``, so a wake that lands before the read is sent still ends it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
from redis.exceptions import RedisError

from ...contracts.envelope import Envelope
from .base import Deliver

log = logging.getLogger("loopgate.journal")

# (run id, entry id, fields) → the envelope, and the size of its encoded payload.
Decode = Callable[[str, bytes, dict[bytes, bytes]], tuple[Envelope, int]]

BLOCK_MS = 1_000
COUNT = 512  # entries per stream per read
RETRY_S = 1.0


@dataclass
class _Watch:
    key: bytes
    cursor: bytes  # the last entry id delivered
    deliver: Deliver
    failed: Callable[[], None]


class StreamFollower:
    def __init__(self, wake_key: str, wake_ttl_ms: int, decode: Decode) -> None:
        self._wake_key = wake_key.encode()
        self._wake_ttl_ms = wake_ttl_ms
        self._wake_id = b"0-0"
        self._decode = decode
        self._watched: dict[str, _Watch] = {}
        self._run_of: dict[bytes, str] = {}
        self._reading = False
        self._idle = anyio.Event()

    async def watch(
        self,
        client: Any,
        run_id: str,
        key: str,
        after: int,
        deliver: Deliver,
        failed: Callable[[], None],
    ) -> None:
        """Deliver the run's events after seq ``after`` until ``unwatch``; ``failed`` is called
        (and the run unwatched) if its entries cannot be read or delivered. ``client`` is any
        connection but the reader's (its one is blocked)."""
        self.unwatch(run_id)
        raw_key = key.encode()
        self._watched[run_id] = _Watch(raw_key, b"%d-0" % after, deliver, failed)
        self._run_of[raw_key] = run_id
        if not self._reading:
            self._idle.set()
            return
        pipe = client.pipeline(transaction=False)
        pipe.xadd(self._wake_key, {b"w": b"1"}, maxlen=1, approximate=False)
        pipe.pexpire(self._wake_key, self._wake_ttl_ms)
        await pipe.execute()

    def unwatch(self, run_id: str) -> None:
        watch = self._watched.pop(run_id, None)
        if watch is not None:
            self._run_of.pop(watch.key, None)

    async def run(self, reader: Any) -> None:
        """Forever: read what the followed streams gain and deliver it. ``reader`` is a
        client of one connection, for this alone."""
        while True:
            if not self._watched:
                await self._idle.wait()
                self._idle = anyio.Event()
                continue
            # Set before the streams are listed: a watch from here on wakes this read.
            self._reading = True
            reading = {w.key: w for w in self._watched.values()}
            streams = {self._wake_key: self._wake_id}
            for key, each in reading.items():
                streams[key] = each.cursor
            try:
                reply = await reader.xread(streams, count=COUNT, block=BLOCK_MS)
            except (RedisError, OSError):
                log.exception("following runs of other instances failed; retrying")
                await anyio.sleep(RETRY_S)
                continue
            finally:
                self._reading = False
            for key, entries in reply or ():
                if key == self._wake_key:
                    self._wake_id = entries[-1][0]
                    continue
                run_id = self._run_of.get(key)
                watch = reading.get(key)
                if run_id is None or watch is None or self._watched.get(run_id) is not watch:
                    continue  # let go of, or watched anew, while the read was out
                watch.cursor = entries[-1][0]
                decode = self._decode
                try:
                    decoded = [decode(run_id, i, fields) for i, fields in entries]
                    watch.deliver([env for env, _ in decoded], [size for _, size in decoded])
                except Exception:
                    # One view's fault (an entry not ours, a bug) ends that view, not the
                    # reader every other view depends on.
                    log.exception("following run %s failed; its view here is let go", run_id)
                    self.unwatch(run_id)
                    watch.failed()
