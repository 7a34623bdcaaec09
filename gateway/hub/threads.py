"""Threads: their records, who may see them, which agent a continued thread stays with, and the
claim an exclusive run holds on its thread while it goes."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import Any

from ...contracts.agents import UnknownAgent
from ...contracts.client_errors import ClientError
from ...contracts.ports import StartRun, ThreadBusy, ThreadExists, ThreadInfo
from ...contracts.principal import current
from ..agents.table import Agent, Agents
from ..journal.base import Cluster, Journal, RunRecord
from ..settings import Settings
from . import access
from .run import Run
from .source import Source
from .table import RunTable


class Threads:
    def __init__(
        self,
        settings: Settings,
        table: RunTable,
        journal: Journal,
        clock: Callable[[], int],
        roster: Agents | None,
    ) -> None:
        self.settings = settings
        self.table = table
        self.journal = journal
        self.clock = clock
        self.roster = roster
        # A journal other instances share claims threads across them too.
        self.cluster: Cluster | None = journal.cluster
        # Threads held by an exclusive run of this hub while it goes: thread → run.
        self._claims: dict[str, str] = {}

    # --- records --------------------------------------------------------------------------

    async def create(self, thread_id: str | None, metadata: dict[str, Any] | None) -> ThreadInfo:
        principal = access.may_start()
        thread_id = thread_id or f"thread_{uuid.uuid4().hex}"
        if await self.journal.load_thread(thread_id) is not None:
            raise ThreadExists(thread_id)
        await self.check(thread_id)  # someone else's runs may name it already
        thread = ThreadInfo(
            id=thread_id,
            created_at=self.clock(),
            metadata=dict(metadata or {}),
            owner=principal.owner,
        )
        self.journal.record_thread(thread)
        # Recorded means committed, as a started run is: another process may look it up next.
        await self.journal.flush()
        # Thread records live under the runs' retention (a thread with runs is found through
        # them anyway); bounded here, as each comes in, so none waits for the sweep.
        s = self.settings
        await self.journal.prune_threads(
            keep=s.max_runs, older_than_ns=self.clock() - int(s.max_run_age_s * 1e9)
        )
        return thread

    async def get(self, thread_id: str) -> ThreadInfo | None:
        thread = await self.journal.load_thread(thread_id)
        if thread is None or not current().sees(thread.owner):
            return None
        return thread

    async def forget(self, thread_id: str) -> bool:
        if await self.get(thread_id) is None:
            return False
        return await self.journal.forget_thread(thread_id)

    async def release(self, thread_id: str) -> None:
        """The loops let go of what they keep for the thread."""
        await self.check(thread_id)
        if self.roster is not None:
            await self.roster.release_thread(thread_id)

    async def check(self, thread_id: str) -> None:
        """ThreadNotFound when the thread is someone else's: its record's owner, else its
        newest run's (a thread exists as soon as a run names it)."""
        if access.owner_filter() is None:
            return  # an admin's: every thread is
        thread = await self.journal.load_thread(thread_id)
        if thread is not None:
            access.check_thread(thread_id, thread.owner)
            return
        newest = await self.newest_run(thread_id)
        if newest is not None:
            access.check_thread(thread_id, newest.owner)

    async def newest_run(self, thread_id: str) -> RunRecord | None:
        """The record of the thread's newest run: in memory (a memory journal keeps none) or
        in the journal."""
        newest = [r.record for r in self.table.runs() if r.record.thread_id == thread_id]
        newest += await self.journal.list_runs(1, thread_id)
        return max(newest, key=lambda r: r.created_at) if newest else None

    # --- agents ---------------------------------------------------------------------------

    async def source_for(
        self, request: StartRun, sources: Mapping[str, Source]
    ) -> tuple[Agent | None, Source]:
        """Where a start's events come from: its agent's loop (a loop run on a gateway with
        agents), else the source it names; ClientError for a source not served."""
        if request.source == "loop" and self.roster is not None:
            agent = await self.agent_for(request)
            return agent, agent.source
        source = sources.get(request.source)
        if source is None:
            raise ClientError(f"unknown source {request.source!r}")
        return None, source

    async def agent_for(self, request: StartRun) -> Agent:
        """The agent a loop run goes to: the one it names; else, where a continued thread has
        runs, the agent of its newest one (a thread stays with its agent); else the default."""
        assert self.roster is not None
        name, roster = request.agent, self.roster
        # A gateway serving the one agent its flags define has nothing to look up.
        chooses = roster.several or roster.default.declared
        if name is None and chooses and request.thread_id:
            newest = await self.newest_run(request.thread_id)
            if newest is not None and newest.agent is not None:
                name = newest.agent
                if roster.get(name) is None:
                    raise UnknownAgent(
                        name,
                        roster.names(),
                        f"thread {request.thread_id!r} was with agent {name!r}, which this "
                        f"gateway no longer serves; name one of: {', '.join(roster.names())}",
                    )
        agent = roster.resolve(name)
        request.agent = agent.name
        return agent

    # --- exclusive runs -------------------------------------------------------------------

    async def claim(self, thread_id: str, run_id: str) -> None:
        """The thread, for this run alone until it ends (``StartRun.exclusive``); ThreadBusy
        while another such run holds it, here or (a shared journal) on any instance. The
        journal keeps a shared claim alive while this instance lives and the run goes."""
        holder = self._claims.get(thread_id)
        if holder is None and self.cluster is not None:
            holder = await self.cluster.claim_thread(thread_id, run_id)
        if holder is not None:
            raise ThreadBusy(thread_id, holder)
        self._claims[thread_id] = run_id

    def release_claim(self, run: Run) -> None:
        """The run has ended: its thread is free for the next (a shared journal frees it in
        Redis with the commit of the run's end)."""
        if self._claims.get(run.record.thread_id) == run.id:
            del self._claims[run.record.thread_id]
