"""A view of another instance's run let go while a reader was on its way to it (issue 33, R3).

An instance serves a stream of a run it does not own from a *view* (gateway.hub.remote),
loaded when a client asks and let go by the sweep once nobody here watches it. Loading awaits
Redis; a sweep in that window let the view go before its reader was attached, and the reader
then followed a run nothing fed any more: its stream crashed (``IndexError`` on the emptied
view) or waited forever, either way without a terminal event — about once in 9,000 streams.

Here Redis holds the load in that window for as long as the test needs: ``CLIENT PAUSE …
WRITE`` holds the wake-up a new view sends the instance's follower (``CLIENT LIST`` shows it
held), MONITOR shows two sweeps of that instance go by, and the pause is lifted. The reader
must get the whole run.
"""

from __future__ import annotations

import threading
import time
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import redis

from tests.gateway.sse_client import envelopes, read_stream
from tests.redis.test_instances import deltas, first_events, instances, push

DEADLINE_S = 30.0


def held_wake(server: redis.Redis, prefix: str) -> str:
    """The name of the instance whose wake-up write (``XADD``) the pause holds."""
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        for client in server.client_list():
            if client["cmd"] == "xadd" and "b" in client["flags"]:
                assert client["name"].startswith(f"{prefix}:")
                return str(client["name"])
        time.sleep(0.01)
    raise AssertionError("no instance's wake-up was held")


def wait_for_sweeps(monitor: Any, server: redis.Redis, name: str, prefix: str, count: int) -> None:
    """Read MONITOR until connections named ``name`` have started ``count`` sweeps (each
    begins its retention pass with ``ZRANGE <prefix>:runs``)."""
    names: dict[str, str] = {}
    deadline = time.monotonic() + DEADLINE_S
    while count:
        assert time.monotonic() < deadline, "the instance's sweep never came"
        seen = monitor.next_command()
        if not seen["command"].startswith(f"ZRANGE {prefix}:runs 0 "):
            continue
        port = seen["client_port"]
        if port not in names:
            names.update((c["addr"].rsplit(":", 1)[1], c["name"]) for c in server.client_list())
        if names.get(port) == name:
            count -= 1


class Reader(threading.Thread):
    """A client reading a run's whole stream from one instance, in the background."""

    def __init__(self, base: str, run_id: str) -> None:
        super().__init__(daemon=True)
        self.base, self.run_id = base, run_id
        self.seen: list[dict[str, Any]] = []
        self.error: Exception | None = None
        self.start()

    def run(self) -> None:
        try:
            self.seen = envelopes(read_stream(self.base, self.run_id, timeout=60))
        except Exception as exc:  # a truncated body, a refusal: the test says which
            self.error = exc

    def result(self) -> list[dict[str, Any]]:
        self.join(DEADLINE_S)
        assert not self.is_alive(), "the stream never ended"
        assert self.error is None, repr(self.error)
        return self.seen


def test_a_view_let_go_while_its_reader_attaches_still_serves_the_whole_run(
    redis_url: str, redis_server: str
) -> None:
    prefix = parse_qs(urlsplit(redis_url).query)["prefix"][0]
    server = redis.Redis.from_url(redis_server, socket_timeout=DEADLINE_S)
    with instances(redis_url, 2) as procs:
        (a, _), (b, _) = procs
        # B follows one run already: its follower is blocked reading, so a new view wakes it
        # with a write (which the pause below holds).
        held = httpx.post(f"{a}/v1/runs", json={"source": "ingest"}).json()["id"]
        push(a, held, *deltas(0, 1))
        holder = Reader(b, held)
        run_id = httpx.post(f"{a}/v1/runs", json={"source": "ingest"}).json()["id"]
        push(a, run_id, *deltas(0, 5))
        assert len(first_events(b, held, 1)) == 1  # B's view of `held` is up
        server.execute_command("CLIENT", "PAUSE", int(DEADLINE_S * 1000), "WRITE")
        try:
            reader = Reader(b, run_id)
            name = held_wake(server, prefix)  # B loaded the view; its reader waits on Redis
            with server.monitor() as monitor:
                # Two, so that one certainly began after the view was there.
                wait_for_sweeps(monitor, server, name, prefix, 2)
        finally:
            server.execute_command("CLIENT", "UNPAUSE")
        push(a, run_id, *deltas(5, 10), {"kind": "completion", "data": {"status": "completed"}})
        seen = reader.result()
        assert [e["seq"] for e in seen] == list(range(1, 12))
        assert seen[-1]["data"] == {"status": "completed"}
        push(a, held, {"kind": "completion", "data": {"status": "completed"}})
        assert [e["seq"] for e in holder.result()] == [1, 2]
