"""Each plug (Python, a Python thread, HTTP, stdio) hands the loop the attachments' bytes
intact: the sample loop answers with their SHA-256. HTTP and stdio loops cannot declare what
they take, so the operator does (``accepts``)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.attachments.support import NOTES_B64, PNG_B64, answer_text, notes_line, png_line
from tests.plugs.plugs import PLUGS, plugged_gateway


@pytest.fixture(scope="module", params=PLUGS)
def gateway(request: pytest.FixtureRequest) -> Iterator[str]:
    with plugged_gateway(request.param, accepts=["image", "file"]) as (base, _):
        yield base


def test_the_loop_gets_the_bytes_intact(gateway: str) -> None:
    content = [
        {"type": "text", "text": "hash these"},
        {"type": "image", "media_type": "image/png", "data": PNG_B64},
        {"type": "file", "media_type": "text/plain", "data": NOTES_B64, "name": "notes.txt"},
    ]
    run = httpx.post(
        f"{gateway}/v1/runs", json={"input": [{"role": "user", "content": content}]}
    ).json()
    assert answer_text(gateway, run["id"]).splitlines() == [png_line(), notes_line()]
