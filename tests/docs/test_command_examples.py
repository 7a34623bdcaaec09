"""Every shell command in README.md and the docs runs as written (issue 16).

Each doc's commands run in order, for real, with bash, as a reader pastes them into one
terminal: variables a command sets (``export``, ``RUN=$(…)``) reach the commands after it. The
working directory is the repository root — a scratch copy of it, whose entries are symlinks to
the checkout's, so that files a command writes (``secrets/``, a database) stay out of the
checkout; the files a doc asks the reader to write (``# my_loop.py``) are written there first.
``.venv/bin`` is first on the PATH, as after ``source .venv/bin/activate``: the README says
plain ``loopgate`` is then the command the docs write.

What is rewritten, and nothing else:

- ``localhost:8000`` / ``127.0.0.1:8000`` → a free port, the doc's gateway; every ``loopgate
  serve`` of the doc listens there (``LOOPGATE_PORT``);
- ``./scripts/loopgate`` → ``.venv/bin/loopgate`` (the script installs into .venv, then runs it);
- ``RUN_ID`` → the run id in the output of the last command that printed one;
- an OpenAI-compatible server's URL (OpenAI's, Ollama's) → the fake one of tests/fakes (a
  substitution: no key, no network, no model here), which answers every model name with its
  ``text`` scenario;
- the Redis the docs name (``redis://127.0.0.1:6379/0``) → a redis-server of the test's own
  (tests/fakes/redis_server.py), so that a machine without one on 6379 runs the doc too, and
  one with it keeps its keys; the PostgreSQL they name
  (``postgresql://postgres@127.0.0.1:5432/postgres``) → a postgres of the test's own
  (tests/fakes/postgres_server.py), in a schema of the doc's own.

``loopgate serve …`` is started, must answer ``/healthz``, and keeps running for the doc's
commands after it until the next ``serve`` (or the doc's end) stops it with SIGINT, on which it
must exit by itself (0, or 130 as after Ctrl-C). A doc whose commands talk to a gateway before
any ``serve`` gets a plain ``loopgate serve``, as the README starts one. ``loopgate acp`` /
``loopgate rpc`` with nothing on stdin must answer a first request. A command ending in ``&``
runs in the background until the doc's end and must print its first line. Every other command
must exit 0 and, where the doc shows its output, print output of that shape
(tests/docs/output_shapes.py); where it shows none, it must not print an error answer (``curl
-s`` exits 0 on a 404).

Commands that cannot run here are in NOT_RUN with the reason; a command neither run nor there
fails its doc's test, and so does an entry no doc has any more.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import IO

import httpx
import pytest
from starlette.types import ASGIApp, Receive, Scope, Send

from tests.docs.doc_commands import Command, doc_commands, doc_files
from tests.docs.output_shapes import error_answer, expected_output, output_mismatch
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.postgres_server import postgres_server
from tests.fakes.redis_server import redis_server
from tests.fakes.servers import serve_app
from tests.gateway.harness import REPO, free_port

DOCS = sorted(
    {
        REPO / "README.md",
        *(REPO / "docs").glob("*.md"),
        *(REPO / "conformance").glob("*/README.md"),
    }
)
DOC_PORT = re.compile(r"\b(localhost|127\.0\.0\.1):8000\b")
# The OpenAI-compatible servers the docs name; each is replaced by the fake one.
OPENAI_COMPATIBLE = ("https://api.openai.com/v1", "http://127.0.0.1:11434/v1")
DOC_REDIS = "redis://127.0.0.1:6379/0"
DOC_POSTGRES = "postgresql://postgres@127.0.0.1:5432/postgres"
LONG_RUNNING = re.compile(
    r"^(?:[A-Za-z_]\w*=\S*\s+)*(?:\S*/)?loopgate\s+(?P<command>serve|acp|rpc)\b(?P<rest>.*)$"
)
# A run's id in a command's output: its "run_id" / "runId", or an "id" that is a run's.
RUN_ID_IN_OUTPUT = re.compile(r'"(?:run_id|runId)"\s*:\s*"([^"]+)"|"id"\s*:\s*"(run_[^"]+)"')
# The first request a stdio server started with nothing on stdin must answer.
STDIO_PROBES = {
    "rpc": b'{"jsonrpc":"2.0","id":0,"method":"rpc.discover"}\n',
    "acp": b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}\n',
}
COMMAND_TIMEOUT_S = 180
START_TIMEOUT_S = 60  # an MCP server fetched by npx on first use takes a while
STOP_TIMEOUT_S = 20
SCRATCH_SKIP = {".git", "build", "dist"}

_LONG = "{took} on two cores, over the ~20 s a benchmark may take here; {smaller}"
_SMOKE = "tests/benchmarks/test_{}_smoke.py runs it at tiny sizes"
_QUICK = "the section's --quick line runs here"
_RUN_BY_SMOKE = "{took} on two cores; tests/benchmarks/test_{smoke}_smoke.py runs it at tiny sizes"
_NO_SMALLER = "the doc gives no size under two minutes"
_TARGETS = (
    "exits 1 when a ratio it measures misses its target, which depends on the machine's load "
    "(12 s); tests/benchmarks/test_in_process_smoke.py runs it at tiny sizes"
)
_SUITE = "runs the whole suite, this test included"
_INSTALLS_INTO_VENV = (
    "installs into the active environment: here the suite's own .venv, an editable install of "
    "this checkout that it would replace (tests/packaging/test_wheel.py installs the wheel into "
    "a fresh venv)"
)
_NO_DOCKER = "no Docker daemon where the suite runs (docs/deploy.md says so)"
_PLUGIN_PROJECT = (
    "a plugin author's project next to a checkout, with a venv of its own: "
    "tests/packaging/test_without_symlinks.py makes one and runs these there (here the venv "
    "would be the suite's own .venv)"
)
_ACPX = (
    "needs acpx, which the line before installs globally; tests/acp/test_acp_node_client.py "
    "drives `loopgate acp` with the ACP SDK's own client instead"
)
_LANGFUSE = "sends traces to cloud.langfuse.com: the network, and a Langfuse project's keys"

# (doc, command as Command.key has it) → why it does not run here.
NOT_RUN: dict[tuple[str, str], str] = {
    ("README.md", "pip install ."): _INSTALLS_INTO_VENV,
    ("README.md", "./scripts/test"): _SUITE,
    ("docs/reliability.md", "./scripts/test-under-load"): f"{_SUITE}, five times",
    ("docs/acp.md", "npm install -g acpx@0.19.1"): "a global npm install",
    ("docs/acp.md", "acpx --agent 'loopgate acp' exec 'one tool: what is 17 times 23'"): _ACPX,
    ("docs/acp.md", "acpx --approve-all --agent 'loopgate acp' exec 'write note hello'"): _ACPX,
    ("docs/acp.md", "acpx --agent 'loopgate acp' sessions new"): _ACPX,
    ("docs/acp.md", "acpx --ttl 30 --agent 'loopgate acp' 'plain hello there'"): _ACPX,
    ("docs/acp.md", "acpx --ttl 30 --agent 'loopgate acp' 'one tool: 2 and 3'"): _ACPX,
    ("docs/acp.md", "acpx --agent 'loopgate acp' sessions list"): _ACPX,
    (
        "docs/telemetry.md",
        "docker run --rm -d -p 16686:16686 -p 4318:4318 -e COLLECTOR_OTLP_ENABLED=true "
        "jaegertracing/all-in-one:latest",
    ): f"{_NO_DOCKER}; the gateway after it starts anyway and exports to nothing",
    ("docs/telemetry.md", "docker run --rm -d -p 6006:6006 arizephoenix/phoenix:latest"): (
        f"{_NO_DOCKER}; the gateway after it starts anyway and exports to nothing"
    ),
    (
        "docs/telemetry.md",
        "export OTEL_EXPORTER_OTLP_ENDPOINT=https://cloud.langfuse.com/api/public/otel",
    ): _LANGFUSE,
    (
        "docs/telemetry.md",
        "export OTEL_EXPORTER_OTLP_HEADERS=\"Authorization=Basic%20$(printf '%s' "
        '"$LANGFUSE_PUBLIC_KEY:$LANGFUSE_SECRET_KEY" | base64 -w0)"',
    ): _LANGFUSE,
    ("docs/telemetry.md", "loopgate serve"): f"{_LANGFUSE} (the two lines before set that up)",
    ("docs/deploy.md", "pip install loopgate-server"): (
        f"no release on PyPI yet (the doc says so); and it {_INSTALLS_INTO_VENV}"
    ),
    ("docs/deploy.md", "pipx install loopgate-server"): (
        "no release on PyPI yet (the doc says so); and pipx puts the command on the user's PATH"
    ),
    ("docs/deploy.md", "pip install dist/loopgate_server-0.1.0-py3-none-any.whl"): (
        _INSTALLS_INTO_VENV
    ),
    ("docs/deploy.md", "docker build -t loopgate ."): _NO_DOCKER,
    ("docs/plugins.md", "cd my-plugin"): _PLUGIN_PROJECT,
    ("docs/plugins.md", "python -m venv .venv"): _PLUGIN_PROJECT,
    (
        "docs/plugins.md",
        ".venv/bin/pip install -e ../loopgate --config-settings editable_mode=strict",
    ): _PLUGIN_PROJECT,
    ("docs/plugins.md", ".venv/bin/pip install mypy && .venv/bin/mypy --strict my_plugin.py"): (
        _PLUGIN_PROJECT
    ),
    ("docs/plugins.md", "npx pyright --pythonpath .venv/bin/python my_plugin.py"): (
        _PLUGIN_PROJECT
    ),
    ("docs/plugins.md", "tests/node/node_modules/.bin/pyright --pythonpath .venv/bin/python"): (
        "./scripts/test runs it before the suite (20-25 s)"
    ),
    ("docs/deploy.md", 'docker run --rm loopgate run "one tool: 2 + 3"'): _NO_DOCKER,
    (
        "docs/deploy.md",
        "docker run -d --name loopgate -p 8000:8000 -v loopgate-data:/data -v "
        '"$PWD/secrets/loopgate_token:/run/secrets/loopgate_token:ro" -e '
        "LOOPGATE_TOKEN_FILE=/run/secrets/loopgate_token loopgate",
    ): f"{_NO_DOCKER}; the commands after it talk to the doc's `loopgate serve` instead",
    (
        "docs/benchmarks.md",
        "git worktree add ../before <revision> && (cd ../before && python3 -m venv .venv && "
        '.venv/bin/pip install -q -e ".[test]")',
    ): "a second checkout for benchmarks.hub_instructions to compare with (a placeholder "
    "revision; a minute of installing)",
    # Benchmarks run here at the smallest size their section gives, when that takes at most
    # ~20 s on two cores and no smoke test of tests/benchmarks runs it already (acp_stream,
    # openai_chunks and ingest_journal --quick); what takes longer is listed, with its time,
    # and so is what a smoke test runs (the suite is held to ten minutes on two cores).
    **{
        ("docs/benchmarks.md", f".venv/bin/python -m benchmarks.{command}"): reason
        for command, reason in {
            "fanout": _LONG.format(took="~4 min", smaller=_SMOKE.format("fanout")),
            "fanout --rounds 3 --latency-runs 3": _LONG.format(
                took="~4 min", smaller=_SMOKE.format("fanout")
            ),
            "fanout --quick": _LONG.format(took="28 s", smaller=_SMOKE.format("fanout")),
            "loop_overhead": _RUN_BY_SMOKE.format(took="11 s", smoke="in_process"),
            "loop_overhead --turns 300 --repeat 7": _RUN_BY_SMOKE.format(
                took="11 s", smoke="in_process"
            ),
            "retention --quick": _RUN_BY_SMOKE.format(took="4 s", smoke="in_process"),
            "loop_plugs --quick": _RUN_BY_SMOKE.format(took="14 s", smoke="loop_plugs"),
            "text_tags": _RUN_BY_SMOKE.format(took="18 s", smoke="text_tags"),
            "retention": _LONG.format(took="12 s", smaller=_SMOKE.format("in_process")),
            "retention --runs 1000 --source scripted --source recordings --gc-rounds 9": (
                _LONG.format(took="12 s", smaller=_SMOKE.format("in_process"))
            ),
            "agui_encode": _TARGETS,
            "agui_encode --seconds 3 --rounds 9 --batch 32": _TARGETS,
            "agui_e2e": _LONG.format(took="~5 min", smaller=_SMOKE.format("agui_e2e")),
            "agui_e2e --quick": _LONG.format(took="42 s", smaller=_SMOKE.format("agui_e2e")),
            "agui_e2e --clients 50 --pacing 0 --rounds 5 --seconds 8": _LONG.format(
                took="over 80 s (5 rounds of 8 s on each of two servers)",
                smaller=_SMOKE.format("agui_e2e"),
            ),
            "jsonrpc": _LONG.format(took="22 s", smaller="no smaller size in the doc"),
            "telemetry_overhead": _LONG.format(took="~25 min", smaller=_NO_SMALLER),
            "telemetry_overhead --processes 0 --deltas 100": _LONG.format(
                took="~2.5 min (8 windows of 15 s)", smaller=_NO_SMALLER
            ),
            "loop_plugs": _LONG.format(took="~1.5 min", smaller=_SMOKE.format("loop_plugs")),
            "loop_plugs --events 200000 --repeat 5 --rate 5000": _LONG.format(
                took="~1.5 min", smaller=_SMOKE.format("loop_plugs")
            ),
            "loop_plugs --events 200000 --repeat 5 --rate 5000 --delivery-window-ms 0": (
                _LONG.format(took="~1.5 min", smaller=_SMOKE.format("loop_plugs"))
            ),
            "loop_plugs --events 20000 --repeat 2 --rate 200 --paced-events 600 "
            "--delivery-window-ms 2": _LONG.format(
                took="~45 s", smaller=_SMOKE.format("loop_plugs")
            ),
            "gateway_overhead": _LONG.format(
                took="~6 min", smaller=_SMOKE.format("gateway_overhead")
            ),
            "gateway_overhead --rounds 3 --seconds 3": _LONG.format(
                took="~5 min", smaller=_SMOKE.format("gateway_overhead")
            ),
            "gateway_overhead --quick": _LONG.format(
                took="~30 s", smaller=_SMOKE.format("gateway_overhead")
            ),
            "ingest_journal": _LONG.format(took="~4 min", smaller=_QUICK),
            "scale_out --rounds 5": _LONG.format(took="~2 min", smaller=_SMOKE.format("scale_out")),
            "scale_out --quick": _LONG.format(took="23 s", smaller=_SMOKE.format("scale_out")),
            "scale_out --only-queue --rounds 3": _LONG.format(
                took="29 s", smaller=_SMOKE.format("scale_out")
            ),
            "hub_instructions --against ../before": _LONG.format(
                took="~15 min under callgrind", smaller=_NO_SMALLER
            ),
            "hub_instructions --against ../before --subscribers 1 10 100": _LONG.format(
                took="~15 min under callgrind", smaller=_NO_SMALLER
            ),
        }.items()
    },
}


def doc_name(doc: Path) -> str:
    return doc.relative_to(REPO).as_posix()


def all_commands() -> dict[str, list[Command]]:
    return {doc_name(doc): doc_commands(REPO, doc) for doc in DOCS}


class AnyModelIsText:
    """The fake OpenAI server answering every model name (gpt-4o-mini, qwen3) as ``text``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            scope = {**scope, "headers": [*scope["headers"], (b"x-fake-scenario", b"text")]}
        await self.app(scope, receive, send)


