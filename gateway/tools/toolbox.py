"""Several tool sources offered to the loop as one ``ToolExecutor``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...contracts.client_errors import ClientError
from ...contracts.messages import ToolCall, ToolSpec
from ..reference.tools import ToolKind, ToolMeta
from ..reference.types import LoopContext, ToolExecutor, ToolResult


def source_name(executor: Any) -> str:
    """How an error message names a tool source: its ``source``, else its class."""
    return getattr(executor, "source", None) or type(executor).__name__


class ToolBox:
    """Demo tools, function tools and MCP tool sets behind one executor.

    The tool list is read once, here: a source whose server goes away keeps its tools on offer
    and answers calls with an error, so the model's view does not shift mid-thread.
    """

    def __init__(self, executors: Sequence[ToolExecutor]) -> None:
        self.executors = list(executors)
        self._specs: list[ToolSpec] = []
        self._owner: dict[str, ToolExecutor] = {}
        for executor in self.executors:
            for spec in executor.specs():
                other = self._owner.get(spec.name)
                if other is not None:
                    first, second = source_name(other), source_name(executor)
                    where = f"both {first} and {second}" if first != second else f"{first} twice"
                    raise ClientError(f"tool {spec.name!r} is defined by {where}")
                self._owner[spec.name] = executor
                self._specs.append(spec)

    def specs(self) -> list[ToolSpec]:
        return list(self._specs)

    def source_of(self, name: str) -> ToolExecutor | None:
        return self._owner.get(name)

    def meta(self, name: str) -> ToolMeta | None:
        meta = getattr(self._owner.get(name), "meta", None)
        return meta(name) if meta is not None else None

    def kind(self, name: str) -> ToolKind:
        kind = getattr(self._owner.get(name), "kind", None)
        return kind(name) if kind is not None else "other"

    def needs_approval(self, call: ToolCall) -> bool:
        check = getattr(self._owner.get(call.name), "needs_approval", None)
        return bool(check(call)) if check is not None else False

    def concurrency_safe(self, call: ToolCall) -> bool:
        owner = self._owner.get(call.name)
        return owner is not None and bool(owner.concurrency_safe(call))

    async def execute(self, call: ToolCall, ctx: LoopContext) -> ToolResult:
        owner = self._owner.get(call.name)
        if owner is None:
            return ToolResult(success=False, error=f"unknown tool {call.name!r}")
        return await owner.execute(call, ctx)
