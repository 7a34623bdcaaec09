"""Telemetry.scope: while a model request or a tool call runs, its span is current in the
caller's task, so auto-instrumented spans (here opentelemetry-instrumentation-httpx's) nest
under ``chat`` and ``execute_tool``. The caller is a stand-in for the reference loop."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import httpx
import pytest
from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from opentelemetry.trace import get_current_span
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from loopgate.contracts.envelope import LoopEvent
from loopgate.contracts.ports import StartRun
from loopgate.gateway.app import build_hub
from loopgate.gateway.hub import Hub
from loopgate.gateway.settings import Settings
from loopgate.gateway.telemetry import Telemetry
from tests.fakes.servers import serve_app

pytestmark = pytest.mark.anyio


async def ok(request: Request) -> PlainTextResponse:
    return PlainTextResponse("ok")


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with serve_app(Starlette(routes=[Route("/{path:path}", ok)])) as url:
        yield url


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
async def traced(exporter: InMemorySpanExporter) -> AsyncIterator[tuple[Telemetry, Hub]]:
    telemetry = Telemetry(SimpleSpanProcessor(exporter))
    async with build_hub(Settings(), telemetry=telemetry) as hub:
        yield telemetry, hub


def instrumented(telemetry: Telemetry) -> httpx.AsyncClient:
    """A client whose requests are spans of the telemetry's own provider (no global one)."""
    client = httpx.AsyncClient()
    HTTPXClientInstrumentor.instrument_client(client, tracer_provider=telemetry.provider)
    return client


async def push(hub: Hub, run_id: str, kind: str, data: dict[str, Any]) -> None:
    await hub.push(run_id, LoopEvent(kind, data))


def by_name(spans: tuple[ReadableSpan, ...], name: str) -> ReadableSpan:
    (span,) = [s for s in spans if s.name == name]
    return span


def url_of(span: ReadableSpan) -> str:
    attrs = span.attributes or {}
    # The old or the stable HTTP conventions, as OTEL_SEMCONV_STABILITY_OPT_IN says.
    return str(attrs.get("url.full", attrs.get("http.url")))


def parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


async def test_requests_nest_under_the_chat_and_the_tool_span(
    traced: tuple[Telemetry, Hub], exporter: InMemorySpanExporter, server: str
) -> None:
    telemetry, hub = traced
    run_id = (await hub.start(StartRun(source="ingest"))).id
    async with instrumented(telemetry) as client:
        await push(hub, run_id, "llm_request", {"model": "m", "round": 1})
        with telemetry.scope(run_id, "chat.1"):
            await client.get(f"{server}/model")
        assert not get_current_span().get_span_context().is_valid  # detached again
        await push(hub, run_id, "llm_response", {"finishReason": "tool_calls"})
        await push(hub, run_id, "tool_call_start", {"id": "c1", "name": "fetch", "round": 1})
        with telemetry.scope(run_id, "tool.c1"):
            await client.get(f"{server}/tool")
        await push(hub, run_id, "tool_call_result", {"id": "c1", "success": True})
        await push(hub, run_id, "completion", {"status": "completed"})
    spans = exporter.get_finished_spans()
    chat, tool = by_name(spans, "chat m"), by_name(spans, "execute_tool fetch")
    requests = sorted((s for s in spans if s.name == "GET"), key=lambda s: s.start_time or 0)
    assert len(requests) == 2
    model_call, tool_call = requests
    assert parent_id(model_call) == chat.context.span_id
    assert parent_id(tool_call) == tool.context.span_id
    assert {s.context.trace_id for s in spans} == {chat.context.trace_id}
    assert url_of(model_call).endswith("/model")


