"""``loopgate config``: check a config file, show the settings a gateway would run with."""

from __future__ import annotations

import argparse
import os
import sys

from ..config_file import (
    CONFIG_ENV,
    ConfigError,
    read_config,
    settings_for_command,
    settings_from,
    settings_toml,
)
from .serve import add_setting_flags, setting_flags


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "config",
        help="check a config file, or show the settings serve would run with",
        description="The gateway's TOML config file (docs/config.md).",
    )
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    check = actions.add_parser(
        "check",
        help="validate a config file: 'FILE: ok' (exit 0), or every problem (exit 2)",
        description="Validate a config file on its own (defaults < the file): every key, its "
        "type and value. Exit 0 and 'FILE: ok', or each problem with its line and exit 2.",
    )
    check.add_argument("file", metavar="FILE", help="the TOML file to check")
    check.set_defaults(func=check_main)
    show = actions.add_parser(
        "show",
        help="print the effective settings as TOML, secrets masked",
        description="Print the settings `loopgate serve` would run with, given the same file, "
        f"{CONFIG_ENV}, LOOPGATE_* variables and flags: defaults < file < variables < flags. "
        'Secrets (token, openai_api_key, loop_token, URL passwords) are shown as "***".',
    )
    add_setting_flags(show)
    show.set_defaults(func=show_main)


def check_main(args: argparse.Namespace) -> int:
    try:
        # The file alone: what the environment of this shell holds is not the file's doing.
        settings_from({}, None, read_config(args.file))
    except ConfigError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        return 2
    print(f"{args.file}: ok")
    return 0


def show_main(args: argparse.Namespace) -> int:
    try:
        settings = settings_for_command(args.config, os.environ, setting_flags(args))
    except ValueError as exc:
        for problem in str(exc).splitlines():
            print(f"loopgate config show: {problem}", file=sys.stderr)
        return 2
    sys.stdout.write(settings_toml(settings))
    return 0
