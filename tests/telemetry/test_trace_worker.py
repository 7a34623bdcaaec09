"""The trace worker: spans built in a process of their own are the spans built inline, and
nothing the worker does (dying, lagging, odd input) reaches a run."""

from __future__ import annotations

import itertools
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
from gateway.hub import Run
from gateway.hub.run import new_record
from gateway.settings import REPO_ROOT, Settings
from gateway.telemetry import Telemetry
from gateway.telemetry.book import TraceBook
from gateway.telemetry.gate import DeltaGate
from gateway.telemetry.golden import STREAMS, load_stream
from gateway.telemetry.relay import slim
from gateway.telemetry.spans import SpanWriter
from gateway.telemetry.telemetry import build_telemetry
from gateway.telemetry.wire import HEADER, FrameDecoder, FrameEncoder, FrameError, Message_
from gateway.telemetry.worker import WorkerSink, WorkerSpec

STREAM_PATHS = sorted(STREAMS.glob("*.jsonl"))
# Recordings that are replayed through a hub (the unknown-kinds one has no replayable shape).
REPLAYED = [p for p in STREAM_PATHS if p.stem != "unknown-kinds-fields"]


class Recorder:
    """A sink that keeps what the hub side sends, to be replayed into either span side."""

    def __init__(self, content: bool = False) -> None:
        self.content = content
        self.messages: list[Message_] = []

    def follow(self, run: Run) -> bool:
        run.observers.append(DeltaGate(run, self.put, self.content).event)
        return True

    def put(self, message: Message_) -> None:
        self.messages.append(message)

    async def pump(self) -> None:
        pass

    def close(self) -> None:
        pass


async def recorded_messages(content: bool) -> list[Message_]:
    """What the hub side sends for a replay of every recording, each read by a subscriber."""
    recorder = Recorder(content)
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


async def publish_recordings(telemetry: Telemetry) -> None:
    """Every recording published into a hub on a counting clock (so two hubs stamp the same
    times), each read afterwards by a late subscriber."""
    hub = build_hub(Settings())
    ticks = itertools.count(1_700_000_000_000_000_000, 1_000_000)
    hub.clock = lambda: next(ticks)
    telemetry.attach(hub)
    async with hub:
        for path in STREAM_PATHS:
            info = await hub.start(StartRun(source="ingest", run_id=f"run_{path.stem}"))
            run = hub.run(info.id)
            for env in load_stream(path):
                if not run.finished:
                    hub.publish(run, env.kind, env.data)
            hub.end_producer(run)
            async with hub.subscribe(info.id, consumer="sse") as sub:
                while not sub.done:
                    await sub.next_batch()


