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
import openai
import pytest
from httpx_sse import connect_sse
from openai import OpenAI
from websockets.exceptions import InvalidStatus
from websockets.sync import client as ws_client

from tests.browser.support import artifacts_dir, page_server, run_browser
from tests.gateway.harness import running_gateway
from tests.identity.principals import TestKey as Key
from tests.identity.principals import write_test_keys
from tests.node_clients import run_script

MODEL = "loopgate-scripted"


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
        assert run_id in [
            r["id"] for r in http.get("/v1/runs", headers=root.headers).json()["runs"]
        ]
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
        cont = http.post(
            "/v1/runs", json={"input": "hi", "thread_id": thread_id}, headers=bob.headers
        )
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


# --- EventSource in Chromium ------------------------------------------------------------------


@pytest.fixture
def browser_artifacts(tmp_path: Path, request: pytest.FixtureRequest) -> Path:
    """Where the driver's screenshots go (tests/browser/support.py): a failed run names it."""
    return artifacts_dir(tmp_path, request.node.name)


def test_event_source_in_chromium(gate: Gate, browser_artifacts: Path) -> None:
    """alice's key (``?token=``) streams her run to its end; bob's gets the 404 an unknown run
    gets, and the browser does not reconnect."""
    with gate.http() as http:
        started = http.post("/v1/runs", json={"input": "plain hello"}, headers=gate.alice.headers)
        assert started.status_code == 201, started.text
        run_id = started.json()["id"]
        whole = kinds_until(http, run_id, gate.alice)
        nobody = ghost("run")

        def url(rid: str, key: Key) -> str:
            return f"{gate.base}/v1/runs/{rid}/events?token={key.key}"

        follow = {
            "alice": url(run_id, gate.alice),
            "root": url(run_id, gate.root),
            "bob": url(run_id, gate.bob),
            "bobNone": url(nobody, gate.bob),
            "viewer": url(run_id, gate.viewer),
        }
        with page_server() as page_port:
            page = f"http://127.0.0.1:{page_port}/"
            seen = run_browser(
                {"streams": {"page": page, "follow": follow}},
                browser_artifacts,
                script="matrix-browser.mjs",
            )
        streams = seen["streams"]
        # Its owner and the admin: the whole run, then the reconnect that gets 204.
        for name in ("alice", "root"):
            got = streams[name]
            assert got["ids"] == [e["seq"] for e in whole], got
            assert got["kinds"][-1] == "completion"
            assert got["closed"] and got["opens"] == 1
            assert [r["status"] for r in got["requests"]] == [200, 204]
        # Anyone else: one request, the 404 of a run that does not exist; never reconnected.
        for name in ("bob", "bobNone", "viewer"):
            got = streams[name]
            assert got["closed"] and got["opens"] == 0 and got["ids"] == [], got
            assert [r["status"] for r in got["requests"]] == [404], got
        # What the browser could not show: the two 404s are one answer.
        theirs = http.get(follow["bob"].removeprefix(gate.base))
        none = http.get(follow["bobNone"].removeprefix(gate.base))
        assert theirs.status_code == 404
        same_answer(theirs, run_id, none, nobody)


# --- AG-UI, Vercel AI UI streams, OpenAI: the Node clients --------------------------------------


@pytest.fixture(scope="module")
def clients(gate: Gate) -> dict[str, Any]:
    """What every Node client saw (tests/node/matrix-clients.mjs), run once for the module."""
    seen = run_script("matrix-clients.mjs", json.dumps(gate.config()))
    for name, summary in seen.items():
        assert "crashed" not in summary, (name, summary)
    return seen


def agui_error(summary: dict[str, Any], socket: bool) -> tuple[Any, ...]:
    """How an AG-UI client meets a refused request: an HTTP error before any event, or (over
    the socket) a RUN_ERROR that is the stream's only event."""
    if socket:
        assert summary["types"] == ["RUN_ERROR"] and summary["failed"] is None, summary
        return summary["error"]["code"], summary["error"]["message"]
    assert summary["types"] == [] and summary["failed"], summary
    return (summary["failed"],)


def without(value: tuple[Any, ...], ident: str) -> tuple[Any, ...]:
    return tuple(v.replace(ident, "ID") if isinstance(v, str) else v for v in value)


@pytest.mark.parametrize("binding", ["aguiHttp", "aguiSocket"])
def test_agui(clients: dict[str, Any], binding: str) -> None:
    seen = clients[binding]
    socket = binding == "aguiSocket"
    waiting, nobody, thread = seen["waiting"], seen["nobody"], seen["thread"]
    # alice's runs: one waits for a tool approval, one asked her a question.
    assert seen["started"]["terminal"]["outcome"]["type"] == "interrupt"
    assert seen["approval"] == f"{waiting}:permission:perm_1"
    assert seen["question"].split(":")[1] == "interrupt"
    for who in ("bob", "viewer"):
        tries = seen[who]
        # Attaching to alice's run, answering her approval or her question: each as for a run
        # that never existed.
        for attempt in ("attach", "approve", "answer"):
            theirs = agui_error(tries[attempt], socket)
            none = agui_error(tries[f"{attempt}None"], socket)
            ident = waiting if attempt != "answer" else seen["question"].split(":")[0]
            assert without(theirs, ident) == without(none, nobody), (who, attempt)
        attach = " ".join(map(str, agui_error(tries["attach"], socket)))
        assert f"no run with id '{waiting}'" in attach
        if socket:
            assert agui_error(tries["attach"], socket)[0] == "invalid_input"
        else:
            assert attach.startswith("HTTP 404: ")
    # bob cannot continue alice's thread; a thread nobody has is his to start.
    cont = " ".join(map(str, agui_error(seen["bob"]["continue"], socket)))
    assert f"no thread with id '{thread}'" in cont
    assert socket or cont.startswith("HTTP 404: ")
    assert seen["bobFresh"]["terminal"]["type"] == "RUN_FINISHED"
    # viewer may start nothing: 403 over HTTP, a RUN_ERROR coded `forbidden` on the socket.
    refused = agui_error(seen["viewer"]["continue"], socket)
    if socket:
        assert refused[0] == "forbidden", refused
    else:
        assert refused[0].startswith("HTTP 403: "), refused
    # root watches alice's run and answers for her: it runs to its end.
    assert seen["rootAttach"]["terminal"]["outcome"]["type"] == "interrupt"
    assert seen["rootAttach"]["terminal"]["runId"] == waiting
    approved = seen["rootApprove"]
    assert approved["terminal"]["type"] == "RUN_FINISHED" and approved["failed"] is None
    assert "outcome" not in approved["terminal"] or approved["terminal"]["outcome"]["type"] == (
        "success"
    )
    assert seen["aliceAnswer"]["terminal"]["type"] == "RUN_FINISHED"
    for summary in (seen["started"], seen["rootAttach"], approved, seen["aliceAnswer"]):
        assert summary["problems"] == [], summary["problems"]


