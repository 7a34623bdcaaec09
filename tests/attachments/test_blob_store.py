"""Attachments kept by reference in every journal (memory, SQLite, a real redis-server, a real
postgres): a thread continued three times with an image stores it once, and each run of the
thread gets the bytes intact; past the store's bound a run is refused whole; retention that
drops the runs drops the blob; a restarted SQLite gateway still has it."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from loopgate.gateway.journal.blobs import BlobStore
from loopgate.gateway.server import GatewayServer
from tests.attachments.support import PNG, PNG_B64, answer_text, png_line, sha
from tests.gateway.harness import running_gateway
from tests.postgres.conftest import postgres_server, postgres_url  # noqa: F401  (fixtures)
from tests.redis.conftest import redis_server, redis_url  # noqa: F401  (fixtures)
from tests.waiting import wait_until

LOOP = "tests.attachments.loops:thread_loop"
IMAGE = {"type": "image", "media_type": "image/png", "data": PNG_B64, "name": "dot.png"}
KEEP_RUNS = 4


@pytest.fixture(params=["memory", "sqlite", "redis", "postgres"])
def journal(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    kind = request.param
    if kind == "sqlite":
        return f"sqlite:{tmp_path / 'journal.db'}"
    if kind == "redis":
        return str(request.getfixturevalue("redis_url"))
    if kind == "postgres":
        return str(request.getfixturevalue("postgres_url"))
    return "memory"


def usage(spec: str, server: GatewayServer) -> tuple[int, int]:
    """Blobs in the journal's store, and their bytes, read as the store itself counts them
    (the durable ones on a link of their own)."""
    if spec == "memory":
        return asyncio.run(server.hub.journal.blobs.usage())
    if spec.startswith("sqlite:"):
        with sqlite3.connect(spec.removeprefix("sqlite:")) as conn:
            count, size = conn.execute(
                "SELECT COUNT(*), COALESCE(SUM(size), 0) FROM blobs"
            ).fetchone()
            # The counter the store checks its bound against is the blobs' sum.
            assert conn.execute("SELECT bytes FROM blob_usage").fetchone()[0] == size
            return int(count), int(size)
    return asyncio.run(_remote_usage(spec))


async def _remote_usage(spec: str) -> tuple[int, int]:
    store: BlobStore
    if spec.startswith("redis"):
        from loopgate.gateway.journal.redis_blobs import RedisBlobs
        from loopgate.gateway.journal.redis_link import RedisLink

        link = RedisLink(spec, max_events=1, max_age_s=1)
        await link.open()
        try:
            return await RedisBlobs(link).usage()
        finally:
            await link.close()
    from loopgate.gateway.journal.postgres_blobs import PostgresBlobs
    from loopgate.gateway.journal.postgres_link import PostgresLink

    pg = PostgresLink(spec)
    await pg.open()
    try:
        store = PostgresBlobs(pg)
        return await store.usage()
    finally:
        await pg.close()


def start(base: str, input: Any, thread_id: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"input": input}
    if thread_id is not None:
        body["thread_id"] = thread_id
    answer = httpx.post(f"{base}/v1/runs", json=body, timeout=30)
    assert answer.status_code == 201, answer.text
    run: dict[str, Any] = answer.json()
    return run


def image_of(base: str, run_id: str) -> bytes:
    """The first message's image as ``GET /v1/runs/{id}`` shows it."""
    import base64

    content = httpx.get(f"{base}/v1/runs/{run_id}", timeout=30).json()["input"][0]["content"]
    [image] = [part for part in content if part["type"] == "image"]
    return base64.b64decode(image["data"])


@pytest.fixture
def gateway(journal: str) -> Iterator[tuple[str, GatewayServer]]:
    with running_gateway(loop=LOOP, journal=journal, max_runs=KEEP_RUNS) as (base, server):
        yield base, server


def test_a_thread_continued_three_times_stores_its_image_once(
    journal: str, gateway: tuple[str, GatewayServer]
) -> None:
    base, server = gateway
    first = start(base, [{"role": "user", "content": [{"type": "text", "text": "see"}, IMAGE]}])
    assert answer_text(base, first["id"]) == png_line()
    last = first
    for turn in range(3):
        last = start(base, f"and now? ({turn})", first["thread_id"])
        # The loop got the earlier message's image back from the journal, byte for byte.
        assert answer_text(base, last["id"]) == png_line()
    assert usage(journal, server) == (1, len(PNG))
    assert sha(image_of(base, last["id"])) == sha(PNG)
    # Listed, a run shows its attachment by reference: the bytes are read for one run only.
    listed = httpx.get(f"{base}/v1/runs", params={"thread_id": first["thread_id"]}).json()
    part = listed["runs"][0]["input"][0]["content"][1]
    assert part["ref"] == f"sha256:{sha(PNG)}" and "data" not in part

    # Retention: other runs push the thread's four out (max_runs), and the blob goes too.
    for _ in range(KEEP_RUNS):
        answer_text(base, start(base, "plain")["id"])
    wait_until(lambda: usage(journal, server) == (0, 0), 20, "the thread's blob dropped")


