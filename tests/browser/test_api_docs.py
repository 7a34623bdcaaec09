"""The page at ``/docs`` in headless Chromium (tests/node/apidocs-drive.mjs): it shows every
operation of ``/openapi.json``, opens one with its body and answers, links to the schemas, and
asks nothing of any host but the gateway (no CDN: many gateways run offline)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from tests.browser.support import run_browser
from tests.gateway.harness import running_gateway

DRIVER = "apidocs-drive.mjs"
TOKEN = "docs-s3cret-012345"
OPEN = {"GET /healthz", "GET /readyz", "GET /openapi.json", "GET /docs"}


def described(document: dict[str, Any]) -> list[str]:
    return [
        f"{method.upper()} {path}" for path, item in document["paths"].items() for method in item
    ]


def assert_shown(report: dict[str, Any], base: str, document: dict[str, Any]) -> None:
    assert report["problems"] == [], report["problems"]
    # 150-400 ms from navigation here (headless Chromium, 2 busy cores); the bound is loose.
    assert 0 < report["loadedMs"] < 5000, report["loadedMs"]
    assert sorted(report["operations"]) == sorted(described(document))
    assert report["tags"] == [t["name"] for t in document["tags"]]
    opened = report["startRun"]
    for text in ("Request body", "application/json", "StartBody", "201", "RunView", "422"):
        assert text in opened, (text, opened)
    assert "links" in report["runView"] and "RunLinks" in report["runView"]
    # Every node was drawn as one: none turned into text such as "[object HTMLDivElement]".
    assert "[object" not in report["text"]
    stream = report["streamEvents"]
    assert "text/event-stream" in stream and "each item" in stream and "Envelope" in stream
    socket = report["ingestSocket"]
    assert "WebSocket frames you send" in socket and "LoopEvent" in socket and "101" in socket
    # Every request the page made went to the gateway, and none failed.
    requests = report["network"]
    assert {r["url"] for r in requests} >= {f"{base}/docs", f"{base}/openapi.json"}
    elsewhere = [r for r in requests if not r["url"].startswith(base + "/")]
    assert elsewhere == [], elsewhere
    assert all(r.get("status") == 200 for r in requests), requests


def test_the_page_shows_the_description_from_the_gateway_alone(browser_artifacts: Path) -> None:
    with (
        running_gateway() as (base, _),
        running_gateway(token=TOKEN) as (secured_base, _),
    ):
        document = httpx.get(f"{base}/openapi.json").json()
        secured_document = httpx.get(f"{secured_base}/openapi.json").json()
        config = {"open": {"gateway": base}, "secured": {"gateway": secured_base}}
        report = run_browser(config, browser_artifacts, script=DRIVER)

    assert report["open"]["title"] == "loopgate API"
    assert_shown(report["open"], base, document)
    assert report["open"]["locked"] == 0
    # Served without the token; every operation but the open ones is marked as needing it.
    assert_shown(report["secured"], secured_base, secured_document)
    assert report["secured"]["locked"] == len(described(secured_document)) - len(OPEN)
    assert "bearerToken: The gateway's token" in report["secured"]["intro"]
