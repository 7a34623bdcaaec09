"""Hooks for operators: ``--hooks package.module`` and ``[hook_rules]`` in the config file.

A hooks module offers hook objects with any of the six methods of
:class:`~loopgate.gateway.reference.hooks.LoopHooks`: its ``hooks`` attribute (one object or a
list), else every public class it defines that has one of them, made with no arguments.

``[hook_rules]`` covers the common cases without code: tools that are never offered nor run
(``deny_tools``), tools that ask the client first (``approve_tools``), a cap on what a tool's
result may put in the context (``max_result_chars``), and a system note sent with every model
request (``system_note``). Tool names match as shell patterns (``fnmatch``: ``write_*``).
"""

from __future__ import annotations

import inspect
from fnmatch import fnmatchcase
from typing import Any, cast

import msgspec

from ...contracts.messages import Message, ToolCall, ToolSpec
from ..reference.hooks import HOOK_NAMES, LoopHooks, NoHooks, Replace, Rewrite
from ..reference.types import LoopContext, ToolResult
from ..user_modules import UserModuleError, import_user_module
from .reference import ToolSet

MAX_NOTE_CHARS = 32_000
MAX_PATTERNS = 256


class HookRules(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """``[hook_rules]``: the declarative hooks."""

    deny_tools: list[str] = msgspec.field(default_factory=list)
    approve_tools: list[str] = msgspec.field(default_factory=list)
    max_result_chars: dict[str, int] = msgspec.field(default_factory=dict)
    system_note: str | None = None

    def __post_init__(self) -> None:
        for name in ("deny_tools", "approve_tools"):
            patterns = getattr(self, name)
            if len(patterns) > MAX_PATTERNS:
                raise ValueError(f"hook_rules.{name}: at most {MAX_PATTERNS} patterns")
            if any(not p for p in patterns):
                raise ValueError(f"hook_rules.{name}: a pattern must not be empty")
        for pattern, chars in self.max_result_chars.items():
            if isinstance(chars, bool) or chars <= 0:
                raise ValueError(f"hook_rules.max_result_chars.{pattern} must be positive")
        if self.system_note is not None and not 0 < len(self.system_note) <= MAX_NOTE_CHARS:
            raise ValueError(f"hook_rules.system_note must be 1 to {MAX_NOTE_CHARS} characters")

    @classmethod
    def from_value(cls, value: dict[str, Any]) -> HookRules:
        """The rules a config table gives; ValueError naming the key that is wrong."""
        try:
            return msgspec.convert(value, cls)
        except msgspec.ValidationError as exc:
            raise ValueError(f"hook_rules: {exc}") from None

    def denied(self, name: str) -> bool:
        return any(fnmatchcase(name, p) for p in self.deny_tools)

    def needs_approval(self, name: str) -> bool:
        return any(fnmatchcase(name, p) for p in self.approve_tools)

    def result_cap(self, name: str) -> int | None:
        caps = [c for p, c in self.max_result_chars.items() if fnmatchcase(name, p)]
        return min(caps) if caps else None

    def hooks(self) -> list[LoopHooks]:
        """The rules that act as hooks (the others act on the tools: :class:`RuledTools`)."""
        return [RuleHooks(self)] if self.max_result_chars or self.system_note else []


class RuleHooks(NoHooks):
    """``max_result_chars`` (post_tool_result) and ``system_note`` (pre_step)."""

    def __init__(self, rules: HookRules) -> None:
        self.rules = rules

    def pre_step(self, ctx: LoopContext) -> Rewrite | None:
        note = self.rules.system_note
        if note is None:
            return None
        # A rewrite lasts one step: the note is sent with each request, not piled up in history.
        messages = [*ctx.messages, Message(role="system", content=note)]
        return Rewrite(messages=messages, reason="hook_rules.system_note")

    def post_tool_result(self, ctx: LoopContext, call: ToolCall, result: ToolResult) -> Any:
        cap = self.rules.result_cap(call.name)
        if cap is None or len(result.content) <= cap:
            return None
        kept = result.content[:cap]
        content = f"{kept}\n[… {len(result.content) - cap:,} characters left out by the operator]"
        capped = msgspec.structs.replace(result, content=content, data=None)
        return Replace(result=capped, reason=f"hook_rules.max_result_chars ({cap:,})")


class RuledTools:
    """A run's tools under ``deny_tools`` and ``approve_tools``: a denied tool is not offered,
    and a call to it anyway is refused without running; a tool to approve asks first."""

    def __init__(self, tools: ToolSet, rules: HookRules) -> None:
        self.tools = tools
        self.rules = rules

    def specs(self) -> list[ToolSpec]:
        return [s for s in self.tools.specs() if not self.rules.denied(s.name)]

    async def execute(self, call: ToolCall, ctx: LoopContext) -> ToolResult:
        if self.rules.denied(call.name):
            return ToolResult(
                success=False, error=f"the tool {call.name!r} is not allowed on this server"
            )
        return await self.tools.execute(call, ctx)

    def concurrency_safe(self, call: ToolCall) -> bool:
        return self.tools.concurrency_safe(call)

    def kind(self, name: str) -> str:
        return self.tools.kind(name)

    def needs_approval(self, call: ToolCall) -> bool:
        return self.rules.needs_approval(call.name) or self.tools.needs_approval(call)


def hooks_from_module(dotted: str) -> list[LoopHooks]:
    """The hook objects a ``--hooks`` module offers; ValueError, in one line, if none."""
    flag = f"--hooks {dotted}"
    module = import_user_module(dotted, flag)
    offered = getattr(module, "hooks", None)
    if offered is not None:
        found = list(offered) if isinstance(offered, list | tuple) else [offered]
        for item in found:
            if inspect.isclass(item) or not _has_hook(item):
                raise UserModuleError(
                    f"{flag}: `hooks` must be hook objects (instances with one of "
                    f"{', '.join(HOOK_NAMES)}), got {type(item).__name__}"
                )
        return found
    classes = [
        value
        for name, value in vars(module).items()
        if not name.startswith("_")
        and inspect.isclass(value)
        and value.__module__ == module.__name__
        and _has_hook(value)
    ]
    if not classes:
        raise UserModuleError(
            f"{flag}: the module defines no `hooks` and no class with a hook method "
            f"({', '.join(HOOK_NAMES)})"
        )
    made: list[LoopHooks] = []
    for cls in classes:
        try:
            # A hooks object may implement only some of the six; the loop asks the others none.
            made.append(cast(LoopHooks, cls()))
        except Exception:
            raise UserModuleError(
                f"{flag}: {cls.__name__}() failed; a hooks class is made with no arguments "
                "(or give the module a `hooks` list of objects)"
            ) from None
    return made


def _has_hook(obj: Any) -> bool:
    return any(callable(getattr(obj, name, None)) for name in HOOK_NAMES)
