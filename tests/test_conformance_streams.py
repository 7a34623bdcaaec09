"""Every recorded stream is a well-formed run: valid envelopes, gapless seq, one terminal."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopgate.contracts import decode_envelope, is_terminal_completion

STREAMS = Path(__file__).resolve().parent.parent / "conformance" / "streams"
PATHS = sorted(STREAMS.glob("*.jsonl"))
UNTERMINATED = {"truncated"}
REQUIRED = {
    "plain-answer",
    "reasoning-answer",
    "one-tool-round",
    "parallel-tools",
    "failing-tool",
    "tool-timeout",
    "max-rounds",
    "soft-timeout-wrap-up",
    "cancel-mid-text",
    "cancel-mid-tool",
    "provider-error",
    "steering",
    "hook-actions",
    "unknown-kinds-fields",
    "unicode-deltas",
    "big-tool-result",
    "truncated",
    "waiting-user",
    "client-tool",
    "tolerant-payloads",
    "seed-engine-budget",
}


def test_required_streams_exist():
    assert {p.stem for p in PATHS} >= REQUIRED


def test_readme_describes_every_stream():
    readme = (STREAMS / "README.md").read_text(encoding="utf-8")
    missing = [p.stem for p in PATHS if f"`{p.stem}`" not in readme]
    assert not missing


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.stem)
def test_stream_is_well_formed(path: Path):
    lines = path.read_bytes().splitlines()
    assert lines, "empty stream"
    envelopes = [decode_envelope(line) for line in lines]
    assert [e.seq for e in envelopes] == list(range(1, len(envelopes) + 1))
    assert {e.run_id for e in envelopes} == {path.stem}
    ts = [e.ts for e in envelopes]
    assert ts == sorted(ts) and ts[0] > 1_600_000_000 * 10**9  # realistic unix ns
    terminals = [i for i, e in enumerate(envelopes) if is_terminal_completion(e.kind, e.data)]
    if path.stem in UNTERMINATED:
        assert terminals == []
    else:
        assert terminals == [len(envelopes) - 1]


def _load(name: str):
    return [decode_envelope(line) for line in (STREAMS / f"{name}.jsonl").read_bytes().splitlines()]


def _kinds(name: str) -> list[str]:
    return [e.kind for e in _load(name)]


@pytest.mark.parametrize(
    ("name", "kind", "status"),
    [
        ("plain-answer", "content_delta", "completed"),
        ("reasoning-answer", "reasoning_delta", "completed"),
        ("failing-tool", "tool_call_result", "completed"),
        ("tool-timeout", "tool_call_result", "completed"),
        ("max-rounds", "budget_exhausted", "budget_exhausted"),
        ("soft-timeout-wrap-up", "soft_timeout", "completed"),
        ("cancel-mid-text", "content_delta", "cancelled"),
        ("cancel-mid-tool", "tool_call_start", "cancelled"),
        ("provider-error", "error", "failed"),
        ("steering", "steer", "completed"),
        ("hook-actions", "hook_action", "completed"),
        ("waiting-user", "tool_call_result", "waiting_user"),
        ("client-tool", "tool_call_start", "waiting_user"),
    ],
)
def test_stream_covers_its_case(name: str, kind: str, status: str):
    envelopes = _load(name)
    assert kind in [e.kind for e in envelopes]
    assert envelopes[-1].data["status"] == status


def test_specific_contents():
    parallel = [e for e in _load("parallel-tools") if e.kind == "tool_call_start"]
    assert len({e.data["round"] for e in parallel}) == 1 and len(parallel) == 2
    big = next(e for e in _load("big-tool-result") if e.kind == "tool_call_result")
    assert len(big.data["result"]) >= 1_000_000
    text = "".join(e.data["delta"] for e in _load("unicode-deltas") if e.kind == "content_delta")
    assert "🚀" in text and "\n" in text and "日本語" in text
    client = _load("client-tool")[-1].data
    assert client["pendingToolCallIds"]
    unknown = _kinds("unknown-kinds-fields")
    assert {"x_memory_recall", "vendor.progress", "tool_progress", "x_audit"} <= set(unknown)
    timeout = next(e for e in _load("tool-timeout") if e.kind == "tool_call_result")
    assert timeout.data["error"] == "timed out after 200 ms"
    actions = {e.data["action"] for e in _load("hook-actions") if e.kind == "hook_action"}
    assert actions == {"proceed", "continue", "retry", "narrate"}
