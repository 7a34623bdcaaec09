"""The native API and JSON-RPC over real sockets, on a gateway serving two agents: the list of
agents, a run's ``agent``, and an unknown one in each protocol's own words."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.agents.roster import PREFIX, two_agent_settings, write_two_agents
from tests.gateway.sse_client import envelopes, read_stream
from tests.jsonrpc.jsonrpc_support import RpcProcess

pytestmark = pytest.mark.gateway(agents=two_agent_settings().agents)


def text_of(client: httpx.Client, run_id: str) -> str:
    return "".join(
        e["data"]["delta"]
        for e in envelopes(read_stream(str(client.base_url), run_id))
        if e["kind"] == "content_delta"
    )


def test_the_native_api_lists_the_agents_and_runs_the_one_named(gateway: str) -> None:
    with httpx.Client(base_url=gateway, timeout=10) as client:
        listed = client.get("/v1/agents").json()["agents"]
        assert [(a["name"], a.get("default", False)) for a in listed] == [
            ("coder", True),
            ("parrot", False),
        ]
        assert listed[1] == {
            "name": "parrot",
            "description": "Repeats what you say",
            "loop": "python:tests.agents.parrot:loop",
            "accepts": [],  # a plugged loop that declares no kinds: text only
        }
        # /v1/loop is the default agent's.
        assert client.get("/v1/loop").json() == {"name": "reference", "model": "loopgate-scripted"}
        started = client.post("/v1/runs", json={"input": "hi", "agent": "parrot"})
        assert started.status_code == 201 and started.json()["agent"] == "parrot"
        assert text_of(client, started.json()["id"]) == PREFIX + "hi"
        plain = client.post("/v1/runs", json={"input": "hi"}).json()
        assert plain["agent"] == "coder"
        refused = client.post("/v1/runs", json={"input": "hi", "agent": "nobody"})
        assert refused.status_code == 404
        assert refused.headers["content-type"] == "application/problem+json"
        assert (
            refused.json()["detail"]
            == "no agent named 'nobody'; this gateway serves: coder, parrot"
        )


def test_json_rpc_starts_runs_on_agents_and_lists_them(gateway: str) -> None:
    def call(client: httpx.Client, method: str, params: dict[str, object] | None = None) -> dict:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}}
        return client.post("/rpc", json=body).json()

    with httpx.Client(base_url=gateway, timeout=10) as client:
        agents = call(client, "agent.list")["result"]["agents"]
        assert [a["name"] for a in agents] == ["coder", "parrot"]
        started = call(
            client, "run.start", {"input": "hello", "agent": "parrot", "threadId": "rpc-t"}
        )
        run_id = started["result"]["runId"]
        assert text_of(client, run_id) == PREFIX + "hello"
        assert call(client, "run.get", {"runId": run_id})["result"]["agent"] == "parrot"
        # A prompt on the thread continues it with its agent.
        again = call(client, "run.start", {"input": "more", "threadId": "rpc-t"})["result"]
        assert call(client, "run.get", {"runId": again["runId"]})["result"]["agent"] == "parrot"
        error = call(client, "run.start", {"input": "x", "agent": "nobody"})["error"]
        assert error["code"] == -32602
        assert error["data"] == {
            "detail": "no agent named 'nobody'; this gateway serves: coder, parrot",
            "param": "agent",
            "agents": ["coder", "parrot"],
        }


def test_loopgate_rpc_serves_a_config_files_agents_on_stdio(tmp_path: Path) -> None:
    config = write_two_agents(tmp_path)
    with RpcProcess("-c", str(config)) as rpc:
        reply, _ = rpc.call("agent.list")
        assert [a["name"] for a in reply["result"]["agents"]] == ["coder", "parrot"]
        reply, _ = rpc.call("run.start", {"input": "hi", "agent": "parrot", "subscribe": True})
        text = ""
        while (message := rpc.recv())["method"] != "run.end":
            event = message["params"]["event"]
            if event["kind"] == "content_delta":
                text += event["data"]["delta"]
        assert text == PREFIX + "hi"
        assert rpc.finish() == 0


def test_loopgate_rpc_says_what_is_wrong_with_a_config_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[agents.a]\nloop = "x:y"\nloop_cmd = "z"\n\n[agents.b]\nnope = 1\n')
    with RpcProcess("-c", str(bad)) as rpc:
        assert rpc.finish() == 2
        assert rpc.stderr.decode().splitlines() == [
            f"loopgate rpc: {bad}:1: agents.a: give at most one of loop, loop_url, loop_cmd "
            "(got loop, loop_cmd)",
            f"loopgate rpc: {bad}:6: agents.b.nope: unknown key 'nope' (docs/config.md lists "
            "every key)",
        ]
