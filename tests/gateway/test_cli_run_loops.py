"""``loopgate run`` takes the loop, model and tool flags ``serve`` takes, and runs them the same
way: a Python loop (--loop), the example loops as a child process (--loop-cmd) and over HTTP
(--loop-url), MCP servers, the demo tools; the model chosen from --openai-* alone."""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from loopgate.contracts import decode_envelope
from loopgate.gateway.cli import build_parser
from loopgate.gateway.settings import load_settings
from tests.examples.support import EXAMPLES, started_http_loop
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.servers import serve_app
from tests.gateway.cli_support import loopgate
from tests.gateway.harness import REPO
from tests.tools.conftest import FAKE_SERVER

RUN_ID = re.compile(r"run_[0-9a-f]{32}")


def run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return loopgate(cwd, "run", *args)


def _flags(command: str) -> dict[str, tuple[str | None, str | None]]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {
        flag: (action.dest, action.help)
        for action in sub.choices[command]._actions
        for flag in action.option_strings
    }


def test_run_has_every_loop_model_and_tool_flag_of_serve() -> None:
    serve, ran = _flags("serve"), _flags("run")
    shared = [
        "--loop", "--loop-url", "--loop-cmd", "--loop-token", "--provider", "--openai-base-url",
        "--openai-model", "--openai-text-tools", "--scripted-delay", "--tools", "--demo-tools",
        "--no-demo-tools", "--system-prompt", "--system-prompt-file", "--mcp", "--mcp-url",
    ]  # fmt: skip
    assert {f: ran.get(f) for f in shared} == {f: serve[f] for f in shared}


ASKING_LOOP = """
async def loop(ctx):
    call = {"id": "call_1", "name": "deploy", "arguments": {"to": "prod"}}
    yield {"kind": "tool_call_start", "data": call}
    decision = await ctx.ask_permission(call)
    yield {"kind": "content_delta", "data": {"delta": f"decision: {decision}"}}
    yield {"kind": "completion", "data": {"status": "completed", "reason": "stop"}}
"""


@pytest.mark.parametrize(("answer", "decision"), [("--yes", "allow_once"), ("--no", "reject_once")])
def test_run_a_python_loop_that_asks_permission(tmp_path: Path, answer: str, decision: str) -> None:
    (tmp_path / "asking.py").write_text(ASKING_LOOP)
    done = run(tmp_path, "--loop", "asking:loop", answer, "ship it")
    assert done.returncode == 0, done.stderr
    assert "→ deploy(" in done.stdout
    assert f"decision: {decision}" in done.stdout
    assert done.stdout.rstrip().endswith("— completed (stop)")


def test_run_the_example_pydantic_ai_agent() -> None:
    # As its docstring says to: from the repository root, which holds examples/.
    done = run(REPO, "--loop", "examples.pydantic_ai_agent:loop", "what is 25 * 16 + 2?")
    assert done.returncode == 0, done.stderr
    assert "← calculate ok" in done.stdout and "402" in done.stdout
    assert done.stdout.rstrip().splitlines()[-1].startswith("— completed (stop)")


def test_run_the_example_stdio_loop(tmp_path: Path) -> None:
    command = shlex.join([sys.executable, str(EXAMPLES / "plain_stdio_loop.py")])
    done = run(tmp_path, "--loop-cmd", command, "one two three")
    assert done.returncode == 0, done.stderr
    assert "→ count_words(" in done.stdout
    assert "You wrote 3 words: one two three" in done.stdout


def test_run_the_example_http_loop(tmp_path: Path) -> None:
    with started_http_loop() as loop:
        done = run(tmp_path, "--loop-url", loop.url, "--json", "one two")
    assert done.returncode == 0, done.stderr
    envelopes = [decode_envelope(line) for line in done.stdout.splitlines()]
    text = "".join(e.data["delta"] for e in envelopes if e.kind == "content_delta")
    assert "You wrote 2 words: one two" in text
    # The run id is the hub's, in the one format every run id has.
    assert len({e.run_id for e in envelopes}) == 1 and RUN_ID.fullmatch(envelopes[0].run_id)
    assert [e.seq for e in envelopes] == list(range(1, len(envelopes) + 1))


