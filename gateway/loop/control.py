"""``TurnControl``: how a caller cancels or steers a turn that runs in another task."""

from __future__ import annotations

import anyio

from loopgate.contracts.client_errors import ClientError

DEFAULT_MAX_STEER_CHARS = 32_000


class TurnControl:
    """Created by the caller and passed to ``CoreLoop.run_turn``.

    ``cancel()`` and ``steer()`` are plain methods so any task (or a signal handler running in
    the event loop) can call them; the loop reacts at once to cancel and at the next round
    boundary to steering.
    """

    def __init__(self, max_steer_chars: int = DEFAULT_MAX_STEER_CHARS) -> None:
        if max_steer_chars <= 0:
            raise ValueError(f"max_steer_chars must be positive, got {max_steer_chars}")
        self.max_steer_chars = max_steer_chars
        self._cancelled = False
        self._scopes: list[anyio.CancelScope] = []
        self._steers: list[str] = []

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

    @property
    def pending_steers(self) -> int:
        return len(self._steers)

    # --- used by the loop ---------------------------------------------------------------------

    def take_steers(self) -> list[str]:
        taken, self._steers = self._steers, []
        return taken

    def attach(self, scope: anyio.CancelScope) -> None:
        """Let ``cancel()`` reach the turn's work; a cancel that came first applies at once."""
        self._scopes.append(scope)
        if self._cancelled:
            scope.cancel()

    def detach(self, scope: anyio.CancelScope) -> None:
        if scope in self._scopes:
            self._scopes.remove(scope)
