"""docs/architecture.md's "path of one event" names real files and functions.

The section walks an event from a plugged loop to an AG-UI frame, and a ``POST /agui`` to the
loop, naming each file and function on the way. A rename that the doc does not follow fails
here: every backticked path must exist, every backticked ``Class.member`` must be defined in
that class, and every other backticked name must be a function or class of the code.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
FOLDERS = ("gateway", "adapters", "contracts")
NAME = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)?$")


def section() -> str:
    text = DOC.read_text()
    start = text.index("## The path of one event")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def code_spans(text: str) -> list[str]:
    return re.findall(r"`([^`]+)`", text)


def definitions() -> tuple[set[str], dict[str, set[str]]]:
    """Every function and class name of the code, and each class's members (its methods and
    the attributes it assigns on ``self`` or in its body)."""
    names: set[str] = set()
    members: dict[str, set[str]] = defaultdict(set)
    for folder in FOLDERS:
        for path in (ROOT / folder).rglob("*.py"):
            tree = ast.parse(path.read_text(), str(path))
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    names.add(node.name)
                if isinstance(node, ast.ClassDef):
                    for inner in ast.walk(node):
                        if isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef):
                            members[node.name].add(inner.name)
                        elif isinstance(inner, ast.Attribute) and isinstance(inner.ctx, ast.Store):
                            members[node.name].add(inner.attr)
    return names, members


def test_the_paths_name_files_that_exist() -> None:
    paths = [span for span in code_spans(section()) if span.endswith(".py")]
    assert len(paths) >= 10, "the section names the files of each step"
    assert [p for p in paths if not (ROOT / p).is_file()] == []


def test_the_paths_name_functions_that_exist() -> None:
    names, members = definitions()
    spans = [s for s in code_spans(section()) if NAME.match(s) and not s.endswith(".py")]
    # Wire names (AG-UI event types) are the protocol's, not the code's.
    spans = [s for s in spans if not s.isupper()]
    assert len(spans) >= 20, "the section names the function of each step"
    missing = []
    for span in spans:
        owner, _, member = span.partition(".")
        if member:
            if member not in members.get(owner, set()):
                missing.append(span)
        elif span not in names:
            missing.append(span)
    assert missing == []


def test_the_check_catches_a_renamed_function() -> None:
    names, members = definitions()
    assert "publish" in members["Hub"]
    assert "publish_now" not in members["Hub"]
    assert "plan_run" in names
