"""A run's conversation rebuilt from its events: what the loop said and did, as messages.

A conversation that spans runs (a thread; an ACP session is one) starts each run with the
history so far plus the new input; this is how the "so far" is recovered from a journal, also in
a process that never saw the runs live. The new input is a user message, or, when the run
before ended waiting on an ``ask_user``, that call's answer (its tool result).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from .envelope import Envelope
from .messages import Message, ToolCall
from .parts import Content, text_of

# Said for a tool call that never got its result (cancelled, truncated, a client tool): chat
# models reject an assistant tool call without a matching tool message.
NO_RESULT = "Error: no result (the run ended before this tool call finished)"


class _Round:
    __slots__ = ("calls", "reasoning", "results", "text")

    def __init__(self) -> None:
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.calls: list[ToolCall] = []
        self.results: dict[str, str] = {}

    def empty(self) -> bool:
        return not (self.text or self.reasoning or self.calls)

    def flush(self, out: list[Message]) -> None:
        text = "".join(self.text)
        if not text and not self.calls:
            return  # reasoning alone is not a message a model can be shown again
        out.append(
            Message(
                role="assistant",
                content=text,
                reasoning="".join(self.reasoning) or None,
                tool_calls=list(self.calls),
            )
        )
        for call in self.calls:
            out.append(
                Message(
                    role="tool",
                    tool_call_id=call.id,
                    name=call.name,
                    content=self.results.get(call.id, NO_RESULT),
                )
            )


def _observation(data: dict[str, Any]) -> str:
    if data.get("success") is True:
        result = data.get("result")
        if isinstance(result, str):
            return result
        preview = data.get("resultPreview")
        return preview if isinstance(preview, str) else ""
    error = data.get("error")
    return f"Error: {error if isinstance(error, str) and error else 'the tool failed'}"


def messages_from_events(envelopes: Iterable[Envelope]) -> list[Message]:
    """Assistant text, tool calls and tool results of one run, in order (pure, never raises).

    Steering messages become user messages where they were applied. The partial output of a
    model attempt that was retried is dropped, as the loop itself drops it.
    """
    out: list[Message] = []
    current = _Round()
    for env in envelopes:
        kind, data = env.kind, env.data
        if not isinstance(data, dict):
            continue
        if kind == "content_delta":
            delta = data.get("delta")
            if isinstance(delta, str):
                current.text.append(delta)
        elif kind == "reasoning_delta":
            delta = data.get("delta")
            if isinstance(delta, str):
                current.reasoning.append(delta)
        elif kind == "tool_call_start":
            call_id, name = data.get("id"), data.get("name")
            if isinstance(call_id, str) and isinstance(name, str):
                args = data.get("arguments")
                current.calls.append(
                    ToolCall(
                        id=call_id, name=name, arguments=args if isinstance(args, dict) else {}
                    )
                )
        elif kind == "tool_call_result":
            if isinstance(data.get("id"), str):
                current.results[data["id"]] = _observation(data)
        elif kind == "tool_error":
            if isinstance(data.get("id"), str):
                current.results[data["id"]] = f"Error: {data.get('error') or 'the tool failed'}"
        elif kind == "llm_request":
            attempt = data.get("attempt")
            if isinstance(attempt, int) and attempt > 1 and not current.calls:
                current.text.clear()
                current.reasoning.clear()
        elif kind == "steer":
            content = data.get("content")
            if isinstance(content, str):
                current.flush(out)
                current = _Round()
                out.append(Message(role="user", content=content))
        elif kind == "completion" and data.get("status") == "executing":
            current.flush(out)
            current = _Round()
    if not current.empty():
        current.flush(out)
    return out


def last_user_text(messages: Iterable[Message]) -> str | None:
    """The text of the last user message (what a run was asked), if any."""
    text = None
    for message in messages:
        if message.role == "user":
            text = text_of(message.content)
    return text


# --- a conversation continued by the next run ---------------------------------------------


class Conversation(NamedTuple):
    """A thread's conversation after its latest run: what the next run starts from."""

    messages: list[Message]
    # The tool calls that run ended ``waiting_user`` on (an ``ask_user``): the next input is
    # their answer, not a new user message.
    waiting: tuple[str, ...] = ()


