"""API keys from a file (``--keys-file``), kept hashed, picked up again when the file changes.

A key reads ``lg_<id>_<secret>``: the id finds its entry without trying every hash, the secret
is checked against the entry's scrypt hash (hashlib's, OpenSSL's implementation: no extra
dependency for a function the standard library has). scrypt costs about 50 ms on purpose; a key
that verified once is remembered for the process as an HMAC of it under a per-process secret,
so each later request costs microseconds and the remembered value is useless to anyone who
reads the process's memory dump without the secret. ``loopgate keys`` edits the file
(gateway/commands/keys.py).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import os
import secrets
import time
from pathlib import Path

import anyio
import msgspec

from loopgate.contracts.principal import Principal, Quota, Scope
from loopgate.gateway.identity.presented import Presented, Rejected

PREFIX = "lg_"
ID_CHARS = 12
# scrypt's cost: 2**14 x 8 x 128 bytes = 16 MiB and ~50 ms per verification (OWASP's minimum).
SCRYPT_N, SCRYPT_R, SCRYPT_P = 2**14, 8, 1
# How often the file's modification time is looked at (a stat), at most.
RELOAD_EVERY_S = 1.0


class KeyEntry(msgspec.Struct, kw_only=True, omit_defaults=True):
    name: str
    id: str
    hash: str  # "scrypt$N$r$p$<salt b64>$<hash b64>"
    subject: str
    tenant: str = "default"
    scopes: list[Scope] = msgspec.field(default_factory=lambda: ["run"])
    display_name: str | None = None
    created_at: float = 0.0
    revoked_at: float | None = None
    quota: Quota | None = None


class KeysFile(msgspec.Struct, kw_only=True):
    keys: list[KeyEntry] = msgspec.field(default_factory=list)


def hash_secret(secret: str, salt: bytes | None = None) -> str:
    salt = salt if salt is not None else os.urandom(16)
    digest = hashlib.scrypt(
        secret.encode(), salt=salt, n=SCRYPT_N, r=SCRYPT_R, p=SCRYPT_P, maxmem=64 << 20
    )
    b64 = base64.b64encode
    return f"scrypt${SCRYPT_N}${SCRYPT_R}${SCRYPT_P}${b64(salt).decode()}${b64(digest).decode()}"


def secret_matches(secret: str, stored: str) -> bool:
    try:
        scheme, n, r, p, salt, digest = stored.split("$")
        if scheme != "scrypt":
            return False
        expected = base64.b64decode(digest)
        got = hashlib.scrypt(
            secret.encode(),
            salt=base64.b64decode(salt),
            n=int(n),
            r=int(r),
            p=int(p),
            maxmem=64 << 20,
            dklen=len(expected),
        )
    except (ValueError, TypeError):
        return False
    return hmac.compare_digest(got, expected)


def new_key() -> tuple[str, str, str]:
    """``(key, id, secret)``: a key to hand out once, its id and its secret."""
    key_id = secrets.token_hex(ID_CHARS // 2)
    secret = secrets.token_urlsafe(32)
    return f"{PREFIX}{key_id}_{secret}", key_id, secret


def split_key(key: str) -> tuple[str, str] | None:
    if not key.startswith(PREFIX):
        return None
    key_id, sep, secret = key[len(PREFIX) :].partition("_")
    if not sep or len(key_id) != ID_CHARS or not secret:
        return None
    return key_id, secret


def read_keys(path: Path) -> KeysFile:
    """The file's keys; an absent file has none. ValueError names what is wrong in it."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return KeysFile()
    except OSError as exc:
        raise ValueError(f"cannot read the keys file {path}: {exc.__class__.__name__}") from None
    try:
        return msgspec.json.decode(raw, type=KeysFile)
    except msgspec.ValidationError as exc:
        raise ValueError(f"the keys file {path} is not valid: {exc}") from None
    except msgspec.DecodeError:
        raise ValueError(f"the keys file {path} is not JSON") from None


def write_keys(path: Path, keys: KeysFile) -> None:
    """Replace the file at once (a reader never sees half of it), readable by its owner only."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(msgspec.json.format(msgspec.json.encode(keys), indent=2) + b"\n")
    os.replace(tmp, path)


class ApiKeys:
    """The keys file as a credential source, re-read when it changes (mtime and size)."""

    via = "key"

    def __init__(self, path: str | Path, clock: object = time.monotonic) -> None:
        self.path = Path(path)
        self._clock = clock
        self._stamp: tuple[int, int] | None = None
        self._checked = float("-inf")
        self._by_id: dict[str, KeyEntry] = {}
        self._pepper = secrets.token_bytes(32)
        self._verified: dict[str, bytes] = {}  # id -> HMAC of the key that verified
        # scrypt runs on threads, two at a time: wrong secrets sent in a burst cost the
        # event loop nothing, and the machine at most two cores for a moment.
        self._hashing = anyio.CapacityLimiter(2)
        self.reload(force=True)

    def reload(self, *, force: bool = False) -> None:
        """Read the file again if it changed; a broken file keeps the keys read before it."""
        now = self._clock()  # type: ignore[operator]
        if not force and now - self._checked < RELOAD_EVERY_S:
            return
        self._checked = now
        try:
            st = self.path.stat()
            stamp = (st.st_mtime_ns, st.st_size)
        except FileNotFoundError:
            stamp = (0, 0)
        if stamp == self._stamp and not force:
            return
        keys = read_keys(self.path)  # ValueError at start-up; below, once running
        self._stamp = stamp
        self._by_id = {k.id: k for k in keys.keys}
        self._verified = {
            i: v for i, v in self._verified.items() if i in self._by_id and self._usable(i)
        }

    def _usable(self, key_id: str) -> bool:
        entry = self._by_id.get(key_id)
        return entry is not None and entry.revoked_at is None

    async def resolve(self, presented: Presented) -> Principal | None:
        key = presented.bearer
        if key is None:
            return None
        parts = split_key(key)
        if parts is None:
            return None  # not an API key: another source's, perhaps
        with contextlib.suppress(ValueError):
            # Being rewritten, or broken: the keys read before it stay in force.
            self.reload()
        key_id, secret = parts
        entry = self._by_id.get(key_id)
        if entry is None:
            raise Rejected("unknown", "unknown API key: no key with this id in the keys file")
        if entry.revoked_at is not None:
            raise Rejected("revoked", "this API key was revoked")
        mark = hmac.digest(self._pepper, key.encode(), "sha256")
        known = self._verified.get(key_id)
        if known is None or not hmac.compare_digest(known, mark):
            matches = await anyio.to_thread.run_sync(
                secret_matches, secret, entry.hash, limiter=self._hashing
            )
            if not matches:
                raise Rejected("unknown", "wrong API key: its secret does not match")
            self._verified[key_id] = mark
        return Principal(
            subject=entry.subject,
            tenant=entry.tenant,
            scopes=tuple(entry.scopes),
            name=entry.display_name or entry.name,
            via="key",
            quota=entry.quota,
        )
