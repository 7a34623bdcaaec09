"""The reference loop stays readable: small modules, small functions."""

from __future__ import annotations

import ast
from pathlib import Path

import loopgate.gateway.reference

PACKAGE = Path(loopgate.gateway.reference.__file__).parent
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 60


def test_no_module_or_function_of_the_loop_is_too_long() -> None:
    too_long: list[str] = []
    for path in sorted(PACKAGE.glob("*.py")):
        source = path.read_text(encoding="utf-8")
        if len(source.splitlines()) > MAX_MODULE_LINES:
            too_long.append(f"{path.name}: {len(source.splitlines())} lines")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    too_long.append(f"{path.name}:{node.lineno} {node.name}: {length} lines")
    assert too_long == []
