"""The audit log of a `loopgate serve` process: JSON lines in the file --audit-log names (or on
stderr by default), one per security-relevant action, naming the principal, never the key."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from tests.gateway.harness import gateway_process
from tests.identity.principals import write_test_keys


def lines_of(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_audit_lines_go_to_the_file_named_and_never_carry_the_key(tmp_path: Path) -> None:
    keys = write_test_keys(tmp_path / "keys.json")
    alice, bob = keys["alice"], keys["bob"]
    audit = tmp_path / "audit.jsonl"
    args = ("--keys-file", str(tmp_path / "keys.json"), "--audit-log", str(audit))
    with gateway_process(*args, "--log-level", "warning") as (base, _):
        run = httpx.post(f"{base}/v1/runs", json={"input": "hi"}, headers=alice.headers).json()
        cancel = httpx.post(f"{base}/v1/runs/{run['id']}/cancel", headers=bob.headers)
        assert cancel.status_code == 404
        refused = httpx.get(f"{base}/v1/runs", headers={"authorization": "Bearer lg_nope"})
        assert refused.status_code == 401
    text = audit.read_text()
    assert alice.key not in text and bob.key not in text and "lg_nope" not in text
    lines = lines_of(audit)
    actions = [line["audit"] for line in lines]
    assert "credential_used" in actions and "run_started" in actions
    assert "access_refused" in actions
    started = next(line for line in lines if line["audit"] == "run_started")
    assert started["principal"] == {"subject": "alice", "tenant": "acme", "via": "key"}
    assert started["run_id"] == run["id"]


def test_audit_lines_are_on_stderr_by_default_and_off_when_asked(tmp_path: Path) -> None:
    keys = write_test_keys(tmp_path / "keys.json")
    for dest, expected in (("stderr", True), ("off", False)):
        args = ("--keys-file", str(tmp_path / "keys.json"), "--audit-log", dest)
        with gateway_process(*args, "--log-level", "warning") as (base, proc):
            ok = httpx.post(f"{base}/v1/runs", json={"input": "hi"}, headers=keys["alice"].headers)
            assert ok.status_code == 201
        assert proc.stderr is not None
        err = proc.stderr.read().decode()
        assert ('"audit":"run_started"' in err) is expected, err[-2000:]
