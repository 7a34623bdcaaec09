"""`loopgate replay`: an adapter's wire bytes for a recording, or the recording as a live run."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from httpx_sse._decoders import SSEDecoder

from tests.gateway.harness import REPO, running_gateway
from tests.gateway.sse_client import envelopes, read_stream

RECORDING = REPO / "conformance" / "streams" / "parallel-tools.jsonl"


def replay(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "loopgate", "replay", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("name", ["native", "sse"])  # sse: the native adapter's former name
def test_native_adapter_output_is_the_recording_as_an_event_stream(name: str) -> None:
    result = replay(str(RECORDING), "--adapter", name)
    assert result.returncode == 0, result.stderr
    decoder = SSEDecoder()
    # A blank line with no data pending dispatches nothing (WHATWG: an empty data buffer).
    events = [e for line in result.stdout.split("\n") if (e := decoder.decode(line)) and e.data]
    recorded = [json.loads(line) for line in RECORDING.read_text().splitlines()]
    assert [json.loads(e.data) for e in events] == recorded
    # Unnamed: an EventSource dispatches every one as "message", whatever its kind.
    assert {e.event for e in events} == {"message"}
    assert "event:" not in result.stdout


def test_replay_into_a_server_makes_a_live_run() -> None:
    with running_gateway() as (base, _):
        result = replay(str(RECORDING), "--server", base)
        assert result.returncode == 0, result.stderr
        run_id = result.stdout.strip()
        streamed = envelopes(read_stream(base, run_id))
    recorded = [json.loads(line) for line in RECORDING.read_text().splitlines()]
    assert [(e["kind"], e["data"]) for e in streamed] == [(r["kind"], r["data"]) for r in recorded]


def test_errors_are_clear(tmp_path: Path) -> None:
    assert "native" in replay("--list").stdout.split()
    missing = replay(str(tmp_path / "nope.jsonl"), "--adapter", "native")
    assert missing.returncode == 2
    assert missing.stderr.startswith(f"loopgate replay: no file '{tmp_path / 'nope.jsonl'}'")
    assert "recordings: attachments, big-tool-result," in missing.stderr
    folder = replay(str(tmp_path), "--adapter", "native")
    assert folder.stderr == f"loopgate replay: cannot read {tmp_path}: is a directory\n"
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"run_id":"r","seq":1,"ts":1,"kind":"content_delta","data":[1]}\n')
    broken = replay(str(bad), "--adapter", "native")
    assert broken.returncode == 2 and "bad.jsonl line 1" in broken.stderr
    unknown = replay(str(RECORDING), "--adapter", "carrier-pigeon")
    assert unknown.returncode == 2 and "no adapter 'carrier-pigeon'" in unknown.stderr
    assert "Traceback" not in missing.stderr + broken.stderr + unknown.stderr


def test_a_recording_that_comes_with_loopgate_is_replayed_by_name(tmp_path: Path) -> None:
    by_name = subprocess.run(
        [sys.executable, "-m", "loopgate", "replay", "parallel-tools", "--adapter", "native"],
        cwd=tmp_path,  # nowhere near the checkout's conformance/ folder
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert by_name.returncode == 0, by_name.stderr
    assert by_name.stdout == replay(str(RECORDING), "--adapter", "native").stdout


def test_goldens_are_what_replay_prints(capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    """conformance/expected/<target>/ is `loopgate replay STREAM --adapter … --messages`."""
    from conformance.runner import TARGETS, golden_path, stream_paths
    from loopgate.gateway.cli import main

    assert set(TARGETS) >= {"agui", "acp", "jsonrpc"}
    for target, spec in TARGETS.items():
        for stream in stream_paths():
            args = [str(stream), "--adapter", target, "--messages"]
            if spec.protocol_version is not None:
                args += ["--protocol-version", str(spec.protocol_version)]
            assert main(["replay", *args]) == 0
            printed = capsysbinary.readouterr().out
            assert printed == golden_path(target, stream).read_bytes(), (target, stream.name)


def test_a_server_that_is_not_a_url_or_not_there_is_one_clear_line() -> None:
    with socket.socket() as probe:  # a port nothing listens on: bound, never listening
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        cases = [
            ("localhost:8000", 2, "--server must be an http:// or https:// URL"),
            (f"http://127.0.0.1:{port}", 1, "cannot reach the gateway at http://127.0.0.1:"),
        ]
        for server, code, says in cases:
            result = replay(str(RECORDING), "--server", server)
            assert result.returncode == code
            assert result.stdout == ""
            assert result.stderr.count("\n") == 1 and says in result.stderr, result.stderr
            assert "Traceback" not in result.stderr
