"""A tools module that chooses with __all__ and imports nothing from loopgate."""

from textwrap import dedent

# An imported function is a tool too when __all__ names it.
__all__ = ["dedent", "shout"]


def shout(text: str) -> str:
    """Shout the text."""
    return text.upper()


def whisper(text: str) -> str:
    """Not exported, so not a tool."""
    return text.lower()


# Marked by hand, the way @tool would: a module need not import loopgate to set it.
shout.__loopgate_tool__ = {"kind": "think", "concurrency_safe": True}
