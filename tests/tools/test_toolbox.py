"""ToolBox: demo tools, function tools and an MCP server behind one executor, in a real turn."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from loopgate.contracts.messages import Message, ToolCall
from loopgate.gateway.reference.core import CoreLoop
from loopgate.gateway.reference.tools import DemoTools
from loopgate.gateway.reference.types import ToolResult
from loopgate.gateway.tools import FunctionTools, ToolBox, tool
from loopgate.gateway.tools.mcp import McpTools
from loopgate.gateway.tools.mcp_specs import McpOptions, McpServerSpec
from tests.reference.loop_support import FakeProvider, calls, text
from tests.tools.conftest import CTX

pytestmark = pytest.mark.anyio


@tool(kind="read", concurrency_safe=True)
def shout(text: str) -> str:
    """Shout."""
    return text.upper()


@tool(kind="edit", needs_approval=True)
def store(key: str, value: str) -> str:
    """Store a value."""
    return f"stored {key}"


def echo(text: str) -> str:
    """An echo that clashes with the MCP server's."""
    return text


@pytest.fixture(scope="module")
async def mcp(fake_http_url: str) -> AsyncIterator[McpTools]:
    spec = McpServerSpec.from_url(fake_http_url, name="fake")
    async with McpTools.connect(spec, McpOptions(connect_timeout_s=20.0)) as tools:
        yield tools


@pytest.fixture
def box(tmp_path: Path, mcp: McpTools) -> ToolBox:
    return ToolBox([DemoTools(tmp_path), FunctionTools([shout, store]), mcp])


async def call(box: ToolBox, name: str, /, **args: Any) -> ToolResult:
    return await box.execute(ToolCall(id="c1", name=name, arguments=args), CTX)


async def test_specs_of_every_source_in_order(box: ToolBox, tmp_path: Path, mcp: McpTools):
    names = [spec.name for spec in box.specs()]
    demo = [spec.name for spec in DemoTools(tmp_path).specs()]
    assert names == [*demo, "shout", "store", *(spec.name for spec in mcp.specs())]


async def test_calls_go_to_the_tool_that_owns_the_name(box: ToolBox):
    assert (await call(box, "calculate", expression="6 * 7")).content == "42"
    assert (await call(box, "shout", text="hi")).content == "HI"
    assert (await call(box, "add", a=1, b=2)).content == "3"


async def test_unknown_tool(box: ToolBox):
    assert await call(box, "nope") == ToolResult(success=False, error="unknown tool 'nope'")


async def test_metadata_comes_from_the_owner(box: ToolBox):
    def c(name: str) -> ToolCall:
        return ToolCall(id="1", name=name)

    assert (box.kind("read_file"), box.kind("shout"), box.kind("read_note")) == (
        "read",
        "read",
        "read",
    )
    assert box.needs_approval(c("write_note"))  # demo
    assert box.needs_approval(c("store"))  # function
    assert box.needs_approval(c("delete_note"))  # MCP destructiveHint
    assert not box.needs_approval(c("add"))
    assert box.concurrency_safe(c("shout")) and box.concurrency_safe(c("read_note"))
    assert not box.concurrency_safe(c("store")) and not box.concurrency_safe(c("nope"))
    assert box.kind("nope") == "other" and not box.needs_approval(c("nope"))
    assert box.meta("store") is not None and box.meta("nope") is None


def test_a_name_defined_twice_names_both_sources(tmp_path: Path, mcp: McpTools):
    with pytest.raises(ValueError) as info:
        ToolBox([FunctionTools([shout, echo], source="module 'mine'"), mcp])
    assert str(info.value) == "tool 'echo' is defined by both module 'mine' and MCP server 'fake'"

    def clock() -> str:
        return "noon"

    with pytest.raises(ValueError, match="tool 'clock' is defined by both DemoTools and functions"):
        ToolBox([DemoTools(tmp_path), FunctionTools([clock])])


async def test_a_turn_of_the_reference_loop_through_the_box(box: ToolBox):
    provider = FakeProvider(
        calls(("add", {"a": 20, "b": 22}), ("shout", {"text": "done"})),
        text("The answer is 42."),
    )
    events: list[tuple[str, dict[str, Any]]] = []

    async def sink(kind: str, data: dict[str, Any]) -> None:
        events.append((kind, data))

    history = await CoreLoop(provider, box).run_turn([Message(role="user", content="go")], sink)
    results = [data for kind, data in events if kind == "tool_call_result"]
    assert [(r["name"], r["success"], r["resultPreview"]) for r in results] == [
        ("add", True, "42"),
        ("shout", True, "DONE"),
    ]
    offered = {spec.name for spec in provider.requests[0].tools}
    assert {"add", "shout", "calculate"} <= offered
    assert [m.content for m in history if m.role == "tool"] == ["42", "DONE"]
    assert events[-1][1]["status"] == "completed"
