"""POST /vercel and GET /vercel/{chat_id}/stream against a real uvicorn: framing, headers,
refusals in the transport's shape, disconnects, reconnects."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import msgspec
import pytest
from starlette.datastructures import Headers

from loopgate.adapters.vercel.endpoints import projector_context, start_request
from loopgate.adapters.vercel.projector import CLIENT_TOOLS
from loopgate.adapters.vercel.request import ChatRequest
from loopgate.contracts.ports import RunInfo

LIMIT = 64 * 1024
pytestmark = pytest.mark.gateway(scripted_delay_s=0.01, keepalive_s=0.2, max_body_bytes=LIMIT)

counter = iter(range(1_000_000))


def body(text: str, **extra: Any) -> dict[str, Any]:
    n = next(counter)
    message = {"id": f"u{n}", "role": "user", "parts": [{"type": "text", "text": text}]}
    return {"id": f"chat-{n}", "messages": [message], "trigger": "submit-message", **extra}


def chunks(raw: bytes) -> list[Any]:
    out: list[Any] = []
    for block in raw.split(b"\n\n"):
        for line in block.split(b"\n"):
            if line.startswith(b"data: "):
                data = line[6:]
                out.append("[DONE]" if data == b"[DONE]" else json.loads(data))
    return out


def run_end(base: str, run_id: str) -> str:
    """The run's terminal status, from its native event stream (which ends there)."""
    with httpx.stream("GET", f"{base}/v1/runs/{run_id}/events", timeout=30) as response:
        events = [
            json.loads(line[6:]) for line in response.iter_lines() if line.startswith("data: ")
        ]
    ends = [e for e in events if e["kind"] == "completion" and e["data"]["status"] != "executing"]
    return str(ends[-1]["data"]["status"])


def read_until(lines: Iterator[str], kind: str) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    for line in lines:
        if line.startswith("data: {"):
            seen.append(json.loads(line[6:]))
            if seen[-1]["type"] == kind:
                return seen
    raise AssertionError(f"no {kind} in {[c['type'] for c in seen]}")


def test_a_run_is_a_ui_message_stream(gateway: str) -> None:
    request = body("one tool: what is 2 + 3")
    with httpx.stream("POST", f"{gateway}/vercel", json=request, timeout=30) as response:
        assert response.status_code == 200
        headers = response.headers
        raw = b"".join(response.iter_bytes())
    assert headers["content-type"].startswith("text/event-stream")
    assert headers["x-vercel-ai-ui-message-stream"] == "v1"
    assert headers["cache-control"] == "no-cache"
    run_id = headers["x-loopgate-run-id"]
    assert b"\r" not in raw and raw.endswith(b"data: [DONE]\n\n")
    got = chunks(raw)
    assert got[0] == {
        "type": "start",
        "messageId": run_id,
        "messageMetadata": {"loopgate": {"runId": run_id, "threadId": request["id"]}},
    }
    assert got[-2]["type"] == "finish" and got[-2]["finishReason"] == "stop"
    output = next(c for c in got if c["type"] == "tool-output-available")["output"]
    assert output == "5"
    info = httpx.get(f"{gateway}/v1/runs/{run_id}").json()
    assert info["thread_id"] == request["id"]  # the chat is the run's thread
    assert info["metadata"]["protocol"] == "vercel"


def test_a_continued_message_keeps_its_id(gateway: str) -> None:
    request = body("client tool: pick one", tools=[{"name": "pick_color"}])
    with httpx.stream("POST", f"{gateway}/vercel", json=request, timeout=30) as response:
        first = chunks(b"".join(response.iter_bytes()))
    call = next(c for c in first if c["type"] == "tool-input-available")
    assert call["toolName"] == "pick_color" and first[-2]["finishReason"] == "tool-calls"
    answered = {
        "type": "tool-pick_color",
        "toolCallId": call["toolCallId"],
        "state": "output-available",
        "input": call["input"],
        "output": "teal",
    }
    assistant = {"id": first[0]["messageId"], "role": "assistant", "parts": [answered]}
    again = {**request, "messages": [*request["messages"], assistant]}
    with httpx.stream("POST", f"{gateway}/vercel", json=again, timeout=30) as response:
        second = chunks(b"".join(response.iter_bytes()))
    assert second[0]["messageId"] == first[0]["messageId"]  # the same assistant message
    said = "".join(c["delta"] for c in second[:-1] if c["type"] == "text-delta")
    assert said == "The client answered: teal."


def problem(response: httpx.Response) -> str:
    assert response.headers["content-type"] == "application/problem+json"
    detail = response.json()["detail"]
    assert "Traceback" not in detail and "Error(" not in detail
    return str(detail)


