"""Keys and native-API helpers for the quota tests (tests/identity, tests/redis).

Two principals of one tenant (alice and carol of acme), one of another (bob of globex), an
admin (root, ops) and an admin whose key lifts the concurrency quota (free: ``concurrent_runs``
0), written with the gateway's own key functions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import msgspec

from loopgate.contracts.principal import Quota, Scope
from tests.identity.principals import TestKey, write_test_keys

# name -> (subject, tenant, scope)
QUOTA_PEOPLE: dict[str, tuple[str, str, Scope]] = {
    "alice": ("alice", "acme", "run"),
    "carol": ("carol", "acme", "run"),
    "bob": ("bob", "globex", "run"),
    "root": ("root", "ops", "admin"),
    "free": ("free", "ops", "admin"),
}


def write_quota_keys(path: Path) -> dict[str, TestKey]:
    return write_test_keys(path, QUOTA_PEOPLE, {"free": Quota(concurrent_runs=0)})


def start(http: httpx.Client, who: TestKey, **body: Any) -> httpx.Response:
    """POST /v1/runs as ``who``: an ingest run unless ``body`` says otherwise."""
    return http.post("/v1/runs", json={"source": "ingest", **body}, headers=who.headers)


def started(http: httpx.Client, who: TestKey, **body: Any) -> str:
    response = start(http, who, **body)
    assert response.status_code in (200, 201), response.text
    run_id: str = response.json()["id"]
    return run_id


def push(
    http: httpx.Client, who: TestKey, run_id: str, *events: tuple[str, dict[str, Any]]
) -> httpx.Response:
    lines = b"".join(
        msgspec.json.encode({"kind": kind, "data": data}) + b"\n" for kind, data in events
    )
    response = http.post(f"/v1/runs/{run_id}/events", content=lines, headers=who.headers)
    assert response.status_code == 200, response.text
    return response


def finish(http: httpx.Client, who: TestKey, run_id: str, status: str = "completed") -> None:
    push(http, who, run_id, ("completion", {"status": status}))


def refused(response: httpx.Response, quota: str) -> dict[str, Any]:
    """The problem of a start refused for ``quota``: 429, Retry-After, the quota named."""
    assert response.status_code == 429, response.text
    assert int(response.headers["retry-after"]) >= 1
    problem: dict[str, Any] = response.json()
    assert f"quota exceeded: {quota}" in problem["detail"], problem
    return problem