def suspended_call(completion: dict[str, Any], index: int | None = None) -> str | None:
    """The tool call an interrupt suspended: the listed interrupt's own (``interrupts[index]``),
    else the turn's (``toolCallId``)."""
    listed = completion.get("interrupts")
    if index is not None and isinstance(listed, list) and index < len(listed):
        item = listed[index]
        own = item.get("toolCallId") if isinstance(item, dict) else None
        if isinstance(own, str):
            return own
    call_id = completion.get("toolCallId")
    return call_id if isinstance(call_id, str) else None


def waiting_calls(completion: dict[str, Any]) -> tuple[str, ...]:
    """The tool calls a ``waiting_user`` completion waits on an answer for: the turn's
    ``toolCallId``, else those of its ``interrupts``. Client tools (``pendingToolCallIds``)
    are not among them: their results come from the client that offered them."""
    if completion.get("status") != "waiting_user":
        return ()
    own = suspended_call(completion)
    if own is not None:
        return (own,)
    listed = completion.get("interrupts")
    found = (
        [suspended_call(completion, i) for i in range(len(listed))]
        if isinstance(listed, list)
        else []
    )
    return tuple(dict.fromkeys(c for c in found if c is not None))


def conversation_after(run_input: Iterable[Message], envelopes: Iterable[Envelope]) -> Conversation:
    """The conversation once a run is over: the messages it started with, then what it said
    and did (pure, never raises)."""
    events = list(envelopes)
    waiting: tuple[str, ...] = ()
    for env in reversed(events):
        if env.kind == "completion" and isinstance(env.data, dict):
            if env.data.get("status") != "executing":
                waiting = waiting_calls(env.data)
            break
    return Conversation([*run_input, *messages_from_events(events)], waiting)


def answer_call(
    history: list[Message], call_id: str, answer: str, call: ToolCall | None = None
) -> None:
    """Make ``answer`` the result of tool call ``call_id`` in ``history`` (in place).

    The result the call had (the suspending tool's question, or the "no result" placeholder)
    goes; the answer comes last. ``call``: the call itself, put in first when no assistant
    message of ``history`` carries it, as a model needs every result paired with its call.
    """
    name = next((m.name for m in history if m.role == "tool" and m.tool_call_id == call_id), None)
    history[:] = [m for m in history if not (m.role == "tool" and m.tool_call_id == call_id)]
    if call is not None and not any(c.id == call_id for m in history for c in m.tool_calls):
        history.append(Message(role="assistant", tool_calls=[call]))
    history.append(Message(role="tool", content=answer, tool_call_id=call_id, name=name))


def continued(conversation: Conversation, content: Content) -> list[Message]:
    """The messages a run that continues ``conversation`` with ``content`` starts from: its
    text answers the calls it waits on (each gets it as its result), else it is a new user
    message (with its attachments)."""
    messages = list(conversation.messages)
    # Only calls the conversation carries: an answer with no call to pair it with is one no
    # chat model takes (a foreign loop may name a call it never announced).
    made = {call.id for m in messages for call in m.tool_calls}
    answered = [call_id for call_id in conversation.waiting if call_id in made]
    if not answered:
        return [*messages, Message(role="user", content=content)]
    text = text_of(content)
    for call_id in answered:
        answer_call(messages, call_id, text)
    return messages


def asked_text(messages: Sequence[Message]) -> str | None:
    """What the user said to start a run: its closing user message, or the answer that closes
    its input (a run that continued a thread waiting on an ``ask_user``)."""
    if messages and messages[-1].role == "tool":
        return text_of(messages[-1].content)
    return last_user_text(messages)
