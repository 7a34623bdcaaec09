"""No module reaches into another's private names.

A ``_name`` is a module's own business: outside it, the module may change it without a word.
So ``x._name`` in gateway/, adapters/ and contracts/ is allowed only where ``_name`` is the
accessing module's own (defined, assigned or declared in the same file), on ``self``/``cls``/
``super()``, or in the allowlist below, each entry with its reason (mostly the standard
library's and dependencies' underscored names that are public in practice).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("gateway", "adapters", "contracts")

# (file, accessed expression) → why it is allowed.
ALLOWED: dict[tuple[str, str], str] = {
    # NamedTuple's documented API is underscored so it cannot clash with field names.
    ("adapters/agui/runs.py", "plan._replace"): "typing.NamedTuple._replace is public API",
    ("adapters/shared/parts.py", "earlier._replace"): "typing.NamedTuple._replace is public API",
    ("gateway/journal/redis_connect.py", "parts._replace"): "urllib's SplitResult._replace",
    ("gateway/journal/postgres_link.py", "parts._replace"): "urllib's SplitResult._replace",
    # argparse has no public name for the type of add_subparsers()' result or of a group.
    ("gateway/cli.py", "argparse._SubParsersAction"): "argparse exposes no public name for it",
    ("gateway/cli.py", "parser._actions"): "argparse offers no public list of a parser's actions",
    ("gateway/commands/acp.py", "argparse._SubParsersAction"): "argparse: no public name",
    ("gateway/commands/config.py", "argparse._SubParsersAction"): "argparse: no public name",
    ("gateway/commands/flags.py", "argparse._ActionsContainer"): "argparse: no public name",
    ("gateway/commands/keys.py", "argparse._SubParsersAction"): "argparse: no public name",
    ("gateway/commands/mcp.py", "argparse._SubParsersAction"): "argparse: no public name",
    ("gateway/commands/replay.py", "argparse._SubParsersAction"): "argparse: no public name",
    ("gateway/commands/rpc.py", "argparse._SubParsersAction"): "argparse: no public name",
    ("gateway/commands/serve.py", "argparse._SubParsersAction"): "argparse: no public name",
    # The stall watchdog's whole point: the stacks of a stuck event loop's thread.
    ("gateway/stall_watchdog.py", "sys._current_frames"): "documented in sys; the only way",
}


def own_private_names(tree: ast.AST) -> set[str]:
    """The underscored names a module defines for itself: functions, classes, attributes it
    assigns or declares anywhere in the file."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names.add(node.value)  # __slots__ entries
    return {n for n in names if n.startswith("_")}


def foreign_private_access(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    own = own_private_names(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        name = node.attr
        if not name.startswith("_") or name.startswith("__") or name in own:
            continue
        target = node.value
        if isinstance(target, ast.Name) and target.id in ("self", "cls"):
            continue
        found.append(ast.unparse(node))
    return found


def test_no_module_reaches_into_another_modules_private_names() -> None:
    offenders = []
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            relative = str(path.relative_to(ROOT))
            for access in foreign_private_access(path):
                if (relative, access) not in ALLOWED:
                    offenders.append(f"{relative}: {access}")
    assert offenders == []


def test_every_allowlist_entry_is_still_needed() -> None:
    """An entry whose access is gone goes too, so the list stays the truth."""
    found = {
        (str(path.relative_to(ROOT)), access)
        for folder in FOLDERS
        for path in (ROOT / folder).rglob("*.py")
        for access in foreign_private_access(path)
    }
    assert sorted(set(ALLOWED) - found) == []


def test_the_check_sees_a_foreign_private_access(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "class A:\n"
        "    def __init__(self):\n"
        "        self._mine = 1\n"
        "    def f(self, other):\n"
        "        return self._mine, other._mine, other._theirs, self._x\n"
    )
    assert foreign_private_access(module) == ["other._theirs"]
