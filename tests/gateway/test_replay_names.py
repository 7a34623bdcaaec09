"""A replay's name on the real gateway (uvicorn): the native ``POST /v1/runs`` and JSON-RPC
``run.start`` (jsonrpcclient's requests) both refuse a name that is no recording with a 4xx that
names ``replay`` — a name too long for the file system, a NUL, a path, nothing — never a 500
(issue 29, item 6: ``{"replay": "A"*300}`` answered 500 ``OSError: File name too long``)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonrpcclient import Error, Ok, parse, request

from tests.gateway.harness import REPO, running_gateway

BAD_NAMES = [
    "A" * 300,
    "é" * 128,  # 128 characters, 256 bytes: past the file system's 255
    "../x",
    "../../etc/passwd",
    "/etc/passwd",
    "..\\x",
    "a\x00b",
    "",
    "é",
    "\n",
    ".jsonl",
    "plain-answer/",
    "nope",
]
GOOD_NAMES = ["plain-answer", "plain-answer.jsonl"]
RECORDINGS = {p.stem for p in (REPO / "conformance" / "streams").glob("*.jsonl")}
PROPERTY_SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture(scope="module")
def client() -> Iterator[httpx.Client]:
    with (
        running_gateway(scripted_delay_s=0.0, max_active_runs=400) as (base, _),
        httpx.Client(base_url=base, timeout=10) as c,
    ):
        yield c


def native(client: httpx.Client, name: str) -> httpx.Response:
    return client.post("/v1/runs", json={"replay": name})


def rpc(client: httpx.Client, name: str) -> Ok | Error:
    response = client.post("/rpc", json=request("run.start", params={"replay": name}))
    assert response.status_code == 200, response.text
    parsed: Ok | Error = parse(response.json())
    return parsed


def check_refused(client: httpx.Client, name: str) -> None:
    response = native(client, name)
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert "replay" in response.json()["detail"]
    answer = rpc(client, name)
    assert isinstance(answer, Error), answer
    assert (answer.code, answer.data["param"]) == (-32602, "replay")
    assert "replay" in answer.data["detail"]


@pytest.mark.parametrize("name", BAD_NAMES, ids=lambda name: repr(name)[:16])
def test_a_bad_name_is_refused_naming_replay(client: httpx.Client, name: str) -> None:
    check_refused(client, name)


def test_the_refusal_lists_the_recordings(client: httpx.Client) -> None:
    detail = native(client, "nope").json()["detail"]
    assert detail.startswith("replay: no recording named 'nope'; one of: ")
    assert "plain-answer" in detail
    detail = native(client, "A" * 300).json()["detail"]
    assert "A" * 20 not in detail  # the client's text is not echoed back
    assert "at most 128 characters" in detail


@pytest.mark.parametrize("name", GOOD_NAMES)
def test_a_recording_replays(client: httpx.Client, name: str) -> None:
    response = native(client, name)
    assert response.status_code == 201, response.text
    assert isinstance(rpc(client, name), Ok)


@PROPERTY_SETTINGS
@given(name=st.text(max_size=400) | st.sampled_from(GOOD_NAMES))
def test_any_name_is_a_recording_or_refused(client: httpx.Client, name: str) -> None:
    if name.removesuffix(".jsonl") in RECORDINGS:
        assert native(client, name).status_code == 201
        return
    check_refused(client, name)
