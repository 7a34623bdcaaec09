"""``/openapi.json``: valid OpenAPI 3.1 (openapi-spec-validator), every route of the native API
described, and real answers of a live gateway matching what the document says of them."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from httpx_sse import ServerSentEvent, connect_sse
from openapi_schema_validator import OAS31Validator
from openapi_spec_validator import OpenAPIV31SpecValidator, validate
from openapi_spec_validator.validation.exceptions import OpenAPIValidationError
from starlette.routing import BaseRoute, Mount, Route, WebSocketRoute
from starlette.testclient import TestClient
from websockets.sync.client import connect as ws_connect

from loopgate.gateway.app import create_app, endpoint_limits
from loopgate.gateway.console import routes as console
from loopgate.gateway.registry import load_adapters
from loopgate.gateway.settings import Settings
from tests.gateway.harness import running_gateway

TOKEN = "openapi-s3cret-0123"
METHODS = {"get", "post", "put", "patch", "delete"}


def fetch_document(**settings: Any) -> dict[str, Any]:
    with TestClient(create_app(Settings(**settings)), base_url="http://localhost") as client:
        answer = client.get("/openapi.json")
        assert answer.status_code == 200
        assert answer.headers["content-type"] == "application/json"
        document: dict[str, Any] = answer.json()
        return document


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    return fetch_document()


@pytest.fixture(scope="module")
def secured() -> dict[str, Any]:
    return fetch_document(token=TOKEN)


def test_the_document_is_openapi_3_1(document: dict[str, Any], secured: dict[str, Any]) -> None:
    for doc in (document, secured):
        assert doc["openapi"] == "3.1.0"
        validate(doc, cls=OpenAPIV31SpecValidator)


def test_the_validator_refuses_what_is_not_openapi(document: dict[str, Any]) -> None:
    """The check above can fail: a response without its description, a dangling $ref."""
    broken = copy.deepcopy(document)
    del broken["paths"]["/v1/runs"]["post"]["responses"]["201"]["description"]
    with pytest.raises(OpenAPIValidationError):
        validate(broken, cls=OpenAPIV31SpecValidator)
    dangling = copy.deepcopy(document)
    del dangling["components"]["schemas"]["RunView"]
    with pytest.raises(Exception, match="RunView"):
        validate(dangling, cls=OpenAPIV31SpecValidator)


def operations(doc: dict[str, Any]) -> set[tuple[str, str]]:
    return {
        (method.upper(), path)
        for path, item in doc["paths"].items()
        for method in item
        if method in METHODS
    }


def served(routes: list[BaseRoute]) -> set[tuple[str, str]]:
    """(method, path) of each endpoint; a WebSocket is the GET that upgrades. Mounts (static
    files) are left out: no description lists the files of a directory."""
    found = set()
    for route in routes:
        if isinstance(route, WebSocketRoute):
            found.add(("GET", route.path))
        elif isinstance(route, Route):
            found |= {(m, route.path) for m in route.methods or () if m != "HEAD"}
        else:
            assert isinstance(route, Mount), f"a route of an unknown kind: {route!r}"
    return found


def test_every_route_the_gateway_serves_but_other_protocols_is_described(
    document: dict[str, Any],
) -> None:
    """From the app's own routes: one added later without a description fails here."""
    settings = Settings()
    app = create_app(settings)
    limits = endpoint_limits(settings)
    others = set(served(console.routes()))
    for name, adapter in load_adapters().items():
        if name != "native":
            others |= served(adapter.routes(app.state.hub, limits))
    native = served(app.routes) - others
    assert {("POST", "/v1/runs"), ("GET", "/v1/runs/{run_id}/ingest"), ("GET", "/docs")} <= native
    described = operations(document)
    assert native - described == set(), "served but not described"
    assert described - native == set(), "described but not served"


