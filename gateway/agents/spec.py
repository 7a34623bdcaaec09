"""One ``[agents.NAME]`` table of the config file: which loop the agent runs, and how.

Its keys are the top-level ones of the same names (docs/config.md), for this agent alone: an
agent is described whole by its table — a key it leaves out takes its default, not the
top-level value — except ``loop_config``, whose top-level table applies to every agent under
the agent's own keys, and the model server's ``openai_api_key``, ``openai_base_url`` and
``scripted_delay_s``, which an agent shares with the top level unless it sets its own.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from ...contracts.parts import parse_kinds

LoopRunner = Literal["event_loop", "thread"]
Provider = Literal["scripted", "openai"]
# The keys an agent shares with the top level unless it sets its own.
INHERITED = ("openai_api_key", "openai_base_url", "scripted_delay_s")
# An agent's keys that name the one loop it runs: at most one.
PLUGS = ("loop", "loop_url", "loop_cmd")


class AgentSpec(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    description: str = ""  # what the agent does: MCP tool descriptions, agent lists, cards
    default: bool = False  # requests that name no agent go to it (else the first one)
    loop: str | None = None  # "package.module:attr": an in-process Python loop
    loop_url: str | None = None  # an HTTP loop
    loop_cmd: str | None = None  # a child process speaking JSON-RPC on stdio
    loop_token: str | None = None  # bearer token sent to its HTTP loop
    loop_runner: LoopRunner = "event_loop"  # where a Python loop's generators run
    provider: Provider | None = None  # the reference loop's model; unset: openai if one is named
    scripted_delay_s: float | None = None  # between the scripted model's deltas
    openai_base_url: str | None = None  # its OpenAI-compatible server
    openai_model: str | None = None  # its model
    openai_api_key: str | None = None  # else the top level's, else OPENAI_API_KEY
    openai_text_tools: Literal["auto", "on", "off"] = "auto"  # tool calls written as text
    openai_text_only: bool = False  # its model reads text only: attachments as placeholders
    accepts: list[str] | None = None  # attachment kinds its plugged loop takes besides text
    system_prompt: str | None = None  # the system message of its runs
    system_prompt_file: str | None = None  # the same, from a file
    tools: list[str] = msgspec.field(default_factory=list)  # modules of Python functions
    demo_tools: bool | None = None  # unset: with the scripted model only
    mcp: list[str] = msgspec.field(default_factory=list)  # MCP servers to spawn (stdio)
    mcp_url: list[str] = msgspec.field(default_factory=list)  # MCP servers over HTTP
    loop_config: dict[str, Any] = msgspec.field(default_factory=dict)  # over the top level's

    def __post_init__(self) -> None:
        plugs = [n for n in PLUGS if getattr(self, n)]
        if len(plugs) > 1:
            raise ValueError(f"give at most one of {', '.join(PLUGS)} (got {', '.join(plugs)})")
        if self.system_prompt and self.system_prompt_file:
            raise ValueError("give system_prompt or system_prompt_file, not both")
        if self.accepts is not None:
            self.accepts = sorted(parse_kinds(self.accepts))
        if self.scripted_delay_s is not None and self.scripted_delay_s < 0:
            raise ValueError(f"scripted_delay_s must not be negative, got {self.scripted_delay_s}")
        named = [n for n in ("openai_base_url", "openai_model") if getattr(self, n)]
        if self.provider == "scripted" and named:
            raise ValueError(
                f"the scripted provider uses no OpenAI server or model: drop {named[0]}, or set "
                'provider = "openai"'
            )

    def settings_values(self) -> dict[str, Any]:
        """The Settings fields this table sets (the loop's), as Settings names them."""
        values = msgspec.structs.asdict(self)
        for own in ("description", "default"):
            values.pop(own)
        return values
