"""Python functions as tools: schemas from hints and docstrings, validation, calls, metadata."""

from __future__ import annotations

import itertools
import logging
import sys
import threading
from pathlib import Path
from typing import Annotated, Any

import anyio
import docstring_parser
import pytest
from pydantic import Field

from loopgate.contracts.messages import ToolCall
from loopgate.gateway.reference.types import LoopContext, ToolResult
from loopgate.gateway.tools import FunctionTools, tool
from tests.tools.conftest import CTX

pytestmark = pytest.mark.anyio
SAMPLE = "tests.tools.sample_tools"
_names = itertools.count()


@pytest.fixture(scope="module")
def sample() -> FunctionTools:
    return FunctionTools.from_module(SAMPLE)


async def call(tools: FunctionTools, name: str, /, **args: Any) -> ToolResult:
    return await tools.execute(ToolCall(id="c1", name=name, arguments=args), CTX)


def params(tools: FunctionTools, name: str) -> dict[str, Any]:
    return next(spec.parameters for spec in tools.specs() if spec.name == name)


def write_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str) -> str:
    """A fresh module on sys.path, named uniquely so no test sees another's import."""
    name = f"lg_tools_{next(_names)}"
    (tmp_path / f"{name}.py").write_text(source, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


# --- which functions ------------------------------------------------------------------------


def test_module_offers_its_public_functions_in_definition_order(sample: FunctionTools):
    assert [spec.name for spec in sample.specs()] == [
        "google",
        "numpy_style",
        "rest_style",
        "untyped",
        "async_add",
        "where_am_i",
        "nothing",
        "refuse",
        "crash",
        "custom_result",
        "looked_up",
        "write-it",
    ]  # no _private_helper, no imported tool(), ToolFailure, BaseModel …


def test_dunder_all_chooses_even_imported_functions():
    tools = FunctionTools.from_module("tests.tools.sample_exported")
    assert [spec.name for spec in tools.specs()] == ["dedent", "shout"]
    assert params(tools, "dedent")["properties"] == {"text": {}}


async def test_a_hand_set_marker_works_without_importing_loopgate():
    tools = FunctionTools.from_module("tests.tools.sample_exported")
    assert tools.kind("shout") == "think"
    assert tools.concurrency_safe(ToolCall(id="1", name="shout"))
    assert (await call(tools, "shout", text="hey")).content == "HEY"


# --- schemas ----------------------------------------------------------------------------------


def test_google_docstring_and_hints(sample: FunctionTools):
    spec = next(s for s in sample.specs() if s.name == "google")
    assert spec.description == "Forecast the weather.\n\nLooks a few days ahead."
    assert spec.parameters == {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "The city to forecast for."},
            "days": {"type": "integer", "default": 3, "description": "How many days ahead."},
            "units": {
                "type": "string",
                "enum": ["metric", "imperial"],
                "default": "metric",
                "description": "Metric or imperial.",
            },
        },
        "required": ["city"],
        "additionalProperties": False,
    }


def test_numpy_docstring_optional_and_list(sample: FunctionTools):
    spec = next(s for s in sample.specs() if s.name == "numpy_style")
    assert spec.description == "Sum values."
    assert spec.parameters["required"] == ["values"]
    assert spec.parameters["properties"] == {
        "values": {
            "type": "array",
            "items": {"type": "integer"},
            "description": "The numbers to add.",
        },
        "scale": {
            "anyOf": [{"type": "number"}, {"type": "null"}],
            "default": None,
            "description": "Multiply the sum by this.",
        },
    }


def test_rest_docstring_nested_model_typeddict_and_dict(sample: FunctionTools):
    schema = params(sample, "rest_style")
    assert schema["required"] == ["points", "owner"]
    props = schema["properties"]
    assert props["points"] == {
        "type": "array",
        "items": {"$ref": "#/$defs/Point"},
        "description": "The points.",
    }
    assert props["owner"] == {"$ref": "#/$defs/Person", "description": "Who asks."}
    assert props["tags"]["description"] == "Free-form labels."
    assert schema["$defs"]["Point"] == {
        "type": "object",
        "properties": {"x": {"type": "number"}, "y": {"type": "number", "default": 0.0}},
        "required": ["x"],
    }
    assert schema["$defs"]["Person"]["required"] == ["name", "age"]


