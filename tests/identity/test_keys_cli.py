"""``loopgate keys add|list|revoke`` as a user runs them: real processes on a real file."""

from __future__ import annotations

import concurrent.futures
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from loopgate.gateway.identity.keys import read_keys, secret_matches, split_key
from tests.gateway.harness import REPO
from tests.identity.principals import secret_of


def keys_cmd(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m loopgate keys ARGS`` with no LOOPGATE_* variable but those in ``env``."""
    clean = {k: v for k, v in os.environ.items() if "LOOPGATE" not in k}
    clean["PYTHONPATH"] = str(REPO)
    return subprocess.run(
        [sys.executable, "-m", "loopgate", "keys", *args],
        cwd=cwd,
        env={**clean, **(env or {})},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


def add(tmp_path: Path, name: str, *flags: str) -> str:
    """Adds a key to ``keys.json`` in ``tmp_path``; the key it printed."""
    done = keys_cmd("add", name, "--keys-file", "keys.json", *flags, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()[-1].split()[-1]


def test_add_prints_the_key_once_and_keeps_only_its_hash(tmp_path: Path) -> None:
    done = keys_cmd("add", "alice", "--tenant", "acme", "--keys-file", "keys.json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    key = done.stdout.splitlines()[-1].split()[-1]
    # Alone on standard output: KEY=$(loopgate keys add …) captures exactly it.
    assert done.stdout == key + "\n"
    assert "shown only this once" in done.stderr and key not in done.stderr
    parts = split_key(key)
    assert parts is not None
    key_id, secret = parts

    path = tmp_path / "keys.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    text = path.read_text()
    assert secret not in text and key not in text
    [entry] = read_keys(path).keys
    assert (entry.name, entry.id, entry.subject, entry.tenant, entry.scopes) == (
        "alice",
        key_id,
        "alice",  # the subject defaults to the name
        "acme",
        ["run"],
    )
    assert entry.revoked_at is None and entry.created_at > 0 and entry.quota is None
    assert secret_matches(secret, entry.hash) and not secret_matches(secret + "x", entry.hash)
    # No temporary file left beside it.
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")) == []


def test_add_takes_subject_display_name_scope_and_quotas(tmp_path: Path) -> None:
    add(
        tmp_path,
        "ops-bot.1",
        "--tenant",
        "ops",
        "--scope",
        "admin",
        "--subject",
        "svc:ops bot",
        "--display-name",
        "Ops bot — nightly",
        "--concurrent-runs",
        "3",
        "--runs-per-minute",
        "30",
        "--events-per-day",
        "100000",
        "--tokens-per-day",
        "2000000",
    )
    [entry] = read_keys(tmp_path / "keys.json").keys
    assert entry.subject == "svc:ops bot" and entry.display_name == "Ops bot — nightly"
    assert entry.scopes == ["admin"]
    assert entry.quota is not None
    assert (
        entry.quota.concurrent_runs,
        entry.quota.runs_per_minute,
        entry.quota.events_per_day,
        entry.quota.tokens_per_day,
    ) == (3, 30, 100_000, 2_000_000)


def test_list_shows_every_key_and_never_a_key_or_hash(tmp_path: Path) -> None:
    alice = add(tmp_path, "alice", "--tenant", "acme")
    bob = add(tmp_path, "bob", "--tenant", "globex", "--scope", "read", "--subject", "bob@globex")
    entries = {e.name: e for e in read_keys(tmp_path / "keys.json").keys}

    listed = keys_cmd("list", "--keys-file", "keys.json", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].split() == ["NAME", "ID", "SUBJECT", "TENANT", "SCOPES", "CREATED", "REVOKED"]
    assert lines[1].split()[:5] == ["alice", entries["alice"].id, "alice", "acme", "run"]
    assert lines[2].split()[:5] == ["bob", entries["bob"].id, "bob@globex", "globex", "read"]
    assert lines[1].split()[6] == "-"
    as_json = keys_cmd("list", "--json", "--keys-file", "keys.json", cwd=tmp_path)
    rows = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert [r["name"] for r in rows] == ["alice", "bob"]
    assert set(rows[0]) == {"name", "id", "subject", "tenant", "scopes", "created", "revoked"}
    for output in (listed.stdout, as_json.stdout):
        for key in (alice, bob):
            assert key not in output and secret_of(key) not in output
        for entry in entries.values():
            assert entry.hash.split("$")[-1] not in output and "scrypt" not in output


def test_revoke_marks_the_key_and_keeps_it_listed(tmp_path: Path) -> None:
    add(tmp_path, "alice", "--tenant", "acme")
    add(tmp_path, "bob", "--tenant", "acme")
    done = keys_cmd("revoke", "alice", "--keys-file", "keys.json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "revoked key 'alice'" in done.stdout
    entries = {e.name: e for e in read_keys(tmp_path / "keys.json").keys}
    assert entries["alice"].revoked_at is not None and entries["bob"].revoked_at is None
    assert stat.S_IMODE((tmp_path / "keys.json").stat().st_mode) == 0o600

    again = keys_cmd("revoke", "alice", "--keys-file", "keys.json", cwd=tmp_path)
    assert again.returncode == 0 and "already revoked" in again.stdout
    listed = keys_cmd("list", "--json", "--keys-file", "keys.json", cwd=tmp_path).stdout
    revoked = {r["name"]: r["revoked"] for r in map(json.loads, listed.splitlines())}
    assert revoked["bob"] == "-" and revoked["alice"].endswith("Z")

    unknown = keys_cmd("revoke", "carol", "--keys-file", "keys.json", cwd=tmp_path)
    assert unknown.returncode == 1
    assert unknown.stderr.strip() == (
        "loopgate keys revoke: no key named 'carol' in keys.json (see `loopgate keys list`)"
    )


def test_a_duplicate_name_is_refused_revoked_or_not(tmp_path: Path) -> None:
    add(tmp_path, "alice", "--tenant", "acme")
    before = (tmp_path / "keys.json").read_bytes()
    done = keys_cmd("add", "alice", "--tenant", "other", "--keys-file", "keys.json", cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert "a key named 'alice' is already in keys.json" in done.stderr
    assert (tmp_path / "keys.json").read_bytes() == before
    keys_cmd("revoke", "alice", "--keys-file", "keys.json", cwd=tmp_path)
    again = keys_cmd("add", "alice", "--tenant", "acme", "--keys-file", "keys.json", cwd=tmp_path)
    assert again.returncode == 2 and "already in" in again.stderr


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "a name is 1 to 64 characters of A-Z, a-z, 0-9, '.', '_' and '-'"),
        ("x" * 65, "a name is 1 to 64 characters of A-Z, a-z, 0-9, '.', '_' and '-'"),
        ("two words", "a name is 1 to 64 characters of A-Z, a-z, 0-9, '.', '_' and '-'"),
        ("café", "a name is 1 to 64 characters of A-Z, a-z, 0-9, '.', '_' and '-'"),
        ("a/b", "a name is 1 to 64 characters of A-Z, a-z, 0-9, '.', '_' and '-'"),
        ("evil\x1b[2J", "the name contains a control character (U+001B)"),
        ("line\nbreak", "the name contains a control character (U+000A)"),
    ],
)
def test_bad_names_are_refused(tmp_path: Path, name: str, message: str) -> None:
    done = keys_cmd("add", name, "--tenant", "acme", "--keys-file", "keys.json", cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == f"loopgate keys add: {message}\n"
    assert not (tmp_path / "keys.json").exists()


def test_the_longest_name_is_taken(tmp_path: Path) -> None:
    add(tmp_path, "A-z_0.9" + "x" * 57, "--tenant", "acme")
    assert read_keys(tmp_path / "keys.json").keys[0].name == "A-z_0.9" + "x" * 57


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--tenant", "ac\x07me"), "--tenant contains a control character (U+0007)"),
        (("--tenant", "acme", "--subject", "al\rice"), "--subject contains a control character"),
        (
            ("--tenant", "acme", "--display-name", "A\u202eB"),
            "--display-name contains a control character (U+202E)",
        ),
        (("--tenant", "  "), "--tenant is empty"),
        (("--tenant", "acme", "--subject", "s" * 300), "--subject is longer than 256 characters"),
        (("--tenant", "acme", "--concurrent-runs", "-1"), "--concurrent-runs must be 0 (no limit"),
    ],
)
def test_bad_identities_and_limits_are_refused(
    tmp_path: Path, flags: tuple[str, ...], message: str
) -> None:
    done = keys_cmd("add", "alice", *flags, "--keys-file", "keys.json", cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith(f"loopgate keys add: {message}")
    # The offending text itself is never echoed to the terminal.
    for control in ("\x07", "\r", "\u202e"):
        assert control not in done.stderr
    assert not (tmp_path / "keys.json").exists()


def test_the_tenant_is_required(tmp_path: Path) -> None:
    done = keys_cmd("add", "alice", "--keys-file", "keys.json", cwd=tmp_path)
    assert done.returncode == 2 and "--tenant" in done.stderr


def test_the_file_comes_from_the_environment_or_is_asked_for(tmp_path: Path) -> None:
    env = {"LOOPGATE_KEYS_FILE": str(tmp_path / "env-keys.json")}
    done = keys_cmd("add", "alice", "--tenant", "acme", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert [e.name for e in read_keys(tmp_path / "env-keys.json").keys] == ["alice"]
    assert "alice" in keys_cmd("list", cwd=tmp_path, env=env).stdout

    for action in (("add", "bob", "--tenant", "acme"), ("list",), ("revoke", "alice")):
        asked = keys_cmd(*action, cwd=tmp_path)
        assert asked.returncode == 2
        assert asked.stderr == (
            f"loopgate keys {action[0]}: which keys file? give --keys-file PATH or set "
            "LOOPGATE_KEYS_FILE\n"
        )


def test_a_missing_or_broken_file_is_said_in_one_line(tmp_path: Path) -> None:
    missing = keys_cmd("list", "--keys-file", "none.json", cwd=tmp_path)
    assert missing.returncode == 0 and missing.stdout == ""
    assert "does not exist" in missing.stderr
    nowhere = keys_cmd("add", "a", "--tenant", "t", "--keys-file", "no/dir/k.json", cwd=tmp_path)
    assert nowhere.returncode == 2
    assert nowhere.stderr == (
        "loopgate keys add: cannot write no/dir/k.json: the directory no/dir does not exist\n"
    )
    (tmp_path / "broken.json").write_text('{"keys": [')
    for action in (("list",), ("add", "a", "--tenant", "t"), ("revoke", "a")):
        done = keys_cmd(*action, "--keys-file", "broken.json", cwd=tmp_path)
        assert done.returncode == 2, done
        assert done.stderr == (
            f"loopgate keys {action[0]}: the keys file broken.json is not JSON\n"
        )
    assert (tmp_path / "broken.json").read_text() == '{"keys": ['


def test_adds_at_the_same_time_each_keep_their_key(tmp_path: Path) -> None:
    """Each add reads, changes and replaces the file under a lock: none is lost."""
    names = [f"user{i}" for i in range(6)]
    with concurrent.futures.ThreadPoolExecutor(len(names)) as pool:
        keys = list(pool.map(lambda n: add(tmp_path, n, "--tenant", "acme"), names))
    entries = read_keys(tmp_path / "keys.json").keys
    assert sorted(e.name for e in entries) == names
    by_id = {e.id: e for e in entries}
    for key in keys:
        parts = split_key(key)
        assert parts is not None and secret_matches(parts[1], by_id[parts[0]].hash)
