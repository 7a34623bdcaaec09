"""Runs of the configured agent loop: the hub's ``loop`` source, for every front end.

The source turns a front end's :class:`contracts.ports.StartRun` into a
:class:`contracts.loop.LoopRequest` and runs one turn of the loop under guards: events from a
plugged loop are checked like ingested ones, a loop that goes quiet or breaks the contract ends
its run with ``error`` + ``completion{failed, reason}``, and a cancelled loop that does not
stop within a grace period is stopped by the gateway.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal, NoReturn

import anyio
import msgspec

from ...contracts.client_errors import ClientError
from ...contracts.contract import is_terminal_completion
from ...contracts.envelope import EnvelopeError, validate_event
from ...contracts.json_input import DEFAULT_MAX_DEPTH, JsonTooDeep, check_depth
from ...contracts.loop import (
    LOCAL_LOOP_PRINCIPAL,
    AgentLoop,
    ChecksRequests,
    LoopFault,
    LoopPrincipal,
    LoopRequest,
    LoopRun,
    Resumable,
    TakesParts,
)
from ...contracts.messages import Message
from ...contracts.oddities import OddityLog
from ...contracts.parts import AttachmentLimits, Part, check_content, text_of
from ...contracts.ports import LimitReached, RunFinished, StartRun
from .context import GatewayRunContext
from .permissions import PermissionBroker, RememberedDecisions

if TYPE_CHECKING:
    from ..hub import Hub, Run

log = logging.getLogger("loopgate.loop")
_encode = msgspec.json.Encoder().encode


class LoopGuards(msgspec.Struct, frozen=True, kw_only=True):
    """The bounds a plugged loop runs under (docs/loops.md)."""

    first_event_timeout_s: float = 60.0
    idle_timeout_s: float = 300.0
    cancel_grace_s: float = 5.0
    permission_timeout_s: float = 300.0
    max_run_bytes: int = 256 << 20


def split_input(messages: list[Message]) -> tuple[str, list[Part], list[Message]]:
    """The new user message off the end of a conversation (its text, and its parts when it
    has attachments), and the thread before it."""
    if messages and messages[-1].role == "user" and not messages[-1].tool_calls:
        content = messages[-1].content
        parts = [] if isinstance(content, str) else list(content)
        return text_of(content), parts, messages[:-1]
    return "", [], messages


def loop_accepts(loop: AgentLoop) -> frozenset[str] | None:
    """The attachment kinds ``loop`` declares it takes (None: all); text only if it says none."""
    return loop.accepts if isinstance(loop, TakesParts) else frozenset()


class LoopSource:
    """The hub's ``loop`` source: every run a front end starts goes through ``loop``."""

    def __init__(
        self,
        loop: AgentLoop,
        guards: LoopGuards,
        loop_config: Mapping[str, Any],
        *,
        accepts: frozenset[str] | Literal["loop"] | None = "loop",
        attachment_limits: AttachmentLimits | None = None,
    ) -> None:
        """``accepts``: the attachment kinds the operator declared the loop takes (``--accepts``,
        None: all), or ``"loop"``: what the loop itself declares."""
        self.loop = loop
        self.accepts = loop_accepts(loop) if accepts == "loop" else accepts
        self.attachment_limits = attachment_limits or AttachmentLimits()
        self.guards = guards
        self.loop_config = dict(loop_config)
        self.remembered = RememberedDecisions()
        # Asked once: a runtime protocol check costs microseconds, every run start would pay it.
        self.check = loop.check if isinstance(loop, ChecksRequests) else None
        # Whether another instance may resume this loop's runs (gateway.hub.takeover).
        self.resumable = isinstance(loop, Resumable) and loop.resumable is True
        # Runs whose producer has not returned yet, and what is told each time one returns:
        # ``serve --reload`` closes a replaced agent's loop once none is left.
        self.running = 0
        self.on_run_end: Callable[[], None] | None = None

    def prepare(self, request: StartRun) -> LoopRequest:
        if request.input is None or request.input == "" or request.input == []:
            raise ClientError("input is required: a prompt string or a list of messages")
        history = (
            [Message(role="user", content=request.input)]
            if isinstance(request.input, str)
            else list(request.input)
        )
        # Every part of the conversation, not only the new message's: a client sends its
        # history back whole, and the loop gets all of it.
        check_content(
            ((n, m.content) for n, m in enumerate(history, 1)),
            self.attachment_limits,
            self.accepts,
        )
        text, parts, thread = split_input(history)
        prepared = LoopRequest(
            run_id="",  # the hub names the run after this check
            thread_id="",
            input=text,
            input_parts=parts,
            messages=thread,
            tools=list(request.client_tools),
            config={**self.loop_config, **request.config},
            metadata=dict(request.metadata),
            approval=request.approval,
            mcp_servers=list(request.mcp_servers),
            # The hub set it from the request's principal; without a hub (an embedding
            # program's own call) the run acts for the machine's own user.
            principal=(
                LOCAL_LOOP_PRINCIPAL
                if request.principal is None
                else LoopPrincipal.of(request.principal)
            ),
        )
        if self.check is not None:
            self.check(prepared)  # ValueError: the client's 422
        return prepared

    def producer(self, hub: Hub, run: Run, prepared: LoopRequest) -> LoopProducer:
        record = run.record
        request = msgspec.structs.replace(
            prepared,
            run_id=run.id,
            thread_id=record.thread_id,
            metadata=record.metadata,
            traceparent=record.metadata.get("traceparent"),
            tracestate=record.metadata.get("tracestate"),
        )
        if self.resumable and hub.remote is not None and record.resume is None:
            # What another instance resumes the run with, should this one be lost: committed
            # with the run's record, before its first event.
            record.resume = msgspec.to_builtins(msgspec.structs.replace(request, events=[]))
            hub.journal.record_run(record)
        broker = PermissionBroker(
            hub,
            run,
            self.guards.permission_timeout_s,
            self.remembered.for_thread(record.thread_id),
        )
        made = LoopProducer(hub, run, self.loop, request, broker, self.guards, self._run_ended)
        self.running += 1
        return made

    def resume(self, hub: Hub, run: Run) -> LoopProducer | None:
        """The producer of a new attempt at a run another instance started (its events so far
        in ``run``); None if its request cannot be read back."""
        record = run.record
        try:
            request = msgspec.convert(record.resume, LoopRequest)
        except msgspec.ValidationError:
            log.exception("run %s: its request cannot be read back; not resumed", run.id)
            return None
        request.attempt = record.attempt
        request.events = [{"seq": e.seq, "kind": e.kind, "data": e.data} for e in run.events]
        return self.producer(hub, run, request)

    def _run_ended(self) -> None:
        self.running -= 1
        if self.on_run_end is not None:
            self.on_run_end()


