"""A run on a thread that has runs continues it (issue 19, item 4): over native HTTP a client
sends only the new prompt, or the answer to an ``ask_user``; a message list is taken as sent;
ACP (in-process, and over the gateway's HTTP API as ``loopgate acp --server`` does) follows the
same rule."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import pytest

from loopgate.adapters.acp.agent import AcpAgent
from loopgate.contracts.envelope import Envelope
from loopgate.contracts.history import continued, conversation_after
from loopgate.contracts.messages import Message
from loopgate.contracts.ports import StartRun
from loopgate.gateway.client import RemoteService

pytestmark = pytest.mark.anyio


def start(http: httpx.Client, body: dict[str, Any]) -> dict[str, Any]:
    response = http.post("/v1/runs", json=body)
    assert response.status_code == 201, response.text
    run: dict[str, Any] = response.json()
    return run


def events(http: httpx.Client, run_id: str) -> list[dict[str, Any]]:
    """The run's whole stream: it ends after the terminal completion."""
    out: list[dict[str, Any]] = []
    with http.stream("GET", f"/v1/runs/{run_id}/events") as stream:
        assert stream.status_code == 200
        for line in stream.iter_lines():
            if line.startswith("data:"):
                out.append(json.loads(line[5:]))
    assert out[-1]["kind"] == "completion" and out[-1]["data"]["status"] != "executing"
    return out


def answer_of(envs: list[dict[str, Any]]) -> str:
    return "".join(e["data"]["delta"] for e in envs if e["kind"] == "content_delta")


def status_of(envs: list[dict[str, Any]]) -> str:
    status: str = envs[-1]["data"]["status"]
    return status


def roles(messages: list[dict[str, Any]]) -> list[str]:
    return [m["role"] for m in messages]


def test_a_prompt_on_a_thread_continues_it(gateway: str) -> None:
    with httpx.Client(base_url=gateway, timeout=30) as http:
        first = start(http, {"input": "plain my name is Ada", "thread_id": "th-recall"})
        assert first["input"] == [{"role": "user", "content": "plain my name is Ada"}]
        said = answer_of(events(http, first["id"]))

        second = start(http, {"input": "What did I say before?", "thread_id": "th-recall"})
        assert second["input"] == [
            {"role": "user", "content": "plain my name is Ada"},
            {"role": "assistant", "content": said},
            {"role": "user", "content": "What did I say before?"},
        ]
        assert http.get(f"/v1/runs/{second['id']}").json()["input"] == second["input"]
        recalled = events(http, second["id"])
        assert status_of(recalled) == "completed"
        assert answer_of(recalled) == "Before this you said: “plain my name is Ada”."

        # The third sees both turns before it: the chain goes on from the latest run.
        third = start(http, {"input": "what did i say", "thread_id": "th-recall"})
        assert roles(third["input"]) == ["user", "assistant", "user", "assistant", "user"]
        assert answer_of(events(http, third["id"])) == (
            "Before this you said: “plain my name is Ada”; “What did I say before?”."
        )


def test_the_same_prompt_without_the_thread_has_nothing_to_recall(gateway: str) -> None:
    with httpx.Client(base_url=gateway, timeout=30) as http:
        alone = start(http, {"input": "what did I say?", "thread_id": "th-fresh"})
        assert alone["input"] == [{"role": "user", "content": "what did I say?"}]
        assert answer_of(events(http, alone["id"])) == (
            "You have not said anything before this in our conversation."
        )


def test_ask_user_is_answered_by_the_next_run_on_the_thread(gateway: str) -> None:
    with httpx.Client(base_url=gateway, timeout=30) as http:
        asking = start(http, {"input": "ask user about lunch", "thread_id": "th-ask"})
        asked = events(http, asking["id"])
        assert status_of(asked) == "waiting_user"
        call_id = asked[-1]["data"]["toolCallId"]

        answered = start(http, {"input": "B, please", "thread_id": "th-ask"})
        # The answer is the suspended call's result, in place of the question it reported:
        # no new user message, and the call paired with exactly one result.
        assert roles(answered["input"]) == ["user", "assistant", "tool"]
        call = answered["input"][1]["tool_calls"][0]
        assert call["id"] == call_id and call["name"] == "ask_user"
        assert answered["input"][2] == {
            "role": "tool",
            "content": "B, please",
            "tool_call_id": call_id,
            "name": "ask_user",
        }
        done = events(http, answered["id"])
        assert status_of(done) == "completed"
        assert answer_of(done) == "Thanks — you said: B, please. Continuing with that."

        # The run after the answer is an ordinary turn: a new user message.
        after = start(http, {"input": "what did I say?", "thread_id": "th-ask"})
        assert roles(after["input"]) == ["user", "assistant", "tool", "assistant", "user"]
        assert answer_of(events(http, after["id"])) == (
            "Before this you said: “ask user about lunch”."
        )


