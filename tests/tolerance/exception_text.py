"""Where a caught exception's text could leave the process: found by reading the code.

Every ``except … as name`` handler in the server's packages is read for ways of turning the
exception into text: ``str(name)``, ``repr(name)``, ``format(name)``, ``f"{name}"``,
``"%s" % name``, ``name.args``, ``traceback.format_*``. Logging calls are fine (the log is the
operator's); so are ``type(name).__name__`` and the fields our own exceptions carry for clients
(``name.message``, ``name.run_id``…). Anything else must be in :data:`ALLOWED`, with the reason
its text never reaches a protocol client as an error.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("adapters", "contracts", "gateway")

# Fields of our own exceptions that were written for a client (contracts.client_errors,
# contracts.ports, HttpProblem, RpcError, LoopFault, ToolSourceError…).
OUR_FIELDS = frozenset(
    {
        "message",
        "detail",
        "run_id",
        "status",
        "retry_after",
        "cursor",
        "reason",
        "why",
        "code",
        "data",
        "line",
        "max_depth",
        "headers",
        "extra",
        "size",
        "status_code",  # an HTTP status: a number
    }
)
# The normalisers: calling them with an exception is how its client-facing words are had.
SANCTIONED = frozenset({"describe_input_error", "client_message", "_describe"})
LOG_METHODS = frozenset({"debug", "info", "warning", "error", "exception", "critical", "log"})
TEXT_FUNCTIONS = frozenset({"str", "repr", "format", "ascii"})

# (path, function) → why the exception's text may be used there.
ALLOWED: dict[tuple[str, str], str] = {
    ("gateway/config_file.py", "parse_config"): "a [hook_rules] or [prices] problem, read at "
    "startup: the operator's terminal",
    ("gateway/plugs/operator_hooks.py", "from_value"): "msgspec's account of the operator's "
    "[hook_rules] table, at startup: the operator's terminal",
    ("gateway/reference/cost.py", "price_table"): "msgspec's account of the operator's "
    "[prices] table, at startup: the operator's terminal",
    ("gateway/reference/retry.py", "decide"): "retry_after_s is the number parsed from a "
    "server's Retry-After header, no exception text",
    ("contracts/client_errors.py", "describe_input_error"): "the one reader of msgspec's "
    "description of a client's input (it names the input's paths and types), normalised",
    ("contracts/client_errors.py", "client_message"): "reads the message of our own exception "
    "types only (ClientError, the ports' exceptions)",
    ("gateway/reference/tools.py", "execute"): "a ToolFailure's message is the tool's result, "
    "written by the tool for the model",
    ("gateway/tools/functions.py", "call"): "a ToolFailure's message (and pydantic's account "
    "of the model's arguments) is the tool's result, for the model",
    ("gateway/tools/functions.py", "_arguments_model"): "a --tools function that cannot be "
    "described, at startup: the operator's terminal",
    ("gateway/tools/functions.py", "_first_line"): "used by _arguments_model only (startup)",
    ("gateway/tools/functions.py", "from_module"): "--tools at startup: the operator's terminal",
    ("gateway/plugs/build.py", "system_prompt"): "--system-prompt-file at startup: the "
    "operator's terminal",
    ("gateway/tools/mcp_specs.py", "from_command"): "an operator's --mcp command line, at startup",
    ("gateway/plugs/python.py", "load_object"): "--loop at startup: the operator's terminal",
    ("gateway/user_modules.py", "import_user_module"): "a --loop/--tools module that fails to "
    "import, at startup: the operator's terminal (SyntaxError's msg, ImportError's names only)",
    ("gateway/user_modules.py", "_raised_at"): "used by import_user_module only (startup)",
    ("gateway/reference/arithmetic.py", "find_arithmetic"): "_Unreadable is the reader's own, its "
    "words written here for the scripted model's answer",
    ("gateway/settings.py", "*"): "settings at startup: the operator's terminal",
    ("gateway/journal/redis_streams.py", "_commit_failed"): "NotReplicated.wanted is the count of "
    "replicas the journal asked Redis for (an int of ours, not a message): /readyz's reason",
    ("gateway/journal/redis_connect.py", "ping"): "--journal's Redis not answering, said by a "
    "command at startup: the operator's terminal",
    ("gateway/journal/__init__.py", "check_journal"): "--bus's Redis not answering: ping's "
    "ValueError (above) named for the flag, said by a command at startup: the operator's terminal",
    ("gateway/commands/*", "*"): "the command line's own stderr: the operator's terminal",
    ("gateway/config_file.py", "syntax_problem"): "tomllib's account of a syntax error in the "
    "operator's config file (its line, column and what it expected), at startup or `config "
    "check`: the operator's terminal",
    ("gateway/config_file.py", "settings_from"): "Settings' own ValueError messages (written in "
    "gateway/settings.py, already allowed there), placed at a config file's line, at startup",
    ("gateway/agents/reload.py", "reload"): "a config file's problems and a loop module's import "
    "error after an edit, each line logged for the operator of `serve --reload` (the server log)",
    ("gateway/config_file.py", "check_agents"): "an agent table's own ValueError messages "
    "(written in contracts/agents.py and gateway/agents/spec.py), placed at the config file's "
    "line, at startup or `config check`: the operator's terminal",
}


class Leak(NamedTuple):
    path: str
    line: int
    function: str
    code: str


def _names(node: ast.AST) -> Iterator[ast.Name]:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            yield sub


def _is_log_call(node: ast.Call) -> bool:
    func = node.func
    return isinstance(func, ast.Attribute) and func.attr in LOG_METHODS


def _harmless(node: ast.AST, name: str) -> bool:
    """``type(exc).__name__``, ``exc.__class__.__name__``, our own fields (``exc.detail``) and
    the normalisers' results (``describe_input_error(exc)``)."""
    if isinstance(node, ast.Call):
        func = node.func
        called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
        if called in SANCTIONED:
            return True
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return node.value.id == name and node.attr in OUR_FIELDS
    if isinstance(node, ast.Attribute) and node.attr == "__name__":
        inner = node.value
        if isinstance(inner, ast.Call) and getattr(inner.func, "id", None) == "type":
            return True
        return isinstance(inner, ast.Attribute) and inner.attr == "__class__"
    return False


