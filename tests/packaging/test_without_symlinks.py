"""A checkout made without symlinks (``git -c core.symlinks=false clone``, what Windows does
by default): loopgate/gateway, …/adapters, …/contracts and …/recordings are then small text
files naming their targets. From such a checkout, as its users would:

- ``python -m build`` makes the sdist and, from it, the wheel, with every module and every
  recording in it (setup.py maps the folders; nothing follows the links);
- ``pip install -e CHECKOUT --config-settings editable_mode=strict`` in a project of a plugin
  author's own, outside the checkout: its module importing ``loopgate.gateway…`` and
  ``loopgate.contracts…`` runs, and mypy and pyright resolve those imports (they find the
  deliberate mistake in it, typed by loopgate's classes);
- a default ``pip install -e`` runs too, but neither checker can follow its import hook: why
  docs/plugins.md says ``editable_mode=strict``.

The clone is of the working tree as it is (committed or not): its files are written to a
commit of their own (a temporary index; the checkout's index, branches and files are not
touched), which the clone checks out.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest

from tests.node_clients import node_clients
from tests.packaging.test_wheel import FOLDERS, REPO, VERSION, files_under, fresh_env

LINKS = (*FOLDERS, "recordings")  # loopgate/<name>: a symlink in a checkout that has them
MYPY = REPO / ".venv" / "bin" / "mypy"
PYRIGHT = REPO / "tests" / "node" / "node_modules" / ".bin" / "pyright"
DOC = REPO / "docs" / "plugins.md"
# docs/plugins.md's plugin module, with a last line added that is wrong (Settings.port is an
# int), which a checker can tell only if it found loopgate.gateway.settings.
SHOWN = re.search(r"A plugin module such as\n\n```python\n(.*?)```", DOC.read_text(), re.S)
assert SHOWN is not None, "docs/plugins.md shows no plugin module"
PLUGIN = SHOWN.group(1) + "\n\nport: str = Settings().port\n"
MISTAKE_LINE = PLUGIN.splitlines().index("port: str = Settings().port") + 1

# Fresh venvs, builds and installs with dependencies from the package index: ~60 s in all.
pytestmark = pytest.mark.timeout(420)


def git(*args: str, cwd: Path = REPO, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, f"git {' '.join(args)}\n{done.stderr}"
    return done.stdout.strip()


def working_tree_commit(index: Path) -> str:
    """The working tree's files (what .gitignore leaves in) as a commit on no branch."""
    env = {
        **os.environ,
        "GIT_INDEX_FILE": str(index),
        # commit-tree wants an identity, which a CI machine may not have configured.
        "GIT_AUTHOR_NAME": "loopgate tests",
        "GIT_AUTHOR_EMAIL": "tests@loopgate.invalid",
        "GIT_COMMITTER_NAME": "loopgate tests",
        "GIT_COMMITTER_EMAIL": "tests@loopgate.invalid",
    }
    git("read-tree", "HEAD", env=env)
    git("add", "--all", env=env)
    tree = git("write-tree", env=env)
    return git("commit-tree", "-p", "HEAD", "-m", "the working tree", tree, env=env)


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("without-symlinks")
    assert not root.resolve().is_relative_to(REPO)
    commit = working_tree_commit(root / "index")
    clone = root / "loopgate"
    git("-c", "core.symlinks=false", "clone", "--quiet", "--no-checkout", str(REPO), str(clone))
    git("-c", "core.symlinks=false", "checkout", "--quiet", commit, cwd=clone)
    for name in LINKS:  # the links are text now, as on Windows
        link = clone / "loopgate" / name
        assert link.is_file() and not link.is_symlink(), link
    assert (clone / "loopgate" / "gateway").read_text() == "../gateway"
    return clone


def make_venv(path: Path) -> dict[str, str]:
    subprocess.run(
        [sys.executable, "-m", "venv", str(path)], check=True, capture_output=True, timeout=120
    )
    return fresh_env(path, path / "xdg-data")


