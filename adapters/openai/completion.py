"""A whole answer (``stream: false``): the run's chunks folded into one ``chat.completion``.

The same projector serves both: what a streaming client would have received is folded here,
so the two cannot disagree. The ``loopgate`` events of the chunks are kept, in order, in the
completion's ``loopgate.events``.
"""

from __future__ import annotations

from typing import Any

from .wire import (
    UNSET,
    Carried,
    Chunk,
    Completion,
    CompletionChoice,
    ErrorBody,
    Event,
    Piece,
    ResponseMessage,
    StreamError,
    Usage,
    WireMessage,
)


def _discards_answer(event: Event) -> bool:
    """The loop's structured output asked for a repair: the answer so far is not the answer
    (a streaming client saw it; a whole answer holds only what follows)."""
    data = event.data
    return (
        event.kind == "hook_action"
        and isinstance(data, dict)
        and data.get("hook") == "structured_output"
        and data.get("action") == "retry"
    )


def fold(messages: list[WireMessage]) -> Completion | ErrorBody:
    """The completion the chunks make, or the error that ended the run."""
    first: Chunk | None = None
    content: list[str] = []
    reasoning: list[str] = []
    calls: list[dict[str, Any]] = []
    events: list[Any] = []
    finish = "stop"
    usage = Usage(prompt_tokens=0, completion_tokens=0, total_tokens=0)
    for message in messages:
        if isinstance(message, StreamError):
            return message.error
        if isinstance(message, Piece):
            (content if message.field == "content" else reasoning).append(message.text)
            continue
        if isinstance(message, Carried):
            events.append(message.event)
            if _discards_answer(message.event):
                content.clear()
            continue
        if not isinstance(message, Chunk):
            continue
        first = first or message
        if message.loopgate is not UNSET:
            events.append(message.loopgate)
            if _discards_answer(message.loopgate):
                content.clear()
        if message.usage is not UNSET:
            usage = message.usage
        for choice in message.choices:
            delta = choice.delta
            if delta.content is not UNSET:
                content.append(delta.content)
            if delta.reasoning_content is not UNSET:
                reasoning.append(delta.reasoning_content)
            if delta.tool_calls is not UNSET:
                calls += [
                    {
                        "id": call.id,
                        "type": call.type,
                        "function": {
                            "name": call.function.name,
                            "arguments": call.function.arguments,
                        },
                    }
                    for call in delta.tool_calls
                ]
            if choice.finish_reason is not None:
                finish = choice.finish_reason
    if first is None:
        return ErrorBody(message="the run ended without an answer", type="server_error")
    text = "".join(content)
    answer = ResponseMessage(role="assistant", content=text or (None if calls else ""))
    if reasoning:
        answer.reasoning_content = "".join(reasoning)
    if calls:
        answer.tool_calls = calls
    return Completion(
        id=first.id,
        created=first.created,
        model=first.model,
        choices=[CompletionChoice(index=0, message=answer, finish_reason=finish)],
        usage=usage,
        loopgate={"events": events},
    )