def _mentions(node: ast.AST, name: str) -> bool:
    """Whether ``node`` uses the exception ``name`` in a way that could carry its text."""
    if _harmless(node, name):
        return False
    if isinstance(node, ast.Name):
        return node.id == name
    return any(_mentions(child, name) for child in ast.iter_child_nodes(node))


def _leaks(scope: ast.AST, name: str) -> Iterator[ast.AST]:
    skip: set[int] = set()
    for node in ast.walk(scope):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Call) and _is_log_call(node):
            skip.update(id(n) for n in ast.walk(node))
        elif _turns_into_text(node, name):
            yield node


def _turns_into_text(node: ast.AST, name: str) -> bool:
    if isinstance(node, ast.Call):
        func = node.func
        if getattr(func, "id", None) in TEXT_FUNCTIONS:
            return any(_mentions(a, name) for a in node.args)
        # traceback.format_exc() and friends
        return (
            isinstance(func, ast.Attribute)
            and func.attr.startswith("format_")
            and getattr(func.value, "id", None) == "traceback"
        )
    if isinstance(node, ast.FormattedValue):
        return _mentions(node.value, name)
    if isinstance(node, ast.Attribute) and node.attr == "args":
        return isinstance(node.value, ast.Name) and node.value.id == name
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        return _mentions(node.right, name)
    return False


def _allowed(path: str, function: str) -> bool:
    for (where, what), _reason in ALLOWED.items():
        same_file = path == where or (where.endswith("/*") and path.startswith(where[:-1]))
        if same_file and what in ("*", function):
            return True
    return False


def find_leaks(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> list[Leak]:
    found: list[Leak] = []
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            source = path.read_text(encoding="utf-8")
            tree = ast.parse(source, rel)
            functions: dict[int, str] = {}
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    for sub in ast.walk(node):
                        # Innermost wins: walk visits outer functions first.
                        functions[id(sub)] = node.name
            for scope, name in _exception_scopes(tree):
                function = functions.get(id(scope), "<module>")
                if isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef):
                    function = scope.name
                if _allowed(rel, function):
                    continue
                for leak in _leaks(scope, name):
                    code = ast.get_source_segment(source, leak) or ""
                    found.append(Leak(rel, getattr(leak, "lineno", 0), function, code))
    return sorted(set(found))


def _exception_scopes(tree: ast.AST) -> Iterator[tuple[ast.AST, str]]:
    """Every place an exception is in hand: ``except … as name`` bodies, and functions that
    take one (a parameter named ``exc`` or annotated as an exception or error)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ExceptHandler):
            # Unnamed handlers too: traceback.format_exc() needs no name.
            yield node, node.name or ""
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for arg in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]:
                note = ast.unparse(arg.annotation) if arg.annotation is not None else ""
                if arg.arg == "exc" or any(w in note for w in ("Exception", "Error")):
                    yield node, arg.arg
