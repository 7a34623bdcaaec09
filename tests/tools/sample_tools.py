"""Tools for the function-tool tests: every docstring style, sync and async, context, failures."""

from __future__ import annotations

from typing import Literal

import anyio.lowlevel
from pydantic import BaseModel
from typing_extensions import TypedDict

from loopgate.gateway.reference.tools import ToolFailure
from loopgate.gateway.reference.types import LoopContext, ToolResult
from loopgate.gateway.tools import tool


class Point(BaseModel):
    x: float
    y: float = 0.0


class Person(TypedDict):
    name: str
    age: int


def google(city: str, days: int = 3, units: Literal["metric", "imperial"] = "metric") -> str:
    """Forecast the weather.

    Looks a few days ahead.

    Args:
        city: The city to forecast for.
        days: How many days ahead.
        units: Metric or imperial.
    """
    return f"{city} {days} {units}"


def numpy_style(values: list[int], scale: float | None = None) -> dict[str, float]:
    """Sum values.

    Parameters
    ----------
    values : list of int
        The numbers to add.
    scale : float, optional
        Multiply the sum by this.
    """
    total = float(sum(values))
    return {"total": total * scale if scale is not None else total}


def rest_style(points: list[Point], owner: Person, tags: dict[str, str] | None = None) -> Point:
    """Find the centre of some points.

    :param points: The points.
    :param owner: Who asks.
    :param tags: Free-form labels.
    """
    n = len(points)
    return Point(x=sum(p.x for p in points) / n, y=sum(p.y for p in points) / n)


def untyped(anything, flag=False):
    """Echo whatever it gets."""
    return {"anything": anything, "flag": flag}


async def async_add(a: int, b: int) -> int:
    """Add two numbers, asynchronously."""
    await anyio.lowlevel.checkpoint()
    return a + b


def where_am_i(ctx: LoopContext, note: str = "") -> str:
    """Report the loop's round."""
    return f"round {ctx.round} {note}".strip()


def nothing() -> None:
    """Return nothing at all."""


def refuse(reason: str) -> str:
    """Refuse, with a reason the model may read."""
    raise ToolFailure(f"refused: {reason}")


def crash() -> str:
    """Fail inside, with a secret in the exception."""
    raise RuntimeError("database password is hunter2")


def custom_result() -> ToolResult:
    """Return a ToolResult as is."""
    return ToolResult(success=True, content="custom", data={"k": 1}, suspend=True)


@tool(kind="read", concurrency_safe=True)
def looked_up(key: str) -> str:
    """Look a key up."""
    return key.upper()


@tool(kind="edit", needs_approval=True, name="write-it")
async def write_it(text: str) -> str:
    """Write some text."""
    return f"wrote {len(text)}"


def _private_helper() -> None:
    """Not a tool: private."""
