"""The reference loop makes its model request's span and each tool call's span current while
it performs them: auto-instrumented spans (httpx here) of the OpenAI provider's request and of
a user's tool nest under loopgate's ``chat`` and ``execute_tool`` spans."""

from __future__ import annotations

from collections.abc import Iterator

import anyio
import pytest
from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from loopgate.contracts.ports import StartRun
from loopgate.gateway.app import build_hub
from loopgate.gateway.settings import Settings
from loopgate.gateway.telemetry import Telemetry
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.servers import serve_app
from tests.telemetry import scope_tools

pytestmark = pytest.mark.anyio


async def ok(request: Request) -> PlainTextResponse:
    return PlainTextResponse("fetched " + request.path_params["path"])


@pytest.fixture(scope="module")
def urls() -> Iterator[tuple[str, str]]:
    fake = FakeOpenAI()
    with (
        serve_app(fake.app) as model,
        serve_app(Starlette(routes=[Route("/{path:path}", ok)])) as site,
    ):
        yield f"{model}/v1", site


def parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


async def test_http_spans_of_the_model_request_and_of_a_tool_nest_under_loopgates(
    urls: tuple[str, str],
) -> None:
    model_url, site = urls
    scope_tools.TARGET["url"] = site
    exporter = InMemorySpanExporter()
    telemetry = Telemetry(SimpleSpanProcessor(exporter))
    settings = Settings(
        provider="openai",
        openai_base_url=model_url,
        openai_model="agent",
        tools=["tests.telemetry.scope_tools"],
    )
    instrumentor = HTTPXClientInstrumentor()
    instrumentor.instrument(tracer_provider=telemetry.provider)
    try:
        async with build_hub(settings, telemetry=telemetry) as hub:
            run = await hub.start(StartRun(input='use fetch {"path": "page"}'))
            with anyio.fail_after(20):
                await hub.run(run.id).ended.wait()
    finally:
        instrumentor.uninstrument()
        telemetry.shutdown()
    spans = exporter.get_finished_spans()
    chats = [s for s in spans if s.name.startswith("chat ")]
    [tool] = [s for s in spans if s.name == "execute_tool fetch"]
    http = [s for s in spans if s.name.startswith(("POST", "GET"))]
    posts = [s for s in http if s.name.startswith("POST")]
    gets = [s for s in http if s.name.startswith("GET")]
    assert len(chats) == len(posts) == 2
    # Each model request's HTTP span is a child of that request's chat span.
    assert sorted(parent_id(p) for p in posts) == sorted(c.context.span_id for c in chats)
    [get] = gets
    assert parent_id(get) == tool.context.span_id
    assert {s.context.trace_id for s in spans} == {tool.context.trace_id}
