"""The trace worker: spans built in a process of their own are the spans built inline, and
nothing the worker does (dying, lagging, odd input) reaches a run."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from contracts.envelope import Envelope
from contracts.ports import StartRun
from gateway.app import build_hub
from gateway.settings import REPO_ROOT, Settings
from gateway.telemetry import Telemetry
from gateway.telemetry.book import TraceBook
from gateway.telemetry.golden import STREAMS
from gateway.telemetry.spans import SpanWriter
from gateway.telemetry.telemetry import build_telemetry
from gateway.telemetry.wire import HEADER, FrameDecoder, FrameEncoder, FrameError, Message_
from gateway.telemetry.worker import WorkerSink, WorkerSpec, _slim

STREAM_PATHS = sorted(STREAMS.glob("*.jsonl"))
# Recordings that are replayed through a hub (the unknown-kinds one has no replayable shape).
REPLAYED = [p for p in STREAM_PATHS if p.stem != "unknown-kinds-fields"]


class Recorder:
    """A sink that keeps what the hub side sends, to be replayed into either span side."""

    def __init__(self) -> None:
        self.messages: list[Message_] = []

    def put(self, message: Message_) -> None:
        self.messages.append(message)

    def close(self) -> None:
        pass


async def recorded_messages(content: bool) -> list[Message_]:
    """What the hub side sends for a replay of every recording, each read by a subscriber."""
    recorder = Recorder()
    telemetry = Telemetry(sink=recorder, content=content)
    async with build_hub(Settings(replay_max_gap_s=0.05), telemetry=telemetry) as hub:
        for stream in REPLAYED:
            info = await hub.start(StartRun(source="replay", replay=stream.stem))
            async with hub.subscribe(info.id, consumer="sse") as sub:
                while not sub.done:
                    await sub.next_batch()
    return recorder.messages


def inline_spans(messages: list[Message_], content: bool) -> list[dict[str, Any]]:
    exporter = InMemorySpanExporter()
    book = TraceBook(
        SpanWriter(SimpleSpanProcessor(exporter), Resource.create({"service.name": "loopgate"})),
        content=content,
    )
    for message in messages:
        book.put(message)
    return [json.loads(span.to_json()) for span in exporter.get_finished_spans()]


def console_spans(text: str) -> list[dict[str, Any]]:
    """The JSON objects the SDK's console exporter printed, one after another."""
    decoder = json.JSONDecoder()
    spans, i = [], 0
    while (i := _skip_space(text, i)) < len(text):
        span, i = decoder.raw_decode(text, i)
        spans.append(span)
    return spans


def _skip_space(text: str, i: int) -> int:
    while i < len(text) and text[i].isspace():
        i += 1
    return i


