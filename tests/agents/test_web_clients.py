"""The web front ends on a gateway serving two agents (``loopgate serve -c`` with the two-agent
config), driven by their real clients: @ag-ui/client and the ``ai`` package's Chat in Node
(tests/node/agents-web.mjs), each addressing an agent by its path (``/agents/NAME/agui``,
``/agents/NAME/agui/ws``, ``/agents/NAME/vercel``), and the ``openai`` Python SDK, whose
``model`` is the agent. Which agent ran each run is asked of the gateway, not inferred."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
import websockets.exceptions
import websockets.sync.client as ws_client
from openai import OpenAI

from tests.agents.roster import PREFIX, write_two_agents
from tests.agui.node_client import clean
from tests.gateway.harness import gateway_process
from tests.node_clients import run_script

UNKNOWN = "no agent named 'nobody'; this gateway serves: coder, parrot"
# The reference loop on the scripted model answers a "plain" prompt in these words.
SCRIPTED = "this answer comes straight from the scripted model"


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    config = write_two_agents(tmp_path_factory.mktemp("agents-web"))
    with gateway_process("-c", str(config), "--log-level", "warning") as (url, _):
        yield url


@pytest.fixture(scope="module")
def seen(base: str) -> dict[str, Any]:
    return run_script("agents-web.mjs", base)


def agent_of(base: str, run_id: str) -> str:
    run = httpx.get(f"{base}/v1/runs/{run_id}", timeout=10)
    assert run.status_code == 200, run.text
    return str(run.json()["agent"])


def answer_of(summary: dict[str, Any]) -> str:
    """The AG-UI client's last assistant message, as it holds it."""
    said = [m["content"] for m in summary["messages"] if m["role"] == "assistant"]
    return str(said[-1]) if said else ""


def text_of(chat: dict[str, Any]) -> str:
    """The Chat's answer: the text parts of its last (assistant) message."""
    last = chat["messages"][-1]
    assert last["role"] == "assistant", chat
    return "".join(p["text"] for p in last["parts"] if p["type"] == "text")


def finished(summary: dict[str, Any]) -> dict[str, Any]:
    run = clean(summary)
    assert run["terminal"]["type"] == "RUN_FINISHED" and "outcome" not in run["terminal"]
    return run


# --- AG-UI -------------------------------------------------------------------------------------


def test_each_agent_path_answers_as_its_agent(base: str, seen: dict[str, Any]) -> None:
    coder, parrot = finished(seen["aguiCoder"]), finished(seen["aguiParrot"])
    assert SCRIPTED in answer_of(coder)
    assert answer_of(parrot) == PREFIX + "hello parrot"
    assert agent_of(base, coder["runId"]) == "coder"
    assert agent_of(base, parrot["runId"]) == "parrot"


def test_a_thread_stays_with_its_agent_until_a_path_names_another(
    base: str, seen: dict[str, Any]
) -> None:
    thread = seen["aguiThread"]
    first, second, third = (finished(thread[k]) for k in ("first", "second", "third"))
    assert answer_of(first) == PREFIX + "first words"
    # /agui names no agent: the thread's goes on.
    assert answer_of(second) == PREFIX + "second words"
    assert agent_of(base, second["runId"]) == "parrot"
    assert SCRIPTED in answer_of(third) and agent_of(base, third["runId"]) == "coder"


def test_the_websocket_path_runs_its_agent(base: str, seen: dict[str, Any]) -> None:
    run = finished(seen["aguiSocket"])
    assert answer_of(run) == PREFIX + "hello socket"
    assert agent_of(base, run["runId"]) == "parrot"


def test_an_unknown_agent_is_a_404_problem_before_any_stream(
    base: str, seen: dict[str, Any]
) -> None:
    told = seen["aguiUnknown"]
    assert told["types"] == [] and told["failed"].startswith("HTTP 404: ")
    assert json.loads(told["failed"].removeprefix("HTTP 404: "))["detail"] == UNKNOWN
    refused = httpx.post(
        f"{base}/agents/nobody/agui",
        json={"threadId": "t", "runId": "r", "messages": []},
        timeout=10,
    )
    assert refused.status_code == 404
    assert refused.headers["content-type"] == "application/problem+json"
    assert refused.json() == {
        "type": "about:blank",
        "title": "Not Found",
        "status": 404,
        "detail": UNKNOWN,
    }


def test_an_unknown_agents_socket_is_refused_with_the_same_problem(
    base: str, seen: dict[str, Any]
) -> None:
    assert seen["aguiSocketUnknown"]["failed"] == "upgrade refused: HTTP 404"
    with pytest.raises(websockets.exceptions.InvalidStatus) as refused:
        ws_client.connect(base.replace("http", "ws") + "/agents/nobody/agui/ws").close()
    response = refused.value.response
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/problem+json"
    assert json.loads(response.body or b"")["detail"] == UNKNOWN


# --- Vercel AI -----------------------------------------------------------------------------------


def test_each_agent_path_chats_as_its_agent(base: str, seen: dict[str, Any]) -> None:
    for name, answer in (("Coder", SCRIPTED), ("Parrot", PREFIX + "hello parrot")):
        chat = seen[f"vercel{name}"]
        assert chat["status"] == "ready" and chat["errors"] == [], chat
        assert answer in text_of(chat)
        assert agent_of(base, chat["responses"][0]["runId"]) == name.lower()


def test_an_unknown_agent_is_the_chats_404_error(seen: dict[str, Any]) -> None:
    chat = seen["vercelUnknown"]
    assert chat["status"] == "error" and chat["responses"][0]["status"] == 404
    assert chat["error"]["statusCode"] == 404
    assert json.loads(chat["error"]["message"])["detail"] == UNKNOWN


def test_a_reconnect_goes_to_the_agents_path(base: str, seen: dict[str, Any]) -> None:
    again = seen["vercelReconnect"]
    start = again["original"]["start"]
    # The transport asked /agents/coder/vercel/{chat}/stream: the running answer, replayed.
    assert again["replayed"] == again["original"] and start["type"] == "start"
    assert agent_of(base, start["messageMetadata"]["loopgate"]["runId"]) == "coder"
    done = again["finished"]
    assert text_of(done["chat"]) == PREFIX + "hello"
    assert done["reconnect"] is None  # 204: that chat's run has ended
    assert again["unknown"]["statusCode"] == 404
    assert json.loads(again["unknown"]["message"])["detail"] == UNKNOWN


# --- OpenAI --------------------------------------------------------------------------------------


@pytest.fixture
def client(base: str) -> OpenAI:
    return OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0)


def test_models_are_the_agents(client: OpenAI) -> None:
    # loopgate: the default agent (coder), as on a gateway of one.
    assert [m.id for m in client.models.list()] == ["loopgate", "coder", "parrot"]


def test_the_model_names_the_agent(client: OpenAI, base: str) -> None:
    for model, answer in (("coder", SCRIPTED), ("parrot", PREFIX + "plain hi")):
        raw = client.chat.completions.with_raw_response.create(
            model=model, messages=[{"role": "user", "content": "plain hi"}]
        )
        completion = raw.parse()
        assert completion.model == model
        assert answer in (completion.choices[0].message.content or "")
        assert agent_of(base, raw.headers["x-request-id"]) == model


def test_an_unknown_model_is_model_not_found(client: OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as missing:
        client.chat.completions.create(
            model="nobody", messages=[{"role": "user", "content": "anyone there?"}]
        )
    assert missing.value.status_code == 404 and missing.value.code == "model_not_found"
    assert "'nobody' does not exist here" in missing.value.message
