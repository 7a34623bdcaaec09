"""What a loop takes, declared by the operator (``accepts``, ``--accepts``) over what the loop
says, and a declaration with an unknown kind refused at start-up, not at each run."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest
from openai import OpenAI

from loopgate.gateway.config_file import ConfigError, parse_config, settings_from
from loopgate.gateway.plugs.python import python_loop
from tests.attachments.support import PNG_B64
from tests.gateway.harness import running_gateway

IMAGE = [
    {"type": "text", "text": "see"},
    {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_B64}"}},
]


def test_the_operators_accepts_wins_over_the_loops_silence() -> None:
    with running_gateway(loop="tests.attachments.loops:text_loop", accepts=["image"]) as (base, _):
        client = OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0)
        answer = client.chat.completions.create(
            model="loopgate", messages=[{"role": "user", "content": IMAGE}]
        )
    assert answer.choices[0].message.content == "you said: see\n[image (image/png, 69 bytes)]"


def test_an_unknown_kind_on_the_command_line_is_a_usage_error() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "loopgate", "run", "--accepts", "image,video", "hi"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "unknown kind 'video'" in done.stderr


def test_a_python_loop_declaring_an_unknown_kind_fails_to_plug() -> None:
    async def loop(ctx: Any) -> AsyncIterator[dict[str, Any]]:
        yield {"kind": "completion", "data": {"status": "completed", "reason": "stop"}}

    loop.accepts = {"image", "pictures"}  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="unknown part kind 'pictures'"):
        python_loop(loop, "typo")
    loop.accepts = ["image"]  # type: ignore[attr-defined]
    assert python_loop(loop, "fine").accepts == {"image"}  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "text",
    [
        'accepts = ["image", "smell"]\nloop_url = "http://127.0.0.1:9/"\n',
        '[agents.eyes]\nloop_url = "http://127.0.0.1:9/"\naccepts = ["image", "smell"]\n',
    ],
)
def test_a_config_with_an_unknown_kind_is_refused_naming_it(text: str) -> None:
    with pytest.raises(ConfigError) as refused:
        settings_from({}, None, parse_config(text, "loopgate.toml"))
    assert any("unknown part kind 'smell'" in p for p in refused.value.problems)
