"""A pydantic-ai ``Agent`` served as a loopgate loop.

    from . import pydantic_ai_loop

    loop = pydantic_ai_loop(agent)  # loopgate serve --loop my_module:loop

Each run drives ``agent.iter()`` node by node and turns what the nodes stream into LoopEvents:

| pydantic-ai | LoopEvent |
|---|---|
| a ``ModelRequestNode`` | ``stage_start`` + ``llm_request`` … ``llm_response`` (usage) |
| text and thinking parts | ``content_delta`` / ``reasoning_delta`` |
| ``FunctionToolCallEvent`` | ``tool_call_start`` |
| ``FunctionToolResultEvent`` | ``tool_call_result`` (``success`` for the ``success`` outcome) |
| a tool that raises (pydantic-ai ends the run) | ``tool_error`` + ``error{phase: tool}`` |
| a round that called tools | ``stage_complete`` + ``completion{executing}`` |
| the output | ``completion{completed}``; output that is not ``str`` first goes out as JSON text |
| ``DeferredToolRequests`` output | ``completion{waiting_user, pendingToolCallIds}`` |

Client tools (``ctx.tools``) become an ``ExternalToolset``: the model's call to one ends the turn
waiting for the client. Calls that need approval (``requires_approval=True``, ``ApprovalRequired``,
or every call when the request says ``approval: "always"``) ask ``ctx.ask_permission``. Steering
messages go in with ``AgentRun.enqueue`` at round boundaries: before each model request, and after
an answer (pydantic-ai then asks the model once more). A turn that ends waiting for the client
leaves steering that came during its tool round with the gateway.

asyncio only, as pydantic-ai's own cancellation is.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from typing import Any

from pydantic_ai import ModelSettings, UsageLimits
from pydantic_ai.agent import AbstractAgent
from pydantic_ai.models import Model

from ....contracts.envelope import LoopEvent
from ....contracts.loop import RunContext
from .bridge import Options
from .content import ACCEPTS
from .history import to_message_history
from .turn import Turn

__all__ = ["pydantic_ai_loop", "to_message_history"]

PydanticAiLoop = Callable[[RunContext], AsyncIterator[LoopEvent]]


def pydantic_ai_loop(
    agent: AbstractAgent[Any, Any],
    *,
    deps: Any = None,
    deps_factory: Callable[[RunContext], Any] | None = None,
    model: Model | str | None = None,
    model_settings: ModelSettings | None = None,
    usage_limits: UsageLimits | None = None,
    client_tools: bool = True,
) -> PydanticAiLoop:
    """An async generator function that runs ``agent`` once per loopgate run.

    ``deps`` is passed to every run; ``deps_factory(ctx)`` makes them per run instead. ``model``,
    ``model_settings`` and ``usage_limits`` go to ``agent.iter``. The run's config fills in what
    they leave open: ``temperature`` and ``max_tokens`` (``model_settings`` wins), ``max_rounds``
    as the request limit and ``budget`` as the total token limit (unless ``usage_limits``).

    With ``client_tools=False`` the tools a client offers are not shown to the model. Otherwise
    runs that have them add ``DeferredToolRequests`` to the agent's output type, which
    pydantic-ai refuses for an agent with output validators: add it to such an agent's own
    ``output_type``, or turn client tools off.
    """
    if deps is not None and deps_factory is not None:
        raise ValueError("pass deps or deps_factory, not both")
    options = Options(
        agent=agent,
        deps=deps,
        deps_factory=deps_factory,
        model=model,
        model_settings=model_settings,
        usage_limits=usage_limits,
        client_tools=client_tools,
    )

    async def loop(ctx: RunContext) -> AsyncIterator[LoopEvent]:
        async with aclosing(Turn(options, ctx).events()) as events:
            async for event in events:
                yield event

    # Attachments go to the agent's model as pydantic-ai content (content.py).
    loop.accepts = ACCEPTS  # type: ignore[attr-defined]
    return loop
