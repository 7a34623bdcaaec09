"""Runs another instance owns, served here through a shared journal (Redis; docs/scale.md).

A remote run is held like a running run of this hub (``Run.hot``, the same subscriptions,
batches and back-pressure), with ``Run.remote`` set and no producer: the journal's follower
(one blocking read for all the views of the instance) hands it what the owner committed, in
seq order, and it wakes its subscribers through the hub's delivery window. It is loaded only
when something here asks for the run, counts against this hub's memory bounds like any run,
and goes once nobody here watches it (the sweep); a finished one becomes an ordinary finished
run (served from the journal once it leaves memory). Commands and pushes go to the owner,
which answers once they are applied (a push: once its event is committed).
"""

from __future__ import annotations

import logging
from functools import partial
from typing import TYPE_CHECKING, Any

import msgspec

from ...contracts.client_errors import ClientError, client_message
from ...contracts.contract import is_terminal_completion
from ...contracts.envelope import Envelope, LoopEvent
from ...contracts.ports import (
    CommandResult,
    LimitReached,
    RunExists,
    RunFinished,
    RunNotIngest,
    RunTooLarge,
    Unavailable,
)
from ..journal.base import EVENT_OVERHEAD_BYTES, Cluster, RunRecord
from .run import Run
from .takeover import Takeover

if TYPE_CHECKING:
    # Relative, as is hub.py's import of this module: a file opened at its own path, as editors
    # open it, then meets its own class here, not a copy under loopgate.… (docs/plugins.md).
    from .hub import Hub

log = logging.getLogger("loopgate.hub")
_encode = msgspec.json.Encoder().encode


