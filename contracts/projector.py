"""What every wire adapter provides: a sans-IO projector, the rendering of its messages, its
routes on the gateway's HTTP server and, optionally, a stdio transport and an OpenAPI
description of its routes.

Adapters register under the ``loopgate.adapters`` entry-point group (see pyproject.toml), so a
third-party package plugs in the same way as the built-in ones.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol, TypeGuard, TypeVar

import msgspec

from .contract import is_terminal_completion
from .envelope import Envelope
from .limits import EndpointLimits
from .ports import RunService

# Invariant: a projector's lists are the caller's to extend.
W = TypeVar("W")


class ProjectorContext(msgspec.Struct, kw_only=True, frozen=True):
    """What a projector may know about the run and the client it serves."""

    run_id: str
    thread_id: str
    # The protocol version the client asked for, if any (AG-UI protocolVersion, ACP's integer).
    protocol_version: str | int | None = None
    options: dict[str, Any] = msgspec.field(default_factory=dict[str, Any])


class Projector(Protocol[W]):
    """Turns envelopes of one run into wire messages of one protocol. Does no I/O.

    Unknown kinds and payload fields never raise; everything opened is closed before a terminal
    message; the output is deterministic for a given input.
    """

    def start(self) -> list[W]: ...

    def feed(self, envelope: Envelope) -> list[W]: ...

    def close(self, reason: str | None = None) -> list[W]:
        """Close what is open; emit a terminal message if none was sent (``reason`` says why)."""
        ...


class Adapter(Protocol):
    """A registry entry: the protocol's name, its projector and how its messages hit the wire."""

    name: str

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


# Up to n bytes of the client's input; b"" once it has ended.
ReadBytes = Callable[[int], Awaitable[bytes]]
# Returns once the client's pipe has taken the bytes: a client that does not read holds it.
WriteBytes = Callable[[bytes], Awaitable[None]]


class StdioOptions(msgspec.Struct, kw_only=True, frozen=True):
    """What a stdio command tells the transport it starts: bounds and whom it serves."""

    # ``max_line_bytes`` bounds one message (a line); the rest as for the HTTP server.
    limits: EndpointLimits = msgspec.field(default_factory=EndpointLimits)
    version: str = "0.0.0"  # the gateway's
    cwd: str = "/"  # where the command was started (the client's working directory)
    # The protocol's own settings, from its command's flags (its adapter documents them).
    options: dict[str, Any] = msgspec.field(default_factory=dict[str, Any])


class StdioAdapter(Adapter, Protocol):
    """An adapter that also serves its protocol on a process's stdin/stdout (the CLI finds it
    in the registry: ``loopgate acp``, ``loopgate rpc``)."""

    async def serve_stdio(
        self, service: RunService, options: StdioOptions, read: ReadBytes, write: WriteBytes
    ) -> None:
        """Serve one client until its input ends."""
        ...


def serves_stdio(adapter: Adapter) -> TypeGuard[StdioAdapter]:
    return callable(getattr(adapter, "serve_stdio", None))


class DescribedAdapter(Adapter, Protocol):
    """An adapter whose HTTP API the gateway's ``/openapi.json`` describes."""

    def openapi(self) -> dict[str, Any]:
        """Its ``paths`` and ``components`` (``schemas``) as OpenAPI 3.1 objects."""
        ...


def describes_http(adapter: Adapter) -> TypeGuard[DescribedAdapter]:
    return callable(getattr(adapter, "openapi", None))


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
