"""API keys end to end: a gateway process with ``--keys-file`` takes keys added while it runs,
refuses revoked, wrong and unknown ones (401), stops at start on a broken file, and never
writes a key to its output or its audit lines."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from loopgate.contracts.principal import Principal
from loopgate.gateway.identity.keys import (
    RELOAD_EVERY_S,
    ApiKeys,
    KeysFile,
    editing,
    read_keys,
    split_key,
    write_keys,
)
from loopgate.gateway.identity.presented import Presented, Rejected
from tests.gateway.harness import REPO, free_port, running_gateway, stop, wait_healthy
from tests.identity.principals import write_test_keys
from tests.identity.test_keys_cli import add, keys_cmd
from tests.waiting import wait_until

# How long a change to the keys file may take to reach a running gateway: it looks at the
# file at most once a second, so this is generous for a loaded machine.
PICKED_UP_WITHIN_S = 15.0


@contextmanager
def serving(cwd: Path, *args: str) -> Iterator[tuple[str, Path]]:
    """``loopgate serve ARGS`` in ``cwd``, logging at debug; its base URL and a file that holds
    everything it wrote (stdout and stderr), complete once the block ends."""
    port = free_port()
    output = cwd / f"serve-{port}.log"
    with output.open("wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "loopgate",
                "serve",
                "--port",
                str(port),
                "--log-level",
                "debug",
                *args,
            ],
            cwd=cwd,
            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "HOME": str(cwd)},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        base = f"http://127.0.0.1:{port}"
        try:
            wait_healthy(base, proc)
            yield base, output
        finally:
            stop(proc)


def until(check: Callable[[], bool], what: str, timeout: float = PICKED_UP_WITHIN_S) -> float:
    """Ask the gateway until ``check`` holds (bounded); how long that took."""
    start = time.monotonic()
    wait_until(check, timeout, what)
    return time.monotonic() - start


def bearer(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


def test_keys_added_and_revoked_while_it_runs_count_without_a_restart(tmp_path: Path) -> None:
    alice = add(tmp_path, "alice", "--tenant", "acme")
    alice_id, alice_secret = split_key(alice) or ("", "")
    shown: list[str] = []  # every response body, to look for keys in
    with (
        serving(tmp_path, "--keys-file", "keys.json") as (base, output),
        httpx.Client(base_url=base, timeout=10) as http,
    ):

        def status(key: str | None, path: str = "/v1/runs") -> int:
            response = http.get(path, headers=bearer(key) if key else {})
            shown.append(response.text)
            return response.status_code

        assert status(alice) == 200
        assert status(None) == 401
        started = http.post("/v1/runs", json={"input": "hi"}, headers=bearer(alice))
        assert started.status_code in (200, 201), started.text
        assert started.json()["owner"] == {"subject": "alice", "tenant": "acme"}

        bob = add(tmp_path, "bob", "--tenant", "globex")
        took_add = until(lambda: status(bob) == 200, "a key added while serving works")

        wrong = http.get("/v1/runs", headers=bearer(f"lg_{alice_id}_{alice_secret[::-1]}"))
        assert wrong.status_code == 401
        assert wrong.json()["detail"] == "wrong API key: its secret does not match"
        assert wrong.headers["www-authenticate"] == 'Bearer error="invalid_token"'
        unknown = http.get("/v1/runs", headers=bearer(f"lg_{'0' * 12}_{alice_secret}"))
        assert unknown.status_code == 401
        assert unknown.json()["detail"] == "unknown API key: no key with this id in the keys file"
        not_a_key = http.get("/v1/runs", headers=bearer("lg_short_x"))
        assert not_a_key.status_code == 401
        shown += [wrong.text, unknown.text, not_a_key.text]

        revoked = keys_cmd("revoke", "alice", "--keys-file", "keys.json", cwd=tmp_path)
        assert revoked.returncode == 0, revoked.stderr
        took_revoke = until(lambda: status(alice) == 401, "a revoked key is refused")
        refused = http.get("/v1/runs", headers=bearer(alice))
        assert refused.json()["detail"] == "this API key was revoked"
        assert status(bob) == 200
        # An event stream takes the key as ?token= (a browser's EventSource sets no header).
        run_id = started.json()["id"]
        assert status(None, f"/v1/runs/{run_id}/events?stream=false&token={bob}") == 404
    print(f"key added -> works: {took_add:.2f} s; revoked -> refused: {took_revoke:.2f} s")
    assert took_add < RELOAD_EVERY_S + 5 and took_revoke < RELOAD_EVERY_S + 5

    written = output.read_text()
    assert "Application startup complete" in written and "GET /v1/runs" in written
    for secret in (alice, bob, alice_secret, split_key(bob)[1]):  # type: ignore[index]
        assert secret not in written
        assert all(secret not in body for body in shown)


def broken_files(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    """Keys files a gateway must not start with, and what ``serve`` says of each."""
    good = tmp_path / "good.json"
    write_test_keys(good)
    entries = read_keys(good).keys

    def variant(name: str, text: str) -> Path:
        path = tmp_path / name
        path.write_text(text)
        return path

    doubled = KeysFile(keys=[entries[0], entries[1]])
    doubled.keys[1].id = entries[0].id
    write_keys(tmp_path / "doubled.json", doubled)
    bad_subject = KeysFile(keys=[entries[0]])
    bad_subject.keys[0].subject = "ali\x1bce"
    write_keys(tmp_path / "bad-subject.json", bad_subject)
    (tmp_path / "a-directory.json").mkdir()
    return {
        "not JSON": (variant("garbled.json", good.read_text()[:-20]), "is not JSON"),
        "wrong shape": (
            variant("shape.json", '{"keys": [{"name": 7}]}'),
            "is not valid: Expected `str`, got `int` - at `keys[0].name`",
        ),
        "unknown scope": (
            variant("scope.json", good.read_text().replace('"read"', '"superuser"')),
            "is not valid: Invalid enum value 'superuser' - at `keys[3].scopes[0]`",
        ),
        "an id twice": (
            tmp_path / "doubled.json",
            "is not valid: key 'bob': its id is used by another key",
        ),
        "control character": (
            tmp_path / "bad-subject.json",
            "is not valid: key 'alice': the subject contains a control character (U+001B)",
        ),
        "a directory": (tmp_path / "a-directory.json", "it is a directory"),
        "missing": (tmp_path / "missing.json", "does not exist: create it with `loopgate keys"),
    }


@pytest.mark.parametrize(
    "case",
    [
        "not JSON",
        "wrong shape",
        "unknown scope",
        "an id twice",
        "control character",
        "a directory",
        "missing",
    ],
)
def test_a_keys_file_that_cannot_be_used_stops_serve_at_start(tmp_path: Path, case: str) -> None:
    path, says = broken_files(tmp_path)[case]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "loopgate",
            "serve",
            "--port",
            str(free_port()),
            "--keys-file",
            str(path),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("loopgate serve: ") and str(path) in line and says in line, line
    assert "scrypt" not in line


def test_the_keys_file_comes_from_the_environment_too(tmp_path: Path) -> None:
    (tmp_path / "keys.json").write_text("[]")
    done = subprocess.run(
        [sys.executable, "-m", "loopgate", "serve", "--port", str(free_port())],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "LOOPGATE_KEYS_FILE": "keys.json"},
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2
    assert done.stderr == (
        "loopgate serve: the keys file keys.json is not valid: Expected `object`, got `array`\n"
    )


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def presented(key: str) -> Presented:
    return Presented(bearer=key, headers={}, client="127.0.0.1")


async def resolve(source: ApiKeys, key: str) -> Principal | str:
    """The principal, or the reason class of the refusal."""
    try:
        principal = await source.resolve(presented(key))
    except Rejected as rejected:
        return rejected.reason
    assert principal is not None
    return principal


@pytest.mark.anyio
async def test_the_file_is_looked_at_once_a_second_and_a_broken_one_keeps_the_last_keys(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "keys.json"
    keys = write_test_keys(path)
    clock = Clock()
    source = ApiKeys(path, clock=clock)
    alice = await resolve(source, keys["alice"].key)
    assert isinstance(alice, Principal)
    assert (alice.subject, alice.tenant, alice.scopes, alice.name, alice.via) == (
        "alice",
        "acme",
        ("run",),
        "alice",
        "key",
    )
    with editing(path) as changed:
        next(k for k in changed.keys if k.name == "alice").revoked_at = time.time()
    # Within the second: the file is not looked at again.
    clock.now += RELOAD_EVERY_S / 2
    assert isinstance(await resolve(source, keys["alice"].key), Principal)
    clock.now += RELOAD_EVERY_S
    assert await resolve(source, keys["alice"].key) == "revoked"

    # Broken while serving: the keys read before stay in force, and the log says so once.
    path.write_text('{"keys": [')
    with caplog.at_level(logging.WARNING, logger="loopgate.server"):
        for _ in range(3):
            clock.now += RELOAD_EVERY_S
            assert isinstance(await resolve(source, keys["bob"].key), Principal)
            assert await resolve(source, keys["alice"].key) == "revoked"
    told = [r.getMessage() for r in caplog.records if r.name == "loopgate.server"]
    assert told == [f"the keys file {path} is not JSON; the keys read before it stay in force"]
    # Mended: read again. Removed: no key is good any more.
    write_test_keys(path)
    clock.now += RELOAD_EVERY_S
    assert await resolve(source, keys["bob"].key) == "unknown"
    path.unlink()
    clock.now += RELOAD_EVERY_S
    assert await resolve(source, keys["root"].key) == "unknown"


@pytest.mark.anyio
async def test_a_verified_key_is_checked_again_when_its_hash_changes(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    keys = write_test_keys(path)
    clock = Clock()
    source = ApiKeys(path, clock=clock)
    assert isinstance(await resolve(source, keys["alice"].key), Principal)
    other = write_test_keys(tmp_path / "other.json")
    with editing(path) as changed:
        entry = next(k for k in changed.keys if k.name == "alice")
        entry.hash = next(
            k for k in read_keys(tmp_path / "other.json").keys if k.name == "alice"
        ).hash
    clock.now += RELOAD_EVERY_S
    assert await resolve(source, keys["alice"].key) == "unknown"
    # Not another key's secret under this id either: the id and secret go together.
    alice_id = split_key(keys["alice"].key)
    assert alice_id is not None
    _, other_secret = split_key(other["alice"].key) or ("", "")
    assert isinstance(await resolve(source, f"lg_{alice_id[0]}_{other_secret}"), Principal)


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.name} {record.getMessage()}")


@contextmanager
def logged(name: str, level: int) -> Iterator[list[str]]:
    logger = logging.getLogger(name)
    handler, before = Lines(), logger.level
    logger.addHandler(handler)
    logger.setLevel(level)
    try:
        yield handler.lines
    finally:
        logger.removeHandler(handler)
        logger.setLevel(before)


def test_audit_lines_name_the_principal_and_never_the_key(tmp_path: Path) -> None:
    keys = write_test_keys(tmp_path / "keys.json")
    alice, bob = keys["alice"], keys["bob"]
    _, alice_secret = split_key(alice.key) or ("", "")
    wrong = alice.key[:-4] + ("aaaa" if not alice.key.endswith("aaaa") else "bbbb")
    with (
        logged("", logging.DEBUG) as everything,
        logged("loopgate.audit", logging.INFO) as audit,
        running_gateway(keys_file=str(tmp_path / "keys.json")) as (base, _),
        httpx.Client(base_url=base, timeout=10) as http,
    ):
        assert http.get("/v1/runs", headers=alice.headers).status_code == 200
        started = http.post("/v1/runs", json={"input": "hi"}, headers=alice.headers)
        assert started.status_code in (200, 201)
        assert http.get("/v1/runs", headers=bearer(wrong)).status_code == 401
        assert http.get("/v1/runs", headers=bob.headers).status_code == 200
    lines = [json.loads(line.split(" ", 1)[1]) for line in audit]
    used = [line for line in lines if line["audit"] == "credential_used"]
    assert {(u["principal"]["subject"], u["principal"]["tenant"]) for u in used} == {
        ("alice", "acme"),
        ("bob", "globex"),
    }
    assert all(u["principal"]["via"] == "key" for u in used)
    # Once a minute per principal, not per request.
    assert len([u for u in used if u["principal"]["subject"] == "alice"]) == 1
    [refused] = [line for line in lines if line["audit"] == "access_refused"]
    assert refused["reason"] == "unknown" and "principal" not in refused
    [run_started] = [line for line in lines if line["audit"] == "run_started"]
    assert run_started["principal"] == {"subject": "alice", "tenant": "acme", "via": "key"}
    assert everything, "the gateway logged nothing at all"
    for secret in (alice.key, bob.key, wrong, alice_secret):
        assert not any(secret in line for line in [*audit, *everything])
