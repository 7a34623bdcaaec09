"""Google ADK's ``RemoteA2aAgent`` using a loopgate agent as a sub-agent: the root agent's
model is a fake that hands the turn over (``transfer_to_agent``); the loopgate agent, reached
over A2A from its card, answers it."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

import pytest
from google.adk.agents import LlmAgent
from google.adk.agents.remote_a2a_agent import RemoteA2aAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import InMemoryRunner
from google.genai import types

pytestmark = [pytest.mark.anyio, pytest.mark.gateway(scripted_delay_s=0.002)]


class HandOver(BaseLlm):
    """The root agent's model: every turn goes to the sub-agent named ``loopgate``."""

    model: str = "hand-over"

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        call = types.FunctionCall(name="transfer_to_agent", args={"agent_name": "loopgate"})
        yield LlmResponse(
            content=types.Content(role="model", parts=[types.Part(function_call=call)])
        )


async def test_a_loopgate_agent_answers_as_an_adk_sub_agent(gateway: str) -> None:
    remote = RemoteA2aAgent(
        name="loopgate",
        description="an agent behind loopgate",
        agent_card=f"{gateway}/.well-known/agent-card.json",
        use_legacy=False,
    )
    root = LlmAgent(name="root", model=HandOver(), sub_agents=[remote], instruction="delegate")
    runner = InMemoryRunner(agent=root, app_name="adk-test")
    session = await runner.session_service.create_session(app_name="adk-test", user_id="u")
    question = types.Content(role="user", parts=[types.Part(text="one tool: what is 17 * 23")])
    said: list[str] = []
    states: list[Any] = []
    async for event in runner.run_async(user_id="u", session_id=session.id, new_message=question):
        if event.author != "loopgate" or event.partial:
            continue
        said += (
            [part.text for part in (event.content.parts or []) if part.text]
            if event.content
            else []
        )
        response = (event.custom_metadata or {}).get("a2a:response")
        if isinstance(response, dict):
            states.append(response["status"]["state"])
    assert said[-1] == "The result of 17 * 23 is 391."
    assert states[-1] == "TASK_STATE_COMPLETED"
