"""Built-in demo tools, safe by construction: no eval, no shell, no path outside the workspace."""

from __future__ import annotations

import ast
import datetime as dt
import math
import operator
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Literal

import anyio
import msgspec

from ...contracts.messages import ToolCall, ToolSpec
from .types import LoopContext, ToolResult

ToolKind = Literal["read", "edit", "delete", "move", "search", "execute", "think", "fetch", "other"]


class ToolFailure(Exception):
    """A tool refused its input; the message is meant for the model and the user."""


class ToolMeta(msgspec.Struct, frozen=True, kw_only=True):
    """What a front end needs beyond the spec: ACP tool kind and whether to ask first."""

    kind: ToolKind
    needs_approval: bool = False
    concurrency_safe: bool = False


Handler = Callable[[dict[str, Any]], Awaitable[ToolResult]]


class ToolMetaLookup:
    """What a front end asks of a tool set (ACP kind, ask first?, may overlap?), answered from
    each tool's :class:`ToolMeta`; a tool set says how to find that in ``meta``."""

    def meta(self, name: str) -> ToolMeta | None:
        raise NotImplementedError

    def kind(self, name: str) -> ToolKind:
        meta = self.meta(name)
        return meta.kind if meta else "other"

    def needs_approval(self, call: ToolCall) -> bool:
        meta = self.meta(call.name)
        return bool(meta and meta.needs_approval)

    def concurrency_safe(self, call: ToolCall) -> bool:
        meta = self.meta(call.name)
        return bool(meta and meta.concurrency_safe)


# --- a small JSON Schema subset for our own tool schemas ---------------------------------------

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
}


def validate_arguments(args: dict[str, Any], schema: dict[str, Any]) -> str | None:
    """Check ``args`` against a flat object schema; returns an error message or ``None``."""
    props: dict[str, Any] = schema.get("properties", {})
    for name in schema.get("required", []):
        if name not in args:
            return f"missing required argument {name!r}"
    if schema.get("additionalProperties") is False:
        extra = sorted(set(args) - set(props))
        if extra:
            return f"unknown argument {extra[0]!r}"
    for name, value in args.items():
        rule = props.get(name)
        if rule is None:
            continue
        problem = _check_value(name, value, rule)
        if problem is not None:
            return problem
    return None


def _check_value(name: str, value: Any, rule: dict[str, Any]) -> str | None:
    expected: Any = rule.get("type")
    types = _JSON_TYPES.get(expected, (object,))
    if (isinstance(value, bool) and expected != "boolean") or not isinstance(value, types):
        return f"argument {name!r} must be of type {expected}"
    if isinstance(value, str):
        return _check_string(name, value, rule)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return _check_number(name, value, rule)
    return None


def _check_string(name: str, value: str, rule: dict[str, Any]) -> str | None:
    if len(value) > rule.get("maxLength", 1 << 62):
        return f"argument {name!r} is longer than {rule['maxLength']} characters"
    if len(value) < rule.get("minLength", 0):
        return f"argument {name!r} must not be empty"
    pattern = rule.get("pattern")
    if pattern and not re.fullmatch(pattern, value):
        return f"argument {name!r} does not match {pattern}"
    return None


def _check_number(name: str, value: int | float, rule: dict[str, Any]) -> str | None:
    if "minimum" in rule and value < rule["minimum"]:
        return f"argument {name!r} must be >= {rule['minimum']}"
    if "maximum" in rule and value > rule["maximum"]:
        return f"argument {name!r} must be <= {rule['maximum']}"
    return None


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def _spec(name: str, description: str, properties: dict[str, Any]) -> ToolSpec:
    """A demo tool's spec: every property is required, no others are allowed."""
    return ToolSpec(
        name=name, description=description, parameters=_schema(properties, list(properties))
    )


# --- the calculator ---------------------------------------------------------------------------

MAX_EXPRESSION_CHARS = 200
MAX_EXPONENT = 1000
MAX_INT_BITS = 4096

_BINOPS: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}


def calculate(expression: str) -> int | float:
    """Evaluate arithmetic by walking a whitelist of AST nodes; anything else is refused."""
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ToolFailure(f"expression is longer than {MAX_EXPRESSION_CHARS} characters")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError:
        raise ToolFailure("not a valid arithmetic expression") from None
    return _eval(tree.body)