def comparable(spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Spans with span ids (children's are random, drawn where the span is built) replaced by
    their place in start order; trace ids come from the hub side in both modes."""
    ordered = sorted(spans, key=lambda s: (s["start_time"], s["name"], s["end_time"]))
    names = {s["context"]["span_id"]: f"#{i}" for i, s in enumerate(ordered)}
    out = []
    for span in ordered:
        span = dict(span)
        span["context"] = {**span["context"], "span_id": names[span["context"]["span_id"]]}
        span["parent_id"] = names.get(span["parent_id"], span["parent_id"])
        # Drawn per process by the SDK's Resource.create.
        span["resource"]["attributes"].pop("service.instance.id", None)
        out.append(span)
    return out


@pytest.mark.parametrize("content", [False, True], ids=["content-off", "content-on"])
def test_the_worker_builds_the_spans_the_inline_mode_builds(
    content: bool, capfd: pytest.CaptureFixture[str]
) -> None:
    """Every recording, replayed through a hub: the worker process (spec over the pipe, the
    messages slimmed when content is off) prints the very spans the inline mode exports."""
    messages = anyio.run(recorded_messages, content)
    expected = inline_spans(messages, content)
    assert len(expected) >= 4 * len(REPLAYED)  # run, delivery, a model call, more
    capfd.readouterr()
    sink = WorkerSink(WorkerSpec(console=True, content=content))
    for message in messages:
        sink.put(message)
    sink.close()
    assert sink.process.returncode == 0
    assert sink.dropped == 0
    printed = console_spans(capfd.readouterr().err)
    assert comparable(printed) == comparable(expected)


def test_slimming_drops_only_what_content_capture_would_show() -> None:
    env = Envelope("r", 3, 1, "tool_call_result", {"id": "c1", "name": "t", "result": "x" * 10_000})
    slim = _slim(env)
    assert slim.data == {"id": "c1", "name": "t"}
    assert (slim.run_id, slim.seq, slim.ts, slim.kind) == ("r", 3, 1, "tool_call_result")
    plain = Envelope("r", 4, 2, "tool_call_result", {"id": "c1", "success": True})
    assert _slim(plain) is plain
    short = Envelope("r", 5, 2, "tool_call_result", {"id": "c1", "resultPreview": "4"})
    assert _slim(short) is short  # copying would cost more than sending it
    nested = Envelope("r", 6, 2, "tool_call_start", {"id": "c2", "arguments": {"path": "x"}})
    assert _slim(nested).data == {"id": "c2"}


def frame(messages: list[Any]) -> bytes:
    return FrameEncoder().encode(messages)


def spec_frame(spec: WorkerSpec) -> bytes:
    body = msgspec.json.encode(spec)
    return HEADER.pack(len(body)) + body


def run_worker(stdin: bytes, *, interrupt: bool = False) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "gateway.telemetry.worker_main"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert proc.stdin is not None
    if interrupt:
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.2)
    out, err = proc.communicate(stdin, timeout=30)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def one_run(run_id: str = "run_a") -> list[Any]:
    recorder = Recorder()
    telemetry = Telemetry(sink=recorder)

    async def go() -> None:
        async with build_hub(Settings(replay_max_gap_s=0.05), telemetry=telemetry) as hub:
            info = await hub.start(StartRun(source="replay", replay="plain-answer", run_id=run_id))
            await hub.run(info.id).ended.wait()

    anyio.run(go)
    return recorder.messages


def test_a_garbled_frame_costs_only_itself() -> None:
    body = b"\x93not msgpack at all"
    garbage = HEADER.pack(len(body)) + body
    stdin = spec_frame(WorkerSpec(console=True)) + garbage + frame(one_run())
    done = run_worker(stdin)
    assert done.returncode == 0
    err = done.stderr.decode()
    assert "a frame could not be decoded; its messages are lost" in err
    assert "Traceback" not in err
    assert [s["name"] for s in console_spans(err.split("lost", 1)[1])] == [
        "chat loopgate-scripted",
        "invoke_agent loopgate",
    ]


def test_the_worker_outlives_ctrl_c_and_ends_when_the_pipe_closes() -> None:
    """SIGINT/SIGTERM meant for the gateway do not cut the worker off before the spans it
    was sent are out; closing the pipe ends it."""
    done = run_worker(spec_frame(WorkerSpec(console=True)) + frame(one_run()), interrupt=True)
    assert done.returncode == 0
    assert len(console_spans(done.stderr.decode())) == 2


def test_a_worker_without_a_spec_or_exporter_exits_with_a_reason() -> None:
    done = run_worker(b"\x00\x00\x00\x02{}")
    assert done.returncode == 2
    assert "names no exporter" in done.stderr.decode()
    done = run_worker(b"\x00\x00\x00\x03abc")
    assert done.returncode == 2
    assert "no valid worker spec" in done.stderr.decode()


def test_an_oversized_frame_header_stops_reading_not_the_gateway() -> None:
    done = run_worker(spec_frame(WorkerSpec(console=True)) + HEADER.pack(2**31))
    assert done.returncode == 0
    assert "over the limit" in done.stderr.decode()


def test_frames_with_unknown_codes_or_mismatched_lengths_are_refused() -> None:
    decoder = FrameDecoder()
    encoder = msgspec.msgpack.Encoder()
    with pytest.raises(FrameError):
        decoder.decode(encoder.encode(([9], [{"x": 1}])))
    with pytest.raises(FrameError):
        decoder.decode(encoder.encode(([0, 0], [{"x": 1}])))
    with pytest.raises(FrameError):
        decoder.decode(b"\xc1")


def test_a_dead_worker_drops_messages_and_says_so_once(caplog: pytest.LogCaptureFixture) -> None:
    sink = WorkerSink(WorkerSpec(console=True), flush_interval_s=0.01)
    sink.process.kill()
    sink.process.wait()
    messages = one_run() * 50
    with caplog.at_level(logging.WARNING, logger="loopgate.telemetry"):
        deadline = time.monotonic() + 10
        while sink.dropped == 0 and time.monotonic() < deadline:
            for message in messages:
                sink.put(message)  # never raises
            time.sleep(0.05)
        sink.close()
    assert sink.dropped > 0
    assert "the trace worker is gone" in caplog.text
    assert caplog.text.count("telemetry is dropping messages") == 1


def test_the_queue_is_bounded_and_drops_are_counted() -> None:
    sink = WorkerSink(WorkerSpec(discard=True), max_queued=100, flush_interval_s=5.0)
    messages = one_run()
    for _ in range(1_000 // len(messages) + 1):
        for message in messages:
            sink.put(message)
    queued = len(sink._queue)
    sink.close()
    assert queued == 100
    assert sink.dropped >= 1_000 - 100


def test_an_unencodable_payload_costs_only_its_own_message(
    capfd: pytest.CaptureFixture[str],
) -> None:
    messages = one_run()
    # An integer beyond 64 bits: JSON has them, msgpack does not.
    odd = Envelope("run_a", 2, messages[1].ts, "hook_action", {"n": 2**70})
    sink = WorkerSink(WorkerSpec(console=True))
    for message in [*messages[:2], odd, *messages[2:]]:
        sink.put(message)
    sink.close()
    assert sink.dropped == 1
    assert len(console_spans(capfd.readouterr().err)) == 2


def test_build_telemetry_uses_the_worker_unless_told_not_to() -> None:
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}
    worker = build_telemetry(Settings(), env)
    inline = build_telemetry(Settings(trace_worker=False), env)
    assert worker is not None and inline is not None
    try:
        assert isinstance(worker.sink, WorkerSink)
        assert worker.sink.spec.otlp_endpoint == "http://127.0.0.1:9/v1/traces"
        assert isinstance(inline.sink, TraceBook)
    finally:
        worker.shutdown()
        inline.shutdown()


def test_the_worker_module_runs_from_anywhere(tmp_path: Path) -> None:
    """The gateway puts its own root on the worker's PYTHONPATH: a gateway started from
    another directory (or without PYTHONPATH) still gets a working worker."""
    code = (
        f"import sys; sys.path.insert(0, {str(REPO_ROOT)!r})\n"
        "from gateway.telemetry.worker import WorkerSink, WorkerSpec\n"
        "s = WorkerSink(WorkerSpec(discard=True)); s.close(); print(s.process.returncode)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, timeout=30
    )
    assert done.stdout.strip() == b"0", done.stderr.decode()[-2000:]
