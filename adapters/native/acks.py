"""Acknowledgements for the ingest WebSocket (``?ack=1``): which frames are committed.

Frames are pushed without waiting for the journal; this task waits for the commit of the last
one pushed and says so in one frame, ``{"type": "ack", "frame": N, "seq": S}``: every frame up
to N that was not rejected is committed, its events up to seq S. Frames that arrive while a
commit is under way share the next acknowledgement, so a fast loop gets few of them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from ...contracts.ports import RunService


class CommitAcks:
    def __init__(
        self,
        service: RunService,
        run_id: str,
        send: Callable[[dict[str, Any]], Awaitable[None]],
    ) -> None:
        self.service = service
        self.run_id = run_id
        self.send = send
        self._latest = (0, 0)
        self._pushed = anyio.Event()

    def pushed(self, frame: int, seq: int) -> None:
        self._latest = (frame, seq)
        self._pushed.set()

    async def run(self) -> None:
        while True:
            await self._pushed.wait()
            self._pushed = anyio.Event()
            frame, seq = self._latest
            await self.service.wait_committed(self.run_id, seq)
            await self.send({"type": "ack", "frame": frame, "seq": seq})
