"""Demo tools: safe by construction."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

from loopgate.contracts.messages import ToolCall
from loopgate.gateway.reference.tools import DemoTools, ToolFailure, calculate
from loopgate.gateway.reference.types import LoopContext

pytestmark = pytest.mark.anyio
CTX = LoopContext(round=1, elapsed_ms=0, history=[])


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "hello.txt").write_text("hello world", encoding="utf-8")
    (ws / "sub").mkdir()
    (ws / "sub" / "inner.txt").write_text("inner", encoding="utf-8")
    (tmp_path / "secret.txt").write_text("top secret", encoding="utf-8")
    return ws


async def call(tools: DemoTools, tool: str, /, **args):
    return await tools.execute(ToolCall(id="c", name=tool, arguments=args), CTX)


@pytest.mark.parametrize(
    ("expr", "value"),
    [
        ("1 + 2 * 3", 7),
        ("(1 + 2) * 3", 9),
        ("-2 ** 2", -4),
        ("7 // 2", 3),
        ("7 % 4", 3),
        ("1 / 4", 0.25),
        ("2 ** 10", 1024),
        ("+3", 3),
        ("2 ** -1", 0.5),
    ],
)
def test_calculate_arithmetic(expr: str, value):
    assert calculate(expr) == value


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("x + 1", "names are not allowed"),
        ("__import__('os')", "function calls are not allowed"),
        ("abs(-1)", "function calls are not allowed"),
        ("(1).__class__", "Attribute is not allowed"),
        ("'a' * 3", "only numbers"),
        ("2 ** 100000", "exponent is larger"),
        ("99999 ** 999", "too large"),
        ("10 ** 500 * 10 ** 500 * 10 ** 500 * 10 ** 500", "too large"),
        ("2.5 ** 999", "too large"),
        ("1 / 0", "division by zero"),
        ("[1, 2]", "List is not allowed"),
        ("1 if 1 else 2", "IfExp is not allowed"),
        ("lambda: 1", "Lambda is not allowed"),
        ("1 +", "not a valid arithmetic expression"),
        ("1" * 300, "longer than 200"),
        ("(-1) ** 0.5", "not a real number"),
        ("True + 1", "only numbers"),
    ],
)
def test_calculate_rejects(expr: str, message: str):
    with pytest.raises(ToolFailure, match=message):
        calculate(expr)


async def test_read_file_inside_workspace(workspace: Path):
    tools = DemoTools(workspace)
    assert (await call(tools, "read_file", path="hello.txt")).content == "hello world"
    assert (await call(tools, "read_file", path="sub/../sub/inner.txt")).content == "inner"


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("../secret.txt", "outside the workspace"),
        ("sub/../../secret.txt", "outside the workspace"),
        ("/etc/passwd", "absolute paths are not allowed"),
        ("missing.txt", "no such file"),
        ("sub", "not a regular file"),
        ("a\x00b", "invalid path"),
    ],
)
async def test_read_file_rejections(workspace: Path, path: str, message: str):
    result = await call(DemoTools(workspace), "read_file", path=path)
    assert not result.success and message in (result.error or "")
    assert "top secret" not in result.content


async def test_read_file_symlink_escape(workspace: Path):
    os.symlink(workspace.parent / "secret.txt", workspace / "link.txt")
    os.symlink(workspace.parent, workspace / "up")
    tools = DemoTools(workspace)
    for path in ("link.txt", "up/secret.txt"):
        result = await call(tools, "read_file", path=path)
        assert not result.success and "outside the workspace" in (result.error or "")


async def test_read_file_size_cap(workspace: Path):
    (workspace / "big.txt").write_text("x" * 2000)
    result = await call(DemoTools(workspace, max_read_bytes=1000), "read_file", path="big.txt")
    assert not result.success and "too large" in (result.error or "")


@pytest.mark.parametrize(
    ("name", "args", "message"),
    [
        ("calculate", {}, "missing required argument 'expression'"),
        ("calculate", {"expression": 3}, "'expression' must be of type string"),
        ("calculate", {"expression": "1", "x": 1}, "unknown argument 'x'"),
        ("sleep", {"seconds": -1}, "must be >= 0"),
        ("sleep", {"seconds": True}, "must be of type number"),
        ("write_note", {"name": "../x", "text": "t"}, "does not match"),
        ("lorem", {"size": 10**9}, "must be <="),
        ("nope", {}, "unknown tool"),
    ],
)
async def test_argument_validation(workspace: Path, name: str, args: dict, message: str):
    result = await DemoTools(workspace).execute(ToolCall(id="c", name=name, arguments=args), CTX)
    assert not result.success and message in (result.error or "")


async def test_sleep_is_capped(workspace: Path):
    start = anyio.current_time()
    result = await call(DemoTools(workspace, sleep_cap_s=0.01), "sleep", seconds=100)
    assert result.success and anyio.current_time() - start < 1


async def test_ask_user_suspends(workspace: Path):
    result = await call(DemoTools(workspace), "ask_user", question="A or B?")
    assert result.suspend and result.content == "A or B?"


async def test_write_note_and_metadata(workspace: Path):
    tools = DemoTools(workspace)
    result = await call(tools, "write_note", name="todo", text="buy milk")
    assert result.success
    assert (workspace / "notes" / "todo.md").read_text() == "buy milk"
    note = ToolCall(id="1", name="write_note")
    read = ToolCall(id="2", name="read_file")
    assert tools.needs_approval(note) and not tools.needs_approval(read)
    assert tools.kind("read_file") == "read" and tools.kind("write_note") == "edit"
    assert tools.concurrency_safe(ToolCall(id="3", name="clock"))
    assert not tools.concurrency_safe(note)
    assert not tools.concurrency_safe(ToolCall(id="4", name="sleep"))


async def test_write_note_refuses_symlink(workspace: Path):
    (workspace / "notes").mkdir()
    os.symlink(workspace.parent / "secret.txt", workspace / "notes" / "evil.md")
    result = await call(DemoTools(workspace), "write_note", name="evil", text="x")
    assert not result.success
    assert (workspace.parent / "secret.txt").read_text() == "top secret"


async def test_every_spec_has_a_json_schema(workspace: Path):
    tools = DemoTools(workspace)
    names = {s.name for s in tools.specs()}
    assert {"clock", "calculate", "read_file", "sleep", "ask_user", "write_note"} <= names
    for spec in tools.specs():
        assert spec.parameters["type"] == "object"
        assert spec.parameters["additionalProperties"] is False
        assert tools.meta(spec.name) is not None


async def test_clock_and_lorem(workspace: Path):
    tools = DemoTools(workspace)
    assert (await call(tools, "clock")).content.endswith("+00:00")
    assert len((await call(tools, "lorem", size=12345)).content) == 12345
