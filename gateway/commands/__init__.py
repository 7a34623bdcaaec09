"""Sub-commands of the ``loopgate`` CLI."""
