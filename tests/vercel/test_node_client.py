"""The ``ai`` npm package's own client code on loopgate's UI message streams
(tests/node/vercel-client.mjs).

Offline: every recording, rendered as the gateway sends it, through the package's chunk parser
(``uiMessageChunkSchema``), ``readUIMessageStream`` and a ``Chat`` (useChat's core) — plus two
broken streams, to show that the same checks catch what is wrong. Live: DefaultChatTransport
and a Chat drive runs on a real gateway: a tool round, a conversation, a client tool's round
trip, a failed run, a cancel by abortSignal and by stop(), a reconnect, a refused request, and
the transport's ``body`` option naming a multitask_strategy (reject, then interrupt).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conformance.runner import load_stream, stream_paths
from loopgate.adapters.shared import sse
from loopgate.adapters.vercel import ADAPTER
from loopgate.contracts.projector import as_served, project_run
from tests.gateway.harness import running_gateway
from tests.node_clients import node_clients, run_script

STREAMS = {p.stem: p for p in stream_paths()}
# Broken on purpose: a delta whose part was never started; a chunk type the schema lacks.
BROKEN = {
    "zz-delta-without-start": b'data: {"type":"start"}\n\ndata: {"type":"text-delta","id":"t1",'
    b'"delta":"x"}\n\ndata: {"type":"finish"}\n\ndata: [DONE]\n\n',
    "zz-unknown-chunk": b'data: {"type":"start"}\n\ndata: {"type":"loopgate-thing"}\n\n'
    b'data: {"type":"finish"}\n\ndata: [DONE]\n\n',
}


@pytest.fixture(scope="module")
def offline(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    node_clients()  # before the gateway starts
    folder: Path = tmp_path_factory.mktemp("vercel-streams")
    for name, path in STREAMS.items():
        messages = project_run(ADAPTER, as_served(load_stream(path)))
        # Framed as a live subscriber gets it: one write per message, a keep-alive between.
        frames = [ADAPTER.render([m]) for m in messages]
        (folder / f"{name}.sse").write_bytes(sse.KEEPALIVE.join(frames))
    for name, raw in BROKEN.items():
        (folder / f"{name}.sse").write_bytes(raw)
    return run_script("vercel-client.mjs", "offline", str(folder))


@pytest.fixture(scope="module")
def live() -> Iterator[dict[str, Any]]:
    node_clients()  # before the gateway starts
    with running_gateway(scripted_delay_s=0.002) as (base, _):
        yield run_script("vercel-client.mjs", "live", base)


def ran(results: dict[str, Any], name: str) -> dict[str, Any]:
    result = results[name]
    assert "crashed" not in result, (result.get("crashed"), result.get("stack"))
    return result  # type: ignore[no-any-return]


def parts(message: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [p for p in message["parts"] if p["type"] == kind]


# --- offline: every recording ------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(STREAMS))
def test_the_sdk_accepts_every_recording(offline: dict[str, Any], name: str) -> None:
    seen = ran(offline, name)
    assert seen["invalid"] == [], seen["invalid"]  # uiMessageChunkSchema, chunk by chunk
    assert seen["endsWithDone"] and seen["types"][0] == "start"
    assert seen["transportError"] is None  # DefaultChatTransport's own reading of the body
    assert seen["transported"] == len(seen["types"]) == seen["dataLines"] - 1  # but [DONE]
    # The only errors are the run's own (its ``error`` chunk), never the stream's.
    expected = [
        {"name": "Error", "message": text, "statusCode": None} for text in seen["errorTexts"]
    ]
    assert seen["messageErrors"] == expected
    chat = seen["chat"]
    assert chat["errors"] == expected[:1]  # a Chat stops at the first
    assert chat["status"] == ("error" if expected else "ready")
    message = seen["message"]
    assert message["id"] == name and message["role"] == "assistant"  # the run's id
    assert message["metadata"]["loopgate"]["runId"] == name
    assert parts(message, "step-start") and len(parts(message, "step-start")) == seen[
        "types"
    ].count("start-step")
    for part in message["parts"]:
        if part["type"] in ("text", "reasoning"):
            assert part["state"] == "done"  # every part closed
        if part["type"].startswith("tool-"):
            # Answered, or left for the client when the turn waits on it.
            assert part["state"] in ("output-available", "output-error", "input-available")
            if part["state"] == "input-available":
                assert chat["finishes"][0]["finishReason"] == "tool-calls"
    if not expected:  # a Chat stops at an error; readUIMessageStream goes on
        # The same message from the Chat (useChat) as from readUIMessageStream.
        assert chat["messages"][-1]["parts"] == message["parts"]


def test_the_checks_catch_a_broken_stream(offline: dict[str, Any]) -> None:
    missing = ran(offline, "zz-delta-without-start")
    assert missing["invalid"] == []
    assert missing["messageErrors"][0]["name"] == "UIMessageStreamError"
    assert missing["chat"]["status"] == "error"
    unknown = ran(offline, "zz-unknown-chunk")
    assert unknown["invalid"] and unknown["invalid"][0]["name"] == "TypeValidationError"
    assert unknown["transportError"]["name"] == "TypeValidationError"
    assert unknown["chat"]["status"] == "error"


def test_a_tool_round_as_the_client_builds_it(offline: dict[str, Any]) -> None:
    message = ran(offline, "one-tool-round")["message"]
    (call,) = parts(message, "tool-calculate")
    assert call["state"] == "output-available"
    assert call["input"] == {"expression": "17 * 23 + 7"} and call["output"] == "398"
    assert "398" in parts(message, "text")[-1]["text"]
    assert message["metadata"]["loopgate"]["usage"]["totalTokens"] == 69


def test_a_client_tool_waits_for_the_client(offline: dict[str, Any]) -> None:
    seen = ran(offline, "client-tool")
    (call,) = seen["chat"]["toolCalls"]  # onToolCall: the app runs it
    assert call["toolName"] == "confirm_booking" and call["input"]["topic"]
    assert seen["chat"]["finishes"] == [
        {"finishReason": "tool-calls", "isAbort": False, "isError": False}
    ]


def test_steering_data_and_cancel_as_the_client_sees_them(offline: dict[str, Any]) -> None:
    steering = ran(offline, "steering")["message"]
    (steer,) = parts(steering, "steering-message")
    assert steer["text"] == "plain: actually, just give me the short version"
    unknown = ran(offline, "unknown-kinds-fields")
    kept = [p["type"] for p in unknown["message"]["parts"] if p["type"].startswith("data-")]
    assert kept == [
        "data-loopgate-x_memory_recall",
        "data-loopgate-vendor.progress",
        "data-loopgate-tool_progress",
        "data-loopgate-x_audit",
    ]
    transient = {d["type"] for d in unknown["chat"]["data"] if d["transient"]}
    assert "data-loopgate-llm_response" in transient  # onData only: not kept in the message
    cancelled = ran(offline, "cancel-mid-tool")
    assert cancelled["types"][-1] == "abort"
    assert parts(cancelled["message"], "tool-sleep")[0]["state"] == "output-error"
    assert cancelled["message"]["metadata"]["loopgate"]["status"] == "cancelled"


# --- live: a real gateway ----------------------------------------------------------------


def test_the_transport_streams_a_tool_round(live: dict[str, Any]) -> None:
    seen = ran(live, "transport")
    assert seen["types"][0] == "start" and seen["finish"]["finishReason"] == "stop"
    message = seen["message"]
    assert message["id"] == seen["start"]["messageId"] == message["metadata"]["loopgate"]["runId"]
    assert message["metadata"]["loopgate"]["threadId"] == "v-transport"
    (clock,) = parts(message, "tool-clock")
    assert clock["state"] == "output-available" and clock["output"].endswith("+00:00")
    assert f"It is {clock['output']} (UTC) right now" in parts(message, "text")[-1]["text"]


def test_a_chat_keeps_its_conversation(live: dict[str, Any]) -> None:
    chat = ran(live, "chat")
    assert chat["status"] == "ready" and chat["errors"] == []
    assert [m["role"] for m in chat["messages"]] == ["user", "assistant", "user", "assistant"]
    assert all(r == {**r, "status": 200, "stream": "v1"} for r in chat["responses"])
    assert chat["responses"][0]["contentType"].startswith("text/event-stream")
    # The second request carried the first answer (UI messages), and the loop got it.
    sent = chat["requests"][1]
    assert sent["id"] == "v-chat" and sent["trigger"] == "submit-message"
    assert [m["role"] for m in sent["messages"]] == ["user", "assistant", "user"]
    answer = parts(chat["messages"][-1], "text")[-1]["text"]
    assert answer == "Before this you said: “What time is it?”."
    runs = [
        m["metadata"]["loopgate"]["runId"] for m in chat["messages"] if m["role"] == "assistant"
    ]
    assert runs == [r["runId"] for r in chat["responses"]] and len(set(runs)) == 2


def test_a_client_tool_round_trip(live: dict[str, Any]) -> None:
    trip = ran(live, "clientTool")
    assert trip["status"] == "ready" and trip["errors"] == []
    assert [c["toolName"] for c in trip["toolCalls"]] == ["confirm_booking"]
    assert [f["finishReason"] for f in trip["finishes"]] == ["tool-calls", "stop"]
    # The Chat sent the output back by itself, and the answer continued the same message.
    second = trip["requests"][1]
    assert second["messageId"] == trip["responses"][0]["runId"]
    (sent,) = parts(second["messages"][-1], "tool-confirm_booking")
    assert sent["state"] == "output-available" and sent["output"] == "booked: friday 10:00"
    assistant = trip["messages"][1]
    assert assistant["id"] == trip["responses"][0]["runId"]
    assert parts(assistant, "text")[-1]["text"] == "The client answered: booked: friday 10:00."
    assert assistant["metadata"]["loopgate"]["runId"] == trip["responses"][1]["runId"]


def test_a_failed_run_is_the_chats_error(live: dict[str, Any]) -> None:
    failed = ran(live, "failedRun")
    assert failed["status"] == "error"
    assert failed["error"] == {
        "name": "Error",
        "message": "the scripted model lost its connection",
        "statusCode": None,
    }
    assert parts(failed["messages"][-1], "text")[0]["text"].startswith("Let me start on")


def test_aborting_the_request_cancels_the_run(live: dict[str, Any]) -> None:
    aborted = ran(live, "abortSignal")
    assert aborted["types"][-1] == "tool-input-available"
    assert aborted["afterAbort"]["message"] == "This operation was aborted"
    assert aborted["serverStatus"] == "cancelled"


def test_stop_cancels_the_run(live: dict[str, Any]) -> None:
    stopped = ran(live, "stop")
    assert stopped["status"] == "ready" and stopped["errors"] == []
    assert stopped["finishes"] == [{"finishReason": None, "isAbort": True, "isError": False}]
    assert stopped["serverStatus"] == "cancelled"


def test_a_reconnect_replays_the_running_answer(live: dict[str, Any]) -> None:
    again = ran(live, "reconnect")
    assert again["none"] is None  # 204: no run of that chat is going
    assert again["replayed"]["start"] == again["original"]["start"]
    assert again["replayed"]["types"] == again["original"]["types"]
    # The first client left, the run was cancelled, and the replay saw it end.
    assert again["rest"][-1] == "abort" and "tool-output-error" in again["rest"]


def test_a_refused_request_is_the_transports_error(live: dict[str, Any]) -> None:
    thrown = ran(live, "badRequest")["thrown"]
    assert thrown["name"] == "APICallError" and thrown["statusCode"] == 422
    assert '"detail":"messages must hold at least one message"' in thrown["message"]


def test_the_transport_body_names_a_multitask_strategy(live: dict[str, Any]) -> None:
    seen = ran(live, "multitask")
    assert seen["slowRunId"]
    rejected = seen["rejected"]
    assert rejected["name"] == "APICallError" and rejected["statusCode"] == 409
    assert seen["slowRunId"] in rejected["message"]
    # interrupt: the slow run is cancelled (its own stream ends so), the new one runs through.
    assert seen["interrupted"][0] == "start" and seen["interrupted"][-1] == "finish"
    assert seen["slowStatus"] == "cancelled"
    assert seen["slowEnd"][-1] == "abort"  # how a cancelled run's stream ends