def with_trace_ids_by_order(spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    traces: dict[str, str] = {}
    for span in spans:
        trace_id = span["context"]["trace_id"]
        span["context"]["trace_id"] = traces.setdefault(trace_id, f"trace#{len(traces)}")
    return spans


@pytest.mark.parametrize("content", [False, True], ids=["content-off", "content-on"])
def test_a_hub_traced_through_the_worker_gives_the_spans_a_hub_traced_inline_gives(
    content: bool, capfd: pytest.CaptureFixture[str]
) -> None:
    """The worker's own path: the hub appends a run's events to the queue without any call
    per event, and the writer thread finds each model call's first delta in the run itself
    (the inline mode is handed it by the hub). Same recordings, same clock, same spans."""
    exporter = InMemorySpanExporter()
    anyio.run(publish_recordings, Telemetry(SimpleSpanProcessor(exporter), content=content))
    expected = [json.loads(span.to_json()) for span in exporter.get_finished_spans()]
    assert len(expected) >= 4 * len(STREAM_PATHS)
    ttft = "gen_ai.response.time_to_first_chunk"
    assert any(ttft in span["attributes"] for span in expected)
    capfd.readouterr()
    through_worker = Telemetry(sink=WorkerSink(WorkerSpec(console=True, content=content)))
    anyio.run(publish_recordings, through_worker)
    through_worker.shutdown()
    printed = console_spans(capfd.readouterr().err)
    assert with_trace_ids_by_order(comparable(printed)) == with_trace_ids_by_order(
        comparable(expected)
    )


def test_slimming_drops_only_what_content_capture_would_show() -> None:
    env = Envelope("r", 3, 1, "tool_call_result", {"id": "c1", "name": "t", "result": "x" * 10_000})
    slimmed = slim(env)
    assert slimmed.data == {"id": "c1", "name": "t"}
    assert (slimmed.run_id, slimmed.seq, slimmed.ts, slimmed.kind) == (
        "r",
        3,
        1,
        "tool_call_result",
    )
    plain = Envelope("r", 4, 2, "tool_call_result", {"id": "c1", "success": True})
    assert slim(plain) is plain
    short = Envelope("r", 5, 2, "tool_call_result", {"id": "c1", "resultPreview": "4"})
    assert slim(short) is short  # copying would cost more than sending it
    nested = Envelope("r", 6, 2, "tool_call_start", {"id": "c2", "arguments": {"path": "x"}})
    assert slim(nested).data == {"id": "c2"}
    assert nested.data == {"id": "c2", "arguments": {"path": "x"}}  # the run's own is intact


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
        # The signals must arrive once the worker ignores them (as in production, where it is
        # in a session of its own and only a signal sent to it directly reaches it).
        wait_until_ignored(proc.pid, signal.SIGINT, signal.SIGTERM)
        proc.send_signal(signal.SIGINT)
        proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(stdin, timeout=30)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def wait_until_ignored(pid: int, *signals: int, timeout_s: float = 30) -> None:
    """Until the process ignores ``signals`` (its SigIgn mask in /proc shows them)."""
    wanted = sum(1 << (sig - 1) for sig in signals)
    deadline = time.monotonic() + timeout_s
    while True:
        status = Path(f"/proc/{pid}/status").read_text()
        ignored = int(
            next(x for x in status.splitlines() if x.startswith("SigIgn:")).split()[1], 16
        )
        if ignored & wanted == wanted:
            return
        assert time.monotonic() < deadline, "the worker never started ignoring the signals"
        time.sleep(0.005)


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
    sink = WorkerSink(WorkerSpec(console=True))
    sink.process.kill()
    sink.process.wait()
    messages = one_run() * 50
    run = Run(new_record("run_late", "run_late", "ingest", 0, {}))
    with caplog.at_level(logging.WARNING, logger="loopgate.telemetry"):
        for message in messages:
            sink.put(message)  # never raises
        assert sink.flush_batch() is False  # what the pump does: finds the pipe broken
        for message in messages:
            sink.put(message)
        followed = sink.follow(run)
        sink.close()
    assert sink.dropped == 2 * len(messages)
    assert followed is False and run.observers == []  # new runs are not traced at all
    assert caplog.text.count("spans are no longer exported") == 1
    assert caplog.text.count("telemetry is dropping messages") == 1


@pytest.mark.anyio
async def test_the_hub_runs_the_flush_and_a_full_pipe_waits_for_the_next_round() -> None:
    """The pump is a task of the hub; a worker that does not read leaves messages queued
    (bounded), never blocks the event loop, and the rest goes out once it reads again."""
    sink = WorkerSink(WorkerSpec(discard=True), flush_interval_s=0.01)
    os.kill(sink.process.pid, signal.SIGSTOP)
    try:
        telemetry = Telemetry(sink=sink)
        async with build_hub(Settings(), telemetry=telemetry) as hub:
            big = {"status": "executing", "pad": "x" * 2_000}
            for _ in range(5):
                info = await hub.start(StartRun(source="ingest"))
                run = hub.run(info.id)
                for _ in range(1_000):
                    hub.publish(run, "completion", big)  # a batch of 4,096 is 8 MB
                hub.publish(run, "completion", {"status": "completed"})
            with anyio.fail_after(5):
                while not sink._unsent:  # noqa: ASYNC110 - polling what the pump leaves
                    await anyio.sleep(0.01)
            queued = len(sink._queue)
            await anyio.sleep(0.1)  # rounds come and go; the loop is not held up
            assert len(sink._queue) == queued > 0
    finally:
        os.kill(sink.process.pid, signal.SIGCONT)
    sink.close()
    assert sink.process.returncode == 0
    assert sink.dropped == 0 and not sink._queue


def test_the_queue_is_bounded_and_an_overflow_is_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sink = WorkerSink(WorkerSpec(discard=True), max_queued=100, flush_interval_s=5.0)
    messages = one_run()
    with caplog.at_level(logging.WARNING, logger="loopgate.telemetry"):
        for _ in range(1_000 // len(messages) + 1):
            for message in messages:
                sink.put(message)
        queued = len(sink._queue)
        sink.close()
    assert queued == 100
    assert sink.overflows >= 1
    assert "queue reached its bound of 100 messages" in caplog.text


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
