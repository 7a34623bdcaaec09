"""OIDC / JWT bearer tokens, verified with the public keys of a JWKS (docs/auth.md).

An identity provider signs the tokens; the gateway holds only its public keys, fetched from
``jwks_url`` (or read from ``jwks_file``) and cached. A token is taken when its signature
verifies with one of them under an asymmetric algorithm, its issuer and audience are the
configured ones and it is within its validity (with ``jwt_leeway_s`` of clock skew); its
claims become the principal.

The keys are fetched again every ``jwks_refresh_s`` and when a token names a key id the cache
does not hold (the provider rotated its keys), at most once per :data:`REFETCH_EVERY_S` (or
``jwks_refresh_s`` if shorter) either way: tokens with made-up key ids cannot turn the gateway
into a flood of requests to the provider. A fetch is bounded by ``jwks_timeout_s``; when it
fails, the keys fetched before go on working, and with none fetched yet a token is refused as
``unavailable`` (HTTP 401, not 503: the gateway itself is fine and serves every other
credential; a 503 would have load balancers take out an instance that only cannot verify this
one kind of token for now).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
import re
import ssl
import time
import unicodedata
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import anyio
import httpx
import jwt
import msgspec
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm

from ...contracts.principal import DEFAULT_TENANT, SCOPES, Principal, Scope
from ..settings import Settings
from .presented import Presented, Rejected, RejectReason

log = logging.getLogger("loopgate.identity")

# The algorithms a key of each type may verify: asymmetric only. Never "none", never HS*: a
# JWKS's keys are public, and an HMAC "signed" with public material proves nothing.
RSA_ALGORITHMS = frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"})
EC_ALGORITHMS = {"P-256": "ES256", "P-384": "ES384", "P-521": "ES512"}
OKP_CURVES = frozenset({"Ed25519", "Ed448"})
ACCEPTED_ALGORITHMS = RSA_ALGORITHMS | frozenset(EC_ALGORITHMS.values()) | {"EdDSA"}

# Fetching the keys again, for an unknown key id or after a failure, at most this often.
REFETCH_EVERY_S = 10.0
# A JWKS is a few keys of a few hundred bytes each; providers publish 2 to 10.
MAX_JWKS_BYTES = 512 << 10
MAX_KEYS = 100
# Tokens with many claims run to a few KiB; beyond this it is not a token anyone issues.
MAX_TOKEN_CHARS = 16 << 10
MAX_IDENTITY_CHARS = 256  # a subject or tenant
MAX_NAME_CHARS = 200
MAX_REMEMBERED = 10_000  # tokens that verified, remembered until they expire

# Three base64url parts (the last empty for an unsigned token, which is refused as such).
_SHAPE = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*")
# Names a scope may go by in a token: the bare name, or prefixed with the product's.
_SCOPE_NAMES: dict[str, Scope] = {
    f"{prefix}{scope}": scope for scope in SCOPES for prefix in ("", "loopgate:", "loopgate.")
}


class JwksError(Exception):
    """A JWKS that could not be had: ``detail`` completes "the JWKS …"."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class VerifyKey(NamedTuple):
    """One public key of the JWKS: its id, the algorithms it may verify, the key itself."""

    kid: str | None
    algorithms: frozenset[str]
    key: Any  # a cryptography public key