async def test_chat_names_the_model_request_open_now_and_each_task_has_its_own_scope(
    traced: tuple[Telemetry, Hub], exporter: InMemorySpanExporter, server: str
) -> None:
    """Parallel tool calls, each in its own task: each request nests under its own tool."""
    telemetry, hub = traced
    run_id = (await hub.start(StartRun(source="ingest"))).id
    async with instrumented(telemetry) as client:
        await push(hub, run_id, "llm_request", {"model": "m", "round": 1})
        await push(hub, run_id, "llm_response", {})
        await push(hub, run_id, "llm_request", {"model": "m", "round": 2, "attempt": 2})
        with telemetry.scope(run_id, "chat"):
            await client.get(f"{server}/retry")
        await push(hub, run_id, "llm_response", {})
        for call in ("a", "b"):
            await push(hub, run_id, "tool_call_start", {"id": call, "name": call, "round": 2})

        async def tool(call: str) -> None:
            with telemetry.scope(run_id, f"tool.{call}"):
                await client.get(f"{server}/{call}")

        async with anyio.create_task_group() as tg:
            tg.start_soon(tool, "a")
            tg.start_soon(tool, "b")
        for call in ("a", "b"):
            await push(hub, run_id, "tool_call_result", {"id": call, "success": True})
        await push(hub, run_id, "completion", {"status": "completed"})
    spans = exporter.get_finished_spans()
    chats = sorted((s for s in spans if s.name == "chat m"), key=lambda s: s.start_time or 0)
    requests = {url_of(s).rsplit("/", 1)[1]: s for s in spans if s.name == "GET"}
    assert parent_id(requests["retry"]) == chats[1].context.span_id
    for call in ("a", "b"):
        assert parent_id(requests[call]) == by_name(spans, f"execute_tool {call}").context.span_id


async def test_no_scope_without_a_traced_run_or_an_open_span(
    traced: tuple[Telemetry, Hub], exporter: InMemorySpanExporter, server: str
) -> None:
    """An unknown run or key: the block runs as it is (its requests start traces of their
    own)."""
    telemetry, hub = traced
    run_id = (await hub.start(StartRun(source="ingest"))).id
    await push(hub, run_id, "llm_request", {"model": "m"})
    async with instrumented(telemetry) as client:
        for scoped, key in (("run_nope", "chat"), (run_id, "tool.x"), (run_id, "chat.2")):
            with telemetry.scope(scoped, key):
                assert not get_current_span().get_span_context().is_valid
                await client.get(server)
    requests = [s for s in exporter.get_finished_spans() if s.name == "GET"]
    assert len(requests) == 3
    assert all(s.parent is None for s in requests)


async def test_an_unsampled_run_has_no_scope(exporter: InMemorySpanExporter) -> None:
    telemetry = Telemetry(SimpleSpanProcessor(exporter), sampler=ALWAYS_OFF)
    async with build_hub(Settings(), telemetry=telemetry) as hub:
        run_id = (await hub.start(StartRun(source="ingest"))).id
        await push(hub, run_id, "llm_request", {"model": "m"})
        with telemetry.scope(run_id, "chat.1"):
            assert not get_current_span().get_span_context().is_valid
        await push(hub, run_id, "completion", {"status": "completed"})
    assert exporter.get_finished_spans() == ()


async def test_a_closed_span_is_no_scope(
    traced: tuple[Telemetry, Hub], exporter: InMemorySpanExporter
) -> None:
    telemetry, hub = traced
    run_id = (await hub.start(StartRun(source="ingest"))).id
    await push(hub, run_id, "llm_request", {"model": "m"})
    with telemetry.scope(run_id, "chat.1"):
        assert get_current_span().get_span_context().is_valid
    await push(hub, run_id, "llm_response", {})
    for key in ("chat.1", "chat", "run"):
        with telemetry.scope(run_id, key):
            if key == "run":  # the run span is open until the run ends
                assert get_current_span().is_recording()
            else:
                assert not get_current_span().get_span_context().is_valid
    await push(hub, run_id, "completion", {"status": "completed"})
    with telemetry.scope(run_id, "run"):
        assert not get_current_span().get_span_context().is_valid
