"""Adapters are found through the ``loopgate.adapters`` entry-point group, ours included."""

from __future__ import annotations

import logging
from importlib.metadata import entry_points

from ..contracts.projector import Adapter, StdioAdapter, serves_stdio

log = logging.getLogger("loopgate.registry")
GROUP = "loopgate.adapters"
# Former names that still find their adapter (``loopgate replay --adapter sse``).
ALIASES = {"sse": "native"}


def load_adapters() -> dict[str, Adapter]:
    adapters: dict[str, Adapter] = {}
    for ep in entry_points(group=GROUP):
        try:
            adapter = ep.load()
        except Exception:
            # One broken plug-in must not take the gateway down with it.
            log.exception("could not load adapter %s (%s)", ep.name, ep.value)
            continue
        adapters[adapter.name] = adapter
    return dict(sorted(adapters.items()))


def find_adapter(adapters: dict[str, Adapter], name: str) -> Adapter | None:
    """The adapter called ``name``, or one of its former names."""
    return adapters.get(name) or adapters.get(ALIASES.get(name, ""))


def stdio_adapter(name: str) -> StdioAdapter:
    """The adapter serving protocol ``name`` on stdin/stdout; LookupError if none does."""
    adapter = find_adapter(load_adapters(), name)
    if adapter is None or not serves_stdio(adapter):
        raise LookupError(f"no installed adapter serves {name!r} on stdio")
    return adapter
