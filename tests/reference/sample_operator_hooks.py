"""An operator's hooks module for ``loopgate serve --hooks tests.reference.sample_operator_hooks``:
no ``hooks`` attribute, so each public class with a hook method is made with no arguments."""

from __future__ import annotations

from loopgate.gateway.reference.hooks import Narrate, NoHooks
from loopgate.gateway.reference.types import LoopContext


class Footer(NoHooks):
    def before_completion(self, ctx: LoopContext, text: str) -> Narrate:
        return Narrate(text=" [checked by ops]")


class OnlyObserves:
    """Not a NoHooks subclass: one hook method is enough."""

    def tool_made_progress(self, ctx: LoopContext, round_summary: object) -> None:
        return None


class _Private(NoHooks):  # private: not made
    pass
