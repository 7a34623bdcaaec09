"""A pydantic-ai agent served by loopgate: two real tools and a scripted model, so no key needed.

Run it from the repository root, with loopgate and its pydantic-ai extra installed:

    pip install -e ".[pydantic-ai]"
    loopgate serve --loop examples.pydantic_ai_agent:loop
    curl -s -X POST localhost:8000/v1/runs -H 'content-type: application/json' \\
         -d '{"input": "What time is it, and what is 25 * 16 + 2?"}'

The model is a pydantic-ai ``FunctionModel`` playing a script: it thinks, calls the tools the
question needs, then streams an answer made from their results. For a real model, give
``build_agent`` its name and set the provider's key, e.g.

    pip install "pydantic-ai-slim[openai]" && export OPENAI_API_KEY=...
    agent = build_agent("openai:gpt-5.2")
"""

from __future__ import annotations

import ast
import asyncio
import json
import operator
import re
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any

from pydantic_ai import (
    Agent,
    ModelMessage,
    ModelResponse,
    ModelRetry,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import Model
from pydantic_ai.models.function import (
    AgentInfo,
    DeltaThinkingCalls,
    DeltaThinkingPart,
    DeltaToolCall,
    DeltaToolCalls,
    FunctionModel,
)

from loopgate.gateway.integrations.pydantic_ai import pydantic_ai_loop

INSTRUCTIONS = "Answer questions about the current time and arithmetic; use the tools for both."
WORD_DELAY_S = 0.02  # the scripted model's pace, so that its answer visibly streams

# --- the tools ---------------------------------------------------------------------------------


def clock() -> str:
    """The current date and time in UTC, ISO 8601."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def calculate(expression: str) -> int | float:
    """Evaluate arithmetic: numbers, parentheses and + - * / // %.

    Args:
        expression: the expression, e.g. "25 * 16 + 2".
    """
    try:
        return _evaluate(ast.parse(expression, mode="eval").body)
    except (SyntaxError, ValueError, ZeroDivisionError) as exc:
        # ModelRetry hands the reason back to the model, which can then fix its call.
        raise ModelRetry(f"cannot calculate {expression!r}: {exc}") from None


_OPERATORS: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}


def _evaluate(node: ast.expr) -> int | float:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value  # type: ignore[no-any-return]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        value = _evaluate(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_evaluate(node.left), _evaluate(node.right))  # type: ignore[no-any-return]
    raise ValueError("only numbers, parentheses and + - * / // % are allowed")


# --- the scripted model --------------------------------------------------------------------------

_EXPRESSION = re.compile(r"[\d(][\d\s.()]*(?:[-+*/%]+[\d\s.()]+)+")


def scripted_model(word_delay_s: float = WORD_DELAY_S) -> FunctionModel:
    """A stand-in for a real model: think, call the tools the question needs, then answer."""

    async def stream(
        messages: list[ModelMessage], info: AgentInfo
    ) -> AsyncIterator[str | DeltaToolCalls | DeltaThinkingCalls]:
        results = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
        calls = [] if results else _plan(_question(messages))
        if calls:
            names = " and ".join(name for name, _ in calls)
            thought = f"This needs {names}; I will call the tools first, then answer."
        elif results:
            thought = "The tool results are in; time to put the answer together."
        else:
            thought = "No tool needed; I will say what I can do."
        for word in _words(thought):
            await asyncio.sleep(word_delay_s)
            yield {0: DeltaThinkingPart(content=word)}
        for index, (name, arguments) in enumerate(calls, 1):
            yield {index: DeltaToolCall(name=name, json_args=json.dumps(arguments))}
        if not calls:
            for word in _words(_answer(messages, results)):
                await asyncio.sleep(word_delay_s)
                yield word

    return FunctionModel(stream_function=stream, model_name="scripted")


def _question(messages: list[ModelMessage]) -> str:
    for message in reversed(messages):
        for part in message.parts:
            if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                return part.content
    return ""


def _plan(question: str) -> list[tuple[str, dict[str, Any]]]:
    calls: list[tuple[str, dict[str, Any]]] = []
    if re.search(r"\b(time|date|day)\b", question, re.IGNORECASE):
        calls.append(("clock", {}))
    if match := _EXPRESSION.search(question):
        calls.append(("calculate", {"expression": match.group().strip()}))
    return calls


def _answer(messages: list[ModelMessage], results: list[ToolReturnPart]) -> str:
    if not results:
        return "I can tell the time and do arithmetic: ask me “What time is it, and 25 * 16 + 2?”"
    calls = {
        part.tool_call_id: part
        for message in messages
        if isinstance(message, ModelResponse)
        for part in message.parts
        if isinstance(part, ToolCallPart)
    }
    sentences = []
    for result in results:
        value = result.model_response_str(wrap_if_error=False)
        if result.outcome != "success":
            sentences.append(f"{result.tool_name} failed ({value})")
        elif result.tool_name == "clock":
            sentences.append(f"it is {value} (UTC)")
        else:
            expression = calls[result.tool_call_id].args_as_dict().get("expression")
            sentences.append(f"{expression} = {value}")
    text = ", and ".join(sentences) + "."
    return text[0].upper() + text[1:]


def _words(text: str) -> list[str]:
    return re.findall(r"\S+\s*", text)


# --- the agent, and the loop loopgate serves ---------------------------------------------------


def build_agent(model: Model | str | None = None) -> Agent[None, str]:
    return Agent(
        model or scripted_model(),
        instructions=INSTRUCTIONS,
        tools=[clock, calculate],
        name="clock-and-calculator",
    )


agent = build_agent()
loop = pydantic_ai_loop(agent)
