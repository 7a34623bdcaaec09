"""``loopgate serve --reload``: a real gateway process picks up an edited loop module and an
edited config file, keeps its finished runs, keeps serving through a broken edit, and lets a
run going through a reload finish on the loop it started on."""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import httpx
import pytest

from loopgate.contracts.envelope import Envelope
from loopgate.contracts.ports import RunInfo, StartRun
from loopgate.contracts.principal import Principal
from loopgate.gateway.agents.reload import AgentSource, Reloader
from loopgate.gateway.app import build_hub
from loopgate.gateway.config_file import settings_for_command
from loopgate.gateway.hub import Hub
from tests.agents.reload_support import (
    PROBE,
    StderrLog,
    answer,
    closed_loops,
    start,
    text_of,
    write_probe,
)
from tests.agents.roster import PREFIX, TWO_AGENTS_TOML
from tests.gateway.harness import gateway_process
from tests.waiting import wait_until

CONFIG = f"""\
scripted_delay_s = 0.0

[agents.probe]
loop = "{PROBE}:loop"

# Reference loops: their tools hold a task group from start to close, the second agent's
# entered within the first's.
[agents.coder]
[agents.critic]
"""
# Longest a save may take to reach new runs (the bound).
PICKUP_S = 2.0


@contextmanager
def reloading(directory: Path) -> Iterator[tuple[str, httpx.Client, StderrLog]]:
    """``loopgate serve -c directory/loopgate.toml --reload``, the probe answering "first"."""
    config = directory / "loopgate.toml"
    config.write_text(CONFIG, encoding="utf-8")
    write_probe(directory, "first")
    # Bytecode cached, as on a developer's machine (this environment may turn it off).
    env = {"PYTHONPATH": str(directory), "PYTHONDONTWRITEBYTECODE": ""}
    with gateway_process("-c", str(config), "--reload", env=env) as (base, proc):
        log = StderrLog(proc)
        with httpx.Client(base_url=base, timeout=10) as http:
            yield base, http, log
    # Every loop closed, the replaced ones and the last: a clean stop after Ctrl-C.
    text = log.read_to_end()
    assert proc.returncode == 130, text
    assert "Traceback" not in text and "ERROR" not in text, text


def same_second(ns: int) -> int:
    """Another time in the second of ``ns``."""
    within = ns % 1_000_000_000
    return ns - within + (within + 500_000_000) % 1_000_000_000


def test_an_edited_loop_module_answers_the_next_run_within_two_seconds(tmp_path: Path) -> None:
    with reloading(tmp_path) as (base, http, log):
        before = start(http, "hi")
        assert text_of(base, before) == "first"
        # As long as the old word, and saved within the same second as the file it replaces
        # (set so, to be sure): Python's bytecode cache would take the file for unchanged.
        was = (tmp_path / f"{PROBE}.py").stat().st_mtime_ns
        probe = write_probe(tmp_path, "later")
        saved = time.monotonic()
        os.utime(probe, ns=(same_second(was),) * 2)
        deadline = saved + 10
        while (text := answer(base, http)) == "first" and time.monotonic() < deadline:
            pass
        took = time.monotonic() - saved
        print(f"an edited loop module answered a run {took * 1000:.0f} ms after it was saved")
        assert text == "later"
        assert took < PICKUP_S
        log.wait_for(f"reloaded agents: probe, coder, critic ({tmp_path / PROBE}.py changed)")
        # The run from before the reload is still there, as it was.
        run = http.get(f"/v1/runs/{before}").json()
        assert (run["state"], run["status"], run["agent"]) == ("finished", "completed", "probe")
        assert text_of(base, before) == "first"


