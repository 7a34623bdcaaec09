"""Ownership on every web front end, driven by each protocol's real clients (docs/auth.md).

Four principals from one keys file (tests/identity/principals.py): alice (tenant acme) and bob
(globex) may run, root is an admin, viewer (acme) may only read. alice starts runs and threads
on each front end; bob meets every one of them as "not found" in that protocol's own shape,
and the very answer a never-existing id gets (each pair is compared, the ids put aside); root
sees and controls all; viewer may start nothing and sees none of them.

One thing no front end can hide: a client that *chooses* a thread id (AG-UI's threadId, the
Vercel chat id, ``thread_id``) learns that someone else has it, since a new thread of that id
cannot be made for it. Such an id is a random UUID in the clients; someone else's is refused
as not found, a fresh one starts a thread.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from httpx_sse import connect_sse
from websockets.exceptions import InvalidStatus
from websockets.sync import client as ws_client

from tests.agui.node_client import run_script
from tests.browser.support import page_server, run_browser
from tests.gateway.harness import running_gateway
from tests.identity.principals import TestKey as Key
from tests.identity.principals import write_test_keys


@dataclass
class Gate:
    base: str
    alice: Key
    bob: Key
    root: Key
    viewer: Key

    def http(self) -> httpx.Client:
        return httpx.Client(base_url=self.base, timeout=20)

    def config(self) -> dict[str, Any]:
        """What the Node scripts are told: the gateway and each principal's key."""
        keys = {k.name: k.key for k in (self.alice, self.bob, self.root, self.viewer)}
        return {"base": self.base, "keys": keys}


@pytest.fixture(scope="module")
def gate(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gate]:
    folder: Path = tmp_path_factory.mktemp("matrix-web")
    keys = write_test_keys(folder / "keys.json")
    with running_gateway(keys_file=str(folder / "keys.json"), scripted_delay_s=0.002) as (base, _):
        yield Gate(base, keys["alice"], keys["bob"], keys["root"], keys["viewer"])


def ghost(prefix: str) -> str:
    """An id that never existed."""
    return f"{prefix}_{uuid.uuid4().hex[:16]}"


def same_answer(theirs: httpx.Response, their_id: str, none: httpx.Response, no_id: str) -> None:
    """Someone else's id and a never-existing one get one answer: status, type and body (each
    with its own id in it)."""
    assert theirs.status_code == none.status_code, (theirs.text, none.text)
    assert theirs.headers.get("content-type") == none.headers.get("content-type")
    assert theirs.text.replace(their_id, "ID") == none.text.replace(no_id, "ID"), (
        theirs.text,
        none.text,
    )


def kinds_until(
    http: httpx.Client, run_id: str, key: Key, stop: str | None = None
) -> list[dict[str, Any]]:
    """The run's envelopes as ``key``'s stream carries them, up to the first of kind ``stop``,
    else to the stream's end (the run's)."""
    seen: list[dict[str, Any]] = []
    with connect_sse(http, "GET", f"/v1/runs/{run_id}/events", headers=key.headers) as source:
        assert source.response.status_code == 200
        for event in source.iter_sse():
            envelope = json.loads(event.data)
            seen.append(envelope)
            if envelope["kind"] == stop:
                break
    return seen


# --- the native API ---------------------------------------------------------------------------


