"""ag-ui-validate (the AG-UI conformance rules, PyPI ``ag-ui-validate``) over our AG-UI output:
every recording and every synthetic stream, for both client generations, with no error."""

from __future__ import annotations

from typing import Any

import pytest
from ag_ui_validate.pytest_plugin import validate_agui

from conformance.runner import TARGETS, load_stream, stream_paths
from loopgate.contracts.projector import as_served
from tests.agui.agui_streams import Stream, all_streams, project

VERSIONS = [TARGETS["agui"].protocol_version, None]


def errors(events: list[dict[str, Any]]) -> list[str]:
    report = validate_agui(events)
    assert not report.internal_errors, report.internal_errors
    return [
        f"{d.rule} @{d.event_index}: {d.message}"
        for d in report.diagnostics
        if d.severity == "error"
    ]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("stream", stream_paths(), ids=lambda p: p.stem)
def test_every_recording_is_valid_ag_ui(stream: Any, version: Any) -> None:
    recorded = load_stream(stream)
    assert errors(project(recorded, version)) == []
    # As a live subscriber gets it (a recording cut short ends as the hub ends it).
    assert errors(project(as_served(recorded), version)) == []


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", sorted(all_streams()))
def test_every_synthetic_stream_is_valid_ag_ui(name: str, version: Any) -> None:
    assert errors(project(all_streams()[name], version)) == []


def test_an_orphan_result_is_valid_and_the_validator_would_see_one() -> None:
    orphan = Stream().add("tool_call_result", id="c9", name="lookup", success=True)
    events = project(orphan.add("completion", status="completed").envelopes)
    assert errors(events) == []
    # Guard against a validator that passes everything: the result alone is AGUI207.
    bare = [
        e
        for e in events
        if not (e["type"].startswith("TOOL_CALL") and e["type"] != "TOOL_CALL_RESULT")
    ]
    assert [line.split()[0] for line in errors(bare)] == ["AGUI207"]
