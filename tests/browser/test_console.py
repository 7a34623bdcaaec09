"""The web console at ``/`` in headless Chromium, used as a person uses it: typing a prompt,
clicking Cancel, an approval's button, answering a question (tests/node/console-drive.mjs),
signing in with an API key and seeing whose runs are listed (tests/node/console-signin.mjs), and
how it holds up on a 100,000-delta run and a list of 1,000 runs.

The drawing times are measured in the page (performance.now()); the bounds asserted are the
issue's targets, far above what it takes here (the figures are in docs/console.md)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import httpx

from loopgate.contracts.contract import load_contract
from loopgate.gateway.settings import RECORDINGS
from tests.attachments.support import PNG, PNG_B64
from tests.browser.support import page_server, run_browser
from tests.gateway.harness import REPO, running_gateway
from tests.gateway.sse_client import envelopes, read_stream
from tests.identity import principals
from tests.node_clients import NODE_DIR, node_clients

DRIVER = "console-drive.mjs"
SIGN_IN = "console-signin.mjs"
STATIC = REPO / "gateway" / "console" / "static"
BIG_RUN_DELTAS = 100_000
# The target: the last delta drawn within 2 s of the stream's end.
DRAWN_WITHIN_MS = 2000
MANY_RUNS = 1000


def _clean(report: dict[str, Any]) -> None:
    """Nothing went wrong in the page: no uncaught error, no error or warning logged."""
    assert report["problems"] == [], report["problems"]


def test_the_console_starts_cancels_approves_and_answers(browser_artifacts: Path) -> None:
    # Paced so that a run is still streaming when Cancel is clicked; traced (to a collector
    # that is not there) so that runs have a trace id to show.
    traced = {"otel_endpoint": "http://127.0.0.1:1", "otel_export_timeout_s": 1.0}
    with running_gateway(scripted_delay_s=0.02, **traced) as (base, _):
        report = run_browser({"flows": {"gateway": base}}, browser_artifacts, script=DRIVER)[
            "flows"
        ]
        runs = {run["id"]: run for run in httpx.get(f"{base}/v1/runs").json()["runs"]}

    answer = report["answer"]
    assert "It is 20" in answer["stream"] and "(UTC) right now" in answer["stream"]
    assert runs[answer["runId"]]["status"] == "completed"
    # Started over AG-UI: the run records the protocol that started it.
    assert runs[answer["runId"]]["metadata"]["protocol"] == "agui"
    assert answer["traceId"] == runs[answer["runId"]]["metadata"]["trace_id"]

    cancel = report["cancel"]
    assert "cancelled" in cancel["stream"].splitlines()[-1]
    assert runs[cancel["runId"]]["status"] == "cancelled"

    approval = report["approval"]
    assert "write_note needs your approval" in approval["stream"]
    assert "allow_once (by client)" in approval["stream"]
    assert "wrote notes/" in approval["stream"]
    assert runs[approval["runId"]]["status"] == "completed"

    ask = report["askUser"]
    assert "name" in report["question"].lower()
    assert runs[ask["runId"]]["status"] == "waiting_user"
    assert "you said: Ada Lovelace" in ask["stream"]
    assert runs[ask["nextRunId"]]["thread_id"] == runs[ask["runId"]]["thread_id"]
    assert runs[ask["nextRunId"]]["status"] == "completed"

    assert set(report["listed"]) == set(runs)
    # The console's runs and threads have ids in the gateway's one format, as its own runs do.
    assert all(re.fullmatch(r"run_[0-9a-f]{32}", run_id) for run_id in runs), sorted(runs)
    assert all(re.fullmatch(r"thread_[0-9a-f]{32}", run["thread_id"]) for run in runs.values())
    _clean(report)


def test_the_console_says_what_each_run_waits_for_and_how_it_ended(
    browser_artifacts: Path,
) -> None:
    """The states of issue 28: waiting for approval (run view and row), a cancel that leaves no
    tool call "running…", an answered ask_user and its follow-up in one thread, rows titled by
    the prompt, and the loop and model that serve."""
    # Paced, so that the slow tool's card is on the page before the cancel.
    with running_gateway(scripted_delay_s=0.02) as (base, _):
        report = run_browser({"states": {"gateway": base}}, browser_artifacts, script=DRIVER)[
            "states"
        ]
        runs = {run["id"]: run for run in httpx.get(f"{base}/v1/runs").json()["runs"]}

    approval = report["approval"]
    # Rows are titled by the prompt; the run id is the secondary line.
    assert approval["waiting"]["title"] == "write note groceries"
    assert approval["waiting"]["id"] == approval["runId"]
    assert approval["row"]["title"] == "write note groceries"
    assert approval["row"]["sub"].startswith(f"{approval['runId']} · waiting for approval")
    assert "running" not in approval["row"]["sub"]
    assert approval["rowAfter"]["sub"].startswith(f"{approval['runId']} · completed")

    cancel = report["cancel"]
    assert "running…" in cancel["before"]
    [card] = cancel["cards"]
    assert "running…" not in card and "cancelled" in card
    assert runs[cancel["runId"]]["status"] == "cancelled"

    # The hub's truth: the question's run ended waiting_user, and the answer is the thread's
    # next run, whose input ends with the answer as the asked call's result.
    ask = report["ask"]
    asked, answered = runs[ask["runId"]], runs[ask["nextRunId"]]
    assert asked["status"] == "waiting_user"
    assert answered["thread_id"] == asked["thread_id"]
    assert answered["input"][-1]["role"] == "tool"
    assert answered["input"][-1]["content"] == "Ada Lovelace"
    # The console: the question's run is answered, the follow-up sits under it in its thread.
    assert ask["askedRow"]["title"] == "ask user what their name is"
    assert " · answered · " in ask["askedRow"]["sub"]
    assert ask["nextRow"]["title"] == "answer: Ada Lovelace"
    assert "follows" in ask["nextRow"]["classes"]
    listed = report["listed"]
    assert listed.index(ask["nextRunId"]) == listed.index(ask["runId"]) + 1
    assert [item["runId"] for item in ask["thread"]] == [ask["runId"], ask["nextRunId"]]
    assert ask["thread"][1]["current"] == "true"
    assert ask["threadHead"] == f"thread {asked['thread_id']} · 2 runs"
    assert ask["askedView"]["said"].startswith("answered: Ada Lovelace")
    assert ask["askedView"]["inputs"] == 0

    # A thread that went on without answering: the question no longer waits either.
    passed_over = report["passedOver"]
    assert passed_over["questionRow"]["title"] == "ask user tea or coffee?"
    assert " · not answered · " in passed_over["questionRow"]["sub"]
    assert passed_over["nextRow"]["title"] == "never mind, plain hi"
    assert "follows" in passed_over["nextRow"]["classes"]

    assert report["served"] == "the reference loop · model loopgate-scripted"
    _clean(report)


def test_the_console_names_a_plugged_loop_and_an_openai_compatible_model(
    browser_artifacts: Path,
) -> None:
    plugged = {"loop": "tests.plugs.sample_loop:sample"}
    # Never asked: the console only reads which model the gateway is set up with.
    openai = {
        "provider": "openai",
        "openai_base_url": "http://127.0.0.1:1/v1",
        "openai_model": "qwen2.5-7b-instruct",
    }
    with running_gateway(**plugged) as (loop_base, _), running_gateway(**openai) as (model_base, _):
        config = {"served": {"gateways": [loop_base, model_base], "prompt": "tool"}}
        report = run_browser(config, browser_artifacts, script=DRIVER)["served"]
        assert httpx.get(f"{loop_base}/v1/loop").json() == {
            "name": "python:tests.plugs.sample_loop:sample",
            "model": None,
        }

    assert report["served"] == [
        "loop python:tests.plugs.sample_loop:sample",
        "the reference loop · model qwen2.5-7b-instruct",
    ]
    # A plugged loop names its model in its runs' stage_start: the run's view shows it.
    assert "model sample" in report["runMeta"]
    _clean(report)


def test_a_100k_delta_run_is_drawn_as_fast_as_it_arrives(browser_artifacts: Path) -> None:
    with running_gateway(max_events_per_run=BIG_RUN_DELTAS + 10) as (base, _):
        config = {"bigRun": {"gateway": base, "deltas": BIG_RUN_DELTAS}}
        report = run_browser(config, browser_artifacts, script=DRIVER, timeout=240)["bigRun"]

    stats = report["stats"]
    assert stats["deltas"] == BIG_RUN_DELTAS
    # One text block holding every delta ("wN " each: 3 characters).
    assert (report["textBlocks"], report["textLength"]) == (1, 3 * BIG_RUN_DELTAS)
    behind = stats["lastDeltaDrawn"] - stats["lastReceived"]
    assert behind < DRAWN_WITHIN_MS, report
    _clean(report)


def test_a_list_of_1000_runs_stays_responsive(browser_artifacts: Path) -> None:
    with running_gateway() as (base, _):
        config = {"manyRuns": {"gateway": base, "runs": MANY_RUNS}}
        report = run_browser(config, browser_artifacts, script=DRIVER, timeout=240)["manyRuns"]

    assert report["created"] == MANY_RUNS
    assert report["first"]["runs"] == MANY_RUNS and report["orderReversed"], report
    # Seconds, not the milliseconds it takes: bounds for "responsive" on a busy machine.
    assert report["first"]["renderMs"] < 2000, report
    assert report["refresh"]["renderMs"] < 500, report
    assert report["selectMs"] < 5000, report
    assert report["shownId"] == report["oldest"]
    assert report["title"] == "(pushed by an external loop)"
    _clean(report)


def test_the_vendored_agui_client_is_what_the_pinned_packages_build(tmp_path: Path) -> None:
    """gateway/console/static/vendor is generated: a rebuild from tests/node's pinned
    packages gives the same bytes (scripts/build-console)."""
    subprocess.run(
        [node_clients(), str(NODE_DIR / "build-console.mjs"), str(tmp_path)],
        check=True,
        timeout=120,
    )
    for name in ("agui-client.js", "agui-client.licenses.txt"):
        assert (tmp_path / name).read_bytes() == (STATIC / "vendor" / name).read_bytes(), (
            f"{name} is stale: run ./scripts/build-console"
        )


# Drawn only in the timeline (model requests, a round's bookkeeping), or inside the card of the
# tool call they answer.
_NOT_BLOCKS = {"llm_request", "stage_complete", "tool_call_result", "tool_error"}


def test_every_recording_is_drawn_unknown_kinds_raw(browser_artifacts: Path) -> None:
    known = set(load_contract().event_kinds) | {"permission_request", "permission_result"}
    recordings = sorted(RECORDINGS.glob("*.jsonl"))
    with running_gateway() as (base, _):
        runs: dict[str, list[dict[str, Any]]] = {}
        for path in recordings:
            created = httpx.post(f"{base}/v1/runs", json={"replay": path.stem}).json()
            # Read to its end: the run has finished.
            runs[created["id"]] = envelopes(read_stream(base, created["id"]))
        config = {"watch": {"gateway": base, "runs": list(runs)}}
        report = run_browser(config, browser_artifacts, script=DRIVER, timeout=240)["watch"]

    for run_id, served in runs.items():
        drawn = report["drawn"][run_id]
        kinds = {block["kind"] for block in drawn}
        shown = {
            e["kind"]
            for e in served
            if e["kind"] not in _NOT_BLOCKS
            and not (e["kind"] == "completion" and e["data"].get("status") == "executing")
        }
        assert shown <= kinds, (run_id, shown - kinds)
        # Every string delta, in order, in the text blocks.
        deltas = [e["data"].get("delta") for e in served if e["kind"] == "content_delta"]
        text = "".join(d for d in deltas if isinstance(d, str))
        drawn_text = "".join(
            b["text"].removeprefix("text")
            for b in drawn
            if b["kind"] == "content_delta" and not b["raw"]
        )
        assert drawn_text.replace("\n", "") == text.replace("\n", ""), run_id
        # Unknown kinds are shown raw: their payload's JSON is on the page.
        for e in served:
            if e["kind"] not in known:
                [block] = [b for b in drawn if b["kind"] == e["kind"]][:1]
                for key in e["data"]:
                    assert f'"{key}"' in block["text"], (e["kind"], key)
    assert any(k not in known for events in runs.values() for k in {e["kind"] for e in events})
    _clean(report)


def test_the_console_runs_under_its_content_security_policy(browser_artifacts: Path) -> None:
    """The console loads clean under its policy (the other tests here drive it and find no CSP
    violation in its console), and the policy is enforced: Chromium refuses an inline script
    put into the page and refuses to show the console in another origin's frame."""
    with running_gateway() as (base, _), page_server() as framer_port:
        framer = f"http://localhost:{framer_port}/"
        report = run_browser(
            {"csp": {"gateway": base, "framer": framer}}, browser_artifacts, script=DRIVER
        )["csp"]
    assert report["loaded"] == []
    assert report["inline"] == {"directive": "script-src-elem", "ran": False}
    assert "frame-ancestors 'none'" in report["framed"]