class Remote:
    def __init__(self, hub: Hub, cluster: Cluster) -> None:
        self.hub = hub
        self.cluster = cluster
        cluster.on_lost = self.lost
        cluster.on_ended = self.ended
        cluster.on_command = self.answer
        # Lost instances' resumable runs, resumed here (by an instance that runs loops).
        self.takeover = Takeover(hub)
        cluster.adopter = self.takeover

    # --- views of other instances' runs ------------------------------------------------------

    async def load(self, record: RunRecord) -> Run:
        hub = self.hub
        events, sizes = await hub.loader.events(record)
        run = hub.table.get(record.id)  # loaded by someone else meanwhile
        if run is not None:
            return run
        needed = sum(sizes)
        s = hub.settings
        if hub.table.retained + needed > s.max_retained_bytes:
            self.sweep()  # views nobody watches any more go first
        if needed > s.max_run_retained_bytes or not hub.budget.make_room(needed):
            raise LimitReached(
                f"run {record.id} is too large to follow here right now; retry later",
                retry_after=5,
            )
        run = Run(record, events, sizes)
        run.remote = True
        run.loading = True
        hub.table.admit(run)
        if events and is_terminal_completion(events[-1].kind, events[-1].data):
            self._finish(run, events[-1])
        else:
            try:
                await self.cluster.watch(
                    run.id, run.last_seq, partial(self._deliver, run), partial(self.let_go, run)
                )
            except BaseException:
                self.let_go(run)  # a view nothing feeds would keep its readers waiting
                raise
            finally:
                run.loading = False
        if not hub.table.holds(run):
            # Let go while the watch was set up, before anyone here could read it: a reader
            # handed it would follow a run nothing feeds (and read an emptied view).
            if run.finished:
                return await hub.load(run.id)  # it made room for another: a cold run now
            raise LimitReached(
                f"run {record.id} cannot be followed here right now; retry later", retry_after=1
            )
        return run

    def _deliver(self, run: Run, batch: list[Envelope], sizes: list[int]) -> None:
        hub = self.hub
        shown = False
        for env, size in zip(batch, sizes, strict=True):
            if not hub.table.holds(run) or run.finished:
                break
            if env.seq == run.last_seq + 1:
                shown = self._append(run, env, size) or shown
        if not hub.table.holds(run) or run.finished:
            self.cluster.unwatch(run.id)
        elif shown:
            # At once, not with the delivery window: a read's batch is already coalesced by
            # the read's round trip, as a commit is on the owner, which shows it at once too.
            hub.delivery.show(run, run.last_seq, True)

    def _append(self, run: Run, env: Envelope, size: int) -> bool:
        """Add one event to the view; False if it ended the view or is its last."""
        hub = self.hub
        s = hub.settings
        size += EVENT_OVERHEAD_BYTES
        terminal = is_terminal_completion(env.kind, env.data)
        if not terminal and hub.table.retained + size > s.max_retained_bytes:
            self.sweep()
            if not hub.table.holds(run):
                return False  # unwatched: it went with the others
        if not terminal and (
            run.retained + size > s.max_run_retained_bytes or not hub.budget.make_room(size)
        ):
            # Past this instance's bounds: its readers here are cut off with their cursors
            # (they resume later, or on another instance); the run itself goes on.
            log.warning("run %s no longer fits this instance's memory; its view goes", run.id)
            self.let_go(run)
            return False
        run.hot.append(env)
        run.retained += size
        run.ends.append(run.retained)
        hub.table.retained += size
        if run.record.state == "queued":
            run.record.state = "running"  # a worker took it from the shared queue
        if terminal:
            self._finish(run, env)
            return False
        return True

    def _finish(self, run: Run, env: Envelope) -> None:
        record = run.record
        record.state = "finished"
        status = env.data.get("status")
        record.status = status if isinstance(status, str) else "failed"
        record.finished_at = env.ts
        record.last_seq = env.seq
        self.cluster.unwatch(run.id)
        hub = self.hub
        hub.table.finished(run)
        run.ended.set()
        hub.delivery.show(run, env.seq, True)
        hub.budget.compact_later(run)

    def let_go(self, run: Run, rejoin: bool = False) -> None:
        """Drop a view: its subscribers are cut off (resumable; ``rejoin``: they resume at
        once from the journal), its reader stops."""
        self.hub.delivery.cut_all(run, rejoin)
        self.cluster.unwatch(run.id)
        self.hub.table.drop(run, None)

    def adopt(self, run_id: str) -> None:
        """A run taken from the shared queue starts here: a view of it held here (someone
        here read it while it waited) goes, its readers resuming from the run itself."""
        view = self.hub.table.get(run_id)
        if view is None:
            return
        if not view.remote:
            raise RunExists(run_id)
        self.let_go(view, rejoin=True)

    def sweep(self) -> None:
        """Views of running runs nobody here watches (or is loading for) go."""
        hub = self.hub
        for run in hub.table.runs():
            if run.remote and not run.finished and not run.subscribers and not run.loading:
                self.cluster.unwatch(run.id)
                hub.table.drop(run, None)

    def check_room(self) -> None:
        """Unavailable (503) at once while the journal cannot commit (Redis full, PostgreSQL
        away): a new run or a push would only wait on a commit that cannot land, with its
        client."""
        if self.cluster.full:
            # The journal's own words for why (Redis full, PostgreSQL not answering).
            why = self.hub.journal.trouble or "it is full"
            raise Unavailable(
                f"the shared journal cannot commit anything right now ({why}); retry later",
                retry_after=5,
            )

    async def claim(self, run_id: str) -> bool:
        """A client-chosen id for a new run, taken across instances (False: taken already)."""
        return await self.cluster.claim(run_id)

    async def claim_thread(self, thread_id: str, run_id: str) -> str | None:
        """The thread for this run across instances; None once taken, else the run holding
        it. The journal keeps the claim alive while this instance lives and the run goes."""
        return await self.cluster.claim_thread(thread_id, run_id)

    # --- commands to owners ---------------------------------------------------------------

    async def command(self, run: Run, verb: str, command: dict[str, Any]) -> CommandResult:
        answer = await self._send(run, command)
        if answer is None:
            if verb == "cancel" and await self.cluster.end_unanswered(run.id):
                # Its owner is unreachable, or lost the run (its journal diverged): a run left
                # running would hold its thread and its watchers for good.
                detail = "the instance running it did not answer; ended here (cancelled)"
                return CommandResult(run_id=run.id, accepted=True, detail=detail)
            detail = f"the instance running it did not answer; nothing to {verb}"
            return CommandResult(run_id=run.id, accepted=False, detail=detail)
        return CommandResult(
            run_id=run.id, accepted=bool(answer.get("accepted")), detail=str(answer["detail"])
        )

    async def push(self, run: Run, event: LoopEvent) -> Envelope:
        answer = await self._send(run, {"verb": "push", "kind": event.kind, "data": event.data})
        if answer is None:
            raise RunFinished(run.id, "failed")
        return Envelope(run.id, int(answer["seq"]), int(answer["ts"]), event.kind, event.data)

    async def end_ingest(self, run: Run) -> None:
        await self._send(run, {"verb": "end"})

    async def _send(self, run: Run, command: dict[str, Any]) -> dict[str, Any] | None:
        answer = await self.cluster.command(run.id, command)
        if answer is None:
            return None
        refused = answer.get("refused")
        if refused is not None:
            message = str(answer.get("message") or "the run's owner refused the command")
            retry = answer.get("retry_after")
            raise _refusal(run.id, str(refused), message, retry if isinstance(retry, int) else 1)
        return answer

    async def answer(self, command: dict[str, Any]) -> dict[str, Any] | None:
        """A command from another instance to a run owned here; None: not one of ours."""
        hub = self.hub
        run = hub.table.get(str(command.get("run_id")))
        if run is None or run.remote:
            return None
        verb = command.get("verb")
        try:
            if verb == "cancel":
                result = await hub.cancel(run.id)
            elif verb == "steer":
                result = await hub.steer(run.id, str(command["content"]))
            elif verb == "respond":
                result = await hub.respond(
                    run.id, str(command["request_id"]), str(command["decision"])
                )
            elif verb == "push":
                data = command.get("data")
                event = LoopEvent(str(command["kind"]), data if isinstance(data, dict) else {})
                env = await hub.push(run.id, event)
                return {"seq": env.seq, "ts": env.ts}
            elif verb == "end":
                await hub.end_ingest(run.id)
                return {"accepted": True, "detail": "ended"}
            else:
                return None
        except RunFinished as exc:
            return {"refused": "finished", "message": exc.status or "failed"}
        except (ValueError, RunNotIngest, LimitReached) as exc:
            kind = _refused_as(exc)
            message = client_message(exc)
            if message is None:
                log.exception("command %s to run %s failed", verb, run.id)
                message = f"the run's owner could not apply {verb}"
            retry = exc.retry_after if isinstance(exc, LimitReached) else 1
            return {"refused": kind, "message": message, "retry_after": retry}
        return {"accepted": result.accepted, "detail": result.detail}

    # --- a run this instance owned, ended by another ----------------------------------------

    def ended(self, run_id: str, reason: str) -> None:
        """This instance ended another's run over its head (owner_lost, owner_unreachable):
        what the owner would have done at its end is done here."""
        for observe in self.hub.end_observers:
            observe(run_id, reason)

    def lost(self, run_id: str) -> None:
        """Another instance appended to a run owned here (its lease lapsed and a survivor
        ended it): this instance's copy is stale. Its producer stops, its readers are cut off
        with their cursors and resume from the journal, which has the run's real end."""
        run = self.hub.table.get(run_id)
        if run is None or run.remote:
            return
        self.forsake(run)
        # Its clients here get that end too, whatever their protocol does when cut off.
        self.let_go(run, rejoin=True)

    def forsake(self, run: Run) -> None:
        """A run produced here that another instance has ended, or that goes on elsewhere:
        it ends here without an event of its own, and its producer stops."""
        hub = self.hub
        if not run.finished:
            run.record.state = "finished"
            run.record.status = "failed"
            hub.table.active -= 1
            hub.threads.release_claim(run)
            run.ended.set()
        if run.producer is not None:
            run.producer.cancel()


def _refused_as(exc: Exception) -> str:
    """How an owner's refusal travels (``_refusal`` makes it the exception again)."""
    if isinstance(exc, RunNotIngest):
        return "not_ingest"
    if isinstance(exc, RunTooLarge):
        return "too_large"
    if isinstance(exc, Unavailable):
        return "unavailable"
    if isinstance(exc, LimitReached):  # a quota's too: the sender's client retries alike
        return "limit"
    return "invalid"


def _refusal(run_id: str, kind: str, message: str, retry_after: int) -> Exception:
    if kind == "finished":
        return RunFinished(run_id, message)
    if kind == "not_ingest":
        return RunNotIngest(message)
    if kind == "too_large":
        return RunTooLarge(message)
    if kind == "limit":
        return LimitReached(message, retry_after)
    if kind == "unavailable":
        return Unavailable(message, retry_after)
    return ClientError(message)
