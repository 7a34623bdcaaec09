"""Importing the user's own modules (``--loop MODULE:ATTR``, ``--tools MODULE``)."""

from __future__ import annotations

import importlib
import os
import sys
from types import ModuleType


def import_user_module(name: str) -> ModuleType:
    """``name`` imported with the current directory on ``sys.path``, as uvicorn does for its
    app: a module next to where the gateway starts is found without PYTHONPATH."""
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    return importlib.import_module(name)
