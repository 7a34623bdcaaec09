"""Following a run: subscribe → project → send, the one loop every endpoint streams with.

One cut-off policy for every protocol. A subscriber is cut off when it falls more than
``subscriber_max_lag`` events behind (the hub cuts it, even mid-write) or when one write takes
longer than ``write_timeout_s``. That bound is kept here for a stream of its own (an SSE
response); a connection shared by several streams and the answers to requests (WebSocket,
stdio) bounds its own writes and, past it, closes itself whole, ending every follow on it.
What a cut-off subscriber gets is its protocol's :class:`FollowPolicy`:

============  ===========================================================================
native SSE    the stream ends; the ids it carried are the cursor for ``Last-Event-ID``
AG-UI         ``RUN_ERROR`` ``subscriber_cut_off``, then the end (resumed with ``received``)
JSON-RPC      ``run.end`` ``{status: null, reason: "cut_off", lastSeq}``: where to resume
ACP           resumed from the journal at once; the client never notices
============  ===========================================================================

Keep-alives: a quiet stream gets one every ``keepalive_s`` where its transport has one (an SSE
comment). WebSockets are pinged by the server; a pipe needs none.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sized
from contextlib import AbstractAsyncContextManager
from typing import Literal, TypeVar, cast

import anyio
import msgspec

from loopgate.contracts.envelope import Envelope
from loopgate.contracts.limits import EndpointLimits
from loopgate.contracts.ports import CutOff, Subscription
from loopgate.contracts.projector import Projector

W = TypeVar("W")
# A batch as ``read`` hands it to ``project``: by default a list of envelopes.
B = TypeVar("B", bound=Sized)
# Opens a subscription to one run after the given seq.
Subscribe = Callable[[int], AbstractAsyncContextManager[Subscription]]
Send = Callable[[list[W]], Awaitable[None]]
# Reads a subscription's next batch, waiting up to the given seconds (``[]`` when idle).
Read = Callable[[Subscription, float | None], Awaitable[B]]
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


def _never() -> bool:
    return False


async def follow(
    subscribe: Subscribe,
    projector: Projector[W],
    send: Send[W],
    policy: FollowPolicy,
    *,
    after: int = 0,
    opened: Callable[[], Awaitable[None]] | None = None,
    start: bool = True,
    project: Callable[[B], list[W]] | None = None,
    finished: Callable[[], bool] = _never,
    keepalive: Callable[[], Awaitable[None]] | None = None,
    cut_off: Callable[[int], list[W]] | None = None,
    read: Read[B] | None = None,
) -> Ending:
    """Send one subscriber its run after seq ``after``: ``start``, every batch, then ``close``.

    ``opened`` runs once the first subscription is open (an HTTP response's status line goes
    out there, so a missing or full run is still a problem response). ``start=False``
    continues a projector that has seen the events up to ``after``. ``project`` turns a batch
    into messages (default: ``projector.feed`` of each envelope). ``finished`` says the
    protocol's stream ended before the run did (an AG-UI interrupt, an ACP answer).
    ``cut_off(cursor)`` is what a cut-off subscriber is told, by default
    ``projector.close("subscriber_cut_off")``. ``read`` reads a batch (default: the
    subscription's ``next_batch``): a protocol that writes envelopes as the hub stores them
    reads those instead, and ``project`` gets what it reads. Returns how it ended.
    """
    # Without ``read`` and ``project``, B is list[Envelope]: what the defaults take.
    feed = project or cast("Callable[[B], list[W]]", _feeder(projector))
    take = read or cast("Read[B]", _next_batch)
    cursor, first = after, True
    while True:
        try:
            async with subscribe(cursor) as subscription:
                if first:
                    first = False
                    if opened is not None:
                        await opened()
                    if start:
                        await _write(subscription, policy, send(projector.start()))
                if await _pump(subscription, take, feed, send, policy, finished, keepalive):
                    return "ended"
            break
        except CutOff as cut:
            if policy.resume:
                cursor = cut.cursor
                continue
            told = cut_off(cut.cursor) if cut_off is not None else projector.close(CUT_OFF_REASON)
            await _tell(policy, send, told)
            return "cut_off"
    messages = projector.close(None)
    if messages:
        # After the subscription: bounded the old way (a run's last words, once per stream).
        await _tell(policy, send, messages, policy.write_timeout_s)
    return "ended"


async def _pump(
    subscription: Subscription,
    read: Read[B],
    feed: Callable[[B], list[W]],
    send: Send[W],
    policy: FollowPolicy,
    finished: Callable[[], bool],
    keepalive: Callable[[], Awaitable[None]] | None,
) -> bool:
    """Until the run's end (False) or the protocol's (True)."""
    wait = policy.keepalive_s if keepalive is not None else None
    while not subscription.done:
        batch = await read(subscription, wait)
        if batch:
            messages = feed(batch)
            if messages:
                await _write(subscription, policy, send(messages))
            if finished():
                return True
        elif keepalive is not None and not subscription.done:
            await _write(subscription, policy, keepalive())
    return False


async def _write(subscription: Subscription, policy: FollowPolicy, write: Awaitable[None]) -> None:
    """A write bounded by ``write_timeout_s``: the hub watches the deadline and cuts the
    subscriber off past it (lag alone cannot catch a client stuck once the run has ended). A
    deadline to watch, not a timer per write: most writes take microseconds."""
    if policy.write_timeout_s is None:
        await write
        return
    subscription.write_deadline = anyio.current_time() + policy.write_timeout_s
    try:
        await write
    finally:
        subscription.write_deadline = None


async def _tell(
    policy: FollowPolicy, send: Send[W], messages: list[W], bound: float | None = None
) -> None:
    if not messages:
        return
    if policy.write_timeout_s is None:
        await send(messages)
        return
    with anyio.move_on_after(bound or min(CUT_OFF_GRACE_S, policy.write_timeout_s)):
        await send(messages)


async def _next_batch(subscription: Subscription, wait: float | None) -> list[Envelope]:
    return await subscription.next_batch(wait)


def _feeder(projector: Projector[W]) -> Callable[[list[Envelope]], list[W]]:
    feed = projector.feed

    def project(batch: list[Envelope]) -> list[W]:
        if len(batch) == 1:
            return feed(batch[0])
        return [message for envelope in batch for message in feed(envelope)]

    return project
