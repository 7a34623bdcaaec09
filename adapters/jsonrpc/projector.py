"""Envelope → JSON-RPC notifications, sans-IO.

Every envelope becomes ``run.event {subscription, event: <envelope>}``; the run's terminal
completion is followed by ``run.end {subscription, runId, status, lastSeq}``. The subscription id
comes from ``ProjectorContext.options["subscription"]`` (the first id a connection hands out,
``sub_1``, when absent — as in the conformance goldens).
"""

from __future__ import annotations

from typing import Any

from ...contracts.envelope import Envelope, encode_envelope
from ...contracts.projector import ProjectorContext
from ..shared.projector import RunProjector
from .protocol import Notification, encode

RUN_EVENT = "run.event"
RUN_END = "run.end"
DEFAULT_SUBSCRIPTION = "sub_1"


def run_end(
    subscription: str, run_id: str, status: str | None, last_seq: int, reason: str | None = None
) -> Notification:
    params: dict[str, Any] = {
        "subscription": subscription,
        "runId": run_id,
        "status": status,
        "lastSeq": last_seq,
    }
    if reason is not None:
        params["reason"] = reason
    return Notification(method=RUN_END, params=params)


class JsonRpcProjector(RunProjector[Notification]):
    """Every envelope as it is; the run's end once. Tracks no part of the run."""

    tracks_parts = False

    def __init__(self, context: ProjectorContext) -> None:
        super().__init__(context)
        subscription = context.options.get("subscription", DEFAULT_SUBSCRIPTION)
        self.subscription = str(subscription)
        # The encoded head of this subscription's run.event, for feed_encoded.
        self._event_head = (
            b'{"jsonrpc":"2.0","method":"run.event","params":{"subscription":'
            + encode(self.subscription)
            + b',"event":'
        )

    @property
    def last_seq(self) -> int:
        return 0 if self.last is None else self.last.seq

    def passthrough(self, envelope: Envelope) -> list[Notification]:
        params = {"subscription": self.subscription, "event": envelope}
        return [Notification(method=RUN_EVENT, params=params)]

    def on_terminal(self, status: str, envelope: Envelope) -> list[Notification]:
        return [run_end(self.subscription, self.run_id, status, envelope.seq)]

    def on_truncated(self, reason: str) -> list[Notification]:
        """A stream that stopped without its terminal event (a recording cut short): the run
        is over as far as this subscriber knows, like the hub's synthesised ``truncated``."""
        return [run_end(self.subscription, self.run_id, "failed", self.last_seq, reason)]

    def feed_encoded(self, envelope: Envelope) -> list[bytes]:
        """``[encode(m) for m in self.feed(envelope)]``, byte for byte, with the common case (a
        non-terminal event) spliced from the envelope's JSON instead of built and re-encoded:
        the live path of every subscription."""
        if self.finished or envelope.kind == "completion":
            return [encode(m) for m in self.feed(envelope)]
        self.last = envelope
        return [self._event_head + encode_envelope(envelope) + b"}}"]
