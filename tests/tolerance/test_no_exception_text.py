"""No Python exception text reaches a client: by type at run time, by reading the code."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import httpx
import msgspec
import pytest

from loopgate.adapters.jsonrpc.dispatch import error_for
from loopgate.adapters.shared.problem import problem_for
from loopgate.contracts.client_errors import (
    MAX_DETAIL_CHARS,
    ClientError,
    client_message,
    describe_input_error,
)
from loopgate.contracts.envelope import EnvelopeError
from loopgate.contracts.ports import LimitReached, RunExists, RunFinished, RunNotFound
from tests.tolerance.exception_text import ALLOWED, find_leaks

PYTHON_TEXT = "invalid literal for int() with base 10: '²'"


def python_error() -> ValueError:
    try:
        int("²x")
    except ValueError as exc:
        return exc
    raise AssertionError("int() accepted it")


def test_only_our_exceptions_have_words_for_a_client() -> None:
    assert client_message(ClientError("max_rounds must be positive")) == (
        "max_rounds must be positive"
    )
    assert client_message(EnvelopeError("kind must be …")) == "kind must be …"
    assert client_message(RunNotFound("r1")) == "no run with id 'r1'"
    assert client_message(RunExists("r1")) == "a run with id 'r1' already exists"
    finished = client_message(RunFinished("r1", "completed"))
    assert finished == "run 'r1' has already finished (completed)"
    assert client_message(LimitReached("too many active runs")) == "too many active runs"
    for foreign in (python_error(), ValueError(PYTHON_TEXT), KeyError("x"), OSError(2, "gone")):
        assert client_message(foreign) is None


def test_error_builders_answer_foreign_exceptions_with_nothing_of_theirs() -> None:
    """problem_for / error_for: None, so the endpoint answers its generic 500 / -32603."""
    assert problem_for(python_error()) is None
    assert error_for(python_error()) is None
    problem = problem_for(ClientError("loop config must be an object"))
    assert problem is not None and (problem.status, problem.detail) == (
        422,
        "loop config must be an object",
    )


def test_msgspec_messages_are_normalised_and_bounded() -> None:
    class Body(msgspec.Struct):
        config: dict[str, int]

    with pytest.raises(msgspec.ValidationError) as caught:
        msgspec.json.decode(b'{"config": {"a": "x"}}', type=Body)
    assert describe_input_error(caught.value) == "Expected `int`, got `str` - at `config[...]`"
    with pytest.raises(msgspec.ValidationError) as caught:
        msgspec.json.decode(b"[1]", type=Body)
    assert describe_input_error(caught.value, root="frame") == "Expected `object`, got `array`"
    huge = ClientError("x" * 5000)
    message = client_message(huge)
    assert message is not None and len(message) == MAX_DETAIL_CHARS and message.endswith("…")


def test_no_code_turns_a_caught_exception_into_text_for_a_client() -> None:
    """Every ``except … as exc`` and every function taking an exception, in adapters/,
    contracts/ and gateway/: no str(exc), f"{exc}", repr(exc), exc.args, "%s" % exc or
    traceback text outside logging, except where ALLOWED says why it never reaches a client."""
    leaks = find_leaks()
    assert not leaks, "\n".join(f"{x.path}:{x.line} in {x.function}: {x.code}" for x in leaks)
    assert all(reason for reason in ALLOWED.values())


LEAKY = """
import logging, traceback
log = logging.getLogger("x")

def a(raw):
    try:
        return int(raw)
    except ValueError as exc:
        raise Problem(400, str(exc))

def b(raw):
    try:
        return int(raw)
    except ValueError as exc:
        return {"detail": f"bad: {exc!r}"}

def c(exc: Exception):
    return Problem(500, exc.args[0])

def d():
    try:
        pass
    except Exception as e:
        return "failed: %s" % e

def e():
    try:
        pass
    except Exception:
        return traceback.format_exc()
"""

CLEAN = """
import logging
log = logging.getLogger("x")

def a(raw):
    try:
        return int(raw)
    except ValueError as exc:
        log.warning("bad %s: %s", raw, exc)
        log.exception(f"bad: {exc}")
        raise Problem(400, f"not a number ({type(exc).__name__}, {exc.run_id}, "
                           f"{describe_input_error(exc)})")
"""


@pytest.mark.parametrize(("source", "found"), [(LEAKY, 5), (CLEAN, 0)])
def test_the_scan_finds_each_way_and_spares_logging(
    tmp_path: Path, source: str, found: int
) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text(textwrap.dedent(source))
    leaks = find_leaks(tmp_path, ("pkg",))
    assert len(leaks) == found, leaks
    assert {leak.function for leak in leaks} <= {"a", "b", "c", "d", "e"}


def test_a_generic_failure_over_http_says_nothing_of_itself(gateway: str) -> None:
    """`?limit=²`: str.isdigit() is true for it and int() refused it with Python's words."""
    response = httpx.get(f"{gateway}/v1/runs", params={"limit": "²"})
    assert response.status_code == 400
    assert "invalid literal" not in response.text and "Traceback" not in response.text
    assert json.loads(response.text)["detail"] == "limit must be an integer from 1 to 1000, got '²'"


def test_the_run_services_refusals_are_the_params_fault_over_jsonrpc(gateway: str) -> None:
    """A steering message over the run's limit: -32602 in our words (it was a bare -32603)."""

    def rpc(method: str, params: dict[str, object]) -> dict[str, object]:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        return httpx.post(f"{gateway}/rpc", json=body).json()  # type: ignore[no-any-return]

    started = rpc("run.start", {"input": "slow tool", "config": {"max_steer_chars": 3}})
    run_id = started["result"]["runId"]  # type: ignore[index]
    try:
        error = rpc("run.steer", {"runId": run_id, "content": "too long"})["error"]
        assert error == {
            "code": -32602,
            "message": "Invalid params",
            "data": {"detail": "steering message is 8 characters; the limit is 3"},
        }
    finally:
        rpc("run.cancel", {"runId": run_id})
