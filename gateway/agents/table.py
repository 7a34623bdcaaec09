"""The agents a hub serves, by name: which one a run goes to, and their loops' lifetimes."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from ...contracts.agents import AgentInfo, UnknownAgent
from ...contracts.loop import AgentLoop, ReleasesThreads
from ..plugs.source import LoopSource


@dataclass(eq=False)
class Agent:
    """One named loop and the source its runs come from."""

    name: str
    loop: AgentLoop
    source: LoopSource
    description: str = ""
    # Declared in the config file ([agents.NAME]); False for the one the flags define.
    declared: bool = True
    # gen_ai.provider.name of its model calls (telemetry).
    provider_name: str = "unknown"
    # Its reference loop's model, if it runs the reference loop.
    model: str | None = None
    # Which loop it runs, in words (the log line ``loopgate serve`` starts with).
    summary: str = ""

    @property
    def trace_name(self) -> str:
        """gen_ai.agent.name: a gateway serving only the agent its flags define is one agent,
        loopgate, as its traces have always said."""
        return self.name if self.declared else "loopgate"

    def info(self, *, default: bool) -> AgentInfo:
        return AgentInfo(
            name=self.name,
            description=self.description,
            loop=self.loop.name,
            model=self.model,
            default=default,
            accepts=None if self.source.accepts is None else sorted(self.source.accepts),
        )


class Agents:
    """The roster: agents by name, one of them the default."""

    def __init__(self, agents: list[Agent], default: str | None = None) -> None:
        if not agents:
            raise ValueError("a gateway serves at least one agent")
        self.by_name = {agent.name: agent for agent in agents}
        if len(self.by_name) != len(agents):
            raise ValueError("two agents have the same name")
        self.default = self.by_name[default] if default is not None else agents[0]
        self.several = len(agents) > 1
        # A roster never changes (a reload builds another): described once, not per request.
        self._infos = [self.by_name[n].info(default=n == self.default.name) for n in self.names()]

    def __iter__(self) -> Iterator[Agent]:
        return iter(self.by_name.values())

    def names(self) -> list[str]:
        """The names, the default first."""
        return [self.default.name, *(n for n in self.by_name if n != self.default.name)]

    def get(self, name: str | None) -> Agent | None:
        return self.default if name is None else self.by_name.get(name)

    def resolve(self, name: str | None) -> Agent:
        """The agent called ``name`` (None: the default); UnknownAgent if none is."""
        agent = self.get(name)
        if agent is None:
            raise UnknownAgent(str(name), self.names())
        return agent

    def summary(self) -> str:
        """Where runs go, in words: the one agent's loop, or each agent's."""
        if not self.several:
            return self.default.summary
        each = [f"{agent.name} ({agent.summary})" for agent in self]
        return f"{len(each)} agents: " + "; ".join(each) + f" — by default {self.default.name}"

    def infos(self) -> list[AgentInfo]:
        return list(self._infos)

    async def start(self) -> None:
        started: list[Agent] = []
        try:
            for agent in self:
                await agent.loop.start()
                started.append(agent)
        except BaseException:
            # Not in a shielded scope: a loop may leave a task group it entered in start(),
            # which a scope entered after it would not allow (the hub closes them so too).
            for agent in reversed(started):
                await agent.loop.aclose()
            raise

    async def aclose(self) -> None:
        # Last started, first closed: a loop's start may enter a task group (the reference
        # loop's tools, a stdio loop's supervisor), and task groups are left in reverse.
        for agent in reversed(list(self)):
            await agent.loop.aclose()

    async def release_thread(self, thread_id: str) -> None:
        """The thread's client is gone: every loop that holds something for it lets go (the
        reference loop: the thread's MCP servers)."""
        for agent in self:
            if isinstance(agent.loop, ReleasesThreads):
                await agent.loop.release_thread(thread_id)
