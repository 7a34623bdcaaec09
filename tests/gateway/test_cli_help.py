"""The command line explains itself: a version, and help for every flag of every command."""

from __future__ import annotations

import argparse

import pytest

from gateway.cli import build_parser, main


def test_version_is_printed_without_a_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("loopgate ") and out.split()[1][0].isdigit()


def test_every_flag_of_every_command_has_help() -> None:
    undocumented = []
    for action in build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command, parser in action.choices.items():
                undocumented += [
                    f"{command} {flag.option_strings[-1]}"
                    for flag in parser._actions
                    if flag.option_strings and not flag.help
                ]
    assert undocumented == []
