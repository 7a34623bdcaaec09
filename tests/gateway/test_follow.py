"""The one follow loop (adapters.shared.follow.EventStream) and each protocol's policy in it,
against the real hub: keep-alives, write timeouts, lag cut-offs and what each protocol's client
is told."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import msgspec
import pytest

from loopgate.adapters.acp.projector import AcpProjector
from loopgate.adapters.agui.events import RunError
from loopgate.adapters.agui.projector import AguiProjector
from loopgate.adapters.agui.stream import cut_off_events
from loopgate.adapters.jsonrpc.dispatch import Dispatcher
from loopgate.adapters.jsonrpc.limits import RpcLimits
from loopgate.adapters.jsonrpc.session import Session
from loopgate.adapters.native.projector import NativeProjector
from loopgate.adapters.shared.follow import (
    CONNECTION,
    CUT_OFF_REASON,
    RESUMING,
    Ending,
    EventStream,
    FollowPolicy,
    stream_policy,
)
from loopgate.contracts.envelope import Envelope, LoopEvent
from loopgate.contracts.limits import EndpointLimits
from loopgate.contracts.ports import StartRun
from loopgate.contracts.projector import Projector, ProjectorContext
from loopgate.gateway.app import build_hub
from loopgate.gateway.hub import Hub
from loopgate.gateway.settings import Settings

pytestmark = pytest.mark.anyio

DONE = LoopEvent("completion", {"status": "completed", "reason": "done"})
QUICK = stream_policy(EndpointLimits(keepalive_s=0.05, write_timeout_s=0.2))


def delta(text: str) -> LoopEvent:
    return LoopEvent("content_delta", {"delta": text})


def hub_for(tmp_path: Path, **overrides: Any) -> Hub:
    # QUICK's bounds: the hub watches the deadlines of keep-alives and writes (a tick of a
    # quarter of the shorter), as the gateway's endpoints get their limits from its settings.
    quick = {"keepalive_s": 0.05, "write_timeout_s": 0.2}
    settings = {"scripted_delay_s": 0.0, "workspace": str(tmp_path), **quick, **overrides}
    return build_hub(Settings(**settings))


class Probe(EventStream[Any, list[Envelope]]):
    """A stream whose client is ``send``; a cut-off one is told ``cut_off`` when given."""

    def __init__(
        self,
        hub: Hub,
        run_id: str,
        projector: Projector[Any],
        send: Callable[[list[Any]], Awaitable[None]],
        policy: FollowPolicy,
        *,
        keepalive: Callable[[], Awaitable[None]] | None = None,
        cut_off: Callable[[], list[Any]] | None = None,
        finished: Callable[[], bool] | None = None,
    ) -> None:
        super().__init__(hub, run_id, projector, policy, consumer="test")
        self.sent, self.beat, self.told, self.ended = send, keepalive, cut_off, finished

    async def send(self, messages: list[Any]) -> None:
        await self.sent(messages)

    async def keepalive(self) -> None:
        if self.beat is not None:
            await self.beat()

    def cut_off(self, cursor: int) -> list[Any]:
        return self.told() if self.told is not None else super().cut_off(cursor)

    def finished(self) -> bool:
        return self.ended is not None and self.ended()


def context(run_id: str) -> ProjectorContext:
    return ProjectorContext(run_id=run_id, thread_id=run_id, protocol_version="1.0")


async def start(hub: Hub, events: int = 0) -> str:
    run_id = (await hub.start(StartRun(source="ingest"))).id
    for i in range(events):
        await hub.push(run_id, delta(str(i)))
    return run_id


async def test_a_quiet_stream_gets_keepalives_where_its_transport_has_them(tmp_path: Path) -> None:
    async with hub_for(tmp_path) as hub:
        run_id = await start(hub)
        beats: dict[str, int] = {"stream": 0, "connection": 0}
        three = anyio.Event()

        async def watch(name: str, policy: FollowPolicy) -> None:
            async def keepalive() -> None:
                beats[name] += 1
                if beats["stream"] >= 3:
                    three.set()

            async def send(messages: list[Envelope]) -> None:
                pass

            projector = NativeProjector(context(run_id))
            await Probe(hub, run_id, projector, send, policy, keepalive=keepalive).run()

        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(watch, "stream", QUICK)
                tg.start_soon(watch, "connection", CONNECTION)  # a WebSocket: pinged instead
                await three.wait()  # as long as the connection's follow had to send one too
                await hub.push(run_id, DONE)
    assert beats["stream"] >= 3 and beats["connection"] == 0


async def test_a_stuck_write_is_cut_off_after_the_write_timeout(tmp_path: Path) -> None:
    async with hub_for(tmp_path) as hub:
        run_id = await start(hub, events=3)
        attempts: list[list[Any]] = []

        async def send(messages: list[Any]) -> None:
            attempts.append(messages)
            await anyio.sleep(30)  # a client that accepts nothing

        projector = AguiProjector(context(run_id))
        with anyio.fail_after(5):
            told = Probe(
                hub, run_id, projector, send, QUICK, cut_off=lambda: cut_off_events(projector)
            )
            ending = await told.run()
    assert ending == "cut_off"
    # RUN_STARTED never got through; the RUN_ERROR telling why was still tried, briefly.
    told = attempts[-1]
    assert isinstance(told[0], RunError) and told[0].code == CUT_OFF_REASON


async def lagging_follow(
    tmp_path: Path,
    projector: Projector[Any],
    policy: FollowPolicy,
    *,
    cut_off: Callable[[], list[Any]] | None = None,
) -> tuple[Ending | None, list[Any], list[Any]]:
    """A subscriber that takes its first batch, then stalls while the run runs 100 events past
    its lag bound; returns how it ended, what it was sent and what the run holds."""
    async with hub_for(tmp_path, subscriber_max_lag=20, max_batch=4) as hub:
        run_id = await start(hub, events=1)
        sent: list[Any] = []
        stalled = anyio.Event()

        async def send(messages: list[Any]) -> None:
            sent.extend(messages)
            if not stalled.is_set():
                stalled.set()
                await anyio.sleep(30)

        ending: Ending | None = None

        async def watch() -> None:
            nonlocal ending
            ending = await Probe(hub, run_id, projector, send, policy, cut_off=cut_off).run()

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(watch)
                await stalled.wait()
                for i in range(100):
                    await hub.push(run_id, delta(f"more {i}"))
                    await anyio.lowlevel.checkpoint()
                await hub.push(run_id, DONE)
        history = await hub.history(run_id)
    return ending, sent, history


async def test_native_sse_ends_a_lagging_stream_and_its_ids_are_the_resume_cursor(
    tmp_path: Path,
) -> None:
    ending, sent, history = await lagging_follow(
        tmp_path, NativeProjector(context("r")), stream_policy(EndpointLimits())
    )
    assert ending == "cut_off"
    assert [e.seq for e in sent] == list(range(1, len(sent) + 1)) and len(sent) < len(history)


async def test_agui_ends_a_lagging_stream_with_run_error_subscriber_cut_off(
    tmp_path: Path,
) -> None:
    projector = AguiProjector(context("r"))
    ending, sent, _ = await lagging_follow(
        tmp_path,
        projector,
        stream_policy(EndpointLimits()),
        cut_off=lambda: cut_off_events(projector),
    )
    assert ending == "cut_off"
    assert isinstance(sent[-1], RunError) and sent[-1].code == CUT_OFF_REASON


async def test_acp_catches_a_lagging_subscriber_up_from_the_journal(tmp_path: Path) -> None:
    class Recording:
        """Every envelope the projector was fed, to check none is missed or fed twice."""

        def __init__(self) -> None:
            self.inner = AcpProjector(context("r"))
            self.fed: list[int] = []

        def start(self) -> list[Any]:
            return self.inner.start()

        def feed(self, envelope: Envelope) -> list[Any]:
            self.fed.append(envelope.seq)
            return self.inner.feed(envelope)

        def close(self, reason: str | None = None) -> list[Any]:
            return self.inner.close(reason)

    projector = Recording()
    ending, sent, history = await lagging_follow(tmp_path, projector, RESUMING)
    assert ending == "ended"
    assert projector.fed == [e.seq for e in history]
    assert type(sent[-1]).__name__ == "PromptAnswer"


async def test_jsonrpc_tells_a_lagging_subscription_where_to_resume(tmp_path: Path) -> None:
    async with hub_for(tmp_path, subscriber_max_lag=20, max_batch=4) as hub:
        run_id = await start(hub, events=1)
        lines: list[dict[str, Any]] = []
        stalled, ended = anyio.Event(), anyio.Event()

        async def send(messages: list[bytes]) -> None:
            lines.extend(msgspec.json.decode(m) for m in messages)
            if any(m.get("method") == "run.end" for m in lines):
                ended.set()
            if any(m.get("method") == "run.event" for m in lines) and not stalled.is_set():
                stalled.set()
                await anyio.sleep(30)

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                session = Session(Dispatcher(hub, RpcLimits(write_timeout_s=60)), send, tg)
                request = {"jsonrpc": "2.0", "id": 1, "method": "run.subscribe"}
                await session.receive(msgspec.json.encode({**request, "params": [run_id]}))
                await stalled.wait()
                for i in range(100):
                    await hub.push(run_id, delta(f"more {i}"))
                    await anyio.lowlevel.checkpoint()
                await hub.push(run_id, DONE)
                await ended.wait()
                tg.cancel_scope.cancel()
    events = [m["params"]["event"]["seq"] for m in lines if m.get("method") == "run.event"]
    end = next(m["params"] for m in lines if m.get("method") == "run.end")
    assert (end["status"], end["reason"]) == (None, "cut_off")
    assert end["lastSeq"] == events[-1]  # resume with run.subscribe {after: lastSeq}


async def test_a_protocol_stream_may_end_before_its_run(tmp_path: Path) -> None:
    async with hub_for(tmp_path, max_batch=1) as hub:
        run_id = await start(hub, events=5)
        sent: list[Envelope] = []

        async def send(messages: list[Envelope]) -> None:
            sent.extend(messages)

        def finished() -> bool:
            return any(e.seq >= 3 for e in sent)

        with anyio.fail_after(5):
            projector = NativeProjector(context(run_id))
            ending = await Probe(hub, run_id, projector, send, CONNECTION, finished=finished).run()
    assert ending == "ended" and [e.seq for e in sent] == [1, 2, 3]
