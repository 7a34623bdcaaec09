"""A live gateway in front of the sample loop, plugged in each of the three ways."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.fakes.servers import serve_app
from tests.gateway.harness import REPO, running_gateway
from tests.plugs.sample_http import sample_app

# python-thread: the same Python loop, each run driven in a worker thread (--loop-runner thread).
PLUGS = ("python", "python-thread", "http", "stdio")
SAMPLE = "tests.plugs.sample_loop:sample"


def stdio_command(*extra: str) -> str:
    return shlex.join([sys.executable, "-m", "tests.plugs.sample_stdio", *extra])


@contextmanager
def plug_settings(plug: str, path: str = "/loop") -> Iterator[dict[str, Any]]:
    """The settings that plug the sample loop in (its HTTP server runs meanwhile)."""
    if plug == "python":
        yield {"loop": SAMPLE}
    elif plug == "python-thread":
        yield {"loop": SAMPLE, "loop_runner": "thread"}
    elif plug == "http":
        app = sample_app()
        with serve_app(app) as base:
            yield {"loop_url": base + path, "_app": app}
    elif plug == "stdio":
        yield {"loop_cmd": stdio_command()}
    else:
        raise ValueError(plug)


@contextmanager
def plugged_gateway(plug: str, **overrides: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    """A real gateway (uvicorn, 127.0.0.1) serving the sample loop; yields its base URL and
    the plug's settings (``_app``: the HTTP sample app, to read what it was sent)."""
    with plug_settings(plug) as plugged:
        settings = {k: v for k, v in plugged.items() if not k.startswith("_")}
        with running_gateway(**settings, **overrides) as (base, _server):
            yield base, plugged


__all__ = ["PLUGS", "REPO", "plugged_gateway", "stdio_command"]
