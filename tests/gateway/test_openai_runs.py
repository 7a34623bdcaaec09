"""A gateway run against an OpenAI-compatible server (the fake one, on 127.0.0.1)."""

from __future__ import annotations

import httpx

from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.servers import serve_app
from tests.gateway.harness import running_gateway
from tests.gateway.sse_client import envelopes, read_stream


def test_a_run_streams_from_an_openai_compatible_model() -> None:
    fake = FakeOpenAI()
    with (
        serve_app(fake.app) as model_base,
        running_gateway(
            provider="openai", openai_base_url=f"{model_base}/v1", openai_model="text"
        ) as (base, _),
    ):
        run_id = httpx.post(f"{base}/v1/runs", json={"input": "say hi"}).json()["id"]
        events = envelopes(read_stream(base, run_id))
    text = "".join(e["data"]["delta"] for e in events if e["kind"] == "content_delta")
    assert text
    assert events[-1]["data"]["status"] == "completed"
    assert fake.requests[0].body["messages"][-1] == {"role": "user", "content": "say hi"}


def test_a_failing_model_fails_the_run_with_a_clear_error() -> None:
    fake = FakeOpenAI()
    with (
        serve_app(fake.app) as model_base,
        running_gateway(
            provider="openai", openai_base_url=f"{model_base}/v1", openai_model="error-500"
        ) as (base, _),
    ):
        run_id = httpx.post(f"{base}/v1/runs", json={"input": "hi"}).json()["id"]
        events = envelopes(read_stream(base, run_id))
    errors = [e["data"] for e in events if e["kind"] == "error"]
    assert errors and "HTTP 500" in errors[0]["message"]
    assert events[-1]["data"]["status"] == "failed"
