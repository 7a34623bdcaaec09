"""ACP prompts: each ``session/prompt`` is one run on the session's thread, followed to its
answer (:class:`PromptStream`); a run still going when a session is loaded or resumed is
followed the same way, in the background."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Collection
from typing import Any

import anyio
from anyio.abc import TaskGroup

from ...contracts import parts
from ...contracts.agents import UnknownAgent
from ...contracts.client_errors import ClientError
from ...contracts.envelope import Envelope
from ...contracts.history import Conversation, asked_text, continued, conversation_after
from ...contracts.limits import EndpointLimits
from ...contracts.messages import Message
from ...contracts.ports import (
    LimitReached,
    MultitaskStrategy,
    QuotaExceeded,
    RunInfo,
    RunNotFound,
    RunService,
    StartRun,
)
from ...contracts.projector import ProjectorContext
from ..shared.follow import RESUMING, EventStream
from ..shared.multitask import named_strategy, take_turn
from ..shared.projector import SEEN_CALLS, SeenCall, seen_calls
from ..shared.rpc_errors import INTERNAL_ERROR, INVALID_PARAMS
from ..shared.threads import ThreadBusy, conversation_after_run, latest_run, with_attachments
from ..shared.webhooks import check_webhook
from . import permissions
from .errors import AgentError, busy
from .options import PROTOCOL_VERSION, AgentOptions, Peer
from .projector import (
    SESSION_UPDATE,
    AcpItem,
    AcpProjector,
    PermissionAsk,
    PromptAnswer,
    PromptFailure,
    SessionUpdate,
    user_blocks,
    user_message,
)
from .sessions import ActivePrompt, Session

log = logging.getLogger("loopgate.acp")


def prompt_content(blocks: list[Any], max_chars: int) -> parts.Content:
    """The content of a ``session/prompt``'s blocks: text (resource links and embedded text
    resources as text), and images, audio and binary resources as parts; -32602 for a block
    this agent does not take, an empty prompt or text longer than ``max_chars``."""
    out: list[parts.Part] = []
    for i, block in enumerate(blocks):
        kind = getattr(block, "type", None)
        if kind == "text":
            out.append(parts.TextPart(text=block.text))
        elif kind == "resource_link":
            label = block.title or block.name
            line = f"[{label}]({block.uri})"
            if block.description:
                line += f" — {block.description}"
            out.append(parts.TextPart(text=line))
        elif kind == "resource" and hasattr(block.resource, "text"):
            res = block.resource
            out.append(parts.TextPart(text=f'<resource uri="{res.uri}">\n{res.text}\n</resource>'))
        elif kind == "resource" and hasattr(block.resource, "blob"):
            res = block.resource
            name = res.uri.rsplit("/", 1)[-1] or None
            out.append(parts.media("file", media_type=res.mime_type, data=res.blob, name=name))
        elif kind in ("image", "audio"):
            out.append(parts.media(kind, media_type=block.mime_type, data=block.data))
        else:
            raise AgentError(
                INVALID_PARAMS,
                f"Invalid params: prompt[{i}]: content block type {kind!r} is not supported",
                {"field": f"prompt[{i}].type", "type": kind},
            )
    text = "\n\n".join(p.text for p in out if isinstance(p, parts.TextPart) and p.text)
    if not text.strip() and len(out) == sum(isinstance(p, parts.TextPart) for p in out):
        raise AgentError(INVALID_PARAMS, "Invalid params: prompt: the prompt has no text")
    if len(text) > max_chars:
        raise AgentError(
            INVALID_PARAMS,
            f"Invalid params: prompt: longer than {max_chars} characters",
        )
    if all(isinstance(p, parts.TextPart) for p in out):
        return text  # text only: one string, as before parts
    return out


def loopgate_meta(meta: dict[str, Any]) -> dict[str, Any]:
    """``_meta.loopgate`` of a session/prompt: loopgate's own options on it."""
    ours = meta.get("loopgate")
    return ours if isinstance(ours, dict) else {}