# --- signing in: API keys, owners -----------------------------------------------------------


def _finished_run(base: str, who: principals.TestKey | None = None) -> str:
    """A run started (as ``who``, or the local user) and read to its end; its id."""
    headers = who.headers if who else {}
    started = httpx.post(f"{base}/v1/runs", json={"input": "plain hi"}, headers=headers)
    assert started.status_code == 201, started.text
    run_id: str = started.json()["id"]
    read_stream(base, run_id, headers=headers)
    return run_id


def _only_refusals_of_sign_in(report: dict[str, Any]) -> None:
    """The page logged nothing wrong but the 401s it asks for: /v1/me, first with no key and
    then with the wrong one (Chromium logs every refused request as an error)."""
    refused = [p for p in report["problems"] if "status of 401" not in p]
    assert refused == [], report["problems"]
    assert set(report["refused"]) == {"/v1/me"}, report["refused"]


def test_alice_signs_in_with_her_key_and_sees_only_her_runs_root_sees_everyones(
    browser_artifacts: Path, tmp_path: Path
) -> None:
    keys = principals.write_test_keys(tmp_path / "keys.json")
    alice, bob, root = keys["alice"], keys["bob"], keys["root"]
    with running_gateway(keys_file=str(tmp_path / "keys.json")) as (base, _):
        runs = {"alice": _finished_run(base, alice), "bob": _finished_run(base, bob)}
        # A key of the right shape that the file does not hold.
        wrong = alice.key[:-6] + "wrong0"
        signing_in = {"gateway": base, "wrong": wrong, "alice": alice.key, "root": root.key}
        config = {"keys": {**signing_in, "runs": runs}}
        report = run_browser(config, browser_artifacts, script=SIGN_IN)["keys"]
        listed = httpx.get(f"{base}/v1/runs", headers=root.headers).json()["runs"]
        held = {run["id"]: run for run in listed}
        refusal = httpx.get(f"{base}/v1/me", headers={"authorization": f"Bearer {wrong}"})

    assert "API key or token" in report["asked"]
    assert report["placeholder"] == "API key or token"
    # A wrong key is told so, in the gateway's words, and never repeated.
    assert report["wrong"]["open"] is True
    assert refusal.status_code == 401
    assert report["wrong"]["error"] == f"Not signed in: {refusal.json()['detail']}"
    assert wrong not in report["wrong"]["error"]

    signed_in = report["alice"]
    assert signed_in["dialogOpen"] is False
    assert signed_in["who"]["name"] == "alice · acme"
    assert "with an API key" in signed_in["who"]["title"]
    assert signed_in["who"]["signOut"] is True
    # Only what the API gives alice: her run, not bob's; her own owner is shown dimmed.
    assert signed_in["rows"] == [{"id": runs["alice"], "owner": "alice · acme", "mine": True}]
    # Her run's view: the stream over EventSource (?token=), the run's owner.
    assert "completed" in signed_in["opened"]["stream"]
    assert signed_in["opened"]["meta"].endswith(" · by alice · acme")
    # A run she starts (over the AG-UI WebSocket, ?token=) is hers.
    started = signed_in["started"]
    assert "It is 20" in started["stream"]
    assert started["meta"].endswith(" · by alice · acme")
    assert started["thread"].startswith("thread ")
    assert held[started["runId"]]["owner"] == {"subject": "alice", "tenant": "acme"}
    assert {row["id"] for row in signed_in["rowsAfter"]} == {runs["alice"], started["runId"]}

    # Signing out forgets the key; root (an admin) sees every run, each with its owner.
    assert report["signedOut"]["stored"] == 0
    assert report["root"]["who"]["name"] == "root · ops"
    owners = {row["id"]: (row["owner"], row["mine"]) for row in report["root"]["rows"]}
    assert owners == {
        runs["alice"]: ("alice · acme", False),
        started["runId"]: ("alice · acme", False),
        runs["bob"]: ("bob · globex", False),
    }
    # ?token= only where a browser can send no header: the run's events and the AG-UI socket.
    assert {(q["path"], q["type"]) for q in report["queryTokens"]} <= {
        (f"/v1/runs/{runs['alice']}/events", "eventsource"),
        (f"/v1/runs/{started['runId']}/events", "eventsource"),
        ("/agui/ws", "websocket"),
    }
    assert ("/agui/ws", "websocket") in {(q["path"], q["type"]) for q in report["queryTokens"]}
    _only_refusals_of_sign_in(report)


