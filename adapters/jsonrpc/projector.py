"""Envelope → JSON-RPC notifications, sans-IO.

Every envelope becomes ``run.event {subscription, event: <envelope>}``; the run's terminal
completion is followed by ``run.end {subscription, runId, status, lastSeq}``. The subscription id
comes from ``ProjectorContext.options["subscription"]`` (the first id a connection hands out,
``sub_1``, when absent — as in the conformance goldens).
"""

from __future__ import annotations

from typing import Any

from adapters.jsonrpc.protocol import Notification, encode
from contracts.contract import is_terminal_completion
from contracts.envelope import Envelope, encode_envelope
from contracts.projector import ProjectorContext

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


class JsonRpcProjector:
    def __init__(self, context: ProjectorContext) -> None:
        self.context = context
        subscription = context.options.get("subscription", DEFAULT_SUBSCRIPTION)
        self.subscription = str(subscription)
        self.last_seq = 0
        self.ended = False
        # The encoded head of this subscription's run.event, for feed_encoded.
        self._event_head = (
            b'{"jsonrpc":"2.0","method":"run.event","params":{"subscription":'
            + encode(self.subscription)
            + b',"event":'
        )

    def start(self) -> list[Notification]:
        return []

    def feed(self, envelope: Envelope) -> list[Notification]:
        if self.ended:
            return []  # nothing follows a run's end on the wire, even if a stream has more
        self.last_seq = envelope.seq
        event = Notification(
            method=RUN_EVENT, params={"subscription": self.subscription, "event": envelope}
        )
        data = envelope.data if isinstance(envelope.data, dict) else {}
        if not is_terminal_completion(envelope.kind, data):
            return [event]
        self.ended = True
        status = data.get("status")
        return [
            event,
            run_end(
                self.subscription,
                self.context.run_id,
                status if isinstance(status, str) else "failed",
                envelope.seq,
            ),
        ]

    def feed_encoded(self, envelope: Envelope) -> list[bytes]:
        """``[encode(m) for m in self.feed(envelope)]``, byte for byte, with the common case (a
        non-terminal event) spliced from the envelope's JSON instead of built and re-encoded:
        the live path of every subscription."""
        if self.ended or envelope.kind == "completion":
            return [encode(m) for m in self.feed(envelope)]
        self.last_seq = envelope.seq
        return [self._event_head + encode_envelope(envelope) + b"}}"]

    def close(self, reason: str | None = None) -> list[Notification]:
        """A stream that stopped without its terminal event (a recording cut short): the run
        is over as far as this subscriber knows, like the hub's synthesised ``truncated``."""
        if self.ended:
            return []
        self.ended = True
        return [
            run_end(
                self.subscription,
                self.context.run_id,
                "failed",
                self.last_seq,
                reason or "truncated",
            )
        ]