def test_no_generated_titles_anywhere(sample: FunctionTools):
    assert '"title"' not in str(sample.specs()).replace("'", '"')


def test_a_parameter_named_title_keeps_its_name_and_its_default():
    def make(title: str = "untitled", model_config: dict[str, Any] | None = None) -> str:
        """Make a thing."""
        return title

    schema = FunctionTools([make]).specs()[0].parameters
    assert list(schema["properties"]) == ["title", "model_config"]
    assert schema["properties"]["title"] == {"type": "string", "default": "untitled"}
    assert "required" not in schema


def test_unannotated_parameters_take_anything(sample: FunctionTools):
    schema = params(sample, "untyped")
    assert schema["properties"] == {"anything": {}, "flag": {"default": False}}
    assert schema["required"] == ["anything"]


def test_annotated_field_descriptions_are_kept():
    def pick(n: Annotated[int, Field(ge=1, le=10, description="How many")]) -> int:
        return n

    assert FunctionTools([pick]).specs()[0].parameters["properties"]["n"] == {
        "type": "integer",
        "minimum": 1,
        "maximum": 10,
        "description": "How many",
    }


def test_the_loop_context_is_not_in_the_schema(sample: FunctionTools):
    assert params(sample, "where_am_i")["properties"] == {"note": {"type": "string", "default": ""}}


# --- calls ------------------------------------------------------------------------------------


async def test_sync_function_runs_in_a_worker_thread():
    seen: list[threading.Thread] = []

    def where() -> str:
        seen.append(threading.current_thread())
        return "ok"

    assert (await call(FunctionTools([where]), "where")).content == "ok"
    assert seen and seen[0] is not threading.main_thread()


async def test_async_function_is_awaited(sample: FunctionTools):
    result = await call(sample, "async_add", a=2, b=40)
    assert result == ToolResult(success=True, content="42", data=42)


async def test_lax_coercion_then_json_result(sample: FunctionTools):
    result = await call(sample, "numpy_style", values=["1", 2, 3.0], scale="2")
    assert result.success
    assert result.content == '{"total":12.0}'
    assert result.data == {"total": 12.0}


async def test_nested_models_arrive_as_models_and_return_as_json(sample: FunctionTools):
    result = await call(
        sample, "rest_style", points=[{"x": 0}, {"x": 2, "y": 4}], owner={"name": "Ada", "age": 36}
    )
    assert result.data == {"x": 1.0, "y": 2.0}
    assert result.content == '{"x":1.0,"y":2.0}'


async def test_str_and_none_results(sample: FunctionTools):
    assert await call(sample, "google", city="Oslo") == ToolResult(
        success=True, content="Oslo 3 metric"
    )
    assert await call(sample, "nothing") == ToolResult(success=True, content="")


async def test_a_returned_tool_result_is_used_as_is(sample: FunctionTools):
    assert await call(sample, "custom_result") == ToolResult(
        success=True, content="custom", data={"k": 1}, suspend=True
    )


async def test_context_is_injected(sample: FunctionTools):
    ctx = LoopContext(round=7, elapsed_ms=1.0, history=[])
    the_call = ToolCall(id="c1", name="where_am_i", arguments={"note": "here"})
    assert (await sample.execute(the_call, ctx)).content == "round 7 here"


async def test_context_cannot_be_passed_by_the_model(sample: FunctionTools):
    result = await call(sample, "where_am_i", ctx={"round": 99})
    assert result.success is False
    assert result.error == "where_am_i: argument 'ctx': Extra inputs are not permitted"