class LoopProducer:
    """One run of the loop under the hub: commands in, guarded events out."""

    def __init__(
        self,
        hub: Hub,
        run: Run,
        loop: AgentLoop,
        request: LoopRequest,
        broker: PermissionBroker,
        guards: LoopGuards,
        ended: Callable[[], None] | None = None,
    ) -> None:
        self.hub = hub
        self.run_ = run
        self._ended = ended  # called once run() returns, however it ends
        self.loop = loop
        self.broker = broker
        self.guards = guards
        # The context's callbacks are the broker's and the watchdog's, not this producer's
        # methods: a context pointing back at its producer made every run a reference cycle,
        # left for the cyclic collector's full passes once the run was over.
        self._wakeup = _Wakeup()
        self.ctx = GatewayRunContext(request, broker.ask, self._wakeup)
        self.loop_run: LoopRun = loop.open(self.ctx)
        self.events = 0
        self.bytes = 0
        self.last_event = self.started = time.monotonic()
        self.cancel_at: float | None = None
        self.fault: LoopFault | None = None
        # Odd payload fields of this run's events, each logged once (the run is the unit).
        self.oddities = OddityLog(log, max_runs=1)

    # --- the producer the hub drives -------------------------------------------------------

    async def run(self) -> None:
        try:
            await self._produce()
        finally:
            if self._ended is not None:
                self._ended()

    async def _produce(self) -> None:
        emit = self._guarded_emit if self.loop.untrusted else self._emit
        # The watcher is stopped by its own scope: a child task that ends cancelled leaves a
        # reference cycle in anyio (its CancelledError's traceback holds the frame that holds
        # it), so every run would leave garbage for the cyclic collector.
        watching = anyio.CancelScope()
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._watch, tg.cancel_scope, watching)
            try:
                await self.loop_run.run(emit)
            except LoopFault as fault:
                # A fresh copy, not the exception: its traceback holds the frames that raised
                # it, and with them the event that broke a limit (a 1 GiB payload stayed in
                # memory as long as the run did, counted by no bound).
                self.fault = self.fault or LoopFault(fault.reason, fault.message)
            except (RunFinished, LimitReached):
                pass  # the run ended (its terminal event, or a limit the hub enforced)
            except Exception:
                log.exception("loop %s failed in run %s", self.loop.name, self.run_.id)
                self.fault = LoopFault("loop_error", "the loop failed with an internal error")
            watching.cancel()
        self._conclude()

    def cancel(self) -> None:
        if self.cancel_at is None:
            self.cancel_at = time.monotonic()
            self.ctx.cancel()
            self.loop_run.cancel()

    async def steer(self, content: str) -> str | None:
        self.ctx.check_steer(content)
        return await self.loop_run.steer(content)

    def respond(self, request_id: str, decision: str) -> str | None:
        return self.broker.answer(request_id, decision)

    # --- events ----------------------------------------------------------------------------

    def _emit(self, kind: str, data: dict[str, Any], encoded: bytes | None = None) -> None:
        self.events += 1
        self.last_event = time.monotonic()
        self.hub.publish(self.run_, kind, data, encoded)

    def _guarded_emit(self, kind: str, data: dict[str, Any]) -> None:
        """Ingest's rule for a plugged loop's events: only the envelope is strict (a string
        kind of the allowed characters, a data object, JSON no deeper than ingest allows);
        odd payload fields are carried through and logged once per run."""
        if type(kind) is not str or type(data) is not dict:
            raise LoopFault(
                "loop_invalid_event",
                f"event {self.events + 1} is not an object with a string kind and a data object",
            )
        if self.bytes + _least_bytes(data) > self.guards.max_run_bytes:
            # Past the limit by its top-level strings alone: refused before it is even encoded,
            # so a giant event is not copied at all (a 200 MiB one peaked at twice its size).
            self._over_bytes()
        try:
            validate_event(kind, data)
            encoded = _encode(data)
            check_depth(encoded, DEFAULT_MAX_DEPTH)
        except EnvelopeError as exc:
            raise LoopFault(
                "loop_invalid_event", f"event {self.events + 1}: {exc.message}"
            ) from None
        except (JsonTooDeep, RecursionError):
            raise LoopFault(
                "loop_invalid_event",
                f"event {self.events + 1}: data is nested deeper than {DEFAULT_MAX_DEPTH} levels",
            ) from None
        except TypeError:
            # An in-process loop may hand over values JSON has no form for (a set, an object).
            raise LoopFault(
                "loop_invalid_event", f"event {self.events + 1}: data is not JSON-serialisable"
            ) from None
        self.bytes += len(encoded)
        if self.bytes > self.guards.max_run_bytes:
            # Refused before the hub keeps it: only this frame holds the encoded copy, and it
            # goes with the exception's traceback (run() keeps a copy without one).
            del encoded
            self._over_bytes()
        self.oddities.note(self.run_.id, kind, data)
        self._emit(kind, data, encoded)

    def _over_bytes(self) -> NoReturn:
        limit = self.guards.max_run_bytes
        raise LoopFault("byte_limit", f"the loop sent more than {limit} bytes of events")

    def _conclude(self) -> None:
        """Give the run its terminal event if the loop did not."""
        run = self.run_
        if run.finished:
            return
        fault = self.fault
        if fault is None and self.cancel_at is not None:
            self.hub.publish(run, "completion", {"status": "cancelled", "reason": "cancelled"})
            return
        if fault is None:
            if not self.loop.untrusted:
                return  # the hub marks a truncated run of our own loop
            fault = LoopFault("loop_ended_early", "the loop stopped without a terminal completion")
        log.warning("run %s of loop %s: %s", run.id, self.loop.name, fault.message)
        self.hub.publish(run, "error", {"message": fault.message, "phase": "loop"})
        self.hub.publish(
            run,
            "completion",
            {"status": "failed", "reason": fault.reason, "message": fault.message},
        )

    # --- timeouts --------------------------------------------------------------------------

    def _deadline(self) -> tuple[float, LoopFault | None]:
        g = self.guards
        if self.cancel_at is not None:
            return self.cancel_at + g.cancel_grace_s, None
        ctx = self.ctx
        if not self.loop.untrusted or ctx.asking or ctx.reaching_loop:
            # Asking: bounded by the permission timeout; reaching: by the connect timeout.
            return math.inf, None
        if self.events == 0:
            message = f"the loop sent no event within {g.first_event_timeout_s:g} s"
            since = self.started if ctx.reached_at is None else max(self.started, ctx.reached_at)
            return since + g.first_event_timeout_s, LoopFault("loop_timeout", message)
        message = f"the loop sent nothing for {g.idle_timeout_s:g} s"
        return self.last_event + g.idle_timeout_s, LoopFault("loop_timeout", message)

    async def _watch(self, scope: anyio.CancelScope, watching: anyio.CancelScope) -> None:
        """Ends the run when the loop misses a deadline (first event, idle, cancel grace);
        ``watching`` ends the watch."""
        with watching:
            while True:
                deadline, fault = self._deadline()
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    self.fault = self.fault or fault
                    scope.cancel()
                    return
                self._wakeup.event = waiter = anyio.Event()
                with anyio.move_on_after(remaining):
                    await waiter.wait()


class _Wakeup:
    """Wakes the run's watchdog to read its deadlines again (the context calls it)."""

    __slots__ = ("event",)

    def __init__(self) -> None:
        self.event: anyio.Event | None = None

    def __call__(self) -> None:
        event, self.event = self.event, None
        if event is not None:
            event.set()


def _least_bytes(data: dict[str, Any]) -> int:
    """A lower bound of ``data``'s encoded size, cheap enough for every event: its top-level
    strings (each character is at least a byte of JSON)."""
    return sum(len(value) for value in data.values() if type(value) is str)


def is_terminal(kind: str, data: dict[str, Any]) -> bool:
    return kind == "completion" and is_terminal_completion(kind, data)