def _eval(node: ast.AST) -> int | float:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int | float):
            raise ToolFailure("only numbers are allowed")
        return _checked(node.value)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _checked(_UNARY[type(node.op)](_eval(node.operand)))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow):
            if abs(right) > MAX_EXPONENT:
                raise ToolFailure(f"exponent is larger than {MAX_EXPONENT}")
            # Bound the result size before computing it: bits(left**right) ≈ right·bits(left).
            if (
                isinstance(left, int)
                and isinstance(right, int)
                and right > 0
                and left.bit_length() * right > MAX_INT_BITS
            ):
                raise ToolFailure("result would be too large")
        try:
            return _checked(_BINOPS[type(node.op)](left, right))
        except ZeroDivisionError:
            raise ToolFailure("division by zero") from None
        except OverflowError:
            raise ToolFailure("result would be too large") from None
    if isinstance(node, ast.Name):
        raise ToolFailure(f"names are not allowed ({node.id})")
    if isinstance(node, ast.Call):
        raise ToolFailure("function calls are not allowed")
    raise ToolFailure(f"{type(node).__name__} is not allowed in an arithmetic expression")


def _checked(value: Any) -> int | float:
    if not isinstance(value, int | float):
        raise ToolFailure("the result is not a real number")
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise ToolFailure("result would be too large")
    if isinstance(value, float) and not math.isfinite(value):
        raise ToolFailure("result would be too large")  # 1e308 * 10 is inf, not an error
    return value


# --- the executor -----------------------------------------------------------------------------

NOTE_NAME = r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}"


_DEMO_META: dict[str, ToolMeta] = {
    "clock": ToolMeta(kind="other", concurrency_safe=True),
    "calculate": ToolMeta(kind="think", concurrency_safe=True),
    "read_file": ToolMeta(kind="read", concurrency_safe=True),
    "sleep": ToolMeta(kind="other"),
    "ask_user": ToolMeta(kind="other"),
    "write_note": ToolMeta(kind="edit", needs_approval=True),
    "lorem": ToolMeta(kind="other", concurrency_safe=True),
}


def _demo_specs(sleep_cap_s: float, max_generate_chars: int) -> list[ToolSpec]:
    return [
        _spec("clock", "The current date and time in UTC (ISO 8601).", {}),
        _spec(
            "calculate",
            "Evaluate an arithmetic expression (+ - * / // % ** and parens).",
            {"expression": {"type": "string", "minLength": 1, "maxLength": MAX_EXPRESSION_CHARS}},
        ),
        _spec(
            "read_file",
            "Read a UTF-8 text file inside the workspace (relative path).",
            {"path": {"type": "string", "minLength": 1, "maxLength": 1024}},
        ),
        _spec(
            "sleep",
            f"Wait for a number of seconds (at most {sleep_cap_s:g}).",
            {"seconds": {"type": "number", "minimum": 0}},
        ),
        _spec(
            "ask_user",
            "Ask the user a question; the turn pauses until they answer.",
            {"question": {"type": "string", "minLength": 1, "maxLength": 2000}},
        ),
        _spec(
            "write_note",
            "Write a markdown note to notes/<name>.md in the workspace.",
            {
                "name": {"type": "string", "pattern": NOTE_NAME},
                "text": {"type": "string", "maxLength": 65536},
            },
        ),
        _spec(
            "lorem",
            "Generate deterministic filler text of a given size in characters.",
            {"size": {"type": "integer", "minimum": 1, "maximum": max_generate_chars}},
        ),
    ]


