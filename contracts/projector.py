"""What every wire adapter provides: a sans-IO projector and the rendering of its messages.

Adapters register under the ``loopgate.adapters`` entry-point group (see pyproject.toml), so a
third-party package plugs in the same way as the built-in ones.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal, Protocol, TypeVar

import msgspec

from contracts.contract import is_terminal_completion
from contracts.envelope import Envelope
from contracts.limits import EndpointLimits
from contracts.ports import RunService

W_co = TypeVar("W_co", covariant=True)


class ProjectorContext(msgspec.Struct, kw_only=True, frozen=True):
    """What a projector may know about the run and the client it serves."""

    run_id: str
    thread_id: str
    # The protocol version the client asked for, if any (AG-UI protocolVersion, ACP's integer).
    protocol_version: str | int | None = None
    options: dict[str, Any] = msgspec.field(default_factory=dict)


class Projector(Protocol[W_co]):
    """Turns envelopes of one run into wire messages of one protocol. Does no I/O.

    Unknown kinds and payload fields never raise; everything opened is closed before a terminal
    message; the output is deterministic for a given input.
    """

    def start(self) -> list[W_co]: ...

    def feed(self, envelope: Envelope) -> list[W_co]: ...

    def close(self, reason: str | None = None) -> list[W_co]:
        """Close what is open; emit a terminal message if none was sent (``reason`` says why)."""
        ...


Framing = Literal["sse", "jsonl"]


class Adapter(Protocol):
    """A registry entry: the protocol's name, its projector and how its messages hit the wire."""

    name: str
    framing: Framing

    def projector(self, context: ProjectorContext) -> Projector[Any]: ...

    def to_builtins(self, message: Any) -> Any:
        """The message as JSON-ready builtins (for goldens and message-based transports)."""
        ...

    def render(self, messages: list[Any]) -> bytes:
        """The exact bytes the wire carries for ``messages`` (SSE text or JSON lines)."""
        ...

    def routes(self, service: RunService, limits: EndpointLimits) -> list[Any]:
        """Starlette routes serving this protocol over the gateway's HTTP server."""
        ...


def project_run(
    adapter: Adapter,
    envelopes: Iterable[Envelope],
    *,
    protocol_version: str | int | None = None,
    run_id: str | None = None,
    close_reason: str | None = None,
) -> list[Any]:
    """What one subscriber of a whole run receives: ``start``, every ``feed``, then ``close``.

    The context's run and thread id are the first envelope's run id (or ``run_id``). The
    replay command and the conformance goldens are both made with this.
    """
    envelopes = list(envelopes)
    rid = run_id or (envelopes[0].run_id if envelopes else "run")
    projector = adapter.projector(
        ProjectorContext(run_id=rid, thread_id=rid, protocol_version=protocol_version)
    )
    messages = list(projector.start())
    for envelope in envelopes:
        messages.extend(projector.feed(envelope))
    messages.extend(projector.close(close_reason))
    return messages


def as_served(envelopes: Iterable[Envelope]) -> list[Envelope]:
    """The events a live subscriber of a recorded run gets: the hub accepts nothing after a
    terminal completion, and gives a stream that stops without one the terminal event it
    synthesises, ``completion{failed, truncated}`` (here with the last event's ts, so that
    replayed output is stable)."""
    served: list[Envelope] = []
    for env in envelopes:
        served.append(env)
        if is_terminal_completion(env.kind, env.data):
            return served
    if served:
        last = served[-1]
        ended = {"status": "failed", "reason": "truncated"}
        served.append(Envelope(last.run_id, last.seq + 1, last.ts, "completion", ended))
    return served
