"""Every event we emit validates as the official Python models (ag-ui-protocol 1.0.0) read it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pydantic
import pytest
from ag_ui.core import Event, RunFinishedEvent

from conformance.runner import EXPECTED, TARGETS, load_stream, stream_paths
from tests.agui.agui_streams import all_streams, project

EVENT = pydantic.TypeAdapter(Event)
SYNTHETIC = all_streams()
GOLDENS = sorted((EXPECTED / "agui").glob("*.jsonl"))


def validate(events: list[dict[str, Any]]) -> None:
    for index, raw in enumerate(events):
        model = EVENT.validate_python(raw)
        # extra="allow" would accept misspelt keys silently: a model must see no extras, and
        # serialising it back must give exactly what we sent.
        assert not model.model_extra, f"event {index}: unknown fields {model.model_extra}"
        assert model.model_dump(mode="json", by_alias=True) == raw, f"event {index} changed"


@pytest.mark.parametrize("version", ["1.0", None])
@pytest.mark.parametrize("name", sorted(SYNTHETIC))
def test_synthetic_streams_validate(name: str, version: str | None) -> None:
    validate(project(SYNTHETIC[name], version))


@pytest.mark.parametrize("stream", stream_paths(), ids=lambda p: p.stem)
@pytest.mark.parametrize("version", ["1.0", None])
def test_conformance_streams_validate(stream: Path, version: str | None) -> None:
    validate(project(load_stream(stream), version))


@pytest.mark.parametrize("golden", GOLDENS, ids=lambda p: p.stem)
def test_goldens_validate(golden: Path) -> None:
    validate([msgspec.json.decode(line) for line in golden.read_bytes().splitlines()])


def test_outcomes_parse_into_their_typed_models() -> None:
    for name, kind in [("cancelled", "cancelled"), ("interrupt", "interrupt")]:
        finished = EVENT.validate_python(project(SYNTHETIC[name])[-1])
        assert isinstance(finished, RunFinishedEvent)
        assert finished.outcome is not None and finished.outcome.type == kind
    assert TARGETS["agui"].protocol_version is not None
