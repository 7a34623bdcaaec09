"""Plugged loops that misbehave: each fault ends its run with ``error`` and
``completion{failed, reason}`` saying what went wrong (no exception text), and the gateway and
its other runs go on."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fakes.servers import serve_app
from tests.gateway.harness import free_port, running_gateway
from tests.gateway.sse_client import envelopes, read_stream
from tests.plugs.plugs import SAMPLE, plug_settings, stdio_command
from tests.plugs.sample_http import sample_app
from tests.plugs.sample_loop import script_for

# Short enough for the suite, long enough that a loaded machine does not trip them.
GUARDS = {"loop_first_event_timeout_s": 1.0, "loop_idle_timeout_s": 1.0}


def run_to_end(base: str, prompt: str) -> list[dict[str, Any]]:
    response = httpx.post(f"{base}/v1/runs", json={"input": prompt}, timeout=10)
    assert response.status_code == 201, response.text
    return envelopes(read_stream(base, response.json()["id"]))


def assert_failed(events: list[dict[str, Any]], reason: str, message: str) -> None:
    """The run ended with the fault named, in words a client may read."""
    *_, error, completion = events
    assert error["kind"] == "error"
    assert error["data"] == {"message": message, "phase": "loop"}
    assert completion["kind"] == "completion"
    assert completion["data"] == {"status": "failed", "reason": reason, "message": message}
    text = json.dumps(events)
    assert "secret internals" not in text and "Traceback" not in text


def assert_still_serving(base: str) -> None:
    events = run_to_end(base, "hello again")
    assert [{"kind": e["kind"], "data": e["data"]} for e in events] == script_for("hello again")


@pytest.fixture(scope="module", params=["event_loop", "thread"])
def python_gateway(request: pytest.FixtureRequest) -> Iterator[str]:
    with running_gateway(loop=SAMPLE, loop_runner=request.param, **GUARDS) as (base, _):
        yield base


@pytest.mark.parametrize(
    ("prompt", "reason", "message"),
    [
        ("raise", "loop_error", "the loop failed with an internal error"),
        (
            "garbage",
            "loop_invalid_event",
            "event 1 is not an object with a string kind (got int)",
        ),
        (
            "nokind",
            "loop_invalid_event",
            "event 1 is not an object with a string kind and a data object",
        ),
        ("silent", "loop_timeout", "the loop sent no event within 1 s"),
        ("early", "loop_ended_early", "the loop stopped without a terminal completion"),
    ],
)
def test_python_loop_faults(python_gateway: str, prompt: str, reason: str, message: str) -> None:
    assert_failed(run_to_end(python_gateway, prompt), reason, message)
    assert_still_serving(python_gateway)


def test_a_foreign_typed_payload_field_does_not_end_the_run(python_gateway: str) -> None:
    """Plugged loops follow ingest's tolerant rule: `delta: 5` is carried through as sent
    (tests/tolerance says what each projector makes of it); this loop then stops without a
    terminal completion, which is what ends its run."""
    events = run_to_end(python_gateway, "badpayload")
    assert (events[0]["kind"], events[0]["data"]) == ("content_delta", {"delta": 5})
    assert_failed(events, "loop_ended_early", "the loop stopped without a terminal completion")
    assert_still_serving(python_gateway)


@pytest.fixture(scope="module")
def loop_server() -> Iterator[str]:
    with serve_app(sample_app()) as base:
        yield base


@pytest.mark.parametrize(
    ("path", "reason", "message"),
    [
        ("/status500", "loop_error", "the loop answered HTTP 500"),
        ("/html", "loop_bad_response", "the loop answered text/html, not application/x-ndjson"),
        ("/hang", "loop_timeout", "the loop sent no event within 1 s"),
        ("/drop", "loop_disconnected", "the connection to the loop broke"),
        ("/garbage", "loop_invalid_event", "event 1: malformed JSON"),
        (
            "/toolong",
            "loop_invalid_event",
            "the loop sent a line longer than the limit of 2097152 bytes",
        ),
    ],
)
def test_http_loop_faults(loop_server: str, path: str, reason: str, message: str) -> None:
    with running_gateway(loop_url=loop_server + path, **GUARDS) as (base, _):
        events = run_to_end(base, "hello")
        *_, error, _completion = events
        if reason == "loop_invalid_event":
            # msgspec's own description of the JSON follows; it names no internals of ours.
            assert error["data"]["message"].startswith(message)
            message = error["data"]["message"]
        assert_failed(events, reason, message)
    with running_gateway(loop_url=loop_server + "/loop", **GUARDS) as (base, _):
        for prompt, reason, message in [
            ("raise", "loop_ended_early", "the loop stopped without a terminal completion"),
            ("silent", "loop_timeout", "the loop sent no event within 1 s"),
        ]:
            assert_failed(run_to_end(base, prompt), reason, message)
        assert_still_serving(base)


def test_an_http_loop_nobody_listens_on() -> None:
    url = f"http://127.0.0.1:{free_port()}/loop"
    with running_gateway(loop_url=url, **GUARDS) as (base, _):
        assert_failed(
            run_to_end(base, "hello"), "loop_unavailable", "the loop could not be reached"
        )


def test_an_http_loop_without_commands_cannot_be_steered_and_is_cancelled_by_closing(
    loop_server: str,
) -> None:
    with running_gateway(loop_url=loop_server + "/plain", **GUARDS) as (base, _):
        run = httpx.post(f"{base}/v1/runs", json={"input": "slow words"}).json()
        steer = httpx.post(f"{base}/v1/runs/{run['id']}/steer", json={"content": "left"}).json()
        assert steer == {
            "run_id": run["id"],
            "accepted": False,
            "detail": "this loop takes no steer commands",
        }
        httpx.post(f"{base}/v1/runs/{run['id']}/cancel")
        events = envelopes(read_stream(base, run["id"]))
    # The loop never heard of the cancel: the gateway closed the connection and ended the run.
    assert events[-1]["data"] == {"status": "cancelled", "reason": "cancelled"}


@pytest.mark.parametrize(
    ("prompt", "reason", "message"),
    [
        ("garbage", "loop_invalid_event", "event 1 has no string `kind`"),
        ("nokind", "loop_invalid_event", "event 1 has no string `kind`"),
        ("silent", "loop_timeout", "the loop sent no event within 1 s"),
    ],
)
def test_stdio_loop_run_faults(prompt: str, reason: str, message: str) -> None:
    with running_gateway(loop_cmd=stdio_command(), **GUARDS) as (base, _):
        assert_failed(run_to_end(base, prompt), reason, message)
        assert_still_serving(base)


@pytest.mark.parametrize(
    ("prompt", "message"),
    [
        ("die", "the loop process exited (code 3)"),
        ("spew", "the loop process wrote something that is not JSON-RPC on stdout"),
    ],
)
def test_a_stdio_child_that_dies_or_spews_is_restarted(prompt: str, message: str) -> None:
    with running_gateway(loop_cmd=stdio_command(), **GUARDS) as (base, _):
        assert_failed(run_to_end(base, prompt), "loop_exited", message)
        # Restarted with back-off (the first wait is half a second): the next run works.
        assert_still_serving(base)


def test_the_first_event_timeout_counts_from_when_a_restarted_child_has_the_run() -> None:
    # Three quick deaths: the child is started again after 0.5, 1 and 2 s. A run that comes
    # during the 2 s back-off waits for the child (the connect timeout bounds that), then gets
    # its whole first-event time: the back-off is not the loop's silence.
    with running_gateway(loop_cmd=stdio_command(), **GUARDS) as (base, _):
        for _ in range(3):
            assert_failed(
                run_to_end(base, "die"), "loop_exited", "the loop process exited (code 3)"
            )
        began = time.monotonic()
        assert_still_serving(base)
        waited = time.monotonic() - began
        assert waited > GUARDS["loop_first_event_timeout_s"], waited  # it did wait the back-off
        print(f"a run during a 2 s back-off answered after {waited:.2f} s")


def test_a_stdio_child_that_refuses_runs() -> None:
    with running_gateway(loop_cmd=stdio_command("--refuse"), **GUARDS) as (base, _):
        assert_failed(
            run_to_end(base, "hello"), "loop_error", "the loop refused the run (error -32000)"
        )


def test_a_stdio_command_that_is_not_there_stops_the_gateway_at_start() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "loopgate", "serve", "--loop-cmd", "/nonexistent/loop-binary"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == (
        "loopgate serve: --loop-cmd: no program '/nonexistent/loop-binary' "
        "(not found or not executable)"
    )


def test_a_stdio_command_that_cannot_start(tmp_path: Path) -> None:
    # There at start-up, but the kernel cannot run it: its interpreter is missing.
    program = tmp_path / "loop-binary"
    program.write_text("#!/nonexistent/interpreter\n")
    program.chmod(0o755)
    command = shlex.join([str(program)])
    with running_gateway(loop_cmd=command, loop_connect_timeout_s=0.5) as (base, _):
        assert_failed(
            run_to_end(base, "hello"), "loop_unavailable", "the loop process is not running"
        )


def test_python_loop_spec_errors_are_clear() -> None:
    from loopgate.gateway.plugs.python import load_object

    with pytest.raises(ValueError, match=r"package\.module:attr"):
        load_object("no_colon_here")
    with pytest.raises(ValueError, match="no module named 'not_a_module_anywhere'"):
        load_object("not_a_module_anywhere:loop")
    with pytest.raises(ValueError, match="has no attribute 'missing'"):
        load_object(f"{SAMPLE.split(':')[0]}:missing")


@pytest.mark.parametrize("plug", ["python", "http", "stdio"])
def test_a_loop_over_the_event_limit_is_ended_by_the_hub(
    plug: str, caplog: pytest.LogCaptureFixture
) -> None:
    with (
        plug_settings(plug) as plugged,
        running_gateway(
            max_events_per_run=20,
            **{k: v for k, v in plugged.items() if not k.startswith("_")},
            **GUARDS,
        ) as (base, _),
    ):
        events = run_to_end(base, "slow words")
        assert_still_serving(base)
    assert len(events) == 20
    assert events[-1]["data"]["reason"] == "event_limit"
    # An ordinary end of a run, not a loop that failed.
    assert not [r for r in caplog.records if r.levelname == "ERROR"]
