"""Principals for tests: a keys file with two users of two tenants, an admin and a reader.

Written with the gateway's own key functions, as `loopgate keys add` writes them, so a gateway
started with ``keys_file=`` (or ``--keys-file``) takes these keys."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

from loopgate.contracts.principal import Quota, Scope
from loopgate.gateway.identity.keys import (
    KeyEntry,
    KeysFile,
    hash_secret,
    new_key,
    split_key,
    write_keys,
)


class TestKey(NamedTuple):
    name: str
    subject: str
    tenant: str
    scope: Scope
    key: str  # what a client sends as its bearer token

    @property
    def headers(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self.key}"}


# name -> (subject, tenant, scope)
PEOPLE: dict[str, tuple[str, str, Scope]] = {
    "alice": ("alice", "acme", "run"),
    "bob": ("bob", "globex", "run"),
    "root": ("root", "ops", "admin"),
    "viewer": ("viewer", "acme", "read"),
}


def write_test_keys(
    path: Path,
    people: Mapping[str, tuple[str, str, Scope]] = PEOPLE,
    quotas: Mapping[str, Quota] | None = None,
) -> dict[str, TestKey]:
    """A keys file at ``path`` with one key for each of ``people`` (name -> subject, tenant,
    scope), each with its own quota where ``quotas`` names one; their keys by name."""
    entries: list[KeyEntry] = []
    keys: dict[str, TestKey] = {}
    for name, (subject, tenant, scope) in people.items():
        key, key_id, secret = new_key()
        entries.append(
            KeyEntry(
                name=name,
                id=key_id,
                hash=hash_secret(secret),
                subject=subject,
                tenant=tenant,
                scopes=[scope],
                created_at=time.time(),
                quota=(quotas or {}).get(name),
            )
        )
        keys[name] = TestKey(name, subject, tenant, scope, key)
    write_keys(path, KeysFile(keys=entries))
    return keys


def secret_of(key: str) -> str:
    """A key's secret part (itself may hold "_": split as the gateway splits it)."""
    parts = split_key(key)
    assert parts is not None, "not an API key"
    return parts[1]
