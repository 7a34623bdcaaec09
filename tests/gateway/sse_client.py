"""Reading event streams the way clients do: httpx + httpx-sse (a WHATWG-conformant parser)."""

from __future__ import annotations

import json
from typing import Any

import httpx
from httpx_sse import ServerSentEvent, aconnect_sse, connect_sse


def read_stream(
    base: str,
    run_id: str,
    headers: dict[str, str] | None = None,
    params: dict[str, Any] | None = None,
    timeout: float = 20,
) -> list[ServerSentEvent]:
    with (
        httpx.Client(base_url=base, timeout=timeout) as client,
        connect_sse(
            client, "GET", f"/v1/runs/{run_id}/events", headers=dict(headers or {}), params=params
        ) as source,
    ):
        source.response.raise_for_status()
        return list(source.iter_sse())


async def aread_stream(client: httpx.AsyncClient, run_id: str, **kw: Any) -> list[ServerSentEvent]:
    async with aconnect_sse(client, "GET", f"/v1/runs/{run_id}/events", **kw) as source:
        source.response.raise_for_status()
        return [e async for e in source.aiter_sse()]


def envelopes(events: list[ServerSentEvent]) -> list[dict[str, Any]]:
    return [json.loads(e.data) for e in events]
