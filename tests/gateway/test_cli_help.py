"""The command line explains itself: a version, and help for every flag of every command."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from loopgate.gateway.cli import build_parser, main
from tests.hostile.support import serve
from tests.waiting import wait_until


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


def test_serve_help_lists_every_endpoint_the_app_serves() -> None:
    from starlette.routing import Route, WebSocketRoute

    from loopgate.gateway.app import create_app
    from loopgate.gateway.commands.serve import ENDPOINTS
    from loopgate.gateway.settings import Settings

    listed = " ".join(ENDPOINTS.replace("{id}", "{run_id}").split())
    missing = []
    for route in create_app(Settings()).routes:
        if isinstance(route, Route | WebSocketRoute):
            verbs = sorted(route.methods - {"HEAD"}) if isinstance(route, Route) else ["WS"]
            missing += [
                f"{verb} {route.path}" for verb in verbs if f"{verb} {route.path}" not in listed
            ]
    assert missing == []


def test_serve_says_on_start_where_runs_go(tmp_path: Path) -> None:
    with serve(tmp_path) as served:
        wait_until(lambda: "runs go to" in served.log(), 10, "the start-up lines")
    assert "runs go to the reference loop on the embedded scripted model" in served.log()


def test_each_kind_of_loop_is_named() -> None:
    from loopgate.gateway.plugs.build import loop_summary
    from loopgate.gateway.settings import Settings

    assert loop_summary(Settings(loop="pkg.mod:agent")) == "the Python loop pkg.mod:agent"
    assert loop_summary(Settings(loop_url="http://127.0.0.1:9/run")).startswith("the HTTP loop")
    assert loop_summary(Settings(loop_cmd="python loop.py")) == "the stdio loop `python loop.py`"
    openai = Settings(provider="openai", openai_model="m", openai_base_url="http://h/v1")
    assert loop_summary(openai) == "the reference loop on m at http://h/v1"


def test_openai_api_key_is_read_from_either_variable() -> None:
    from loopgate.gateway.settings import load_settings

    assert load_settings({"OPENAI_API_KEY": "sk-a"}).openai_api_key == "sk-a"
    both = {"OPENAI_API_KEY": "sk-a", "LOOPGATE_OPENAI_API_KEY": "sk-b"}
    assert load_settings(both).openai_api_key == "sk-b"
    assert load_settings({}).openai_api_key is None