@pytest.mark.parametrize(
    ("content", "status", "says"),
    [
        (b"", 400, "request body is empty"),
        (b"{not json", 400, "malformed JSON"),
        (b"[" * 200 + b"]" * 200, 400, "nested deeper than"),
        (
            b'{"messages": "hi"}',
            422,
            "invalid request body: Expected `array`, got `str` - at `messages`",
        ),
        (
            b'{"messages": [{"role": "tool", "parts": []}]}',
            422,
            "at `messages[0].role`",
        ),
        (b'{"messages": []}', 422, "messages must hold at least one message"),
        (
            json.dumps(body("x", loopgate={"config": {"max_rounds": "many"}})).encode(),
            422,
            "max_rounds",
        ),
        (
            json.dumps(body("x", loopgate={"approval": "sometimes"})).encode(),
            422,
            "at `loopgate.approval`",
        ),
    ],
)
def test_refusals_are_problems_the_transport_shows(
    gateway: str, content: bytes, status: int, says: str
) -> None:
    response = httpx.post(
        f"{gateway}/vercel", content=content, headers={"content-type": "application/json"}
    )
    assert response.status_code == status
    assert says in problem(response)


def test_a_body_over_the_limit_is_refused_before_it_is_read(gateway: str) -> None:
    request = body("x" * (LIMIT + 1))
    response = httpx.post(f"{gateway}/vercel", json=request)
    assert response.status_code == 413
    assert problem(response) == f"request body is larger than the limit of {LIMIT} bytes"


def test_a_client_that_leaves_cancels_its_run(gateway: str) -> None:
    with httpx.stream("POST", f"{gateway}/vercel", json=body("slow tool: then leave")) as response:
        run_id = response.headers["x-loopgate-run-id"]
        read_until(response.iter_lines(), "tool-input-available")
    assert run_end(gateway, run_id) == "cancelled"


def test_a_detached_run_goes_on_without_its_client(gateway: str) -> None:
    request = body("one tool: what is 6 * 7", loopgate={"detached": True})
    with httpx.stream("POST", f"{gateway}/vercel", json=request) as response:
        run_id = response.headers["x-loopgate-run-id"]
        read_until(response.iter_lines(), "start")
    assert run_end(gateway, run_id) == "completed"


def test_keep_alives_while_a_tool_runs(gateway: str) -> None:
    with httpx.stream("POST", f"{gateway}/vercel", json=body("slow tool: wait")) as response:
        lines = response.iter_lines()
        read_until(lines, "tool-input-available")
        for line in lines:
            if line:
                assert line == ": keep-alive"
                break


def test_reconnect(gateway: str) -> None:
    nothing = httpx.get(f"{gateway}/vercel/no-such-chat/stream")
    assert nothing.status_code == 204 and nothing.content == b""
    request = body("slow tool: reconnect")
    with httpx.stream("POST", f"{gateway}/vercel", json=request) as first:
        # Held: a line iterator httpx finalises closes the response, and so cancels the run.
        first_lines = first.iter_lines()
        original = read_until(first_lines, "tool-input-available")
        assert original[-1]["providerExecuted"] is True  # sleep: the loop's own tool
        url = f"{gateway}/vercel/{request['id']}/stream"
        with httpx.stream("GET", url, timeout=30) as again:
            assert again.headers["x-vercel-ai-ui-message-stream"] == "v1"
            lines = again.iter_lines()
            assert read_until(lines, "tool-input-available") == original
            httpx.post(f"{gateway}/v1/runs/{first.headers['x-loopgate-run-id']}/cancel")
            rest = chunks("\n".join(lines).encode())
    assert [c if c == "[DONE]" else c["type"] for c in rest][-3:] == [
        "message-metadata",
        "abort",
        "[DONE]",
    ]


def test_a_reconnect_knows_the_tools_the_client_runs() -> None:
    """The request's tool names are kept with the run (none: nothing kept), so that the
    reconnect's stream marks the same calls as the loop's; another front end's run says
    nothing of its client's tools."""
    tools = [{"name": "confirm_booking"}]
    started = start_request(msgspec.convert(body("hi", tools=tools), ChatRequest), Headers())
    assert started.metadata == {"protocol": "vercel", CLIENT_TOOLS: ["confirm_booking"]}
    plain = start_request(msgspec.convert(body("hi"), ChatRequest), Headers())
    assert plain.metadata == {"protocol": "vercel"}

    def options(metadata: dict[str, Any]) -> dict[str, Any]:
        info = RunInfo(
            id="r",
            thread_id="t",
            source="loop",
            state="running",
            status=None,
            created_at=0,
            last_seq=0,
            metadata=metadata,
        )
        return projector_context(info).options

    assert options(started.metadata) == {CLIENT_TOOLS: ["confirm_booking"]}
    assert options(plain.metadata) == {CLIENT_TOOLS: []}
    assert options({"protocol": "agui"}) == {}


def test_a_page_on_this_machine_may_use_it_and_others_may_not(gateway: str) -> None:
    """useChat runs in a browser: the preflight, and the stream's CORS headers."""
    page = "http://localhost:3000"  # next dev
    asked = {
        "origin": page,
        "access-control-request-method": "POST",
        "access-control-request-headers": "content-type",
    }
    preflight = httpx.options(f"{gateway}/vercel", headers=asked)
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == page
    with httpx.stream(
        "POST", f"{gateway}/vercel", json=body("plain hi"), headers={"origin": page}
    ) as response:
        assert response.headers["access-control-allow-origin"] == page
        assert chunks(b"".join(response.iter_bytes()))[-1] == "[DONE]"
    elsewhere = httpx.post(
        f"{gateway}/vercel", json=body("plain hi"), headers={"origin": "https://evil.example"}
    )
    assert elsewhere.status_code == 403
