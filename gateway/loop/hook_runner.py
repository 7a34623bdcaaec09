"""Calling a turn's ``LoopHooks``: the action each returns, checked, and its ``hook_action``."""

from __future__ import annotations

import inspect
from typing import Any

import anyio

from loopgate.gateway.loop.hooks import ALLOWED_ACTIONS, HOOK_NAMES, Action, LoopHooks, NoHooks
from loopgate.gateway.loop.state import TurnState

# NoHooks' own methods: a hook left at its default is not called (it would return None).
_NO_OPS = frozenset(getattr(NoHooks, name) for name in HOOK_NAMES)


class HookError(Exception):
    """A hook raised or returned an action it may not: the turn fails with ``hook_error``."""

    def __init__(self, hook: str, detail: str) -> None:
        self.message = f"hook {hook} {detail}"
        super().__init__(self.message)
        self.hook = hook


class HookRunner:
    """The hooks of one turn; each call sees the turn's current :class:`LoopContext`."""

    __slots__ = ("hooks", "observes_chunks", "turn")

    def __init__(self, turn: TurnState, hooks: LoopHooks) -> None:
        self.turn = turn
        self.hooks = hooks
        # on_stream_chunk runs once per chunk: skipped outright when it is NoHooks' no-op.
        self.observes_chunks = getattr(type(hooks), "on_stream_chunk", None) is not (
            NoHooks.on_stream_chunk
        )

    async def call(self, name: str, *args: Any) -> Action | None:
        """Run hook ``name``; its action, or ``None`` for the default (or an observe-only hook)."""
        fn = getattr(self.hooks, name, None)
        if fn is None or getattr(fn, "__func__", None) in _NO_OPS:
            return None
        try:
            out = fn(self.turn.ctx(), *args)
            if inspect.isawaitable(out):
                out = await out
        except anyio.get_cancelled_exc_class():
            raise
        except Exception:
            raise HookError(name, "raised an exception") from None
        if out is None or name not in ALLOWED_ACTIONS:
            return None
        if not isinstance(out, ALLOWED_ACTIONS[name]):
            raise HookError(name, f"returned an unsupported action {type(out).__name__}")
        return out

    async def announce(self, hook: str, action: Action, reason: str = "", **extra: Any) -> None:
        """Emit the ``hook_action`` of an action the loop applies."""
        data: dict[str, Any] = {
            "hook": hook,
            "action": action.name,
            "reason": getattr(action, "reason", "") or reason,
            "round": self.turn.round,
        }
        data.update(extra)
        await self.turn.emit("hook_action", data)
