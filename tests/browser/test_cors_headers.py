"""CORS at the header level, over real sockets: what a browser is told before and after each
request a web page makes, from allowed origins and from others."""

from __future__ import annotations

import json

import httpx
import pytest
import websockets.exceptions
import websockets.sync.client as ws_client
from starlette.types import Receive, Scope, Send
from websockets.typing import Origin

from loopgate.contracts.limits import EndpointLimits
from loopgate.gateway.cors import BrowserAccess
from tests.gateway.harness import running_gateway

PAGE = "http://localhost:5173"
LOOPBACK_ORIGINS = [
    PAGE,
    "http://127.0.0.1:3000",
    "http://[::1]:8080",
    "https://localhost:8443",
    "http://localhost",
    "https://127.0.0.1",
]
OTHER_ORIGINS = [
    "https://evil.example",
    "http://localhost.evil.example:5173",
    "http://127.0.0.2:5173",  # loopback too, but not one of the names pages are served from
    "null",  # a sandboxed frame, a file:// page
]
# Origins no browser sends (not a serialised origin): refused by CORS and the Origin guard alike.
ODD_ORIGINS = ["http://localhost:5173.evil.example", "ws://localhost:5173", "file://"]
# Every endpoint a page uses, with the method it uses it with ({id}: a run that exists).
ENDPOINTS = [
    ("POST", "/v1/runs"),
    ("GET", "/v1/runs"),
    ("GET", "/v1/runs/{id}"),
    ("GET", "/v1/runs/{id}/events"),
    ("POST", "/v1/runs/{id}/events"),
    ("POST", "/v1/runs/{id}/cancel"),
    ("POST", "/v1/runs/{id}/steer"),
    ("POST", "/v1/runs/{id}/respond"),
    ("POST", "/v1/threads"),
    ("DELETE", "/v1/threads/{id}"),
    ("GET", "/v1/contract"),
    ("POST", "/agui"),
    ("POST", "/rpc"),
    ("GET", "/healthz"),
]
# What our clients send: the token, an EventSource's cursor, the AG-UI client's headers.
ASKED_HEADERS = "content-type, authorization, last-event-id, accept, traceparent"
TOKEN = "t0k-browser-012345"
DONE = {"kind": "completion", "data": {"status": "completed"}}


@pytest.fixture(scope="module")
def run_id(gateway: str) -> str:
    started = httpx.post(f"{gateway}/v1/runs", json={"source": "ingest"})
    assert started.status_code == 201
    run: str = started.json()["id"]
    ended = httpx.post(f"{gateway}/v1/runs/{run}/events", content=json.dumps(DONE) + "\n")
    assert ended.status_code == 200
    return run


def preflight(base: str, path: str, origin: str, method: str = "POST") -> httpx.Response:
    return httpx.options(
        f"{base}{path}",
        headers={
            "origin": origin,
            "access-control-request-method": method,
            "access-control-request-headers": ASKED_HEADERS,
        },
    )


def cors_headers(response: httpx.Response) -> dict[str, str]:
    return {k: v for k, v in response.headers.items() if k.startswith("access-control-")}


def assert_allowed_preflight(response: httpx.Response, origin: str, method: str) -> None:
    assert response.status_code == 200, response.text
    headers = response.headers
    assert headers["access-control-allow-origin"] == origin
    assert method in [m.strip() for m in headers["access-control-allow-methods"].split(",")]
    allowed = {h.strip().lower() for h in headers["access-control-allow-headers"].split(",")}
    assert {h.strip() for h in ASKED_HEADERS.split(",")} <= allowed
    assert "access-control-allow-credentials" not in headers
    assert "origin" in headers["vary"].lower()


def assert_allowed_answer(response: httpx.Response, origin: str) -> None:
    assert response.headers["access-control-allow-origin"] == origin
    assert "access-control-allow-credentials" not in response.headers
    exposed = {h.strip() for h in response.headers["access-control-expose-headers"].split(",")}
    assert {"location", "retry-after"} <= exposed
    assert "origin" in response.headers["vary"].lower()


@pytest.mark.parametrize(("method", "path"), ENDPOINTS)
def test_every_endpoint_answers_a_loopback_pages_preflight_without_a_flag(
    gateway: str, run_id: str, method: str, path: str
) -> None:
    response = preflight(gateway, path.format(id=run_id), PAGE, method)
    assert_allowed_preflight(response, PAGE, method)


@pytest.mark.parametrize("origin", LOOPBACK_ORIGINS)
def test_every_loopback_origin_any_port_http_or_https_is_allowed(gateway: str, origin: str) -> None:
    assert_allowed_preflight(preflight(gateway, "/v1/runs", origin), origin, "POST")
    assert_allowed_answer(httpx.get(f"{gateway}/v1/runs", headers={"origin": origin}), origin)


