"""benchmarks/openai_chunks.py at a tiny size: every path runs in every round and the paths
measure the same chunks (no timing is asserted)."""

from __future__ import annotations

import msgspec
import pytest

from benchmarks import openai_chunks
from benchmarks.agui_encode import pick_streams
from conformance.runner import stream_paths
from loopgate.adapters.openai import OpenAIAdapter


def test_the_paths_render_the_same_chunks() -> None:
    streams = [envelopes for _, envelopes in pick_streams(stream_paths())]
    dicts = openai_chunks.final_dicts(streams)
    adapter = OpenAIAdapter()
    rendered = b""
    for envelopes in streams:
        projector = adapter.projector(openai_chunks.context(envelopes))
        messages = projector.start()
        for envelope in envelopes:
            messages += projector.feed(envelope)
        rendered += adapter.render(messages + projector.close())
    lines = [line[6:] for line in rendered.split(b"\n\n") if line.startswith(b"data: {")]
    ours = [msgspec.json.decode(line) for line in lines if not line.startswith(b'{"error"')]
    # What the official and limit paths encode is what loopgate's path renders.
    assert ours == dicts and len(dicts) > 100
    assert openai_chunks.official_path(dicts)() == openai_chunks.limit_path(dicts)() == len(dicts)


def test_a_tiny_run_reports_every_path(capsys: pytest.CaptureFixture[str]) -> None:
    assert openai_chunks.main(["--seconds", "0.05", "--rounds", "2"]) == 0
    out = capsys.readouterr().out
    for path in ("loopgate live", "loopgate drain", "official (ChatCompletionChunk)", "limit"):
        assert path in out
    assert "target >= 5x" in out and "target <= 3x" in out
