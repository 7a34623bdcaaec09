"""Flags the commands that run the reference loop in-process share (`serve`, `rpc`, `acp`)."""

from __future__ import annotations

import argparse

LOG_LEVELS = ["critical", "error", "warning", "info", "debug"]


def add_loop_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--provider", choices=["scripted", "openai"], help="model provider")
    p.add_argument(
        "--scripted-delay",
        dest="scripted_delay_s",
        type=float,
        help="seconds between scripted deltas (default 0.02)",
    )


def add_log_level(p: argparse.ArgumentParser, default: str) -> None:
    p.add_argument("--log-level", default=default, choices=LOG_LEVELS)
