"""One streaming connection (a WebSocket or a stdio pair), independent of its transport.

It answers the client's messages in order, holds the connection's subscriptions (one task each,
following its run into ``run.event`` / ``run.end`` notifications: adapters.shared.follow), and
turns each ``permission_request`` event into a server→client ``run.permission`` request whose
answer it passes to ``service.respond``.

Server→client request ids are strings ``"loopgate:<n>"``, counted per connection; replies are
routed by id through a per-connection table, so a client's own ids never matter to the server.
Clients whose library matches every incoming id against their own pending requests should
not use ids starting with ``loopgate:`` themselves.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from anyio.abc import TaskGroup, TaskStatus

from ...contracts.contract import is_terminal_completion
from ...contracts.envelope import Envelope
from ...contracts.gateway_events import DECISIONS, PERMISSION_REQUEST, PERMISSION_RESULT
from ...contracts.projector import ProjectorContext
from ..shared.follow import CONNECTION, EventStream
from ..shared.jsonrpc import Reply
from ..shared.rpc_errors import LIMIT_REACHED
from .dispatch import Dispatcher
from .errors import RpcError
from .projector import JsonRpcProjector, run_end
from .protocol import Request, encode

log = logging.getLogger("loopgate.jsonrpc")

# Writes a list of encoded messages (one WebSocket frame or one stdio line each).
Send = Callable[[list[bytes]], Awaitable[None]]
PERMISSION_METHOD = "run.permission"
REQUEST_ID_PREFIX = "loopgate:"


class _Subscription:
    __slots__ = ("after", "cursor", "gate", "id", "run_id", "scope")

    def __init__(self, sid: str, run_id: str, after: int) -> None:
        self.id = sid
        self.run_id = run_id
        self.after = after
        self.cursor = after
        self.gate = anyio.Event()  # set once the response announcing the id has been sent
        self.scope: anyio.CancelScope | None = None


class Session:
    def __init__(
        self, dispatcher: Dispatcher, send: Send, task_group: TaskGroup, peer: str = "stdio"
    ) -> None:
        self.peer = peer  # who is at the other end, for the log
        self.dispatcher = dispatcher
        self.service = dispatcher.service
        self.limits = dispatcher.limits
        self._send = send
        self._tg = task_group
        self._lock = anyio.Lock()
        self.subscriptions: dict[str, _Subscription] = {}
        self._fresh: list[_Subscription] = []
        self._subscription_count = 0
        self._request_count = 0
        # outgoing request id → (run id, permission request id); oldest first.
        self.pending: OrderedDict[str, tuple[str, str]] = OrderedDict()
        # (run id, permission request id) → outgoing request id: each question is asked once.
        self._asked: OrderedDict[tuple[str, str], str] = OrderedDict()
        self.closed = False

    # --- incoming -----------------------------------------------------------------------

    async def receive(self, raw: bytes | str) -> None:
        """Handle one client message; its response goes out before any notification of a
        subscription it opened."""
        try:
            reply = await self.dispatcher.handle(raw, streams=self, on_reply=self._on_reply)
            if reply is not None:
                await self.send([reply])
        finally:
            for sub in self._fresh:
                sub.gate.set()
            self._fresh.clear()

    async def _on_reply(self, reply: Reply) -> None:
        key = self.pending.pop(reply.id, None) if isinstance(reply.id, str) else None
        if key is None:
            log.debug("reply to unknown or expired request %r ignored", reply.id)
            return
        if reply.failed:
            # The client will not decide; another client or the hub's timeout will.
            log.info("client declined permission request %s of run %s", key[1], key[0])
            return
        result = reply.result
        decision = result.get("decision") if isinstance(result, dict) else result
        if decision not in DECISIONS:
            log.warning("permission reply without a valid decision ignored: %r", result)
            return
        try:
            await self.service.respond(key[0], key[1], decision)
        except Exception:
            log.debug("permission answer for run %s not delivered", key[0], exc_info=True)

    # --- outgoing -----------------------------------------------------------------------

    async def send(self, messages: list[bytes]) -> None:
        """Write messages in order; a client that stops reading is disconnected.

        The reader answers each request itself, through here: while an answer cannot be
        written it reads nothing more, and past ``write_timeout_s`` the connection ends with
        one log line, however many messages the client still had queued.
        """
        if self.closed:
            return
        async with self._lock:
            if self.closed:
                return
            try:
                with anyio.fail_after(self.limits.write_timeout_s):
                    await self._send(messages)
            except TimeoutError:
                log.warning(
                    "cut off the JSON-RPC client %s: it accepted no message for %gs",
                    self.peer,
                    self.limits.write_timeout_s,
                )
                self.close()
            except Exception:
                log.debug("closing a JSON-RPC connection whose client went away")
                self.close()

    def close(self) -> None:
        self.closed = True
        self._tg.cancel_scope.cancel()

    # --- Streams (what methods may do) --------------------------------------------------

    def check_capacity(self) -> None:
        if len(self.subscriptions) >= self.limits.max_subscriptions:
            raise RpcError(
                LIMIT_REACHED,
                f"this connection has the maximum of {self.limits.max_subscriptions} "
                "subscriptions; unsubscribe first",
                retryAfter=1,
            )

    async def subscribe(self, run_id: str, after: int) -> str:
        self.check_capacity()
        self._subscription_count += 1
        sub = _Subscription(f"sub_{self._subscription_count}", run_id, after)
        self.subscriptions[sub.id] = sub
        try:
            # The subscription is entered inside its task (its cancel scope lives there);
            # RunNotFound or LimitReached on entry surface here, as this call's error.
            await self._tg.start(self._pump, sub)
        except BaseException:
            self.subscriptions.pop(sub.id, None)
            raise
        self._fresh.append(sub)
        return sub.id

    def unsubscribe(self, subscription: str) -> bool:
        sub = self.subscriptions.pop(subscription, None)
        if sub is None:
            return False
        if sub.scope is not None:
            sub.scope.cancel()
        return True

    # --- the pump -----------------------------------------------------------------------

    async def _pump(
        self, sub: _Subscription, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        stream = _SubscriptionStream(self, sub, task_status)
        try:
            with anyio.CancelScope() as scope:
                sub.scope = scope
                await stream.run()
        except Exception:
            if not stream.started:
                raise
            log.exception("subscription %s to run %s failed", sub.id, sub.run_id)
            await self.send([encode(run_end(sub.id, sub.run_id, None, sub.cursor, "error"))])
        finally:
            if self.subscriptions.get(sub.id) is sub:
                del self.subscriptions[sub.id]

    def _questions(self, sub: _Subscription, batch: list[Envelope]) -> list[bytes]:
        """Server→client requests for the permission requests of a batch still open at its end
        (a resumed subscription replays answered ones: those are not asked again)."""
        if is_terminal_completion(batch[-1].kind, batch[-1].data):
            return []
        answered: set[str] = set()
        for env in batch:
            if env.kind == PERMISSION_RESULT:
                request_id = env.data.get("requestId")
                if isinstance(request_id, str):
                    answered.add(request_id)
                    asked = self._asked.get((sub.run_id, request_id))
                    if asked is not None:
                        self.pending.pop(asked, None)
        out: list[bytes] = []
        for env in batch:
            request_id = env.data.get("requestId")
            if env.kind != PERMISSION_REQUEST or not isinstance(request_id, str):
                continue
            key = (sub.run_id, request_id)
            if request_id in answered or key in self._asked:
                continue
            self._request_count += 1
            rid = f"{REQUEST_ID_PREFIX}{self._request_count}"
            self._remember(key, rid)
            out.append(encode(Request(id=rid, method=PERMISSION_METHOD, params=question(sub, env))))
        return out

    def _remember(self, key: tuple[str, str], rid: str) -> None:
        self.pending[rid] = key
        self._asked[key] = rid
        while len(self.pending) > self.limits.max_pending_requests:
            self.pending.popitem(last=False)
        while len(self._asked) > 4 * self.limits.max_pending_requests:
            self._asked.popitem(last=False)


class _SubscriptionStream(EventStream[bytes, list[Envelope]]):
    """One subscription's run as ``run.event`` notifications, then ``run.end``; a permission
    request still open at the end of its batch becomes a ``run.permission`` request."""

    def __init__(self, session: Session, sub: _Subscription, task_status: TaskStatus[None]) -> None:
        context = ProjectorContext(
            run_id=sub.run_id, thread_id=sub.run_id, options={"subscription": sub.id}
        )
        projector = _Encoded(JsonRpcProjector(context))
        super().__init__(
            session.service,
            sub.run_id,
            projector,
            CONNECTION,
            consumer="jsonrpc",
            after=sub.after,
            start=False,
        )
        self.session = session
        self.sub = sub
        self.task_status = task_status
        self.started = False

    async def open(self) -> None:
        # The subscription is open: run.subscribe answers with its id, and no notification
        # goes out before that answer.
        self.started = True
        self.task_status.started()
        await self.sub.gate.wait()

    def project(self, batch: list[Envelope]) -> list[bytes]:
        messages = [*super().project(batch), *self.session._questions(self.sub, batch)]
        self.sub.cursor = batch[-1].seq
        return messages

    def cut_off(self, cursor: int) -> list[bytes]:
        # Fell too far behind: the client resumes with run.subscribe {after: lastSeq}.
        return [encode(run_end(self.sub.id, self.sub.run_id, None, cursor, "cut_off"))]

    async def send(self, messages: list[bytes]) -> None:
        await self.session.send(messages)


class _Encoded:
    """The subscription's projector with its messages encoded: ``run.event`` is spliced from
    the envelope's JSON (``feed_encoded``), the live path of every subscription."""

    def __init__(self, projector: JsonRpcProjector) -> None:
        self.projector = projector

    def feed(self, envelope: Envelope) -> list[bytes]:
        return self.projector.feed_encoded(envelope)

    def start(self) -> list[bytes]:
        return [encode(m) for m in self.projector.start()]

    def close(self, reason: str | None = None) -> list[bytes]:
        return [encode(m) for m in self.projector.close(reason)]


def question(sub: _Subscription, env: Envelope) -> dict[str, Any]:
    data = env.data
    return {
        "subscription": sub.id,
        "runId": sub.run_id,
        "requestId": data.get("requestId"),
        "toolCall": data.get("toolCall"),
        "options": data.get("options", list(DECISIONS[:4])),
    }
