"""A roster's loops are closed in the reverse order they were started."""

from __future__ import annotations

import pytest

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
