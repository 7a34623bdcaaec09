"""Orphans, one rule for every protocol: a tool result whose start the client never saw is
announced first (AG-UI TOOL_CALL_START/ARGS/END, ACP ``tool_call``), unless the stream continues
one the client had (AG-UI after a tool approval, watching from a cursor): those calls are known."""

from __future__ import annotations

from typing import Any

import anyio
import msgspec

from loopgate.adapters.acp.projector import AcpProjector, PromptAnswer, SessionUpdate
from loopgate.adapters.agui.events import AguiEvent, Custom
from loopgate.adapters.agui.input import RunAgentInput
from loopgate.adapters.agui.projector import AguiProjector
from loopgate.adapters.agui.runs import plan_run
from loopgate.adapters.jsonrpc.projector import JsonRpcProjector
from loopgate.adapters.shared.projector import SEEN_CALLS, Call, SeenCall
from loopgate.adapters.vercel.chunks import Chunk, Data
from loopgate.adapters.vercel.projector import VercelProjector
from loopgate.contracts.envelope import Envelope
from loopgate.contracts.ports import RunInfo
from loopgate.contracts.projector import ProjectorContext

T0 = 1_700_000_000_000_000_000
ORPHAN = {"id": "c9", "name": "lookup", "success": True, "resultPreview": "42", "result": 42}


def envelopes(*events: tuple[str, dict[str, Any]], first: int = 1) -> list[Envelope]:
    return [
        Envelope("r", seq, T0 + seq * 1_000_000, kind, data)
        for seq, (kind, data) in enumerate(events, first)
    ]


def agui(events: list[Envelope], **options: Any) -> list[dict[str, Any]]:
    p = AguiProjector(
        ProjectorContext(run_id="r", thread_id="t", protocol_version="1.0", options=options)
    )
    out = p.start()
    for env in events:
        out += p.feed(env)
    return [msgspec.to_builtins(m) for m in out + p.close()]


def acp(events: list[Envelope], **options: Any) -> list[Any]:
    p = AcpProjector(ProjectorContext(run_id="r", thread_id="s", options=options))
    return [item for env in events for item in p.feed(env)] + p.close()


def updates(items: list[Any]) -> list[dict[str, Any]]:
    return [i.params["update"] for i in items if isinstance(i, SessionUpdate)]


STREAM = envelopes(
    ("stage_start", {"model": "m"}),
    ("tool_call_result", ORPHAN),
    ("completion", {"status": "completed"}),
)


def test_agui_announces_the_call_before_its_result() -> None:
    events = agui(STREAM)
    tools = [e for e in events if e["type"].startswith("TOOL_CALL")]
    assert [(e["type"], e["toolCallId"]) for e in tools] == [
        ("TOOL_CALL_START", "c9"),
        ("TOOL_CALL_ARGS", "c9"),
        ("TOOL_CALL_END", "c9"),
        ("TOOL_CALL_RESULT", "c9"),
    ]
    assert tools[0]["toolCallName"] == "lookup"
    assert tools[1]["delta"] == "{}"  # its arguments were never seen
    assert tools[3]["content"] == "42"
    assert events[-1]["type"] == "RUN_FINISHED"


def test_acp_announces_the_call_before_its_update() -> None:
    items = acp(STREAM)
    first, second = updates(items)
    assert first == {
        "sessionUpdate": "tool_call",
        "toolCallId": "c9",
        "title": "lookup",
        "kind": "search",
        "status": "in_progress",
        "_meta": {"loopgate": {"name": "lookup"}},
    }
    assert (second["sessionUpdate"], second["status"]) == ("tool_call_update", "completed")
    assert isinstance(items[-1], PromptAnswer)


def test_jsonrpc_carries_the_envelopes_as_they_are() -> None:
    p = JsonRpcProjector(ProjectorContext(run_id="r", thread_id="r"))
    out = [m for env in STREAM for m in p.feed(env)]
    assert [m.method for m in out] == ["run.event"] * 3 + ["run.end"]
    assert [m.params["event"] for m in out[:3]] == STREAM


def test_a_result_naming_no_tool_cannot_be_announced_and_degrades() -> None:
    nameless = envelopes(("tool_error", {"id": "c9", "error": "boom"}))
    assert [e["type"] for e in agui(nameless)][1:] == ["CUSTOM", "RUN_ERROR"]
    assert updates(acp(nameless)) == []


def test_calls_the_client_saw_are_answered_without_announcing() -> None:
    seen = {SEEN_CALLS: {"c9": SeenCall("lookup", answered=False)}}
    events = agui(STREAM, **seen)
    assert [e["type"] for e in events if e["type"].startswith("TOOL_CALL")] == ["TOOL_CALL_RESULT"]
    assert [u["sessionUpdate"] for u in updates(acp(STREAM, **seen))] == ["tool_call_update"]


# --- AG-UI: resuming after a tool approval --------------------------------------------------

