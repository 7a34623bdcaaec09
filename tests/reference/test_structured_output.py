"""Structured output: response_format from the OpenAI and Vercel front ends through LoopConfig
to the model server; the final answer checked against the schema, one repair round, then
failed{schema_mismatch}."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from openai import APIError, OpenAI

from loopgate.gateway.reference.config import LoopConfig
from loopgate.gateway.reference.core import CoreLoop
from loopgate.gateway.reference.structured import answer_problem
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.servers import serve_app
from tests.gateway.harness import running_gateway
from tests.gateway.sse_client import envelopes, read_stream
from tests.reference.loop_support import (
    FakeExecutor,
    FakeProvider,
    Recorder,
    check_stream,
    text,
    user,
)


def schema_format(n_type: str) -> dict[str, Any]:
    schema = {
        "type": "object",
        "properties": {"n": {"type": n_type}},
        "required": ["n"],
        "additionalProperties": False,
    }
    return {"type": "json_schema", "json_schema": {"name": "count", "schema": schema}}


async def run(provider: FakeProvider, response_format: dict[str, Any]) -> Recorder:
    config = LoopConfig(response_format=response_format)
    rec = Recorder()
    await CoreLoop(provider, FakeExecutor({}), config).run_turn(user("count"), rec)
    check_stream(rec.events)
    return rec


@pytest.mark.anyio
async def test_an_answer_in_the_schema_completes_and_the_request_carries_the_format():
    provider = FakeProvider(text("```json\n", '{"n": 3}', "\n```"))
    rec = await run(provider, schema_format("integer"))
    assert rec.terminal["status"] == "completed"
    assert provider.requests[0].response_format == schema_format("integer")


@pytest.mark.anyio
async def test_a_wrong_answer_gets_one_repair_round():
    provider = FakeProvider(text('{"n": "three"}'), text('{"n": 3}'))
    rec = await run(provider, schema_format("integer"))
    assert rec.terminal["status"] == "completed"
    [told] = [a for a in rec.of("hook_action") if a["hook"] == "structured_output"]
    assert told["reason"] == (
        "schema_mismatch: it does not match the JSON schema at n: 'three' is not of type 'integer'"
    )
    repair = provider.requests[1].messages[-1]
    assert repair.role == "user" and "'three' is not of type 'integer'" in repair.content


@pytest.mark.anyio
async def test_a_second_miss_fails_the_turn():
    provider = FakeProvider(text("three"), text('{"count": 3}'))
    rec = await run(provider, schema_format("integer"))
    assert (rec.terminal["status"], rec.terminal["reason"]) == ("failed", "schema_mismatch")
    assert rec.of("error")[-1]["message"] == (
        "the model's answer is not in the requested format: it does not match the JSON schema "
        "at (root): 'n' is a required property"
    )
    assert len(provider.requests) == 2


@pytest.mark.anyio
async def test_json_object_wants_an_object():
    rec = await run(FakeProvider(text("[1, 2]"), text("[1, 2]")), {"type": "json_object"})
    assert rec.terminal["reason"] == "schema_mismatch"
    assert "not a JSON object" in rec.of("error")[-1]["message"]


def test_the_problems_said():
    assert answer_problem({"type": "json_object"}, "not json") == "it is not valid JSON"
    assert answer_problem({"type": "text"}, "anything") is None
    assert answer_problem(schema_format("integer"), '{"n": 1}') is None


@pytest.mark.parametrize(
    ("response_format", "said"),
    [
        ({"type": "xml"}, "response_format.type must be one of text, json_object, json_schema"),
        ({"type": "json_schema"}, "response_format.json_schema must be an object"),
        (
            {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "nope"}}},
            "response_format.json_schema.schema is not a valid JSON Schema (at type)",
        ),
    ],
)
def test_a_bad_response_format_is_refused_naming_it(response_format: Any, said: str):
    with pytest.raises(ValueError, match="^" + said.replace("(", r"\(").replace(")", r"\)")):
        LoopConfig(response_format=response_format)


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[FakeOpenAI, str]]:
    fake = FakeOpenAI()
    with serve_app(fake.app) as url:
        model = {"provider": "openai", "openai_base_url": f"{url}/v1", "openai_model": "json"}
        with running_gateway(**model) as (base, _):
            yield fake, base


def test_the_openai_sdks_response_format_reaches_the_model(served) -> None:
    fake, base = served
    fake.clear()
    client = OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0, timeout=20)
    done = client.chat.completions.create(
        model="default",
        messages=[{"role": "user", "content": "count"}],
        response_format=schema_format("string"),  # type: ignore[arg-type]
    )
    # {"n": 1} missed the schema; the repair round's {"n": "one"} is the answer.
    assert json.loads(done.choices[0].message.content or "") == {"n": "one"}
    assert [r.body["response_format"] for r in fake.requests] == [schema_format("string")] * 2


def test_the_openai_sdk_gets_a_failed_run_when_the_repair_misses_too(served) -> None:
    _, base = served
    client = OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0, timeout=20)
    with pytest.raises(APIError, match="not in the requested format"):
        client.chat.completions.create(
            model="default",
            messages=[{"role": "user", "content": "count"}],
            response_format=schema_format("boolean"),  # type: ignore[arg-type]
        )


def test_the_vercel_response_format_reaches_the_model(served) -> None:
    fake, base = served
    fake.clear()
    message = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "count"}]}
    schema = schema_format("integer")["json_schema"]["schema"]
    body = {"messages": [message], "responseFormat": {"type": "json", "schema": schema}}
    with httpx.stream("POST", f"{base}/vercel", json=body, timeout=20) as response:
        assert response.status_code == 200
        run_id = response.headers["x-loopgate-run-id"]
        response.read()
    sent = fake.requests[0].body["response_format"]
    assert sent == {"type": "json_schema", "json_schema": {"name": "response", "schema": schema}}
    end = envelopes(read_stream(base, run_id))[-1]["data"]
    assert end["status"] == "completed"
    wrong = {"messages": [message], "responseFormat": {"type": "yaml"}}
    refused = httpx.post(f"{base}/vercel", json=wrong, timeout=20)
    assert refused.status_code == 422
    assert refused.json()["detail"] == 'responseFormat.type must be "text" or "json"'