class DemoTools(ToolMetaLookup):
    """A ``ToolExecutor`` with clock, calculate, read_file, sleep, ask_user, write_note and lorem.

    ``read_file`` and ``write_note`` are confined to ``workspace``; ``sleep`` is capped at
    ``sleep_cap_s`` so timeout demos stay bounded even with a generous tool timeout.
    """

    def __init__(
        self,
        workspace: Path,
        sleep_cap_s: float = 60.0,
        max_read_bytes: int = 1_000_000,
        max_generate_chars: int = 2_000_000,
    ) -> None:
        self.workspace = Path(workspace)
        self.sleep_cap_s = sleep_cap_s
        self.max_read_bytes = max_read_bytes
        self.max_generate_chars = max_generate_chars
        handlers: dict[str, Handler] = {
            "clock": self._clock,
            "calculate": self._calculate,
            "read_file": self._read_file,
            "sleep": self._sleep,
            "ask_user": self._ask_user,
            "write_note": self._write_note,
            "lorem": self._lorem,
        }
        self._tools: dict[str, tuple[ToolSpec, ToolMeta, Handler]] = {
            spec.name: (spec, _DEMO_META[spec.name], handlers[spec.name])
            for spec in _demo_specs(sleep_cap_s, max_generate_chars)
        }

    # --- the ToolExecutor port ----------------------------------------------------------------

    def specs(self) -> list[ToolSpec]:
        return [spec for spec, _, _ in self._tools.values()]

    def meta(self, name: str) -> ToolMeta | None:
        entry = self._tools.get(name)
        return entry[1] if entry else None

    async def execute(self, call: ToolCall, ctx: LoopContext) -> ToolResult:
        entry = self._tools.get(call.name)
        if entry is None:
            return ToolResult(success=False, error=f"unknown tool {call.name!r}")
        spec, _, handler = entry
        problem = validate_arguments(call.arguments, spec.parameters)
        if problem is not None:
            return ToolResult(success=False, error=f"{call.name}: {problem}")
        try:
            return await handler(call.arguments)
        except ToolFailure as exc:
            return ToolResult(success=False, error=f"{call.name}: {exc}")

    # --- handlers -----------------------------------------------------------------------------

    async def _clock(self, args: dict[str, Any]) -> ToolResult:
        now = dt.datetime.now(dt.UTC).replace(microsecond=0)
        return ToolResult(success=True, content=now.isoformat(), data={"utc": now.isoformat()})

    async def _calculate(self, args: dict[str, Any]) -> ToolResult:
        value = calculate(args["expression"])
        text = repr(value) if isinstance(value, float) else str(value)
        return ToolResult(success=True, content=text, data={"value": value})

    async def _read_file(self, args: dict[str, Any]) -> ToolResult:
        target = self._inside_workspace(args["path"])
        text = await anyio.to_thread.run_sync(self._read_text, target, args["path"])
        return ToolResult(success=True, content=text, data={"path": args["path"]})

    def _inside_workspace(self, rel: str) -> Path:
        if "\x00" in rel:
            raise ToolFailure("invalid path")
        candidate = Path(rel)
        if candidate.is_absolute() or rel.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", rel):
            raise ToolFailure("absolute paths are not allowed; use a path inside the workspace")
        root = self.workspace.resolve()
        # resolve() follows symlinks, so a link pointing outside is caught here too.
        target = (root / candidate).resolve()
        if target != root and not target.is_relative_to(root):
            raise ToolFailure(f"{rel!r} is outside the workspace")
        return target

    def _read_text(self, target: Path, rel: str) -> str:
        if not target.exists():
            raise ToolFailure(f"no such file: {rel}")
        if not target.is_file():
            raise ToolFailure(f"not a regular file: {rel}")
        size = target.stat().st_size
        if size > self.max_read_bytes:
            raise ToolFailure(f"file is too large ({size} bytes; limit {self.max_read_bytes})")
        with target.open("rb") as fh:
            raw = fh.read(self.max_read_bytes + 1)
        return raw[: self.max_read_bytes].decode("utf-8", errors="replace")

    async def _sleep(self, args: dict[str, Any]) -> ToolResult:
        seconds = min(float(args["seconds"]), self.sleep_cap_s)
        await anyio.sleep(seconds)
        return ToolResult(success=True, content=f"slept {seconds:g} s")

    async def _ask_user(self, args: dict[str, Any]) -> ToolResult:
        question = args["question"]
        return ToolResult(
            success=True,
            content=question,
            data={"question": question, "reason": "ask_user"},
            suspend=True,
        )

    async def _write_note(self, args: dict[str, Any]) -> ToolResult:
        notes = self.workspace / "notes"
        target = notes / f"{args['name']}.md"
        text: str = args["text"]

        def write() -> None:
            notes.mkdir(parents=True, exist_ok=True)
            root = self.workspace.resolve()
            if notes.is_symlink() or not notes.resolve().is_relative_to(root):
                raise ToolFailure("notes directory is outside the workspace")
            if target.is_symlink():
                raise ToolFailure("refusing to write through a symbolic link")
            target.write_text(text, encoding="utf-8")

        await anyio.to_thread.run_sync(write)
        return ToolResult(
            success=True,
            content=f"wrote notes/{target.name} ({len(text)} characters)",
            data={"path": f"notes/{target.name}"},
        )

    async def _lorem(self, args: dict[str, Any]) -> ToolResult:
        size: int = args["size"]
        base = (
            "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor "
            "incididunt ut labore et dolore magna aliqua.\n"
        )
        text = (base * (size // len(base) + 1))[:size]
        return ToolResult(success=True, content=text)
