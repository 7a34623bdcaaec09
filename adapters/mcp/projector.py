"""Envelopes of one run → what an MCP client gets for a ``run`` tool call.

While the run goes, every event is one ``notifications/progress`` (``progress`` counts them,
``message`` says in a few words what happened: the answer so far, "calling tool clock", …);
the run's end is the ``tools/call`` result: the answer as text, ``isError`` for a run that
failed, was cancelled or ran out of budget, and the question with how to answer it for a run
waiting on the user. loopgate's facts (the run and thread ids, the event's seq and kind, the
status) go in ``_meta.loopgate``. A kind without a message of its own (an unknown kind, an
event whose payload this code cannot read) is ``event <kind>`` with its payload in ``_meta``:
MCP has no other place for it.

Sans-IO, like every projector: the endpoint sends the items (adapters/mcp/calls.py); the
goldens are :func:`to_wire` of them with the ids a fresh ``ClientSession`` uses.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import msgspec

from loopgate.adapters.shared.projector import TEXT, Call, RunProjector, Segment
from loopgate.contracts.envelope import Envelope
from loopgate.contracts.events import (
    CompletionView,
    QuestionView,
    ToolResultView,
    budget_kind,
    view_of,
)
from loopgate.contracts.projector import ProjectorContext

# A progress message is a status line: the newest this many characters of a growing text.
TAIL_CHARS = 120
SUMMARY_CHARS = 80
# Between the text of two model responses: one answer, its parts as paragraphs.
PARAGRAPH = "\n\n"
# The request id and progress token of the goldens: a ClientSession's first call after
# ``initialize`` (id 0) is id 1, and its progress token is the request id.
GOLDEN_REQUEST_ID = 1
GOLDEN_PROGRESS_TOKEN = 1
_json = msgspec.json.Encoder()


class Progress(msgspec.Struct, frozen=True, gc=False):
    """One ``notifications/progress``: the ``progress``-th while the run goes."""

    progress: int
    message: str
    meta: dict[str, Any]  # _meta.loopgate


class Answer(msgspec.Struct, frozen=True, gc=False):
    """The ``tools/call`` result: the run's end."""

    text: str
    is_error: bool
    meta: dict[str, Any]  # _meta.loopgate


McpItem = Progress | Answer


