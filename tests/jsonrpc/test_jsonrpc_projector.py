"""The sans-IO projector and the conformance goldens (conformance/expected/jsonrpc/).

Regenerate the goldens after re-recording streams:
``python -m tests.jsonrpc.test_jsonrpc_projector``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from conformance.runner import EXPECTED, encode_lines, load_stream, project_stream, stream_paths
from loopgate.adapters.jsonrpc import ADAPTER, JsonRpcProjector
from loopgate.contracts.envelope import Envelope
from loopgate.contracts.projector import ProjectorContext, as_served

GOLDENS = EXPECTED / "jsonrpc"


def golden_bytes(stream: Path) -> bytes:
    return encode_lines(project_stream(ADAPTER, as_served(load_stream(stream))))


@pytest.mark.parametrize("stream", stream_paths(), ids=lambda p: p.stem)
def test_golden(stream: Path) -> None:
    path = GOLDENS / f"{stream.stem}.jsonl"
    assert path.exists(), "missing golden: python -m tests.jsonrpc.test_jsonrpc_projector"
    assert path.read_bytes() == golden_bytes(stream), (
        "golden differs: python -m tests.jsonrpc.test_jsonrpc_projector"
    )


def test_no_stale_goldens() -> None:
    assert {p.stem for p in GOLDENS.glob("*.jsonl")} == {p.stem for p in stream_paths()}


@pytest.mark.parametrize("stream", stream_paths(), ids=lambda p: p.stem)
def test_every_event_once_then_one_end(stream: Path) -> None:
    envelopes = load_stream(stream)
    messages = project_stream(ADAPTER, envelopes)
    assert [m["params"]["event"] for m in messages[:-1]] == [
        {"run_id": e.run_id, "seq": e.seq, "ts": e.ts, "kind": e.kind, "data": e.data}
        for e in envelopes
    ]
    end = messages[-1]
    assert end["method"] == "run.end" and end["params"]["lastSeq"] == envelopes[-1].seq
    assert all(m["jsonrpc"] == "2.0" and "id" not in m for m in messages)
    assert {m["params"]["subscription"] for m in messages} == {"sub_1"}


def env(seq: int, kind: str, **data: object) -> Envelope:
    return Envelope("r1", seq, 0, kind, dict(data))


def test_terminal_end_and_nothing_after() -> None:
    p = JsonRpcProjector(
        ProjectorContext(run_id="r1", thread_id="t", options={"subscription": "s9"})
    )
    assert p.start() == []
    assert len(p.feed(env(1, "completion", status="executing"))) == 1  # not terminal
    out = p.feed(env(2, "completion", status="cancelled"))
    assert [m.method for m in out] == ["run.event", "run.end"]
    assert out[1].params == {
        "subscription": "s9",
        "runId": "r1",
        "status": "cancelled",
        "lastSeq": 2,
    }
    assert p.feed(env(3, "content_delta", delta="late")) == []
    assert p.close("disconnect") == []


def test_close_without_a_terminal_event() -> None:
    p = JsonRpcProjector(ProjectorContext(run_id="r1", thread_id="t"))
    p.feed(env(1, "x_vendor_kind", anything=[1, {"a": None}]))
    (end,) = p.close(None)
    assert end.params == {
        "subscription": "sub_1",
        "runId": "r1",
        "status": "failed",
        "lastSeq": 1,
        "reason": "truncated",
    }


def test_render_is_one_json_message_per_line() -> None:
    p = JsonRpcProjector(ProjectorContext(run_id="r1", thread_id="t"))
    rendered = ADAPTER.render(p.feed(env(1, "completion", status="completed", text="a\nb")))
    lines = rendered.split(b"\n")
    assert len(lines) == 3 and lines[-1] == b""


def write_goldens() -> None:
    GOLDENS.mkdir(parents=True, exist_ok=True)
    names = set()
    for stream in stream_paths():
        names.add(stream.stem)
        (GOLDENS / f"{stream.stem}.jsonl").write_bytes(golden_bytes(stream))
    for stale in GOLDENS.glob("*.jsonl"):
        if stale.stem not in names:
            stale.unlink()


if __name__ == "__main__":
    write_goldens()
    sys.exit(0)


@pytest.mark.parametrize("stream", stream_paths(), ids=lambda p: p.stem)
def test_the_live_fast_path_encodes_the_same_bytes(stream: Path) -> None:
    from loopgate.adapters.jsonrpc.protocol import encode

    def projector() -> JsonRpcProjector:
        return JsonRpcProjector(
            ProjectorContext(run_id="r", thread_id="r", options={"subscription": 'sub_"7'})
        )

    slow, fast = projector(), projector()
    for envelope in load_stream(stream):
        assert fast.feed_encoded(envelope) == [encode(m) for m in slow.feed(envelope)]