def base_env(tmp: Path) -> dict[str, str]:
    """A reader's shell with .venv activated, and nothing of this machine's loopgate settings."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("LOOPGATE_", "OTEL_", "OPENAI_"))
    }
    env["VIRTUAL_ENV"] = str(REPO / ".venv")
    env["PATH"] = f"{REPO / '.venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    # The demo tools' default workspace is under ~: a run of `write note` must not land there.
    env["LOOPGATE_WORKSPACE"] = str(tmp / "workspace")
    return env


def scratch_root(tmp: Path, markdown: str) -> Path:
    root = tmp / "root"
    root.mkdir()
    for entry in REPO.iterdir():
        if entry.name not in SCRATCH_SKIP and not entry.name.endswith(".egg-info"):
            (root / entry.name).symlink_to(entry)
    for name, text in doc_files(markdown).items():
        (root / name).write_text(text)
    return root


class Process:
    """A command that keeps running: its own process group, stopped by SIGINT like Ctrl-C."""

    def __init__(
        self, command: Command, text: str, cwd: Path, env: dict[str, str], *, read_stdout: bool
    ) -> None:
        self.command = command
        handle, name = tempfile.mkstemp(
            dir=cwd.parent, prefix=f"line{command.line}-", suffix=".log"
        )
        self.log = Path(name)
        with os.fdopen(handle, "wb") as log:
            self.proc = subprocess.Popen(
                ["bash", "-c", text],
                cwd=cwd,
                env=env,
                stdin=subprocess.PIPE,
                # A gateway's stdout goes to the log: nobody reads it, so a pipe could fill.
                stdout=subprocess.PIPE if read_stdout else log,
                stderr=log,
                start_new_session=True,
            )

    def where(self) -> str:
        return f"{self.command.doc}:{self.command.line}: {self.command.key}"

    def stderr_tail(self) -> str:
        return self.log.read_bytes().decode(errors="replace")[-3000:]

    def first_line(self, timeout_s: float) -> bytes:
        assert self.proc.stdout is not None
        stdout: IO[bytes] = self.proc.stdout
        lines: list[bytes] = []
        reader = threading.Thread(target=lambda: lines.append(stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout_s)
        if not lines or not lines[0]:
            pytest.fail(f"{self.where()}: printed no line\n{self.stderr_tail()}")
        return lines[0]

    def stop(self) -> int:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        else:
            # The command is gone; what it started in its group must not outlive the test.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()
        return self.proc.returncode


class DocSession:
    """One doc's terminal: its directory, environment, gateway and background jobs."""

    def __init__(self, doc: Path, tmp: Path, stack: ExitStack) -> None:
        markdown = doc.read_text()
        self.stack = stack
        self.root = scratch_root(tmp, markdown)
        self.port = free_port()
        self.env = base_env(tmp)
        self.doc_vars: dict[str, str] = {}
        # "set `B=localhost:8000`" in the prose (docs/api.md): the reader's first command.
        for name, value in re.findall(r"set `([A-Za-z_]\w*)=([^`]*)`", markdown):
            self.doc_vars[name] = self.rewrite_port(value)
        self.env.update(self.doc_vars)
        self.env_file = tmp / "env"
        self.gateway: Process | None = None
        self.fake_openai: str | None = None
        self.redis_url: str | None = None
        self.postgres_url: str | None = None
        self.run_id: str | None = None
        stack.callback(self.stop_gateway, check=False)

    def rewrite_port(self, text: str) -> str:
        return DOC_PORT.sub(lambda m: f"{m.group(1)}:{self.port}", text)

    def rewrite(self, command: Command) -> str:
        text = self.rewrite_port(command.text).replace("./scripts/loopgate", ".venv/bin/loopgate")
        for url in OPENAI_COMPATIBLE:
            if url in text:
                text = text.replace(url, f"{self.openai_compatible()}/v1")
        if DOC_REDIS in text:
            text = text.replace(DOC_REDIS, self.redis())
        if DOC_POSTGRES in text:
            text = text.replace(DOC_POSTGRES, self.postgres())
        if re.search(r"\bRUN_ID\b", text):
            if self.run_id is None:
                pytest.fail(f"{command.doc}:{command.line}: RUN_ID, and no run id printed before")
            text = re.sub(r"\bRUN_ID\b", self.run_id, text)
        return text

    def redis(self) -> str:
        if self.redis_url is None:
            self.redis_url = self.stack.enter_context(redis_server())
        return self.redis_url

    def postgres(self) -> str:
        if self.postgres_url is None:
            server = self.stack.enter_context(postgres_server())
            self.postgres_url = f"{server}?schema=doc{uuid.uuid4().hex[:12]}"
        return self.postgres_url

    def openai_compatible(self) -> str:
        if self.fake_openai is None:
            self.fake_openai = self.stack.enter_context(serve_app(AnyModelIsText(FakeOpenAI().app)))
        return self.fake_openai

    def talks_to_gateway(self, text: str) -> bool:
        if f":{self.port}" in text:
            return True
        return any(
            f":{self.port}" in value and re.search(rf"\$\{{?{name}\b", text)
            for name, value in self.doc_vars.items()
        )

    # -- running ------------------------------------------------------------------------

    def run(self, command: Command) -> None:
        text = self.rewrite(command)
        key = " ".join(re.sub(r"\\\n", " ", text).split())
        long_running = LONG_RUNNING.match(key)
        if long_running and "|" not in key and "<" not in key:
            if long_running.group("command") == "serve":
                self.serve(command, text)
            else:
                self.stdio_server(command, text, long_running.group("command"))
            return
        if key.endswith("&") and not key.endswith("&&"):
            self.background(command, text.rstrip().removesuffix("&"))
            return
        if self.talks_to_gateway(text) and self.gateway is None:
            started_for = f"loopgate serve, for line {command.line}"
            plain = Command(command.doc, command.line, "loopgate serve", started_for, "", ())
            self.serve(plain, plain.text)
        self.finite(command, text)

    def serve(self, command: Command, text: str) -> None:
        self.stop_gateway()
        env = {**self.env, "LOOPGATE_PORT": str(self.port)}
        gateway = Process(command, text, self.root, env, read_stdout=False)
        self.gateway = gateway
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if gateway.proc.poll() is not None:
                pytest.fail(
                    f"{gateway.where()}: exited {gateway.proc.returncode} on start\n"
                    f"{gateway.stderr_tail()}"
                )
            try:
                health = httpx.get(f"http://127.0.0.1:{self.port}/healthz", timeout=2)
                if health.status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"{gateway.where()}: no /healthz in {START_TIMEOUT_S} s")
            time.sleep(0.05)

    def stop_gateway(self, check: bool = True) -> None:
        gateway, self.gateway = self.gateway, None
        if gateway is not None:
            status = gateway.stop()
            if not check:
                return
            # 130: the status a program stopped by Ctrl-C exits with, after a clean shutdown.
            assert status in (0, 130), (
                f"{gateway.where()}: exited {status} on SIGINT\n{gateway.stderr_tail()}"
            )

    def stdio_server(self, command: Command, text: str, which: str) -> None:
        server = Process(command, text, self.root, self.env, read_stdout=True)
        try:
            assert server.proc.stdin is not None
            server.proc.stdin.write(STDIO_PROBES[which])
            server.proc.stdin.flush()
            assert b'"id":0' in server.first_line(START_TIMEOUT_S).replace(b" ", b"")
            server.proc.stdin.close()
            assert server.proc.wait(STOP_TIMEOUT_S) == 0, server.stderr_tail()
        finally:
            server.stop()

    def background(self, command: Command, text: str) -> None:
        job = Process(command, text, self.root, self.env, read_stdout=True)
        self.stack.callback(job.stop)
        job.first_line(START_TIMEOUT_S)

    def finite(self, command: Command, text: str) -> None:
        # `set -a`: what the command assigns is exported, so it reaches the next command as a
        # shell would keep it; the environment is read back after the command.
        script = f'set -a\n{text}\n__status=$?\nenv -0 > "{self.env_file}"\nexit $__status\n'
        where = f"{command.doc}:{command.line}: {command.key}"
        # A process group of its own, so that a command still running at the timeout is
        # stopped whole: bash, and whatever it started.
        with subprocess.Popen(
            ["bash", "-c", script],
            cwd=self.root,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        ) as proc:
            try:
                stdout, stderr = proc.communicate(timeout=COMMAND_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
                pytest.fail(f"{where}: still running after {COMMAND_TIMEOUT_S} s")
        assert proc.returncode == 0, (
            f"{where}: exit {proc.returncode}\nstdout: {stdout[-2000:]}\nstderr: {stderr[-2000:]}"
        )
        self.keep_env()
        expected = expected_output(command.notes, command.comment)
        if expected.mode == "remark":
            problem = error_answer(stdout)
        else:
            problem = output_mismatch(expected, stdout)
        assert problem is None, f"{where}: {problem}\noutput: {stdout[:3000]}"
        found = RUN_ID_IN_OUTPUT.search(stdout)
        if found:
            self.run_id = found.group(1) or found.group(2)

    def keep_env(self) -> None:
        after = dict(
            entry.split("=", 1) for entry in self.env_file.read_text().split("\0") if "=" in entry
        )
        for name, value in after.items():
            if name not in ("_", "SHLVL", "PWD", "OLDPWD") and self.env.get(name) != value:
                self.env[name] = value
                self.doc_vars[name] = value


@contextmanager
def doc_session(doc: Path, tmp: Path) -> Iterator[DocSession]:
    with ExitStack() as stack:
        yield DocSession(doc, tmp, stack)


def commands_to_run(doc: Path) -> list[Command]:
    return [c for c in doc_commands(REPO, doc) if (c.doc, c.key) not in NOT_RUN]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("doc", [doc for doc in DOCS if commands_to_run(doc)], ids=doc_name)
def test_every_command_of_the_doc_runs_as_written(doc: Path, tmp_path: Path) -> None:
    with doc_session(doc, tmp_path) as session:
        for command in commands_to_run(doc):
            session.run(command)
        session.stop_gateway()


def test_every_command_not_run_is_in_a_doc() -> None:
    present = {(command.doc, command.key) for found in all_commands().values() for command in found}
    stale = sorted(set(NOT_RUN) - present)
    assert not stale, f"NOT_RUN lists commands no doc has any more: {stale}"


def test_the_docs_have_the_commands_this_test_was_written_for() -> None:
    found = all_commands()
    # A parser that found nothing would pass every other test here.
    assert sum(len(commands) for commands in found.values()) > 80
    assert {"README.md", "docs/api.md", "docs/loops.md", "docs/telemetry.md"} <= {
        doc for doc, commands in found.items() if commands
    }


@pytest.mark.parametrize("which", sorted(STDIO_PROBES))
def test_a_stdio_server_in_a_doc_is_started_and_answers(which: str, tmp_path: Path) -> None:
    # No doc has one on its own line today; the day one does, this is how it runs.
    command = Command("README.md", 1, f"loopgate {which}", f"loopgate {which}", "", ())
    with doc_session(REPO / "README.md", tmp_path) as session:
        session.run(command)
