"""A session that has had no prompt yet outlives the process that made it (acpx runs an agent
process per command): ``session/new`` records it where the runs are, in the journal or in the
gateway that ``--server`` names."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest
from acp import PROTOCOL_VERSION, RequestError, connect_to_agent, text_block
from acp.ws import create_websocket_stream

from tests.acp.support import RecordingClient, agent_env, spawned
from tests.gateway.harness import running_gateway

pytestmark = pytest.mark.anyio


@contextmanager
def agents(mode: str, tmp_path: Path) -> Iterator[tuple[tuple[str, ...], dict[str, str]]]:
    """How to start ``loopgate acp`` so that every process shares the sessions: one SQLite
    journal, or one gateway (its journal in memory) for ``--server``."""
    if mode == "sqlite":
        yield (), agent_env(LOOPGATE_JOURNAL=f"sqlite:{tmp_path / 'journal.db'}")
        return
    with running_gateway(scripted_delay_s=0.002, workspace=str(tmp_path)) as (base, _server):
        yield ("--server", base), agent_env()


@asynccontextmanager
async def agent(
    client: RecordingClient, args: tuple[str, ...], env: dict[str, str]
) -> AsyncIterator[Any]:
    async with spawned(client, *args, env=env) as conn:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        yield conn


@pytest.mark.parametrize("mode", ["sqlite", "server"])
async def test_an_empty_session_is_known_to_the_next_process(mode: str, tmp_path: Path) -> None:
    cwd = str(tmp_path / "project")
    with agents(mode, tmp_path) as (args, env):
        async with agent(RecordingClient(), args, env) as conn:
            new = [(await conn.new_session(cwd=cwd, mcp_servers=[])).session_id for _ in range(3)]
        resumed_id, direct_id, loaded_id = new

        second = RecordingClient()
        async with agent(second, args, env) as conn:
            listed = await conn.list_sessions()
            resumed = await conn.resume_session(cwd=cwd, session_id=resumed_id, mcp_servers=[])
            answer = await conn.prompt(session_id=resumed_id, prompt=[text_block("plain hello")])
            # A prompt needs no resume first: the session's cwd comes from its record.
            direct = await conn.prompt(session_id=direct_id, prompt=[text_block("plain direct")])

        third = RecordingClient()
        async with agent(third, args, env) as conn:
            loaded = await conn.load_session(cwd=cwd, session_id=loaded_id, mcp_servers=[])
            await conn.close_session(session_id=loaded_id)

        async with agent(RecordingClient(), args, env) as conn:
            with pytest.raises(RequestError) as forgotten:
                await conn.resume_session(cwd=cwd, session_id=loaded_id, mcp_servers=[])
            with pytest.raises(RequestError) as forgotten_load:
                await conn.load_session(cwd=cwd, session_id=loaded_id, mcp_servers=[])
            after = await conn.list_sessions()

    assert {(s.session_id, s.cwd, s.title) for s in listed.sessions} == {
        (session_id, cwd, None) for session_id in new
    }
    assert all(s.updated_at for s in listed.sessions)
    assert resumed.config_options
    assert answer.stop_reason == direct.stop_reason == "end_turn"
    assert "plain hello" in second.text() and "plain direct" in second.text()
    # Nothing to replay: the load answers at once, without a single update.
    assert loaded.config_options and third.updates == [] and third.raw_updates() == []
    assert forgotten.value.code == forgotten_load.value.code == -32002
    assert loaded_id in str(forgotten.value)
    assert {(s.session_id, s.cwd, s.title) for s in after.sessions} == {
        (resumed_id, cwd, "plain hello"),
        (direct_id, cwd, "plain direct"),
    }


async def test_past_the_bound_the_oldest_empty_session_is_forgotten(tmp_path: Path) -> None:
    # A gateway with the memory journal keeps as many thread records as finished runs.
    with running_gateway(workspace=str(tmp_path), max_runs=2) as (base, _server):
        url = base.replace("http://", "ws://") + "/acp"

        @asynccontextmanager
        async def connection() -> AsyncIterator[Any]:
            # A new connection: nothing of the earlier one's sessions is in its memory.
            conn = connect_to_agent(RecordingClient(), await create_websocket_stream(url))
            try:
                await conn.initialize(protocol_version=PROTOCOL_VERSION)
                yield conn
            finally:
                await conn.close()

        async with connection() as conn:
            ids = [
                (await conn.new_session(cwd=f"/p{i}", mcp_servers=[])).session_id for i in range(3)
            ]
        async with connection() as conn:
            with pytest.raises(RequestError) as oldest:
                await conn.resume_session(cwd="/p0", session_id=ids[0], mcp_servers=[])
            kept = [
                await conn.resume_session(cwd=f"/p{i}", session_id=ids[i], mcp_servers=[])
                for i in (1, 2)
            ]
            listed = await conn.list_sessions()
    assert oldest.value.code == -32002
    assert all(k.config_options for k in kept)
    assert [(s.session_id, s.cwd) for s in listed.sessions] == [(ids[2], "/p2"), (ids[1], "/p1")]
