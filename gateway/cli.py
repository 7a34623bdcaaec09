"""The ``loopgate`` command line: one sub-command per module in ``loopgate.gateway.commands``."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from loopgate import __version__

# Each module exposes ``register(subparsers)`` which adds its parser and sets ``func``.
COMMANDS = ("run", "serve", "replay", "acp", "rpc", "mcp", "keys", "config")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="loopgate", description="A protocol gateway for agent loops."
    )
    parser.add_argument("--version", action="version", version=f"loopgate {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"loopgate.gateway.commands.{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        # Told by the command's parser, as argparse tells every other mistake in its flags:
        # the usage shown is the command's, whose flags the user was reaching for.
        commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        commands.choices[args.command].error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
