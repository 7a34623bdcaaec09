"""The AG-UI goldens: byte-for-byte what the projector produces for each recorded stream."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.runner import (
    EXPECTED,
    golden_path,
    regenerate_command,
    render_golden,
    stream_paths,
)
from tests.agui.agui_streams import ROOT

TARGET = "agui"
HOW = f"regenerate (after reviewing the change) with: cd {ROOT} && {regenerate_command(TARGET)}"


@pytest.mark.parametrize("stream", stream_paths(), ids=lambda p: p.stem)
def test_golden_matches(stream: Path) -> None:
    path = golden_path(TARGET, stream)
    assert path.exists(), f"no golden {path.relative_to(ROOT)}; {HOW}"
    expected = path.read_bytes().splitlines()
    actual = render_golden(TARGET, stream).splitlines()
    for number, (want, got) in enumerate(zip(expected, actual, strict=False), start=1):
        assert got == want, f"{path.name}:{number} differs\n want {want!r}\n  got {got!r}\n{HOW}"
    assert len(actual) == len(expected), f"{path.name}: line count differs; {HOW}"


def test_no_stale_goldens() -> None:
    streams = {p.stem for p in stream_paths()}
    stale = [p.name for p in (EXPECTED / TARGET).glob("*.jsonl") if p.stem not in streams]
    assert not stale, f"goldens without a stream: {stale}; {HOW}"