@pytest.mark.parametrize(
    ("tool_name", "args", "error"),
    [
        ("google", {}, "google: argument 'city': Field required"),
        (
            "google",
            {"city": "Oslo", "days": "soon"},
            "google: argument 'days': Input should be a valid integer, unable to parse string"
            " as an integer",
        ),
        (
            "google",
            {"city": "Oslo", "units": "kelvin"},
            "google: argument 'units': Input should be 'metric' or 'imperial'",
        ),
        (
            "rest_style",
            {"points": [{"x": 1}, {"y": 2}], "owner": {"name": "A", "age": 1}},
            "rest_style: argument 'points[1].x': Field required",
        ),
        ("looked_up", {"key": "k", "extra": 1}, "looked_up: argument 'extra': Extra inputs are"),
    ],
)
async def test_validation_errors_name_the_argument(
    sample: FunctionTools, tool_name: str, args: dict[str, Any], error: str
):
    result = await call(sample, tool_name, **args)
    assert result.success is False
    assert result.error is not None and result.error.startswith(error)
    assert "Traceback" not in result.error and "https://" not in result.error


async def test_tool_failure_reaches_the_model(sample: FunctionTools):
    result = await call(sample, "refuse", reason="not today")
    assert result == ToolResult(success=False, error="refuse: refused: not today")


async def test_other_exceptions_are_logged_not_shown(
    sample: FunctionTools, caplog: pytest.LogCaptureFixture
):
    with caplog.at_level(logging.ERROR, logger="loopgate.tools"):
        result = await call(sample, "crash")
    assert result == ToolResult(success=False, error="crash failed with an internal error")
    assert "hunter2" not in str(result)
    assert any("hunter2" in (r.exc_text or "") for r in caplog.records)


async def test_a_value_that_is_not_json_is_an_error():
    def odd() -> object:
        return object()

    result = await call(FunctionTools([odd]), "odd")
    assert result == ToolResult(
        success=False, error="odd returned a value that cannot be sent as JSON"
    )


async def test_unknown_tool(sample: FunctionTools):
    assert await call(sample, "nope") == ToolResult(success=False, error="unknown tool 'nope'")


async def test_a_slow_sync_tool_does_not_hold_up_cancellation():
    release = threading.Event()

    def stuck() -> str:
        release.wait(10)
        return "late"

    tools = FunctionTools([stuck])
    try:
        with anyio.move_on_after(0.1) as scope:
            await call(tools, "stuck")
        assert scope.cancelled_caught
    finally:
        release.set()


# --- metadata and the decorator ---------------------------------------------------------------


def test_decorator_metadata(sample: FunctionTools):
    read = ToolCall(id="1", name="looked_up")
    write = ToolCall(id="2", name="write-it")
    assert sample.kind("looked_up") == "read"
    assert sample.concurrency_safe(read) and not sample.needs_approval(read)
    assert sample.kind("write-it") == "edit"
    assert sample.needs_approval(write) and not sample.concurrency_safe(write)
    assert sample.kind("google") == "other"
    assert not sample.needs_approval(ToolCall(id="3", name="google"))
    assert sample.meta("nope") is None and sample.kind("nope") == "other"


async def test_decorator_leaves_the_function_callable():
    @tool
    def bare(x: int) -> int:
        return x + 1

    assert bare(1) == 2
    assert bare.__loopgate_tool__["kind"] == "other"  # type: ignore[attr-defined]
    assert (await call(FunctionTools([bare]), "bare", x=1)).content == "2"


def test_decorator_rejects_bad_kinds_and_names():
    with pytest.raises(ValueError, match="unknown tool kind 'write'"):
        tool(kind="write")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="invalid tool name 'no spaces'"):
        tool(name="no spaces")


# --- what cannot be a tool --------------------------------------------------------------------


def test_star_args_are_refused():
    def spread(*items: int) -> int:
        return sum(items)

    def options(**kw: str) -> str:
        return ""

    with pytest.raises(ValueError, match=r"tool 'spread': \*items is not supported"):
        FunctionTools([spread])
    with pytest.raises(ValueError, match=r"tool 'options': \*\*kw is not supported"):
        FunctionTools([options])


def test_duplicate_names_are_refused():
    @tool(name="same")
    def one() -> None: ...

    @tool(name="same")
    def two() -> None: ...

    with pytest.raises(ValueError, match="two functions are named 'same'"):
        FunctionTools([one, two])


