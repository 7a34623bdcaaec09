"""Traces over real sockets: the gateway on uvicorn, and `loopgate serve` exporting OTLP/HTTP
to a local receiver that decodes the protobuf with ``opentelemetry-proto``."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from typing import IO

import acp
import anyio
import httpx
import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from loopgate.gateway.settings import Settings, load_settings
from loopgate.gateway.telemetry import Telemetry
from loopgate.gateway.telemetry.config import build_telemetry, traces_endpoint
from tests.acp.support import RecordingClient, agent_env, open_session, spawned
from tests.fakes.otlp_receiver import OtlpReceiver, ReceivedSpan
from tests.fakes.servers import serve_app
from tests.gateway.harness import free_port, gateway_process, running_gateway
from tests.gateway.sse_client import envelopes, read_stream
from tests.jsonrpc.jsonrpc_support import RpcProcess

PARENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_SPAN = "00f067aa0ba902b7"


def test_traceparent_header_parents_the_run_and_the_trace_id_is_in_the_run_json() -> None:
    exporter = InMemorySpanExporter()
    with running_gateway(telemetry=Telemetry(SimpleSpanProcessor(exporter))) as (base, _):
        response = httpx.post(
            f"{base}/v1/runs",
            json={"input": "What time is it, and what is 6 * 7?"},
            headers={
                "traceparent": f"00-{PARENT_TRACE}-{PARENT_SPAN}-01",
                "tracestate": "vendor=abc,other=1",
            },
        )
        assert response.status_code in (200, 201, 202), response.text
        run = response.json()
        events = envelopes(read_stream(base, run["id"]))
        shown = httpx.get(f"{base}/v1/runs/{run['id']}").json()
    assert events[-1]["data"]["status"] == "completed"
    assert run["metadata"]["trace_id"] == PARENT_TRACE == shown["metadata"]["trace_id"]
    spans = exporter.get_finished_spans()
    assert {f"{s.context.trace_id:032x}" for s in spans} == {PARENT_TRACE}
    root = next(s for s in spans if s.name == "invoke_agent loopgate")
    assert f"{root.parent.span_id:016x}" == PARENT_SPAN
    assert shown["metadata"]["traceparent"] == f"00-{PARENT_TRACE}-{root.context.span_id:016x}-01"
    # tracestate rides along: every span carries it, and the run JSON gives it back.
    assert {s.context.trace_state.to_header() for s in spans} == {"vendor=abc,other=1"}
    assert shown["metadata"]["tracestate"] == "vendor=abc,other=1"
    deliver = next(s for s in spans if s.name == "deliver sse")
    assert deliver.parent.span_id == root.context.span_id
    assert deliver.attributes["loopgate.delivery.events"] == len(events)
    assert deliver.attributes["loopgate.delivery.complete"] is True
    names = {s.name for s in spans}
    assert {"chat loopgate-scripted", "execute_tool clock", "execute_tool calculate"} <= names


def test_nothing_is_traced_by_default() -> None:
    assert build_telemetry(Settings(), {}) is None
    assert (
        build_telemetry(Settings(otel_endpoint="http://127.0.0.1:1"), {"OTEL_SDK_DISABLED": "true"})
        is None
    )
    console = build_telemetry(Settings(trace_console=True), {})
    assert console is not None
    console.shutdown()


@pytest.mark.parametrize(
    ("setting", "env", "expected"),
    [
        (None, {}, None),
        ("http://c:4318", {}, "http://c:4318/v1/traces"),
        ("http://c:4318/", {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"}, "http://c:4318/v1/traces"),
        (
            None,
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "https://h/api/public/otel"},
            "https://h/api/public/otel/v1/traces",
        ),
        (
            None,
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x",
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t/custom",
            },
            "http://t/custom",
        ),
    ],
)
def test_endpoint_resolution(
    setting: str | None, env: dict[str, str], expected: str | None
) -> None:
    assert traces_endpoint(Settings(otel_endpoint=setting), env) == expected


def test_settings_read_telemetry_variables() -> None:
    s = load_settings(
        {
            "LOOPGATE_OTEL_ENDPOINT": "http://c:4318",
            "LOOPGATE_TRACE_CONTENT": "true",
            "LOOPGATE_TRACE_CONSOLE": "false",
            "LOOPGATE_OTEL_EXPORT_TIMEOUT_S": "0.5",
        }
    )
    assert (s.otel_endpoint, s.trace_content, s.trace_console, s.otel_export_timeout_s) == (
        "http://c:4318",
        True,
        False,
        0.5,
    )
    with pytest.raises(ValueError, match="otel_export_timeout_s must be positive"):
        Settings(otel_export_timeout_s=0)


def run_spans(receiver: OtlpReceiver, trace_id: str) -> list[ReceivedSpan]:
    return [s for s in receiver.snapshot() if s.trace_id == trace_id]


def whole_run(trace_id: str) -> Callable[[OtlpReceiver], list[ReceivedSpan]]:
    """The run's spans once its run span (the last to end) has arrived, else nothing."""

    def found(receiver: OtlpReceiver) -> list[ReceivedSpan]:
        spans = run_spans(receiver, trace_id)
        return spans if any(s.name.startswith("invoke_agent") for s in spans) else []

    return found


