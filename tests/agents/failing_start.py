"""An AgentLoop whose start fails (a plugged loop that cannot reach what it needs)."""

from __future__ import annotations

from typing import Any


class CannotStart:
    name = "cannot-start"
    untrusted = True

    async def start(self) -> None:
        raise ValueError("the loop's backend is out of reach")

    async def aclose(self) -> None:
        pass

    def open(self, ctx: Any) -> Any:
        raise AssertionError("never started, never opened")


loop = CannotStart()
