"""The loop the settings ask for: the user's (Python, HTTP, stdio) or the reference loop."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from contracts.loop import AgentLoop, LoopRequest
from gateway.loop.providers import make_provider
from gateway.loop.tools import DemoTools
from gateway.loop.types import ModelProvider
from gateway.loops.http import HttpLoop
from gateway.loops.python import load_object, python_loop
from gateway.loops.reference import ReferenceLoop, ToolSet
from gateway.loops.source import LoopGuards
from gateway.loops.stdio import StdioLoop
from gateway.settings import Settings


def guards_from(settings: Settings) -> LoopGuards:
    return LoopGuards(
        first_event_timeout_s=settings.loop_first_event_timeout_s,
        idle_timeout_s=settings.loop_idle_timeout_s,
        cancel_grace_s=settings.loop_cancel_grace_s,
        permission_timeout_s=settings.permission_timeout_s,
        max_run_bytes=settings.max_run_bytes,
    )


def build_loop(
    settings: Settings, provider: ModelProvider | None = None, loop: Any = None
) -> AgentLoop:
    """``loop`` (embedding: an async generator function, a factory or an AgentLoop) wins over
    the settings; without either, the reference loop on ``provider`` (else the settings')."""
    if loop is not None:
        return python_loop(loop, getattr(loop, "__qualname__", type(loop).__name__))
    if settings.loop:
        return python_loop(load_object(settings.loop), settings.loop)
    if settings.loop_url:
        return HttpLoop(
            settings.loop_url,
            connect_timeout_s=settings.loop_connect_timeout_s,
            max_line_bytes=settings.max_line_bytes,
            token=settings.loop_token,
        )
    if settings.loop_cmd:
        return StdioLoop(
            settings.loop_cmd,
            connect_timeout_s=settings.loop_connect_timeout_s,
            max_line_bytes=settings.max_line_bytes,
            restart_max_s=settings.loop_restart_max_s,
        )
    return reference_loop(settings, provider)


def reference_loop(settings: Settings, provider: ModelProvider | None = None) -> ReferenceLoop:
    provider = provider or provider_from_settings(settings)
    tools = DemoTools(Path(settings.workspace))

    async def tools_for(request: LoopRequest) -> ToolSet:
        return tools

    return ReferenceLoop(provider, tools_for, system_prompt=system_prompt(settings))


def system_prompt(settings: Settings) -> str | None:
    if settings.system_prompt_file:
        try:
            return Path(settings.system_prompt_file).read_text(encoding="utf-8")
        except OSError as exc:
            raise ValueError(
                f"cannot read --system-prompt-file {settings.system_prompt_file}: {exc.strerror}"
            ) from None
    return settings.system_prompt


def provider_from_settings(settings: Settings) -> ModelProvider:
    if settings.provider == "openai":
        return make_provider(
            "openai",
            base_url=settings.openai_base_url,
            model=settings.openai_model,
            api_key=settings.openai_api_key,
        )
    return make_provider("scripted", delay_s=settings.scripted_delay_s)