def prompt_webhook(meta: dict[str, Any], limits: EndpointLimits) -> str | None:
    """``_meta.loopgate.webhook``: told of the run's end (docs/api.md), checked now, before
    anything waits or starts; -32602 for one the gateway will not send."""
    url = loopgate_meta(meta).get("webhook")
    try:
        if url is not None and not isinstance(url, str):
            raise ClientError("webhook: a URL string")
        check_webhook(url, limits)
    except ClientError as exc:
        raise AgentError(INVALID_PARAMS, f"Invalid params: _meta.loopgate.{exc.message}") from None
    return url


def prompt_strategy(meta: dict[str, Any]) -> MultitaskStrategy | None:
    """``_meta.loopgate.multitask_strategy`` of a session/prompt: what it does when the
    session's thread has a run going from elsewhere; -32602 for an unknown one."""
    strategy = loopgate_meta(meta).get("multitask_strategy")
    try:
        return named_strategy(strategy, "_meta.loopgate.multitask_strategy")
    except ClientError as exc:
        raise AgentError(INVALID_PARAMS, f"Invalid params: {exc.message}") from None


class Prompts:
    """The prompts of one connection's sessions, and the live runs they follow."""

    def __init__(self, service: RunService, options: AgentOptions, limits: EndpointLimits) -> None:
        self.service = service
        self.options = options
        self.limits = limits
        self.peer: Peer | None = None
        self.background: TaskGroup | None = None
        self.projector_options: dict[str, Any] = {"toolKinds": dict(options.tool_kinds)}
        if options.context_size:
            self.projector_options["contextSize"] = options.context_size

    def attach(self, peer: Peer, background: TaskGroup) -> None:
        self.peer = peer
        self.background = background

    async def notify(self, params: dict[str, Any]) -> None:
        assert self.peer is not None
        await self.peer.send_notification(SESSION_UPDATE, params)

    def projector(
        self, run_id: str, session_id: str, seen: dict[str, SeenCall] | None = None
    ) -> AcpProjector:
        options = (
            self.projector_options if not seen else {**self.projector_options, SEEN_CALLS: seen}
        )
        return AcpProjector(
            ProjectorContext(
                run_id=run_id,
                thread_id=session_id,
                protocol_version=PROTOCOL_VERSION,
                options=options,
            )
        )

    async def prompt(
        self, session: Session, prompt: list[Any], meta: dict[str, Any]
    ) -> dict[str, Any]:
        """session/prompt: the run of the prompt on the session's thread, to its answer."""
        if session.active is not None:
            raise busy(session.id)
        content = prompt_content(prompt, self.options.max_prompt_chars)
        strategy = prompt_strategy(meta)
        prompt_webhook(meta, self.limits)
        active = session.active = ActivePrompt()
        try:
            if strategy is None or strategy == "reject":
                # After an ask_user, the prompt is its answer: the waiting call's result.
                messages = continued(await self.history(session), content)
                info = await self.start(session, messages, meta)
            else:
                info = await self.take_turn(session, content, meta, strategy)
                messages = info.input
            active.run_id = info.id
            if active.cancelled:
                await self.service.cancel(info.id)
            events: list[Envelope] = []
            terminal = await self.follow(session, active, info.id, 0, events)
            session.history = conversation_after(messages, events)
            return await self.answer(terminal, active, info.id)
        finally:
            session.active = None

    async def history(self, session: Session) -> Conversation:
        """The session's conversation so far (adapters/shared/threads.py: the same rule as a
        native or JSON-RPC run on a thread); a prompt running on it is -32600."""
        try:
            last = await latest_run(self.service, session.id)
        except ThreadBusy as exc:
            raise busy(session.id, exc.run_id) from None
        if session.history is not None:
            return session.history
        return (
            Conversation([]) if last is None else await conversation_after_run(self.service, last)
        )

    async def take_turn(
        self,
        session: Session,
        content: parts.Content,
        meta: dict[str, Any],
        strategy: MultitaskStrategy,
    ) -> RunInfo:
        """The prompt's run once the session's thread is free of runs started elsewhere
        (another connection, another front end), as ``strategy`` makes way for it; the
        conversation is read from the thread then, as it is after the run waited for."""

        async def start(skipped: Collection[str]) -> RunInfo:
            last = await latest_run(self.service, session.id, skipped)
            history = Conversation([])
            if last is not None:
                history = await conversation_after_run(self.service, last)
            return await self.start(session, continued(history, content), meta, exclusive=True)

        try:
            return await take_turn(
                self.service, session.id, strategy, self.limits.thread_wait_s, start
            )
        except ThreadBusy as exc:
            raise busy(session.id, exc.run_id) from None

    async def start(
        self,
        session: Session,
        messages: list[Message],
        meta: dict[str, Any],
        *,
        exclusive: bool = False,
    ) -> RunInfo:
        # The prompt's `_meta` trace context (W3C names); the hub ignores a malformed one.
        traceparent, tracestate = meta.get("traceparent"), meta.get("tracestate")
        request = StartRun(
            input=messages,
            thread_id=session.id,
            approval=session.approval,
            agent=session.agent,
            metadata={"acp": {"cwd": session.cwd}},
            mcp_servers=session.mcp_servers,
            traceparent=traceparent if isinstance(traceparent, str) else None,
            tracestate=tracestate if isinstance(tracestate, str) else None,
            exclusive=exclusive,
            # Checked when the prompt came (prompt_webhook).
            webhook=loopgate_meta(meta).get("webhook"),
        )
        try:
            return await self.service.start(request)
        except LimitReached as exc:
            # A quota is the caller's own limit, not a busy gateway: its words say which.
            said = (
                exc.detail
                if isinstance(exc, QuotaExceeded)
                else f"the gateway is busy: {exc.detail}"
            )
            raise AgentError(INTERNAL_ERROR, said, {"retryAfter": exc.retry_after}) from None
        except UnknownAgent as exc:
            # A session's thread on an agent the gateway no longer serves.
            raise AgentError(
                INVALID_PARAMS, f"Invalid params: {exc.message}", {"agents": exc.known}
            ) from None
        except ClientError as exc:
            raise AgentError(INVALID_PARAMS, f"Invalid params: {exc.message}") from None

    async def follow(
        self,
        session: Session,
        active: ActivePrompt,
        run_id: str,
        after: int,
        events: list[Envelope] | None,
        projector: AcpProjector | None = None,
    ) -> PromptAnswer | PromptFailure:
        """Project the run to the client until its terminal event; returns the answer.

        ``projector`` continues one that has already seen the events up to ``after``.
        """
        fresh = projector is None
        projector = projector or self.projector(run_id, session.id)
        end: PromptAnswer | PromptFailure | None = None
        async with anyio.create_task_group() as asks:
            stream = PromptStream(
                self, session, active, run_id, projector, asks, after, fresh, events
            )
            await stream.run()
            end = stream.end
            # Only now: cancelling while still inside the subscription would cancel its exit.
            asks.cancel_scope.cancel()
        assert end is not None
        return end

    async def emit(
        self,
        session: Session,
        active: ActivePrompt,
        run_id: str,
        item: AcpItem,
        asks: TaskGroup,
    ) -> PromptAnswer | PromptFailure | None:
        if isinstance(item, SessionUpdate):
            await self.notify(item.params)
        elif isinstance(item, PermissionAsk):
            # Asked in the background: the run's other events keep flowing meanwhile.
            assert self.peer is not None
            asks.start_soon(permissions.ask, self.service, self.peer, active, run_id, item)
        else:
            return item
        return None

    async def answer(
        self, end: PromptAnswer | PromptFailure, active: ActivePrompt, run_id: str
    ) -> dict[str, Any]:
        trace_id = await self.trace_id(run_id)
        if isinstance(end, PromptFailure) and not active.cancelled:
            data = dict(end.data)
            if trace_id:
                data["traceId"] = trace_id
            raise AgentError(end.code, end.message, data)
        if isinstance(end, PromptFailure):
            result: dict[str, Any] = {
                "stopReason": "cancelled",
                "_meta": {"loopgate": {"runId": run_id, "status": "cancelled"}},
            }
        else:
            result = {**end.result, "_meta": {"loopgate": dict(end.result["_meta"]["loopgate"])}}
            if active.cancelled:
                # The client asked to stop: ACP requires "cancelled" whatever the loop did last.
                result["stopReason"] = "cancelled"
        if trace_id:
            result["_meta"]["loopgate"]["traceId"] = trace_id
        return result

    async def trace_id(self, run_id: str) -> str | None:
        try:
            info = await self.service.get(run_id)
        except Exception:
            return None
        trace_id = info.metadata.get("trace_id")
        return trace_id if isinstance(trace_id, str) else None

    async def cancel(self, session: Session | None) -> None:
        """session/cancel: the session's prompt ends cancelled, its questions unanswered."""
        active = session.active if session else None
        if active is None or active.cancelled:
            return
        active.cancelled = True
        if active.run_id is None:
            return  # the prompt cancels its run as soon as it has started it
        for request_id in list(active.asks):
            await permissions.respond(self.service, active.run_id, request_id, "cancelled")
        with contextlib.suppress(RunNotFound):
            await self.service.cancel(active.run_id)

    async def replay(self, session: Session, runs: list[RunInfo]) -> None:
        """session/load: every run's prompt and updates again, as they were streamed; a run
        still going is followed on from there, in the background."""
        session_id = session.id
        live: tuple[RunInfo, int, AcpProjector] | None = None
        for listed in runs:
            run = await with_attachments(self.service, listed)
            asked = run.input[-1].content if run.input and run.input[-1].role == "user" else ""
            if not isinstance(asked, str):  # a prompt with attachments: its blocks again
                for update in user_blocks(session_id, asked):
                    await self.notify(update.params)
            elif text := asked_text(run.input):
                await self.notify(user_message(session_id, text).params)
            projector = self.projector(run.id, session_id)
            events = await self.service.history(run.id)
            for env in events:
                for item in projector.feed(env):
                    if isinstance(item, SessionUpdate):
                        await self.notify(item.params)
            if run.state != "finished":  # running, or queued: it will run
                live = (run, events[-1].seq if events else 0, projector)
        session.history = None
        if live is not None:
            self.watch(session, *live)

    async def resume(self, session: Session) -> None:
        """session/resume: follow the session's run still going, from where it is now."""
        if session.active is None:
            runs = await self.service.list_runs(limit=1, thread_id=session.id)
            if runs and runs[0].state != "finished":
                run = runs[0]
                # No replay: the client has the run so far, its tool calls included.
                seen = seen_calls(await self.service.history(run.id, limit=run.last_seq))
                self.watch(session, run, run.last_seq, self.projector(run.id, session.id, seen))

    def watch(
        self, session: Session, run: RunInfo, after: int, projector: AcpProjector | None = None
    ) -> None:
        """Keep streaming a run that is still going (e.g. started by another client)."""
        assert self.background is not None
        active = session.active = ActivePrompt(watched=True)
        active.run_id = run.id
        self.background.start_soon(self.watch_run, session, active, run.id, after, projector)

    async def watch_run(
        self,
        session: Session,
        active: ActivePrompt,
        run_id: str,
        after: int,
        projector: AcpProjector | None,
    ) -> None:
        try:
            await self.follow(session, active, run_id, after, None, projector)
        except Exception:
            log.warning("stopped following run %s", run_id)
        finally:
            if session.active is active:
                session.active = None
            session.history = None


