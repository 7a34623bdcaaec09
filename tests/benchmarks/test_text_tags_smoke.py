"""A smoke run of benchmarks/text_tags.py at a tiny size: the stream it builds has every shape,
the parser finds every tool call in it, and every path reports figures. No timing is
asserted."""

from __future__ import annotations

import random

import pytest

from benchmarks import text_tags


def test_the_stream_has_every_shape_and_every_call_is_found() -> None:
    rng = random.Random(7)
    texts = text_tags.replies(60_000, rng)
    streams = [text_tags.cut(t, rng, 4, 40) for t in texts]
    assert all(4 <= len(d) <= 40 for s in streams for d in s[:-1])
    assert ["".join(s) for s in streams] == texts
    joined = "".join(texts)
    assert "<think>" in joined and "</tool_call>" in joined and "<div" in joined
    assert any(t.rstrip().endswith("}") and "<tool_call>" in t for t in texts)  # unclosed
    found = text_tags.census(streams)
    assert found["calls"] == joined.count("<tool_call>") > 0
    assert found["reasoning"] > 0 and found["text"] > 0 and found["tags in text"] == 0


@pytest.mark.parametrize("dense", [False, True])
def test_every_path_reports(capsys: pytest.CaptureFixture[str], dense: bool) -> None:
    args = ["--mb", "0.05", "--seconds", "0.2", "--rounds", "2"]
    assert text_tags.main(args + (["--dense"] if dense else [])) == 0
    out = capsys.readouterr().out
    for path in ("parser", "provider on", "provider off", "re (whole)", "target >= 50"):
        assert path in out
    assert " 0 <tool_call> left in the text" in out
