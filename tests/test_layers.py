"""Imports only point down: contracts ← adapters ← gateway (DESIGN.md)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN = {
    "contracts": {"adapters", "gateway"},
    "adapters": {"gateway"},
}


OURS = {"contracts", "adapters", "gateway"}


def package_of(path: Path) -> list[str]:
    """The package a file's relative imports start from, as loopgate installs it."""
    parts = list(path.relative_to(ROOT).parts[:-1])
    return ["loopgate", *parts] if parts and parts[0] in OURS else parts


def absolute(path: Path, node: ast.ImportFrom) -> str:
    """The module a ``from`` import names, a relative one resolved from the file's package."""
    if not node.level:
        return node.module or ""
    package = package_of(path)
    assert node.level <= len(package), f"{path}: a relative import climbs above loopgate"
    base = package[: len(package) - node.level + 1]
    return ".".join([*base, node.module] if node.module else base)


def imported_modules(path: Path) -> list[str]:
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            names.append(absolute(path, node))
    return names


def imported_packages(path: Path) -> set[str]:
    """Top-level packages a module imports; ours by their layer (loopgate.gateway → gateway)."""
    found = set()
    for name in imported_modules(path):
        parts = name.split(".")
        found.add(parts[1] if parts[0] == "loopgate" and len(parts) > 1 else parts[0])
    return found - {"loopgate"}


def python_files() -> list[Path]:
    """Every tracked-looking Python file, the loopgate/ symlinks and installed trees left out."""
    skip = {"loopgate", ".venv", "node_modules", "build", ".git"}
    return [
        path
        for path in ROOT.rglob("*.py")
        if not skip & set(path.relative_to(ROOT).parts) and ".mypy_cache" not in path.parts
    ]


def test_our_packages_are_imported_only_under_the_loopgate_namespace() -> None:
    """A bare ``import gateway`` would load a second copy of a module (two hubs, two classes)."""
    bare = {
        str(path.relative_to(ROOT)): sorted(
            n for n in imported_modules(path) if n.split(".")[0] in OURS
        )
        for path in python_files()
    }
    assert {k: v for k, v in bare.items() if v} == {}


@pytest.mark.parametrize("layer", sorted(OURS))
def test_our_folders_import_one_another_relatively(layer: str) -> None:
    """Inside the three folders ``from ..contracts.events import`` and never
    ``from loopgate.contracts.events import``: a relative import is read by the real folders,
    so pyright, an editor and a structure tool see one module per file, not a second copy under
    loopgate/'s symlinks. (``from loopgate import __version__`` stays: the top package is not
    one of the folders.)"""
    absolute_imports = {
        str(path.relative_to(ROOT)): sorted(
            n for n in imported_modules_absolute(path) if n.startswith("loopgate.")
        )
        for path in sorted((ROOT / layer).rglob("*.py"))
    }
    assert {k: v for k, v in absolute_imports.items() if v} == {}


