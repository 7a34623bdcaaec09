"""A roster's loops are closed in the reverse order they were started."""

from __future__ import annotations

import pytest

from loopgate.gateway.agents.build import build_agents
from loopgate.gateway.agents.spec import AgentSpec
from loopgate.gateway.app import build_hub
from loopgate.gateway.settings import Settings

pytestmark = pytest.mark.anyio


async def test_two_agents_whose_loops_hold_task_groups_close_cleanly() -> None:
    # The reference loop's tools enter a task group as the loop starts: the second agent's,
    # entered later, has to be left first.
    agents = {"first": AgentSpec(), "second": AgentSpec()}
    async with build_hub(Settings(agents=agents, scripted_delay_s=0.0)) as hub:
        assert [info.name for info in await hub.agents()] == ["first", "second"]


async def test_an_agent_that_cannot_start_closes_the_ones_started_and_says_why() -> None:
    # The first agent's loop holds a task group when the second's start fails: closing it
    # must not trip over a cancel scope entered after it, and the error is the start's.
    agents = {
        "first": AgentSpec(),
        "second": AgentSpec(loop="tests.agents.failing_start:loop"),
    }
    roster = build_agents(Settings(agents=agents, scripted_delay_s=0.0))
    with pytest.raises(ValueError, match="out of reach"):
        await roster.start()
