"""The model side of a round: one request per attempt, its usage, and retries on failure.

Each attempt is announced by ``llm_request`` and closed by ``llm_response`` (with usage, or with
the error); ``on_request_error`` decides whether a failed attempt is retried.
"""

from __future__ import annotations

from typing import Any

import anyio

from ...contracts.messages import ToolSpec
from .hook_runner import HookRunner
from .hooks import MAX_REQUEST_ATTEMPTS, Fail, Retry
from .retry import RetryPlan
from .state import TurnState
from .streaming import (
    ModelFailure,
    Response,
    StreamedResponse,
    stream_response,
)
from .types import ModelRequest, ProviderError, unread_attachments

GENERIC_ERROR = "model request failed"


async def request_model(
    turn: TurnState, hooks: HookRunner, tools: list[ToolSpec]
) -> Response | None:
    """This round's model response, after retries; ``None`` = it failed and the turn is over."""
    attempt = 0
    plan = RetryPlan(turn.cfg)
    while True:
        attempt += 1
        try:
            return await _attempt(turn, hooks, tools, attempt)
        except ModelFailure as failure:
            if not await _after_failure(turn, hooks, failure.cause, attempt, plan):
                return None


async def _attempt(
    turn: TurnState, hooks: HookRunner, tools: list[ToolSpec], attempt: int
) -> Response:
    cfg = turn.cfg
    messages = list(turn.request_messages())
    announced: dict[str, Any] = {
        "round": turn.round,
        "attempt": attempt,
        "model": turn.loop.provider.model,
    }
    # Attachments the model only gets named are said to the client, not dropped silently.
    unread = unread_attachments(turn.loop.provider, messages)
    if unread:
        announced["attachmentsAsText"] = unread
    await turn.emit("llm_request", announced)
    request = ModelRequest(
        messages=messages,
        tools=tools,
        temperature=cfg.temperature,
        max_tokens=cfg.max_tokens,
        # A pre_step tool_choice means nothing to a request that offers no tools.
        tool_choice=turn.tool_choice if tools else None,
        response_format=cfg.response_format,
    )
    streamed = await stream_response(turn, hooks, request)
    response = streamed.response(turn.round)
    await turn.emit("llm_response", _responded(turn, streamed, response, attempt))
    return response


def _responded(
    turn: TurnState, streamed: StreamedResponse, response: Response, attempt: int
) -> dict[str, Any]:
    """Count the response into the turn; its ``llm_response`` payload."""
    turn.text_length += len(response.text)
    turn.finish_reason = streamed.finish or ("tool_calls" if response.calls else "stop")
    data: dict[str, Any] = {
        "round": turn.round,
        "attempt": attempt,
        "model": turn.loop.provider.model,
        "finishReason": turn.finish_reason,
    }
    usage = streamed.usage
    if usage is not None:
        turn.prompt_tokens += usage.prompt_tokens or 0
        turn.completion_tokens += usage.completion_tokens or 0
        price = turn.loop.price
        if price is not None:
            cost = price.cost(usage.prompt_tokens or 0, usage.completion_tokens or 0)
            data["costUsd"] = cost
            turn.cost_usd += cost
        for key, value in (
            ("promptTokens", usage.prompt_tokens),
            ("completionTokens", usage.completion_tokens),
            ("totalTokens", usage.total_tokens),
            ("reasoningTokens", usage.reasoning_tokens),
        ):
            if value is not None:
                data[key] = value
    return data


async def _after_failure(
    turn: TurnState, hooks: HookRunner, cause: BaseException, attempt: int, plan: RetryPlan
) -> bool:
    """A failed attempt: True = retry it; otherwise the turn ends as ``provider_error``.

    A hook's ``retry`` or ``fail`` decides; without one, the retry policy does
    (:mod:`.retry`)."""
    # Only ProviderError text is written for clients; anything else may leak internals.
    message = cause.message if isinstance(cause, ProviderError) else GENERIC_ERROR
    # Deltas of this attempt already reached clients: the policy must not send it again.
    streamed = bool(turn.live_text or turn.live_reasoning)
    policy_delay, why_not = plan.decide(cause, attempt, streamed)
    # Every hook is asked: the first retry wins, else the first fail.
    actions = await hooks.call("on_request_error", cause, attempt)
    action = next((a for a in actions if isinstance(a, Retry)), None) or next(iter(actions), None)
    if isinstance(action, Retry) and attempt >= MAX_REQUEST_ATTEMPTS:
        # The redo cap: a hook cannot retry a failing request forever.
        action = Fail()
        why_not = f"gave up after {attempt} attempts"
    failed: dict[str, Any] = {"round": turn.round, "attempt": attempt, "error": message}
    if isinstance(cause, ProviderError):
        failed["retryable"] = cause.retryable
    delay: int | None = None
    if isinstance(action, Retry):
        delay = max(0, action.delay_ms)
    elif action is None:
        delay = policy_delay
    if delay is not None:
        failed["retryInMs"] = delay
    await turn.emit("llm_response", failed)
    if why_not and delay is None:
        message = f"{message} ({why_not})"
    if isinstance(action, Retry):
        await hooks.announce("on_request_error", action, message, delayMs=delay)
    elif isinstance(action, Fail):
        await hooks.announce("on_request_error", action, message)
    if delay is not None:
        turn.live_text.clear()
        turn.live_reasoning.clear()
        await anyio.sleep(delay / 1000)
        return True
    turn.salvage()
    await turn.emit("error", {"message": message, "round": turn.round, "phase": "llm_stream"})
    await turn.finish("failed", "provider_error")
    return False