def test_past_the_store_bound_a_run_is_refused_whole(journal: str, tmp_path: Path) -> None:
    other = PNG + b"another image"  # its signature is a PNG's: checked as one
    import base64

    settings = {"loop": LOOP, "journal": journal, "max_attachment_store_bytes": len(PNG) + 8}
    with running_gateway(**settings) as (base, server):
        first = start(base, [{"role": "user", "content": [IMAGE]}])
        answer_text(base, first["id"])
        again = start(base, [{"role": "user", "content": [IMAGE]}])  # stored already: fits
        answer_text(base, again["id"])
        bigger = {**IMAGE, "data": base64.b64encode(other).decode()}
        refused = httpx.post(
            f"{base}/v1/runs", json={"input": [{"role": "user", "content": [bigger]}]}
        )
        assert refused.status_code == 429
        assert "max_attachment_store_bytes" in refused.json()["detail"]
        assert "Traceback" not in refused.text
        assert usage(journal, server) == (1, len(PNG))
        runs = httpx.get(f"{base}/v1/runs").json()["runs"]
        assert {r["id"] for r in runs} == {first["id"], again["id"]}


@pytest.mark.parametrize("journal", ["sqlite"], indirect=True)
def test_a_restarted_sqlite_gateway_still_has_the_attachment(journal: str) -> None:
    with running_gateway(loop=LOOP, journal=journal) as (base, _):
        first = start(base, [{"role": "user", "content": [{"type": "text", "text": "a"}, IMAGE]}])
        answer_text(base, first["id"])
    with running_gateway(loop=LOOP, journal=journal) as (base, server):
        assert sha(image_of(base, first["id"])) == sha(PNG)
        later = start(base, "still there?", first["thread_id"])
        assert answer_text(base, later["id"]) == png_line()
        assert usage(journal, server) == (1, len(PNG))


@pytest.mark.anyio
@pytest.mark.parametrize("journal", ["memory", "sqlite"], indirect=True)
async def test_a_start_refused_after_its_blobs_were_kept_leaves_none(
    journal: str, tmp_path: Path
) -> None:
    """The thread's claim refuses the second run (ThreadBusy) after its image was stored: the
    image goes again, nothing of that run is left."""
    from loopgate.contracts.messages import Message
    from loopgate.contracts.parts import ImagePart
    from loopgate.contracts.ports import StartRun, ThreadBusy
    from loopgate.gateway.app import build_hub
    from loopgate.gateway.settings import Settings

    # The scripted model paced slowly: the first run holds its thread while the second starts.
    settings = Settings(scripted_delay_s=0.5, workspace=str(tmp_path), journal=journal)
    image = [Message(role="user", content=[ImagePart(media_type="image/png", data=PNG_B64)])]
    async with build_hub(settings) as hub:
        await hub.start(StartRun(thread_id="t", exclusive=True, input="first"))
        with pytest.raises(ThreadBusy):
            await hub.start(StartRun(thread_id="t", exclusive=True, input=image))
        assert await hub.journal.blobs.usage() == (0, 0)
        assert len(await hub.list_runs(thread_id="t")) == 1


def test_a_big_image_is_stored_and_read_back_off_the_event_loop_intact() -> None:
    """Past THREAD_ABOVE_CHARS, storing by reference and resolving run in worker threads."""
    import base64

    from loopgate.gateway.hub.attachments import THREAD_ABOVE_CHARS

    big = PNG + bytes(range(256)) * (THREAD_ABOVE_CHARS // 256)
    image = {**IMAGE, "data": base64.b64encode(big).decode()}
    settings = {"loop": LOOP, "max_body_bytes": 4 << 20, "max_attachment_bytes": 2 << 20}
    with running_gateway(**settings) as (base, server):
        first = start(base, [{"role": "user", "content": [image]}])
        answer_text(base, first["id"])
        later = start(base, "and this?", first["thread_id"])
        assert answer_text(base, later["id"]) == f"image image/png {sha(big)}"
        assert sha(image_of(base, later["id"])) == sha(big)
        assert usage("memory", server) == (1, len(big))
