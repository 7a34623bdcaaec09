"""Cancellation and steering from another task."""

from __future__ import annotations

import anyio
import pytest

from loopgate.gateway.reference.config import LoopConfig
from loopgate.gateway.reference.control import TurnControl
from loopgate.gateway.reference.core import CoreLoop
from loopgate.gateway.reference.types import TextChunk
from tests.reference.loop_support import (
    FakeExecutor,
    FakeProvider,
    Recorder,
    Sleep,
    calls,
    check_stream,
    ok,
    text,
    user,
)

pytestmark = pytest.mark.anyio


async def test_cancel_mid_text_is_prompt_and_keeps_partial_text():
    provider = FakeProvider([TextChunk("Hel"), TextChunk("lo "), Sleep(10), TextChunk("never")])
    loop = CoreLoop(provider, FakeExecutor({}))
    control = TurnControl()
    rec = Recorder()
    two_deltas = anyio.Event()
    rec.on_event = lambda kind, data: (
        two_deltas.set() if len(rec.of("content_delta")) == 2 else None
    )
    result: list = []

    async def turn() -> None:
        result.append(await loop.run_turn(user("hi"), rec, control))

    async with anyio.create_task_group() as tg:
        tg.start_soon(turn)
        await two_deltas.wait()
        cancelled_at = anyio.current_time()
        control.cancel()
        control.cancel()  # idempotent
    assert rec.times[-1] - cancelled_at < 0.05
    terminal = check_stream(rec.events)
    assert terminal["status"] == "cancelled"
    assert control.cancelled
    assert result[0][-1].role == "assistant" and result[0][-1].content == "Hello "
    assert "never" not in rec.text()


async def test_cancel_mid_tool_stops_the_tool_and_closes_history():
    provider = FakeProvider(calls(("hang", {}), ("quick", {})), text("never"))
    hanging = anyio.Event()

    async def hang(call):
        hanging.set()
        return await ok(delay=30)(call)

    executor = FakeExecutor({"hang": hang, "quick": ok()})
    loop = CoreLoop(provider, executor)
    control = TurnControl()
    rec = Recorder()
    result: list = []

    async def turn() -> None:
        result.append(await loop.run_turn(user("hi"), rec, control))

    start = anyio.current_time()
    async with anyio.create_task_group() as tg:
        tg.start_soon(turn)
        await hanging.wait()
        control.cancel()
    assert anyio.current_time() - start < 1
    assert executor.spans and executor.spans[0][2] - executor.spans[0][1] < 1  # tool cancelled
    terminal = check_stream(rec.events)
    assert terminal["status"] == "cancelled"
    assert len(provider.requests) == 1
    history = result[0]
    # Every call the assistant made has a tool message, so the history can go to a model again.
    ids = {c.id for m in history for c in m.tool_calls}
    assert ids == {m.tool_call_id for m in history if m.role == "tool"}


async def test_cancel_before_the_turn_starts():
    control = TurnControl()
    control.cancel()
    rec = Recorder()
    await CoreLoop(FakeProvider(text("x")), FakeExecutor({})).run_turn(user("hi"), rec, control)
    assert rec.kinds() == ["completion"] and rec.terminal["status"] == "cancelled"


async def test_outer_cancellation_still_emits_terminal_and_propagates():
    provider = FakeProvider([TextChunk("a"), Sleep(10)])
    rec = Recorder()
    with anyio.move_on_after(0.05):
        await CoreLoop(provider, FakeExecutor({})).run_turn(user("hi"), rec)
    assert check_stream(rec.events)["status"] == "cancelled"


async def test_steering_applies_at_next_round_boundary():
    provider = FakeProvider([Sleep(0.02), *calls(("a", {}))], text("steered answer"))
    loop = CoreLoop(provider, FakeExecutor({"a": ok()}))
    control = TurnControl()
    rec = Recorder()
    rec.on_event = lambda kind, data: (
        control.steer("focus on cost") if kind == "tool_call_start" else None
    )
    history = await loop.run_turn(user("hi"), rec, control)
    steer = rec.of("steer")
    assert steer == [{"content": "focus on cost", "round": 2}]
    kinds = rec.kinds()
    assert kinds.index("steer") > kinds.index("stage_complete")
    assert kinds[kinds.index("steer") + 1] == "stage_start"
    assert provider.requests[1].messages[-1].content == "focus on cost"
    assert [m.role for m in history] == ["user", "assistant", "tool", "user", "assistant"]
    check_stream(rec.events)


async def test_steering_during_final_answer_gets_another_round():
    provider = FakeProvider([TextChunk("first"), Sleep(0.02), TextChunk("!")], text("second"))
    loop = CoreLoop(provider, FakeExecutor({}))
    control = TurnControl()
    rec = Recorder()
    rec.on_event = lambda kind, data: (
        control.steer("also this") if kind == "content_delta" and data["delta"] == "first" else None
    )
    history = await loop.run_turn(user("hi"), rec, control)
    assert rec.of("steer") == [{"content": "also this", "round": 2}]
    assert [m.content for m in history] == ["hi", "first!", "also this", "second"]
    assert check_stream(rec.events)["status"] == "completed"


async def test_max_steer_chars():
    control = TurnControl()
    loop = CoreLoop(FakeProvider(text("x")), FakeExecutor({}), LoopConfig(max_steer_chars=5))
    rec = Recorder()

    def on_event(kind, data):
        if kind == "stage_start":
            with pytest.raises(ValueError, match="limit is 5"):
                control.steer("too long")
            control.steer("short")

    rec.on_event = on_event
    await loop.run_turn(user("hi"), rec, control)
    assert control.max_steer_chars == 5
    with pytest.raises(ValueError, match="non-empty"):
        control.steer("  ")
    with pytest.raises(ValueError):
        TurnControl(max_steer_chars=0)
