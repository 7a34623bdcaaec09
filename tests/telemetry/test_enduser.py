"""Traces say whose run it is: ``enduser.id`` (the owner's subject) and ``loopgate.tenant`` on
the run's ``invoke_agent`` span and every span under it, for runs of the loop and ingested
ones, against a real gateway with API keys; none on the machine's own user's runs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from conformance.otel import STREAMS, load_stream, project, stream_context
from loopgate.gateway.telemetry import Telemetry
from loopgate.gateway.telemetry.records import SpanStart
from tests.gateway.harness import running_gateway
from tests.gateway.sse_client import envelopes, read_stream
from tests.identity import principals
from tests.identity.principals import secret_of

WHO = ("enduser.id", "loopgate.tenant")


@contextmanager
def traced_gateway(**settings: Any) -> Iterator[tuple[str, InMemorySpanExporter]]:
    """A real gateway (uvicorn on 127.0.0.1, as ``loopgate serve`` runs it) whose spans end up
    in memory."""
    exporter = InMemorySpanExporter()
    telemetry = Telemetry(SimpleSpanProcessor(exporter))
    try:
        with running_gateway(telemetry=telemetry, **settings) as (base, _):
            yield base, exporter
    finally:
        telemetry.shutdown()


def run_spans(exporter: InMemorySpanExporter, run_id: str) -> list[ReadableSpan]:
    """The run's invoke_agent span and the spans under it (its trace, deliveries aside)."""
    spans = exporter.get_finished_spans()
    (root,) = [
        s
        for s in spans
        if s.name.startswith("invoke_agent") and (s.attributes or {})["loopgate.run.id"] == run_id
    ]
    assert root.context is not None
    trace_id = root.context.trace_id
    return [
        s
        for s in spans
        if s.context is not None
        and s.context.trace_id == trace_id
        and not s.name.startswith("deliver")
    ]


def start_and_finish(base: str, body: dict[str, Any], key: principals.TestKey | None = None) -> str:
    headers = key.headers if key is not None else {}
    started = httpx.post(f"{base}/v1/runs", json=body, headers=headers, timeout=10)
    assert started.status_code == 201, started.text
    run_id: str = started.json()["id"]
    if body.get("source") != "ingest":
        events = envelopes(read_stream(base, run_id, headers=headers))
        assert events[-1]["kind"] == "completion", events
    return run_id


def test_a_key_holders_spans_name_the_user_and_the_tenant(tmp_path: Path) -> None:
    keys = principals.write_test_keys(tmp_path / "keys.json")
    alice, bob = keys["alice"], keys["bob"]
    with traced_gateway(keys_file=str(tmp_path / "keys.json")) as (base, exporter):
        run_id = start_and_finish(base, {"input": "What time is it?"}, alice)
        # bob's own loop pushes its run in: his, in the trace as in the run's owner.
        pushed = start_and_finish(base, {"source": "ingest"}, bob)
        lines = [
            {"kind": "llm_request", "data": {"round": 1, "model": "theirs"}},
            {"kind": "llm_response", "data": {"round": 1}},
            {"kind": "completion", "data": {"status": "completed", "reason": "stop"}},
        ]
        body = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
        answer = httpx.post(
            f"{base}/v1/runs/{pushed}/events", content=body, headers=bob.headers, timeout=10
        )
        assert answer.status_code == 200, answer.text
        alices, bobs = run_spans(exporter, run_id), run_spans(exporter, pushed)

    names = {s.name.split(" ")[0] for s in alices}
    assert {"invoke_agent", "chat", "execute_tool"} <= names
    for span in alices:
        attrs = span.attributes or {}
        assert (attrs.get("enduser.id"), attrs.get("loopgate.tenant")) == ("alice", "acme"), span
    assert {s.name.split(" ")[0] for s in bobs} == {"invoke_agent", "chat"}
    for span in bobs:
        attrs = span.attributes or {}
        assert (attrs.get("enduser.id"), attrs.get("loopgate.tenant")) == ("bob", "globex"), span
    # Never a credential, not even part of one, on any span.
    everything = json.dumps([dict(s.attributes or {}) for s in alices + bobs])
    for key in (alice, bob):
        assert secret_of(key.key) not in everything


def test_the_local_users_runs_name_no_one() -> None:
    """No credential configured: the machine's own user is nobody in particular."""
    with traced_gateway() as (base, exporter):
        run_id = start_and_finish(base, {"input": "What time is it?"})
        spans = run_spans(exporter, run_id)
    assert spans
    for span in spans:
        assert not set(WHO) & set(span.attributes or {}), span


@pytest.mark.parametrize("stream", sorted(STREAMS.glob("*.jsonl")), ids=lambda p: p.stem)
def test_every_span_the_projector_opens_carries_the_owner(stream: Path) -> None:
    """Run, model request, tool call and approval spans alike, for every recorded stream."""
    envs = load_stream(stream)
    context = stream_context(envs, stream.stem)
    owned = msgspec.structs.replace(context, enduser_id="alice", tenant="acme")
    starts = [r for r in project(envs, owned) if type(r) is SpanStart]
    assert starts
    for start in starts:
        assert (start.attributes["enduser.id"], start.attributes["loopgate.tenant"]) == (
            "alice",
            "acme",
        ), start.name
    for record in project(envs, context):
        assert not set(WHO) & set(record.attributes), record