def test_agui_socket_resume_frames(clients: dict[str, Any]) -> None:
    seen = clients["aguiSocketFrames"]
    theirs = agui_error(seen["resume"], True)
    none = agui_error(seen["resumeNone"], True)
    assert without(theirs, seen["waiting"]) == without(none, seen["nobody"])
    assert seen["rootResume"]["terminal"]["outcome"]["type"] == "interrupt"
    assert seen["aliceApprove"]["terminal"]["type"] == "RUN_FINISHED"


def test_vercel_chat(clients: dict[str, Any], gate: Gate) -> None:
    seen = clients["vercel"]
    assert seen["opened"][-1] == "tool-input-available"  # alice's run is still going
    for who in ("bob", "viewer"):
        tries = seen[who]
        # A reconnect to alice's chat finds nothing to resume, as for a chat nobody has.
        assert tries["reconnect"] == tries["reconnectNone"] == {"stream": None}
    # bob's Chat on alice's chat id: the chat's error is the 404 of a thread not found.
    bob = seen["bob"]["send"]
    assert bob["status"] == "error" and bob["error"]["statusCode"] == 404
    assert json.loads(bob["error"]["message"])["detail"] == (
        f"no thread with id {seen['chatId']!r}"
    )
    assert seen["bobFresh"]["status"] == "ready" and seen["bobFresh"]["error"] is None
    viewer = seen["viewer"]["send"]
    assert viewer["status"] == "error" and viewer["error"]["statusCode"] == 403
    # The owner and the admin resume alice's stream.
    assert seen["aliceReconnect"]["stream"] == seen["opened"]
    assert seen["rootReconnect"]["stream"] == seen["opened"]
    # The same reconnect over plain HTTP: bob's and nobody's are one answer, 204.
    with gate.http() as http:
        theirs = http.get(f"/vercel/{seen['chatId']}/stream", headers=gate.bob.headers)
        none = http.get(f"/vercel/{seen['nobody']}/stream", headers=gate.bob.headers)
        assert theirs.status_code == none.status_code == 204
        assert theirs.content == none.content == b""


def test_openai_node(clients: dict[str, Any]) -> None:
    seen = clients["openai"]
    alice = seen["alice"]
    assert alice["content"] and alice["runId"].startswith("run_")
    assert seen["aliceContinues"]["content"] and seen["rootContinues"]["content"]
    bob = seen["bobContinues"]["thrown"]
    assert bob["class"] == "NotFoundError" and bob["status"] == 404
    assert bob["error"]["message"] == f"no thread with id {alice['runId']!r}"
    assert bob["error"]["type"] == "invalid_request_error"
    assert seen["bobFresh"]["content"]
    viewer = seen["viewer"]["thrown"]
    assert viewer["class"] == "PermissionDeniedError" and viewer["status"] == 403
    assert viewer["error"]["type"] == "request_forbidden"
    assert viewer["error"]["code"] == "permission_denied"
    assert "loopgate-scripted" in seen["viewerModels"]


def test_openai_python(gate: Gate) -> None:
    def client(key: Key) -> OpenAI:
        return OpenAI(base_url=f"{gate.base}/v1", api_key=key.key, max_retries=0)

    user: list[Any] = [{"role": "user", "content": "plain hello"}]
    mine = client(gate.alice).chat.completions.with_raw_response.create(model=MODEL, messages=user)
    run_id = mine.headers["x-request-id"]
    assert mine.parse().choices[0].message.content
    thread = {"loopgate": {"thread_id": run_id}}
    with pytest.raises(openai.NotFoundError) as missing:
        client(gate.bob).chat.completions.create(model=MODEL, messages=user, extra_body=thread)
    assert missing.value.body == {
        "message": f"no thread with id {run_id!r}",
        "type": "invalid_request_error",
        "param": None,
        "code": None,
    }
    with pytest.raises(openai.PermissionDeniedError) as refused:
        client(gate.viewer).chat.completions.create(model=MODEL, messages=user, stream=True)
    assert refused.value.type == "request_forbidden" and refused.value.code == "permission_denied"
    assert "may only read" in refused.value.message
    done = client(gate.root).chat.completions.create(model=MODEL, messages=user, extra_body=thread)
    assert done.choices[0].message.content
    # The run behind alice's completion is hers: bob cannot see it on the native API either.
    with gate.http() as http:
        assert http.get(f"/v1/runs/{run_id}", headers=gate.bob.headers).status_code == 404
        assert http.get(f"/v1/runs/{run_id}", headers=gate.alice.headers).status_code == 200
