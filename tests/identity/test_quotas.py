"""Quotas per principal and per tenant on a real gateway (memory counters): each limit refuses
a start with each protocol's rate-limit shape, names the quota and when to retry, and never
touches another principal or tenant; a concurrency slot comes back however its run ends."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import websockets.sync.client as ws_client

from loopgate.contracts.principal import Principal, Quota
from loopgate.gateway.identity.quotas import (
    WINDOW_S,
    Hold,
    Limits,
    MemoryLedger,
    Party,
    limits_of,
    tokens_in,
    until_tomorrow,
)
from loopgate.gateway.settings import load_settings
from tests.gateway.harness import running_gateway
from tests.identity import principals
from tests.identity.quota_keys import (
    finish,
    push,
    refused,
    start,
    started,
    write_quota_keys,
)

Keys = dict[str, principals.TestKey]


@pytest.fixture(scope="module")
def keyring(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Keys]:
    """One keys file for the module's gateways (hashing keys takes a while on purpose)."""
    path = tmp_path_factory.mktemp("quota-keys") / "keys.json"
    return path, write_quota_keys(path)


@contextmanager
def gateway(keyring: tuple[Path, Keys], **quotas: int) -> Iterator[tuple[httpx.Client, Keys, str]]:
    path, keys = keyring
    with (
        running_gateway(keys_file=str(path), **quotas) as (base, _),
        httpx.Client(base_url=base, timeout=20) as http,
    ):
        yield http, keys, base


# How each quota is used up by one principal's ingest runs, with a limit of LIMITS[quota].
LIMITS = {"concurrent_runs": 1, "runs_per_minute": 2, "events_per_day": 3, "tokens_per_day": 50}


def use_up(http: httpx.Client, who: principals.TestKey, quota: str) -> None:
    if quota == "concurrent_runs":
        started(http, who)  # and left going
    elif quota == "runs_per_minute":
        for _ in range(2):
            finish(http, who, started(http, who))
    elif quota == "events_per_day":
        run_id = started(http, who)
        push(
            http, who, run_id, ("content_delta", {"delta": "a"}), ("content_delta", {"delta": "b"})
        )
        finish(http, who, run_id)  # three events: counted as the run ends
    else:
        # Counted as they come: the run is still going.
        run_id = started(http, who)
        push(http, who, run_id, ("llm_response", {"promptTokens": 30, "completionTokens": 20}))


@pytest.mark.parametrize("quota", list(LIMITS))
def test_a_principal_quota_refuses_only_that_principal(
    keyring: tuple[Path, Keys], quota: str
) -> None:
    with gateway(keyring, **{f"quota_{quota}": LIMITS[quota]}) as (http, keys, _):
        alice, carol, bob = keys["alice"], keys["carol"], keys["bob"]
        use_up(http, alice, quota)
        problem = refused(start(http, alice), quota)
        assert f"is {LIMITS[quota]} " in problem["detail"]
        assert "this principal" in problem["detail"]
        # Nobody else is counted against alice's quota: neither her tenant's other user…
        started(http, carol)
        # …nor another tenant's.
        started(http, bob)


@pytest.mark.parametrize("quota", list(LIMITS))
def test_a_tenant_quota_refuses_the_whole_tenant_only(
    keyring: tuple[Path, Keys], quota: str
) -> None:
    with gateway(keyring, **{f"tenant_quota_{quota}": LIMITS[quota]}) as (http, keys, _):
        alice, carol, bob = keys["alice"], keys["carol"], keys["bob"]
        use_up(http, alice, quota)
        for who in (alice, carol):
            problem = refused(start(http, who), quota)
            assert "tenant 'acme'" in problem["detail"]
            # Nothing of another principal's: no subject, no run.
            assert "alice" not in problem["detail"] and "run_" not in problem["detail"]
        started(http, bob)


def test_retry_after_says_when_the_quota_allows_again(keyring: tuple[Path, Keys]) -> None:
    with gateway(keyring, quota_runs_per_minute=2, quota_events_per_day=3) as (
        http,
        keys,
        _,
    ):
        alice, bob = keys["alice"], keys["bob"]
        for _ in range(2):
            finish(http, alice, started(http, alice))
        minute = start(http, alice)
        refused(minute, "runs_per_minute")
        assert 1 <= int(minute.headers["retry-after"]) <= 60
        assert "retry in" in minute.json()["detail"]
        use_up(http, bob, "events_per_day")
        day = start(http, bob)
        refused(day, "events_per_day")
        # No later than the next UTC midnight (the day's counters start again there).
        assert 1 <= int(day.headers["retry-after"]) <= 86_400


