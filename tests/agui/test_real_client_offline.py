"""Our AG-UI output through the real JS client (@ag-ui/client 1.0.0), offline.

tests/node/agui-verify.mjs replays each run through the client's own operators (enforceEvents →
transformChunks → verifyEvents), a full AbstractAgent.runAgent(), and @ag-ui/core's zod
EventSchemas. Any error or console warning fails the run. Needs ``npm ci`` in tests/node.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import msgspec
import pytest

from conformance.runner import TARGETS, encode_lines, load_stream, stream_paths
from tests.agui.agui_streams import Stream, all_streams, project
from tests.node_clients import NODE_DIR, node_clients

VERIFY = NODE_DIR / "agui-verify.mjs"


def run_verifier(files: list[Path]) -> dict[str, Any]:
    proc = subprocess.run(
        [node_clients(), str(VERIFY), *map(str, files)],
        cwd=NODE_DIR,
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert proc.stdout, f"verifier printed nothing (rc={proc.returncode}): {proc.stderr!r}"
    summary = json.loads(proc.stdout)
    assert (proc.returncode == 0) == summary["ok"], proc.stderr
    return summary


def write_runs(tmp_path: Path, runs: dict[str, list[dict[str, Any]]]) -> list[Path]:
    files = []
    for name, events in runs.items():
        path = tmp_path / f"{name}.jsonl"
        path.write_bytes(encode_lines(events))
        files.append(path)
    return files


def assert_clean(summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    by_name = {Path(r["file"]).stem: r for r in summary["results"]}
    failures = {
        name: {"errors": r["errors"], "warnings": r["warnings"]}
        for name, r in by_name.items()
        if not r["ok"]
    }
    assert not failures, json.dumps(failures, indent=1)
    for name, result in by_name.items():
        assert result["passed"] == result["events"], name
        assert result["terminal"] in ("RUN_FINISHED", "RUN_ERROR"), name
    return by_name


@pytest.fixture(scope="module")
def synthetic_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("agui-runs")
    runs = {}
    for name, envelopes in all_streams().items():
        runs[f"{name}@1.0"] = project(envelopes, "1.0")
        runs[f"{name}@none"] = project(envelopes, None)
    return assert_clean(run_verifier(write_runs(tmp, runs)))


def test_synthetic_streams_pass_the_real_client(synthetic_results: dict[str, Any]) -> None:
    assert len(synthetic_results) == 2 * len(all_streams())


@pytest.mark.parametrize(
    ("name", "outcome"),
    [
        ("completed@1.0", "success"),
        ("cancelled@1.0", "cancelled"),
        ("interrupt@1.0", "interrupt"),
        ("client_tool@1.0", "success"),
        ("budget@1.0", "success"),
        ("failed@1.0", "error"),
        ("truncated@1.0", "error"),
        ("cancelled@none", "success"),  # a pre-1.0 client has no cancelled outcome
    ],
)
def test_the_client_reads_the_outcome_we_meant(
    synthetic_results: dict[str, Any], name: str, outcome: str
) -> None:
    assert synthetic_results[name]["outcome"] == outcome


def test_the_client_sees_pending_frontend_calls(synthetic_results: dict[str, Any]) -> None:
    assert synthetic_results["client_tool@1.0"]["pendingToolCallIds"] == ["ui-1", "ui-2"]
    assert synthetic_results["interrupt@1.0"]["interrupts"] == 1


def test_reasoning_and_text_stay_separate_messages(synthetic_results: dict[str, Any]) -> None:
    assert synthetic_results["completed@1.0"]["messages"] == [
        "reasoning",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]


def test_conformance_streams_pass_the_real_client(tmp_path: Path) -> None:
    version = TARGETS["agui"].protocol_version
    runs = {}
    for stream in stream_paths():
        envelopes = load_stream(stream)
        runs[f"{stream.stem}@{version}"] = project(envelopes, version)
        runs[f"{stream.stem}@none"] = project(envelopes, None)
    assert len(runs) >= 40, "conformance/streams/ lost its recordings"
    assert_clean(run_verifier(write_runs(tmp_path, runs)))


def test_the_verifier_catches_what_the_client_rejects(tmp_path: Path) -> None:
    """Guard against a verifier that passes everything."""
    good = project(Stream().add("content_delta", delta="hi").envelopes)
    bad = {
        "null_optional": [{**good[0], "protocolVersion": None}, *good[1:]],
        "float_timestamp": [good[0], {**good[1], "timestamp": 1.5}, *good[2:]],
        "unknown_field": [{**good[0], "loopgateExtra": 1}, *good[1:]],
        "finished_while_open": [
            *good[:-3],
            {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
        ],
        "no_terminal": good[:-1],
        "thinking_events": [good[0], {"type": "THINKING_START"}, *good[1:]],
    }
    summary = run_verifier(write_runs(tmp_path, bad))
    assert not summary["ok"]
    results = {Path(r["file"]).stem: r for r in summary["results"]}
    for name in bad:
        assert not results[name]["ok"], f"{name} passed: {results[name]}"
    assert any("Removed unrecognised" in w for w in results["unknown_field"]["warnings"])
    assert msgspec.json.encode(results["null_optional"]["errors"])