def test_native_api_runs(gate: Gate) -> None:
    alice, bob, root, viewer = gate.alice, gate.bob, gate.root, gate.viewer
    with gate.http() as http:
        started = http.post("/v1/runs", json={"input": "write note please"}, headers=alice.headers)
        assert started.status_code == 201, started.text
        run_id, thread_id = started.json()["id"], started.json()["thread_id"]
        asked = kinds_until(http, run_id, alice, "permission_request")[-1]
        assert asked["kind"] == "permission_request"
        request_id = asked["data"]["requestId"]
        nobody = ghost("run")

        def attempts(rid: str) -> list[tuple[str, str, dict[str, Any]]]:
            return [
                ("GET", f"/v1/runs/{rid}", {}),
                ("GET", f"/v1/runs/{rid}/events", {"params": {"stream": "false"}}),
                ("GET", f"/v1/runs/{rid}/events", {}),
                ("GET", f"/v1/runs/{rid}/events", {"headers": {"last-event-id": "1"}}),
                ("POST", f"/v1/runs/{rid}/cancel", {}),
                ("POST", f"/v1/runs/{rid}/steer", {"json": {"content": "stop that"}}),
                (
                    "POST",
                    f"/v1/runs/{rid}/respond",
                    {"json": {"requestId": request_id, "decision": "allow_once"}},
                ),
                ("POST", f"/v1/runs/{rid}/events", {"content": b'{"kind": "x", "data": {}}\n'}),
            ]

        for who in (bob, viewer):
            for (method, path, kw), (_, no_path, no_kw) in zip(
                attempts(run_id), attempts(nobody), strict=True
            ):
                headers = {**who.headers, **kw.pop("headers", {}), **no_kw.pop("headers", {})}
                theirs = http.request(method, path, headers=headers, **kw)
                none = http.request(method, no_path, headers=headers, **no_kw)
                assert theirs.status_code == 404, (who.name, method, path, theirs.text)
                same_answer(theirs, run_id, none, nobody)
            # Listed nowhere: not among all runs, not under the thread's (an unknown thread's
            # list is as empty).
            assert http.get("/v1/runs", headers=who.headers).json()["runs"] == []
            for tid in (thread_id, ghost("thread")):
                listed = http.get("/v1/runs", params={"thread_id": tid}, headers=who.headers)
                assert listed.status_code == 200 and listed.json() == {"runs": []}

        # bob cannot continue alice's thread: it is not found for him (a fresh id starts one).
        cont = http.post(
            "/v1/runs", json={"input": "more", "thread_id": thread_id}, headers=bob.headers
        )
        assert cont.status_code == 404, cont.text
        assert cont.json()["detail"] == f"no thread with id {thread_id!r}"
        # viewer may start nothing, on any thread.
        for body in ({"input": "hi"}, {"input": "more", "thread_id": thread_id}):
            refused = http.post("/v1/runs", json=body, headers=viewer.headers)
            assert refused.status_code == 403, refused.text
            assert refused.headers["content-type"] == "application/problem+json"

        # The admin sees and controls alice's run; alice controls her own.
        assert http.get(f"/v1/runs/{run_id}", headers=root.headers).status_code == 200
        assert run_id in [r["id"] for r in http.get("/v1/runs", headers=root.headers).json()["runs"]]
        listed = http.get("/v1/runs", params={"thread_id": thread_id}, headers=alice.headers)
        assert [r["id"] for r in listed.json()["runs"]] == [run_id]
        steered = http.post(
            f"/v1/runs/{run_id}/steer", json={"content": "be brief"}, headers=alice.headers
        )
        assert steered.status_code == 202, steered.text
        answered = http.post(
            f"/v1/runs/{run_id}/respond",
            json={"requestId": request_id, "decision": "allow_once"},
            headers=root.headers,
        )
        assert answered.status_code == 202, answered.text
        rest = kinds_until(http, run_id, root)
        assert rest[-1]["kind"] == "completion"
        assert http.get(f"/v1/runs/{run_id}", headers=alice.headers).json()["state"] == "finished"
        # Finished, it is as much not found for bob: with a cursor at its end too.
        for headers in ({}, {"last-event-id": str(rest[-1]["seq"])}):
            theirs = http.get(f"/v1/runs/{run_id}/events", headers={**bob.headers, **headers})
            none = http.get(f"/v1/runs/{nobody}/events", headers={**bob.headers, **headers})
            assert theirs.status_code == 404
            same_answer(theirs, run_id, none, nobody)


def test_native_api_thread_records(gate: Gate) -> None:
    alice, bob, root, viewer = gate.alice, gate.bob, gate.root, gate.viewer
    with gate.http() as http:
        thread_id = ghost("th")
        made = http.post("/v1/threads", json={"id": thread_id}, headers=alice.headers)
        assert made.status_code == 201, made.text
        assert made.json()["owner"] == {"subject": "alice", "tenant": "acme"}
        nobody = ghost("th")
        for who in (bob, viewer):
            for method in ("GET", "DELETE"):
                theirs = http.request(method, f"/v1/threads/{thread_id}", headers=who.headers)
                none = http.request(method, f"/v1/threads/{nobody}", headers=who.headers)
                assert theirs.status_code == 404, theirs.text
                same_answer(theirs, thread_id, none, nobody)
            listed = http.get("/v1/threads", headers=who.headers).json()["threads"]
            assert thread_id not in [t["id"] for t in listed]
        # A recorded thread with no runs yet is alice's as much: bob cannot start on it.
        cont = http.post("/v1/runs", json={"input": "hi", "thread_id": thread_id}, headers=bob.headers)
        assert cont.status_code == 404, cont.text
        assert http.post("/v1/threads", headers=viewer.headers).status_code == 403
        for who in (alice, root):
            assert http.get(f"/v1/threads/{thread_id}", headers=who.headers).status_code == 200
            listed = http.get("/v1/threads", headers=who.headers).json()["threads"]
            assert thread_id in [t["id"] for t in listed]
        assert http.delete(f"/v1/threads/{thread_id}", headers=root.headers).status_code == 204
        assert http.get(f"/v1/threads/{thread_id}", headers=alice.headers).status_code == 404


def test_native_ingest_socket(gate: Gate) -> None:
    """Attaching to someone else's ingest run is refused as attaching to no run is."""
    with gate.http() as http:
        started = http.post("/v1/runs", json={"source": "ingest"}, headers=gate.alice.headers)
        assert started.status_code == 201, started.text
        run_id = started.json()["id"]
        nobody = ghost("run")
        ws = gate.base.replace("http", "ws")

        def refusal(rid: str, key: Key) -> tuple[int, bytes]:
            with pytest.raises(InvalidStatus) as refused:
                ws_client.connect(f"{ws}/v1/runs/{rid}/ingest?token={key.key}").close()
            response = refused.value.response
            return response.status_code, response.body or b""

        for who in (gate.bob, gate.viewer):
            assert refusal(run_id, who) == refusal(nobody, who)
            assert refusal(run_id, who)[0] == 403
        # Its owner attaches, pushes its end; the run is over.
        with ws_client.connect(f"{ws}/v1/runs/{run_id}/ingest?token={gate.alice.key}") as socket:
            socket.send(json.dumps({"kind": "completion", "data": {"status": "completed"}}))
            assert json.loads(socket.recv(timeout=10))["type"] == "end"
        info = http.get(f"/v1/runs/{run_id}", headers=gate.root.headers).json()
        assert info["state"] == "finished"