def test_an_edited_config_adds_an_agent_and_a_broken_edit_keeps_the_agents(
    tmp_path: Path,
) -> None:
    config = tmp_path / "loopgate.toml"
    with reloading(tmp_path) as (base, http, log):
        config.write_text(CONFIG + '\n[agents.parrot]\nloop = "tests.agents.parrot:loop"\n')
        deadline = time.monotonic() + 10
        while len(names := [a["name"] for a in http.get("/v1/agents").json()["agents"]]) < 4:
            assert time.monotonic() < deadline, "the new agent never appeared"
        assert names == ["probe", "coder", "critic", "parrot"]
        assert answer(base, http, "hello", "parrot") == "parrot says: hello"

        # A file with mistakes: each is logged at its line, and the agents serving stay.
        at = log.mark()
        broken = CONFIG + "\n[agents.parrot]\nlop = 1\nmax_rounds = 2\n"
        config.write_text(broken)
        line = broken.splitlines().index("lop = 1") + 1
        log.wait_for(f"not reloaded: {config}:{line}: agents.parrot.lop: unknown key", after=at)
        log.wait_for(f"{config}:{line + 1}: agents.parrot.max_rounds: unknown key", after=at)
        log.wait_for("the agents stay as they were", after=at)
        assert answer(base, http, "still", "parrot") == "parrot says: still"

        # So does a loop module that no longer imports.
        config.write_text(CONFIG)
        log.wait_for("reloaded agents: probe, coder, critic (", after=at)
        at = log.mark()
        (tmp_path / f"{PROBE}.py").write_text("def loop(:\n", encoding="utf-8")
        log.wait_for(f"not reloaded: --loop {PROBE}:loop: {tmp_path / PROBE}.py:1:", after=at)
        assert answer(base, http) == "first"

        # Fixed, both are taken; a setting only a restart applies is named, not applied.
        at = log.mark()
        write_probe(tmp_path, "fixed")
        config.write_text("max_runs = 5\n" + CONFIG)
        log.wait_for("max_runs changed: not applied by a reload", after=at)
        log.wait_for("reloaded agents: probe, coder, critic (", after=at)
        deadline = time.monotonic() + 10
        while (text := answer(base, http)) != "fixed":
            assert time.monotonic() < deadline, f"still answering {text!r}"
        assert [a["name"] for a in http.get("/v1/agents").json()["agents"]] == [
            "probe",
            "coder",
            "critic",
        ]


def test_a_run_going_through_a_reload_ends_on_its_loop_which_closes_after_it(
    tmp_path: Path,
) -> None:
    with reloading(tmp_path) as (base, http, log):
        held = start(http, "hold")
        at = log.mark()
        write_probe(tmp_path, "later")
        log.wait_for("reloaded agents: probe, coder, critic", after=at)
        assert answer(base, http) == "later"
        # The old loop still has a run going: not closed yet.
        assert closed_loops(tmp_path) == []
        assert http.post(f"/v1/runs/{held}/cancel").status_code == 202
        assert text_of(base, held) == "first then first"
        wait_until(lambda: closed_loops(tmp_path), 10, "the replaced loop to close")
        assert closed_loops(tmp_path) == ["first"]


@pytest.mark.anyio
async def test_a_start_that_chose_its_agent_before_a_reload_goes_to_the_agent_serving_now(
    tmp_path: Path,
) -> None:
    """Hub.start awaits (the journal, quotas) between choosing an agent and starting its loop:
    held there by an admission check, two starts outlive the roster they chose from."""
    config = tmp_path / "loopgate.toml"
    config.write_text(TWO_AGENTS_TOML + '\n[agents.echo]\nloop = "tests.agents.parrot:loop"\n')
    settings = settings_for_command(str(config), {}, {})
    hub = build_hub(settings)
    reloader = Reloader(hub, settings, config=str(config), flags={})
    held: list[Principal] = []
    both_held, release = anyio.Event(), anyio.Event()

    async def hold(principal: Principal) -> None:
        held.append(principal)
        if len(held) == 2:
            both_held.set()
        await release.wait()

    infos: dict[str, RunInfo] = {}

    async def begin(agent: str) -> None:
        infos[agent] = await hub.start(StartRun(input="hi", agent=agent))

    async with reloader.running(), hub:
        hub.admission.append(hold)
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(begin, "parrot")
                tg.start_soon(begin, "echo")
                await both_held.wait()
                chosen = {agent.name: agent.source for agent in hub.roster or ()}
                config.write_text(TWO_AGENTS_TOML)  # echo is gone
                await reloader.reload([str(config)])
                # No run of theirs has started: the old loops are closed at once.
                await anyio.wait_all_tasks_blocked()
                assert all(isinstance(s, AgentSource) and s.closed for s in chosen.values())
                release.set()
            assert (await hub.agents())[-1].name == "parrot"
            parrot = [e async for e in events(hub, infos["parrot"].id)]
            assert "".join(e.data["delta"] for e in parrot if e.kind == "content_delta") == (
                PREFIX + "hi"
            )
            echo = [e async for e in events(hub, infos["echo"].id)]
            assert [(e.kind, e.data.get("reason")) for e in echo] == [
                ("error", None),
                ("completion", "agent_removed"),
            ]
            assert echo[0].data["message"] == (
                "agent 'echo' was removed from the configuration as this run started"
            )


async def events(hub: Hub, run_id: str) -> AsyncIterator[Envelope]:
    async with hub.subscribe(run_id) as sub:
        while not sub.done:
            for env in await sub.next_batch():
                yield env
