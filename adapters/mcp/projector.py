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

from typing import Any, cast

import msgspec

from ...contracts.envelope import Envelope
from ...contracts.events import (
    CompletionView,
    PermissionRequestView,
    PermissionResultView,
    QuestionView,
    ToolResultView,
    budget_kind,
    view_of,
)
from ...contracts.projector import ProjectorContext
from ..shared.projector import TEXT, Call, RunProjector, Segment

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

    def _progress(self, message: str, meta: dict[str, Any]) -> list[McpItem]:
        self._count += 1
        return [Progress(self._count, message, meta)]

    def _tell(self, envelope: Envelope, message: str | None) -> list[McpItem]:
        """The event in words; without words (None), its kind, and its payload in ``_meta``."""
        meta: dict[str, Any] = {"seq": envelope.seq, "kind": envelope.kind}
        if message is None:
            message = f"event {clip(envelope.kind, 40)}"
            meta["data"] = envelope.data
        return self._progress(message, meta)

    def _round(self, data: dict[str, Any]) -> int:
        return _int(data.get("round")) or self.rounds

    def on_start(self) -> list[McpItem]:
        return self._progress(
            f"run {self.run_id} started", {"runId": self.run_id, "threadId": self.thread_id}
        )

    def passthrough(self, envelope: Envelope) -> list[McpItem]:
        # The kinds without a hook of their own, and events the base could not read.
        kind, data = envelope.kind, envelope.data
        if type(data) is not dict:
            return self._tell(envelope, None)
        if kind == "completion" and data.get("status") != "executing":
            return []  # the run's end: the result says it
        if kind == "steer":
            content = _str(data.get("content"))
            return self._tell(envelope, f"steered: {clip(content)}" if content else None)
        if kind == "hook_action":
            return self._tell(envelope, _hook_action(data))
        if kind == "soft_timeout":
            return self._tell(envelope, "soft time limit reached: wrapping up")
        return self._tell(envelope, None)

    # --- text ---------------------------------------------------------------------------

    def open_segment(self, segment: Segment, delta: str, envelope: Envelope) -> list[McpItem]:
        if segment.kind == TEXT:
            self._answer.append([])
            self._answer_tail += PARAGRAPH
        else:
            self._thinking_tail = ""
        return self.on_delta(segment, delta, envelope)

    def on_delta(self, segment: Segment, delta: str, envelope: Envelope) -> list[McpItem]:
        if segment.kind == TEXT:
            self._answer[-1].append(delta)
            # Kept short: a message shows the newest TAIL_CHARS, a long answer is not re-read.
            self._answer_tail = (self._answer_tail + delta)[-4 * TAIL_CHARS :]
            return self._tell(envelope, tail(self._answer_tail) or "answering")
        self._thinking_tail = (self._thinking_tail + delta)[-4 * TAIL_CHARS :]
        shown = tail(self._thinking_tail, TAIL_CHARS - 10)
        return self._tell(envelope, f"thinking: {shown}" if shown else "thinking")

    # --- rounds and model responses: a response's text is the answer's, unless it failed ---

    def on_stage_start(self, envelope: Envelope) -> list[McpItem]:
        model = _str(envelope.data.get("model"))
        return self._tell(
            envelope, f"round {self._round(envelope.data)}" + (f" ({model})" if model else "")
        )

    def on_llm_request(self, envelope: Envelope) -> list[McpItem]:
        self._response_start = len(self._answer)
        data = envelope.data
        model = _str(data.get("model"))
        attempt = _int(data.get("attempt"))
        retry = f" (attempt {attempt})" if attempt is not None and attempt > 1 else ""
        return self._tell(envelope, f"asking {model or 'the model'}{retry}")

    def on_llm_response(self, envelope: Envelope) -> list[McpItem]:
        data = envelope.data
        error = _str(data.get("error"))
        if error and len(self._answer) > self._response_start:
            # A failed attempt (a retry may follow): what it streamed is no part of the answer.
            del self._answer[self._response_start :]
            said = PARAGRAPH.join("".join(part) for part in self._answer)
            self._answer_tail = said[-4 * TAIL_CHARS :]
        # The next response starts here, also for a loop that sends no llm_request.
        self._response_start = len(self._answer)
        if error:
            return self._tell(envelope, f"the model failed: {clip(error)}")
        total = _int(data.get("totalTokens"))
        if total is None:
            prompt, completion = _int(data.get("promptTokens")), _int(data.get("completionTokens"))
            if prompt is not None or completion is not None:
                total = (prompt or 0) + (completion or 0)
        counted = f" ({total} tokens)" if total is not None else ""
        return self._tell(envelope, "the model responded" + counted)

    def on_round_end(self, envelope: Envelope) -> list[McpItem]:
        data = envelope.data
        if envelope.kind == "completion":
            # ``executing``: the round's tools answered, the loop goes on.
            return self._tell(envelope, f"round {self._round(data)}: continuing")
        calls = _int(data.get("toolCallCount"))
        done = f"round {self._round(data)} done"
        if calls:
            done += f" ({calls} tool call{'s' if calls != 1 else ''})"
        return self._tell(envelope, done)

    def on_error(self, envelope: Envelope) -> list[McpItem]:
        message = _str(envelope.data.get("message"))
        return self._tell(envelope, f"error: {clip(message)}" if message else None)

    def on_budget(self, envelope: Envelope) -> list[McpItem]:
        kind = budget_kind(envelope.data)
        return self._tell(envelope, f"{kind} budget exhausted" if kind else "budget exhausted")

    # --- tools --------------------------------------------------------------------------

    def on_tool_start(self, call: Call, envelope: Envelope) -> list[McpItem]:
        about = summary(call.arguments) if call.arguments not in (None, {}, []) else ""
        return self._tell(envelope, f"calling tool {call.name}" + (f": {about}" if about else ""))

    def announce_call(self, call: Call, envelope: Envelope) -> list[McpItem]:
        # An orphan: its start was never seen, its arguments are unknown.
        return self._tell(envelope, f"calling tool {call.name}")

    def on_tool_result(self, call: Call, envelope: Envelope, failed: bool) -> list[McpItem]:
        view = view_of(ToolResultView, envelope.data)
        if failed:
            error = view.error or _str(envelope.data.get("message"))
            return self._tell(
                envelope, f"tool {call.name} failed" + (f": {clip(error)}" if error else "")
            )
        if view.result_preview is not None:
            shown = clip(view.result_preview)
        else:
            result = envelope.data.get("result")
            shown = summary(result) if result is not None else ""
        return self._tell(envelope, f"tool {call.name} answered" + (f": {shown}" if shown else ""))

    def close_call(self, call: Call, status: str) -> list[McpItem]:
        ended = "was cancelled" if status == "cancelled" else "did not finish"
        return self._progress(f"tool {call.name} {ended}", {"toolCallId": call.id})

    def on_permission_request(
        self, view: PermissionRequestView, envelope: Envelope
    ) -> list[McpItem]:
        call = envelope.data.get("toolCall")
        name = _str(call.get("name")) if type(call) is dict else None
        return self._tell(envelope, f"waiting for approval to run tool {name}" if name else None)

    def on_permission_result(self, view: PermissionResultView, envelope: Envelope) -> list[McpItem]:
        data = envelope.data
        decision = _str(data.get("decision"))
        if decision is None:
            return self._tell(envelope, None)
        call_id = data.get("toolCallId")
        call = self.calls.get(call_id) if type(call_id) is str else None
        by = _str(data.get("by"))
        said = f"tool {call.name}: {decision}" if call is not None else f"approval: {decision}"
        return self._tell(envelope, said + (f" ({by})" if by and by != "client" else ""))

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

    def on_terminal(self, status: str, envelope: Envelope) -> list[McpItem]:
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
        return [Answer(text, failed, self._meta(status, reason))]

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

    def on_truncated(self, reason: str) -> list[McpItem]:
        text = f"The run ended without a final answer ({reason})."
        return [Answer(text, True, self._meta("failed", reason))]


def _hook_action(data: dict[str, Any]) -> str | None:
    hook, action = _str(data.get("hook")), _str(data.get("action"))
    if hook is None or action is None:
        return None
    reason = _str(data.get("reason"))
    return f"hook {hook}: {action}" + (f" ({clip(reason, 60)})" if reason else "")


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
