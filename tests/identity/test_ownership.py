"""The run service's ownership rules over the native API, with keys from a file: each principal
sees and controls only its own runs and threads, the admin all; someone else's is not found."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.gateway.harness import running_gateway
from tests.identity.principals import write_test_keys
from tests.waiting import wait_until


def test_each_principal_sees_only_its_own_runs(tmp_path: Path) -> None:
    keys = write_test_keys(tmp_path / "keys.json")
    alice, bob, root, viewer = keys["alice"], keys["bob"], keys["root"], keys["viewer"]
    with (
        running_gateway(keys_file=str(tmp_path / "keys.json")) as (base, _),
        httpx.Client(base_url=base, timeout=10) as http,
    ):
        assert http.get("/v1/runs").status_code == 401
        mine = http.post("/v1/runs", json={"input": "hi"}, headers=alice.headers)
        assert mine.status_code in (200, 201), mine.text
        run = mine.json()
        assert run["owner"] == {"subject": "alice", "tenant": "acme"}
        run_id = run["id"]

        listed = http.get("/v1/runs", headers=alice.headers).json()
        assert [r["id"] for r in listed["runs"]] == [run_id]
        assert http.get("/v1/runs", headers=bob.headers).json()["runs"] == []
        assert run_id in [
            r["id"] for r in http.get("/v1/runs", headers=root.headers).json()["runs"]
        ]

        for path in (f"/v1/runs/{run_id}", f"/v1/runs/{run_id}/events?stream=false"):
            assert http.get(path, headers=bob.headers).status_code == 404
            assert http.get(path, headers=alice.headers).status_code == 200
            assert http.get(path, headers=root.headers).status_code == 200
        assert http.post(f"/v1/runs/{run_id}/cancel", headers=bob.headers).status_code == 404
        # The reader of alice's tenant is another subject: not its run either.
        assert http.get(f"/v1/runs/{run_id}", headers=viewer.headers).status_code == 404
        started = http.post("/v1/runs", json={"input": "hi"}, headers=viewer.headers)
        assert started.status_code == 403, started.text
        # bob cannot continue alice's thread.
        cont = http.post(
            "/v1/runs",
            json={"input": "more", "thread_id": run["thread_id"]},
            headers=bob.headers,
        )
        assert cont.status_code == 404, cont.text


def test_someone_elses_dropped_run_is_not_found_not_gone(tmp_path: Path) -> None:
    """Retention drops alice's finished run: she is told it is gone (410), bob that there is no
    such run (404), as for any id that never existed — no existence oracle."""
    keys = write_test_keys(tmp_path / "keys.json")
    alice, bob, root = keys["alice"], keys["bob"], keys["root"]
    with (
        running_gateway(keys_file=str(tmp_path / "keys.json"), max_runs=1) as (base, _),
        httpx.Client(base_url=base, timeout=10) as http,
    ):
        first = http.post("/v1/runs", json={"input": "plain hi"}, headers=alice.headers).json()
        # Reading the whole stream waits for the run to finish: then it may be dropped.
        events = http.get(f"/v1/runs/{first['id']}/events?stream=false", headers=alice.headers)
        assert events.status_code == 200
        http.post("/v1/runs", json={"input": "plain hi"}, headers=alice.headers)
        path = f"/v1/runs/{first['id']}"
        # Retention's sweep runs once a second: wait for its effect, bounded.
        wait_until(lambda: http.get(path, headers=alice.headers).status_code != 200, 20, "its drop")
        assert http.get(path, headers=alice.headers).status_code == 410
        assert http.get(path, headers=root.headers).status_code == 410
        assert http.get(path, headers=bob.headers).status_code == 404
        never = http.get("/v1/runs/run_never_existed", headers=bob.headers)
        assert http.get(path, headers=bob.headers).json()["detail"].replace(
            first["id"], "X"
        ) == never.json()["detail"].replace("run_never_existed", "X")
