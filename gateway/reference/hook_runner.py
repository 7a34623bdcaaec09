"""Calling a turn's ``LoopHooks``: each hook's actions, checked, and their ``hook_action``.

A turn may have several hooks objects; :meth:`HookRunner.each` yields, for one hook point, the
hooks that implement it, in order, so the caller can apply one hook's actions before asking the
next (the rules are ``hooks.COMPOSITION``); :meth:`HookRunner.call` asks them all at once.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import anyio

from .hooks import ALLOWED_ACTIONS, HOOK_NAMES, Action, LoopHooks, NoHooks
from .state import TurnState

# NoHooks' own methods: a hook left at its default is not called (it would return None).
_NO_OPS = frozenset(getattr(NoHooks, name) for name in HOOK_NAMES)
# A hook returning a longer list is a bug in the hook, not a plan: the loop stays bounded.
MAX_ACTIONS_PER_CALL = 64

HookFn = Callable[..., Any]


class HookError(Exception):
    """A hook raised or returned an action it may not: the turn fails with ``hook_error``."""

    def __init__(self, hook: str, detail: str) -> None:
        self.message = f"hook {hook} {detail}"
        super().__init__(self.message)
        self.hook = hook


class HookRunner:
    """The hooks of one turn; each call sees the turn's current :class:`LoopContext`."""

    __slots__ = ("_fns", "hooks", "observes_chunks", "turn")

    def __init__(self, turn: TurnState, hooks: LoopHooks | Sequence[LoopHooks]) -> None:
        self.turn = turn
        self.hooks: tuple[LoopHooks, ...] = (
            tuple(hooks) if isinstance(hooks, Sequence) else (hooks,)
        )
        # Looked up once per turn: a hook point nobody implements costs nothing per round.
        self._fns: dict[str, tuple[HookFn, ...]] = {
            name: tuple(fn for fn in map(_hook_fn(name), self.hooks) if fn is not None)
            for name in HOOK_NAMES
        }
        # on_stream_chunk runs once per chunk: skipped outright when nobody implements it.
        self.observes_chunks = bool(self._fns["on_stream_chunk"])

    def each(self, name: str) -> Iterator[HookFn]:
        """The hooks implementing ``name``, in order; ask each with :meth:`ask`."""
        return iter(self._fns[name])

    async def ask(self, fn: HookFn, name: str, *args: Any) -> list[Action]:
        """Run one hook: its actions (none for the default or an observe-only hook)."""
        try:
            out = fn(self.turn.ctx(), *args)
            if inspect.isawaitable(out):
                out = await out
        except anyio.get_cancelled_exc_class():
            raise
        except Exception:
            raise HookError(name, "raised an exception") from None
        allowed = ALLOWED_ACTIONS[name]
        if out is None or not allowed:
            return []
        actions = list(out) if isinstance(out, list | tuple) else [out]
        if len(actions) > MAX_ACTIONS_PER_CALL:
            raise HookError(name, f"returned more than {MAX_ACTIONS_PER_CALL} actions")
        for action in actions:
            if not isinstance(action, allowed):
                raise HookError(name, f"returned an unsupported action {type(action).__name__}")
        return actions

    async def call(self, name: str, *args: Any) -> list[Action]:
        """Ask every hook implementing ``name``, in order: all their actions."""
        actions: list[Action] = []
        for fn in self._fns[name]:
            actions += await self.ask(fn, name, *args)
        return actions

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


def _hook_fn(name: str) -> Callable[[LoopHooks], HookFn | None]:
    def lookup(hooks: LoopHooks) -> HookFn | None:
        fn = getattr(hooks, name, None)
        if fn is None or getattr(fn, "__func__", None) in _NO_OPS:
            return None
        return fn  # type: ignore[no-any-return]

    return lookup
