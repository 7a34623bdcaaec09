"""AcpAgent in-process against the real hub (no subprocess): trace context and busy sessions."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from loopgate.adapters.acp.agent import AcpAgent
from loopgate.adapters.acp.errors import AgentError
from loopgate.contracts.ports import RunInfo, StartRun
from loopgate.gateway.app import build_hub
from loopgate.gateway.settings import Settings
from tests.waiting import until

pytestmark = pytest.mark.anyio
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


class Peer:
    def __init__(self) -> None:
        self.updates: list[dict[str, Any]] = []

    async def send_notification(self, method: str, params: Any = None) -> None:
        self.updates.append(params)

    async def send_request(self, method: str, params: Any = None) -> Any:
        return {"outcome": {"outcome": "cancelled"}}


class Text:
    type = "text"

    def __init__(self, text: str) -> None:
        self.text = text


class TracedHub:
    """The hub, with the trace id the telemetry layer records in a run's metadata."""

    def __init__(self, hub: Any) -> None:
        self.hub = hub
        self.started: list[StartRun] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.hub, name)

    async def start(self, request: StartRun) -> RunInfo:
        self.started.append(request)
        return await self.hub.start(request)

    async def get(self, run_id: str, *, attachments: bool = False) -> RunInfo:
        info = await self.hub.get(run_id)
        info.metadata["trace_id"] = "4bf92f3577b34da6a3ce929d0e0e4736"
        return info


async def test_traceparent_in_and_trace_id_out(tmp_path: Any) -> None:
    settings = Settings(scripted_delay_s=0.0, workspace=str(tmp_path))
    async with build_hub(settings) as hub, anyio.create_task_group() as tg:
        service = TracedHub(hub)
        agent = AcpAgent(service)  # type: ignore[arg-type]
        agent.attach(Peer(), tg)
        session_id = (await agent.new_session(cwd="/tmp"))["sessionId"]
        answer = await agent.prompt([Text("plain")], session_id, traceparent=TRACEPARENT)
        tg.cancel_scope.cancel()
    assert service.started[0].traceparent == TRACEPARENT
    assert service.started[0].thread_id == session_id
    assert answer["_meta"]["loopgate"]["traceId"] == "4bf92f3577b34da6a3ce929d0e0e4736"


async def test_a_session_busy_in_another_connection_refuses_a_prompt(tmp_path: Any) -> None:
    settings = Settings(scripted_delay_s=0.0, workspace=str(tmp_path))
    async with build_hub(settings) as hub, anyio.create_task_group() as tg:
        first, second = AcpAgent(hub), AcpAgent(hub)
        first.attach(Peer(), tg)
        second.attach(Peer(), tg)
        session_id = (await first.new_session(cwd="/tmp"))["sessionId"]
        await first.prompt([Text("plain")], session_id)
        tg.start_soon(first.prompt, [Text("slow tool")], session_id)
        with anyio.fail_after(5):
            await until(lambda: running(hub, session_id))
        with pytest.raises(AgentError) as busy:
            await second.prompt([Text("plain")], session_id)
        await first.cancel(session_id)
    assert busy.value.code == -32600 and "already has a prompt running" in busy.value.message


async def running(hub: Any, session_id: str) -> list[Any]:
    return [r for r in await hub.list_runs(thread_id=session_id) if r.state == "running"]