def test_run_a_loop_that_ends_without_a_completion_fails(tmp_path: Path) -> None:
    (tmp_path / "short.py").write_text(
        "async def loop(ctx):\n    yield {'kind': 'content_delta', 'data': {'delta': 'hi'}}\n"
    )
    done = run(tmp_path, "--loop", "short:loop", "hello")
    assert done.returncode == 1
    assert "— failed (loop_ended_early)" in done.stdout


def test_run_offers_an_mcp_servers_tools(tmp_path: Path) -> None:
    server = shlex.join([sys.executable, str(FAKE_SERVER)])
    # "client tool": the scripted model calls the first tool offered beyond the demo tools.
    done = run(tmp_path, "--mcp", server, "--no-demo-tools", "--scripted-delay", "0", "client tool")
    assert done.returncode == 0, done.stderr
    assert re.search(r"^→ \w+\(", done.stdout, re.M), done.stdout
    assert "→ ask_user(" not in done.stdout


def test_run_takes_demo_tools(tmp_path: Path) -> None:
    done = run(tmp_path, "--demo-tools", "--scripted-delay", "0", "What time is it?")
    assert done.returncode == 0, done.stderr
    assert "→ clock({})" in done.stdout


def test_run_with_json_mints_a_run_id_in_the_one_format(tmp_path: Path) -> None:
    done = run(tmp_path, "--json", "--scripted-delay", "0", "plain hello")
    assert done.returncode == 0, done.stderr
    assert {RUN_ID.fullmatch(decode_envelope(line).run_id) is not None for line in
            done.stdout.splitlines()} == {True}  # fmt: skip


# --- the model, from --openai-* alone -------------------------------------------------------


def test_an_openai_model_and_server_choose_the_openai_provider(tmp_path: Path) -> None:
    fake = FakeOpenAI()
    with serve_app(fake.app) as base:
        done = run(tmp_path, "--openai-base-url", f"{base}/v1", "--openai-model", "text", "hi")
    assert done.returncode == 0, done.stderr
    assert [r.body["model"] for r in fake.requests] == ["text"]


def test_the_scripted_provider_with_an_openai_model_is_refused(tmp_path: Path) -> None:
    done = run(tmp_path, "--provider", "scripted", "--openai-model", "gpt-4o-mini", "hi")
    assert done.returncode == 2
    assert done.stderr == (
        "loopgate run: --provider scripted does not use --openai-model: drop it, or choose "
        "--provider openai\n"
    )


def test_an_openai_model_without_a_server_says_which_flag_is_missing(tmp_path: Path) -> None:
    done = run(tmp_path, "--openai-model", "gpt-4o-mini", "hi")
    assert done.returncode == 2
    assert done.stderr == (
        "loopgate run: --openai-model names an OpenAI-compatible model; it also needs "
        "--openai-base-url (or LOOPGATE_OPENAI_BASE_URL)\n"
    )


def test_the_provider_in_each_layer() -> None:
    url, model = {"openai_base_url": "http://h/v1"}, {"openai_model": "m"}
    env = {"LOOPGATE_OPENAI_BASE_URL": "http://h/v1", "LOOPGATE_OPENAI_MODEL": "m"}
    assert load_settings({}).provider == "scripted"
    assert load_settings({}, {**url, **model}).provider == "openai"
    assert load_settings(env).provider == "openai"
    # A flag wins over a variable, either way round.
    assert load_settings(env, {"provider": "scripted"}).provider == "scripted"
    scripted_env = {"LOOPGATE_PROVIDER": "scripted"}
    assert load_settings(scripted_env, {**url, **model}).provider == "openai"
    with pytest.raises(ValueError, match="LOOPGATE_PROVIDER=scripted does not use LOOPGATE_"):
        load_settings({**scripted_env, **env})
    with pytest.raises(ValueError, match="--provider scripted does not use --openai-base-url"):
        load_settings({}, {"provider": "scripted", **url})
