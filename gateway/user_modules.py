"""Importing the user's own modules (``--loop MODULE:ATTR``, ``--tools MODULE``).

A module that cannot be imported is the user's to fix, so what went wrong is said in one line
with the file and line it went wrong at (as a compiler would), never as a traceback: the
commands print it and exit 2.
"""

from __future__ import annotations

import importlib
import os
import sys
import sysconfig
import traceback
from types import ModuleType


class UserModuleError(ValueError):
    """A module the command line names cannot be used; the message says why, in one line."""


def import_user_module(name: str, flag: str) -> ModuleType:
    """``name`` imported with the current directory on ``sys.path``, as uvicorn does for its
    app: a module next to where the gateway starts is found without PYTHONPATH. ``flag`` (e.g.
    ``--loop my_loop:loop``) starts the message of the :class:`UserModuleError` raised when the
    module is missing or fails while it is imported."""
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module(name)
    except SyntaxError as exc:  # IndentationError and TabError too
        where = _place(exc.filename, exc.lineno)
        raise UserModuleError(f"{flag}: {where}: {type(exc).__name__}: {exc.msg}") from exc
    except ModuleNotFoundError as exc:
        if exc.name is not None and (name == exc.name or name.startswith(exc.name + ".")):
            raise UserModuleError(f"{flag}: {_not_found(name)}") from exc
        raise UserModuleError(f"{flag}: {_raised_at(exc)}") from exc
    except Exception as exc:
        # Chained: a caller that logs it has the traceback; the commands print only the line.
        raise UserModuleError(f"{flag}: {_raised_at(exc)}") from exc


def user_attribute(module: ModuleType, attr: str, flag: str) -> object:
    """``module.attr`` (``attr`` may be dotted); UserModuleError naming the module's file."""
    target: object = module
    for part in attr.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            where = relative_path(module.__file__) if module.__file__ else module.__name__
            raise UserModuleError(f"{flag}: {where} has no attribute {attr!r}") from None
    return target


def _not_found(name: str) -> str:
    if name.endswith(".py"):
        module = name.removesuffix(".py").replace(os.sep, ".").lstrip(".")
        return f"give a module name ({module}), not a file name"
    return (
        f"no module named {name!r} in {os.getcwd()} or the installed packages "
        "(run from the directory that holds it, or set PYTHONPATH)"
    )


def _raised_at(exc: BaseException) -> str:
    """``file:line: Type: message`` of an exception raised while a module was imported: the
    line is the user's own where the traceback passes through their code."""
    frames = [
        f
        for f in traceback.extract_tb(exc.__traceback__)
        if not f.filename.startswith("<") and f.filename != __file__  # importlib's, this one's
    ]
    installed = tuple(
        os.path.realpath(p) + os.sep
        for p in {sysconfig.get_path(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    )
    own = [f for f in frames if not os.path.realpath(f.filename).startswith(installed)]
    said = f"{type(exc).__name__} while importing"
    if isinstance(exc, ImportError):
        # Its words name a module or a name, never a value of the user's; any other
        # exception's text may hold a secret (a KeyError of a token) and is left out.
        text = str(exc).strip().splitlines()
        said = f"{type(exc).__name__}: {text[0][:300]}" if text else said
    chosen = own or frames
    return f"{_place(chosen[-1].filename, chosen[-1].lineno)}: {said}" if chosen else said


def _place(filename: str | None, line: int | None) -> str:
    return f"{relative_path(filename or '?')}:{line or '?'}"


def relative_path(path: str) -> str:
    """``path`` relative to the current directory when it lies under it (shorter, clickable)."""
    try:
        relative = os.path.relpath(path)
    except ValueError:
        return path
    return path if relative.startswith("..") else relative
