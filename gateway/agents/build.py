"""The roster the settings describe: the ``[agents.NAME]`` tables, and the agent the
``--loop``-style settings define (named ``default``), each built into its loop."""

from __future__ import annotations

import copy
from typing import Any

from ...contracts.agents import DEFAULT_AGENT
from ..plugs.build import attachment_limits, build_loop, guards_from, loop_provider, loop_summary
from ..plugs.reference import ReferenceLoop, RunScope
from ..plugs.source import LoopSource
from ..reference.types import ModelProvider
from ..settings import Settings
from .spec import INHERITED, AgentSpec
from .table import Agent, Agents


def build_agents(
    settings: Settings,
    provider: ModelProvider | None = None,
    loop: Any = None,
    *,
    scope: RunScope | None = None,
) -> Agents:
    """``provider`` and ``loop`` (embedding) are the flag-defined agent's, as ``build_loop``
    takes them."""
    agents: list[Agent] = []
    default: str | None = None
    if flags_define_agent(settings) or provider is not None or loop is not None:
        if DEFAULT_AGENT in settings.agents:
            raise ValueError(
                f"agent {DEFAULT_AGENT!r} is declared twice: by [agents.{DEFAULT_AGENT}] and by "
                "the top-level loop settings (loop, loop_url, loop_cmd, provider): rename one"
            )
        agents.append(make_agent(DEFAULT_AGENT, settings, provider, loop, scope, declared=False))
        default = DEFAULT_AGENT
    for name, spec in settings.agents.items():
        own = agent_settings(settings, spec)
        agents.append(make_agent(name, own, None, None, scope, spec=spec))
        if spec.default:
            default = name
    return Agents(agents, default)


def flags_define_agent(settings: Settings) -> bool:
    """Whether the top-level settings define an agent of their own: always when no agent is
    declared; beside declared ones, only when they name a loop or a real model."""
    if not settings.agents:
        return True
    return bool(settings.loop or settings.loop_url or settings.loop_cmd) or (
        settings.provider == "openai"
    )


def agent_settings(settings: Settings, spec: AgentSpec) -> Settings:
    """The top-level settings with the agent's loop in place of theirs (a copy: the checks of
    Settings ran on the top level's, the agent's own on its table)."""
    values = spec.settings_values()
    for key in INHERITED:
        if values.get(key) is None:
            values[key] = getattr(settings, key)
    values["loop_config"] = {**settings.loop_config, **spec.loop_config}
    if spec.provider is None:
        values["provider"] = "openai" if spec.openai_model else "scripted"
    if values["provider"] == "openai" and not (
        values["openai_model"] and values["openai_base_url"]
    ):
        missing = "openai_model" if not values["openai_model"] else "openai_base_url"
        raise ValueError(f"an agent on an OpenAI-compatible model needs {missing}")
    own = copy.copy(settings)
    for key, value in values.items():
        setattr(own, key, value)
    own.agents = {}
    return own


def make_agent(
    name: str,
    settings: Settings,
    provider: ModelProvider | None,
    loop: Any,
    scope: RunScope | None,
    *,
    declared: bool = True,
    spec: AgentSpec | None = None,
) -> Agent:
    built = build_loop(settings, provider, loop, scope=scope)
    model = built.provider.model if isinstance(built, ReferenceLoop) else None
    return Agent(
        name=name,
        loop=built,
        source=LoopSource(
            built,
            guards_from(settings),
            settings.loop_config,
            accepts="loop" if settings.accepts is None else frozenset(settings.accepts),
            attachment_limits=attachment_limits(settings),
        ),
        description=spec.description if spec is not None else "",
        declared=declared,
        provider_name=loop_provider(settings),
        model=model,
        summary=loop_summary(settings),
    )
