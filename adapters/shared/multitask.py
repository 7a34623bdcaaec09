"""One run per thread at a time: what a start does when its thread has a run going.

A start that names a ``multitask_strategy`` (and a thread) is ``exclusive``: the run service
claims the thread for it, atomically across instances sharing a journal. When the thread is
taken (ThreadBusy, from the adapter's look-up or from the claim):

- ``reject``: refused, ThreadBusy (409 in every HTTP protocol), as exclusive starts once were;
- ``enqueue`` (the default of a prompt string continuing a thread): the start waits for the
  running run's terminal event, then goes on from the conversation it ended with;
- ``interrupt``: the running run is cancelled (its output stays in the thread), then as enqueue;
- ``rollback``: the running run is cancelled and left out of the conversation: the new run goes
  on from the thread as it was before it (the run itself stays listed, ``cancelled``).

Every start passes here, strategy or not: a ``webhook`` it names is checked first
(adapters/shared/webhooks.py), so a refused one starts nothing and cancels nothing.

Every wait is bounded by ``thread_wait_s`` (EndpointLimits): past it the start is refused as
ThreadBusy naming the run still going. Only ports are used, so the same holds wherever the run
going is served from (this instance, or another one sharing the journal).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection

import anyio
import msgspec

from ...contracts.client_errors import ClientError
from ...contracts.limits import EndpointLimits
from ...contracts.parts import Content
from ...contracts.ports import (
    MULTITASK_STRATEGIES,
    CutOff,
    MultitaskStrategy,
    RunInfo,
    RunService,
    StartRun,
    ThreadBusy,
)
from .threads import thread_start
from .webhooks import check_webhook

__all__ = ["named_strategy", "start_on_thread", "take_turn"]

# A wait for a run's end re-reads its record this often when its stream says nothing.
_IDLE_S = 1.0


def named_strategy(value: object, field: str) -> MultitaskStrategy | None:
    """The strategy ``value`` names (None for none), from a protocol's loose options (AG-UI's
    forwardedProps, ACP's ``_meta``); ClientError naming ``field`` for anything else."""
    if value is None:
        return None
    for known in MULTITASK_STRATEGIES:
        if value == known:
            return known
    raise ClientError(f"{field} must be one of: " + ", ".join(MULTITASK_STRATEGIES))


async def start_on_thread(
    service: RunService,
    request: StartRun,
    limits: EndpointLimits,
    content: Content | None = None,
) -> RunInfo:
    """Start ``request`` as its ``multitask_strategy`` says. None: ``enqueue`` for a prompt
    string on a thread (it continues it); any other start goes beside the run going.
    ``content``: the prompt with its attachments (adapters/shared/threads.py)."""
    check_webhook(request.webhook, limits)
    strategy, thread_id = request.multitask_strategy, request.thread_id
    if strategy is None and _continues(request):
        strategy = "enqueue"  # a prompt continuing a busy thread waits its turn by default
    if strategy is None or thread_id is None:
        return await service.start(await thread_start(service, request, content))
    request = msgspec.structs.replace(request, exclusive=True)

    async def start(skipped: Collection[str]) -> RunInfo:
        return await service.start(await thread_start(service, request, content, skipped))

    return await take_turn(service, thread_id, strategy, limits.thread_wait_s, start)


async def take_turn(
    service: RunService,
    thread_id: str,
    strategy: MultitaskStrategy,
    wait_s: float,
    start: Callable[[Collection[str]], Awaitable[RunInfo]],
) -> RunInfo:
    """``start`` once the thread is free, as ``strategy`` makes way for it; it is handed the
    runs to leave out of the conversation (rollback's) and raises ThreadBusy when another
    start took the thread first (its exclusive claim), which is waited out like any run."""
    skipped: set[str] = set()
    busy: ThreadBusy | None = None
    with anyio.move_on_after(wait_s):
        while True:
            try:
                await _check_free(service, thread_id, skipped)
                return await start(skipped)
            except ThreadBusy as exc:
                busy = exc
            if strategy == "reject":
                raise busy
            if strategy in ("interrupt", "rollback"):
                await service.cancel(busy.run_id)
            if strategy == "rollback":
                skipped.add(busy.run_id)
            await _ended(service, busy.run_id)
    assert busy is not None  # only a wait can run out of time
    raise ThreadBusy(thread_id, busy.run_id)


def _continues(request: StartRun) -> bool:
    """A prompt string continuing a thread: the start that takes the thread to itself."""
    prompt = request.input
    return (
        request.source == "loop"
        and bool(request.thread_id)
        and isinstance(prompt, str)
        and bool(prompt)
    )


async def _check_free(service: RunService, thread_id: str, skipped: set[str]) -> None:
    """ThreadBusy while the thread's newest run (one started without a strategy, which claims
    nothing, included) is still going."""
    runs = await service.list_runs(limit=len(skipped) + 1, thread_id=thread_id)
    for run in runs:
        if run.state != "finished":
            raise ThreadBusy(thread_id, run.id)


async def _ended(service: RunService, run_id: str) -> None:
    """Return once the run has ended (its terminal event is out)."""
    while (info := await service.get(run_id)).state != "finished":
        try:
            async with service.subscribe(run_id, after=info.last_seq) as sub:
                while not sub.done:
                    await sub.next_batch(_IDLE_S)
            return
        except CutOff:
            continue  # read its record again and follow on from there
