"""A recorded stream (``conformance/streams/*.jsonl``) served as a live run."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import anyio.lowlevel

from ...contracts.client_errors import ClientError
from ...contracts.envelope import Envelope, EnvelopeError, decode_envelope
from ...contracts.ports import StartRun

if TYPE_CHECKING:
    from ..hub import Hub, Run

MAX_NAME_CHARS = 128


def read_recording(path: Path) -> list[Envelope]:
    """Every line of a recording, decoded; an error names the file and line."""
    envelopes = []
    with path.open("rb") as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                envelopes.append(decode_envelope(line))
            except EnvelopeError as exc:
                raise ClientError(f"{path.name} line {number}: {exc.message}") from None
    return envelopes


class ReplaySource:
    def __init__(self, directory: str, max_gap_s: float) -> None:
        self.directory = Path(directory)
        self.max_gap_s = max_gap_s

    def names(self) -> list[str]:
        return sorted(p.stem for p in self.directory.glob("*.jsonl"))

    def prepare(self, request: StartRun) -> tuple[list[Envelope], bool]:
        path = self.directory / f"{self.recording(request.replay or '')}.jsonl"
        return read_recording(path), request.replay_pace == "recorded"

    def recording(self, name: str) -> str:
        """The recording ``name`` names (with or without ``.jsonl``). Only one the directory
        lists: a path made of a client's text could read any .jsonl file on the host, or fail
        in the OS (a name too long, a NUL) where the client should be told what was wrong."""
        names = self.names()
        stem = name.removesuffix(".jsonl")
        if stem in names:
            return stem
        available = f"one of: {', '.join(names)}" if names else "there are none"
        if not 0 < len(name) <= MAX_NAME_CHARS or not name.isprintable() or "/" in name:
            raise ClientError(
                f"replay must be the name of a recording, at most {MAX_NAME_CHARS} characters "
                f"and no path; {available}",
                field="replay",
            )
        raise ClientError(f"replay: no recording named {name!r}; {available}", field="replay")

    def producer(self, hub: Hub, run: Run, prepared: tuple[list[Envelope], bool]) -> ReplayProducer:
        envelopes, paced = prepared
        return ReplayProducer(hub, run, envelopes, self.max_gap_s if paced else 0.0)


class ReplayProducer:
    def __init__(self, hub: Hub, run: Run, envelopes: list[Envelope], max_gap_s: float) -> None:
        self.hub = hub
        self.run_ = run
        self.envelopes = envelopes
        self.max_gap_s = max_gap_s
        self.scope = anyio.CancelScope()

    async def run(self) -> None:
        with self.scope:
            previous_ts: int | None = None
            for env in self.envelopes:
                if self.max_gap_s and previous_ts is not None:
                    await anyio.sleep(min(max(env.ts - previous_ts, 0) / 1e9, self.max_gap_s))
                elif previous_ts is not None and not env.seq % 256:
                    # Let subscribers and the server breathe during a fast replay.
                    await anyio.lowlevel.checkpoint()
                previous_ts = env.ts
                if self.run_.finished:
                    return
                self.hub.publish(self.run_, env.kind, env.data)
        if self.scope.cancelled_caught and not self.run_.finished:
            self.hub.publish(
                self.run_, "completion", {"status": "cancelled", "reason": "cancelled_by_client"}
            )

    def cancel(self) -> None:
        self.scope.cancel()

    def respond(self, request_id: str, decision: str) -> str | None:
        return "a replayed run has no pending permission requests"

    async def steer(self, content: str) -> str | None:
        return "a replayed run cannot be steered"