def test_with_a_token_every_operation_but_the_open_ones_says_so(secured: dict[str, Any]) -> None:
    schemes = secured["components"]["securitySchemes"]
    assert schemes["bearerToken"] == {**schemes["bearerToken"], "type": "http", "scheme": "bearer"}
    assert secured["security"] == [{"bearerToken": []}]
    open_ops = set()
    for method, path in operations(secured):
        op = secured["paths"][path][method.lower()]
        if op.get("security") == []:
            open_ops.add(path)
            assert "401" not in op["responses"]
        else:
            assert "401" in op["responses"], (method, path)
    assert open_ops == {"/healthz", "/readyz", "/openapi.json", "/docs"}
    query_token = {
        (m, p)
        for m, p in operations(secured)
        if {"queryToken": []} in secured["paths"][p][m.lower()].get("security", [])
    }
    assert query_token == {("GET", "/v1/runs/{run_id}/events"), ("GET", "/v1/runs/{run_id}/ingest")}


def test_without_a_token_nothing_asks_for_one(document: dict[str, Any]) -> None:
    assert "security" not in document
    assert "securitySchemes" not in document["components"]
    assert not any(
        "401" in op["responses"] for item in document["paths"].values() for op in item.values()
    )


# --- real answers against the document ------------------------------------------------------


class Checker:
    """Validates answers of a live gateway against the operation the document gives for them,
    and remembers which operations it has seen."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document
        self.seen: set[tuple[str, str]] = set()
        self.templates = [
            (re.compile("^" + re.sub(r"\{[^}]+\}", "[^/]+", path) + "$"), path)
            for path in document["paths"]
        ]

    def template(self, path: str) -> str:
        # Literal paths first: /v1/threads is not /v1/runs/{run_id}.
        matches = [t for pattern, t in self.templates if pattern.match(path)]
        assert matches, f"no described path matches {path}"
        return min(matches, key=lambda t: t.count("{"))

    def schema(self, schema: dict[str, Any], instance: Any, where: str) -> None:
        validator = OAS31Validator({**schema, "components": self.document["components"]})
        errors = [e.message for e in validator.iter_errors(instance)]
        assert not errors, f"{where}: {errors} in {instance!r}"

    def response(self, answer: httpx.Response, content: bytes | None = None) -> dict[str, Any]:
        """The described response ``answer`` is; its body validated. Returns the JSON body."""
        path = self.template(answer.request.url.path)
        method = answer.request.method.lower()
        op = self.document["paths"][path][method]
        status = str(answer.status_code)
        where = f"{method.upper()} {path} {status}"
        assert status in op["responses"], f"{where} is not described"
        self.seen.add((method.upper(), path))
        self.accepted_request(op, answer, where)
        described = op["responses"][status]
        for header in described.get("headers", {}):
            assert header.lower() in answer.headers, f"{where}: no {header} header"
        media_types = described.get("content", {})
        body = answer.content if content is None else content
        if not media_types:
            assert body == b"", f"{where} has a body it does not describe"
            return {}
        media = answer.headers["content-type"].split(";")[0].strip()
        assert media in media_types, f"{where}: {media} is not one of {list(media_types)}"
        described_media = media_types[media]
        if media == "text/event-stream":
            self.events(described_media["x-itemSchema"], body, where)
            return {}
        if (
            media in ("application/json", "application/problem+json")
            and "schema" in described_media
        ):
            parsed: dict[str, Any] = json.loads(body)
            self.schema(described_media["schema"], parsed, where)
            return parsed
        return {}

    def accepted_request(self, op: dict[str, Any], answer: httpx.Response, where: str) -> None:
        """A JSON body the gateway took (2xx) fits the request schema the document gives."""
        sent = answer.request.content
        json_body = op.get("requestBody", {}).get("content", {}).get("application/json")
        if sent and json_body and answer.is_success:
            self.schema(json_body["schema"], json.loads(sent), f"{where} request")

    def events(self, item: dict[str, Any], body: bytes, where: str) -> None:
        blocks = [b for b in body.decode().split("\n\n") if b.strip()]
        assert blocks, f"{where}: an empty stream"
        data_schema = item["properties"]["data"]["contentSchema"]
        for block in blocks:
            fields: dict[str, str] = {}
            for line in block.split("\n"):
                if line and not line.startswith(":"):
                    name, _, value = line.partition(": ")
                    fields[name] = value
            if not fields:
                continue  # a keep-alive comment
            self.schema(item, fields, f"{where} event")
            self.schema(data_schema, json.loads(fields["data"]), f"{where} event data")


@pytest.fixture
def live() -> Iterator[tuple[str, Checker]]:
    with running_gateway() as (base, _):
        document = httpx.get(f"{base}/openapi.json").json()
        yield base, Checker(document)


def stream(client: httpx.Client, checker: Checker, run_id: str) -> list[dict[str, Any]]:
    """The run's event stream to its end, checked; its envelopes."""
    with client.stream("GET", f"/v1/runs/{run_id}/events") as answer:
        body = answer.read()
    checker.response(answer, body)
    return [
        json.loads(line[6:]) for line in body.decode().splitlines() if line.startswith("data: ")
    ]


