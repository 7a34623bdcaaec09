"""A run's ``webhook``: a real receiver (Starlette on uvicorn, 127.0.0.1) is sent the run's
final state once it has ended, once, retried while it fails; a URL the operator did not allow
is refused at the start, in each protocol's error shape, and never contacted.

The gateway has a token and ``allowed_outbound`` naming the receiver's ``/hook/`` path only;
a second receiver on another port stands for a host the operator did not allow.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import openai
import pytest
from acp import RequestError, connect_to_agent, text_block
from acp.ws import create_websocket_stream

from tests.acp.support import RecordingClient, open_session
from tests.gateway.harness import running_gateway
from tests.gateway.webhook_receiver import Receiver, receiving
from tests.mcp.support import http_session

TOKEN = "webhook-t0ken-0123456789"
counter = iter(range(1_000_000))


class Setup:
    def __init__(self, base: str, hooks: tuple[str, Receiver], elsewhere: tuple[str, Receiver]):
        self.base = base
        self.hooks, self.receiver = hooks
        self.elsewhere, self.elsewhere_receiver = elsewhere
        self.http = httpx.Client(
            base_url=base, headers={"authorization": f"Bearer {TOKEN}"}, timeout=30
        )


@pytest.fixture(scope="module")
def setup() -> Iterator[Setup]:
    with receiving() as (hooks, allowed), receiving() as (elsewhere, other):
        settings = {
            "token": TOKEN,
            "allowed_outbound": [f"{hooks}/hook/"],
            "scripted_delay_s": 0.002,
            "webhook_backoff_s": 0.05,
        }
        with running_gateway(**settings) as (base, _):
            found = Setup(base, (hooks, allowed), (elsewhere, other))
            yield found
            found.http.close()


def key(name: str) -> str:
    return f"{name}-{next(counter)}"


def delivered(setup: Setup, hook: str) -> dict[str, Any]:
    return setup.receiver.delivered(hook)


def test_the_final_state_is_posted_once(setup: Setup) -> None:
    hook = key("native")
    started = setup.http.post(
        "/v1/runs",
        json={"input": "plain say hello", "webhook": f"{setup.hooks}/hook/{hook}"},
    )
    assert started.status_code == 201, started.text
    run_id = started.json()["id"]
    body = delivered(setup, hook)
    shown = setup.http.get(f"/v1/runs/{run_id}").json()
    assert body["id"] == run_id and body["state"] == "finished"
    assert body["status"] == shown["status"] == "completed"
    for field in ("thread_id", "source", "created_at", "last_seq", "input", "agent", "owner"):
        assert body[field] == shown[field], field
    assert "webhook" not in shown and "webhook" not in body  # the URL is not shown back
    # A later run's webhook arrives after it: still the one POST for the first.
    other = key("native")
    setup.http.post(
        "/v1/runs", json={"input": "plain hi", "webhook": f"{setup.hooks}/hook/{other}"}
    )
    delivered(setup, other)
    assert len(setup.receiver.of(hook)) == 1
    assert setup.receiver.tries(hook) == [200]


def test_a_failing_receiver_gets_it_on_the_third_try(setup: Setup) -> None:
    hook = key("flaky")
    url = f"{setup.hooks}/hook/{hook}"
    started = setup.http.post("/v1/runs", json={"input": "plain say hello", "webhook": url})
    assert started.status_code == 201, started.text
    body = delivered(setup, hook)
    assert body["id"] == started.json()["id"] and body["state"] == "finished"
    assert setup.receiver.tries(hook) == [503, 503, 200]


def test_a_cancelled_run_says_so(setup: Setup) -> None:
    hook = key("cancel")
    url = f"{setup.hooks}/hook/{hook}"
    run = setup.http.post("/v1/runs", json={"input": "slow tool", "webhook": url}).json()
    setup.http.post(f"/v1/runs/{run['id']}/cancel")
    body = delivered(setup, hook)
    assert (body["id"], body["status"]) == (run["id"], "cancelled")
    assert body["reason"]


def test_json_rpc_and_openai_take_a_webhook(setup: Setup) -> None:
    rpc_hook, openai_hook = key("rpc"), key("openai")
    params = {"input": "plain say hello", "webhook": f"{setup.hooks}/hook/{rpc_hook}"}
    call = {"jsonrpc": "2.0", "id": 1, "method": "run.start", "params": params}
    answer = setup.http.post("/rpc", json=call).json()
    assert delivered(setup, rpc_hook)["id"] == answer["result"]["runId"]
    client = openai.OpenAI(base_url=f"{setup.base}/v1", api_key=TOKEN)
    client.chat.completions.create(
        model="loopgate",
        messages=[{"role": "user", "content": "plain say hello"}],
        extra_body={"loopgate": {"webhook": f"{setup.hooks}/hook/{openai_hook}"}},
    )
    assert delivered(setup, openai_hook)["metadata"]["protocol"] == "openai"


def test_agui_and_vercel_take_a_webhook(setup: Setup) -> None:
    agui_hook, vercel_hook = key("agui"), key("vercel")
    agui = {
        "threadId": key("agui-thread"),
        "runId": key("agui-run"),
        "messages": [{"id": "m1", "role": "user", "content": "plain hi"}],
        "forwardedProps": {"loopgate": {"webhook": f"{setup.hooks}/hook/{agui_hook}"}},
    }
    with setup.http.stream("POST", "/agui", json=agui) as response:
        assert response.status_code == 200
        response.read()
    assert delivered(setup, agui_hook)["id"] == agui["runId"]
    vercel = {
        "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "plain"}]}],
        "loopgate": {"webhook": f"{setup.hooks}/hook/{vercel_hook}"},
    }
    with setup.http.stream("POST", "/vercel", json=vercel) as response:
        assert response.status_code == 200
        response.read()
        run_id = response.headers["x-loopgate-run-id"]
    assert delivered(setup, vercel_hook)["id"] == run_id
    refused = setup.http.post(
        "/agui", json={**agui, "forwardedProps": {"loopgate": {"webhook": 7}}}
    )
    assert refused.status_code == 422 and "webhook" in refused.json()["detail"]


def test_a_host_not_allowed_is_refused_and_never_contacted(setup: Setup) -> None:
    elsewhere = f"{setup.elsewhere}/hook/{key('refused')}"
    before = len(setup.http.get("/v1/runs").json()["runs"])
    refused = setup.http.post("/v1/runs", json={"input": "plain hi", "webhook": elsewhere})
    assert refused.status_code == 422
    assert "allowed_outbound" in refused.json()["detail"]
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "run.start",
        "params": {"input": "plain hi", "webhook": elsewhere},
    }
    error = setup.http.post("/rpc", json=call).json()["error"]
    assert error["code"] == -32602 and error["data"]["param"] == "webhook"
    assert "allowed_outbound" in error["data"]["detail"]
    client = openai.OpenAI(base_url=f"{setup.base}/v1", api_key=TOKEN)
    with pytest.raises(openai.BadRequestError, match="allowed_outbound"):
        client.chat.completions.create(
            model="loopgate",
            messages=[{"role": "user", "content": "plain hi"}],
            extra_body={"loopgate": {"webhook": elsewhere}},
        )
    not_http = setup.http.post("/v1/runs", json={"input": "hi", "webhook": "file:///etc/passwd"})
    assert not_http.status_code == 422 and "http(s)" in not_http.json()["detail"]
    # A user in the URL would hide where it goes ("allowed@elsewhere") and be logged.
    hidden = f"http://user:secret@{setup.hooks.removeprefix('http://')}/hook/{key('userinfo')}"
    with_user = setup.http.post("/v1/runs", json={"input": "hi", "webhook": hidden})
    assert with_user.status_code == 422 and "user or password" in with_user.json()["detail"]
    # Nothing started, nothing sent.
    assert len(setup.http.get("/v1/runs").json()["runs"]) == before
    assert setup.elsewhere_receiver.tries(elsewhere.rsplit("/", 1)[1]) == []


@pytest.mark.anyio
async def test_mcp_and_acp_take_a_webhook_in_their_meta(setup: Setup) -> None:
    mcp_hook, acp_hook = key("mcp"), key("acp")
    auth = {"authorization": f"Bearer {TOKEN}"}
    async with http_session(f"{setup.base}/mcp", headers=auth) as session:
        meta = {"loopgate": {"webhook": f"{setup.hooks}/hook/{mcp_hook}"}}
        result = await session.call_tool("run", {"prompt": "plain hi"}, meta=meta)  # type: ignore[arg-type]
        assert not result.is_error
        sent = await anyio.to_thread.run_sync(setup.receiver.delivered, mcp_hook)
        assert sent["id"] == result.meta["loopgate"]["runId"]
        elsewhere = {"loopgate": {"webhook": f"{setup.elsewhere}/hook/{key('mcp')}"}}
        refused = await session.call_tool("run", {"prompt": "plain hi"}, meta=elsewhere)  # type: ignore[arg-type]
        assert refused.is_error and "allowed_outbound" in refused.content[0].text
    url = setup.base.replace("http://", "ws://") + "/acp"
    conn = connect_to_agent(RecordingClient(), await create_websocket_stream(url, headers=auth))
    try:
        session_id = await open_session(conn)
        hook = {"webhook": f"{setup.hooks}/hook/{acp_hook}"}
        answer = await conn.prompt(
            session_id=session_id, prompt=[text_block("plain hi")], loopgate=hook
        )
        sent = await anyio.to_thread.run_sync(setup.receiver.delivered, acp_hook)
        assert sent["id"] == answer.field_meta["loopgate"]["runId"]
        with pytest.raises(RequestError) as bad:
            hook = {"webhook": f"{setup.elsewhere}/hook/{key('acp')}"}
            await conn.prompt(session_id=session_id, prompt=[text_block("hi")], loopgate=hook)
        assert bad.value.code == -32602 and "allowed_outbound" in str(bad.value)
    finally:
        await conn.close()
    assert setup.elsewhere_receiver.posts == {}