class Opaque:
    """A plain class: pydantic has no schema for it."""


def test_a_type_pydantic_cannot_describe_is_refused_at_load():
    def use(thing: Opaque) -> None: ...

    with pytest.raises(ValueError, match="tool 'use': no JSON schema for its parameters"):
        FunctionTools([use])


def test_hints_that_cannot_be_resolved_are_refused_at_load():
    class Local:
        pass

    def use(thing: Local) -> None: ...  # a string under postponed evaluation: unresolvable

    with pytest.raises(ValueError, match="tool 'use': its type hints cannot be resolved"):
        FunctionTools([use])


def test_missing_module():
    with pytest.raises(ValueError) as info:
        FunctionTools.from_module("no_such_pkg.tools")
    assert str(info.value).startswith(
        "--tools no_such_pkg.tools: no module named 'no_such_pkg.tools' in "
    )


def test_a_module_in_the_current_directory_is_found_as_loop_modules_are(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    name = f"lg_tools_{next(_names)}"
    (tmp_path / f"{name}.py").write_text("def ping() -> str:\n    return 'pong'\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".")])
    assert [spec.name for spec in FunctionTools.from_module(name).specs()] == ["ping"]


def test_module_that_fails_to_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    name = write_module(tmp_path, monkeypatch, "SECRET = 'hunter2'\nraise KeyError(SECRET)\n")
    with pytest.raises(ValueError) as info:
        FunctionTools.from_module(name)
    # Where it failed, not the exception's text, which may hold a secret.
    where = tmp_path / f"{name}.py"
    assert str(info.value) == f"--tools {name}: {where}:2: KeyError while importing"
    assert isinstance(info.value.__cause__, KeyError)  # kept for the caller's log


def test_module_with_a_syntax_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    name = write_module(tmp_path, monkeypatch, "def broken(:\n")
    with pytest.raises(ValueError, match=f"^--tools {name}: .*{name}.py:1: SyntaxError: "):
        FunctionTools.from_module(name)


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("X = 1\n", "has no tools: it defines no public function"),
        ("from os.path import basename\n", "has no tools: it defines no public function"),
        ("def _hidden():\n    pass\n", "has no tools: it defines no public function"),
        ("__all__ = []\n", "__all__ is empty"),
        ("__all__ = ['ghost']\n", "__all__ names 'ghost', not defined"),
        ("__all__ = ['K']\nclass K:\n    pass\n", "K is not a function"),
    ],
)
def test_modules_without_tools(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, message: str
):
    name = write_module(tmp_path, monkeypatch, source)
    with pytest.raises(ValueError, match=message):
        FunctionTools.from_module(name)


async def test_an_optional_context_is_injected_too():
    def maybe(ctx: LoopContext | None = None, rounds: list[int] | None = None) -> str:
        return f"round {ctx.round if ctx else '?'}"

    tools = FunctionTools([maybe])
    assert list(tools.specs()[0].parameters["properties"]) == ["rounds"]
    assert (await call(tools, "maybe")).content == "round 1"


async def test_a_callable_object_with_an_async_call():
    class Adder:
        async def __call__(self, a: int, b: int = 1) -> int:
            """Add."""
            return a + b

    tools = FunctionTools([tool(name="adder")(Adder())])
    assert tools.specs()[0].parameters["required"] == ["a"]
    assert (await call(tools, "adder", a=41)).content == "42"


def test_a_docstring_no_style_can_read_is_still_the_description(
    monkeypatch: pytest.MonkeyPatch,
):
    def fussy(x: int) -> int:
        """Do a fussy thing."""
        return x

    def refuse(text: str) -> None:
        raise docstring_parser.ParseError("unreadable")

    monkeypatch.setattr(docstring_parser, "parse", refuse)
    spec = FunctionTools([fussy]).specs()[0]
    assert spec.description == "Do a fussy thing."
    assert spec.parameters["properties"] == {"x": {"type": "integer"}}