def clip(text: str, limit: int = SUMMARY_CHARS) -> str:
    """``text`` on one line, at most ``limit`` characters (its start)."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def tail(text: str, limit: int = TAIL_CHARS) -> str:
    """``text`` on one line, at most ``limit`` characters (its end: the newest), starting at
    a word when one starts near the cut."""
    line = " ".join(text.split())
    if len(line) <= limit:
        return line
    cut = len(line) - limit + 1
    if line[cut - 1] != " ":
        space = line.find(" ", cut, cut + 24)
        if space > 0:
            cut = space + 1
    return "…" + line[cut:]


def summary(value: Any) -> str:
    """Tool arguments or a result in a few words: a string as it is, anything else as JSON."""
    if isinstance(value, dict) and value:
        named = cast(dict[str, Any], value)
        first = next(iter(named.values()))
        if len(named) == 1 and isinstance(first, str):
            return clip(first)
    if isinstance(value, str):
        return clip(value)
    try:
        return clip(_json.encode(value).decode())
    except (TypeError, ValueError):
        return ""


def _int(value: Any) -> int | None:
    return value if type(value) is int else None


def _str(value: Any) -> str | None:
    return value if type(value) is str and value else None


class McpProjector(RunProjector[McpItem]):
    """One run, one ``run`` tool call."""

    def __init__(self, context: ProjectorContext) -> None:
        super().__init__(context)
        self.thread_id = context.thread_id
        self._count = 0
        # The text of each model response (each text segment), as streamed.
        self._answer: list[list[str]] = []
        self._response_start = 0  # the first segment of the model response under way
        # The newest text of the answer and of the open reasoning: what a message shows.
        self._answer_tail = ""
        self._thinking_tail = ""

    # --- progress -----------------------------------------------------------------------

    def _progress(self, out: list[McpItem], message: str, meta: dict[str, Any]) -> None:
        self._count += 1
        out.append(Progress(self._count, message, meta))

    def _event(
        self, out: list[McpItem], envelope: Envelope, message: str, data: bool = False
    ) -> None:
        meta: dict[str, Any] = {"seq": envelope.seq, "kind": envelope.kind}
        if data:
            meta["data"] = envelope.data
        self._progress(out, message, meta)

    def on_start(self, out: list[McpItem]) -> None:
        self._progress(
            out,
            f"run {self.run_id} started",
            {"runId": self.run_id, "threadId": self.thread_id},
        )

    def passthrough(self, out: list[McpItem], envelope: Envelope) -> None:
        kind = envelope.kind
        data = envelope.data
        if kind == "completion" and type(data) is dict and data.get("status") != "executing":
            return  # the run's end: the result says it
        try:
            message = _describe(self, kind, data)
        except (AttributeError, KeyError, TypeError, ValueError):
            message = None
        if message is None:
            # A kind this code has no words for, or a payload it cannot read: carried as is.
            self._event(out, envelope, f"event {clip(kind, 40)}", data=True)
        else:
            self._event(out, envelope, message)

    # --- text ---------------------------------------------------------------------------

    def open_segment(
        self, out: list[McpItem], segment: Segment, delta: str, envelope: Envelope
    ) -> None:
        if segment.kind == TEXT:
            self._answer.append([])
            self._answer_tail += PARAGRAPH
        else:
            self._thinking_tail = ""
        out += self.on_delta(segment, delta, envelope)

    def on_delta(self, segment: Segment, delta: str, envelope: Envelope) -> list[McpItem]:
        out: list[McpItem] = []
        if segment.kind == TEXT:
            self._answer[-1].append(delta)
            # Kept short: a message shows the newest TAIL_CHARS, a long answer is not re-read.
            self._answer_tail = (self._answer_tail + delta)[-4 * TAIL_CHARS :]
            self._event(out, envelope, tail(self._answer_tail) or "answering")
        else:
            self._thinking_tail = (self._thinking_tail + delta)[-4 * TAIL_CHARS :]
            shown = tail(self._thinking_tail, TAIL_CHARS - 10)
            self._event(out, envelope, f"thinking: {shown}" if shown else "thinking")
        return out

    # --- a model response: its text is the answer's, unless the response failed ------------

    def on_llm_request(self, out: list[McpItem], envelope: Envelope) -> bool:
        self._response_start = len(self._answer)
        return False

    def on_llm_response(self, out: list[McpItem], envelope: Envelope) -> bool:
        if _str(envelope.data.get("error")) and len(self._answer) > self._response_start:
            # A failed attempt (a retry may follow): what it streamed is no part of the answer.
            del self._answer[self._response_start :]
            said = PARAGRAPH.join("".join(part) for part in self._answer)
            self._answer_tail = said[-4 * TAIL_CHARS :]
        # The next response starts here, also for a loop that sends no llm_request.
        self._response_start = len(self._answer)
        return False

    # --- tools --------------------------------------------------------------------------

    def on_tool_start(self, out: list[McpItem], call: Call, envelope: Envelope) -> None:
        about = summary(call.arguments) if call.arguments not in (None, {}, []) else ""
        self._event(out, envelope, f"calling tool {call.name}" + (f": {about}" if about else ""))

    def announce_call(self, out: list[McpItem], call: Call, envelope: Envelope) -> None:
        # An orphan: its start was never seen, its arguments are unknown.
        self._event(out, envelope, f"calling tool {call.name}")

    def on_tool_result(
        self, out: list[McpItem], call: Call, envelope: Envelope, failed: bool
    ) -> None:
        view = view_of(ToolResultView, envelope.data)
        if failed:
            error = view.error or _str(envelope.data.get("message"))
            self._event(
                out,
                envelope,
                f"tool {call.name} failed" + (f": {clip(error)}" if error else ""),
            )
            return
        if view.result_preview is not None:
            shown = clip(view.result_preview)
        else:
            result = envelope.data.get("result")
            shown = summary(result) if result is not None else ""
        self._event(out, envelope, f"tool {call.name} answered" + (f": {shown}" if shown else ""))

    def close_call(self, out: list[McpItem], call: Call, status: str) -> None:
        ended = "was cancelled" if status == "cancelled" else "did not finish"
        self._progress(out, f"tool {call.name} {ended}", {"toolCallId": call.id})

    # --- the end ------------------------------------------------------------------------

    def answer_text(self) -> str:
        """The run's text: each model response's, a paragraph each."""
        parts = ("".join(segment).strip() for segment in self._answer)
        return PARAGRAPH.join(part for part in parts if part)

    def _meta(self, status: str, reason: str | None) -> dict[str, Any]:
        meta: dict[str, Any] = {"runId": self.run_id, "threadId": self.thread_id}
        meta["status"] = status
        if reason:
            meta["reason"] = reason
        tokens_in, tokens_out = self.usage_totals()
        if tokens_in or tokens_out:
            meta["usage"] = {"inputTokens": tokens_in, "outputTokens": tokens_out}
        return meta

    def on_terminal(self, out: list[McpItem], status: str, envelope: Envelope) -> None:
        data = envelope.data
        view = view_of(CompletionView, data)
        reason = view.reason
        answer = self.answer_text()
        so_far = f"{PARAGRAPH}The answer so far:{PARAGRAPH}{answer}" if answer else ""
        failed = True
        if status == "completed":
            text, failed = answer or "The run completed without an answer.", False
        elif status == "waiting_user":
            text, failed = self._waiting(view, data, answer), False
        elif status == "failed":
            error = view.error or self.last_error
            text = f"The run failed ({reason or 'failed'})" + (f": {error}" if error else ".")
        elif status == "cancelled":
            text = "The run was cancelled." + so_far
        elif status == "budget_exhausted":
            kind = self.budget_kind
            budget = f"its {kind} budget" if kind else "a budget"
            text = f"The run stopped: {budget} ran out." + so_far
        else:
            # A status newer than this code: the run ended, say how.
            how = status + (f": {reason}" if reason else "")
            text = (answer + PARAGRAPH if answer else "") + f"[The run ended ({how}).]"
            failed = False
        out.append(Answer(text, failed, self._meta(status, reason)))

    def _waiting(self, view: CompletionView, data: dict[str, Any], answer: str) -> str:
        question = self._question(view, data) or answer
        if not question:
            pending = [
                self.calls[c].name for c in view.pending_tool_call_ids or () if c in self.calls
            ]
            question = (
                f"The run is waiting for the result of {', '.join(pending)}, run by its client."
                if pending
                else "The run is waiting for input."
            )
        return (
            f"{question}{PARAGRAPH}[The run is waiting for an answer: call run again with "
            f'thread_id "{self.thread_id}" and the answer as the prompt.]'
        )

    def _question(self, view: CompletionView, data: dict[str, Any]) -> str | None:
        """What the user is asked: the completion's own words, the suspending call's
        arguments (``ask_user {question}``), or the first interrupt's."""
        asked = view_of(QuestionView, data).text()
        if asked:
            return asked
        call = self.calls.get(view.tool_call_id) if view.tool_call_id else None
        if call is not None and type(call.arguments) is dict:
            asked = view_of(QuestionView, call.arguments).text()
            if asked:
                return asked
        for item in view.interrupts or ():
            if type(item) is dict:
                asked = view_of(QuestionView, item).text()
                if asked:
                    return asked
        return None

    def on_truncated(self, out: list[McpItem], reason: str) -> None:
        text = f"The run ended without a final answer ({reason})."
        out.append(Answer(text, True, self._meta("failed", reason)))


