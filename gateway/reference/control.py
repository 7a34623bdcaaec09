"""``TurnControl``: how a caller cancels or steers a turn that runs in another task."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import anyio

from ...contracts.client_errors import ClientError

DEFAULT_MAX_STEER_CHARS = 32_000


class TurnControl:
    """Created by the caller and passed to ``CoreLoop.run_turn``.

    ``cancel()`` and ``steer()`` are plain methods so any task (or a signal handler running in
    the event loop) can call them; the loop reacts at once to cancel and, with ``steer_mode``
    ``"boundary"``, at the next round boundary to steering. With ``"interrupt"`` a steer also
    stops the work in flight (the model's stream, or the round's tools) so the next round,
    which applies it, starts at once.
    """

    def __init__(
        self, max_steer_chars: int = DEFAULT_MAX_STEER_CHARS, steer_mode: str = "boundary"
    ) -> None:
        if max_steer_chars <= 0:
            raise ValueError(f"max_steer_chars must be positive, got {max_steer_chars}")
        self.max_steer_chars = max_steer_chars
        self.steer_mode = steer_mode
        self._cancelled = False
        self._scopes: list[anyio.CancelScope] = []
        self._steers: list[str] = []
        self._phase: anyio.CancelScope | None = None
        self._interrupted = False

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def cancel(self) -> None:
        """Stop the turn's model and tool work now; idempotent."""
        if self._cancelled:
            return
        self._cancelled = True
        for scope in self._scopes:
            scope.cancel()

    def steer(self, text: str) -> None:
        """Queue a steering message; the loop appends it as a user message at the next round."""
        if not isinstance(text, str) or not text.strip():
            raise ClientError("steering message must be a non-empty string")
        if len(text) > self.max_steer_chars:
            raise ClientError(
                f"steering message is {len(text)} characters; the limit is {self.max_steer_chars}"
            )
        self._steers.append(text)
        if self.steer_mode == "interrupt":
            self._interrupt()

    @property
    def pending_steers(self) -> int:
        return len(self._steers)

    # --- used by the loop ---------------------------------------------------------------------

    def take_steers(self) -> list[str]:
        taken, self._steers = self._steers, []
        return taken

    @contextmanager
    def interruptible(self) -> Iterator[anyio.CancelScope]:
        """Run the block as work a steer may stop (``steer_mode: "interrupt"``).

        The block is left quietly when a steer interrupts it (or when the caller's own deadline
        on the yielded scope passes); :meth:`take_interrupt` then says whether a steer did.
        A steer already waiting interrupts the block at its first checkpoint.
        """
        scope = anyio.CancelScope()
        self._interrupted = False
        self._phase = scope
        if self._steers and self.steer_mode == "interrupt":
            self._interrupt()
        try:
            with scope:
                yield scope
        finally:
            self._phase = None

    def take_interrupt(self) -> bool:
        """True once after a steer interrupted the last :meth:`interruptible` block."""
        interrupted, self._interrupted = self._interrupted, False
        return interrupted

    def _interrupt(self) -> None:
        if self._phase is not None and not self._interrupted:
            self._interrupted = True
            self._phase.cancel()

    def attach(self, scope: anyio.CancelScope) -> None:
        """Let ``cancel()`` reach the turn's work; a cancel that came first applies at once."""
        self._scopes.append(scope)
        if self._cancelled:
            scope.cancel()

    def detach(self, scope: anyio.CancelScope) -> None:
        if scope in self._scopes:
            self._scopes.remove(scope)
