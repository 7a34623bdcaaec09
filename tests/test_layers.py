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


def imported_packages(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module.split(".")[0])
    return found


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_layer_imports_only_point_down(layer: str) -> None:
    offenders = {
        str(path.relative_to(ROOT)): sorted(imported_packages(path) & FORBIDDEN[layer])
        for path in sorted((ROOT / layer).rglob("*.py"))
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_contracts_need_msgspec_only() -> None:
    third_party = set()
    for path in (ROOT / "contracts").rglob("*.py"):
        third_party |= imported_packages(path)
    stdlib_or_ours = {
        "__future__",
        "contracts",
        "json",
        "re",
        "functools",
        "importlib",
        "typing",
        "collections",
        "contextlib",
        "msgspec",
    }
    assert third_party - stdlib_or_ours == set()
