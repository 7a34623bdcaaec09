"""Runs' event logs as MCP resources: ``loopgate://runs/{run_id}/events``, NDJSON envelopes.

``resources/list`` lists the newest runs' logs; the template names every run's. A log read
while its run goes holds the events so far.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote, unquote

from ...contracts.envelope import encode_envelope
from ...contracts.history import last_user_text
from ...contracts.ports import RunInfo, RunService

SCHEME = "loopgate"
TEMPLATE = "loopgate://runs/{run_id}/events"
MIME_TYPE = "application/x-ndjson"
LISTED = 100  # resources/list: the newest runs, no more
_URI = re.compile(r"loopgate://runs/([^/?#]+)/events")


class NotARunLog(Exception):
    """A URI that names no run's event log."""


def events_uri(run_id: str) -> str:
    return f"{SCHEME}://runs/{quote(run_id, safe='')}/events"


def run_of(uri: str) -> str:
    """The run id an event-log URI names; :class:`NotARunLog` for any other URI."""
    found = _URI.fullmatch(uri)
    if found is None:
        raise NotARunLog(uri)
    run_id = unquote(found.group(1))
    if not run_id:
        raise NotARunLog(uri)
    return run_id


def template() -> dict[str, Any]:
    return {
        "uriTemplate": TEMPLATE,
        "name": "run-events",
        "title": "A run's event log",
        "description": "Every event of the run, one JSON envelope {run_id, seq, ts, kind, data} "
        "per line (docs/architecture.md, the event envelope).",
        "mimeType": MIME_TYPE,
    }


def listed(info: RunInfo) -> dict[str, Any]:
    state = info.state if info.status is None else f"{info.state}, {info.status}"
    asked = last_user_text(info.input)
    description = f"{state}; thread {info.thread_id}; {info.last_seq} events"
    if asked:
        shown = " ".join(asked.split())
        description += f"; asked: {shown[:77] + '…' if len(shown) > 80 else shown}"
    return {
        "uri": events_uri(info.id),
        "name": f"run-events-{info.id}",
        "title": f"Events of run {info.id}",
        "description": description,
        "mimeType": MIME_TYPE,
    }


async def list_logs(service: RunService) -> list[dict[str, Any]]:
    return [listed(info) for info in await service.list_runs(limit=LISTED)]


async def read_log(service: RunService, run_id: str) -> bytes:
    """The run's events so far as NDJSON (RunNotFound / RunGone for a run not kept)."""
    await service.get(run_id)  # a run without events yet is still a run
    events = await service.history(run_id)
    return b"".join(encode_envelope(env) + b"\n" for env in events)