# --- the messages of events without a hook of their own ------------------------------------


def _describe(p: McpProjector, kind: str, data: dict[str, Any]) -> str | None:
    """The progress message of an event the projector passes through; None: no words."""
    describe = _DESCRIBE.get(kind)
    return None if describe is None else describe(p, data)


def _round(p: McpProjector, data: dict[str, Any]) -> int:
    return _int(data.get("round")) or p.rounds


def _stage_start(p: McpProjector, data: dict[str, Any]) -> str:
    model = _str(data.get("model"))
    return f"round {_round(p, data)}" + (f" ({model})" if model else "")


def _llm_request(p: McpProjector, data: dict[str, Any]) -> str:
    model = _str(data.get("model"))
    attempt = _int(data.get("attempt"))
    retry = f" (attempt {attempt})" if attempt is not None and attempt > 1 else ""
    return f"asking {model or 'the model'}{retry}"


def _llm_response(p: McpProjector, data: dict[str, Any]) -> str:
    error = _str(data.get("error"))
    if error:
        return f"the model failed: {clip(error)}"
    total = _int(data.get("totalTokens"))
    if total is None:
        prompt, completion = _int(data.get("promptTokens")), _int(data.get("completionTokens"))
        if prompt is not None or completion is not None:
            total = (prompt or 0) + (completion or 0)
    return "the model responded" + (f" ({total} tokens)" if total is not None else "")


