"""A smoke run of benchmarks/attachments.py at a tiny size: every path handles the attachment
and the report has its table and ratio. No timing is asserted."""

from __future__ import annotations

import base64

import pytest

from benchmarks import attachments


def test_every_path_handles_the_attachment() -> None:
    data, encoded = attachments.build(0.01)
    size = len(base64.b64decode(data))
    assert size == int(0.01 * (1 << 20))
    assert {name: fn() for name, fn in attachments.paths(data, encoded).items()} == {  # type: ignore[operator]
        "check": size,
        "decode": size,
        "json decode": size,
    }


def test_the_report(capsys: pytest.CaptureFixture[str]) -> None:
    assert attachments.main(["--mb", "0.01", "--seconds", "0.1", "--rounds", "2"]) == 0
    out = capsys.readouterr().out
    assert "attachment of 0.01 MiB" in out and "check / decode, time:" in out