def imported_modules_absolute(path: Path) -> list[str]:
    """The modules a file names absolutely (``import x`` and ``from x import``)."""
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.append(node.module)
    return names


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_layer_imports_only_point_down(layer: str) -> None:
    offenders = {
        str(path.relative_to(ROOT)): sorted(imported_packages(path) & FORBIDDEN[layer])
        for path in sorted((ROOT / layer).rglob("*.py"))
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_contracts_need_msgspec_only() -> None:
    import sys

    third_party = set()
    for path in (ROOT / "contracts").rglob("*.py"):
        third_party |= imported_packages(path) - set(sys.stdlib_module_names)
    assert third_party - {"contracts", "__future__"} == {"msgspec"}


# Import name → the distribution in [project.dependencies] that provides it.
RUNTIME_DISTRIBUTIONS = {
    "acp": "agent-client-protocol",
    "anyio": "anyio",
    "docstring_parser": "docstring-parser",
    "mcp": "mcp",
    "h11": "h11",
    "httpx": "httpx",
    "json_repair": "json-repair",
    "jsonschema": "jsonschema",
    "jwt": "PyJWT[crypto]",  # as declared, with its extra
    "msgspec": "msgspec",
    "opentelemetry": "opentelemetry-sdk",
    "pydantic": "pydantic",
    "pydantic_core": "pydantic",
    "starlette": "starlette",
    "uvicorn": "uvicorn",
    "websockets": "websockets",
}


def test_shipped_code_imports_only_runtime_dependencies() -> None:
    """A fresh `pip install loopgate` (no test extras) must import every shipped module."""
    import sys
    import tomllib

    declared = {
        dep.split(">")[0].split("=")[0].split("<")[0].strip()
        for dep in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    }
    ours = OURS
    imported: dict[str, set[str]] = {}
    for layer in ours:
        for path in (ROOT / layer).rglob("*.py"):
            if (ROOT / "gateway" / "integrations") in path.parents:
                continue  # each needs its own extra (test_integrations_need_their_extra)
            if str(path.relative_to(ROOT)) in OPTIONAL_MODULES:
                continue  # imported only when asked for (test_optional_modules_need_their_extra)
            for name in imported_packages(path) - ours - set(sys.stdlib_module_names):
                imported.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    undeclared = {
        name: sorted(paths)
        for name, paths in imported.items()
        if RUNTIME_DISTRIBUTIONS.get(name) not in declared
    }
    assert undeclared == {}


# Shipped modules imported only when a setting asks for them → the extra that installs what
# they import beyond the runtime dependencies.
OPTIONAL_MODULES = {  # --journal redis://
    "gateway/journal/redis_streams.py": "redis",
    "gateway/journal/redis_membership.py": "redis",
    "gateway/journal/redis_link.py": "redis",
    "gateway/journal/redis_follow.py": "redis",
    "gateway/journal/redis_connect.py": "redis",
    "gateway/journal/redis_takeover.py": "redis",
    "gateway/identity/quota_redis.py": "redis",
    # --journal postgresql:// (--bus redis://)
    "gateway/journal/postgres.py": "postgres",
    "gateway/journal/postgres_link.py": "postgres",
    "gateway/journal/postgres_cluster.py": "postgres",
    "gateway/journal/postgres_blobs.py": "postgres",
    "gateway/journal/postgres_queue.py": "postgres",
}


def test_optional_modules_need_their_extra() -> None:
    import sys
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    offenders: dict[str, list[str]] = {}
    for module, extra in OPTIONAL_MODULES.items():
        # "redis[hiredis]>=5" → "redis"
        allowed = {dep.split(">")[0].split("=")[0].split("[")[0].strip() for dep in extras[extra]}
        foreign = imported_packages(ROOT / module) - OURS
        foreign -= set(sys.stdlib_module_names) | set(RUNTIME_DISTRIBUTIONS)
        # An import name as a distribution's: psycopg_pool → psycopg-pool.
        bad = sorted(n for n in foreign if n.replace("_", "-") not in allowed)
        if bad:
            offenders[module] = bad
    assert offenders == {}


def test_integrations_need_their_extra() -> None:
    """gateway/integrations/NAME.py (or the package NAME/) may import beyond the runtime
    dependencies only what the extra of the same name (``pip install loopgate[NAME]``) installs."""
    import sys
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    offenders: dict[str, list[str]] = {}
    integrations = ROOT / "gateway" / "integrations"
    for path in sorted(integrations.rglob("*.py")):
        if path.parent == integrations and path.stem == "__init__":
            continue
        # The integration a file belongs to: its own name, or its package's.
        name = path.relative_to(integrations).parts[0].removesuffix(".py")
        extra = extras.get(name.replace("_", "-"), [])
        allowed = {
            dep.split(">")[0].split("=")[0].split("<")[0].strip().replace("-slim", "")
            for dep in extra
        }
        foreign = imported_packages(path) - OURS
        foreign -= set(sys.stdlib_module_names) | set(RUNTIME_DISTRIBUTIONS)
        bad = sorted(n for n in foreign if n.replace("_", "-") not in allowed)
        if bad:
            offenders[str(path.relative_to(ROOT))] = bad
    assert offenders == {}


# Past this a module holds more than one thing: split it by what each part holds.
MAX_MODULE_LINES = 500


@pytest.mark.parametrize("layer", sorted(OURS))
def test_no_module_is_over_500_lines(layer: str) -> None:
    long = {
        str(path.relative_to(ROOT)): lines
        for path in sorted((ROOT / layer).rglob("*.py"))
        if (lines := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}