def _stage_complete(p: McpProjector, data: dict[str, Any]) -> str:
    calls = _int(data.get("toolCallCount"))
    done = f"round {_round(p, data)} done"
    if calls:
        return done + f" ({calls} tool call{'s' if calls != 1 else ''})"
    return done


def _completion(p: McpProjector, data: dict[str, Any]) -> str:
    # Only ``executing`` gets here: the round's tools answered, the loop goes on.
    return f"round {_round(p, data)}: continuing"


def _soft_timeout(p: McpProjector, data: dict[str, Any]) -> str:
    return "soft time limit reached: wrapping up"


def _steer(p: McpProjector, data: dict[str, Any]) -> str | None:
    content = _str(data.get("content"))
    return f"steered: {clip(content)}" if content else None


def _hook_action(p: McpProjector, data: dict[str, Any]) -> str | None:
    hook, action = _str(data.get("hook")), _str(data.get("action"))
    if hook is None or action is None:
        return None
    reason = _str(data.get("reason"))
    return f"hook {hook}: {action}" + (f" ({clip(reason, 60)})" if reason else "")


def _error(p: McpProjector, data: dict[str, Any]) -> str | None:
    message = _str(data.get("message"))
    return f"error: {clip(message)}" if message else None


def _budget(p: McpProjector, data: dict[str, Any]) -> str:
    kind = budget_kind(data)
    return f"{kind} budget exhausted" if kind else "budget exhausted"


def _permission_request(p: McpProjector, data: dict[str, Any]) -> str | None:
    call = data.get("toolCall")
    name = _str(call.get("name")) if type(call) is dict else None
    return f"waiting for approval to run tool {name}" if name else None


def _permission_result(p: McpProjector, data: dict[str, Any]) -> str | None:
    decision = _str(data.get("decision"))
    if decision is None:
        return None
    call_id = data.get("toolCallId")
    call = p.calls.get(call_id) if type(call_id) is str else None
    by = _str(data.get("by"))
    said = f"tool {call.name}: {decision}" if call is not None else f"approval: {decision}"
    return said + (f" ({by})" if by and by != "client" else "")


_DESCRIBE: dict[str, Callable[[McpProjector, dict[str, Any]], str | None]] = {
    "stage_start": _stage_start,
    "llm_request": _llm_request,
    "llm_response": _llm_response,
    "stage_complete": _stage_complete,
    "completion": _completion,
    "soft_timeout": _soft_timeout,
    "steer": _steer,
    "hook_action": _hook_action,
    "error": _error,
    "budget_exhausted": _budget,
    "permission_request": _permission_request,
    "permission_result": _permission_result,
}


# --- the wire ------------------------------------------------------------------------------


def progress_params(item: Progress, token: str | int) -> dict[str, Any]:
    return {
        "progressToken": token,
        "progress": item.progress,
        "message": item.message,
        "_meta": {"loopgate": item.meta},
    }


def result_body(item: Answer) -> dict[str, Any]:
    return {
        "content": [{"type": "text", "text": item.text}],
        "isError": item.is_error,
        "_meta": {"loopgate": item.meta},
    }


def to_wire(
    item: McpItem,
    request_id: str | int = GOLDEN_REQUEST_ID,
    token: str | int = GOLDEN_PROGRESS_TOKEN,
) -> dict[str, Any]:
    """The JSON-RPC message an item is for the client: a progress notification with the
    call's progress token, or the call's response."""
    if isinstance(item, Progress):
        return {
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": progress_params(item, token),
        }
    return {"jsonrpc": "2.0", "id": request_id, "result": result_body(item)}
