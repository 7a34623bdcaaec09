"""Python functions as tools: ``loopgate serve --tools package.module``.

A function's signature is its schema (type hints through pydantic), its docstring its
description (Google, NumPy or reST style, through ``docstring_parser``). Arguments are
validated by pydantic in lax mode before the function runs; sync functions run in a worker
thread, async ones on the loop.
"""

from __future__ import annotations

import functools
import inspect
import logging
import re
import types
import typing
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any, TypeVar, get_args, overload

import anyio
import docstring_parser
import msgspec
import pydantic
from pydantic_core import PydanticSerializationError, to_jsonable_python

from ...contracts.messages import ToolCall, ToolSpec
from ..reference.tools import ToolFailure, ToolKind, ToolMeta, ToolMetaLookup
from ..reference.types import LoopContext, ToolResult
from ..user_modules import import_user_module

log = logging.getLogger("loopgate.tools")

# What ``@tool`` attaches. A plain dict under a plain name, so a tools module can also set it
# by hand without importing loopgate.
TOOL_ATTRIBUTE = "__loopgate_tool__"
TOOL_KINDS: frozenset[str] = frozenset(get_args(ToolKind))
# What OpenAI-compatible APIs accept as a function name; other providers are stricter still.
TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
NAME_RULE = "use 1 to 64 letters, digits, '_' or '-'"

_encode = msgspec.json.Encoder().encode
_NOT_SCHEMAS = frozenset({"default", "const", "enum", "examples"})
_NAMED_SCHEMAS = frozenset({"properties", "$defs", "definitions", "patternProperties"})

F = TypeVar("F", bound=Callable[..., Any])


@overload
def tool(fn: F, /) -> F: ...


@overload
def tool(
    *,
    kind: ToolKind = "other",
    needs_approval: bool = False,
    concurrency_safe: bool = False,
    name: str | None = None,
) -> Callable[[F], F]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    kind: ToolKind = "other",
    needs_approval: bool = False,
    concurrency_safe: bool = False,
    name: str | None = None,
) -> Any:
    """Mark a function with what a front end needs to know about it; it stays callable as is.

    Usable bare (``@tool``) or with arguments (``@tool(kind="read", concurrency_safe=True)``).
    """
    if kind not in TOOL_KINDS:
        raise ValueError(f"unknown tool kind {kind!r}; one of {', '.join(sorted(TOOL_KINDS))}")
    if name is not None and not TOOL_NAME.fullmatch(name):
        raise ValueError(f"invalid tool name {name!r}; {NAME_RULE}")

    def mark(target: F) -> F:
        setattr(
            target,
            TOOL_ATTRIBUTE,
            {
                "kind": kind,
                "needs_approval": needs_approval,
                "concurrency_safe": concurrency_safe,
                "name": name,
            },
        )
        return target

    return mark(fn) if fn is not None else mark


class _Param(msgspec.Struct, frozen=True):
    name: str
    field: str  # the field's name inside the arguments model; ``name`` is its alias
    positional_only: bool


