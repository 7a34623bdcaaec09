"""Runs of the reference CoreLoop inside the gateway."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from contracts.messages import Message
from contracts.ports import StartRun
from gateway.loop.config import LoopConfig
from gateway.loop.control import TurnControl
from gateway.loop.core import CoreLoop
from gateway.loop.providers import make_provider
from gateway.loop.tools import DemoTools
from gateway.loop.types import ModelProvider
from gateway.settings import Settings
from gateway.sources.permissions import HubPermissionGate, RememberedDecisions

if TYPE_CHECKING:
    from gateway.hub import Hub, Run


class Prepared(msgspec.Struct):
    history: list[Message]
    config: LoopConfig
    request: StartRun


class LoopSource:
    def __init__(self, settings: Settings, provider: ModelProvider | None = None) -> None:
        self.settings = settings
        self.provider = provider or provider_from_settings(settings)
        self.tools = DemoTools(Path(settings.workspace))
        self.remembered = RememberedDecisions()

    def prepare(self, request: StartRun) -> Prepared:
        if request.input is None or request.input == "" or request.input == []:
            raise ValueError("input is required: a prompt string or a list of messages")
        history = (
            [Message(role="user", content=request.input)]
            if isinstance(request.input, str)
            else list(request.input)
        )
        config = LoopConfig.from_dict({**self.settings.loop_config, **request.config})
        return Prepared(history=history, config=config, request=request)

    def producer(self, hub: Hub, run: Run, prepared: Prepared) -> LoopProducer:
        gate = HubPermissionGate(
            hub,
            run,
            self.tools,
            prepared.request.approval,
            self.settings.permission_timeout_s,
            self.remembered.for_thread(run.record.thread_id),
        )
        loop = CoreLoop(
            self.provider,
            self.tools,
            config=prepared.config,
            permissions=gate,
            client_tools=list(prepared.request.client_tools),
        )
        return LoopProducer(hub, run, loop, prepared, gate)


class LoopProducer:
    def __init__(
        self, hub: Hub, run: Run, loop: CoreLoop, prepared: Prepared, gate: HubPermissionGate
    ) -> None:
        self.hub = hub
        self.run_ = run
        self.loop = loop
        self.prepared = prepared
        self.gate = gate
        self.control = TurnControl(prepared.config.max_steer_chars)

    async def run(self) -> None:
        async def emit(kind: str, data: dict[str, Any]) -> None:
            self.hub.publish(self.run_, kind, data)

        await self.loop.run_turn(self.prepared.history, emit, self.control)

    def cancel(self) -> None:
        self.control.cancel()

    def respond(self, request_id: str, decision: str) -> str | None:
        return self.gate.answer(request_id, decision)

    def steer(self, content: str) -> str | None:
        self.control.steer(content)  # ValueError if over max_steer_chars: the caller's 422
        return None


def provider_from_settings(settings: Settings) -> ModelProvider:
    if settings.provider == "openai":
        return make_provider(
            "openai",
            base_url=settings.openai_base_url,
            model=settings.openai_model,
            api_key=settings.openai_api_key,
        )
    return make_provider("scripted", delay_s=settings.scripted_delay_s)
