"""Envelopes of one run → ACP ``session/update`` notifications and the ``session/prompt`` answer.

Sans-IO: the projector returns items and the connection code sends them. Spec fields carry
only what the spec defines; loopgate's own facts (run id, rounds, durations) go in ``_meta``
under ``loopgate``. Loop-internal kinds (stages, hooks, budgets, unknown kinds) produce no
update: ACP has no neutral update to carry them, and an invented thought chunk would lie.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from contracts.envelope import Envelope
from contracts.events import budget_kind, completion_status, tool_failed
from contracts.gateway_events import PERMISSION_REQUEST, PERMISSION_RESULT
from contracts.projector import ProjectorContext

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


def tool_kind(name: str, data: dict[str, Any], known: dict[str, str]) -> str:
    kind = known.get(name)
    if kind in TOOL_KINDS:
        return kind
    for key in ("kind", "kindHint"):
        hint = data.get(key)
        if isinstance(hint, str) and hint in TOOL_KINDS:
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
        first = next(iter(arguments.values()))
        summary = (
            first
            if isinstance(first, str)
            else ", ".join(f"{k}={_encode(v).decode()}" for k, v in arguments.items())
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


def _text_content(text: str) -> list[dict[str, Any]]:
    return [{"type": "content", "content": {"type": "text", "text": text}}]


class AcpProjector:
    """One run of one session. ``context.options``: ``toolKinds`` (tool name → ACP kind, from
    the tools' metadata), ``contextSize`` (the model's context window in tokens: enables
    ``usage_update``)."""

    def __init__(self, context: ProjectorContext) -> None:
        self.context = context
        self.session_id = context.thread_id
        options = context.options
        kinds = options.get("toolKinds")
        self.known_kinds: dict[str, str] = kinds if isinstance(kinds, dict) else {}
        size = options.get("contextSize")
        self.context_size = size if isinstance(size, int) and size > 0 else None
        self.open_calls: dict[str, str] = {}  # id → name, in start order
        self.ended = False
        self.budget_kind: str | None = None
        self.last_error: str | None = None
        self.input_tokens = 0
        self.output_tokens = 0
        self._feeders: dict[str, Callable[[dict[str, Any]], list[AcpItem]]] = {
            "content_delta": self._content,
            "reasoning_delta": self._reasoning,
            "tool_call_start": self._tool_start,
            "tool_call_result": self._tool_result,
            "tool_error": self._tool_error,
            "llm_response": self._llm_response,
            "budget_exhausted": self._budget,
            "error": self._error,
            "completion": self._completion,
            PERMISSION_REQUEST: self._permission_request,
            PERMISSION_RESULT: self._permission_result,
        }

    def start(self) -> list[AcpItem]:
        return []

    def feed(self, envelope: Envelope) -> list[AcpItem]:
        if self.ended:
            return []
        feeder = self._feeders.get(envelope.kind)
        data = envelope.data
        if feeder is None or not isinstance(data, dict):
            return []
        try:
            return feeder(data)
        except (KeyError, TypeError, ValueError, AttributeError):
            # A recorded or pushed payload of the wrong shape is skipped, never fatal.
            return []

    def close(self, reason: str | None = None) -> list[AcpItem]:
        if self.ended:
            return []
        return self._fail(reason or "truncated", "the run ended without a final answer")

    # --- text ---------------------------------------------------------------------------

    def _content(self, data: dict[str, Any]) -> list[AcpItem]:
        delta = data.get("delta")
        if not isinstance(delta, str) or not delta:
            return []
        return [text_update(self.session_id, "agent_message_chunk", delta)]

    def _reasoning(self, data: dict[str, Any]) -> list[AcpItem]:
        delta = data.get("delta")
        if not isinstance(delta, str) or not delta:
            return []
        return [text_update(self.session_id, "agent_thought_chunk", delta)]

    # --- tools --------------------------------------------------------------------------

    def _update(self, update: dict[str, Any]) -> SessionUpdate:
        return SessionUpdate({"sessionId": self.session_id, "update": update})

    def _tool_start(self, data: dict[str, Any]) -> list[AcpItem]:
        call_id, name = data["id"], data["name"]
        if not isinstance(call_id, str) or not isinstance(name, str):
            return []
        arguments = data.get("arguments")
        self.open_calls[call_id] = name
        meta: dict[str, Any] = {"name": name}
        if isinstance(data.get("round"), int):
            meta["round"] = data["round"]
        return [
            self._update(
                {
                    "sessionUpdate": "tool_call",
                    "toolCallId": call_id,
                    "title": tool_title(name, arguments),
                    "kind": tool_kind(name, data, self.known_kinds),
                    "status": "in_progress",
                    "rawInput": arguments if isinstance(arguments, dict) else {},
                    "_meta": {"loopgate": meta},
                }
            )
        ]

    def _tool_result(self, data: dict[str, Any]) -> list[AcpItem]:
        call_id = data["id"]
        if not isinstance(call_id, str):
            return []
        self.open_calls.pop(call_id, None)
        meta: dict[str, Any] = {}
        if isinstance(data.get("durationMs"), int | float):
            meta["durationMs"] = data["durationMs"]
        if data.get("deduplicated") is True:
            meta["deduplicated"] = True
        if not tool_failed("tool_call_result", data):
            preview = data.get("resultPreview")
            text = preview if isinstance(preview, str) else ""
            output = data.get("result", text)
            update = {
                "sessionUpdate": "tool_call_update",
                "toolCallId": call_id,
                "status": "completed",
                "content": _text_content(text),
                "rawOutput": output,
            }
        else:
            error = data.get("error")
            text = error if isinstance(error, str) and error else "the tool failed"
            update = {
                "sessionUpdate": "tool_call_update",
                "toolCallId": call_id,
                "status": "failed",
                "content": _text_content(text),
                "rawOutput": {"error": text},
            }
        if meta:
            update["_meta"] = {"loopgate": meta}
        return [self._update(update)]

    def _tool_error(self, data: dict[str, Any]) -> list[AcpItem]:
        call_id = data["id"]
        if not isinstance(call_id, str):
            return []
        self.open_calls.pop(call_id, None)
        error = data.get("error")
        text = error if isinstance(error, str) and error else "the tool failed"
        return [
            self._update(
                {
                    "sessionUpdate": "tool_call_update",
                    "toolCallId": call_id,
                    "status": "failed",
                    "content": _text_content(text),
                    "rawOutput": {"error": text},
                }
            )
        ]

    def _permission_request(self, data: dict[str, Any]) -> list[AcpItem]:
        request_id = data["requestId"]
        call = data["toolCall"]
        if not isinstance(request_id, str) or not isinstance(call, dict):
            return []
        call_id, name = call.get("id"), call.get("name")
        if not isinstance(call_id, str) or not isinstance(name, str):
            return []
        options = data.get("options")
        offered = options if isinstance(options, list) and options else list(OPTION_NAMES)
        decisions = [o for o in offered if isinstance(o, str) and o in OPTION_NAMES]
        arguments = call.get("arguments")
        return [
            PermissionAsk(
                request_id,
                {
                    "sessionId": self.session_id,
                    "toolCall": {
                        "toolCallId": call_id,
                        "title": tool_title(name, arguments),
                        "kind": tool_kind(name, call, self.known_kinds),
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

    def _permission_result(self, data: dict[str, Any]) -> list[AcpItem]:
        # An approved call runs now; a rejected one gets its failed result from the loop.
        call_id, decision = data.get("toolCallId"), data.get("decision")
        if not isinstance(call_id, str) or call_id not in self.open_calls:
            return []
        if not isinstance(decision, str) or not decision.startswith("allow"):
            return []
        return [
            self._update(
                {
                    "sessionUpdate": "tool_call_update",
                    "toolCallId": call_id,
                    "status": "in_progress",
                    "_meta": {"loopgate": {"permission": decision, "by": data.get("by")}},
                }
            )
        ]

    # --- usage, budgets, errors ---------------------------------------------------------

    def _llm_response(self, data: dict[str, Any]) -> list[AcpItem]:
        prompt, completion = data.get("promptTokens"), data.get("completionTokens")
        if isinstance(prompt, int):
            self.input_tokens += prompt
        if isinstance(completion, int):
            self.output_tokens += completion
        if self.context_size is None or not isinstance(prompt, int):
            return []
        used = prompt + (completion if isinstance(completion, int) else 0)
        update: dict[str, Any] = {
            "sessionUpdate": "usage_update",
            "used": used,
            "size": self.context_size,
        }
        cost = data.get("costUsd")
        if isinstance(cost, int | float) and not isinstance(cost, bool):
            update["cost"] = {"amount": cost, "currency": "USD"}
        return [self._update(update)]

    def _budget(self, data: dict[str, Any]) -> list[AcpItem]:
        kind = budget_kind(data)  # "kind", or "budget" as seed 001's engine spells it
        if kind is not None:
            self.budget_kind = kind
        return []

    def _error(self, data: dict[str, Any]) -> list[AcpItem]:
        message = data.get("message")
        if isinstance(message, str) and message:
            self.last_error = message
        return []

    # --- the end of the turn ------------------------------------------------------------

    def _completion(self, data: dict[str, Any]) -> list[AcpItem]:
        if data.get("status") == "executing":
            return []
        status = completion_status(data)
        reason = data.get("reason") if isinstance(data.get("reason"), str) else None
        if status == "failed":
            return self._fail(reason or "failed", self.last_error)
        if status == "cancelled":
            stop = "cancelled"
        elif status == "budget_exhausted":
            kind = self.budget_kind or ("tokens" if reason and "token" in reason else "rounds")
            stop = "max_tokens" if kind == "tokens" else "max_turn_requests"
        else:
            # completed, waiting_user, and statuses newer than this code: the turn ended;
            # _meta.loopgate.status carries the status as sent.
            stop = "end_turn"
        items: list[AcpItem] = self._close_calls("cancelled" if stop == "cancelled" else None)
        meta: dict[str, Any] = {"runId": self.context.run_id, "status": status}
        if reason:
            meta["reason"] = reason
        if isinstance(data.get("round"), int):
            meta["rounds"] = data["round"]
        if isinstance(data.get("traceId"), str):
            meta["traceId"] = data["traceId"]
        result: dict[str, Any] = {"stopReason": stop}
        usage = self._usage(data)
        if usage is not None:
            result["usage"] = usage
        result["_meta"] = {"loopgate": meta}
        self.ended = True
        items.append(PromptAnswer(result))
        return items

    def _usage(self, data: dict[str, Any]) -> dict[str, int] | None:
        prompt, completion = data.get("promptTokens"), data.get("completionTokens")
        inp = prompt if isinstance(prompt, int) and prompt >= 0 else self.input_tokens
        out = completion if isinstance(completion, int) and completion >= 0 else self.output_tokens
        if not inp and not out:
            return None
        return {"totalTokens": inp + out, "inputTokens": inp, "outputTokens": out}

    def _close_calls(self, why: str | None) -> list[AcpItem]:
        text = why or "the run ended before this tool call finished"
        items: list[AcpItem] = [
            self._update(
                {
                    "sessionUpdate": "tool_call_update",
                    "toolCallId": call_id,
                    "status": "failed",
                    "content": _text_content(text),
                }
            )
            for call_id in self.open_calls
        ]
        self.open_calls.clear()
        return items

    def _fail(self, reason: str, error: str | None) -> list[AcpItem]:
        items = self._close_calls(None)
        self.ended = True
        message = f"the agent loop failed ({reason})"
        if error:
            message += f": {error}"
        data: dict[str, Any] = {"runId": self.context.run_id, "reason": reason}
        if error:
            data["error"] = error
        items.append(PromptFailure(INTERNAL_ERROR, message, data))
        return items


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
