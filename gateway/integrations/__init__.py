"""Adapters from agent frameworks to loopgate's loop port; each needs its own extra."""