def test_loopgate_serve_exports_otlp_http_configured_by_environment_only() -> None:
    receiver = OtlpReceiver()
    with serve_app(receiver.app) as collector:
        env = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": collector,
            "OTEL_SERVICE_NAME": "loopgate-under-test",
            "OTEL_BSP_SCHEDULE_DELAY": "100",  # export within 0.1 s instead of 5 s
        }
        with gateway_process("--scripted-delay", "0", env=env) as (base, _):
            run = httpx.post(
                f"{base}/v1/runs", json={"input": "What time is it, and what is 6 * 7?"}
            ).json()
            events = envelopes(read_stream(base, run["id"]))
            trace_id = run["metadata"]["trace_id"]
            spans = receiver.wait_for(whole_run(trace_id))
    assert events[-1]["data"]["status"] == "completed"
    root = next(s for s in spans if s.name == "invoke_agent loopgate")
    assert root.parent_span_id is None
    assert root.resource["service.name"] == "loopgate-under-test"
    assert root.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert root.attributes["gen_ai.conversation.id"] == run["thread_id"]
    assert root.attributes["loopgate.run.status"] == "completed"
    chats = [s for s in spans if s.name == "chat loopgate-scripted"]
    assert len(chats) == 2
    assert all(c.parent_span_id == root.span_id and c.kind == 3 for c in chats)  # 3 = CLIENT
    assert chats[0].attributes["gen_ai.provider.name"] == "loopgate.scripted"
    tools = sorted(s.attributes["gen_ai.tool.name"] for s in spans if s.name.startswith("exec"))
    assert tools == ["calculate", "clock"]
    assert all(root.start_ns <= s.start_ns <= s.end_ns <= root.end_ns for s in chats)


def test_runs_complete_when_the_collector_is_down() -> None:
    """Runs are not slowed or failed; exports give up after the timeout, and so does the
    flush when the gateway stops."""
    dead = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    args = ("--scripted-delay", "0", "--otel-endpoint", dead, "--otel-export-timeout", "0.5")
    started = time.monotonic()
    with gateway_process(*args, env={"OTEL_BSP_SCHEDULE_DELAY": "50"}) as (base, proc):
        assert proc.stderr is not None
        log = LineReader(proc.stderr)
        for _ in range(3):
            run = httpx.post(
                f"{base}/v1/runs", json={"input": "What time is it, and what is 6 * 7?"}
            ).json()
            events = envelopes(read_stream(base, run["id"], timeout=10))
            assert events[-1]["data"]["status"] == "completed"
            assert len(run["metadata"]["trace_id"]) == 32
        log.wait_for("Failed to export")
    assert proc.returncode == 130  # 128 + SIGINT, as without telemetry
    text = log.all()
    assert "Traceback" not in text, text[-3000:]
    assert time.monotonic() - started < 20


class LineReader:
    """A child's stderr read line by line in a thread, so a test can wait for a line."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: IO[bytes]) -> None:
        for line in iter(stream.readline, b""):
            self.lines.put(line.decode(errors="replace"))
        self.lines.put(None)

    def wait_for(self, text: str, timeout: float = 10) -> None:
        deadline = time.monotonic() + timeout
        while True:
            line = self.lines.get(timeout=max(deadline - time.monotonic(), 0.001))
            assert line is not None, f"the process ended without logging {text!r}"
            self.seen.append(line)
            if text in line:
                return

    def all(self) -> str:
        """Everything it wrote, once it has exited."""
        self._thread.join(10)
        while not self.lines.empty():
            line = self.lines.get_nowait()
            if line is not None:
                self.seen.append(line)
        return "".join(self.seen)


def test_loopgate_rpc_over_stdio_traces_under_the_callers_meta_context() -> None:
    """The stdio commands trace too (same variables), and `params._meta` parents the run."""
    receiver = OtlpReceiver()
    with serve_app(receiver.app) as collector:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": collector, "LOOPGATE_SCRIPTED_DELAY_S": "0"}
        with RpcProcess(env=env) as rpc:
            meta = {"traceparent": f"00-{PARENT_TRACE}-{PARENT_SPAN}-01", "tracestate": "k=v"}
            rpc.call("run.start", {"input": "plain", "subscribe": True, "_meta": meta})
            while rpc.recv().get("method") != "run.end":
                pass
            assert rpc.finish() == 0  # exiting flushes the spans
        spans = receiver.wait_for(whole_run(PARENT_TRACE))
    root = next(s for s in spans if s.name == "invoke_agent loopgate")
    assert root.parent_span_id == PARENT_SPAN
    assert any(s.name.startswith("chat ") for s in spans)


@pytest.mark.anyio
async def test_loopgate_acp_over_stdio_traces_under_the_prompts_meta_context() -> None:
    receiver = OtlpReceiver()
    with serve_app(receiver.app) as collector:
        client = RecordingClient()
        env = agent_env(OTEL_EXPORTER_OTLP_ENDPOINT=collector, OTEL_BSP_SCHEDULE_DELAY="100")
        async with spawned(client, env=env) as conn:
            session = await open_session(conn)
            answer = await conn.prompt(
                session_id=session,
                prompt=[acp.text_block("plain")],
                traceparent=f"00-{PARENT_TRACE}-{PARENT_SPAN}-01",
            )
            assert answer.stop_reason == "end_turn"
            spans = await anyio.to_thread.run_sync(
                lambda: receiver.wait_for(whole_run(PARENT_TRACE))
            )
    root = next(s for s in spans if s.name == "invoke_agent loopgate")
    assert root.parent_span_id == PARENT_SPAN
    assert root.attributes["gen_ai.conversation.id"] == session