def test_a_concurrency_slot_comes_back_however_its_run_ends(keyring: tuple[Path, Keys]) -> None:
    with gateway(keyring, quota_concurrent_runs=1) as (http, keys, _):
        alice = keys["alice"]
        first = started(http, alice)
        refused(start(http, alice), "concurrent_runs")
        # Cancelled: the slot is free again when the cancel returns.
        assert http.post(f"/v1/runs/{first}/cancel", headers=alice.headers).status_code == 202
        second = started(http, alice)
        refused(start(http, alice), "concurrent_runs")
        finish(http, alice, second, "failed")  # failed
        third = started(http, alice)
        finish(http, alice, third)  # completed
        # A loop run, followed to its end.
        done = start(http, alice, source="loop", input="hi")
        assert done.status_code in (200, 201), done.text
        events = http.get(f"/v1/runs/{done.json()['id']}/events", headers=alice.headers)
        assert events.status_code == 200 and '"completion"' in events.text
        finish(http, alice, started(http, alice))


def test_a_start_refused_after_admission_takes_nothing(keyring: tuple[Path, Keys]) -> None:
    with gateway(keyring, quota_concurrent_runs=1, quota_runs_per_minute=2) as (http, keys, _):
        alice = keys["alice"]
        # Refused by the source after the quotas let it through: a replay that does not exist.
        for _ in range(3):
            bad = start(http, alice, source="replay", replay="no-such-recording")
            assert bad.status_code == 422, bad.text
        run_id = started(http, alice)
        # A taken run id is refused once the quotas admitted it too.
        taken = start(http, alice, run_id=run_id)
        assert taken.status_code == 409, taken.text
        refused(start(http, alice), "concurrent_runs")
        finish(http, alice, run_id)
        finish(http, alice, started(http, alice))
        refused(start(http, alice), "runs_per_minute")


def test_admins_are_counted_unless_their_key_lifts_the_quota(keyring: tuple[Path, Keys]) -> None:
    with gateway(keyring, quota_concurrent_runs=1) as (http, keys, _):
        root, free = keys["root"], keys["free"]
        started(http, root)
        refused(start(http, root), "concurrent_runs")
        # free's key says concurrent_runs 0: no limit for it, whatever the default.
        for _ in range(3):
            started(http, free)


def test_openai_clients_get_a_rate_limit_error(keyring: tuple[Path, Keys]) -> None:
    with gateway(keyring, quota_runs_per_minute=1) as (_, keys, base):
        client = openai.OpenAI(base_url=f"{base}/v1", api_key=keys["alice"].key, max_retries=0)
        messages: Any = [{"role": "user", "content": "hi"}]
        client.chat.completions.create(model="loopgate", messages=messages)
        with pytest.raises(openai.RateLimitError) as limited:
            client.chat.completions.create(model="loopgate", messages=messages)
        assert limited.value.status_code == 429
        assert limited.value.type == "rate_limit_error"
        assert limited.value.code == "rate_limit_exceeded"
        assert "quota exceeded: runs_per_minute" in limited.value.message
        assert 1 <= int(limited.value.response.headers["retry-after"]) <= 60
        # Streaming asks are refused the same way, before any chunk.
        with pytest.raises(openai.RateLimitError):
            client.chat.completions.create(model="loopgate", messages=messages, stream=True)


def test_json_rpc_over_http_gets_limit_reached(keyring: tuple[Path, Keys]) -> None:
    with gateway(keyring, quota_concurrent_runs=1) as (http, keys, _):
        alice = keys["alice"]

        def call(id_: int) -> dict[str, Any]:
            body = {"jsonrpc": "2.0", "id": id_, "method": "run.start"}
            body["params"] = {"source": "ingest"}
            response = http.post("/rpc", json=body, headers=alice.headers)
            assert response.status_code == 200, response.text
            answer: dict[str, Any] = response.json()
            return answer

        assert "result" in call(1)
        error = call(2)["error"]
        assert error["code"] == -32002
        assert error["data"]["retryAfter"] >= 1
        assert error["data"]["detail"].startswith("quota exceeded: concurrent_runs")


def test_ag_ui_over_http_gets_429(keyring: tuple[Path, Keys]) -> None:
    with gateway(keyring, quota_tokens_per_day=50) as (http, keys, _):
        alice = keys["alice"]
        use_up(http, alice, "tokens_per_day")
        body = {
            "threadId": "t-quota",
            "runId": "agui-quota-1",
            "messages": [{"id": "m1", "role": "user", "content": "hi"}],
        }
        refused(http.post("/agui", json=body, headers=alice.headers), "tokens_per_day")


