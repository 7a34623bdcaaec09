"""One run per thread at a time (``multitask_strategy``: reject, enqueue, interrupt, rollback)
through the native HTTP API, AG-UI (events checked with ag_ui.core) and the openai SDK, against
a real gateway on 127.0.0.1.

The run going on the thread is the scripted model's "slow tool" (a 30 s sleep): it ends only
when a strategy cancels it, or when a test does.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import ag_ui.core
import httpx
import openai
import pytest
from openai import OpenAI
from pydantic import TypeAdapter

from tests.gateway.multitask_support import (
    after_slow,
    ended,
    fresh_thread,
    in_background,
    roles,
    run_of,
    slow_run,
    start,
)

# A wait for a thread's turn gives up after 3 s: long beside a cancel, short for the test that
# waits it out.
pytestmark = pytest.mark.gateway(scripted_delay_s=0.002, thread_wait_s=3.0)

EVENT = TypeAdapter(ag_ui.core.Event)
counter = iter(range(1_000_000))


# --- native HTTP API -------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", ["reject", "enqueue"])
def test_refused_while_the_thread_has_a_run_going(gateway: str, strategy: str) -> None:
    """reject at once; enqueue once thread_wait_s (3 s here) has passed without its turn."""
    with httpx.Client(base_url=gateway, timeout=30) as http:
        thread = fresh_thread()
        slow = slow_run(http, thread)
        body = {"input": "plain hi", "thread_id": thread, "multitask_strategy": strategy}
        refused = http.post("/v1/runs", json=body)
        assert refused.status_code == 409
        assert slow["id"] in refused.json()["detail"]
        # Refused means left alone: the run going goes on.
        assert run_of(http, slow["id"])["state"] == "running"
        http.post(f"/v1/runs/{slow['id']}/cancel")


@pytest.mark.parametrize("strategy", ["enqueue", None])
def test_enqueue_waits_for_the_run_going_and_continues_from_it(
    gateway: str, strategy: str | None
) -> None:
    """enqueue, named or not: a prompt string continuing a thread waits its turn by default."""
    with httpx.Client(base_url=gateway, timeout=30) as http:
        thread = fresh_thread()
        slow = slow_run(http, thread)
        queued: dict[str, Any] = {"input": "what did i say", "thread_id": thread}
        if strategy is not None:
            queued["multitask_strategy"] = strategy
        with in_background(lambda: http.post("/v1/runs", json=queued)) as answers:
            # Refused while the slow run goes: the thread is busy and the queued start waits.
            busy = {**queued, "multitask_strategy": "reject"}
            assert http.post("/v1/runs", json=busy).status_code == 409
            assert len(http.get("/v1/runs", params={"thread_id": thread}).json()["runs"]) == 1
            http.post(f"/v1/runs/{slow['id']}/cancel")
        assert answers[0].status_code == 201, answers[0].text
        second = answers[0].json()
        # It started after the slow run ended, from the conversation it ended with.
        assert ended(http, slow["id"])["status"] == "cancelled"
        assert after_slow(second, "what did i say")
        assert ended(http, second["id"])["status"] == "completed"


def test_interrupt_cancels_the_run_going_and_keeps_its_output(gateway: str) -> None:
    with httpx.Client(base_url=gateway, timeout=30) as http:
        thread = fresh_thread()
        slow = slow_run(http, thread)
        body = {"input": "what did i say", "thread_id": thread, "multitask_strategy": "interrupt"}
        second = start(http, body)
        assert run_of(http, slow["id"])["status"] == "cancelled"
        assert second["input"][0] == {"role": "user", "content": "slow tool"}
        assert "assistant" in roles(second["input"])
        assert second["input"][-1] == {"role": "user", "content": "what did i say"}
        assert ended(http, second["id"])["status"] == "completed"


def test_rollback_cancels_the_run_going_and_leaves_it_out(gateway: str) -> None:
    with httpx.Client(base_url=gateway, timeout=30) as http:
        thread = fresh_thread()
        first = start(http, {"input": "plain my name is Ada", "thread_id": thread})
        said = ended(http, first["id"])
        slow = slow_run(http, thread)
        body = {"input": "what did i say", "thread_id": thread, "multitask_strategy": "rollback"}
        second = start(http, body)
        assert run_of(http, slow["id"])["status"] == "cancelled"
        # The thread as it was before the slow run: the first turn, then the new prompt.
        assert roles(second["input"]) == ["user", "assistant", "user"]
        assert second["input"][0] == said["input"][0]
        assert "slow" not in json.dumps(second["input"])
        assert ended(http, second["id"])["status"] == "completed"
        # The next turn goes on from the new run: the rolled-back one stays out.
        third = start(http, {"input": "and now?", "thread_id": thread})
        assert "slow" not in json.dumps(third["input"])


def test_an_unknown_strategy_is_a_422(gateway: str) -> None:
    with httpx.Client(base_url=gateway, timeout=30) as http:
        body = {"input": "hi", "thread_id": fresh_thread(), "multitask_strategy": "later"}
        refused = http.post("/v1/runs", json=body)
        assert refused.status_code == 422
        assert "multitask_strategy" in refused.json()["detail"]


# --- AG-UI -----------------------------------------------------------------------------------


def agui_body(thread_id: str, strategy: str) -> dict[str, Any]:
    n = next(counter)
    return {
        "threadId": thread_id,
        "runId": f"mt-agui-{n}",
        "messages": [{"id": f"m{n}", "role": "user", "content": "plain hi"}],
        "forwardedProps": {"loopgate": {"multitask_strategy": strategy}},
    }


def agui_events(gateway: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    with httpx.stream("POST", f"{gateway}/agui", json=body, timeout=30) as response:
        assert response.status_code == 200, response.read()
        raw = b"".join(response.iter_bytes())
    events = [json.loads(line[6:]) for line in raw.split(b"\n") if line.startswith(b"data: ")]
    for event in events:
        EVENT.validate_python(event)
    return events


@pytest.mark.parametrize("strategy", ["interrupt", "rollback"])
def test_agui_cancels_the_run_going(gateway: str, strategy: str) -> None:
    with httpx.Client(base_url=gateway, timeout=30) as http:
        thread = fresh_thread()
        slow = slow_run(http, thread)
        events = agui_events(gateway, agui_body(thread, strategy))
        assert events[0]["type"] == "RUN_STARTED" and events[-1]["type"] == "RUN_FINISHED"
        assert run_of(http, slow["id"])["status"] == "cancelled"
        # AG-UI clients send the whole conversation: it is taken as sent.
        assert run_of(http, events[0]["runId"])["input"] == [
            {"role": "user", "content": "plain hi"}
        ]


def test_agui_reject_and_enqueue(gateway: str) -> None:
    with httpx.Client(base_url=gateway, timeout=30) as http:
        thread = fresh_thread()
        slow = slow_run(http, thread)
        refused = http.post("/agui", json=agui_body(thread, "reject"))
        assert refused.status_code == 409 and slow["id"] in refused.json()["detail"]
        out: list[list[dict[str, Any]]] = []
        body = agui_body(thread, "enqueue")
        worker = threading.Thread(target=lambda: out.append(agui_events(gateway, body)))
        worker.start()
        http.post(f"/v1/runs/{slow['id']}/cancel")
        worker.join(30)
        assert out and out[0][-1]["type"] == "RUN_FINISHED"
        assert run_of(http, slow["id"])["status"] == "cancelled"
        bad = http.post("/agui", json=agui_body(thread, "later"))
        assert bad.status_code == 422 and "multitask_strategy" in bad.json()["detail"]


# --- OpenAI chat completions (the openai SDK) ------------------------------------------------


def ask(client: OpenAI, thread: str, strategy: str) -> str:
    completion = client.chat.completions.create(
        model="loopgate-scripted",
        messages=[{"role": "user", "content": "plain hi"}],
        extra_body={"loopgate": {"thread_id": thread, "multitask_strategy": strategy}},
    )
    return completion.choices[0].message.content or ""


def test_openai_sdk_strategies(gateway: str) -> None:
    client = OpenAI(base_url=f"{gateway}/v1", api_key="unused", max_retries=0)
    with httpx.Client(base_url=gateway, timeout=30) as http:
        thread = fresh_thread()
        slow = slow_run(http, thread)
        with pytest.raises(openai.ConflictError) as refused:
            ask(client, thread, "reject")
        assert slow["id"] in refused.value.message
        assert ask(client, thread, "interrupt")
        assert run_of(http, slow["id"])["status"] == "cancelled"

        slow = slow_run(http, thread)
        assert ask(client, thread, "rollback")
        assert run_of(http, slow["id"])["status"] == "cancelled"

        slow = slow_run(http, thread)
        answers: list[str] = []
        worker = threading.Thread(target=lambda: answers.append(ask(client, thread, "enqueue")))
        worker.start()
        http.post(f"/v1/runs/{slow['id']}/cancel")
        worker.join(30)
        assert answers and answers[0]
        assert run_of(http, slow["id"])["status"] == "cancelled"