def verify_key(jwk: Mapping[str, Any]) -> VerifyKey | None:
    """The JWK as a key to verify signatures with; None for one this gateway does not use
    (symmetric, private, for encryption, of an unsupported type or curve, or broken)."""
    kty, use, alg, crv, kid = (jwk.get(k) for k in ("kty", "use", "alg", "crv", "kid"))
    if use not in (None, "sig") or "d" in jwk or "k" in jwk:
        return None  # for encryption; a private key; a symmetric secret
    if any(v is not None and not isinstance(v, str) for v in (kty, alg, crv, kid)):
        return None
    algorithm: type[RSAAlgorithm] | type[ECAlgorithm] | type[OKPAlgorithm]
    if kty == "RSA":
        algorithm, algorithms = RSAAlgorithm, RSA_ALGORITHMS
    elif kty == "EC" and crv in EC_ALGORITHMS:
        algorithm, algorithms = ECAlgorithm, frozenset({EC_ALGORITHMS[crv]})
    elif kty == "OKP" and crv in OKP_CURVES:
        algorithm, algorithms = OKPAlgorithm, frozenset({"EdDSA"})
    else:
        return None
    if alg is not None:
        # A key published for one algorithm verifies that one only.
        algorithms = algorithms & {alg}
        if not algorithms:
            return None
    try:
        key = algorithm.from_jwk(dict(jwk))
    except (jwt.InvalidKeyError, ValueError, TypeError, KeyError):
        return None
    return VerifyKey(kid, algorithms, key)


def parse_jwks(raw: bytes) -> tuple[VerifyKey, ...]:
    """The usable keys of a JWKS document. :class:`JwksError` when it is not one at all; keys this
    gateway cannot use are left out (a provider may publish encryption keys beside them)."""
    try:
        document = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        raise JwksError("is not JSON") from None
    keys = document.get("keys") if isinstance(document, dict) else None
    if not isinstance(keys, list):
        raise JwksError('is not a JWKS (an object with a "keys" list)')
    usable = (verify_key(k) for k in keys[:MAX_KEYS] if isinstance(k, dict))
    return tuple(k for k in usable if k is not None)


