"""``loopgate keys``: add, list and revoke the API keys of a keys file (docs/auth.md).

The file keeps each key's scrypt hash, never the key: ``add`` prints the key once, alone on
standard output (its explanation goes to standard error), so ``KEY=$(loopgate keys add …)``
captures exactly the key. A running gateway picks up the change within a second or so.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import msgspec

from ...contracts.principal import SCOPES, Quota
from ..identity.keys import (
    KeyEntry,
    editing,
    hash_secret,
    new_key,
    problem_with_name,
    problem_with_text,
    read_keys,
)

ENV = "LOOPGATE_KEYS_FILE"
QUOTA_FLAGS = ("concurrent_runs", "runs_per_minute", "events_per_day", "tokens_per_day")


class Refused(Exception):
    """What the user asked cannot be done; ``message`` says why, in our words."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "keys",
        help="add, list and revoke API keys in a keys file",
        description="Manage the API keys file a gateway reads with `loopgate serve "
        "--keys-file F`. The file keeps only each key's hash; a running gateway sees changes "
        "within about a second, without a restart (docs/auth.md).",
    )
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")

    add = actions.add_parser(
        "add",
        help="make a new key and print it (once)",
        description="Make a new API key for a principal and print it: the key is shown only "
        "this once, as the last line of the output (alone on standard output).",
    )
    add.add_argument("name", help="the key's name: 1-64 characters of A-Z a-z 0-9 . _ -")
    add.add_argument("--tenant", required=True, help="the tenant its principal belongs to")
    add.add_argument(
        "--scope",
        choices=SCOPES,
        default="run",
        help="admin: every run; run: start and control its own (default); read: read its own",
    )
    add.add_argument("--subject", help="the principal's subject, whose runs it owns (default NAME)")
    add.add_argument("--display-name", help="a name to show for it (default NAME)")
    limits = add.add_argument_group("its quotas (default: the gateway's; docs/auth.md)")
    for field in QUOTA_FLAGS:
        limits.add_argument(
            f"--{field.replace('_', '-')}",
            dest=field,
            type=int,
            metavar="N",
            help=f"{field.replace('_', ' ')} at most",
        )
    add_file_flag(add)
    add.set_defaults(func=partial(run, add_key))

    listing = actions.add_parser(
        "list",
        help="list the keys (never a key or its hash)",
        description="List the keys of the file: name, id, subject, tenant, scopes, when made "
        "and when revoked. Neither a key nor its hash is shown.",
    )
    listing.add_argument("--json", action="store_true", help="one JSON object per line")
    add_file_flag(listing)
    listing.set_defaults(func=partial(run, list_keys))

    revoke = actions.add_parser(
        "revoke",
        help="revoke a key by name",
        description="Revoke a key: a gateway refuses it (401) from its next check of the "
        "file, within about a second. The key stays listed, as revoked, and its name taken.",
    )
    revoke.add_argument("name", help="the key's name")
    add_file_flag(revoke)
    revoke.set_defaults(func=partial(run, revoke_key))


def add_file_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--keys-file",
        metavar="PATH",
        help=f"the keys file (or set {ENV}); `add` creates it, readable by its owner only",
    )


def keys_file(args: argparse.Namespace) -> Path:
    given = args.keys_file or os.environ.get(ENV)
    if not given:
        raise Refused(f"which keys file? give --keys-file PATH or set {ENV}")
    return Path(given)


def add_key(args: argparse.Namespace) -> int:
    path = keys_file(args)
    subject = args.subject if args.subject is not None else args.name
    check_name(args.name)
    for flag, text in (
        ("--tenant", args.tenant),
        ("--subject", subject),
        ("--display-name", args.display_name),
    ):
        if text is not None:
            problem = problem_with_text(flag, text)
            if problem is not None:
                raise Refused(problem)
    limits: dict[str, int] = {}
    for field in QUOTA_FLAGS:
        value = getattr(args, field)
        if value is not None and value < 0:
            raise Refused(f"--{field.replace('_', '-')} must be 0 (no limit for this key) or more")
        if value is not None:
            limits[field] = value
    if not path.parent.is_dir():
        raise Refused(f"cannot write {path}: the directory {path.parent} does not exist")
    key, key_id, secret = new_key()
    entry = KeyEntry(
        name=args.name,
        id=key_id,
        hash=hash_secret(secret),
        subject=subject,
        tenant=args.tenant,
        scopes=[args.scope],
        display_name=args.display_name,
        created_at=time.time(),
        quota=Quota(**limits) if limits else None,
    )
    with editing(path) as keys:
        if any(k.name == args.name for k in keys.keys):
            raise Refused(
                f"a key named {args.name!r} is already in {path} (revoked keys keep their "
                "names): choose another name, e.g. with a suffix"
            )
        keys.keys.append(entry)
    print(
        f"added key {args.name!r} (id {key_id}) to {path}: subject {subject!r}, tenant "
        f"{args.tenant!r}, scope {args.scope}.\n"
        "The key is shown only this once; the file keeps only its hash. The key:",
        file=sys.stderr,
        flush=True,
    )
    print(key, flush=True)
    return 0


def check_name(name: str) -> None:
    problem = problem_with_name(name)
    if problem is not None:
        raise Refused(problem)


def when(stamp: float | None) -> str:
    if stamp is None:
        return "-"
    return datetime.fromtimestamp(stamp, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def list_keys(args: argparse.Namespace) -> int:
    path = keys_file(args)
    if not path.exists():
        print(f"no keys yet: {path} does not exist (`loopgate keys add` makes it)", file=sys.stderr)
        return 0
    entries = read_keys(path).keys
    rows: list[dict[str, Any]] = [
        {
            "name": k.name,
            "id": k.id,
            "subject": k.subject,
            "tenant": k.tenant,
            "scopes": k.scopes,
            "created": when(k.created_at or None),
            "revoked": when(k.revoked_at),
        }
        for k in entries
    ]
    if args.json:
        for row in rows:
            print(msgspec.json.encode(row).decode())
        return 0
    columns = ("name", "id", "subject", "tenant", "scopes", "created", "revoked")
    table = [[c.upper() for c in columns]] + [
        [",".join(row[c]) if c == "scopes" else str(row[c]) for c in columns] for row in rows
    ]
    widths = [max(len(line[i]) for line in table) for i in range(len(columns))]
    for line in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip())
    return 0


def revoke_key(args: argparse.Namespace) -> int:
    path = keys_file(args)
    check_name(args.name)
    if not path.exists():
        raise Refused(f"no key named {args.name!r}: {path} does not exist", code=1)
    already: float | None = None
    with editing(path) as keys:
        entry = next((k for k in keys.keys if k.name == args.name), None)
        if entry is None:
            raise Refused(f"no key named {args.name!r} in {path} (see `loopgate keys list`)", 1)
        already = entry.revoked_at
        if already is None:
            entry.revoked_at = time.time()
    if already is not None:
        print(f"key {args.name!r} was already revoked at {when(already)}")
    else:
        print(f"revoked key {args.name!r} (id {entry.id}); gateways refuse it within a second")
    return 0


def run(action: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    try:
        return int(action(args))
    except Refused as refused:
        print(f"loopgate keys {args.action}: {refused.message}", file=sys.stderr)
        return refused.code
    except ValueError as problem:  # the keys file's, in read_keys' words
        print(f"loopgate keys {args.action}: {problem}", file=sys.stderr)
        return 2
    except OSError as exc:
        reason = (exc.strerror or type(exc).__name__).lower()
        print(f"loopgate keys {args.action}: cannot write the keys file: {reason}", file=sys.stderr)
        return 2
