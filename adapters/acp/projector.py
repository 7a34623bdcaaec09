"""Envelopes of one run → ACP ``session/update`` notifications and the ``session/prompt`` answer.

Sans-IO: the projector returns items and the connection code sends them. Spec fields carry
only what the spec defines; loopgate's own facts (run id, rounds, durations) go in ``_meta``
under ``loopgate``. Loop-internal kinds (stages, hooks, budgets, unknown kinds) produce no
update: ACP has no neutral update to carry them, and an invented thought chunk would lie.
"""

from __future__ import annotations

from typing import Any, cast

import msgspec

from ...contracts import parts
from ...contracts.envelope import Envelope
from ...contracts.events import (
    CompletionView,
    LlmResponseView,
    PermissionRequestView,
    PermissionResultView,
    ToolCallView,
    ToolResultView,
    view_of,
)
from ...contracts.projector import ProjectorContext
from ..shared.projector import TEXT, Call, RunProjector, Segment

TOOL_KINDS = frozenset(
    {
        "read",
        "edit",
        "delete",
        "move",
        "search",
        "execute",
        "think",
        "fetch",
        "switch_mode",
        "other",
    }
)
# Guessed from the tool's name when neither the tool's metadata nor the event says it.
_NAME_HINTS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("read", "open", "view", "cat", "get_file"), "read"),
    (("write", "edit", "patch", "replace", "note", "create_file"), "edit"),
    (("delete", "remove", "rm_"), "delete"),
    (("move", "rename", "mv_"), "move"),
    (("search", "grep", "find", "glob", "lookup"), "search"),
    (("exec", "run", "shell", "bash", "command", "terminal"), "execute"),
    (("fetch", "http", "download", "url", "web"), "fetch"),
    (("think", "calc", "reason", "plan"), "think"),
)
OPTION_NAMES = {
    "allow_once": "Allow once",
    "allow_always": "Always allow",
    "reject_once": "Reject",
    "reject_always": "Always reject",
}
TITLE_CHARS = 80
SESSION_UPDATE = "session/update"
REQUEST_PERMISSION = "session/request_permission"
INTERNAL_ERROR = -32603
_encode = msgspec.json.Encoder().encode


class SessionUpdate(msgspec.Struct, frozen=True):
    """The params of one ``session/update`` notification."""

    params: dict[str, Any]


class PromptAnswer(msgspec.Struct, frozen=True):
    """The ``session/prompt`` result: the turn ended (``stopReason``)."""

    result: dict[str, Any]


class PromptFailure(msgspec.Struct, frozen=True):
    """The ``session/prompt`` error: the run failed."""

    code: int
    message: str
    data: dict[str, Any]


class PermissionAsk(msgspec.Struct, frozen=True):
    """A tool waits for approval: ask the client with ``session/request_permission``."""

    request_id: str  # the hub's id, for RunService.respond
    params: dict[str, Any]


AcpItem = SessionUpdate | PromptAnswer | PromptFailure | PermissionAsk


def tool_kind(name: str, data: ToolCallView | dict[str, Any], known: dict[str, str]) -> str:
    """The ACP kind of a call (``data``: the call's payload or its view)."""
    kind = known.get(name)
    if kind in TOOL_KINDS:
        return kind
    view = data if isinstance(data, ToolCallView) else view_of(ToolCallView, data)
    for hint in (view.kind, view.kind_hint):
        if hint in TOOL_KINDS:
            return hint
    low = name.lower()
    for words, guess in _NAME_HINTS:
        if any(w in low for w in words):
            return guess
    return "other"


def tool_title(name: str, arguments: Any) -> str:
    """``name: the first argument`` — what an IDE shows on the tool call's line."""
    summary = ""
    if isinstance(arguments, dict) and arguments:
        named = cast(dict[str, Any], arguments)
        first = next(iter(named.values()))
        summary = (
            first
            if isinstance(first, str)
            else ", ".join(f"{k}={_encode(v).decode()}" for k, v in named.items())
        )
    title = f"{name}: {summary}" if summary else name
    title = " ".join(title.split())
    return title if len(title) <= TITLE_CHARS else title[: TITLE_CHARS - 1] + "…"


def text_update(session_id: str, kind: str, text: str) -> SessionUpdate:
    return SessionUpdate(
        {
            "sessionId": session_id,
            "update": {"sessionUpdate": kind, "content": {"type": "text", "text": text}},
        }
    )


def user_message(session_id: str, text: str) -> SessionUpdate:
    return text_update(session_id, "user_message_chunk", text)