def wait_for_permission(client: httpx.Client, run_id: str) -> str:
    with connect_sse(client, "GET", f"/v1/runs/{run_id}/events") as source:
        event: ServerSentEvent
        for event in source.iter_sse():
            envelope = json.loads(event.data)
            if envelope["kind"] == "permission_request":
                request_id: str = envelope["data"]["requestId"]
                return request_id
    raise AssertionError("the run ended without asking for permission")


def test_each_operation_answers_as_described(live: tuple[str, Checker]) -> None:
    base, check = live
    with httpx.Client(base_url=base, timeout=20) as client:
        # Runs, their stream and its end.
        started = check.response(client.post("/v1/runs", json={"input": "plain hi"}))
        run_id = started["id"]
        envelopes = stream(client, check, run_id)
        assert envelopes[-1]["kind"] == "completion"
        last = str(envelopes[-1]["seq"])
        check.response(client.get(f"/v1/runs/{run_id}/events", headers={"last-event-id": last}))
        check.response(client.get(f"/v1/runs/{run_id}/events", params={"after": "x"}))
        check.response(client.get(f"/v1/runs/{run_id}"))
        check.response(client.get("/v1/runs/run_nope"))
        listed = check.response(client.get("/v1/runs", params={"limit": 5}))
        assert run_id in [r["id"] for r in listed["runs"]]
        check.response(client.get("/v1/runs", params={"limit": 0}))
        check.response(client.post("/v1/runs", content=b"{"))
        check.response(client.post("/v1/runs", json={"input": 3}))
        check.response(client.post("/v1/runs", json={"input": "again", "run_id": run_id}))

        # Commands: nothing to act on, accepted, refused.
        check.response(client.post(f"/v1/runs/{run_id}/cancel"))
        check.response(client.post(f"/v1/runs/{run_id}/steer", json={"content": "late"}))
        check.response(client.post(f"/v1/runs/{run_id}/steer", json={"text": "wrong field"}))
        check.response(client.post("/v1/runs/run_nope/cancel"))
        asking = check.response(
            client.post("/v1/runs", json={"input": "What time is it?", "approval": "always"})
        )
        request_id = wait_for_permission(client, asking["id"])
        answer = {"request_id": request_id, "decision": "allow_once"}
        assert check.response(client.post(f"/v1/runs/{asking['id']}/respond", json=answer))[
            "accepted"
        ]
        check.response(client.post(f"/v1/runs/{asking['id']}/respond", json=answer))

        # Ingest over HTTP: accepted, a bad line, a finished run; steer and cancel a live one.
        ingest = check.response(client.post("/v1/runs", json={"source": "ingest"}))["id"]
        check.response(client.post(f"/v1/runs/{ingest}/steer", json={"content": "shorter"}))
        lines = '{"kind":"content_delta","data":{"delta":"Hi"}}\n[1]\n'
        refused = check.response(client.post(f"/v1/runs/{ingest}/events", content=lines))
        assert refused["line"] == 2 and refused["accepted"] == 1
        done = '{"kind":"completion","data":{"status":"completed"}}\n'
        check.response(client.post(f"/v1/runs/{ingest}/events", content=done))
        check.response(client.post(f"/v1/runs/{ingest}/events", content=done))
        cancelled = check.response(client.post("/v1/runs", json={"source": "ingest"}))["id"]
        assert check.response(client.post(f"/v1/runs/{cancelled}/cancel"))["accepted"]

        # Ingest over a WebSocket: the upgrade is the described 101.
        socket_run = check.response(client.post("/v1/runs", json={"source": "ingest"}))["id"]
        ws_url = base.replace("http://", "ws://") + f"/v1/runs/{socket_run}/ingest"
        with ws_connect(ws_url, open_timeout=10) as socket:
            assert socket.response.status_code == 101
            socket.send(done.strip())
            assert json.loads(socket.recv(timeout=10))["type"] == "end"
        upgrade = socket.response
        op = check.document["paths"]["/v1/runs/{run_id}/ingest"]["get"]
        assert str(upgrade.status_code) in op["responses"]
        # The frame the gateway took is one the document describes.
        check.schema(op["x-websocket"]["clientFrame"], json.loads(done), "the ingest frame")
        check.seen.add(("GET", "/v1/runs/{run_id}/ingest"))

        # Threads.
        thread = check.response(client.post("/v1/threads", json={"id": "t-openapi"}))
        assert thread["links"]["runs"] == "/v1/runs?thread_id=t-openapi"
        check.response(client.post("/v1/threads", json={"id": "t-openapi"}))
        check.response(client.post("/v1/threads", json={"id": "no spaces"}))
        check.response(client.post("/v1/threads"))
        check.response(client.get("/v1/threads"))
        check.response(client.get("/v1/threads/t-openapi"))
        check.response(client.delete("/v1/threads/t-openapi"))
        check.response(client.delete("/v1/threads/t-openapi"))
        check.response(client.get("/v1/threads/t-openapi"))

        # The gateway's own.
        check.response(client.get("/v1/contract"))
        served = check.response(client.get("/v1/loop"))
        assert served == {"name": "reference", "model": "loopgate-scripted"}
        listed = check.response(client.get("/v1/agents"))
        assert listed == {
            "agents": [
                {
                    "name": "default",
                    "loop": "reference",
                    "model": "loopgate-scripted",
                    "default": True,
                }
            ]
        }
        assert check.response(client.get("/v1/me"))["subject"] == "local"
        check.response(client.get("/healthz"))
        check.response(client.get("/readyz"))
        check.response(client.get("/openapi.json"))
        check.response(client.get("/docs"))

    assert operations(check.document) - check.seen == set(), "operations never called"


def test_a_gateway_with_a_token_answers_as_its_document_says() -> None:
    with (
        running_gateway(token=TOKEN) as (base, _),
        httpx.Client(base_url=base, timeout=10) as client,
    ):
        # Open: what a description reader fetches first, with no credentials.
        spec = client.get("/openapi.json")
        assert spec.status_code == 200
        check = Checker(spec.json())
        check.response(spec)
        check.response(client.get("/docs"))
        assert client.get("/docs/apidocs.js").status_code == 200
        # With its slash, as a reader may type it: the same page.
        assert client.get("/docs/").content == client.get("/docs").content
        for path in ("/docs", "/docs/"):  # the console's policy: its own files, framed by no one
            policy = client.get(path).headers["content-security-policy"]
            assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy
        check.response(client.get("/healthz"))
        # Everything else: the described 401.
        check.response(client.get("/v1/runs"))
        check.response(client.post("/v1/runs", json={"input": "hi"}))
        check.response(client.get("/v1/runs/run_1/events"))
        check.response(client.post("/v1/threads"))
        bearer = {"authorization": f"Bearer {TOKEN}"}
        check.response(client.get("/v1/runs", headers=bearer))
