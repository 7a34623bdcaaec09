"""loopgate's own OpenAI-compatible provider (gateway/reference/openai.py), a client written
without this adapter in mind, reads this adapter's streams: one gateway is the model of
another."""

from __future__ import annotations

import json

import httpx

from tests.gateway.harness import running_gateway


def test_a_gateway_runs_its_loop_on_another_gateways_chat_completions() -> None:
    with (
        running_gateway(scripted_delay_s=0.002) as (model, _),
        running_gateway(
            provider="openai", openai_base_url=f"{model}/v1", openai_model="loopgate"
        ) as (front, _),
    ):
        assert [m["id"] for m in httpx.get(f"{front}/v1/models").json()["data"]] == ["loopgate"]
        started = httpx.post(
            f"{front}/v1/runs", json={"input": "think: What time is it?"}, timeout=10
        ).json()
        with httpx.stream("GET", f"{front}/v1/runs/{started['id']}/events", timeout=30) as sse:
            lines = [line for line in sse.iter_lines() if line.startswith("data: ")]
        events = [json.loads(line[6:]) for line in lines]
        kinds = [e["kind"] for e in events]
        # The model gateway's reasoning_content and content arrive as the front's own deltas;
        # its loopgate extension chunks (empty deltas) add nothing.
        reasoning = "".join(e["data"]["delta"] for e in events if e["kind"] == "reasoning_delta")
        text = "".join(e["data"]["delta"] for e in events if e["kind"] == "content_delta")
        assert reasoning.startswith("The user asks about") and "step by step" in reasoning
        assert text.startswith("After thinking it over")
        assert kinds[-1] == "completion" and events[-1]["data"]["status"] == "completed"
        usage = next(e["data"] for e in events if e["kind"] == "llm_response")
        assert usage["totalTokens"] > 0
