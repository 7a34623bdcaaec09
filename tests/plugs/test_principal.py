"""The loop knows who asked: each plug (Python, HTTP, stdio) and the reference loop's tools see
the request's principal — alice's subject and tenant when her key starts the run, the machine's
own user (``local``) on a gateway without credentials — and never the credential."""

from __future__ import annotations

import json
import re
import shlex
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from loopgate.contracts.loop import LOCAL_LOOP_PRINCIPAL, LoopPrincipal
from loopgate.contracts.messages import Message, ToolCall
from loopgate.gateway.reference.core import CoreLoop
from loopgate.gateway.reference.hooks import NoHooks
from loopgate.gateway.reference.scripted import ScriptedProvider
from loopgate.gateway.reference.tools import DemoTools
from loopgate.gateway.reference.types import LoopContext, ToolResult
from tests.fakes.servers import serve_app
from tests.gateway.harness import REPO, running_gateway
from tests.gateway.sse_client import envelopes, read_stream
from tests.identity import principals
from tests.identity.principals import secret_of
from tests.plugs.whoami import http_app

PLUGS = ("python", "python-thread", "http", "stdio")
STDIO = shlex.join([sys.executable, "-m", "tests.plugs.whoami"])
LOCAL = {"subject": "local", "tenant": "default", "scopes": ["admin"], "name": "local user"}


@contextmanager
def whoami_gateway(plug: str, **settings: Any) -> Iterator[str]:
    """A real gateway whose loop is the whoami loop of ``plug``; yields its base URL."""
    if plug == "http":
        with (
            serve_app(http_app()) as loop_base,
            running_gateway(loop_url=f"{loop_base}/loop", **settings) as (base, _),
        ):
            yield base
        return
    plugged: dict[str, Any] = {
        "python": {"loop": "tests.plugs.whoami:python_loop"},
        "python-thread": {"loop": "tests.plugs.whoami:python_loop", "loop_runner": "thread"},
        "stdio": {"loop_cmd": STDIO},
    }[plug]
    with running_gateway(**plugged, **settings) as (base, _):
        yield base


def ask(base: str, key: principals.TestKey | None = None) -> dict[str, Any]:
    """Start a run (as ``key``'s principal) and read what the loop answered."""
    headers = key.headers if key is not None else {}
    started = httpx.post(f"{base}/v1/runs", json={"input": "who?"}, headers=headers, timeout=10)
    assert started.status_code == 201, started.text
    events = envelopes(read_stream(base, started.json()["id"], headers=headers))
    assert events[-1]["data"] == {"status": "completed", "reason": "stop"}, events
    text = "".join(e["data"]["delta"] for e in events if e["kind"] == "content_delta")
    answer: dict[str, Any] = json.loads(text)
    return answer


@pytest.mark.parametrize("plug", PLUGS)
def test_the_loop_sees_the_key_holder_and_never_the_key(plug: str, tmp_path: Path) -> None:
    keys = principals.write_test_keys(tmp_path / "keys.json")
    with whoami_gateway(plug, keys_file=str(tmp_path / "keys.json")) as base:
        alice = ask(base, keys["alice"])
        bob = ask(base, keys["bob"])
    assert alice["principal"] == {
        "subject": "alice",
        "tenant": "acme",
        "scopes": ["run"],
        "name": "alice",
        "via": "key",
    }
    assert (bob["principal"]["subject"], bob["principal"]["tenant"]) == ("bob", "globex")
    for person, seen in (("alice", alice), ("bob", bob)):
        key = keys[person].key
        secret = secret_of(key)
        # The whole request the loop was handed (and an HTTP loop's headers) holds neither the
        # key nor its secret part.
        assert key not in seen["received"] and secret not in seen["received"]
        assert '"principal"' in seen["received"]


@pytest.mark.parametrize("plug", PLUGS)
def test_without_credentials_the_loop_sees_the_local_user(plug: str) -> None:
    with whoami_gateway(plug) as base:
        seen = ask(base)
    assert seen["principal"] == {**LOCAL, "via": "local"}


