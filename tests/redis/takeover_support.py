"""Helpers of the takeover tests (tests/redis/test_takeover.py, tests/postgres/test_takeover.py):
a paced reference-loop run, read as clients read it, and its owner stopped mid-round."""

from __future__ import annotations

import json
import signal
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
from httpx_sse import connect_sse

from loopgate.contracts.messages import Message
from loopgate.gateway.reference.core import CoreLoop
from loopgate.gateway.reference.scripted import ScriptedProvider
from loopgate.gateway.reference.tools import DemoTools
from tests.gateway.sse_client import envelopes, read_stream
from tests.redis.test_instances import instances

# The scripted model's pace: each of its rounds takes a couple of seconds, so a kill that
# follows the client's sight of the second round's start lands well inside it.
PACED = {"LOOPGATE_SCRIPTED_DELAY_S": "0.08"}
# One tool round (calculate), then an answer that quotes the tool's result.
PROMPT = "Please work out 12 * 7 + 3 for me."


def whole_stream(base: str, run_id: str, after: int = 0) -> list[dict[str, Any]]:
    headers = {"last-event-id": str(after)} if after else None
    return envelopes(read_stream(base, run_id, headers=headers, timeout=60))


@contextmanager
def live(base: str, run_id: str) -> Iterator[Iterator[dict[str, Any]]]:
    """The run's events as a client reads them live, while the block lasts."""
    with (
        httpx.Client(base_url=base, timeout=60) as client,
        connect_sse(client, "GET", f"/v1/runs/{run_id}/events") as source,
    ):
        yield (json.loads(event.data) for event in source.iter_sse())


def stop_in_second_round(
    base: str,
    run_id: str,
    proc: subprocess.Popen[bytes] | None,
    sig: int = signal.SIGKILL,
    *,
    after_resumed: bool = False,
) -> list[dict[str, Any]]:
    """Read the run's stream from ``base`` until its second round (``after_resumed``: of the
    attempt after a ``run_resumed``) has streamed a few events, then send ``sig`` to ``proc``
    and wait for it to exit. Returns the events read."""
    seen: list[dict[str, Any]] = []
    marks = 0
    with live(base, run_id) as stream:
        for env in stream:
            seen.append(env)
            if env["kind"] == "run_resumed" and after_resumed:
                marks = 1
            elif env["kind"] == "stage_start" and env["data"].get("round") == 2:
                marks += 1
            if marks >= 1 + after_resumed and env["kind"] == "reasoning_delta":
                break
    assert seen[-1]["kind"] == "reasoning_delta", "the run ended before it could be stopped"
    if proc is not None:
        proc.send_signal(sig)
        proc.wait(30)
    return seen


def answer(envs: list[dict[str, Any]]) -> str:
    """The text of the run's last round: after its last ``completion{executing}`` or
    ``run_resumed``."""
    start = max(
        (
            i
            for i, e in enumerate(envs)
            if e["kind"] == "run_resumed"
            or (e["kind"] == "completion" and e["data"].get("status") == "executing")
        ),
        default=-1,
    )
    return "".join(e["data"]["delta"] for e in envs[start + 1 :] if e["kind"] == "content_delta")


def terminal(env: dict[str, Any]) -> bool:
    return env["kind"] == "completion" and env["data"].get("status") != "executing"


def uninterrupted_answer() -> str:
    """What the run answers when nothing stops it: the same turn of the scripted model (which
    answers the same to the same conversation), in this process."""

    async def turn() -> str:
        with tempfile.TemporaryDirectory() as workspace:
            loop = CoreLoop(ScriptedProvider(delay_s=0), DemoTools(Path(workspace)))
            events: list[dict[str, Any]] = []

            async def sink(kind: str, data: dict[str, Any]) -> None:
                events.append({"kind": kind, "data": data})

            await loop.run_turn([Message(role="user", content=PROMPT)], sink)
            return answer(events)

    return anyio.run(turn)


def check_resumed(base: str, run_id: str, before: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The client that saw ``before`` resumes on ``base`` (Last-Event-ID): the rest of the run,
    as attempt 2, which completes with the uninterrupted run's answer, and one terminal event."""
    rest = whole_stream(base, run_id, after=before[-1]["seq"])
    whole = before + rest
    assert [e["seq"] for e in whole] == list(range(1, len(whole) + 1))
    assert [e for e in whole if terminal(e)] == [whole[-1]]
    assert whole[-1]["data"]["status"] == "completed"
    resumed = [e for e in whole if e["kind"] == "run_resumed"]
    assert [e["data"] for e in resumed] == [{"attempt": 2, "afterSeq": resumed[0]["seq"] - 1}]
    # The redone round was asked with the first round's messages, rebuilt from the journal:
    # it answers as the uninterrupted run did.
    assert answer(whole) == uninterrupted_answer()
    assert whole_stream(base, run_id) == whole
    assert httpx.get(f"{base}/v1/runs/{run_id}").json()["status"] == "completed"
    return whole


def start(base: str, prompt: str = PROMPT) -> str:
    response = httpx.post(f"{base}/v1/runs", json={"input": prompt}, timeout=20)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def killed_owner_resumed(journal: str, *flags: str) -> None:
    """kill -9 of the instance running a reference-loop run, mid-round: the other finishes it.
    ``journal``: the shared journal (``flags``: a bus) with a short lease."""
    with instances(journal, 2, *flags, env=PACED) as procs:
        (a, proc_a), (b, _) = procs
        run_id = start(a)
        # A client of B that streams the run throughout, the takeover included.
        held: list[dict[str, Any]] = []
        follower = threading.Thread(target=lambda: held.extend(whole_stream(b, run_id)))
        follower.start()
        before = stop_in_second_round(b, run_id, proc_a)
        whole = check_resumed(b, run_id, before)
        follower.join(60)
        assert held == whole


def stopped_owner_hands_over(journal: str, *flags: str) -> None:
    """SIGTERM to the instance running a reference-loop run: the other finishes it (with a
    lease too long for a lapse to: only the hand-over moves it)."""
    with instances(journal, 2, *flags, env=PACED) as procs:
        (a, proc_a), (b, _) = procs
        run_id = start(a)
        before = stop_in_second_round(b, run_id, proc_a, signal.SIGTERM)
        assert proc_a.returncode == 143  # SIGTERM's exit status, after a graceful shutdown
        check_resumed(b, run_id, before)
