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
import fcntl
import hashlib
import hmac
import logging
import os
import re
import secrets
import time
import unicodedata
from collections.abc import Iterable, Iterator
from pathlib import Path

import anyio
import msgspec

from ...contracts.client_errors import describe_input_error
from ...contracts.principal import Principal, Quota, Scope
from .presented import Presented, Rejected

log = logging.getLogger("loopgate.server")

PREFIX = "lg_"
ID_CHARS = 12
# scrypt's cost: 2**14 x 8 x 128 bytes = 16 MiB and ~50 ms per verification (OWASP's minimum).
SCRYPT_N, SCRYPT_R, SCRYPT_P = 2**14, 8, 1
# How often the file's modification time is looked at (a stat), at most.
RELOAD_EVERY_S = 1.0
# A key's name: what `loopgate keys revoke` takes and `list` shows, safe in any terminal or log.
NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")
MAX_TEXT_CHARS = 256  # a subject, tenant or display name


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


def control_character(text: str) -> str | None:
    """The first control (or other unprintable format) character in ``text``, as ``U+XXXX``."""
    for char in text:
        if unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp"):
            return f"U+{ord(char):04X}"
    return None


def problem_with_text(what: str, text: str) -> str | None:
    """What is wrong with a subject, tenant or display name, in words; None if nothing."""
    if not text.strip():
        return f"{what} is empty"
    if len(text) > MAX_TEXT_CHARS:
        return f"{what} is longer than {MAX_TEXT_CHARS} characters"
    char = control_character(text)
    if char is not None:
        return f"{what} contains a control character ({char})"
    return None


def problem_with_name(name: str) -> str | None:
    char = control_character(name)
    if char is not None:
        return f"the name contains a control character ({char})"
    if NAME.fullmatch(name) is None:
        return "a name is 1 to 64 characters of A-Z, a-z, 0-9, '.', '_' and '-'"
    return None


def problems(keys: Iterable[KeyEntry]) -> Iterator[str]:
    """What makes a keys file unusable: bad names, ids or identities, a name or id twice."""
    names: set[str] = set()
    ids: set[str] = set()
    for n, entry in enumerate(keys):
        where = f"key {n + 1}"
        name_problem = problem_with_name(entry.name)
        if name_problem is not None:
            yield f"{where}: {name_problem}"
        elif entry.name in names:
            yield f"{where}: the name {entry.name!r} is used twice"
        else:
            where = f"key {entry.name!r}"
        names.add(entry.name)
        if len(entry.id) != ID_CHARS or not all(c in "0123456789abcdef" for c in entry.id):
            yield f"{where}: its id is not {ID_CHARS} hex digits"
        elif entry.id in ids:
            yield f"{where}: its id is used by another key"
        ids.add(entry.id)
        if not entry.hash.startswith("scrypt$"):
            yield f"{where}: its hash is not an scrypt hash (write keys with `loopgate keys add`)"
        for what, text in (("the subject", entry.subject), ("the tenant", entry.tenant)):
            problem = problem_with_text(what, text)
            if problem is not None:
                yield f"{where}: {problem}"
        if entry.display_name is not None:
            problem = problem_with_text("the display name", entry.display_name)
            if problem is not None:
                yield f"{where}: {problem}"
        if entry.quota is not None:
            for field in entry.quota.__struct_fields__:
                limit = getattr(entry.quota, field)
                if limit is not None and limit < 0:
                    yield f"{where}: quota {field} must be 0 (no limit for this key) or more"


def read_keys(path: Path) -> KeysFile:
    """The file's keys; an absent file has none. ValueError names what is wrong in it."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return KeysFile()
    except PermissionError:
        raise ValueError(f"cannot read the keys file {path}: permission denied") from None
    except IsADirectoryError:
        raise ValueError(f"cannot read the keys file {path}: it is a directory") from None
    except OSError as exc:
        raise ValueError(f"cannot read the keys file {path}: {exc.__class__.__name__}") from None
    try:
        keys = msgspec.json.decode(raw, type=KeysFile)
    except msgspec.ValidationError as exc:
        raise ValueError(
            f"the keys file {path} is not valid: {describe_input_error(exc, root='file')}"
        ) from None
    except msgspec.DecodeError:
        raise ValueError(f"the keys file {path} is not JSON") from None
    found = next(problems(keys.keys), None)
    if found is not None:
        raise ValueError(f"the keys file {path} is not valid: {found}")
    return keys


def write_keys(path: Path, keys: KeysFile) -> None:
    """Replace the file at once (a reader never sees half of it), readable by its owner only."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        # A leftover temporary file keeps its old mode through O_CREAT: set it again.
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(msgspec.json.format(msgspec.json.encode(keys), indent=2) + b"\n")
            f.flush()
            # On disk before it replaces the old file: a crash leaves one or the other whole.
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def editing(path: Path) -> Iterator[KeysFile]:
    """The file's keys to change, written back (atomically) when the block ends without an
    exception. One editor at a time: two `loopgate keys add` at once would each write the file
    as it was read, and one key would be lost."""
    lock = path.with_name(f".{path.name}.lock")
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        keys = read_keys(path)
        yield keys
        write_keys(path, keys)
    finally:
        os.close(fd)  # and with it the lock


class ApiKeys:
    """The keys file as a credential source, re-read when it changes (mtime and size)."""

    via = "key"

    def __init__(self, path: str | Path, clock: object = time.monotonic) -> None:
        self.path = Path(path)
        self._clock = clock
        self._stamp: tuple[int, int, int] | None = None
        self._checked = float("-inf")
        self._broken: tuple[int, int, int] | None = None  # the broken version last told of
        self._by_id: dict[str, KeyEntry] = {}
        self._pepper = secrets.token_bytes(32)
        self._verified: dict[str, bytes] = {}  # id -> HMAC of the key that verified
        # scrypt runs on threads, two at a time: wrong secrets sent in a burst cost the
        # event loop nothing, and the machine at most two cores for a moment.
        self._hashing = anyio.CapacityLimiter(2)
        if not self.path.exists():
            # A mistyped path would otherwise serve with no keys at all, refusing everyone.
            raise ValueError(
                f"the keys file {self.path} does not exist: create it with "
                f"`loopgate keys add NAME --tenant TENANT --keys-file {self.path}`"
            )
        self.reload(force=True)

    def reload(self, *, force: bool = False) -> None:
        """Read the file again if it changed (ValueError if it is broken: the caller keeps
        the keys read before it)."""
        now = self._clock()  # type: ignore[operator]
        if not force and now - self._checked < RELOAD_EVERY_S:
            return
        self._checked = now
        try:
            st = self.path.stat()
            # `loopgate keys` replaces the file (a new inode) and a size or time may repeat.
            stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        except FileNotFoundError:
            stamp = (0, 0, 0)  # removed: no keys (read_keys reads an absent file as empty)
        if stamp == self._stamp and not force:
            return
        try:
            keys = read_keys(self.path)
        except ValueError as problem:
            if self._stamp is not None and stamp != self._broken:
                # Told once per broken version, to the operator's log; requests go on.
                log.warning("%s; the keys read before it stay in force", problem)
            self._broken = stamp
            raise
        self._stamp = stamp
        before, self._by_id = self._by_id, {k.id: k for k in keys.keys}
        # A key verified before stays verified only while its entry says the same.
        self._verified = {
            i: mark
            for i, mark in self._verified.items()
            if self._usable(i) and i in before and before[i].hash == self._by_id[i].hash
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