def test_a_thread_with_a_run_going_refuses_another(gateway: str) -> None:
    with httpx.Client(base_url=gateway, timeout=30) as http:
        slow = start(http, {"input": "slow tool", "thread_id": "th-busy"})  # a 30 s sleep
        # Refused when it says so (by default it would wait its turn: test_multitask.py).
        body = {"input": "plain", "thread_id": "th-busy", "multitask_strategy": "reject"}
        refused = http.post("/v1/runs", json=body)
        assert refused.status_code == 409
        assert refused.headers["content-type"].startswith("application/problem+json")
        detail = refused.json()["detail"]
        assert "th-busy" in detail and slow["id"] in detail and "still going" in detail
        assert [r["id"] for r in http.get("/v1/runs?thread_id=th-busy").json()["runs"]] == [
            slow["id"]
        ]
        assert http.post(f"/v1/runs/{slow['id']}/cancel").status_code == 202
        assert status_of(events(http, slow["id"])) == "cancelled"

        # Once it has ended the thread goes on; the cancelled call is paired with a result.
        after = start(http, {"input": "plain go on", "thread_id": "th-busy"})
        assert roles(after["input"]) == ["user", "assistant", "tool", "user"]
        assert after["input"][2]["tool_call_id"] == after["input"][1]["tool_calls"][0]["id"]
        assert status_of(events(http, after["id"])) == "completed"


def test_a_message_list_is_the_whole_conversation(gateway: str) -> None:
    with httpx.Client(base_url=gateway, timeout=30) as http:
        events(http, start(http, {"input": "plain one", "thread_id": "th-list"})["id"])
        sent = [
            {"role": "user", "content": "my own history"},
            {"role": "assistant", "content": "kept by the client"},
            {"role": "user", "content": "what did I say?"},
        ]
        run = start(http, {"input": sent, "thread_id": "th-list"})
        assert run["input"] == sent  # not the thread's history again
        assert answer_of(events(http, run["id"])) == ("Before this you said: “my own history”.")


def test_a_thread_without_runs_starts_plainly(gateway: str) -> None:
    with httpx.Client(base_url=gateway, timeout=30) as http:
        made = http.post("/v1/threads", json={"id": "th-recorded"})
        assert made.status_code == 201
        run = start(http, {"input": "plain first", "thread_id": "th-recorded"})
        assert run["input"] == [{"role": "user", "content": "plain first"}]
        assert status_of(events(http, run["id"])) == "completed"


def test_a_run_without_a_thread_is_one_that_can_be_continued(gateway: str) -> None:
    with httpx.Client(base_url=gateway, timeout=30) as http:
        first = start(http, {"input": "plain hello"})
        assert first["thread_id"] == first["id"]
        events(http, first["id"])
        second = start(http, {"input": "what did I say?", "thread_id": first["id"]})
        assert answer_of(events(http, second["id"])) == "Before this you said: “plain hello”."


class Peer:
    def __init__(self) -> None:
        self.updates: list[dict[str, Any]] = []

    async def send_notification(self, method: str, params: Any = None) -> None:
        self.updates.append(params)

    async def send_request(self, method: str, params: Any = None) -> Any:
        return {"outcome": {"outcome": "cancelled"}}


class Text:
    type = "text"

    def __init__(self, text: str) -> None:
        self.text = text


class Recording(RemoteService):
    """The remote run service ``loopgate acp --server`` uses, keeping what it posted."""

    started: list[StartRun]

    async def start(self, request: StartRun) -> Any:
        self.started.append(request)
        return await super().start(request)


