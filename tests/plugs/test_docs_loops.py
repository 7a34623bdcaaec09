"""The examples of docs/loops.md run as written."""

from __future__ import annotations

import json
import re
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from tests.gateway.harness import REPO

DOC = (REPO / "docs" / "loops.md").read_text()


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC, re.S)


def stream(client: TestClient, prompt: str) -> list[dict[str, Any]]:
    run = client.post("/v1/runs", json={"input": prompt}).json()
    with client.stream("GET", f"/v1/runs/{run['id']}/events") as response:
        return [
            json.loads(line[len("data: ") :])
            for line in response.iter_lines()
            if line.startswith("data: ")
        ]


def test_the_echo_loop_and_the_embedding_example(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    my_loop, _ask, _slow, embed, _tools = python_blocks()
    assert my_loop.startswith("# my_loop.py")
    (tmp_path / "my_loop.py").write_text(my_loop)
    monkeypatch.syspath_prepend(str(tmp_path))
    served: dict[str, Any] = {}
    fake_uvicorn = types.ModuleType("uvicorn")
    fake_uvicorn.run = lambda app, **kw: served.update(app=app, **kw)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "uvicorn", fake_uvicorn)
    exec(compile(embed, "docs/loops.md", "exec"), {})
    assert (served["host"], served["port"]) == ("127.0.0.1", 8000)
    # The gateway serves loopback Host names only (DNS rebinding guard): not "testserver".
    with TestClient(served["app"], base_url="http://localhost") as client:
        events = stream(client, "hi there")
    text = "".join(e["data"]["delta"] for e in events if e["kind"] == "content_delta")
    assert text == "You said: hi there "
    assert events[-1]["data"] == {"status": "completed", "reason": "stop"}


def test_the_blocking_loop_example_in_a_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from loopgate.gateway.app import create_app
    from loopgate.gateway.settings import Settings

    _loop, _ask, slow, *_ = python_blocks()
    assert slow.startswith("# slow_loop.py")
    assert "loopgate serve --loop slow_loop:loop --loop-runner thread" in DOC
    (tmp_path / "slow_loop.py").write_text(slow)
    monkeypatch.syspath_prepend(str(tmp_path))
    app = create_app(Settings(loop="slow_loop:loop", loop_runner="thread"))
    with TestClient(app, base_url="http://localhost") as client:
        events = stream(client, "hi")
    assert [e["kind"] for e in events] == ["stage_start", "content_delta", "completion"]
    assert events[-1]["data"] == {"status": "completed", "reason": "stop"}


def test_the_tools_module_example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from loopgate.gateway.tools import FunctionTools

    *_, my_tools = python_blocks()
    assert my_tools.startswith("# my_tools.py")
    (tmp_path / "my_tools.py").write_text(my_tools)
    monkeypatch.syspath_prepend(str(tmp_path))
    [spec] = FunctionTools.from_module("my_tools").specs()
    assert spec.name == "forecast" and spec.description.startswith("The weather ahead.")
    assert spec.parameters["properties"]["city"]["description"] == "Where."
    assert spec.parameters["required"] == ["city"]