def test_a_reference_loop_tool_sees_the_principal(tmp_path: Path) -> None:
    """A ``--tools`` function taking the LoopContext reads ``ctx.principal`` to authorise; the
    scripted model's "client tool" scenario calls the first tool that is not a demo tool."""
    keys = principals.write_test_keys(tmp_path / "keys.json")
    settings = {
        "keys_file": str(tmp_path / "keys.json"),
        "tools": ["tests.plugs.whoami"],
        "demo_tools": False,
    }
    with running_gateway(**settings) as (base, _):
        results = {}
        for person in ("alice", "root"):
            key = keys[person]
            started = httpx.post(
                f"{base}/v1/runs",
                json={"input": "client tool: who is this"},
                headers=key.headers,
                timeout=10,
            )
            assert started.status_code == 201, started.text
            events = envelopes(read_stream(base, started.json()["id"], headers=key.headers))
            (result,) = [e["data"] for e in events if e["kind"] == "tool_call_result"]
            assert result["name"] == "who_is_asking" and result["success"] is True, result
            results[person] = json.loads(result["resultPreview"])
    assert results == {
        "alice": {"subject": "alice", "tenant": "acme"},
        "root": {"subject": "root", "tenant": "ops"},
    }


def test_the_tool_in_auth_md_answers_from_the_callers_tenant(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/auth.md's ``team_tools.py``, as written, served to alice and bob."""
    section = (REPO / "docs" / "auth.md").read_text().split("## What the loop learns", 1)[1]
    (module,) = re.findall(r"```python\n(# team_tools\.py.*?)```", section, re.S)
    (tmp_path / "team_tools.py").write_text(module)
    monkeypatch.syspath_prepend(str(tmp_path))
    keys = principals.write_test_keys(tmp_path / "keys.json")
    settings = {"keys_file": str(tmp_path / "keys.json"), "tools": ["team_tools"]}
    answers = {}
    with running_gateway(**settings, demo_tools=False) as (base, _):
        for person in ("alice", "bob"):
            key = keys[person]
            # The scripted model's "client tool" scenario calls the tool with the prompt's
            # first words as its topic: "client tool launch".
            started = httpx.post(
                f"{base}/v1/runs",
                json={"input": "client tool: launch"},
                headers=key.headers,
                timeout=10,
            )
            assert started.status_code == 201, started.text
            events = envelopes(read_stream(base, started.json()["id"], headers=key.headers))
            (result,) = [e["data"] for e in events if e["kind"] == "tool_call_result"]
            answers[person] = result["resultPreview"]
    assert answers == {
        "alice": "launch on Friday",
        "bob": "globex has no notes on client tool launch",
    }


@pytest.mark.anyio
async def test_the_reference_loops_hooks_and_tools_see_the_turns_principal(
    tmp_path: Path,
) -> None:
    """Every LoopContext of a turn (each hook call, each tool call) carries the principal the
    CoreLoop was made for; one made without one runs for the machine's own user."""
    seen: list[tuple[str, LoopPrincipal]] = []

    class Watch(NoHooks):
        def pre_step(self, ctx: LoopContext) -> None:
            seen.append(("pre_step", ctx.principal))

        def post_tool_result(self, ctx: LoopContext, call: ToolCall, result: ToolResult) -> None:
            seen.append((f"tool {call.name}", ctx.principal))

    alice = LoopPrincipal(subject="alice", tenant="acme", scopes=("run",), via="key")
    for principal in (alice, None):
        seen.clear()
        extra = {} if principal is None else {"principal": principal}
        loop = CoreLoop(ScriptedProvider(delay_s=0), DemoTools(tmp_path), hooks=Watch(), **extra)
        events: list[str] = []

        async def sink(kind: str, data: dict[str, Any], events: list[str] = events) -> None:
            events.append(kind)

        await loop.run_turn([Message(role="user", content="What time is it?")], sink)
        assert "tool clock" in [what for what, _ in seen] and len(seen) >= 3, seen
        assert {who for _, who in seen} == {principal or LOCAL_LOOP_PRINCIPAL}
        assert events[-1] == "completion"