class FunctionTool:
    """One function, ready to be offered and called."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        marks = getattr(fn, TOOL_ATTRIBUTE, None) or {}
        if not isinstance(marks, dict):
            raise ValueError(f"{_label(fn)}: {TOOL_ATTRIBUTE} must be a dict")
        self.fn = fn
        name = marks.get("name") or getattr(fn, "__name__", "")
        self.name: str = name if isinstance(name, str) else ""
        if not TOOL_NAME.fullmatch(self.name):
            raise ValueError(f"{_label(fn)}: invalid tool name {self.name!r}; {NAME_RULE}")
        kind = marks.get("kind", "other")
        if kind not in TOOL_KINDS:
            raise ValueError(f"tool {self.name!r}: unknown kind {kind!r}")
        self.meta = ToolMeta(
            kind=kind,
            needs_approval=bool(marks.get("needs_approval", False)),
            concurrency_safe=bool(marks.get("concurrency_safe", False)),
        )
        self.is_async = _is_async(fn)
        doc = _parse_docstring(fn)
        self.params, self.context_params, self.model = self._arguments_model(doc)
        self.spec = ToolSpec(
            name=self.name,
            description=(doc.description or "").strip(),
            parameters=_clean_schema(self.model.model_json_schema()),
        )

    def _arguments_model(
        self, doc: docstring_parser.Docstring
    ) -> tuple[list[_Param], list[str], type[pydantic.BaseModel]]:
        try:
            signature = inspect.signature(self.fn)
        except (TypeError, ValueError):
            raise ValueError(f"tool {self.name!r}: its signature cannot be read") from None
        try:
            # LoopContext is named here so a module may import it under TYPE_CHECKING only.
            target = self.fn if inspect.isroutine(self.fn) else type(self.fn).__call__
            hints = typing.get_type_hints(
                target, localns={"LoopContext": LoopContext}, include_extras=True
            )
        except Exception as exc:
            raise ValueError(
                f"tool {self.name!r}: its type hints cannot be resolved ({type(exc).__name__}:"
                f" {exc})"
            ) from None
        described = {p.arg_name: (p.description or "").strip() for p in doc.params}
        params: list[_Param] = []
        context: list[str] = []
        fields: dict[str, Any] = {}
        for i, (pname, p) in enumerate(signature.parameters.items()):
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                star = "*" if p.kind is p.VAR_POSITIONAL else "**"
                raise ValueError(
                    f"tool {self.name!r}: {star}{pname} is not supported; "
                    "name every parameter the model may pass"
                )
            hint = hints.get(pname, Any)
            if _is_context(hint):
                if p.kind is p.POSITIONAL_ONLY:
                    raise ValueError(f"tool {self.name!r}: {pname} must not be positional-only")
                context.append(pname)
                continue
            # Field names of our own; the parameter's name is the alias, so names such as
            # ``model_config``, ``json`` or ``_x`` cannot collide with pydantic's.
            field = f"p{i}"
            info: dict[str, Any] = {"alias": pname}
            if described.get(pname):
                info["description"] = described[pname]
            if p.default is not p.empty:
                info["default"] = p.default
            fields[field] = (hint, pydantic.Field(**info))
            params.append(_Param(pname, field, p.kind is p.POSITIONAL_ONLY))
        try:
            model = pydantic.create_model(
                f"{self.name}_arguments",
                __config__=pydantic.ConfigDict(extra="forbid", arbitrary_types_allowed=False),
                **fields,
            )
            model.model_json_schema()
        except Exception as exc:
            raise ValueError(
                f"tool {self.name!r}: no JSON schema for its parameters ({type(exc).__name__}:"
                f" {_first_line(exc)})"
            ) from None
        return params, context, model

    async def call(self, call: ToolCall, ctx: LoopContext) -> ToolResult:
        try:
            values = self.model.model_validate(call.arguments)
        except pydantic.ValidationError as exc:
            return ToolResult(success=False, error=f"{self.name}: {_validation_message(exc)}")
        positional = [getattr(values, p.field) for p in self.params if p.positional_only]
        keywords: dict[str, Any] = {
            p.name: getattr(values, p.field) for p in self.params if not p.positional_only
        }
        keywords.update(dict.fromkeys(self.context_params, ctx))
        try:
            if self.is_async:
                value = await self.fn(*positional, **keywords)
            else:
                # Abandoned on cancel: a tool timeout must not wait for a thread that won't stop.
                value = await anyio.to_thread.run_sync(
                    functools.partial(self.fn, *positional, **keywords), abandon_on_cancel=True
                )
                if inspect.isawaitable(value):
                    value = await value
        except ToolFailure as exc:
            return ToolResult(success=False, error=f"{self.name}: {exc}")
        except Exception:
            log.exception("tool %s raised", self.name)
            return ToolResult(success=False, error=f"{self.name} failed with an internal error")
        return self._result(value)

    def _result(self, value: Any) -> ToolResult:
        if isinstance(value, ToolResult):
            return value
        if value is None:
            return ToolResult(success=True)
        if isinstance(value, str):
            return ToolResult(success=True, content=value)
        try:
            data = to_jsonable_python(value)
            text = _encode(data).decode()
        except (PydanticSerializationError, TypeError, ValueError, msgspec.EncodeError):
            log.exception("tool %s returned a value that is not JSON", self.name)
            return ToolResult(
                success=False, error=f"{self.name} returned a value that cannot be sent as JSON"
            )
        return ToolResult(success=True, content=text, data=data)


class FunctionTools(ToolMetaLookup):
    """A ``ToolExecutor`` over plain Python functions."""

    def __init__(self, functions: Sequence[Callable[..., Any]], *, source: str = "functions"):
        self.source = source
        self._tools: dict[str, FunctionTool] = {}
        for fn in functions:
            if not callable(fn) or inspect.isclass(fn):
                raise ValueError(f"{source}: {_label(fn)} is not a function")
            one = FunctionTool(fn)
            if one.name in self._tools:
                raise ValueError(f"{source}: two functions are named {one.name!r}")
            self._tools[one.name] = one
        if not self._tools:
            raise ValueError(f"{source}: no tools (no public functions)")

    @classmethod
    def from_module(cls, dotted: str) -> FunctionTools:
        """The tools a module offers: its ``__all__``, or else every public function it defines.

        Raises ValueError, in one line without traceback text, when the module cannot be
        imported (its file and line where it failed) or offers nothing.
        """
        module = import_user_module(dotted, f"--tools {dotted}")
        return cls(_module_functions(module), source=f"module {dotted!r}")

    # --- the ToolExecutor port ----------------------------------------------------------------

    def specs(self) -> list[ToolSpec]:
        return [t.spec for t in self._tools.values()]

    def meta(self, name: str) -> ToolMeta | None:
        found = self._tools.get(name)
        return found.meta if found else None

    async def execute(self, call: ToolCall, ctx: LoopContext) -> ToolResult:
        found = self._tools.get(call.name)
        if found is None:
            return ToolResult(success=False, error=f"unknown tool {call.name!r}")
        return await found.call(call, ctx)


def _module_functions(module: ModuleType) -> list[Callable[..., Any]]:
    exported = getattr(module, "__all__", None)
    if exported is not None:
        functions = []
        for name in exported:
            if not hasattr(module, name):
                raise ValueError(f"module {module.__name__!r}: __all__ names {name!r}, not defined")
            functions.append(getattr(module, name))
        if not functions:
            raise ValueError(f"module {module.__name__!r}: __all__ is empty, so it has no tools")
        return functions
    functions = [
        value
        for name, value in vars(module).items()
        if not name.startswith("_")
        and inspect.isfunction(value)
        and value.__module__ == module.__name__
    ]
    if not functions:
        raise ValueError(
            f"module {module.__name__!r} has no tools: it defines no public function "
            "(and no __all__)"
        )
    return functions


def _is_async(fn: Callable[..., Any]) -> bool:
    target: Any = fn
    while isinstance(target, functools.partial):
        target = target.func
    if inspect.iscoroutinefunction(target):
        return True
    call = getattr(target, "__call__", None)  # noqa: B004 - a callable object's own method
    return not inspect.isroutine(target) and inspect.iscoroutinefunction(call)


def _parse_docstring(fn: Callable[..., Any]) -> docstring_parser.Docstring:
    text = inspect.getdoc(fn) or ""
    try:
        return docstring_parser.parse(text)
    except docstring_parser.ParseError:
        # A docstring no style can read is still a description, just without parameters.
        doc = docstring_parser.Docstring()
        doc.short_description = text
        return doc


def _is_context(hint: Any) -> bool:
    """``LoopContext``, or ``LoopContext | None``."""
    if hint is LoopContext:
        return True
    union = typing.get_origin(hint) in (typing.Union, types.UnionType)
    return union and set(get_args(hint)) <= {LoopContext, type(None)}


def _label(fn: Any) -> str:
    return getattr(fn, "__qualname__", None) or type(fn).__name__


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else ""


def _validation_message(exc: pydantic.ValidationError) -> str:
    parts = []
    for error in exc.errors(include_url=False, include_context=False, include_input=False):
        loc = error["loc"]
        where = "".join(
            f"[{part}]" if isinstance(part, int) else (f".{part}" if i else str(part))
            for i, part in enumerate(loc)
        )
        parts.append(f"argument {where!r}: {error['msg']}" if where else error["msg"])
    return "; ".join(parts)


def _clean_schema(node: Any) -> Any:
    """Drop pydantic's generated titles: noise to a model, and tokens on every request."""
    if isinstance(node, list):
        return [_clean_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "title" and isinstance(value, str):
            continue
        if key in _NOT_SCHEMAS:
            out[key] = value
        elif key in _NAMED_SCHEMAS and isinstance(value, dict):
            out[key] = {name: _clean_schema(schema) for name, schema in value.items()}
        else:
            out[key] = _clean_schema(value)
    return out
