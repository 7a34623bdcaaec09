"""Real MCP clients for the tests: the official ``mcp`` SDK's ``ClientSession`` over
``loopgate mcp`` (stdio) and ``/mcp`` (streamable HTTP)."""

from __future__ import annotations

import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import msgspec
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from loopgate.adapters.mcp import ADAPTER
from loopgate.adapters.mcp.projector import Answer, Progress
from loopgate.contracts.envelope import Envelope, decode_envelope
from loopgate.contracts.projector import project_run

REPO = Path(__file__).resolve().parents[2]
TOOL_NAMES = ["run", "get_run", "list_runs", "cancel_run"]


def server_params(*args: str, **env: str) -> StdioServerParameters:
    """``loopgate mcp`` as a desktop assistant starts it; the child inherits only what the
    SDK passes on (PATH, HOME…) and what is given here."""
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "loopgate", "mcp", *args],
        env={
            "PYTHONPATH": str(REPO),
            "LOOPGATE_SCRIPTED_DELAY_S": "0",
            # Tools that write (write_note) must never touch the repository.
            "LOOPGATE_WORKSPACE": tempfile.mkdtemp(prefix="loopgate-mcp-"),
            **env,
        },
        cwd=str(REPO),
    )


@asynccontextmanager
async def stdio_session(*args: str, **env: str) -> AsyncIterator[ClientSession]:
    with tempfile.TemporaryFile("w+") as errlog:
        try:
            async with (
                stdio_client(server_params(*args, **env), errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                yield session
        except BaseException:
            errlog.seek(0)
            sys.stderr.write(errlog.read()[-4000:])
            raise


@asynccontextmanager
async def http_session(
    url: str, headers: dict[str, str] | None = None
) -> AsyncIterator[ClientSession]:
    async with (
        create_mcp_http_client(headers=headers) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


class Progressed:
    """A progress callback that keeps what it is told and says when a message came."""

    def __init__(self) -> None:
        self.seen: list[tuple[float, float | None, str | None]] = []
        self.started = anyio.Event()
        self.waiting: tuple[str, anyio.Event] | None = None

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.seen.append((progress, total, message))
        self.started.set()
        if self.waiting is not None and message and self.waiting[0] in message:
            self.waiting[1].set()

    async def until(self, words: str) -> None:
        """Wait for a message with ``words`` in it (or one that came already)."""
        if any(words in (m or "") for _, _, m in self.seen):
            return
        self.waiting = (words, anyio.Event())
        await self.waiting[1].wait()

    @property
    def messages(self) -> list[str]:
        return [m or "" for _, _, m in self.seen]


def text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent), result
    return block.text


def loopgate_meta(result: types.CallToolResult) -> dict[str, Any]:
    assert result.meta is not None, result
    meta: dict[str, Any] = result.meta["loopgate"]
    return meta


def envelopes(ndjson: str) -> list[Envelope]:
    return [decode_envelope(line.encode()) for line in ndjson.splitlines() if line]


def projected(events: list[Envelope]) -> tuple[list[str], Answer]:
    """What the projector makes of a run's journal: the progress messages and the answer."""
    items = project_run(ADAPTER, events)
    messages = [i.message for i in items if isinstance(i, Progress)]
    answers = [i for i in items if isinstance(i, Answer)]
    assert len(answers) == 1 and items[-1] is answers[0]
    return messages, answers[0]


async def read_events(session: ClientSession, run_id: str) -> list[Envelope]:
    read = await session.read_resource(f"loopgate://runs/{run_id}/events")
    contents = read.contents[0]
    assert isinstance(contents, types.TextResourceContents)
    assert contents.mime_type == "application/x-ndjson"
    return envelopes(contents.text)


async def check_live_run_is_its_projection(
    session: ClientSession, result: types.CallToolResult, progressed: Progressed
) -> None:
    """What the client got for a run is what the projector makes of its event log (the
    goldens' projector): every progress message in order, counted 1, 2, 3 …, and the result."""
    run_id = loopgate_meta(result)["runId"]
    messages, answer = projected(await read_events(session, run_id))
    assert progressed.messages == messages
    assert [p for p, _, _ in progressed.seen] == list(range(1, len(messages) + 1))
    assert text(result) == answer.text
    assert result.is_error == answer.is_error
    assert loopgate_meta(result) == answer.meta


def structured(result: types.CallToolResult) -> dict[str, Any]:
    """A data tool's structured result, which its text content repeats as JSON."""
    assert not result.is_error, text(result)
    assert isinstance(result.structured_content, dict)
    assert msgspec.json.decode(text(result)) == result.structured_content
    return result.structured_content


async def get_run(session: ClientSession, run_id: str) -> dict[str, Any]:
    """The ``get_run`` tool's description of the run."""
    return structured(await session.call_tool("get_run", {"run_id": run_id}))


def finished(run: dict[str, Any]) -> bool:
    return run["state"] == "finished"


async def run_end(base: str, run_id: str, within: float) -> tuple[Envelope, float]:
    """The run's terminal event, from the native SSE stream (which ends with it), and how
    long after the call it came; fails if that takes longer than ``within`` seconds."""
    started = anyio.current_time()
    last: Envelope | None = None
    with anyio.fail_after(within):
        async with (
            httpx.AsyncClient(timeout=within) as http,
            http.stream("GET", f"{base}/v1/runs/{run_id}/events") as response,
        ):
            assert response.status_code == 200, await response.aread()
            async for line in response.aiter_lines():
                if line.startswith("data: "):
                    last = decode_envelope(line[6:].encode())
    assert last is not None and last.kind == "completion", last
    return last, anyio.current_time() - started
