"""Bad input gets A2A's own error shapes, in our words: JSON-RPC errors with A2A's codes and
an ErrorInfo, HTTP+JSON ``google.rpc.Status`` bodies with the HTTP status."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

LIMIT = 32 * 1024
pytestmark = pytest.mark.gateway(scripted_delay_s=0.002, max_body_bytes=LIMIT)


def rpc(base: str, body: Any, raw: bytes | None = None) -> dict[str, Any]:
    content = raw if raw is not None else None
    response = httpx.post(
        f"{base}/a2a",
        json=None if raw is not None else body,
        content=content,
        headers={"content-type": "application/json"},
        timeout=30,
    )
    assert response.status_code == 200
    answer: dict[str, Any] = response.json()
    return answer


def message(*parts: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"message": {"messageId": "m", "role": "ROLE_USER", "parts": list(parts), **extra}}


@pytest.mark.parametrize(
    ("body", "raw", "code", "words"),
    [
        (None, b"{not json", -32700, "not valid JSON"),
        ([], None, -32600, "batches"),
        ({"jsonrpc": "2.0", "id": 1, "method": "message/send"}, None, -32601, "message/send"),
        ({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {}}, None, -32602, "id"),
        (
            {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": message()},
            None,
            -32602,
            "no text",
        ),
        (
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "SendMessage",
                "params": message({"metadata": {"note": "no content"}}),
            },
            None,
            -32602,
            "a part carries text, data, raw bytes or a url",
        ),
        (
            {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "nope"}},
            None,
            -32001,
            "no task",
        ),
        (
            {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {}}},
            None,
            -32602,
            "messageId",
        ),
    ],
)
def test_jsonrpc_errors(gateway: str, body: Any, raw: bytes | None, code: int, words: str) -> None:
    answer = rpc(gateway, body, raw)
    error = answer["error"]
    assert error["code"] == code
    assert words in error["message"]
    assert error["data"][0]["@type"] == "type.googleapis.com/google.rpc.ErrorInfo"
    assert "Traceback" not in error["message"]


def test_rest_errors_are_rpc_statuses(gateway: str) -> None:
    missing = httpx.get(f"{gateway}/a2a/rest/tasks/nope", timeout=30)
    assert missing.status_code == 404
    error = missing.json()["error"]
    assert error["status"] == "NOT_FOUND"
    assert error["details"][0]["reason"] == "TASK_NOT_FOUND"
    big = httpx.post(
        f"{gateway}/a2a/rest/message:send",
        json=message({"text": "x" * (LIMIT + 1)}),
        timeout=30,
    )
    assert big.status_code == 413
    assert "larger than the limit" in big.json()["error"]["message"]
    wrong = httpx.post(f"{gateway}/a2a/rest/message:send", json={"message": 3}, timeout=30)
    assert wrong.status_code == 400
    assert wrong.json()["error"]["details"][0]["reason"] == "INVALID_PARAMS"


def test_an_unknown_agent_has_no_card(gateway: str) -> None:
    response = httpx.get(f"{gateway}/agents/nobody/.well-known/agent-card.json", timeout=30)
    assert response.status_code == 404
    assert "nobody" in response.json()["error"]["message"]
    named = httpx.get(f"{gateway}/agents/default/.well-known/agent-card.json", timeout=30)
    urls = [i["url"] for i in named.json()["supportedInterfaces"]]
    assert urls == [f"{gateway}/agents/default/a2a", f"{gateway}/agents/default/a2a/rest"]


def test_a_finished_task_takes_no_message(gateway: str) -> None:
    sent = httpx.post(
        f"{gateway}/a2a/rest/message:send", json=message({"text": "plain say hello"}), timeout=30
    )
    task = sent.json()["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    again = httpx.post(
        f"{gateway}/a2a/rest/message:send",
        json=message({"text": "more"}, taskId=task["id"]),
        timeout=30,
    )
    assert again.status_code == 400
    assert again.json()["error"]["details"][0]["reason"] == "UNSUPPORTED_OPERATION"
