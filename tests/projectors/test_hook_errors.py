"""A protocol hook that raises is a bug: never swallowed (adapters/shared/projector.py).

Strict (the suite's setting, tests/conftest.py): it propagates out of ``feed``/``close``.
Otherwise: one log line with the run, the kind and where — never the payload — and the
client's stream ends there: what it was shown opening is closed, then the protocol's terminal
error. The AG-UI runs are checked by the real client (@ag-ui/client, tests/node/agui-verify.mjs).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import pytest

from loopgate.adapters.agui.adapter import ADAPTER as AGUI
from loopgate.adapters.agui.projector import AguiProjector
from loopgate.adapters.shared.projector import STRICT_ENV, RunProjector
from loopgate.contracts.envelope import Envelope
from tests.agui.agui_streams import Stream, context
from tests.agui.test_real_client_offline import assert_clean, run_verifier, write_runs

SECRET = "s3cret-argument"
# Each hook, and the event of the stream below on which it first runs.
HOOKS = {
    "open_segment": "content_delta",
    "on_delta": "content_delta",
    "close_segment": "tool_call_start",
    "on_tool_start": "tool_call_start",
    "on_tool_result": "tool_call_result",
    "close_round": "llm_response",
    "on_terminal": "completion",
}


def stream() -> list[Envelope]:
    s = Stream("run-hook").add("stage_start", model="m-1").add("llm_request", round=1)
    s.add("content_delta", delta="Look").add("content_delta", delta="ing up.")
    s.add("tool_call_start", id="call_1", name="lookup", arguments={"q": SECRET})
    s.add("tool_call_result", id="call_1", name="lookup", result=SECRET, success=True)
    s.add("llm_response", round=1, promptTokens=5, completionTokens=3)
    s.add("stage_complete")
    return s.add("completion", status="completed", response="done").envelopes


def broken(hook: str) -> type[AguiProjector]:
    def fail(self: RunProjector[Any], *args: Any) -> Any:
        raise KeyError(SECRET)  # a message quoting the payload, as a careless hook's would

    return type(f"Broken_{hook}", (AguiProjector,), {hook: fail})


def project(projector: RunProjector[Any]) -> list[Any]:
    out = list(projector.start())
    for envelope in stream():
        out += projector.feed(envelope)
    return out + projector.close()


def test_the_suite_runs_every_projector_strict() -> None:
    assert os.environ.get(STRICT_ENV) == "1"


@pytest.mark.parametrize("hook", HOOKS)
def test_strict_a_raising_hook_propagates(hook: str) -> None:
    projector = broken(hook)(context("run-hook"))
    with pytest.raises(KeyError):
        project(projector)


@pytest.fixture
def lenient(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(STRICT_ENV, "0")


@pytest.fixture(scope="module")
def ended(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    """Each broken projector's run, non-strict, as the client gets it; and the real AG-UI
    client's verdict on each (run once for all of them)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(STRICT_ENV, "0")
        runs = {
            hook: [AGUI.to_builtins(m) for m in project(broken(hook)(context("run-hook")))]
            for hook in HOOKS
        }
    tmp = Path(tmp_path_factory.mktemp("broken-hooks"))
    assert_clean(run_verifier(write_runs(tmp, runs)))
    return runs


@pytest.mark.parametrize("hook", HOOKS)
def test_lenient_the_stream_ends_with_the_protocols_error(
    hook: str, ended: dict[str, list[dict[str, Any]]]
) -> None:
    types = [event["type"] for event in ended[hook]]
    assert types[0] == "RUN_STARTED" and types[-1] == "RUN_ERROR"
    assert types.count("RUN_ERROR") == 1 and "RUN_FINISHED" not in types
    # Nothing after the hook's event: the stream ended there, and every start has its end
    # but the one whose closing hook is the broken one.
    for start, end, closer in [
        ("TEXT_MESSAGE_START", "TEXT_MESSAGE_END", "close_segment"),
        ("STEP_STARTED", "STEP_FINISHED", "close_round"),
    ]:
        unclosed = types.count(start) - types.count(end)
        assert unclosed == (1 if hook == closer else 0), (hook, types)
    assert types.count("TOOL_CALL_START") == types.count("TOOL_CALL_END") <= 1
    if hook in ("on_tool_start", "close_segment", "open_segment", "on_delta"):
        # The call's start never reached the client: nor does its result.
        assert "TOOL_CALL_START" not in types and "TOOL_CALL_RESULT" not in types
    error = ended[hook][-1]
    assert error["message"] == "run ended without completion: internal_error"


@pytest.mark.usefixtures("lenient")
def test_lenient_one_log_line_names_run_kind_and_place_not_the_payload(
    caplog: pytest.LogCaptureFixture,
) -> None:
    projector = broken("on_tool_start")(context("run-hook"))
    with caplog.at_level(logging.ERROR, logger="loopgate.projector"):
        out = project(projector)
        assert projector.feed(stream()[-1]) == [] and projector.close() == []
    assert projector.broken and projector.finished and type(out[-1]).__name__ == "RunError"
    [record] = caplog.records
    line = record.getMessage()
    assert "run-hook" in line and "tool_call_start (seq 5)" in line and "KeyError" in line
    assert "Broken_on_tool_start" in line and "test_hook_errors.py" in line
    assert SECRET not in caplog.text and record.exc_info is None


@pytest.mark.usefixtures("lenient")
def test_lenient_a_hook_failing_at_the_end_sends_what_it_had(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # on_truncated raises on close (the stream cut short): the parts still close, the
    # failure is logged once, nothing is raised.
    projector = broken("on_truncated")(context("run-hook"))
    with caplog.at_level(logging.ERROR, logger="loopgate.projector"):
        for envelope in stream()[:4]:
            projector.feed(envelope)
        closed = [type(m).__name__ for m in projector.close()]
        assert closed == ["TextMessageEnd", "StepFinished"] and projector.finished
    assert len(caplog.records) == 1 and "while ending the stream" in caplog.text


def test_a_malformed_payload_still_degrades_without_a_log(caplog: pytest.LogCaptureFixture) -> None:
    projector = AguiProjector(context("run-hook"))
    projector.start()
    foreign = Envelope("run-hook", 1, 1, "tool_call_start", {"id": 7, "name": ["x"]})
    not_an_object = Envelope("run-hook", 2, 2, "content_delta", [1, 2])  # type: ignore[arg-type]
    with caplog.at_level(logging.DEBUG, logger="loopgate.projector"):
        shown = projector.feed(foreign) + projector.feed(not_an_object)
    assert [type(e).__name__ for e in shown] == ["Custom", "Custom"]
    assert not caplog.records and not projector.broken
