"""``loopgate run`` end to end, in a subprocess."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from loopgate.contracts import decode_envelope
from loopgate.gateway.commands.run import parse_config
from tests.reference.loop_support import loopgate_run as loopgate


def test_plain_output(tmp_path: Path):
    proc = loopgate("What time is it, and what is 3 + 4?", "--scripted-delay", "0", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "thinking: " in out
    assert "→ clock({})" in out and "← calculate ok" in out
    assert "3 + 4 = 7" in out
    assert (
        out.strip().splitlines()[-1].startswith("— completed (stop) · 2 round(s) · 2 tool call(s)")
    )


def test_json_output_is_ndjson_envelopes(tmp_path: Path):
    proc = loopgate(
        "plain hello", "--json", "--run-id", "r1", "--scripted-delay", "0", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    envs = [decode_envelope(line) for line in proc.stdout.splitlines()]
    assert [e.seq for e in envs] == list(range(1, len(envs) + 1))
    assert {e.run_id for e in envs} == {"r1"}
    assert all(e.ts > 1_600_000_000 * 10**9 for e in envs)
    assert envs[-1].kind == "completion" and envs[-1].data["status"] == "completed"


def test_failed_exit_code_and_config(tmp_path: Path):
    proc = loopgate(
        "fail tool", "--config", "max_tool_errors=1", "--scripted-delay", "0", cwd=tmp_path
    )
    assert proc.returncode == 1
    assert "— failed" in proc.stdout


def test_max_rounds_flag(tmp_path: Path):
    proc = loopgate("forever", "--json", "--max-rounds", "2", "--scripted-delay", "0", cwd=tmp_path)
    last = decode_envelope(proc.stdout.splitlines()[-1])
    assert last.data["status"] == "budget_exhausted" and proc.returncode == 1


def test_bad_config_is_a_usage_error(tmp_path: Path):
    proc = loopgate("x", "--config", "max_rounds=0", cwd=tmp_path)
    assert proc.returncode == 2
    assert "max_rounds must be positive" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_parse_config():
    cfg = parse_config(['{"max_rounds": 4}', "budget=100", "tool_dedup=false"], None)
    assert (cfg.max_rounds, cfg.budget, cfg.tool_dedup) == (4, 100, False)
    assert parse_config([], 7).max_rounds == 7
    with pytest.raises(ValueError, match="KEY=VALUE"):
        parse_config(["oops"], None)


def test_ctrl_c_cancels_cleanly(tmp_path: Path):
    proc = subprocess.Popen(
        [sys.executable, "-m", "loopgate", "run", "forever", "--json", "--scripted-delay", "0.05"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if '"reasoning_delta"' in line:
            break
    proc.send_signal(signal.SIGINT)
    rest, err = proc.communicate(timeout=10)
    lines += rest.splitlines()
    assert proc.returncode == 130, err
    last = decode_envelope(lines[-1])
    assert last.kind == "completion" and last.data["status"] == "cancelled"
    assert "Traceback" not in err


def test_dash_reads_the_prompt_from_stdin(tmp_path: Path):
    proc = loopgate("-", "--scripted-delay", "0", cwd=tmp_path, stdin="plain: what is 6 * 7 + 0?\n")
    assert proc.returncode == 0, proc.stderr
    assert "“plain what is 6 7 0”" in proc.stdout  # the scripted echo of its topic words


@pytest.mark.parametrize(("prompt", "stdin"), [("   ", ""), ("-", ""), ("-", "\n \n")])
def test_an_empty_prompt_is_a_usage_error(tmp_path: Path, prompt: str, stdin: str):
    proc = loopgate(prompt, "--scripted-delay", "0", cwd=tmp_path, stdin=stdin)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("loopgate run: the prompt is empty")


def test_a_refused_write_says_how_to_allow_it(tmp_path: Path):
    refused = loopgate(
        "write note hello", "--scripted-delay", "0", "--workspace", str(tmp_path), cwd=tmp_path
    )
    assert "write_note needs approval and was refused; --yes allows it" in refused.stderr
    assert not (tmp_path / "notes").exists()
    allowed = loopgate(
        "write note hello",
        "--scripted-delay",
        "0",
        "--workspace",
        str(tmp_path),
        "--yes",
        cwd=tmp_path,
    )
    assert allowed.stderr == "" and any((tmp_path / "notes").iterdir())
