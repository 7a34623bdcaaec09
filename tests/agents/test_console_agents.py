"""The web console in headless Chromium (tests/node/console-agents.mjs) on a gateway serving two
agents: the picker lists them with the default chosen, a run starts on the agent picked and
answers as that agent, and the run list and the run's view name each run's agent. On a gateway
with one agent there is no picker and no agent column: the console as it was."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.agents.roster import PREFIX, two_agent_settings
from tests.browser.support import artifacts_dir, run_browser
from tests.gateway.harness import running_gateway
from tests.gateway.sse_client import read_stream

DRIVER = "console-agents.mjs"


@pytest.fixture
def browser_artifacts(tmp_path: Path, request: pytest.FixtureRequest) -> Path:
    """Where the driver's screenshots go (a failed run_browser names it)."""
    return artifacts_dir(tmp_path, request.node.name)


def test_a_run_starts_on_the_agent_picked_and_the_list_names_it(
    browser_artifacts: Path,
) -> None:
    settings = two_agent_settings()
    runs = [["parrot", "hello from the console"], ["coder", "What time is it?"]]
    config = {"gateway": "", "runs": runs, "approve": ["coder", "write note groceries"]}
    with running_gateway(agents=settings.agents) as (base, _):
        config["gateway"] = base
        report = run_browser({"several": config}, browser_artifacts, script=DRIVER)["several"]
        recorded = {run["id"]: run for run in httpx.get(f"{base}/v1/runs").json()["runs"]}

    picker = report["picker"]
    assert picker["hidden"] is False
    assert picker["value"] == "coder"  # the default, preselected
    assert [(o["value"], o["text"]) for o in picker["options"]] == [
        ("coder", "coder — Writes and explains code"),
        ("parrot", "parrot — Repeats what you say"),
    ]
    # The top right names the chosen agent's loop.
    assert report["served"] == {
        "coder": "the reference loop · model loopgate-scripted",
        "parrot": "loop python:tests.agents.parrot:loop",
    }

    parrot, coder = report["runs"]
    assert PREFIX + "hello from the console" in parrot["stream"]
    assert "(UTC) right now" in coder["stream"] and PREFIX not in coder["stream"]
    for shown in (parrot, coder):
        run = recorded[shown["runId"]]
        # The hub's truth: the run went to the agent picked, started over the native API.
        assert run["agent"] == shown["agent"]
        assert run["input"] == [{"role": "user", "content": shown["prompt"]}]
        assert shown["agentHidden"] is False
        assert f"run · agent {shown['agent']} · started" in shown["meta"]

    approval = report["approval"]
    assert "allow_once (by client)" in approval["stream"] and "wrote notes/" in approval["stream"]
    assert recorded[approval["runId"]]["agent"] == "coder"
    assert recorded[approval["runId"]]["status"] == "completed"

    assert sorted((r["runId"], r["agent"]) for r in report["listed"]) == sorted(
        (run_id, run["agent"]) for run_id, run in recorded.items()
    )
    assert report["problems"] == [], report["problems"]


def test_with_one_agent_there_is_no_picker_and_no_agent_column(browser_artifacts: Path) -> None:
    with running_gateway() as (base, _):
        started = httpx.post(f"{base}/v1/runs", json={"input": "plain hello"}).json()
        read_stream(base, started["id"])  # to the run's end
        config = {"gateway": base, "runId": started["id"]}
        report = run_browser({"one": config}, browser_artifacts, script=DRIVER)["one"]

    assert started["agent"] == "default"
    assert report["picker"]["hidden"] is True
    assert report["served"] == "the reference loop · model loopgate-scripted"
    assert report["agentHidden"] is True
    assert "agents" not in report["listClasses"]
    assert "agent" not in report["meta"] and report["meta"].startswith("loop run · started")
    assert report["problems"] == [], report["problems"]