def test_the_answers_a_page_reads_carry_cors(gateway: str, run_id: str) -> None:
    page = {"origin": PAGE}
    started = httpx.post(f"{gateway}/v1/runs", json={"source": "ingest"}, headers=page)
    assert started.status_code == 201
    assert_allowed_answer(started, PAGE)
    new = started.json()["id"]
    for path in (f"/v1/runs/{run_id}", "/v1/runs", "/healthz", "/v1/contract"):
        answer = httpx.get(f"{gateway}{path}", headers=page)
        assert answer.status_code == 200
        assert_allowed_answer(answer, PAGE)
    # The event stream, from the start and as a reconnect at its end (the 204).
    with httpx.stream("GET", f"{gateway}/v1/runs/{run_id}/events", headers=page) as stream:
        assert stream.status_code == 200
        assert stream.headers["content-type"].startswith("text/event-stream")
        assert_allowed_answer(stream, PAGE)
        assert b'"kind":"completion"' in stream.read()
    reconnect = httpx.get(
        f"{gateway}/v1/runs/{run_id}/events", headers={**page, "last-event-id": "1"}
    )
    assert reconnect.status_code == 204
    assert_allowed_answer(reconnect, PAGE)
    # Commands, and their errors: a page must be able to read a problem, not just a failure.
    steer = httpx.post(f"{gateway}/v1/runs/{new}/steer", json={"content": "hi"}, headers=page)
    assert steer.status_code in (200, 202), steer.text
    assert_allowed_answer(steer, PAGE)
    cancel = httpx.post(f"{gateway}/v1/runs/{new}/cancel", headers=page)
    assert cancel.status_code == 202, cancel.text
    assert_allowed_answer(cancel, PAGE)
    respond = httpx.post(
        f"{gateway}/v1/runs/{new}/respond",
        json={"request_id": "nope", "decision": "allow_once"},
        headers=page,
    )
    assert respond.status_code in (200, 202), respond.text
    assert_allowed_answer(respond, PAGE)
    missing = httpx.post(f"{gateway}/v1/runs/run_nope/steer", json={"content": "x"}, headers=page)
    assert missing.status_code == 404
    assert missing.headers["content-type"] == "application/problem+json"
    assert_allowed_answer(missing, PAGE)
    rpc = httpx.post(
        f"{gateway}/rpc", json={"jsonrpc": "2.0", "id": 1, "method": "run.list"}, headers=page
    )
    assert rpc.status_code == 200 and "result" in rpc.json()
    assert_allowed_answer(rpc, PAGE)
    agui_input = {
        "threadId": "t-cors",
        "runId": "r-cors",
        "state": {},
        "messages": [{"id": "m1", "role": "user", "content": "plain hello"}],
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }
    with httpx.stream(
        "POST",
        f"{gateway}/agui",
        json=agui_input,
        headers={**page, "accept": "text/event-stream"},
    ) as agui:
        assert agui.status_code == 200
        assert_allowed_answer(agui, PAGE)
        assert b"RUN_FINISHED" in agui.read()


@pytest.mark.parametrize("origin", [*OTHER_ORIGINS, *ODD_ORIGINS])
def test_other_origins_get_no_cors_headers_at_all(gateway: str, origin: str) -> None:
    refused = preflight(gateway, "/v1/runs", origin)
    assert refused.status_code == 403
    assert refused.headers["content-type"] == "application/problem+json"
    assert "--allowed-origin" in refused.json()["detail"]
    assert cors_headers(refused) == {}
    read = httpx.get(f"{gateway}/v1/runs", headers={"origin": origin})
    assert read.status_code == 200  # the browser hides it from the page
    assert cors_headers(read) == {}
    post = httpx.post(f"{gateway}/v1/runs", json={"source": "ingest"}, headers={"origin": origin})
    assert post.status_code == 403  # the Origin guard: the same rule as CORS
    assert cors_headers(post) == {}


def test_requests_without_an_origin_are_not_cors(gateway: str) -> None:
    answer = httpx.get(f"{gateway}/healthz")
    assert answer.status_code == 200 and cors_headers(answer) == {}
    # An OPTIONS that is not a preflight is no CORS business either.
    plain = httpx.options(f"{gateway}/v1/runs", headers={"origin": PAGE})
    assert plain.status_code == 405


def test_the_dns_rebinding_guard_answers_before_cors(gateway: str) -> None:
    rebound = httpx.options(
        f"{gateway}/v1/runs",
        headers={
            "host": "attacker.example",
            "origin": "http://attacker.example",
            "access-control-request-method": "POST",
        },
    )
    assert rebound.status_code == 421
    assert cors_headers(rebound) == {}
    # Even with an origin that is allowed: the Host is what the guard judges.
    spoofed = httpx.options(
        f"{gateway}/v1/runs",
        headers={
            "host": "attacker.example",
            "origin": PAGE,
            "access-control-request-method": "POST",
        },
    )
    assert spoofed.status_code == 421
    assert cors_headers(spoofed) == {}


