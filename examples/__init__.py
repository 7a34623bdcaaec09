"""Runnable examples: loops to plug into ``loopgate serve`` (docs/loops.md)."""