HISTORY = envelopes(
    ("stage_start", {"model": "m"}),
    ("tool_call_start", {"id": "call_w", "name": "write", "arguments": {"path": "n.md"}}),
    ("tool_call_start", {"id": "call_r", "name": "read", "arguments": {}}),
    ("tool_call_result", {"id": "call_r", "name": "read", "success": True}),
    ("permission_request", {"requestId": "perm_1", "toolCall": {"id": "call_w", "name": "write"}}),
)
AFTER = envelopes(
    (
        "permission_result",
        {"requestId": "perm_1", "toolCallId": "call_w", "decision": "allow_once"},
    ),
    ("tool_call_result", {"id": "call_w", "name": "write", "success": True, "resultPreview": "ok"}),
    ("completion", {"status": "completed"}),
    first=len(HISTORY) + 1,
)


class Service:
    """The part of RunService that plan_run uses, over one run's journal."""

    def __init__(self, journal: list[Envelope]) -> None:
        self.journal = journal
        self.answers: list[tuple[str, str, str]] = []

    async def history(
        self, run_id: str, *, after: int = 0, limit: int | None = None
    ) -> list[Envelope]:
        events = [e for e in self.journal if e.seq > after]
        return events if limit is None else events[:limit]

    async def respond(self, run_id: str, request_id: str, decision: str) -> None:
        self.answers.append((run_id, request_id, decision))

    async def get(self, run_id: str, *, attachments: bool = False) -> RunInfo:
        return RunInfo(
            id=run_id,
            thread_id="t",
            source="loop",
            state="running",
            status=None,
            created_at=T0,
            last_seq=len(self.journal),
        )


def plan(body: dict[str, Any], journal: list[Envelope]) -> Any:
    request = msgspec.convert(body, RunAgentInput)
    return anyio.run(plan_run, Service(journal), request, None)  # type: ignore[arg-type]


def test_the_stream_after_an_approval_knows_the_calls_started_before_it() -> None:
    resume = [
        {
            "interruptId": "r:permission:perm_1",
            "status": "resolved",
            "payload": {"decision": "allow_once"},
        }
    ]
    planned = plan(
        {"threadId": "t", "runId": "r", "messages": [], "protocolVersion": "1.0", "resume": resume},
        HISTORY + AFTER,
    )
    assert planned.after == len(HISTORY)
    assert planned.context.options[SEEN_CALLS] == {
        "call_w": SeenCall("write", answered=False),
        "call_r": SeenCall("read", answered=True),
    }
    p = AguiProjector(planned.context)
    events = [msgspec.to_builtins(m) for m in p.start() + [m for env in AFTER for m in p.feed(env)]]
    tools = [(e["type"], e["toolCallId"]) for e in events if e["type"].startswith("TOOL_CALL")]
    assert tools == [("TOOL_CALL_RESULT", "call_w")]  # no second START for a call the client has
    assert events[-1]["type"] == "RUN_FINISHED"
    # Without what the client saw, the same stream announces the call: the rule for a stranger.
    stranger = AguiProjector(ProjectorContext(run_id="r", thread_id="t", protocol_version="1.0"))
    fresh = [msgspec.to_builtins(m) for env in AFTER for m in stranger.feed(env)]
    assert next(e["type"] for e in fresh if e["type"].startswith("TOOL_CALL")) == "TOOL_CALL_START"


def test_a_watcher_attaching_at_a_cursor_knows_the_calls_before_it() -> None:
    attach = {"loopgate": {"attach": True, "after": 3}}
    planned = plan(
        {"threadId": "t", "runId": "r", "messages": [], "forwardedProps": attach}, HISTORY + AFTER
    )
    assert planned.after == 3
    assert planned.context.options[SEEN_CALLS] == {
        "call_w": SeenCall("write", answered=False),
        "call_r": SeenCall("read", answered=False),
    }
    from_start = plan(
        {
            "threadId": "t",
            "runId": "r",
            "messages": [],
            "forwardedProps": {"loopgate": {"attach": True}},
        },
        HISTORY,
    )
    assert SEEN_CALLS not in from_start.context.options


def test_a_subclass_that_shows_starts_its_own_way_announces_orphans_that_way() -> None:
    # AG-UI and Vercel show an orphan as any start: through the subclass's on_tool_start
    # (found when the orphan comes), not the one the class it extends had.
    class Labelled(AguiProjector):
        def on_tool_start(self, call: Call, envelope: Envelope) -> list[AguiEvent]:
            return [Custom(name="start", value=call.id), *super().on_tool_start(call, envelope)]

    class LabelledVercel(VercelProjector):
        def on_tool_start(self, call: Call, envelope: Envelope) -> list[Chunk]:
            return [
                Data(type="data-start", id=call.id, data={}),
                *super().on_tool_start(call, envelope),
            ]

    context = ProjectorContext(run_id="r", thread_id="t", protocol_version="1.0")
    for projector in (Labelled(context), LabelledVercel(context)):
        out = [msgspec.to_builtins(m) for env in STREAM for m in projector.feed(env)]
        labels = [m for m in out if m.get("name") == "start" or m.get("type") == "data-start"]
        assert len(labels) == 1, out
        assert out.index(labels[0]) < next(
            i
            for i, m in enumerate(out)
            if m["type"] in ("TOOL_CALL_RESULT", "tool-output-available")
        )
