"""Retries of failed model requests: the reference loop with its OpenAI-compatible provider
against a fake server (httpx → uvicorn) that answers 429 with Retry-After, 503, and drops the
connection before and after the first delta."""

from __future__ import annotations

import random

import pytest

from loopgate.gateway.reference.config import LoopConfig
from loopgate.gateway.reference.core import CoreLoop
from loopgate.gateway.reference.hooks import Fail, NoHooks
from loopgate.gateway.reference.openai import OpenAIProvider
from loopgate.gateway.reference.retry import RetryPlan, parse_retry_after
from loopgate.gateway.reference.types import LoopContext, ProviderError
from tests.fakes.openai_server import FakeOpenAI
from tests.reference.loop_support import FakeExecutor, Recorder, check_stream, user

pytestmark = pytest.mark.anyio

FAST = LoopConfig(retry_initial_delay_ms=20, retry_max_delay_ms=2_000)


async def run(base_url: str, scenario: str, config: LoopConfig = FAST, hooks=None) -> Recorder:
    loop = CoreLoop(OpenAIProvider(base_url, scenario), FakeExecutor({}), config, hooks=hooks)
    rec = Recorder()
    await loop.run_turn(user("hi"), rec)
    check_stream(rec.events)
    return rec


async def test_429_waits_for_retry_after_then_answers(fake: FakeOpenAI, base_url: str):
    rec = await run(base_url, "flaky-429")
    assert rec.terminal["status"] == "completed"
    assert rec.text() == "Hello, world!"
    assert [r["attempt"] for r in rec.of("llm_request")] == [1, 2]
    failed, answered = rec.of("llm_response")
    assert failed["error"].startswith("model server returned HTTP 429")
    assert (failed["retryable"], failed["retryInMs"]) == (True, 1000)
    assert "error" not in answered
    first, second = fake.requests
    assert second.at - first.at >= 1.0  # the server's Retry-After: 1, honoured


async def test_503_twice_backs_off_and_the_third_attempt_answers(fake: FakeOpenAI, base_url):
    rec = await run(base_url, "flaky-503")
    assert rec.terminal["status"] == "completed"
    assert [r["attempt"] for r in rec.of("llm_request")] == [1, 2, 3]
    waits = [r["retryInMs"] for r in rec.of("llm_response") if "error" in r]
    # 20 ms, then 40 ms, each with jitter down to half.
    assert 10 <= waits[0] <= 20 and 20 <= waits[1] <= 40
    assert len(fake.requests) == 3


async def test_a_reset_before_the_first_delta_is_retried(fake: FakeOpenAI, base_url: str):
    rec = await run(base_url, "flaky-reset")
    assert rec.terminal["status"] == "completed"
    assert rec.text() == "Hello, world!"
    assert rec.of("llm_response")[0]["error"] == "model stream ended unexpectedly"
    assert len(fake.requests) == 2


async def test_a_reset_after_the_first_delta_is_not_retried(fake: FakeOpenAI, base_url: str):
    rec = await run(base_url, "cut")
    assert rec.terminal == rec.terminal | {"status": "failed", "reason": "provider_error"}
    assert rec.text() == "Hel"  # what clients saw stays; it is not streamed twice
    assert rec.of("error")[0]["message"] == "model stream ended unexpectedly"
    failed = rec.of("llm_response")[0]
    assert failed["retryable"] is True and "retryInMs" not in failed
    assert len(fake.requests) == 1


async def test_attempts_are_bounded(fake: FakeOpenAI, base_url: str):
    rec = await run(base_url, "flaky-503-forever")
    assert rec.terminal["reason"] == "provider_error"
    assert len(fake.requests) == FAST.retry_max_attempts == 3
    message = rec.of("error")[0]["message"]
    assert message.startswith("model server returned HTTP 503")
    assert message.endswith("(gave up after 3 attempts)")


async def test_total_time_is_bounded(fake: FakeOpenAI, base_url: str):
    # The first wait (≥ 500 ms with jitter) would pass retry_max_total_ms: no retry at all.
    config = LoopConfig(retry_initial_delay_ms=1_000, retry_max_total_ms=400)
    rec = await run(base_url, "flaky-503", config)
    assert len(fake.requests) == 1
    assert rec.of("error")[0]["message"].endswith(
        "(gave up after 1 attempts (retry_max_total_ms reached))"
    )


async def test_a_retry_after_past_the_longest_wait_is_not_waited_for(fake, base_url):
    rec = await run(base_url, "flaky-429", LoopConfig(retry_max_delay_ms=500))
    assert len(fake.requests) == 1
    assert rec.of("error")[0]["message"].endswith(
        "(the server asked to wait 1 s, longer than retry_max_delay_ms (500 ms))"
    )


async def test_a_client_error_is_not_retried(fake: FakeOpenAI, base_url: str):
    rec = await run(base_url, "error-400-vllm")
    assert len(fake.requests) == 1
    assert rec.of("llm_response")[0]["retryable"] is False


class Seen(NoHooks):
    def __init__(self, action=None) -> None:
        self.failures: list[tuple[str, int]] = []
        self.action = action

    def on_request_error(self, ctx: LoopContext, error: BaseException, attempt: int):
        assert isinstance(error, ProviderError)
        self.failures.append((error.message, attempt))
        return self.action


async def test_on_request_error_sees_each_failure(fake: FakeOpenAI, base_url: str):
    seen = Seen()
    rec = await run(base_url, "flaky-503", hooks=seen)
    assert rec.terminal["status"] == "completed"
    assert [attempt for _, attempt in seen.failures] == [1, 2]
    assert all(m.startswith("model server returned HTTP 503") for m, _ in seen.failures)


async def test_a_hooks_fail_overrides_the_policy(fake: FakeOpenAI, base_url: str):
    rec = await run(base_url, "flaky-503", hooks=Seen(Fail()))
    assert len(fake.requests) == 1
    assert rec.of("hook_action")[0]["action"] == "fail"
    assert rec.terminal["reason"] == "provider_error"


def test_backoff_doubles_with_jitter_and_stops_at_the_longest_wait():
    config = LoopConfig(retry_max_attempts=10, retry_max_total_ms=3_600_000)
    plan = RetryPlan(config, random.Random(7))
    error = ProviderError("overloaded", retryable=True, status=503)
    waits = [plan.decide(error, attempt, streamed=False)[0] for attempt in range(1, 10)]
    for attempt, wait in enumerate(waits, 1):
        backoff = min(config.retry_max_delay_ms, config.retry_initial_delay_ms * 2 ** (attempt - 1))
        assert wait is not None and backoff / 2 <= wait <= backoff
    assert len(set(waits)) > 1


def test_retry_after_as_seconds_or_a_date():
    assert parse_retry_after("7") == 7.0
    now = 1_700_000_000.0
    assert parse_retry_after("Tue, 14 Nov 2023 22:13:40 GMT", now=now) == 20.0
    for bad in (None, "", "soon", "-3", "99999999999999"):
        assert parse_retry_after(bad) is None
