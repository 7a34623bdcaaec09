"""Real ACP clients for the tests: the official Python SDK driving ``loopgate acp``."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import acp
import anyio
from acp import schema
from acp.connection import StreamDirection, StreamEvent

REPO = Path(__file__).resolve().parents[2]
UPDATE_MODELS = {
    "agent_message_chunk": schema.AgentMessageChunk,
    "agent_thought_chunk": schema.AgentThoughtChunk,
    "user_message_chunk": schema.UserMessageChunk,
    "tool_call": schema.ToolCallStart,
    "tool_call_update": schema.ToolCallProgress,
    "usage_update": schema.UsageUpdate,
}


def agent_env(**extra: str) -> dict[str, str]:
    """The child inherits only HOME/PATH/…: pass what it needs explicitly."""
    env = {
        "PYTHONPATH": str(REPO),
        "LOOPGATE_SCRIPTED_DELAY_S": "0.002",
        # Tools that write (write_note) must never touch the repository.
        "LOOPGATE_WORKSPACE": tempfile.mkdtemp(prefix="loopgate-acp-"),
    }
    env.update(extra)
    return env


def agent_command(*args: str) -> tuple[str, ...]:
    return (sys.executable, "-m", "loopgate", "acp", *args)


def dump(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def check_strict(model: type[Any], raw: dict[str, Any]) -> Any:
    """Validate against the SDK's schema model and insist nothing was dropped or salvaged
    (the generated models quietly repair some invalid fields)."""
    parsed = model.model_validate(raw)
    kept = parsed.model_dump(mode="json", by_alias=True, exclude_none=True, exclude_unset=True)
    assert kept == raw, f"{model.__name__} changed the message: {raw}"
    return parsed


class RecordingClient:
    """A plain ACP client (not a subclass of acp.Client: its stubs would answer success)."""

    def __init__(self, permission: str | None = "allow_once") -> None:
        self.permission = permission  # the optionId to select; None = answer "cancelled"
        self.updates: list[tuple[str, Any]] = []
        self.permission_requests: list[dict[str, Any]] = []
        self.raw_in: list[dict[str, Any]] = []
        self.on_update: Any = None
        self.on_permission: Any = None

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))
        if self.on_update is not None:
            await self.on_update(update)

    async def request_permission(
        self, options: Any, session_id: str, tool_call: Any, **kwargs: Any
    ) -> dict[str, Any]:
        self.permission_requests.append(
            {
                "sessionId": session_id,
                "toolCall": dump(tool_call),
                "options": [dump(o) for o in options],
            }
        )
        if self.on_permission is not None:
            return await self.on_permission()
        if self.permission is None:
            return {"outcome": {"outcome": "cancelled"}}
        return {"outcome": {"outcome": "selected", "optionId": self.permission}}

    def observe(self, event: StreamEvent) -> None:
        if event.direction is StreamDirection.INCOMING:
            self.raw_in.append(event.message)

    def kinds(self) -> list[str]:
        return [u.session_update for _, u in self.updates]

    def text(self, kind: str = "agent_message_chunk") -> str:
        return "".join(u.content.text for _, u in self.updates if u.session_update == kind)

    def raw_updates(self) -> list[dict[str, Any]]:
        return [m["params"] for m in self.raw_in if m.get("method") == "session/update"]

    def check_all_updates(self) -> None:
        raw = self.raw_updates()
        assert raw, "no session/update received"
        for params in raw:
            check_strict(schema.SessionNotification, params)
            update = params["update"]
            check_strict(UPDATE_MODELS[update["sessionUpdate"]], update)


@asynccontextmanager
async def spawned(
    client: RecordingClient, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> AsyncIterator[acp.core.ClientSideConnection]:
    command = agent_command(*args)
    async with acp.spawn_agent_process(
        client,
        command[0],
        *command[1:],
        env=env or agent_env(),
        cwd=cwd or REPO,
        transport_kwargs={"stderr": subprocess.DEVNULL},
        observers=[client.observe],
        use_unstable_protocol=True,
    ) as (conn, _proc):
        yield conn


async def open_session(conn: Any, cwd: str = "/tmp") -> str:
    await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
    return (await conn.new_session(cwd=cwd, mcp_servers=[])).session_id


async def prompt_cancelled_mid_tool(
    conn: Any, client: RecordingClient, session_id: str, text: str
) -> Any:
    """Prompt, and cancel as soon as the first tool call shows up; the prompt's answer."""
    started = anyio.Event()

    async def on_update(update: Any) -> None:
        if getattr(update, "session_update", None) == "tool_call":
            started.set()

    client.on_update = on_update
    result: dict[str, Any] = {}

    async def run_prompt() -> None:
        result["answer"] = await conn.prompt(session_id=session_id, prompt=[acp.text_block(text)])

    async with anyio.create_task_group() as tg:
        tg.start_soon(run_prompt)
        with anyio.fail_after(10):
            await started.wait()
        await conn.cancel(session_id=session_id)
    return result["answer"]