def test_the_gateways_token_signs_in_as_its_admin(browser_artifacts: Path) -> None:
    token = "console-token-0123456789"
    with running_gateway(token=token) as (base, _):
        run_id = _finished_run(base, principals.TestKey("t", "admin", "default", "admin", token))
        report = run_browser(
            {"token": {"gateway": base, "token": token, "runs": [run_id]}},
            browser_artifacts,
            script=SIGN_IN,
        )["token"]

    assert report["who"]["name"] == "admin · default"
    assert "with the gateway's token" in report["who"]["title"]
    assert report["who"]["signOut"] is True
    assert report["rows"] == [{"id": run_id, "owner": "admin · default", "mine": True}]
    _only_refusals_of_sign_in(report)


def test_with_no_credential_configured_the_console_asks_nothing(browser_artifacts: Path) -> None:
    """The development default: a loopback gateway with no credential serves its machine's
    user, and the console says so without a sign-in or a sign-out."""
    with running_gateway() as (base, _):
        run_id = _finished_run(base)
        report = run_browser(
            {"local": {"gateway": base, "runs": [run_id]}}, browser_artifacts, script=SIGN_IN
        )["local"]

    assert report["who"]["name"] == "local · default"
    assert "no sign-in needed" in report["who"]["title"]
    assert report["who"]["signOut"] is False
    assert report["dialogOpen"] is False
    assert report["rows"] == [{"id": run_id, "owner": "local · default", "mine": True}]
    assert report["refused"] == []
    _clean(report)


def test_a_question_asked_of_a_prompt_with_an_image_is_answered_with_it(
    browser_artifacts: Path,
) -> None:
    """The console answers with the run's conversation as AG-UI messages: the image the prompt
    carried goes back as an AG-UI image part, and the next run has it (docs/attachments.md)."""
    image = {"type": "image", "media_type": "image/png", "data": PNG_B64}
    prompt = [{"type": "text", "text": "ask user what their name is"}, image]
    with running_gateway() as (base, _):
        asked = httpx.post(
            f"{base}/v1/runs", json={"input": [{"role": "user", "content": prompt}]}
        ).json()
        read_stream(base, asked["id"])  # to its end: the run waits for the answer
        config = {"answerAttached": {"gateway": base, "runId": asked["id"]}}
        report = run_browser(config, browser_artifacts, script=DRIVER)["answerAttached"]
        answered = httpx.get(f"{base}/v1/runs/{report['nextRunId']}").json()
    _clean(report)
    assert answered["status"] == "completed"
    assert answered["thread_id"] == asked["thread_id"]
    assert answered["input"][0]["content"][1] == {**image, "size": len(PNG)}
