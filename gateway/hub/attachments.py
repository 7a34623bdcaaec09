"""A run's attachments, kept by reference: the hub's side of the journal's blob store
(gateway.journal.blobs).

When a run starts, its input's inline parts become references (contracts/blobs.py) and their
bytes go to the store, once each; the run's record, in memory and in the journal, holds only
the references. Where a record is read back into a conversation (``RunService.get``), the
references are resolved: loops, projectors and front ends see the bytes where they did.
"""

from __future__ import annotations

import logging

import anyio
import msgspec

from ...contracts.blobs import by_reference, refs_in, resolved
from ...contracts.messages import Message
from ...contracts.ports import RunExists, RunInfo
from ..journal.blobs import BlobStore

log = logging.getLogger("loopgate.hub")

# Inline data (base64 characters) beyond which decoding and hashing it, or encoding it back,
# goes to a worker thread: 5 MiB cost 17 ms to store by reference and 9 ms to resolve (one
# core, process time), the event loop's whole for that long.
THREAD_ABOVE_CHARS = 256 << 10


class Attachments:
    def __init__(self, store: BlobStore, limit: int) -> None:
        self.store = store
        self.limit = limit
        # Runs whose blobs are kept and whose start may still be refused.
        self._starting: set[str] = set()

    async def keep(self, run_id: str, messages: list[Message]) -> list[Message]:
        """The messages as the run's record keeps them; their blobs stored (StoreFull, with
        nothing written, past the store's bound)."""
        inline = _inline_chars(messages)
        if not inline:
            return messages
        if inline > THREAD_ABOVE_CHARS:
            kept, blobs = await anyio.to_thread.run_sync(by_reference, messages)
        else:
            kept, blobs = by_reference(messages)
        await self.store.keep(run_id, blobs, self.limit)
        self._starting.add(run_id)
        return kept

    def starting(self, run_id: str) -> bool:
        """Whether the run's blobs are kept and its start is still under way here."""
        return run_id in self._starting

    def recorded(self, run_id: str, kept: list[Message]) -> list[Message]:
        """The run's start went through: its record keeps ``kept``."""
        self._starting.discard(run_id)
        return kept

    async def refused(self, run_id: str, exc: BaseException) -> None:
        """The start was refused after its blobs were kept (the thread busy, a quota): its
        references go, and the blobs no other run refers to. Not for RunExists: the run of
        that id has references of its own."""
        if run_id not in self._starting:
            return
        self._starting.discard(run_id)
        if isinstance(exc, RunExists):
            return
        try:
            with anyio.CancelScope(shield=True):
                await self.store.forget(run_id)
        except Exception:
            # The client hears the start's own refusal; the blobs stay stored, referred to
            # by a run that never was (this line names it).
            log.warning("run %s was refused; its attachments could not be let go", run_id)

    async def resolve(self, info: RunInfo) -> RunInfo:
        """``info`` with its input's attachments' bytes inline."""
        refs = refs_in(info.input)
        if not refs:
            return info
        blobs = await self.store.load(refs)
        if sum(len(raw) for raw in blobs.values()) * 4 // 3 > THREAD_ABOVE_CHARS:
            messages = await anyio.to_thread.run_sync(resolved, info.input, blobs)
        else:
            messages = resolved(info.input, blobs)
        return msgspec.structs.replace(info, input=messages)


def _inline_chars(messages: list[Message]) -> int:
    total = 0
    for message in messages:
        if not isinstance(message.content, str):
            for part in message.content:
                data = getattr(part, "data", None)
                total += len(data) if data else 0
    return total