def test_websockets_still_check_origin_themselves(gateway: str) -> None:
    socket_url = gateway.replace("http://", "ws://") + "/rpc/ws"
    with ws_client.connect(socket_url, origin=Origin(PAGE), open_timeout=5) as socket:
        socket.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "run.list"}))
        assert "result" in json.loads(socket.recv(timeout=5))
    with (
        pytest.raises(websockets.exceptions.InvalidStatus),
        ws_client.connect(socket_url, origin=Origin("https://evil.example"), open_timeout=5),
    ):
        pass


def test_a_listed_origin_replaces_loopback_and_the_token_is_asked_of_the_request_only() -> None:
    app = "https://app.example"
    with running_gateway(allowed_origins=[app], token=TOKEN) as (base, _):
        # The preflight carries no token, and needs none.
        assert_allowed_preflight(preflight(base, "/agui", app), app, "POST")
        assert_allowed_preflight(preflight(base, "/v1/runs/x/events", app, "GET"), app, "GET")
        # The request itself does; its 401 is readable by the page.
        missing = httpx.post(f"{base}/v1/runs", json={"source": "ingest"}, headers={"origin": app})
        assert missing.status_code == 401
        assert_allowed_answer(missing, app)
        started = httpx.post(
            f"{base}/v1/runs",
            json={"source": "ingest"},
            headers={"origin": app, "authorization": f"Bearer {TOKEN}"},
        )
        assert started.status_code == 201
        assert_allowed_answer(started, app)
        # With a list, loopback pages are not trusted, as the Origin guard and the WebSockets
        # do not trust them either.
        local = preflight(base, "/v1/runs", PAGE)
        assert local.status_code == 403 and cors_headers(local) == {}
        post = httpx.post(
            f"{base}/v1/runs",
            json={"source": "ingest"},
            headers={"origin": PAGE, "authorization": f"Bearer {TOKEN}"},
        )
        assert post.status_code == 403 and cors_headers(post) == {}
        # Chrome asks before a public page reaches a private address: a listed page may.
        private = httpx.options(
            f"{base}/v1/runs",
            headers={
                "origin": app,
                "access-control-request-method": "POST",
                "access-control-request-private-network": "true",
            },
        )
        assert private.status_code == 200
        assert private.headers["access-control-allow-private-network"] == "true"


def test_a_wildcard_list_allows_any_origin_and_never_credentials() -> None:
    with running_gateway(allowed_origins=["*"]) as (base, _):
        anywhere = "https://anywhere.example"
        answered = preflight(base, "/v1/runs", anywhere)
        assert answered.status_code == 200
        assert answered.headers["access-control-allow-origin"] == "*"
        assert "access-control-allow-credentials" not in answered.headers
        read = httpx.get(f"{base}/v1/runs", headers={"origin": anywhere})
        assert read.headers["access-control-allow-origin"] == "*"
        assert "access-control-allow-credentials" not in read.headers


@pytest.mark.parametrize("listed", [(), ("https://app.example",), ("*",)])
def test_cors_allows_no_origin_that_the_origin_guard_refuses(listed: tuple[str, ...]) -> None:
    """One rule for the whole gateway: a page CORS lets in must not meet the Origin guard's 403
    (nor a refused WebSocket); loopback pages are allowed by both exactly when nothing is
    listed."""

    async def unused(scope: Scope, receive: Receive, send: Send) -> None:
        raise AssertionError("not called")

    cors = BrowserAccess(unused, list(listed))
    limits = EndpointLimits(allowed_origins=listed)
    for origin in [*LOOPBACK_ORIGINS, *OTHER_ORIGINS, *ODD_ORIGINS, "https://app.example"]:
        assert cors.allows(origin) == limits.origin_allowed(origin), origin
        if not listed and origin in LOOPBACK_ORIGINS:
            assert cors.allows(origin), origin


def test_a_pages_mcp_client_may_send_and_read_its_session(gateway: str) -> None:
    """MCP's streamable HTTP transport sends ``mcp-session-id`` and ``mcp-protocol-version``
    after ``initialize``, and reads the session from its answer: a page's MCP client (the
    TypeScript SDK in a browser) needs both allowed, and the session id exposed, to cancel."""
    asked = "content-type, accept, mcp-session-id, mcp-protocol-version"
    response = httpx.options(
        f"{gateway}/mcp",
        headers={
            "origin": PAGE,
            "access-control-request-method": "POST",
            "access-control-request-headers": asked,
        },
    )
    assert response.status_code == 200, response.text
    allowed = {h.strip() for h in response.headers["access-control-allow-headers"].split(",")}
    assert {h.strip() for h in asked.split(",")} <= allowed
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "page", "version": "1"},
        },
    }
    answer = httpx.post(
        f"{gateway}/mcp",
        json=initialize,
        headers={"origin": PAGE, "accept": "application/json, text/event-stream"},
    )
    assert answer.status_code == 200, answer.text
    assert answer.headers["mcp-session-id"]
    exposed = {h.strip() for h in answer.headers["access-control-expose-headers"].split(",")}
    assert "mcp-session-id" in exposed
