"""The loop the settings ask for: the user's (Python, HTTP, stdio) or the reference loop."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from ...contracts.client_errors import client_message
from ...contracts.loop import AgentLoop, LoopFault, LoopRequest
from ...contracts.parts import AttachmentLimits
from ..reference.cost import price_table
from ..reference.providers import make_provider
from ..reference.tools import DemoTools
from ..reference.types import ModelProvider, ToolExecutor
from ..settings import Settings
from ..tools.functions import FunctionTools
from ..tools.mcp_specs import McpOptions, McpServerSpec, ToolSourceError
from ..tools.sources import ToolSources
from .http import HttpLoop
from .operator_hooks import HookRules, RuledTools, hooks_from_module
from .python import load_object, python_loop
from .reference import ReferenceLoop, RunScope, ToolSet
from .source import LoopGuards
from .stderr import StderrBounds
from .stdio import StdioLoop

log = logging.getLogger("loopgate.loop")


def attachment_limits(settings: Settings) -> AttachmentLimits:
    return AttachmentLimits(
        max_part_bytes=settings.max_attachment_bytes,
        max_message_bytes=settings.max_message_attachment_bytes,
    )


def guards_from(settings: Settings) -> LoopGuards:
    return LoopGuards(
        first_event_timeout_s=settings.loop_first_event_timeout_s,
        idle_timeout_s=settings.loop_idle_timeout_s,
        cancel_grace_s=settings.loop_cancel_grace_s,
        permission_timeout_s=settings.permission_timeout_s,
        max_run_bytes=settings.max_run_bytes,
    )


def loop_summary(settings: Settings) -> str:
    """Which loop the gateway runs, in words: the line ``loopgate serve`` logs on start."""
    s = settings
    if s.loop:
        return f"the Python loop {s.loop}"
    if s.loop_url:
        return f"the HTTP loop at {s.loop_url}"
    if s.loop_cmd:
        return f"the stdio loop `{s.loop_cmd}`"
    if s.provider == "openai":
        return f"the reference loop on {s.openai_model} at {s.openai_base_url}"
    return "the reference loop on the embedded scripted model (no key, no network)"


def loop_provider(settings: Settings) -> str:
    """``gen_ai.provider.name`` of the model calls of the loop ``settings`` describe."""
    return "openai" if settings.provider == "openai" else "loopgate.scripted"


def build_loop(
    settings: Settings,
    provider: ModelProvider | None = None,
    loop: Any = None,
    *,
    scope: RunScope | None = None,
) -> AgentLoop:
    """``loop`` (embedding: an async generator function, a factory or an AgentLoop) wins over
    the settings; without either, the reference loop on ``provider`` (else the settings')."""
    plugged = _plugged_loop(settings, loop)
    if plugged is not None and settings.loop_resumable:
        # The operator's word for it; an AgentLoop object may also say so itself.
        plugged.resumable = True  # type: ignore[attr-defined]
    if plugged is None:
        return reference_loop(settings, provider, scope=scope)
    return plugged


def _plugged_loop(settings: Settings, loop: Any) -> AgentLoop | None:
    if loop is not None:
        name = getattr(loop, "__qualname__", type(loop).__name__)
        return python_loop(loop, name, settings.loop_runner)
    if settings.loop:
        return python_loop(load_object(settings.loop), settings.loop, settings.loop_runner)
    if settings.loop_runner != "event_loop":
        # Said at start-up rather than ignored: the operator meant some loop to run off it.
        runner = settings.loop_runner
        raise ValueError(f"--loop-runner {runner} runs a Python --loop; none is given")
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
            stderr=StderrBounds(
                max_line_bytes=settings.loop_stderr_max_line_bytes,
                bytes_per_s=settings.loop_stderr_bytes_per_s,
                burst_bytes=settings.loop_stderr_burst_bytes,
                report_every_s=settings.loop_stderr_report_s,
            ),
        )
    return None


def reference_loop(
    settings: Settings, provider: ModelProvider | None = None, *, scope: RunScope | None = None
) -> ReferenceLoop:
    """The reference loop with the tools the settings name: the demo tools, function modules
    (``--tools``), MCP servers (``--mcp``, ``--mcp-url``) and each thread's own MCP servers."""
    provider = provider or provider_from_settings(settings)
    sources = tool_sources(settings)
    rules = HookRules.from_value(settings.hook_rules)
    hooks = [h for module in settings.hooks for h in hooks_from_module(module)]
    hooks += rules.hooks()
    ruled = bool(rules.deny_tools or rules.approve_tools)

    async def tools_for(request: LoopRequest) -> ToolSet:
        try:
            specs = [McpServerSpec.from_acp(entry) for entry in request.mcp_servers]
            tools = await sources.for_thread(request.thread_id, specs)
            return RuledTools(tools, rules) if ruled else tools
        except ValueError as exc:  # our own words: a bad entry, two tools with one name
            message = client_message(exc)
            if message is None:
                log.warning("the tools of run %s failed", request.run_id, exc_info=True)
            raise LoopFault(
                "tools_unavailable", message or "the run's tools could not be opened"
            ) from None
        except ToolSourceError as exc:
            raise LoopFault("tools_unavailable", exc.message) from None

    return ReferenceLoop(
        provider,
        tools_for,
        system_prompt=system_prompt(settings),
        start=sources.start,
        close=sources.aclose,
        release_thread=sources.close_thread,
        scope=scope,
        hooks=hooks,
        must_approve=rules.needs_approval if rules.approve_tools else None,
        price=price_table(settings.prices).get(provider.model),
    )


def tool_sources(settings: Settings) -> ToolSources:
    demo = settings.demo_tools
    if demo is None:
        # The scripted model plays scenarios with the demo tools; a real model gets them only
        # when asked for.
        demo = settings.provider == "scripted"
    executors: list[ToolExecutor] = [DemoTools(Path(settings.workspace))] if demo else []
    executors += [FunctionTools.from_module(module) for module in settings.tools]
    servers = [McpServerSpec.from_command(c) for c in settings.mcp]
    servers += [McpServerSpec.from_url(u) for u in settings.mcp_url]
    options = McpOptions(
        connect_timeout_s=settings.mcp_connect_timeout_s,
        call_timeout_s=settings.mcp_call_timeout_s,
    )
    return ToolSources(
        executors,
        servers,
        options,
        max_threads=settings.mcp_max_threads,
        idle_timeout_s=settings.mcp_idle_timeout_s,
    )


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
            text_tools=settings.openai_text_tools,
            text_only=settings.openai_text_only,
        )
    return make_provider("scripted", delay_s=settings.scripted_delay_s)
