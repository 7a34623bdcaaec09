"""Tolerant payloads, per the contract: only the envelope's shape is strict. A known field of a
foreign type, an unknown completion status, unknown JSON-RPC params and LoopConfig keys are
accepted and carried through; every projector copes; each oddity is logged once per run."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from loopgate.adapters.acp.projector import AcpProjector, PromptAnswer, PromptFailure
from loopgate.adapters.agui.projector import AguiProjector
from loopgate.adapters.jsonrpc.projector import JsonRpcProjector
from loopgate.adapters.native.projector import NativeProjector
from loopgate.contracts.contract import load_contract
from loopgate.contracts.envelope import Envelope
from loopgate.contracts.events import PAYLOAD_TYPES
from loopgate.contracts.oddities import OddityLog, oddities
from loopgate.contracts.projector import ProjectorContext
from loopgate.gateway.reference.config import LoopConfig
from loopgate.gateway.telemetry.projector import TraceProjector
from loopgate.gateway.telemetry.records import SpanEnd, TraceContext
from tests.gateway.harness import REPO
from tests.gateway.sse_client import envelopes, read_stream

STREAMS = REPO / "conformance" / "streams"
SEED_BUDGET = [
    {"kind": "content_delta", "data": {"delta": "Summarising"}},
    {"kind": "budget_exhausted", "data": {"budget": "tokens", "used": 5000}},
    {"kind": "completion", "data": {"status": "budget_exhausted", "reason": "budget"}},
]


def ndjson(events: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(e) + "\n" for e in events)


def ingest(base: str, events: list[dict[str, Any]]) -> tuple[str, httpx.Response]:
    run_id = httpx.post(f"{base}/v1/runs", json={"source": "ingest"}).json()["id"]
    return run_id, httpx.post(f"{base}/v1/runs/{run_id}/events", content=ndjson(events))


def rpc(base: str, method: str, params: Any) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return httpx.post(f"{base}/rpc", json=body).json()  # type: ignore[no-any-return]


# --- ingest: seed 001's engine and an unknown status --------------------------------------


def test_seed_engine_budget_is_accepted_and_its_completion_ends_the_run(gateway: str) -> None:
    run_id, response = ingest(gateway, SEED_BUDGET)
    assert response.status_code == 200, response.text
    assert response.json()["run"]["status"] == "budget_exhausted"
    streamed = envelopes(read_stream(gateway, run_id, timeout=10))
    assert [{"kind": e["kind"], "data": e["data"]} for e in streamed] == SEED_BUDGET


def test_unknown_status_is_terminal_and_carried_through(gateway: str) -> None:
    final = {"kind": "completion", "data": {"status": "halted_by_policy", "reason": 12}}
    run_id, response = ingest(gateway, [{"kind": "content_delta", "data": {"delta": 5}}, final])
    assert response.status_code == 200, response.text
    assert response.json()["run"]["state"] == "finished"
    assert rpc(gateway, "run.get", {"runId": run_id})["result"]["status"] == "halted_by_policy"
    streamed = envelopes(read_stream(gateway, run_id, timeout=10))
    assert streamed[0]["data"] == {"delta": 5} and streamed[-1]["data"] == final["data"]


def test_ingest_websocket_carries_odd_fields(gateway: str) -> None:
    import websockets.sync.client as ws_client

    run_id = httpx.post(f"{gateway}/v1/runs", json={"source": "ingest"}).json()["id"]
    url = gateway.replace("http://", "ws://") + f"/v1/runs/{run_id}/ingest"
    with ws_client.connect(url) as sock:
        for event in SEED_BUDGET:
            sock.send(json.dumps(event))
        assert json.loads(sock.recv(timeout=10)) == {"type": "end", "frame": 3, "seq": 3}


# --- unknown keys: JSON-RPC params and LoopConfig ------------------------------------------


def test_unknown_jsonrpc_params_and_loop_config_keys_are_accepted(gateway: str) -> None:
    started = rpc(
        gateway,
        "run.start",
        {"input": "hello", "config": {"idle_reasoning_gap_ms": 5000}, "futureOption": 1},
    )
    run_id = started["result"]["runId"]
    assert rpc(gateway, "run.get", {"runId": run_id, "verbose": True})["result"]["id"] == run_id
    streamed = envelopes(read_stream(gateway, run_id, timeout=20))
    assert streamed[-1]["data"]["status"] == "completed"
    response = httpx.post(
        f"{gateway}/v1/runs", json={"input": "hi", "config": {"idle_reasoning_gap_ms": 5000}}
    )
    assert response.status_code == 201


def test_a_known_loop_config_key_with_a_bad_value_is_still_refused(gateway: str) -> None:
    response = httpx.post(f"{gateway}/v1/runs", json={"input": "hi", "config": {"max_rounds": 0}})
    assert response.status_code == 422 and response.json()["detail"] == (
        "max_rounds must be positive, got 0"
    )
    error = rpc(gateway, "run.start", {"input": "hi", "config": {"max_rounds": "many"}})["error"]
    assert error["code"] == -32602
    assert error["data"]["detail"] == "max_rounds must be a positive integer, got str"


def test_loop_config_keeps_unknown_keys_out() -> None:
    config = LoopConfig.from_dict({"max_rounds": 3, "idle_reasoning_gap_ms": 5000})
    assert config.max_rounds == 3 and "idle_reasoning_gap_ms" not in config.to_dict()
    assert LoopConfig.unknown_keys({"max_rounds": 3, "idle_reasoning_gap_ms": 5000}) == [
        "idle_reasoning_gap_ms"
    ]


# --- every projector, every known field, every foreign type --------------------------------

FOREIGN: list[Any] = [5, -1, 10**30, 1.5, "x", "", None, True, [], [1, "a"], {}, {"a": [1]}]
TERMINAL = Envelope("odd", 99, 2_000_000_000_000_000_000, "completion", {"status": "completed"})


def projectors() -> list[Any]:
    ctx = ProjectorContext(run_id="odd", thread_id="odd")
    return [
        AguiProjector(ctx),
        AguiProjector(ProjectorContext(run_id="odd", thread_id="odd", protocol_version="1.0")),
        AcpProjector(ctx),
        JsonRpcProjector(ctx),
        NativeProjector(ctx),
        TraceProjector(
            TraceContext(run_id="odd", thread_id="odd", source="ingest", created_at=1),
            content=True,
        ),
    ]


def odd_payloads() -> list[tuple[str, dict[str, Any]]]:
    cases = []
    for kind, typ in PAYLOAD_TYPES.items():
        names = [f.encode_name for f in msgspec.structs.fields(typ)]
        for name in names:
            for value in FOREIGN:
                cases.append((kind, {**{n: "v" for n in names}, name: value}))
    return cases


def test_no_projector_raises_on_any_foreign_type_in_any_known_field() -> None:
    """Each projector treats the field as absent or maps it; the run still ends once."""
    cases = odd_payloads()
    assert len(cases) > 700
    for projector in projectors():
        projector.start()
        for seq, (kind, data) in enumerate(cases, 1):
            if kind == "completion" and data.get("status") != "executing":
                data = {**data, "status": "executing"}  # the run must go on to the next case
            projector.feed(Envelope("odd", seq, 1_000_000 * seq, kind, data))
        ended = projector.feed(TERMINAL)
        assert ended or isinstance(projector, NativeProjector), type(projector).__name__
        assert projector.close() == []
        msgspec.json.encode(ended)  # whatever came out is JSON


@pytest.mark.parametrize("status", ["halted_by_policy", "", 7, None, ["x"]])
def test_every_projector_ends_on_any_status_but_executing(status: Any) -> None:
    data = {"status": status} if status is not None else {}
    env = Envelope("odd", 1, 1, "completion", data)
    sent_as = status if isinstance(status, str) else "failed"
    v1 = AguiProjector(ProjectorContext(run_id="odd", thread_id="odd", protocol_version="1.0"))
    last = msgspec.to_builtins(v1.feed(env)[-1])
    if sent_as == "failed":
        assert last["type"] == "RUN_ERROR"
    else:
        assert last["type"] == "RUN_FINISHED" and last["result"]["status"] == sent_as
    acp = AcpProjector(ProjectorContext(run_id="odd", thread_id="odd")).feed(env)[-1]
    if sent_as == "failed":
        assert isinstance(acp, PromptFailure)
    else:
        assert isinstance(acp, PromptAnswer) and acp.result["stopReason"] == "end_turn"
        assert acp.result["_meta"]["loopgate"]["status"] == sent_as
    end = JsonRpcProjector(ProjectorContext(run_id="odd", thread_id="odd")).feed(env)[-1]
    assert end.method == "run.end" and end.params["status"] == sent_as
    trace = TraceProjector(TraceContext(run_id="odd", thread_id="odd", source="x", created_at=0))
    run_end = [r for r in trace.feed(env) if isinstance(r, SpanEnd) and r.key == "run"]
    assert run_end[0].attributes["loopgate.run.status"] == sent_as


def test_seed_budget_spelling_is_read_by_acp() -> None:
    acp = AcpProjector(ProjectorContext(run_id="b", thread_id="b"))
    for seq, event in enumerate(SEED_BUDGET, 1):
        items = acp.feed(Envelope("b", seq, seq, event["kind"], event["data"]))
    assert isinstance(items[-1], PromptAnswer) and items[-1].result["stopReason"] == "max_tokens"


# --- oddities: found, and logged once per run ----------------------------------------------


def test_oddities_name_each_odd_field() -> None:
    assert oddities("content_delta", {"delta": "fine"}) == []
    assert oddities("brand_new_kind", {"delta": 5}) == []
    assert oddities("budget_exhausted", {"budget": "tokens", "used": 5000}) == []
    found = oddities("tool_call_result", {"id": 7, "name": "x", "success": "yes"})
    assert [(o.field, o.detail) for o in found] == [
        ("id", "Expected `str`, got `int`"),
        ("success", "Expected `bool`, got `str`"),
    ]
    [status] = oddities("completion", {"status": "halted_by_policy"})
    assert status.field == "status" and "ends the turn" in status.detail
    assert [o.field for o in oddities("content_delta", {})] == ["delta"]
    assert [o.field for o in oddities("budget_exhausted", {"used": 1})] == ["kind"]


def test_each_oddity_is_logged_once_per_run_and_the_memory_is_bounded() -> None:
    logger = logging.getLogger("test.oddities")
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logger.addHandler(handler)
    try:
        log = OddityLog(logger, max_runs=2, max_per_run=3)
        for _ in range(100):
            log.note("r1", "content_delta", {"delta": 5})
        assert len(records) == 1 and "content_delta.delta" in records[0].getMessage()
        log.note("r2", "content_delta", {"delta": 5})
        assert len(records) == 2
        # Three oddities per run at most: the third says the rest go unlogged.
        log.note("r1", "tool_call_result", {"id": 1, "name": 2, "success": 3})
        assert len(records) == 4 and "unlogged" in records[-1].getMessage()
        log.note("r1", "stage_complete", {"round": "x"})
        assert len(records) == 4
        log.note("r3", "content_delta", {"delta": 5})  # r1 is forgotten (oldest of 2)
        log.note("r1", "content_delta", {"delta": 5})
        assert len(records) == 6
    finally:
        logger.removeHandler(handler)


# --- replay prints what the live server sends ----------------------------------------------


def replay(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """`loopgate replay …` in this process (as tests/gateway/test_cli_replay.py does)."""
    from loopgate.gateway.cli import main

    assert main(["replay", *args]) == 0
    return capsys.readouterr().out


def sse_events(text: str) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]


def test_replay_of_a_truncated_recording_ends_as_the_live_server_ends_it(
    gateway: str, capsys: pytest.CaptureFixture[str]
) -> None:
    offline = sse_events(replay(capsys, str(STREAMS / "truncated.jsonl"), "--adapter", "native"))
    assert offline[-1]["kind"] == "completion"
    assert offline[-1]["data"] == {"status": "failed", "reason": "truncated"}
    run_id = httpx.post(f"{gateway}/v1/runs", json={"replay": "truncated"}).json()["id"]
    live = envelopes(read_stream(gateway, run_id, timeout=10))
    strip = lambda events: [(e["seq"], e["kind"], e["data"]) for e in events]  # noqa: E731
    assert strip(offline) == strip(live)


@pytest.mark.parametrize("name", ["tolerant-payloads", "seed-engine-budget"])
def test_replay_accepts_recordings_with_odd_fields(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    recording = str(STREAMS / f"{name}.jsonl")
    sent = sse_events(replay(capsys, recording, "--adapter", "native"))
    assert sent == [json.loads(line) for line in Path(recording).read_text().splitlines()]
    for adapter in ("agui", "acp", "jsonrpc"):
        assert replay(capsys, recording, "--adapter", adapter, "--messages").strip()


def test_the_tolerant_recordings_exist() -> None:
    assert {p.stem for p in Path(STREAMS).glob("*.jsonl")} >= {
        "tolerant-payloads",
        "seed-engine-budget",
    }
    assert "halted_by_policy" not in load_contract().completion_statuses