class PromptStream(EventStream[AcpItem, list[Envelope]]):
    """A prompt's run (or a live run followed after a load) to the client until its answer:
    updates as notifications, permission questions asked in the background (``asks``), the
    answer kept as ``end``; ``events`` (when given) gets every envelope read, for the session's
    history. Resumed after a cut-off: the answer must come whatever the client's pace."""

    def __init__(
        self,
        prompts: Prompts,
        session: Session,
        active: ActivePrompt,
        run_id: str,
        projector: AcpProjector,
        asks: TaskGroup,
        after: int,
        start: bool,
        events: list[Envelope] | None,
    ) -> None:
        super().__init__(
            prompts.service, run_id, projector, RESUMING, consumer="acp", after=after, start=start
        )
        self.prompts, self.session, self.active, self.asks = prompts, session, active, asks
        self.events = events
        self.end: PromptAnswer | PromptFailure | None = None

    def project(self, batch: list[Envelope]) -> list[AcpItem]:
        if self.events is not None:
            self.events.extend(batch)
        return super().project(batch)

    def finished(self) -> bool:
        return self.end is not None

    async def send(self, messages: list[AcpItem]) -> None:
        prompts, session, active, run_id = self.prompts, self.session, self.active, self.run_id
        for item in messages:
            self.end = await prompts.emit(session, active, run_id, item, self.asks) or self.end