def test_vercel_gets_429(keyring: tuple[Path, Keys]) -> None:
    with gateway(keyring, quota_concurrent_runs=1) as (http, keys, _):
        alice = keys["alice"]
        started(http, alice)
        body = {
            "id": "chat-quota",
            "messages": [{"id": "m1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}],
        }
        refused(http.post("/vercel", json=body, headers=alice.headers), "concurrent_runs")


# --- the parts on their own -----------------------------------------------------------------


def test_a_keys_own_quota_wins_field_by_field() -> None:
    defaults = Limits(concurrent_runs=2, runs_per_minute=10)
    plain = Principal(subject="a")
    assert limits_of(plain, defaults) == defaults
    own = Principal(subject="a", quota=Quota(concurrent_runs=0, tokens_per_day=500))
    assert limits_of(own, defaults) == Limits(
        concurrent_runs=0, runs_per_minute=10, tokens_per_day=500
    )


def test_token_counts_of_an_llm_response() -> None:
    assert tokens_in({"totalTokens": 70, "promptTokens": 1}) == 70
    assert tokens_in({"promptTokens": 30, "completionTokens": 20}) == 50
    assert tokens_in({"promptTokens": "30", "completionTokens": -2, "totalTokens": True}) == 0


def test_negative_quotas_are_refused_at_startup() -> None:
    from loopgate.gateway.app import build_hub

    settings = load_settings({"LOOPGATE_TENANT_QUOTA_RUNS_PER_MINUTE": "-1"})
    with pytest.raises(ValueError, match="tenant_quota_runs_per_minute must be 0"):
        build_hub(settings)


@pytest.mark.anyio
async def test_the_minute_window_slides_and_the_day_rolls_over() -> None:
    now = [1_000_000.0 * 86_400 + 86_400 - 30]  # 30 s before a UTC midnight
    clock: Callable[[], float] = lambda: now[0]  # noqa: E731
    ledger = MemoryLedger(clock)
    limits = Limits(runs_per_minute=1, events_per_day=1)

    def hold() -> Hold:
        return Hold(principal=Party("t", "s", limits), tenant=Party("t", None, Limits()))

    first = hold()
    assert await ledger.admit(first) is None
    ledger.spend(first, 5, 0)
    now[0] += 20
    refusal = await ledger.admit(hold())
    assert refusal is not None and refusal.quota == "runs_per_minute"
    assert refusal.retry_after == 40
    now[0] += 40  # the start left the window; the day is over too (30 s into the next)
    assert until_tomorrow(now[0]) == 86_400 - 30
    last = hold()
    assert await ledger.admit(last) is None
    # A start refused after admission is taken back; its party's empty window is swept later.
    await ledger.refund(last)
    now[0] += WINDOW_S
    assert await ledger.admit(hold()) is None


def test_ag_ui_over_a_websocket_gets_a_rate_limited_run_error(keyring: tuple[Path, Keys]) -> None:
    with gateway(keyring, quota_concurrent_runs=1) as (http, keys, base):
        alice = keys["alice"]
        started(http, alice)
        body = {
            "threadId": "t-quota-ws",
            "runId": "agui-quota-ws",
            "messages": [{"id": "m1", "role": "user", "content": "hi"}],
        }
        url = base.replace("http", "ws") + "/agui/ws"
        with ws_client.connect(url, additional_headers=alice.headers) as ws:
            ws.send(json.dumps(body))
            error = json.loads(ws.recv(timeout=20))
        assert error["type"] == "RUN_ERROR" and error["code"] == "rate_limited"
        assert error["message"].startswith("quota exceeded: concurrent_runs")


def test_mcp_run_tool_says_the_quota_as_a_tool_error(keyring: tuple[Path, Keys]) -> None:
    with gateway(keyring, quota_concurrent_runs=1) as (http, keys, _):
        alice = keys["alice"]
        started(http, alice)
        call = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "run", "arguments": {"prompt": "hi"}},
        }
        accept = {"accept": "application/json, text/event-stream"}
        response = http.post("/mcp", json=call, headers={**alice.headers, **accept})
        assert response.status_code == 200, response.text
        if response.headers["content-type"].startswith("text/event-stream"):
            data = [line[6:] for line in response.text.splitlines() if line.startswith("data: ")]
            answer = json.loads(data[-1])
        else:
            answer = response.json()
        result = answer["result"]
        assert result["isError"] is True
        assert result["content"][0]["text"].startswith("quota exceeded: concurrent_runs")
        assert "retry" in result["content"][0]["text"]
