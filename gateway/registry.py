"""Adapters are found through the ``loopgate.adapters`` entry-point group, ours included."""

from __future__ import annotations

import logging
from importlib.metadata import entry_points

from contracts.projector import Adapter

log = logging.getLogger("loopgate.registry")
GROUP = "loopgate.adapters"


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
