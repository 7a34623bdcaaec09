"""Hooks for operators through `loopgate serve`: a --hooks module, each [hook_rules] rule, the
price table (costUsd), and settings refused at start with their names."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.servers import serve_app
from tests.gateway.cli_support import loopgate
from tests.gateway.harness import free_port, gateway_process, running_gateway
from tests.gateway.sse_client import envelopes, read_stream
from tests.waiting import wait_until

CONFIG = """
[hook_rules]
max_result_chars = { clock = 10 }
system_note = "Answer in one sentence."

[prices.loopgate-scripted]
input = 2.5
output = 10.0
"""


def start(base: str, prompt: str, **more: Any) -> str:
    response = httpx.post(f"{base}/v1/runs", json={"input": prompt, **more}, timeout=10)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def events(base: str, prompt: str, **more: Any) -> list[dict[str, Any]]:
    return envelopes(read_stream(base, start(base, prompt, **more)))


def of(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e["data"] for e in events if e["kind"] == kind]


def test_a_hooks_module_and_the_rules_of_a_config_file_through_serve(tmp_path: Path) -> None:
    config = tmp_path / "loopgate.toml"
    config.write_text(CONFIG, encoding="utf-8")
    args = ("--hooks", "tests.reference.sample_operator_hooks", "-c", str(config))
    with gateway_process(*args, "--workspace", str(tmp_path)) as (base, _):
        run = events(base, "what time is it?")
    actions = [(a["hook"], a["action"], a["reason"]) for a in of(run, "hook_action")]
    # system_note: each model request is sent the note (a rewrite of that request only).
    rewrites = [a for a in actions if a[1] == "rewrite"]
    assert rewrites and all(
        a == ("pre_step", "rewrite", "hook_rules.system_note") for a in rewrites
    )
    assert len(rewrites) == len(of(run, "llm_request"))
    # max_result_chars: the clock's result, capped for the model and for clients.
    assert ("post_tool_result", "replace", "hook_rules.max_result_chars (10)") in actions
    [result] = of(run, "tool_call_result")
    assert result["name"] == "clock" and result.get("replaced") is True
    assert "characters left out by the operator" in result["resultPreview"]
    # The module's Footer narrates; OnlyObserves is loaded and returns nothing.
    assert ("before_completion", "narrate", "narrate") in actions
    assert run[-1]["data"]["status"] == "completed"
    # The price table: each response's cost, and the run's.
    responses = of(run, "llm_response")
    for response in responses:
        expected = (response["promptTokens"] * 2.5 + response["completionTokens"] * 10) / 1e6
        assert response["costUsd"] == pytest.approx(expected)
    assert run[-1]["data"]["costUsd"] == pytest.approx(sum(r["costUsd"] for r in responses))


@pytest.fixture(scope="module")
def model() -> Iterator[tuple[FakeOpenAI, str]]:
    fake = FakeOpenAI()
    with serve_app(fake.app) as url:
        yield fake, f"{url}/v1"


def settings(model: tuple[FakeOpenAI, str], rules: dict[str, Any]) -> dict[str, Any]:
    return {
        "provider": "openai",
        "openai_base_url": model[1],
        "openai_model": "agent",
        "demo_tools": True,
        "hook_rules": rules,
    }


def test_a_denied_tool_is_not_offered_nor_run(model: tuple[FakeOpenAI, str], tmp_path) -> None:
    fake, _ = model
    rules = {"deny_tools": ["calc*", "read_file"]}
    with running_gateway(**settings(model, rules), workspace=str(tmp_path)) as (base, _):
        # The fake model calls what it is told to, offered or not: a model that ignores the list.
        run = events(base, 'use calculate {"expression": "6 * 7"}')
    offered = sorted(t["function"]["name"] for t in fake.requests[0].body["tools"])
    assert "calculate" not in offered and "read_file" not in offered and "clock" in offered
    [result] = of(run, "tool_call_result")
    assert result["success"] is False
    # Not offered, so not a tool of this run: the loop refuses it before any executor sees it.
    assert result["error"] == "unknown tool 'calculate'"


def test_a_tool_to_approve_asks_even_when_the_run_says_never(
    model: tuple[FakeOpenAI, str], tmp_path: Path
) -> None:
    rules = {"approve_tools": ["cl?ck"]}
    with running_gateway(**settings(model, rules), workspace=str(tmp_path)) as (base, _):
        run_id = start(base, "use clock {}", approval="never")
        with httpx.Client(base_url=base, timeout=10) as client:

            def asking() -> bool:
                return client.get(f"/v1/runs/{run_id}").json().get("awaiting") == "approval"

            wait_until(asking, 10, "the run to ask for approval")
            answer = {"request_id": "perm_1", "decision": "reject_once"}
            assert client.post(f"/v1/runs/{run_id}/respond", json=answer).status_code < 300
        run = envelopes(read_stream(base, run_id))
    assert of(run, "permission_request")[0]["toolCall"]["name"] == "clock"
    assert of(run, "permission_result")[0]["decision"] == "reject_once"


@pytest.mark.parametrize(
    ("toml", "said"),
    [
        (
            "[hook_rules]\ndeny_tool = ['x']\n",
            "hook_rules: Object contains unknown field `deny_tool`",
        ),
        (
            "[hook_rules]\nmax_result_chars = { clock = 0 }\n",
            "hook_rules.max_result_chars.clock must be positive",
        ),
        ("[prices.gpt]\ninput = -1\noutput = 1\n", "prices.gpt: input must be a price in USD"),
        (
            "[loop_config]\nmax_rounds = 1000000000\n",
            "loop_config.max_rounds must be at most 1,000, got 1,000,000,000",
        ),
        ("[loop_config]\nbudget = 0\n", "loop_config.budget must be positive, got 0"),
    ],
)
def test_settings_out_of_range_are_refused_at_start(tmp_path: Path, toml: str, said: str) -> None:
    (tmp_path / "bad.toml").write_text(toml, encoding="utf-8")
    done = loopgate(tmp_path, "serve", "-c", "bad.toml", "--port", str(free_port()))
    assert done.returncode == 2
    assert said in done.stderr and "Traceback" not in done.stderr


def test_a_hooks_module_without_hooks_is_refused_at_start(tmp_path: Path) -> None:
    (tmp_path / "nohooks.py").write_text("def helper():\n    return 1\n", encoding="utf-8")
    done = loopgate(tmp_path, "serve", "--hooks", "nohooks", "--port", str(free_port()))
    assert done.returncode == 2
    assert "--hooks nohooks: the module defines no `hooks` and no class with a hook method" in (
        done.stderr
    )