class KeySet:
    """The JWKS's keys, cached; fetched again when stale or asked for, one fetch at a time."""

    def __init__(
        self,
        *,
        url: str | None = None,
        file: str | None = None,
        timeout_s: float = 5.0,
        refresh_s: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if (url is None) == (file is None):
            raise ValueError("a JWKS is read from a URL or from a file: give one")
        self.url = url
        self.file = Path(file) if file is not None else None
        self.timeout_s = timeout_s
        self.refresh_s = refresh_s
        self.clock = clock
        self.keys: tuple[VerifyKey, ...] | None = None  # None: never fetched
        self._loaded_at = float("-inf")
        self._tried_at = float("-inf")
        self._loading: anyio.Event | None = None
        self.fetches = 0  # attempts, for tests and the curious
        self._tls: ssl.SSLContext | None = None
        if self.file is not None:
            # Read now: a missing or broken file is the operator's to fix before serving.
            try:
                self.keys = parse_jwks(self._read_file(self.file))
            except OSError as exc:
                raise ValueError(
                    f"cannot read the JWKS file {file}: {type(exc).__name__}"
                ) from None
            except JwksError as exc:
                raise ValueError(f"the JWKS file {file} {exc.detail}") from None
            self._loaded_at = self._tried_at = clock()

    @property
    def where(self) -> str:
        return self.url if self.url is not None else str(self.file)

    async def current(self) -> tuple[VerifyKey, ...]:
        """The keys, fetched first when none are cached (waiting at most ``timeout_s``) or
        when stale (cached ones serve while a fetch is under way, and after it failed).
        :class:`Rejected` ``unavailable`` when there are none to verify with."""
        keys = self.keys
        fresh = self.clock() - self._loaded_at < self.refresh_s
        if keys is not None and (fresh or self._loading is not None or not self._may_fetch()):
            return keys
        await self.refetch()
        if self.keys is None:
            raise Rejected(
                "unavailable",
                "cannot verify signed tokens now: the identity provider's keys (JWKS) are out "
                "of reach; try again shortly",
            )
        return self.keys

    async def refetch(self) -> None:
        """Fetch the keys again, unless one was tried too recently (:meth:`_may_fetch`);
        joins a fetch under way instead of starting another."""
        loading = self._loading
        if loading is not None:
            await loading.wait()
            return
        if not self._may_fetch():
            return
        self._loading = loading = anyio.Event()
        self._tried_at = self.clock()
        self.fetches += 1
        try:
            # Shielded: the requests waiting on this fetch are not failed by the one that
            # started it going away (a client hanging up); the fetch is bounded anyway.
            keys: tuple[VerifyKey, ...] | None = None
            with anyio.CancelScope(shield=True):
                keys = await self._load()
            if keys is not None:
                self.keys, self._loaded_at = keys, self.clock()
        finally:
            self._loading = None
            loading.set()

    def _may_fetch(self) -> bool:
        """At most one fetch per REFETCH_EVERY_S, or per ``refresh_s`` if the operator asked
        for a shorter one: tokens with made-up key ids, or a provider that is down, cost it
        (and every request) no more than that."""
        return self.clock() - self._tried_at >= min(self.refresh_s, REFETCH_EVERY_S)

    async def _load(self) -> tuple[VerifyKey, ...] | None:
        what = f"no answer in {self.timeout_s} s"
        with anyio.move_on_after(self.timeout_s):
            try:
                raw = await (self._fetch() if self.file is None else self._read())
                return parse_jwks(raw)
            except JwksError as exc:
                what = exc.detail
            except (httpx.HTTPError, OSError) as exc:
                what = type(exc).__name__
        kept = "none cached" if self.keys is None else f"keeping {len(self.keys)} cached"
        log.warning("the JWKS at %s could not be had (%s): %s", self.where, what, kept)
        return None

    async def _fetch(self) -> bytes:
        assert self.url is not None
        verify: ssl.SSLContext | bool = False  # plain http: allowed to loopback only
        if self.url.startswith("https:"):
            if self._tls is None:
                # Loading the CA bundle takes 100-300 ms: once, on a thread (not the loop's).
                self._tls = await anyio.to_thread.run_sync(httpx.create_ssl_context)
            verify = self._tls
        timeout = httpx.Timeout(self.timeout_s)
        async with (
            httpx.AsyncClient(timeout=timeout, verify=verify, follow_redirects=False) as client,
            client.stream("GET", self.url, headers={"accept": "application/json"}) as response,
        ):
            if response.status_code != 200:
                raise JwksError(f"answered HTTP {response.status_code}")
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > MAX_JWKS_BYTES:
                    raise JwksError(f"is larger than {MAX_JWKS_BYTES} bytes")
            return bytes(body)

    async def _read(self) -> bytes:
        assert self.file is not None
        return await anyio.to_thread.run_sync(self._read_file, self.file)

    @staticmethod
    def _read_file(path: Path) -> bytes:
        with path.open("rb") as f:
            raw = f.read(MAX_JWKS_BYTES + 1)
        if len(raw) > MAX_JWKS_BYTES:
            raise JwksError(f"is larger than {MAX_JWKS_BYTES} bytes")
        return raw


class _Taken(NamedTuple):
    principal: Principal
    until: float  # the token's exp plus the leeway (wall clock, as exp is)
    keys: tuple[VerifyKey, ...]


class JwtSource:
    """Signed tokens as a credential source: the principal is the token's claims."""

    via = "jwt"

    def __init__(
        self,
        keys: KeySet,
        *,
        issuer: str,
        audience: str,
        leeway_s: float = 30.0,
        tenant_claim: str = "tenant",
        scopes_claim: str | None = None,
    ) -> None:
        self.keys = keys
        self.issuer = issuer
        self.audience = audience
        self.leeway_s = leeway_s
        self.tenant_claim = tenant_claim
        self.scopes_claim = scopes_claim
        # Tokens that verified, by their SHA-256 (never the token): a client sends the same
        # one for an hour, and a signature check costs 0.1-1 ms of the event loop each time.
        # An entry serves until the token's expiry, and only with the very keys that verified
        # it: a new key set (a key removed) has every token verified again.
        self._taken: dict[bytes, _Taken] = {}

    @classmethod
    def from_settings(cls, settings: Settings) -> JwtSource:
        # Settings made sure both are given with a JWKS.
        assert settings.jwt_issuer is not None and settings.jwt_audience is not None
        keys = KeySet(
            url=settings.jwks_url,
            file=settings.jwks_file,
            timeout_s=settings.jwks_timeout_s,
            refresh_s=settings.jwks_refresh_s,
        )
        return cls(
            keys,
            issuer=settings.jwt_issuer,
            audience=settings.jwt_audience,
            leeway_s=settings.jwt_leeway_s,
            tenant_claim=settings.jwt_tenant_claim,
            scopes_claim=settings.jwt_scopes_claim,
        )

    async def resolve(self, presented: Presented) -> Principal | None:
        token = presented.bearer
        if token is None:
            return None
        header = jose_header(token)
        if header is None:
            return None  # not a JWT: an API key's or the single token, perhaps
        alg = header.get("alg")
        if not isinstance(alg, str) or alg not in ACCEPTED_ALGORITHMS:
            raise Rejected(
                "bad_signature",
                "the token is unsigned or signed with an algorithm this gateway does not take "
                f"(it takes {', '.join(sorted(ACCEPTED_ALGORITHMS))})",
            )
        if len(token) > MAX_TOKEN_CHARS:
            raise Rejected("malformed", f"the token is longer than {MAX_TOKEN_CHARS} characters")
        kid = header.get("kid")
        if kid is not None and not isinstance(kid, str):
            raise Rejected("malformed", "the token's key id (kid) is not a string")
        keys = await self.keys.current()
        mark = hashlib.sha256(token.encode()).digest()
        known = self._taken.get(mark)
        if known is not None and known.keys is keys and time.time() <= known.until:
            return known.principal
        claims = self._verified(token, alg, kid, keys)
        if claims is None and kid is not None:
            # A key id the cache does not hold: the provider may have rotated its keys.
            await self.keys.refetch()
            keys = self.keys.keys or ()
            claims = self._verified(token, alg, kid, keys)
        if claims is None:
            raise Rejected(
                "bad_signature",
                "the token is not signed by a key of the configured identity provider (JWKS)",
            )
        principal = self.principal(claims)
        if len(self._taken) >= MAX_REMEMBERED:
            self._taken.clear()
        # exp is there and a number: jwt.decode required and checked it.
        self._taken[mark] = _Taken(principal, float(claims["exp"]) + self.leeway_s, keys)
        return principal

    def _verified(
        self, token: str, alg: str, kid: str | None, keys: Iterable[VerifyKey]
    ) -> dict[str, Any] | None:
        """The token's claims if a key of ``keys`` verifies it; None if none is its key;
        :class:`Rejected` if its key verifies it and the claims are wrong, or it is forged."""
        candidates = [k for k in keys if alg in k.algorithms and (kid is None or k.kid == kid)]
        if not candidates:
            return None
        for candidate in candidates:
            try:
                return jwt.decode(
                    token,
                    key=candidate.key,
                    algorithms=[alg],
                    issuer=self.issuer,
                    audience=self.audience,
                    leeway=self.leeway_s,
                    options={"require": ["exp", "iss", "aud"]},
                )
            except jwt.InvalidSignatureError:
                continue  # without a kid: perhaps another of the provider's keys
            except jwt.PyJWTError as exc:
                raise rejection(exc) from None
        raise Rejected(
            "bad_signature", "the token's signature does not match: it was altered or forged"
        )

    def principal(self, claims: Mapping[str, Any]) -> Principal:
        subject = identity(claims.get("sub"), "subject (sub)")
        if subject is None:
            raise Rejected("bad_identity", "the token has no subject (sub)")
        raw_tenant = claim(claims, self.tenant_claim)
        tenant = identity(raw_tenant, f"tenant ({self.tenant_claim})")
        return Principal(
            subject=subject,
            tenant=tenant if tenant is not None else DEFAULT_TENANT,
            scopes=self.scopes(claims),
            name=display_name(claims),
            via=self.via,
        )

    def scopes(self, claims: Mapping[str, Any]) -> tuple[Scope, ...]:
        names = (self.scopes_claim,) if self.scopes_claim else ("scope", "scp", "roles")
        granted: set[Scope] = set()
        for name in names:
            value = claim(claims, name)
            values = value.split() if isinstance(value, str) else value
            if isinstance(values, list):
                granted.update(
                    _SCOPE_NAMES[v] for v in values if isinstance(v, str) and v in _SCOPE_NAMES
                )
        # A token that names none of ours (an OIDC "openid profile") may run, as an API key.
        return tuple(s for s in SCOPES if s in granted) or ("run",)


def jose_header(token: str) -> dict[str, Any] | None:
    """The token's header when it is a JWT (three base64url parts, the first a JSON object
    naming an ``alg``); None for any other token, which another source may take."""
    if _SHAPE.fullmatch(token[: MAX_TOKEN_CHARS + 1]) is None:
        return None
    first = token.partition(".")[0]
    try:
        header = msgspec.json.decode(base64.urlsafe_b64decode(first + "=" * (-len(first) % 4)))
    except (binascii.Error, ValueError, msgspec.DecodeError):
        return None
    if not isinstance(header, dict) or "alg" not in header:
        return None
    return header


def claim(claims: Mapping[str, Any], name: str) -> Any:
    """A claim by name; a dotted name reaches into objects (``realm_access.roles``) unless a
    claim has that very name."""
    if name in claims:
        return claims[name]
    value: Any = claims
    for part in name.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def identity(value: Any, what: str) -> str | None:
    """A subject or tenant as the principal keeps it; None when absent. :class:`Rejected`
    ``bad_identity`` for one that cannot name anyone: not a string, empty, too long, or with
    control characters (they would forge lines in logs and break records)."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise Rejected("bad_identity", f"the token's {what} is not a non-empty string")
    if len(value) > MAX_IDENTITY_CHARS:
        raise Rejected(
            "bad_identity", f"the token's {what} is longer than {MAX_IDENTITY_CHARS} characters"
        )
    if any(unicodedata.category(c) in ("Cc", "Cf") for c in value):
        raise Rejected("bad_identity", f"the token's {what} holds control characters")
    return value


def display_name(claims: Mapping[str, Any]) -> str | None:
    """``name``, else ``email``: only for display, so an unusable one is left out."""
    for key in ("name", "email"):
        value = claims.get(key)
        if isinstance(value, str) and value.strip():
            clean = "".join(c for c in value if unicodedata.category(c) not in ("Cc", "Cf"))
            if clean.strip():
                return clean.strip()[:MAX_NAME_CHARS]
    return None


# The words for each of PyJWT's refusals (never its own: they are the library's, not ours).
_REFUSALS: tuple[tuple[type[jwt.PyJWTError], RejectReason, str], ...] = (
    (jwt.ExpiredSignatureError, "expired", "the token has expired"),
    (jwt.ImmatureSignatureError, "not_yet_valid", "the token is not valid yet (nbf or iat)"),
    (jwt.InvalidIssuerError, "wrong_issuer", "the token's issuer (iss) is not the one trusted"),
    (jwt.InvalidAudienceError, "wrong_audience", "the token is meant for another audience (aud)"),
    (jwt.InvalidAlgorithmError, "bad_signature", "the token's algorithm is not its key's"),
    (jwt.InvalidKeyError, "bad_signature", "the token's key cannot verify it"),
)
_MISSING: dict[str, tuple[RejectReason, str]] = {
    "exp": ("malformed", "the token has no expiry (exp): this gateway takes none without one"),
    "iss": ("wrong_issuer", "the token names no issuer (iss)"),
    "aud": ("wrong_audience", "the token names no audience (aud)"),
}


def rejection(exc: jwt.PyJWTError) -> Rejected:
    if isinstance(exc, jwt.MissingRequiredClaimError) and exc.claim in _MISSING:
        return Rejected(*_MISSING[exc.claim])
    for kind, reason, detail in _REFUSALS:
        if isinstance(exc, kind):
            return Rejected(reason, detail)
    return Rejected("malformed", "the token is not a well-formed JWT (its parts or claims)")
