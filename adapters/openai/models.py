"""The model names ``/v1/models`` lists and a request's ``model`` must be one of.

Every name runs the one loop this gateway serves (there is no routing by model): ``loopgate``,
which stays the same whatever the loop is, and what the loop is called — the reference loop's
model (``loopgate-scripted`` for the embedded one, ``--openai-model`` for a real one), or a
plugged loop's name (``python:pkg.mod:attr``, ``http:URL``, ``stdio:COMMAND``).

The names are read from the run service's ``loop`` (contracts.loop.AgentLoop: its ``name``,
and the reference loop's ``provider.model``), which the gateway's hub exposes; a service
without one (another implementation of the port) is served as ``loopgate`` alone.
"""

from __future__ import annotations

from loopgate.adapters.shared.served import served_loop
from loopgate.contracts.ports import RunService

ALIAS = "loopgate"
# The reference loop's own name says nothing its model does not.
_UNNAMED = ("", "reference")


def model_names(service: RunService) -> list[str]:
    names = [ALIAS]
    name, model = served_loop(service)
    for found in (model, name):
        if found is not None and found not in _UNNAMED and found not in names:
            names.append(found)
    return names
