"""Attachments from the real web clients (Node): @ag-ui/client's HttpAgent with image and
document parts, the ``ai`` package's Chat with ``sendMessage({files})``, to a plugged loop that
hashes what it gets; a second message on the thread still carries them; a text-only agent
refuses them in the protocol's own way."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from loopgate.gateway.agents.spec import AgentSpec
from tests.attachments.support import NOTES_B64, PNG_B64, notes_line, png_line
from tests.gateway.harness import running_gateway
from tests.node_clients import run_script

LOOPS = "tests.attachments.loops"


@pytest.fixture(scope="module")
def seen() -> Iterator[dict[str, Any]]:
    agents = {"plain": AgentSpec(loop=f"{LOOPS}:text_loop")}
    with running_gateway(loop=f"{LOOPS}:loop", agents=agents) as (base, _):
        yield run_script("attachments.mjs", base, PNG_B64, NOTES_B64, timeout=120)


def test_agui_client_image_and_document_reach_the_loop(seen: dict[str, Any]) -> None:
    agui = seen["agui"]
    assert agui["failed"] is None
    assert agui["first"].splitlines()[:3] == [png_line(), notes_line(), "text: what is this?"]
    # The client sends its history back: the first message's attachments come with it.
    assert agui["second"].splitlines()[-1] == "earlier attachments: 2"


def test_agui_client_to_a_text_only_agent_is_refused_naming_the_kind(seen: dict[str, Any]) -> None:
    refused = seen["aguiRefused"]
    assert "does not take image parts" in (refused["failed"] or "") + str(refused["terminal"])


def test_vercel_chat_files_reach_the_loop(seen: dict[str, Any]) -> None:
    vercel = seen["vercel"]
    assert vercel["error"] is None
    assert vercel["sentParts"] == ["file", "file", "text"]
    first, second = vercel["answers"]
    assert first.splitlines()[:3] == [png_line(), notes_line(), "text: what is this?"]
    assert second.splitlines()[-1] == "earlier attachments: 2"


def test_vercel_chat_to_a_text_only_agent_is_refused_naming_the_kind(seen: dict[str, Any]) -> None:
    refused = seen["vercelRefused"]
    assert refused["status"] == 422
    assert "does not take image parts" in refused["error"]["message"]