def agent_text(peer: Peer) -> str:
    return "".join(
        u["update"]["content"]["text"]
        for u in peer.updates
        if u["update"]["sessionUpdate"] == "agent_message_chunk"
    )


async def test_acp_over_the_gateway_answers_ask_user_with_the_next_prompt(gateway: str) -> None:
    async with Recording(gateway) as service, anyio.create_task_group() as tg:
        service.started = []
        agent, peer = AcpAgent(service), Peer()
        agent.attach(peer, tg)
        session_id = (await agent.new_session(cwd="/tmp"))["sessionId"]
        with anyio.fail_after(20):
            asked = await agent.prompt([Text("ask user about lunch")], session_id)
            assert asked["_meta"]["loopgate"]["status"] == "waiting_user"
            peer.updates.clear()
            await agent.prompt([Text("A")], session_id)
            assert agent_text(peer) == "Thanks — you said: A. Continuing with that."
            # A second connection rebuilds the session from the journal: same rule.
            other, other_peer = AcpAgent(service), Peer()
            other.attach(other_peer, tg)
            await other.prompt([Text("what did I say?")], session_id)
            assert agent_text(other_peer) == "Before this you said: “ask user about lunch”."
        tg.cancel_scope.cancel()
    # ACP sends the whole conversation as a list: the gateway takes it as it is.
    posted = [r.input for r in service.started]
    assert all(isinstance(messages, list) for messages in posted)
    answer = posted[1]
    assert isinstance(answer, list) and [m.role for m in answer] == ["user", "assistant", "tool"]
    assert answer[-1] == Message(
        role="tool", content="A", tool_call_id=answer[1].tool_calls[0].id, name="ask_user"
    )
    async with httpx.AsyncClient(base_url=gateway) as http:
        runs = (await http.get("/v1/runs", params={"thread_id": session_id})).json()["runs"]
    assert [len(r["input"]) for r in runs] == [len(m) for m in reversed(posted)]


# --- the pure rule (contracts/history.py), for what the scripted loop never produces -----


def env(seq: int, kind: str, **data: Any) -> Envelope:
    return Envelope(run_id="r", seq=seq, ts=seq, kind=kind, data=data)


def asked(*call_ids: str, **completion: Any) -> list[Envelope]:
    starts = [
        env(i + 1, "tool_call_start", id=c, name="ask", arguments={})
        for i, c in enumerate(call_ids)
    ]
    results = [
        env(len(call_ids) + i + 1, "tool_call_result", id=c, success=True, result=f"{c}?")
        for i, c in enumerate(call_ids)
    ]
    return [*starts, *results, env(2 * len(call_ids) + 1, "completion", **completion)]


PROMPT = [Message(role="user", content="q")]


def test_each_listed_interrupt_gets_the_answer() -> None:
    events = asked(
        "a", "b", status="waiting_user", interrupts=[{"toolCallId": "a"}, {"toolCallId": "b"}]
    )
    conversation = conversation_after(PROMPT, events)
    assert conversation.waiting == ("a", "b")
    messages = continued(conversation, "yes")
    assert [(m.role, m.tool_call_id, m.content) for m in messages[2:]] == [
        ("tool", "a", "yes"),
        ("tool", "b", "yes"),
    ]


def test_a_turn_waiting_on_client_tools_gets_a_user_message() -> None:
    events = asked("a", status="waiting_user", pendingToolCallIds=["a"])
    messages = continued(conversation_after(PROMPT, events), "next")
    assert [m.role for m in messages] == ["user", "assistant", "tool", "user"]
    assert messages[2].content == "a?" and messages[-1].content == "next"


def test_an_answer_with_no_call_to_pair_is_a_user_message() -> None:
    # A foreign loop's completion naming a call it never announced.
    events = [env(1, "completion", status="waiting_user", toolCallId="ghost")]
    conversation = conversation_after(PROMPT, events)
    assert conversation.waiting == ("ghost",)
    assert continued(conversation, "hm") == [*PROMPT, Message(role="user", content="hm")]


def test_only_a_waiting_user_end_makes_the_input_an_answer() -> None:
    for end in ({"status": "completed", "toolCallId": "a"}, {"status": "executing"}):
        conversation = conversation_after(PROMPT, asked("a", **end))
        assert conversation.waiting == ()
        assert continued(conversation, "more")[-1] == Message(role="user", content="more")
