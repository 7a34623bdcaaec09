"""loopgate-server as its users get it: the wheel built the way the Dockerfile builds it,
installed with its dependencies into a fresh venv, and run from outside the checkout — as a
command, as an import, as a server, and as the container's command with the container's
environment (no docker daemon here: the image is not built, what it runs is run).

The wheel is built from a copy of the build context (the Dockerfile's COPYs, minus what the
.dockerignore leaves out) rather than in the checkout: an in-tree build writes build/ and
*.egg-info into a working tree others are editing, and setuptools packs whatever a previous
build left in build/lib; the copy also checks that the build stage gets every file it needs.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import tomllib
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fakes.redis_server import redis_server
from tests.gateway.harness import free_port
from tests.gateway.sse_client import envelopes, read_stream
from tests.packaging.dockerfile import DockerIgnore, Stage, copy_context, exec_form, parse
from tests.packaging.served import READY, served

REPO = Path(__file__).resolve().parents[2]
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
STAGES = parse((REPO / "Dockerfile").read_text())
IGNORE = DockerIgnore((REPO / ".dockerignore").read_text())
FOLDERS = ("gateway", "adapters", "contracts")  # installed as loopgate.<folder> only
RECORDING = REPO / "conformance" / "streams" / "parallel-tools.jsonl"
TOKEN = "loopgate-test-token-7f3a"  # a fixed value: only ever served to 127.0.0.1 clients here
SHELL_SYNTAX = re.compile(r"[;&|<>$`(){}]")

# The first test also installs (a fresh venv, a wheel build, the dependencies: ~15 s here).
pytestmark = pytest.mark.timeout(300)


@dataclass(frozen=True)
class Installed:
    venv: Path
    site_packages: Path
    outside: Path  # a working directory outside the checkout: nothing there imports it
    wheels: Path
    env: dict[str, str]  # the venv's bin first on PATH; nothing of the developer's settings

    def run(self, *argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            argv, cwd=self.outside, env=self.env, capture_output=True, text=True, timeout=60
        )


def fresh_env(venv: Path, data_home: Path) -> dict[str, str]:
    # PYTHON* (PYTHONPATH above all), a VIRTUAL_ENV, LOOPGATE_* and OTEL_* settings of whoever
    # runs the suite would make this something other than a fresh install; pip's own settings
    # (PIP_*: the index, the certificates) stay.
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYTHON", "LOOPGATE_", "OTEL_")) and k != "VIRTUAL_ENV"
    }
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', os.defpath)}"
    env["XDG_DATA_HOME"] = str(data_home)  # the default workspace: not the developer's
    return env


def run_as_docker(
    command: str, *, mounts: dict[str, Path], cwd: Path, env: dict[str, str], venv: Path
) -> subprocess.CompletedProcess[str]:
    """A Dockerfile RUN line, run here: the image's paths in ``mounts`` are local folders, its
    globs expanded as its shell would; anything needing more of a shell is refused."""
    assert not SHELL_SYNTAX.search(command), f"not a plain command: {command}"
    argv = []
    for token in shlex.split(command):
        for image_path, local in mounts.items():
            if token == image_path or token.startswith(image_path + "/"):
                token = str(local) + token[len(image_path) :]
        if "*" in token:
            matches = sorted(glob.glob(token))
            assert matches, f"{token} matches nothing"
            argv.extend(matches)
        else:
            argv.append(token)
    assert_from_venv(argv[0], env, venv)
    result = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, f"{command}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def assert_from_venv(program: str, env: dict[str, str], venv: Path) -> None:
    found = shutil.which(program, path=env["PATH"])
    assert found is not None and Path(found).parent == venv / "bin", (program, found)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    root = tmp_path_factory.mktemp("packaging")
    assert not root.resolve().is_relative_to(REPO)
    build, image = STAGES
    venv, outside, wheels = root / "venv", root / "outside", root / "wheels"
    outside.mkdir()
    timings: dict[str, float] = {}

    started = time.monotonic()
    subprocess.run(
        [sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True, timeout=120
    )
    assert "include-system-site-packages = false" in (venv / "pyvenv.cfg").read_text()
    env = fresh_env(venv, root / "xdg-data")
    timings["venv"] = time.monotonic() - started

    started = time.monotonic()
    workdir = copy_context(REPO, root / "build-stage", build, IGNORE)
    [build_wheel] = [c for c in build.runs() if " wheel " in c]
    run_as_docker(build_wheel, mounts={"/wheels": wheels}, cwd=workdir, env=env, venv=venv)
    timings["wheel"] = time.monotonic() - started

    started = time.monotonic()
    [install] = [c for c in image.runs() if " install " in c]
    run_as_docker(install, mounts={"/wheels": wheels}, cwd=outside, env=env, venv=venv)
    timings["install"] = time.monotonic() - started
    print(  # measured: shown with pytest -s
        "\npackaging: " + ", ".join(f"{k} {v:.1f} s" for k, v in timings.items()), flush=True
    )

    [site_packages] = (venv / "lib").glob("python3.*/site-packages")
    return Installed(venv, site_packages, outside, wheels, env)


def files_under(folder: Path) -> set[str]:
    return {
        p.relative_to(folder).as_posix()
        for p in folder.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }


def test_the_venv_gains_one_package_holding_the_whole_checkout(installed: Installed) -> None:
    [wheel] = installed.wheels.glob("*.whl")
    assert wheel.name == f"loopgate_server-{VERSION}-py3-none-any.whl"
    top = {p.name for p in installed.site_packages.iterdir()}
    assert "loopgate" in top
    assert not top & {*FOLDERS, "conformance", "recordings", "tests", "build"}, top
    package = installed.site_packages / "loopgate"
    # setup.py's mapping (not loopgate/'s symlinks): real folders, every file of the three.
    for folder in FOLDERS:
        assert not (package / folder).is_symlink()
        assert files_under(package / folder) == files_under(REPO / folder), folder
    assert not [p for p in package.rglob("*") if p.is_symlink()]
    recordings = {p.name for p in (REPO / "conformance" / "streams").glob("*.jsonl")}
    assert files_under(package / "recordings") == recordings
    assert (package / "py.typed").is_file()


def test_the_command_and_the_import_come_from_the_venv(installed: Installed) -> None:
    assert_from_venv("loopgate", installed.env, installed.venv)
    version = installed.run("loopgate", "--version")
    assert (version.returncode, version.stdout.strip()) == (0, f"loopgate {VERSION}")
    as_module = installed.run("python", "-m", "loopgate", "--version")
    assert as_module.stdout.strip() == f"loopgate {VERSION}"
    imported = installed.run(
        "python", "-c", "import loopgate, loopgate.gateway.app; print(loopgate.__file__)"
    )
    assert imported.returncode == 0, imported.stderr
    assert Path(imported.stdout.strip()).parent == installed.site_packages / "loopgate"
    for folder in FOLDERS:  # a bare `import gateway` must fail: nothing of the sort installed
        bare = installed.run("python", "-c", f"import {folder}")
        assert "ModuleNotFoundError" in bare.stderr, folder


def test_serve_streams_a_run_and_a_recording(installed: Installed) -> None:
    port = free_port()
    argv = [str(installed.venv / "bin" / "loopgate"), "serve", "--port", str(port)]
    with served(argv, env=installed.env, cwd=installed.outside) as server:
        base = server.wait_for(READY).group(1)
        assert base == f"http://127.0.0.1:{port}"
        health = httpx.get(f"{base}/healthz", timeout=10)
        assert health.status_code == 200
        assert {"native", "agui", "acp", "jsonrpc"} <= set(health.json()["adapters"])

        events = start_and_stream(base, {"input": "one tool: 2 + 3"})
        assert_one_tool_answer(events)

        replayed = start_and_stream(base, {"replay": "parallel-tools"})
        recorded = [json.loads(line) for line in RECORDING.read_text().splitlines()]
        assert [(e["kind"], e["data"]) for e in replayed] == [
            (r["kind"], r["data"]) for r in recorded
        ]
        assert_console_served(base)


CONSOLE = REPO / "gateway" / "console" / "static"


def assert_console_served(base: str) -> None:
    """The web console's page and every file it loads come from the installed package."""
    page = httpx.get(f"{base}/", timeout=10)
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert page.content == (CONSOLE / "index.html").read_bytes()
    for path in sorted(CONSOLE.rglob("*")):
        if path.is_file() and path.name != "index.html":
            url = f"{base}/console/{path.relative_to(CONSOLE).as_posix()}"
            served = httpx.get(url, timeout=10)
            assert (served.status_code, served.content) == (200, path.read_bytes()), url


