"""Following a run: subscribe → project → send, the one loop every endpoint streams with.

A protocol's stream is a subclass of :class:`EventStream`: it says what a batch of envelopes
becomes (``project``), where messages go (``send``), what opens the stream, keeps a quiet one
alive and ends it (``open``, ``keepalive``, ``close``, ``cut_off``); the loop (``run``) is here
once: the subscription and its resumption, bounded writes, keep-alive timing and cut-offs.
A stream that is an HTTP response body is an ``adapters.shared.stream.ResponseStream``.

One cut-off policy for every protocol. A subscriber is cut off when it falls more than
``subscriber_max_lag`` events behind (the hub cuts it, even mid-write) or when one write takes
longer than ``write_timeout_s``. That bound is kept here for a stream of its own (an SSE
response); a connection shared by several streams and the answers to requests (WebSocket,
stdio) bounds its own writes and, past it, closes itself whole, ending every stream on it.
What a cut-off subscriber gets is its protocol's :class:`FollowPolicy` and ``cut_off``:

============  ===========================================================================
native SSE    the stream ends; the ids it carried are the cursor for ``Last-Event-ID``
AG-UI         ``RUN_ERROR`` ``subscriber_cut_off``, then the end (resumed with ``received``)
JSON-RPC      ``run.end`` ``{status: null, reason: "cut_off", lastSeq}``: where to resume
ACP           resumed from the journal at once; the client never notices
============  ===========================================================================

Keep-alives: a quiet stream gets one every ``keepalive_s`` where its policy has one (an SSE
response: a comment). WebSockets are pinged by the server; a pipe needs none.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Sized
from typing import Generic, Literal, TypeVar, cast

import anyio
import msgspec

from ...contracts.envelope import Envelope
from ...contracts.limits import EndpointLimits
from ...contracts.ports import CutOff, RunService, Subscription
from ...contracts.projector import Projector

W = TypeVar("W")
# A batch as ``read`` hands it to ``project``: a list of envelopes unless ``read`` says else.
B = TypeVar("B", bound=Sized)
Ending = Literal["ended", "cut_off"]

CUT_OFF_REASON = "subscriber_cut_off"
# A cut-off client is behind already: the message telling it so gets this long, no more.
CUT_OFF_GRACE_S = 1.0


class FollowPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """What a protocol does with a quiet stream and with a subscriber too slow for its run."""

    # Cut off: subscribe again from the cursor (the journal has everything) instead of ending.
    resume: bool = False
    # A quiet stream calls ``keepalive`` this often; None: wait for events however long.
    keepalive_s: float | None = None
    # Each write's bound; None: the connection bounds its own writes.
    write_timeout_s: float | None = None


def stream_policy(limits: EndpointLimits) -> FollowPolicy:
    """An HTTP response streaming one run (SSE): keep-alives, and writes bounded here."""
    return FollowPolicy(keepalive_s=limits.keepalive_s, write_timeout_s=limits.write_timeout_s)


# One stream among others on a WebSocket or stdio connection, which bounds its writes.
CONNECTION = FollowPolicy()
# ACP: a prompt's answer must come whatever the client's pace, so a cut-off catches up.
RESUMING = FollowPolicy(resume=True)


class EventStream(Generic[W, B]):
    """One subscriber's stream of one run after seq ``after``: the projector's start, every
    batch, then its close. ``start=False`` continues a projector that has seen the events up
    to ``after``. ``consumer`` names the protocol to the hub (telemetry).

    A subclass writes ``send``; the other methods have defaults to override. ``W`` is a
    message as ``send`` takes it, ``B`` a batch as ``read`` returns it (a list of envelopes,
    unless ``read`` and ``project`` are overridden together).
    """

    def __init__(
        self,
        service: RunService,
        run_id: str,
        projector: Projector[W],
        policy: FollowPolicy,
        *,
        consumer: str,
        after: int = 0,
        start: bool = True,
    ) -> None:
        self.service = service
        self.run_id = run_id
        self.projector = projector
        self.policy = policy
        self.consumer = consumer
        self.after = after
        self.start = start

    # --- what the stream says -----------------------------------------------------------------

    async def read(self, subscription: Subscription, wait: float | None) -> B:
        """The subscription's next batch, waiting up to ``wait`` s (empty when idle)."""
        return cast("B", await subscription.next_batch(wait))

    def project(self, batch: B) -> list[W]:
        """A batch's messages: the projector's of each envelope."""
        envelopes = cast("list[Envelope]", batch)
        feed = self.projector.feed
        if len(envelopes) == 1:
            return feed(envelopes[0])
        return [message for envelope in envelopes for message in feed(envelope)]

    def finished(self) -> bool:
        """Whether the protocol's stream has ended before the run (an AG-UI interrupt, an ACP
        answer); asked after every batch."""
        return False

    def close(self, reason: str | None) -> list[W]:
        """The last messages of a stream that did not end by ``finished``: the projector's
        close (``reason`` None: the run has ended)."""
        return self.projector.close(reason)

    def cut_off(self, cursor: int) -> list[W]:
        """What a subscriber cut off after seq ``cursor`` is told (its policy not resuming)."""
        return self.close(CUT_OFF_REASON)

    # --- where it goes ------------------------------------------------------------------------

    async def open(self) -> None:
        """Once, when the first subscription is open (an HTTP response's status line goes out
        there, so a missing or full run is still a problem response)."""

    async def send(self, messages: list[W]) -> None:
        """Write ``messages`` to the client."""
        raise NotImplementedError

    async def keepalive(self) -> None:
        """A quiet stream's sign of life, every ``policy.keepalive_s``."""

    # --- the loop -----------------------------------------------------------------------------

    async def run(self) -> Ending:
        """Follow the run to its end (or the protocol's, or a cut-off); returns how it ended."""
        policy = self.policy
        cursor, first = self.after, True
        while True:
            try:
                async with self.service.subscribe(
                    self.run_id, after=cursor, consumer=self.consumer
                ) as subscription:
                    if first:
                        first = False
                        await self.open()
                        opening = self.projector.start() if self.start else None
                        if opening:
                            await _write(subscription, policy, self.send(opening))
                    if await self._pump(subscription):
                        return "ended"
                break
            except CutOff as cut:
                if policy.resume or cut.rejoin:
                    cursor = cut.cursor
                    continue
                await self._tell(self.cut_off(cut.cursor))
                return "cut_off"
        messages = self.close(None)
        if messages:
            # After the subscription: bounded the old way (a run's last words, once per stream).
            await self._tell(messages, policy.write_timeout_s)
        return "ended"

    async def _pump(self, subscription: Subscription) -> bool:
        """Until the run's end (False) or the protocol's (True)."""
        policy = self.policy
        read, project, send, finished = self.read, self.project, self.send, self.finished
        wait = policy.keepalive_s
        while not subscription.done:
            batch = await read(subscription, wait)
            if batch:
                messages = project(batch)
                if messages:
                    await _write(subscription, policy, send(messages))
                if finished():
                    return True
            elif wait is not None and not subscription.done:
                await _write(subscription, policy, self.keepalive())
        return False

    async def _tell(self, messages: list[W], bound: float | None = None) -> None:
        if not messages:
            return
        if self.policy.write_timeout_s is None:
            await self.send(messages)
            return
        with anyio.move_on_after(bound or min(CUT_OFF_GRACE_S, self.policy.write_timeout_s)):
            await self.send(messages)


async def _write(subscription: Subscription, policy: FollowPolicy, write: Awaitable[None]) -> None:
    """A write bounded by ``write_timeout_s``: the hub watches the deadline and cuts the
    subscriber off past it (lag alone cannot catch a client stuck once the run has ended). A
    deadline to watch, not a timer per write: most writes take microseconds."""
    if policy.write_timeout_s is None:
        await write
        return
    subscription.write_deadline = time.monotonic() + policy.write_timeout_s
    try:
        await write
    finally:
        subscription.write_deadline = None