def run(argv: list[str], *, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def pip(venv: Path, env: dict[str, str], *args: str) -> None:
    argv = [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", *args]
    done = run(argv, cwd=venv, env=env)
    assert done.returncode == 0, f"pip {' '.join(args)}\n{done.stdout[-3000:]}{done.stderr[-3000:]}"


def under(names: set[str], prefix: str) -> set[str]:
    return {n.removeprefix(prefix) for n in names if n.startswith(prefix)}


def test_the_sdist_and_the_wheel_hold_every_module(checkout: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    env = make_venv(venv)
    pip(venv, env, "install", "--quiet", "build>=1")
    dist = tmp_path / "dist"
    built = run(
        [str(venv / "bin" / "python"), "-m", "build", "--outdir", str(dist), str(checkout)],
        cwd=tmp_path,
        env=env,
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    # The wheel is built from the sdist (build's default): both must be whole.
    assert sorted(p.name for p in dist.iterdir()) == [
        f"loopgate_server-{VERSION}-py3-none-any.whl",
        f"loopgate_server-{VERSION}.tar.gz",
    ]
    with tarfile.open(dist / f"loopgate_server-{VERSION}.tar.gz") as sdist:
        in_sdist = {name.partition("/")[2] for name in sdist.getnames()}
    with zipfile.ZipFile(dist / f"loopgate_server-{VERSION}-py3-none-any.whl") as wheel:
        in_wheel = set(wheel.namelist())
    for folder in FOLDERS:
        files = files_under(checkout / folder)
        assert files <= under(in_sdist, f"{folder}/"), folder
        assert under(in_wheel, f"loopgate/{folder}/") == files, folder
    recordings = {p.name for p in (checkout / "conformance" / "streams").glob("*.jsonl")}
    assert under(in_wheel, "loopgate/recordings/") == recordings
    assert {"loopgate/__init__.py", "loopgate/__main__.py", "loopgate/py.typed"} <= in_wheel
    assert not {f"loopgate/{name}" for name in LINKS} & in_wheel  # no link's text packed


def check_plugin(plugin: Path, venv: Path, env: dict[str, str]) -> tuple[list[str], list[str]]:
    """mypy's and pyright's findings on the plugin, each as ``LINE: RULE`` (the repository's
    mypy and pyright, told to resolve imports as the plugin's venv does)."""
    node_clients()  # pyright is installed with them
    assert MYPY.is_file(), "scripts/test installs mypy"
    python = str(venv / "bin" / "python")
    mypy = run(
        [
            str(MYPY),
            "--python-executable",
            python,
            "--strict",
            "--no-incremental",
            "--show-error-codes",
            "--no-error-summary",
            "my_plugin.py",
        ],
        cwd=plugin,
        env=env,
    )
    assert mypy.returncode in (0, 1), mypy.stdout + mypy.stderr
    from_mypy = [
        f"{line.split(':')[1]}: {line.rpartition('[')[2].rstrip(']')}"
        for line in mypy.stdout.splitlines()
        if ": error: " in line
    ]
    pyright = run(
        [str(PYRIGHT), "--pythonpath", python, "--outputjson", "my_plugin.py"], cwd=plugin, env=env
    )
    report = json.loads(pyright.stdout)
    from_pyright = [
        f"{d['range']['start']['line'] + 1}: {d.get('rule', '')}"
        for d in report["generalDiagnostics"]
        if d["severity"] == "error"
    ]
    return from_mypy, from_pyright


def borrow_dependencies(venv: Path) -> None:
    """The suite's installed packages on the venv's path, after its own."""
    (site,) = (venv / "lib").glob("python3*/site-packages")
    (site / "zz_suite_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")


def plugin_project(root: Path) -> Path:
    plugin = root / "my-plugin"
    plugin.mkdir()
    (plugin / "my_plugin.py").write_text(PLUGIN)
    return plugin


def test_a_strict_editable_install_is_resolved_by_mypy_and_pyright(
    checkout: Path, tmp_path: Path
) -> None:
    venv = tmp_path / "venv"
    env = make_venv(venv)
    # The dependencies are the suite's own (a path line in the venv; no loopgate among them:
    # the suite's editable install is a hook that only its own venv's .pth starts): installing
    # them from the index again is ~20 s, and test_wheel.py already does it for the wheel.
    borrow_dependencies(venv)
    pip(
        venv,
        env,
        "install",
        "--quiet",
        "--no-deps",
        "--editable",
        str(checkout),
        "--config-settings",
        "editable_mode=strict",
    )
    plugin = plugin_project(tmp_path)
    ran = run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import my_plugin as p; print(p.greeting(p.Settings()).data['delta']);"
            " print(*p.recordings())",
        ],
        cwd=plugin,
        env=env,
    )
    assert ran.returncode == 0, ran.stderr
    greeting, recordings = ran.stdout.splitlines()
    assert greeting == "hello from 127.0.0.1"
    # {"replay": NAME} finds the recordings through the link tree, the checkout having none.
    assert recordings.split() == sorted(
        p.stem for p in (checkout / "conformance" / "streams").glob("*.jsonl")
    )
    from_mypy, from_pyright = check_plugin(plugin, venv, env)
    assert from_mypy == [f"{MISTAKE_LINE}: assignment"]
    assert from_pyright == [f"{MISTAKE_LINE}: reportAssignmentType"]


def test_a_default_editable_install_runs_but_is_hidden_from_the_checkers(
    checkout: Path, tmp_path: Path
) -> None:
    venv = tmp_path / "venv"
    env = make_venv(venv)
    # Without dependencies: what is checked here needs none of them.
    pip(venv, env, "install", "--quiet", "--no-deps", "--editable", str(checkout))
    plugin = plugin_project(tmp_path)
    # Python finds the folders through the install's import hook (a meta path finder).
    where = "import importlib.util as u; print(u.find_spec('loopgate.gateway').origin)"
    found = run([str(venv / "bin" / "python"), "-c", where], cwd=plugin, env=env)
    assert found.returncode == 0, found.stderr
    assert Path(found.stdout.strip()) == checkout / "gateway" / "__init__.py"
    from_mypy, from_pyright = check_plugin(plugin, venv, env)
    imports = [
        n + 1 for n, line in enumerate(PLUGIN.splitlines()) if line.startswith("from loopgate.")
    ]
    assert from_mypy == [f"{n}: import-not-found" for n in imports]
    assert from_pyright == [f"{n}: reportMissingImports" for n in imports]
