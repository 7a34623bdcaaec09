"""Tool approval relayed through the hub: permission_request → respond → permission_result."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from loopgate.contracts.envelope import Envelope
from loopgate.contracts.ports import StartRun
from loopgate.gateway.app import build_hub
from loopgate.gateway.hub import Hub
from loopgate.gateway.settings import Settings
from tests.gateway.harness import running_gateway
from tests.gateway.sse_client import envelopes

pytestmark = pytest.mark.anyio


def hub_for(tmp_path: Path, **overrides: Any) -> Hub:
    return build_hub(Settings(scripted_delay_s=0.0, workspace=str(tmp_path), **overrides))


async def run_answering(hub: Hub, request: StartRun, answers: list[str | None]) -> list[Envelope]:
    """Follow the run; answer each permission request with the next decision (None = ignore)."""
    info = await hub.start(request)
    seen: list[Envelope] = []
    async with hub.subscribe(info.id) as sub:
        while not sub.done:
            for env in await sub.next_batch():
                seen.append(env)
                if env.kind == "permission_request":
                    decision = answers.pop(0)
                    if decision is not None:
                        result = await hub.respond(info.id, env.data["requestId"], decision)
                        assert result.accepted, result
    return seen


def results(events: list[Envelope]) -> dict[str, dict[str, Any]]:
    return {e.data["name"]: e.data for e in events if e.kind == "tool_call_result"}


async def test_allow_and_reject(tmp_path: Path) -> None:
    async with hub_for(tmp_path) as hub:
        request = StartRun(input="what time is it and what is 3*4?", approval="always")
        events = await run_answering(hub, request, ["allow_once", "reject_once"])
        asks = [e.data for e in events if e.kind == "permission_request"]
        assert [a["toolCall"]["name"] for a in asks] == ["clock", "calculate"]
        assert asks[0]["options"] == ["allow_once", "allow_always", "reject_once", "reject_always"]
        outcome = [e.data for e in events if e.kind == "permission_result"]
        assert [(o["decision"], o["by"]) for o in outcome] == [
            ("allow_once", "client"),
            ("reject_once", "client"),
        ]
        done = results(events)
        assert done["clock"]["success"] is True
        assert done["calculate"]["success"] is False
        assert "rejected by the user" in done["calculate"]["error"]
        assert events[-1].data["status"] == "completed"


async def test_always_is_remembered_for_the_thread(tmp_path: Path) -> None:
    async with hub_for(tmp_path) as hub:
        first = StartRun(input="time and 2+2 please", approval="always", thread_id="t")
        await run_answering(hub, first, ["allow_always", "reject_always"])
        second = StartRun(input="time and 2+2 again", approval="always", thread_id="t")
        events = await run_answering(hub, second, [])
        assert not [e for e in events if e.kind == "permission_request"]
        outcome = [
            (e.data["decision"], e.data["by"]) for e in events if e.kind == "permission_result"
        ]
        assert outcome == [("allow_always", "remembered"), ("reject_always", "remembered")]
        other = StartRun(input="time and 2+2 again", approval="always", thread_id="other")
        events = await run_answering(hub, other, ["allow_once", "allow_once"])
        assert len([e for e in events if e.kind == "permission_request"]) == 2


async def test_unanswered_request_times_out_as_a_rejection(tmp_path: Path) -> None:
    async with hub_for(tmp_path, permission_timeout_s=0.1) as hub:
        request = StartRun(input="time and 1+1", approval="always")
        with anyio.fail_after(5):
            events = await run_answering(hub, request, [None, None])
        assert {e.data["by"] for e in events if e.kind == "permission_result"} == {"timeout"}
        assert all(not r["success"] for r in results(events).values())


async def test_bad_answers_are_refused(tmp_path: Path) -> None:
    async with hub_for(tmp_path) as hub:
        info = await hub.start(StartRun(input="time and 1+1", approval="always"))
        result = await hub.respond(info.id, "perm_99", "allow_once")
        assert not result.accepted and "no pending permission request" in result.detail
        with pytest.raises(ValueError, match="decision must be one of"):
            await hub.respond(info.id, "perm_1", "maybe")
        await hub.cancel(info.id)


def test_respond_over_http_takes_the_events_spelling_and_the_old_one() -> None:
    """``requestId`` as the event spells it; ``request_id`` still answers (two requests in this
    run: the first answered one way, the second the other)."""
    spellings = iter(["requestId", "request_id"])
    with running_gateway() as (base, _):
        run = httpx.post(f"{base}/v1/runs", json={"input": "time and 5*5", "approval": "always"})
        run_id = run.json()["id"]
        from httpx_sse import connect_sse

        events = []
        with (
            httpx.Client(base_url=base, timeout=10) as client,
            connect_sse(client, "GET", f"/v1/runs/{run_id}/events") as source,
        ):
            for event in source.iter_sse():
                events.append(event)
                envelope = envelopes([event])[0]
                if envelope["kind"] == "permission_request":
                    request_id = envelope["data"]["requestId"]
                    answer = client.post(
                        f"/v1/runs/{run_id}/respond",
                        json={next(spellings): request_id, "decision": "allow_once"},
                    )
                    assert answer.status_code == 202, answer.text
                    assert answer.json()["accepted"] is True
        assert next(spellings, None) is None  # both spellings answered a request
        seen = envelopes(events)
        decided = [e["data"] for e in seen if e["kind"] == "permission_result"]
        assert [(d["decision"], d["by"]) for d in decided] == [("allow_once", "client")] * 2
        assert seen[-1]["data"]["status"] == "completed"

        url = f"{base}/v1/runs/{run_id}/respond"
        for body, says in [
            ({"requestId": "x", "decision": "yes"}, "decision"),
            ({"decision": "allow_once"}, "`requestId` is required"),
            ({"requestId": "a", "request_id": "b", "decision": "allow_once"}, "different"),
            ({"request": "a", "decision": "allow_once"}, "unknown field `request`"),
        ]:
            bad = httpx.post(url, json=body)
            assert bad.status_code == 422 and says in bad.json()["detail"], bad.text
            assert bad.headers["content-type"] == "application/problem+json"
        # Both spellings alike are one answer (to a request no longer pending here).
        same = httpx.post(url, json={"requestId": "p", "request_id": "p", "decision": "allow_once"})
        assert same.status_code == 200 and same.json()["accepted"] is False