def start_and_stream(
    base: str, body: dict[str, Any], headers: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    """A run started and its native SSE stream read to the end (it ends after the terminal
    event)."""
    created = httpx.post(f"{base}/v1/runs", json=body, headers=headers, timeout=10)
    assert created.status_code == 201, created.text
    return envelopes(read_stream(base, created.json()["id"], headers=headers, timeout=30))


def assert_one_tool_answer(events: list[dict[str, Any]]) -> None:
    assert events[-1]["kind"] == "completion"
    assert events[-1]["data"]["status"] == "completed"
    [result] = [e["data"] for e in events if e["kind"] == "tool_call_result"]
    assert (result["name"], result["success"], result["resultPreview"]) == ("calculate", True, "5")
    text = "".join(e["data"]["delta"] for e in events if e["kind"] == "content_delta")
    assert text.endswith("is 5.")


def test_the_dockerfile_builds_from_a_slim_python_and_runs_as_a_user() -> None:
    build, image = STAGES
    suite_python = f"python:{sys.version_info.major}.{sys.version_info.minor}-slim"
    # The same Python as the suite's: what this module runs is then what the image runs.
    assert (build.base, image.base) == (suite_python, suite_python)
    assert not image.all("COPY") and not image.all("ADD")  # no source tree in the image
    assert image.last("USER").rest.split(":")[0] not in ("root", "0")
    assert image.last("EXPOSE").rest == "8000"
    assert image.last("VOLUME").rest == "/data"
    env = image.env()
    assert (env["LOOPGATE_HOST"], env["LOOPGATE_PORT"]) == ("0.0.0.0", "8000")
    assert env["LOOPGATE_JOURNAL"].startswith("sqlite:/data/")
    assert env["LOOPGATE_WORKSPACE"].startswith("/data/")
    # A token in the image would be anyone's who has the image; a default token file would
    # make LOOPGATE_TOKEN an error ("give --token or --token-file, not both").
    assert not {"LOOPGATE_TOKEN", "LOOPGATE_TOKEN_FILE"} & set(env)


@pytest.mark.parametrize(
    ("path", "sent"),
    [
        ("pyproject.toml", True),
        ("setup.py", True),
        ("gateway/app.py", True),
        ("loopgate/gateway", True),
        ("conformance/streams/parallel-tools.jsonl", True),
        ("conformance/record.py", False),
        ("gateway/__pycache__/app.cpython-311.pyc", False),
        ("loopgate_server.egg-info/PKG-INFO", False),
        (".venv/bin/python", False),
        (".git/config", False),
        ("tests/node/node_modules/x/index.js", False),
        (".env", False),
    ],
)
def test_the_build_context_is_only_what_the_wheel_is_made_of(path: str, sent: bool) -> None:
    assert IGNORE.excluded(path) is not sent


def container_env(installed: Installed, image: Stage, data: Path, port: int) -> dict[str, str]:
    """The image's ENV over the fresh venv's, its /data a local folder, its port a free one."""
    env = {k: re.sub(r"/data(?=/|$)", str(data), v) for k, v in image.env().items()}
    return {**installed.env, **env, "LOOPGATE_PORT": str(port)}


def test_the_containers_command_serves_beyond_loopback_with_a_token_file(
    installed: Installed, tmp_path: Path
) -> None:
    image = STAGES[-1]
    data = tmp_path / "data"
    data.mkdir()
    port = free_port()
    env = container_env(installed, image, data, port)
    command = image.command()
    assert_from_venv(command[0], env, installed.venv)

    refused = subprocess.run(command, cwd=data, env=env, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2
    assert "requires credentials" in refused.stderr and "Traceback" not in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr

    secret = tmp_path / "secrets" / "loopgate_token"  # /run/secrets/loopgate_token in a container
    secret.parent.mkdir()
    secret.write_text(TOKEN + "\n")
    secret.chmod(0o600)
    env["LOOPGATE_TOKEN_FILE"] = str(secret)
    bearer = {"authorization": f"Bearer {TOKEN}"}
    base = f"http://127.0.0.1:{port}"

    with served(command, env=env, cwd=data) as server:
        assert server.wait_for(READY).group(1) == f"http://0.0.0.0:{port}"
        healthy = healthcheck(image, env, installed)
        assert healthy.returncode == 0, healthy.stderr
        # /healthz is open (gateway/auth.py OPEN_PATHS); everything else wants the token.
        assert httpx.get(f"{base}/healthz", timeout=10).status_code == 200
        for headers in ({}, {"authorization": "Bearer wrong"}):
            refused_run = httpx.post(f"{base}/v1/runs", json={"input": "hi"}, headers=headers)
            assert refused_run.status_code == 401
        assert httpx.get(f"{base}/v1/runs", timeout=10).status_code == 401

        events = start_and_stream(base, {"input": "one tool: 2 + 3"}, bearer)
        assert_one_tool_answer(events)
        noted = start_and_stream(base, {"input": "write note", "approval": "never"}, bearer)
        assert noted[-1]["data"]["status"] == "completed"
        notes = list((data / "workspace" / "notes").glob("*.md"))
        assert len(notes) == 1 and "Written by the scripted model" in notes[0].read_text()
        # docker stop: SIGTERM, and out well within its 10 s grace (128 + SIGTERM).
        assert server.stop() == 143, server.text()

    down = healthcheck(image, env, installed)
    assert down.returncode == 1
    assert down.stderr.strip() == "loopgate is not healthy: URLError"

    # The journal on /data: a new container on the same volume serves the runs of the last.
    assert (data / "journal.sqlite3").is_file()
    with served(command, env=env, cwd=data) as server:
        server.wait_for(READY)
        again = envelopes(read_stream(base, events[0]["run_id"], headers=bearer, timeout=30))
        assert again == events


def test_the_images_other_commands_run_with_its_settings_and_no_token(
    installed: Installed, tmp_path: Path
) -> None:
    """docs/deploy.md: `docker run --rm loopgate run "…"` — run listens on nothing, so the
    image's LOOPGATE_HOST=0.0.0.0 without a token is no reason to refuse."""
    image = STAGES[-1]
    env = container_env(installed, image, tmp_path, free_port())
    assert env["LOOPGATE_HOST"] == "0.0.0.0" and "LOOPGATE_TOKEN" not in env
    [entrypoint] = image.all("ENTRYPOINT")
    argv = [*exec_form(entrypoint.rest), "run", "one tool: 2 + 3"]
    result = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "The result of 2 + 3 is 5." in result.stdout


def test_the_images_instances_share_runs_through_redis(
    installed: Installed, tmp_path: Path
) -> None:
    """docs/scale.md from the image: its install line brings the Redis extra, so two
    containers given one Redis as their journal serve each other's runs."""
    check = "import redis.utils; print(redis.utils.HIREDIS_AVAILABLE)"
    hiredis = installed.run("python", "-c", check)  # the extra's C parser, not only redis-py
    assert (hiredis.returncode, hiredis.stdout.strip()) == (0, "True"), hiredis.stderr
    image = STAGES[-1]
    secret = tmp_path / "loopgate_token"
    secret.write_text(TOKEN)
    bearer = {"authorization": f"Bearer {TOKEN}"}
    with redis_server() as url:
        sep = "&" if "?" in url else "?"
        journal = f"{url}{sep}prefix=pkg{uuid.uuid4().hex[:12]}"  # a Redis others may share
        envs = []
        for name in ("a", "b"):
            (tmp_path / name).mkdir()
            env = container_env(installed, image, tmp_path / name, free_port())
            envs.append({**env, "LOOPGATE_JOURNAL": journal, "LOOPGATE_TOKEN_FILE": str(secret)})
        command = image.command()
        with (
            served(command, env=envs[0], cwd=tmp_path / "a") as first,
            served(command, env=envs[1], cwd=tmp_path / "b") as second,
        ):
            first.wait_for(READY)
            second.wait_for(READY)
            a, b = (f"http://127.0.0.1:{env['LOOPGATE_PORT']}" for env in envs)
            events = start_and_stream(a, {"input": "one tool: 2 + 3"}, bearer)
            assert_one_tool_answer(events)
            from_b = read_stream(b, events[0]["run_id"], headers=bearer, timeout=30)
            assert envelopes(from_b) == events


def healthcheck(
    image: Stage, env: dict[str, str], installed: Installed
) -> subprocess.CompletedProcess[str]:
    """The image's HEALTHCHECK command as Docker runs it: the container's environment, its
    --timeout (an overrun is a failure, here an exception)."""
    options, command = image.healthcheck()
    assert_from_venv(command[0], env, installed.venv)
    timeout = float(options["timeout"].removesuffix("s"))
    return subprocess.run(
        command, cwd=installed.outside, env=env, capture_output=True, text=True, timeout=timeout
    )


def test_the_deploy_doc_shows_the_health_check_the_image_runs() -> None:
    doc = (REPO / "docs" / "deploy.md").read_text()
    shown = re.search(r"The image's `HEALTHCHECK` runs\n\n```python\n(.*?)\n```", doc, re.S)
    assert shown is not None
    _, command = STAGES[-1].healthcheck()
    assert command[:2] == ["python", "-c"] and shown.group(1) == command[2]
