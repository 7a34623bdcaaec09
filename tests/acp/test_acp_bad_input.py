"""Bad input on the wire: each line gets the spec's error answer and the agent keeps serving."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import anyio
import pytest

from tests.acp.support import REPO, agent_command, agent_env

pytestmark = pytest.mark.anyio


async def exchange(lines: list[bytes], expected: int, *args: str) -> list[dict[str, Any]]:
    """Write raw lines to ``loopgate acp`` and read ``expected`` answers."""
    async with await anyio.open_process(
        agent_command(*args), env=agent_env(), cwd=REPO, stderr=subprocess.DEVNULL
    ) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        await proc.stdin.send(b"".join(lines))
        buffer = b""
        answers: list[dict[str, Any]] = []
        with anyio.fail_after(15):
            while len(answers) < expected:
                buffer += await proc.stdout.receive()
                *complete, buffer = buffer.split(b"\n")
                answers.extend(json.loads(line) for line in complete if line)
        await proc.stdin.aclose()
        with anyio.fail_after(10):
            await proc.wait()
    return answers


def line(message: Any) -> bytes:
    return json.dumps(message).encode() + b"\n"


def by_id(answers: list[dict[str, Any]]) -> dict[Any, dict[str, Any]]:
    return {a.get("id"): a for a in answers}


async def test_each_bad_line_is_answered_and_the_agent_keeps_serving() -> None:
    lines = [
        b"this is not json\n",
        b"[]\n",
        b'"just a string"\n',
        line({"jsonrpc": "2.0", "id": 1, "method": "session/teleport", "params": {}}),
        line({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": "/tmp"}}),
        line({"jsonrpc": "2.0", "id": 3, "method": "session/new", "params": [1, 2]}),
        line({"jsonrpc": "2.0", "id": 4, "method": 7}),
        line({"jsonrpc": "1.0", "id": 5, "method": "initialize"}),
        line({"jsonrpc": "2.0", "method": "session/unknown_notification", "params": {}}),
        line({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "nope"}}),
        line(
            {
                "jsonrpc": "2.0",
                "id": 6,
                "method": "session/prompt",
                "params": {"sessionId": "x", "prompt": [{"type": "video"}]},
            }
        ),
        line(
            {
                "jsonrpc": "2.0",
                "id": 7,
                "method": "session/set_config_option",
                "params": {"sessionId": "nope", "configId": "approval", "value": "always"},
            }
        ),
        line({"jsonrpc": "2.0", "id": 8, "method": "_loopgate/secret", "params": {}}),
        line(
            {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 99}}
        ),
    ]
    answers = await exchange(lines, 12)
    unnumbered = [a for a in answers if a["id"] is None]
    assert [a["error"]["code"] for a in unnumbered] == [-32700, -32600, -32600]
    assert "not valid JSON" in unnumbered[0]["error"]["message"]
    assert "batches" in unnumbered[1]["error"]["message"]
    got = by_id(answers)
    assert got[1]["error"]["code"] == -32601
    assert got[1]["error"]["message"] == "Method not found: session/teleport"
    assert got[2]["error"]["code"] == -32602
    assert got[2]["error"]["message"] == "Invalid params: mcpServers: Field required"
    assert (
        got[3]["error"]["code"] == -32602
        and "params must be an object" in got[3]["error"]["message"]
    )
    assert got[4]["error"]["code"] == -32600 and "method" in got[4]["error"]["message"]
    assert got[5]["error"]["code"] == -32600 and "jsonrpc" in got[5]["error"]["message"]
    assert got[6]["error"]["code"] == -32602
    assert got[6]["error"]["message"].startswith("Invalid params: prompt[0]:")
    assert "'video'" in got[6]["error"]["message"]
    assert got[7]["error"]["code"] == -32002 and "nope" in got[7]["error"]["message"]
    assert got[8]["error"]["code"] == -32601
    # Version negotiation: an unsupported version is answered with ours.
    assert got[0]["result"]["protocolVersion"] == 1
    for answer in answers:
        assert "Traceback" not in json.dumps(answer)


async def test_an_over_long_line_is_refused_and_skipped() -> None:
    huge = line({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"x": "a" * 5000}})
    ok = line({"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {"protocolVersion": 1}})
    answers = await exchange([huge, ok], 2, "--max-line-bytes", "1024")
    assert answers[0]["id"] is None and answers[0]["error"]["code"] == -32600
    assert "longer than 1024 bytes" in answers[0]["error"]["message"]
    assert answers[1]["id"] == 2 and answers[1]["result"]["protocolVersion"] == 1


async def test_stdout_carries_only_protocol_messages() -> None:
    # A prompt runs the whole loop; every byte on stdout must still be a JSON-RPC message.
    new = line(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "session/new",
            "params": {"cwd": "/tmp", "mcpServers": []},
        }
    )
    answers = await exchange([new], 1)
    session_id = answers[0]["result"]["sessionId"]
    async with await anyio.open_process(
        agent_command(), env=agent_env(), cwd=REPO, stderr=subprocess.DEVNULL
    ) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        await proc.stdin.send(new)
        buffer = b""
        with anyio.fail_after(15):
            while b"\n" not in buffer:
                buffer += await proc.stdout.receive()
        session_id = json.loads(buffer.split(b"\n")[0])["result"]["sessionId"]
        prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": "one tool 3 4"}]}
        await proc.stdin.send(
            line({"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": prompt})
        )
        with anyio.fail_after(15):
            while b'"id":2' not in buffer:
                buffer += await proc.stdout.receive()
        await proc.stdin.aclose()
        with anyio.fail_after(10):
            rest = b""
            async for chunk in proc.stdout:
                rest += chunk
        await proc.wait()
    messages = [json.loads(x) for x in (buffer + rest).split(b"\n") if x]
    assert all(m.get("jsonrpc") == "2.0" for m in messages)
    assert messages[-1]["result"]["stopReason"] == "end_turn"
