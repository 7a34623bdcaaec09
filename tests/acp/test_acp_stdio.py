"""The official Python SDK (``acp.spawn_agent_process``) drives ``loopgate acp`` over stdio."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import PROTOCOL_VERSION, RequestError, resource_link_block, schema, text_block

from tests.acp.support import (
    RecordingClient,
    agent_env,
    check_strict,
    dump,
    open_session,
    prompt_cancelled_mid_tool,
    spawned,
)

pytestmark = pytest.mark.anyio


async def test_initialize_is_honest() -> None:
    client = RecordingClient()
    async with spawned(client) as conn:
        answer = await conn.initialize(protocol_version=PROTOCOL_VERSION)
    raw = next(m["result"] for m in client.raw_in if m.get("id") == 0)
    check_strict(schema.InitializeResponse, raw)
    assert answer.protocol_version == PROTOCOL_VERSION
    caps = raw["agentCapabilities"]
    assert caps["loadSession"] is True
    assert caps["promptCapabilities"] == {"image": True, "audio": True, "embeddedContext": True}
    assert caps["sessionCapabilities"] == {"list": {}, "resume": {}, "close": {}}
    assert raw["agentInfo"]["name"] == "loopgate"


async def test_prompt_with_a_tool_round() -> None:
    client = RecordingClient()
    async with spawned(client) as conn:
        session_id = await open_session(conn)
        answer = await conn.prompt(
            session_id=session_id, prompt=[text_block("one tool: what is 17 times 23")]
        )
    assert answer.stop_reason == "end_turn"
    client.check_all_updates()
    kinds = client.kinds()
    assert kinds.index("agent_thought_chunk") < kinds.index("tool_call")
    assert kinds.index("tool_call") < kinds.index("tool_call_update")
    assert kinds[-1] == "agent_message_chunk"
    start = next(u for _, u in client.updates if u.session_update == "tool_call")
    assert start.kind == "think" and start.status == "in_progress"
    assert start.raw_input == {"expression": "17 * 23"}
    assert start.title == "calculate: 17 * 23"
    done = next(u for _, u in client.updates if u.session_update == "tool_call_update")
    assert done.status == "completed" and done.raw_output == "391"
    assert done.content[0].content.text == "391"
    assert "391" in client.text()
    raw_answer = next(m for m in client.raw_in if "result" in m and "stopReason" in m["result"])
    check_strict(schema.PromptResponse, raw_answer["result"])
    meta = raw_answer["result"]["_meta"]["loopgate"]
    assert meta["status"] == "completed" and meta["runId"].startswith("run_")
    assert raw_answer["result"]["usage"]["totalTokens"] > 0


async def test_second_prompt_sees_the_history_and_resource_links() -> None:
    client = RecordingClient()
    async with spawned(client) as conn:
        session_id = await open_session(conn)
        first = await conn.prompt(session_id=session_id, prompt=[text_block("plain hello")])
        second = await conn.prompt(
            session_id=session_id,
            prompt=[
                text_block("one tool please"),
                resource_link_block(name="notes.md", uri="file:///tmp/notes.md"),
            ],
        )
    assert first.stop_reason == second.stop_reason == "end_turn"
    assert client.kinds().count("tool_call") == 1


async def test_permission_allow_then_reject(tmp_path: Path) -> None:
    client = RecordingClient(permission="allow_once")
    env = agent_env(LOOPGATE_WORKSPACE=str(tmp_path))
    async with spawned(client, env=env) as conn:
        session_id = await open_session(conn)
        allowed = await conn.prompt(session_id=session_id, prompt=[text_block("write note alpha")])
        client.permission = "reject_once"
        rejected = await conn.prompt(session_id=session_id, prompt=[text_block("write note beta")])
    assert allowed.stop_reason == rejected.stop_reason == "end_turn"
    client.check_all_updates()
    assert len(client.permission_requests) == 2
    asked = client.permission_requests[0]
    check_strict(schema.ToolCallUpdate, asked["toolCall"])
    assert asked["toolCall"]["kind"] == "edit" and asked["toolCall"]["status"] == "pending"
    assert [o["kind"] for o in asked["options"]] == [
        "allow_once",
        "allow_always",
        "reject_once",
        "reject_always",
    ]
    results = [u for _, u in client.updates if u.session_update == "tool_call_update"]
    finals = [u for u in results if u.status in ("completed", "failed")]
    assert [u.status for u in finals] == ["completed", "failed"]
    assert finals[1].content[0].content.text == "rejected by the user"
    assert "rejected by the user" in client.text()  # the model saw the rejection
    assert len(list((tmp_path / "notes").glob("*.md"))) == 1


async def test_allow_always_is_remembered_for_the_session(tmp_path: Path) -> None:
    client = RecordingClient(permission="allow_always")
    env = agent_env(LOOPGATE_WORKSPACE=str(tmp_path))
    async with spawned(client, env=env) as conn:
        session_id = await open_session(conn)
        await conn.prompt(session_id=session_id, prompt=[text_block("write note one")])
        await conn.prompt(session_id=session_id, prompt=[text_block("write note two")])
        other = (await conn.new_session(cwd="/tmp", mcp_servers=[])).session_id
        await conn.prompt(session_id=other, prompt=[text_block("write note three")])
    assert len(client.permission_requests) == 2  # the second prompt was not asked
    assert len(list((tmp_path / "notes").glob("*.md"))) == 3


async def test_ask_before_every_tool_option() -> None:
    client = RecordingClient(permission="reject_once")
    async with spawned(client) as conn:
        session_id = await open_session(conn)
        changed = await conn.set_config_option(
            session_id=session_id, config_id="approval", value="always"
        )
        answer = await conn.prompt(session_id=session_id, prompt=[text_block("one tool: 2 and 3")])
    assert changed.config_options[0].current_value == "always"
    assert answer.stop_reason == "end_turn"
    assert [r["toolCall"]["kind"] for r in client.permission_requests] == ["think"]


async def test_cancel_mid_prompt_answers_cancelled() -> None:
    client = RecordingClient()
    async with spawned(client) as conn:
        session_id = await open_session(conn)
        cancelled = await prompt_cancelled_mid_tool(conn, client, session_id, "slow tool please")
        # The session is usable again right after the cancelled answer.
        again = await conn.prompt(session_id=session_id, prompt=[text_block("plain again")])
    assert cancelled.stop_reason == "cancelled"
    assert again.stop_reason == "end_turn"
    closing = [u for _, u in client.updates if u.session_update == "tool_call_update"]
    assert closing[0].status == "failed" and closing[0].content[0].content.text == "cancelled"


async def test_cancel_answers_a_pending_permission_request() -> None:
    client = RecordingClient()
    asked = anyio.Event()
    release = anyio.Event()

    async def on_permission() -> dict[str, object]:
        asked.set()
        await release.wait()  # like an IDE: the dialog stays open until the cancel
        return {"outcome": {"outcome": "cancelled"}}

    client.on_permission = on_permission
    async with spawned(client) as conn:
        session_id = await open_session(conn)
        result: dict[str, object] = {}
        answered = anyio.Event()

        async def run_prompt() -> None:
            result["answer"] = await conn.prompt(
                session_id=session_id, prompt=[text_block("write note gamma")]
            )
            answered.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(run_prompt)
            with anyio.fail_after(10):
                await asked.wait()
            await conn.cancel(session_id=session_id)
            # The prompt is answered while the client's dialog is still open.
            with anyio.fail_after(10):
                await answered.wait()
            release.set()
    assert result["answer"].stop_reason == "cancelled"


async def test_one_prompt_at_a_time() -> None:
    client = RecordingClient()
    async with spawned(client) as conn:
        session_id = await open_session(conn)
        errors: list[RequestError] = []
        in_its_tool = anyio.Event()

        async def on_update(update: Any) -> None:
            if update.session_update == "tool_call":
                in_its_tool.set()

        client.on_update = on_update

        async def first() -> None:
            await conn.prompt(session_id=session_id, prompt=[text_block("slow tool")])

        async with anyio.create_task_group() as tg:
            tg.start_soon(first)
            with anyio.fail_after(10):
                await in_its_tool.wait()  # the first prompt is running
            try:
                await conn.prompt(session_id=session_id, prompt=[text_block("plain")])
            except RequestError as exc:
                errors.append(exc)
            await conn.cancel(session_id=session_id)
    assert len(errors) == 1
    assert errors[0].code == -32600
    assert "already has a prompt running" in str(errors[0])


async def test_a_mislabelled_image_and_an_unknown_session() -> None:
    client = RecordingClient()
    async with spawned(client) as conn:
        session_id = await open_session(conn)
        with pytest.raises(RequestError) as image:
            await conn.prompt(
                session_id=session_id,
                prompt=[
                    text_block("look"),
                    schema.ImageContentBlock(type="image", data="AA==", mime_type="image/png"),
                ],
            )
        with pytest.raises(RequestError) as unknown:
            await conn.prompt(session_id="sess_nope", prompt=[text_block("hi")])
        with pytest.raises(RequestError) as load_unknown:
            await conn.load_session(cwd="/tmp", session_id="sess_nope", mcp_servers=[])
        ok = await conn.prompt(session_id=session_id, prompt=[text_block("plain still fine")])
    # Images are taken (docs/attachments.md); two bytes that are no PNG are refused as such.
    assert image.value.code == -32602
    assert "message 1, part 2: the image part is labelled image/png" in str(image.value)
    assert unknown.value.code == load_unknown.value.code == -32002
    assert "sess_nope" in str(unknown.value)
    assert ok.stop_reason == "end_turn"


async def test_failed_run_is_a_jsonrpc_error() -> None:
    client = RecordingClient()
    async with spawned(client) as conn:
        session_id = await open_session(conn)
        with pytest.raises(RequestError) as failed:
            await conn.prompt(session_id=session_id, prompt=[text_block("provider error now")])
    assert failed.value.code == -32603
    assert "the scripted model lost its connection" in str(failed.value)
    assert failed.value.data["runId"].startswith("run_")


async def test_load_in_a_new_process_replays_history(tmp_path: Path) -> None:
    env = agent_env(LOOPGATE_JOURNAL=f"sqlite:{tmp_path / 'journal.db'}")
    first = RecordingClient()
    async with spawned(first, env=env) as conn:
        session_id = await open_session(conn, cwd=str(tmp_path))
        await conn.prompt(session_id=session_id, prompt=[text_block("one tool: 4 and 5")])
        await conn.prompt(session_id=session_id, prompt=[text_block("plain thanks")])
    live = [dump(u) for _, u in first.updates]

    second = RecordingClient()
    async with spawned(second, env=env) as conn:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        listed = await conn.list_sessions(cwd=str(tmp_path))
        loaded = await conn.load_session(cwd=str(tmp_path), session_id=session_id, mcp_servers=[])
        # The rebuilt history reaches the model: a third prompt continues the session.
        third = await conn.prompt(session_id=session_id, prompt=[text_block("plain more")])
    assert [s.session_id for s in listed.sessions] == [session_id]
    assert listed.sessions[0].title == "one tool: 4 and 5"
    assert loaded.config_options
    second.check_all_updates()
    replayed = [dump(u) for _, u in second.updates]
    users = [u for u in replayed if u["sessionUpdate"] == "user_message_chunk"]
    assert [u["content"]["text"] for u in users] == ["one tool: 4 and 5", "plain thanks"]
    # Everything the first client saw live comes back, in order, after each user message.
    without_users = [u for u in replayed if u["sessionUpdate"] != "user_message_chunk"]
    assert without_users[: len(live)] == live
    assert third.stop_reason == "end_turn"


async def test_resume_list_and_close() -> None:
    client = RecordingClient()
    async with spawned(client) as conn:
        session_id = await open_session(conn, cwd="/work")
        await conn.prompt(session_id=session_id, prompt=[text_block("plain hi")])
        empty = await conn.new_session(cwd="/elsewhere", mcp_servers=[])
        listed = await conn.list_sessions()
        only_work = await conn.list_sessions(cwd="/work")
        resumed = await conn.resume_session(cwd="/work", session_id=session_id)
        await conn.close_session(session_id=empty.session_id)
        after_close = await conn.list_sessions(cwd="/elsewhere")
    assert {s.session_id for s in listed.sessions} == {session_id, empty.session_id}
    assert [s.session_id for s in only_work.sessions] == [session_id]
    assert resumed.config_options
    assert after_close.sessions == []
    assert not [u for _, u in client.updates if u.session_update == "user_message_chunk"]