def user_blocks(session_id: str, content: list[parts.Part]) -> list[SessionUpdate]:
    """A prompt with attachments as it was sent: a ``user_message_chunk`` per block (text,
    image, audio; a file as an embedded binary resource)."""
    updates = []
    for part in content:
        block: dict[str, Any]
        if isinstance(part, parts.TextPart):
            block = {"type": "text", "text": part.text}
        elif isinstance(part, parts.ImagePart | parts.AudioPart) and part.data is not None:
            block = {"type": parts.kind_of(part), "data": part.data, "mimeType": part.media_type}
        elif isinstance(part, parts.FilePart) and part.data is not None:
            resource = {"uri": f"attachment:{part.name or 'file'}", "blob": part.data}
            if part.media_type:
                resource["mimeType"] = part.media_type
            block = {"type": "resource", "resource": resource}
        else:
            block = {"type": "text", "text": parts.describe(part)}
        update = {"sessionUpdate": "user_message_chunk", "content": block}
        updates.append(SessionUpdate({"sessionId": session_id, "update": update}))
    return updates


def _text_content(text: str) -> list[dict[str, Any]]:
    return [{"type": "content", "content": {"type": "text", "text": text}}]


class AcpProjector(RunProjector[AcpItem]):
    """One run of one session. ``context.options``: ``toolKinds`` (tool name → ACP kind, from
    the tools' metadata), ``contextSize`` (the model's context window in tokens: enables
    ``usage_update``). Loop-internal and unknown kinds make no update (``passthrough``: none)."""

    def __init__(self, context: ProjectorContext) -> None:
        super().__init__(context)
        self.session_id = context.thread_id
        options = context.options
        kinds = options.get("toolKinds")
        self.known_kinds: dict[str, str] = kinds if isinstance(kinds, dict) else {}
        size = options.get("contextSize")
        self.context_size = size if isinstance(size, int) and size > 0 else None

    # --- text ---------------------------------------------------------------------------

    def on_delta(self, segment: Segment, delta: str, envelope: Envelope) -> list[AcpItem]:
        if not delta:
            return []
        kind = "agent_message_chunk" if segment.kind == TEXT else "agent_thought_chunk"
        return [text_update(self.session_id, kind, delta)]

    # --- tools --------------------------------------------------------------------------

    def _update(self, update: dict[str, Any]) -> SessionUpdate:
        return SessionUpdate({"sessionId": self.session_id, "update": update})

    def on_tool_start(self, call: Call, envelope: Envelope) -> list[AcpItem]:
        arguments = call.arguments
        meta: dict[str, Any] = {"name": call.name}
        view = view_of(ToolCallView, envelope.data)
        if view.round is not None:
            meta["round"] = view.round
        return [
            self._update(
                {
                    "sessionUpdate": "tool_call",
                    "toolCallId": call.id,
                    "title": tool_title(call.name, arguments),
                    "kind": tool_kind(call.name, view, self.known_kinds),
                    "status": "in_progress",
                    "rawInput": arguments if isinstance(arguments, dict) else {},
                    "_meta": {"loopgate": meta},
                }
            )
        ]

    def announce_call(self, call: Call, envelope: Envelope) -> list[AcpItem]:
        # Its input was never seen: no rawInput rather than a made-up empty one.
        return [
            self._update(
                {
                    "sessionUpdate": "tool_call",
                    "toolCallId": call.id,
                    "title": tool_title(call.name, None),
                    "kind": tool_kind(call.name, {}, self.known_kinds),
                    "status": "in_progress",
                    "_meta": {"loopgate": {"name": call.name}},
                }
            )
        ]

    def on_tool_result(self, call: Call, envelope: Envelope, failed: bool) -> list[AcpItem]:
        view = view_of(ToolResultView, envelope.data)
        update: dict[str, Any] = {"sessionUpdate": "tool_call_update", "toolCallId": call.id}
        if failed:
            text = view.error or "the tool failed"
            update.update(status="failed", content=_text_content(text), rawOutput={"error": text})
        else:
            text = view.result_preview or ""
            # The result as sent (any JSON), the preview when the loop kept it to itself.
            output = envelope.data.get("result", text)
            update.update(status="completed", content=_text_content(text), rawOutput=output)
        meta: dict[str, Any] = {}
        if view.duration_ms is not None:
            meta["durationMs"] = view.duration_ms
        if view.deduplicated:
            meta["deduplicated"] = True
        if meta:
            update["_meta"] = {"loopgate": meta}
        return [self._update(update)]

    def close_call(self, call: Call, status: str) -> list[AcpItem]:
        text = (
            "cancelled" if status == "cancelled" else "the run ended before this tool call finished"
        )
        return [
            self._update(
                {
                    "sessionUpdate": "tool_call_update",
                    "toolCallId": call.id,
                    "status": "failed",
                    "content": _text_content(text),
                }
            )
        ]

    def on_permission_request(
        self, view: PermissionRequestView, envelope: Envelope
    ) -> list[AcpItem]:
        request_id = view.request_id
        if request_id is None or view.tool_call is None:
            return self.passthrough(envelope)
        call = view_of(ToolCallView, view.tool_call)
        if call.id is None or call.name is None:
            return self.passthrough(envelope)
        offered = view.options or list(OPTION_NAMES)
        decisions = [o for o in offered if isinstance(o, str) and o in OPTION_NAMES]
        arguments = view.tool_call.get("arguments")
        return [
            PermissionAsk(
                request_id,
                {
                    "sessionId": self.session_id,
                    "toolCall": {
                        "toolCallId": call.id,
                        "title": tool_title(call.name, arguments),
                        "kind": tool_kind(call.name, call, self.known_kinds),
                        "status": "pending",
                        "rawInput": arguments if isinstance(arguments, dict) else {},
                    },
                    "options": [
                        {"optionId": d, "name": OPTION_NAMES[d], "kind": d} for d in decisions
                    ],
                    "_meta": {"loopgate": {"requestId": request_id}},
                },
            )
        ]

    def on_permission_result(self, view: PermissionResultView, envelope: Envelope) -> list[AcpItem]:
        # An approved call runs now; a rejected one gets its failed result from the loop.
        call_id, decision = view.tool_call_id, view.decision
        if call_id not in self.pending or decision is None or not decision.startswith("allow"):
            return self.passthrough(envelope)
        return [
            self._update(
                {
                    "sessionUpdate": "tool_call_update",
                    "toolCallId": call_id,
                    "status": "in_progress",
                    "_meta": {"loopgate": {"permission": decision, "by": view.by}},
                }
            )
        ]

    # --- usage --------------------------------------------------------------------------

    def on_llm_response(self, envelope: Envelope) -> list[AcpItem]:
        if self.context_size is None:
            return self.passthrough(envelope)
        view = view_of(LlmResponseView, envelope.data)
        prompt = view.prompt_tokens
        if prompt is None:
            return self.passthrough(envelope)
        update: dict[str, Any] = {
            "sessionUpdate": "usage_update",
            "used": prompt + (view.completion_tokens or 0),
            "size": self.context_size,
        }
        if view.cost_usd is not None:
            update["cost"] = {"amount": view.cost_usd, "currency": "USD"}
        return [self._update(update)]

    # --- the end of the turn ------------------------------------------------------------

    def on_terminal(self, status: str, envelope: Envelope) -> list[AcpItem]:
        view = view_of(CompletionView, envelope.data)
        reason = view.reason
        if status == "failed":
            return [self._failure(reason or "failed", self.last_error)]
        if status == "cancelled":
            stop = "cancelled"
        elif status == "budget_exhausted":
            kind = self.budget_kind or ("tokens" if reason and "token" in reason else "rounds")
            stop = "max_tokens" if kind == "tokens" else "max_turn_requests"
        else:
            # completed, waiting_user, and statuses newer than this code: the turn ended;
            # _meta.loopgate.status carries the status as sent.
            stop = "end_turn"
        meta: dict[str, Any] = {"runId": self.run_id, "status": status}
        if reason:
            meta["reason"] = reason
        if view.round is not None:
            meta["rounds"] = view.round
        if view.trace_id is not None:
            meta["traceId"] = view.trace_id
        result: dict[str, Any] = {"stopReason": stop}
        usage = self._usage(view)
        if usage is not None:
            result["usage"] = usage
        result["_meta"] = {"loopgate": meta}
        return [PromptAnswer(result)]

    def on_truncated(self, reason: str) -> list[AcpItem]:
        return [self._failure(reason, "the run ended without a final answer")]

    def _usage(self, view: CompletionView) -> dict[str, int] | None:
        summed_in, summed_out = self.usage_totals()
        prompt, completion = view.prompt_tokens, view.completion_tokens
        inp = prompt if prompt is not None and prompt >= 0 else summed_in
        out = completion if completion is not None and completion >= 0 else summed_out
        if not inp and not out:
            return None
        return {"totalTokens": inp + out, "inputTokens": inp, "outputTokens": out}

    def _failure(self, reason: str, error: str | None) -> PromptFailure:
        message = f"the agent loop failed ({reason})"
        if error:
            message += f": {error}"
        data: dict[str, Any] = {"runId": self.run_id, "reason": reason}
        if error:
            data["error"] = error
        return PromptFailure(INTERNAL_ERROR, message, data)


def to_wire(item: AcpItem, prompt_request_id: int | str = 2) -> dict[str, Any]:
    """The JSON-RPC message an item becomes (ids: the prompt's, the hub's permission id)."""
    if isinstance(item, SessionUpdate):
        return {"jsonrpc": "2.0", "method": SESSION_UPDATE, "params": item.params}
    if isinstance(item, PromptAnswer):
        return {"jsonrpc": "2.0", "id": prompt_request_id, "result": item.result}
    if isinstance(item, PromptFailure):
        return {
            "jsonrpc": "2.0",
            "id": prompt_request_id,
            "error": {"code": item.code, "message": item.message, "data": item.data},
        }
    return {
        "jsonrpc": "2.0",
        "id": item.request_id,
        "method": REQUEST_PERMISSION,
        "params": item.params,
    }
