"""The files a roster of agents is built from, and how ``serve --reload`` tells they changed.

A handful of files polled for their size, modification time and inode (an editor that saves by
writing a new file and renaming it over the old one changes the inode alone): no file-system
notification service, which would be a dependency for the few files a roster has.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import sys
from collections.abc import Iterable, Mapping

from ..settings import Settings
from .spec import AgentSpec

# (st_mtime_ns, st_size, st_ino) of a file; None while it does not exist.
Mark = tuple[int, int, int] | None
# Watched file → the module it holds (None: the config file, a system prompt).
Files = dict[str, str | None]


def watched_files(settings: Settings, config: str | None) -> Files:
    """The config file, and each agent's Python loop module, tools modules and system prompt
    file. A module that cannot be found (yet) is not watched: saving the config again, once it
    exists, reloads it."""
    files: Files = {}
    if config:
        files[os.path.abspath(config)] = None
    owners: list[Settings | AgentSpec] = [settings, *settings.agents.values()]
    for own in owners:
        modules = [own.loop.partition(":")[0]] if own.loop else []
        for module in [*modules, *own.tools]:
            path = module_file(module)
            if path is not None:
                files[path] = module
        if own.system_prompt_file:
            files[os.path.abspath(own.system_prompt_file)] = None
    return files


def module_file(name: str) -> str | None:
    """The source file module ``name`` is imported from, or None."""
    try:
        # Imports the packages above it: one of the user's may fail, with any exception.
        spec = importlib.util.find_spec(name)
    except Exception:
        return None
    if spec is None or not spec.has_location or not spec.origin:
        return None
    return os.path.abspath(spec.origin)


def marks(paths: Iterable[str]) -> dict[str, Mark]:
    return {path: mark(path) for path in paths}


def mark(path: str) -> Mark:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def forget_modules(changed: Mapping[str, str | None]) -> None:
    """Drop the changed files' modules, so the next import runs their new code. A fresh module
    object, not ``importlib.reload``: a run still going on the old loop keeps the globals it
    started with. Their cached bytecode goes too: Python trusts it while the source's size and
    modification second are unchanged, as after a quick edit of a word for another as long."""
    for path, module in changed.items():
        if module is None:
            continue
        sys.modules.pop(module, None)
        with contextlib.suppress(OSError, ValueError, NotImplementedError):
            os.unlink(importlib.util.cache_from_source(path))
    importlib.invalidate_caches()
