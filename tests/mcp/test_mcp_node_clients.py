"""The official MCP TypeScript SDK (@modelcontextprotocol/sdk) as the client: on stdio with
``loopgate mcp`` as its child, and on ``/mcp`` of a real gateway. The scripts in tests/node do
the work and print a JSON summary. Needs ``npm ci`` in tests/node."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import pytest

from tests.fakes.redis_server import redis_server
from tests.gateway.harness import REPO, running_gateway
from tests.mcp.support import envelopes, projected, run_end
from tests.node_clients import NODE_DIR, node_clients
from tests.redis.test_instances import instances

# The gateway is paced: the run a test cancels waits in the scripted model's 30-second
# `sleep` tool.
pytestmark = [pytest.mark.anyio, pytest.mark.gateway(scripted_delay_s=0.01)]
NODE_TIMEOUT_S = 60
BURSTS = 10  # runs per test of progress bursts


def node_command(script: str, *args: str) -> list[str]:
    return [node_clients(), script, *args]


@asynccontextmanager
async def holding(script: str, *args: str) -> AsyncIterator[dict[str, Any]]:
    """A tests/node script that prints its summary and holds its connections until its stdin
    ends (when the block does); the summary, to which the line the script prints last is
    added as ``last`` once the block has ended."""
    command = node_command(script, *args)
    async with await anyio.open_process(command, cwd=NODE_DIR) as proc:
        assert proc.stdout is not None and proc.stdin is not None
        out = b""
        with anyio.fail_after(NODE_TIMEOUT_S):
            async for chunk in proc.stdout:
                out += chunk
                if b"\n" in out:
                    break
        first, _, out = out.partition(b"\n")
        assert first, f"no summary (rc={proc.returncode})"
        summary: dict[str, Any] = json.loads(first)
        yield summary
        await proc.stdin.aclose()
        with anyio.fail_after(NODE_TIMEOUT_S):
            async for chunk in proc.stdout:
                out += chunk
            assert await proc.wait() == 0
        summary["last"] = json.loads(out)


def node(script: str, *args: str) -> dict[str, Any]:
    """Run a tests/node script; its JSON summary."""
    command = node_command(script, *args)
    proc = subprocess.run(
        command, cwd=NODE_DIR, capture_output=True, timeout=NODE_TIMEOUT_S, check=False
    )
    assert proc.stdout, f"no summary (rc={proc.returncode}): {proc.stderr.decode()[-3000:]}"
    summary: dict[str, Any] = json.loads(proc.stdout)
    return summary


def test_progress_sent_right_before_the_result_all_reach_the_stdio_client() -> None:
    """A run without pacing emits its events in one burst, and its result follows at once:
    the SDK handles a response as it reads it and a notification a tick later, so progress
    read in the same chunk as the result found its token gone. Every one must arrive."""
    config = {
        "command": sys.executable,
        "args": ["-m", "loopgate", "mcp"],
        # The SDK passes the child only HOME, PATH and a few more: the rest is given here.
        "env": {
            "PYTHONPATH": str(REPO),
            "LOOPGATE_SCRIPTED_DELAY_S": "0",
            "LOOPGATE_WORKSPACE": tempfile.mkdtemp(prefix="loopgate-mcp-"),
        },
        "cwd": str(REPO),
        "calls": BURSTS,
        "prompt": "plain hello",
    }
    check_every_progress_arrived(node("mcp-progress-burst.mjs", json.dumps(config)))


def check_every_progress_arrived(summary: dict[str, Any]) -> None:
    """Each run's progress, as the client's callback saw it, is its event log's projection."""
    assert summary["ok"], (summary["errors"], summary["clientErrors"][:3])
    assert len(summary["runs"]) == BURSTS
    for run in summary["runs"]:
        messages, answer = projected(envelopes(run["log"]))
        assert run["messages"] == messages
        assert run["progress"] == list(range(1, len(messages) + 1))
        assert run["text"] == answer.text


async def test_aborting_a_call_over_http_cancels_its_run(gateway: str) -> None:
    """``callTool`` with an AbortSignal: the SDK POSTs notifications/cancelled on its own."""
    async with holding("mcp-http-cancel.mjs", f"{gateway}/mcp") as summary:
        assert summary["ok"], summary["errors"]
        end, took = await run_end(gateway, summary["runId"], within=10)
    assert end.data["status"] == "cancelled"
    print(f"run ended {took:.3f} s after the client's cancellation was answered")
    # The call's stream ended with the cancellation: nothing more came for the aborted call
    # until the run had ended and the client went (the SDK reports progress or an answer for
    # a call it forgot as errors).
    assert summary["last"]["clientErrors"] == []


async def test_a_cancellation_posted_to_another_instance_cancels_the_run() -> None:
    """Two gateways on one Redis behind a load balancer without sticky sessions: the call
    goes to one, its cancellation (and all that follows) to the other."""
    with redis_server() as redis:
        sep = "&" if "?" in redis else "?"
        with instances(f"{redis}{sep}prefix=t{uuid.uuid4().hex[:12]}", 2) as fleet:
            (holder, _), (other, _) = fleet
            async with holding("mcp-http-cancel.mjs", f"{holder}/mcp", f"{other}/mcp") as summary:
                assert summary["ok"], summary["errors"]
                end, took = await run_end(other, summary["runId"], within=10)
                assert end.data["status"] == "cancelled"
                print(f"run ended {took:.3f} s after the other instance took the cancellation")
            async with httpx.AsyncClient() as http:
                record = (await http.get(f"{holder}/v1/runs/{summary['runId']}")).json()
            assert record["status"] == "cancelled"
        # What the holder's stream still carried for the aborted call (docs/mcp.md).
        print("the client's errors:", summary["last"]["clientErrors"])


def test_progress_sent_right_before_the_result_all_reach_the_http_client() -> None:
    """The same burst over streamable HTTP, where the server cannot ping (stateless): the
    SDK reads one SSE event at a time, each handled before the next is read."""
    with running_gateway(scripted_delay_s=0.0) as (base, _):
        config = {"url": f"{base}/mcp", "calls": BURSTS, "prompt": "plain hello"}
        check_every_progress_arrived(node("mcp-progress-burst.mjs", json.dumps(config)))
