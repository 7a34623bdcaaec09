"""OIDC/JWT bearer tokens (gateway/identity/jwt_source.py), against a real JWKS server on
127.0.0.1 and through a real gateway: keys rotated without a restart, every way a token is
refused (with its reason class, never the token or PyJWT's words), a JWKS endpoint that is down
or slow, and a gateway that takes API keys, JWTs and its single token at once."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import ssl
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from ipaddress import IPv4Address
from pathlib import Path
from typing import Any

import anyio
import httpx
import jwt
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.x509.oid import NameOID
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from loopgate.contracts.principal import Principal
from loopgate.gateway.identity.jwt_source import REFETCH_EVERY_S, JwtSource, KeySet
from loopgate.gateway.identity.presented import Presented, Rejected
from loopgate.gateway.identity.sources import credential_sources
from loopgate.gateway.settings import Settings, load_settings
from tests.gateway.harness import running_gateway
from tests.identity.audit_capture import AuditLines, captured_audit
from tests.identity.principals import write_test_keys

ISSUER = "https://idp.example/realms/loopgate"
AUDIENCE = "loopgate-api"
# What PyJWT says of the tokens refused here: none of it may reach a client.
PYJWT_WORDS = (
    "Signature has expired",
    "not yet valid",
    "Invalid issuer",
    "Audience doesn't match",
    "Invalid audience",
    "Signature verification failed",
    "Invalid payload",
    "Token is missing",
    "algorithm",
)


# Keys: two RSA keys to rotate between, and one each of EC P-256 and Ed25519.
class SigningKey:
    def __init__(self, kid: str, private: Any, alg: str, to_jwk: Any) -> None:
        self.kid, self.private, self.alg = kid, private, alg
        self.jwk: dict[str, Any] = {**to_jwk(private.public_key(), as_dict=True), "kid": kid}
        self.jwk["use"] = "sig"

    def sign(self, claims: dict[str, Any], *, alg: str | None = None, kid: bool = True) -> str:
        headers = {"kid": self.kid} if kid else None
        return jwt.encode(claims, self.private, algorithm=alg or self.alg, headers=headers)

    @property
    def public_pem(self) -> bytes:
        return bytes(
            self.private.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )


def rsa_key(kid: str) -> SigningKey:
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return SigningKey(kid, private, "RS256", RSAAlgorithm.to_jwk)


KEY1, KEY2 = rsa_key("key-1"), rsa_key("key-2")
EC_KEY = SigningKey("ec-1", ec.generate_private_key(ec.SECP256R1()), "ES256", ECAlgorithm.to_jwk)
ED_KEY = SigningKey("ed-1", ed25519.Ed25519PrivateKey.generate(), "EdDSA", OKPAlgorithm.to_jwk)


def claims(**extra: Any) -> dict[str, Any]:
    now = int(time.time())
    base = {"iss": ISSUER, "aud": AUDIENCE, "sub": "carol", "iat": now, "exp": now + 300}
    return {k: v for k, v in {**base, **extra}.items() if v is not None}


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unsigned(header: dict[str, Any], payload: dict[str, Any], secret: bytes | None) -> str:
    """A token made by hand: PyJWT will not make these (alg none, HMAC over a public key)."""
    head = f"{b64(json.dumps(header).encode())}.{b64(json.dumps(payload).encode())}"
    if secret is None:
        return f"{head}."
    return f"{head}.{b64(hmac.new(secret, head.encode(), hashlib.sha256).digest())}"


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


class JwksServer:
    """A JWKS endpoint on 127.0.0.1: what it publishes can change, it counts the fetches, and
    it can answer 503 ("down") or not at all ("hang")."""

    def __init__(self, tls: tuple[Path, Path] | None = None) -> None:
        self.keys: list[dict[str, Any]] = []
        self.mode = "ok"
        self.fetches = 0
        self.fetched = threading.Condition()
        self.release = threading.Event()  # ends the hanging answers
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with outer.fetched:
                    outer.fetches += 1
                    outer.fetched.notify_all()
                if outer.mode == "hang":
                    outer.release.wait(30)
                    return
                if outer.mode == "down":
                    self.send_error(503)
                    return
                body = json.dumps({"keys": outer.keys}).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        scheme = "http"
        if tls is not None:
            served = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            served.load_cert_chain(*tls)
            self.httpd.socket = served.wrap_socket(self.httpd.socket, server_side=True)
            scheme = "https"
        self.url = f"{scheme}://127.0.0.1:{self.httpd.server_address[1]}/jwks.json"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def publish(self, *keys: SigningKey) -> None:
        self.keys = [k.jwk for k in keys]

    def stop(self) -> None:
        """Down for good: connections to its port are refused."""
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def wait_for_fetch(self, after: int, timeout: float = 10) -> None:
        with self.fetched:
            assert self.fetched.wait_for(lambda: self.fetches > after, timeout), "no fetch"


@contextmanager
def jwks_server(*keys: SigningKey, tls: tuple[Path, Path] | None = None) -> Iterator[JwksServer]:
    server = JwksServer(tls)
    server.publish(*keys)
    server.thread.start()
    try:
        yield server
    finally:
        server.release.set()
        server.httpd.shutdown()
        server.httpd.server_close()


def jwt_settings(url: str, **more: Any) -> dict[str, Any]:
    return {"jwks_url": url, "jwt_issuer": ISSUER, "jwt_audience": AUDIENCE, **more}


@pytest.fixture
def audit_lines() -> Iterator[AuditLines]:
    with captured_audit() as lines:
        yield lines


def start_run(http: httpx.Client, token: str) -> httpx.Response:
    return http.post("/v1/runs", json={"input": "hi"}, headers=bearer(token))


# Through the gateway: rotation, refusals, WebSockets, the JWKS down or slow.


def test_tokens_are_taken_and_keys_rotate_without_a_restart() -> None:
    """Key 1 published; then key 2 added; then key 1 removed: key 2's tokens are taken as soon
    as the gateway may fetch again (the first it sees names an unknown key id), key 1's are
    refused once the key set without it was fetched."""
    began = time.monotonic()
    with (
        jwks_server(KEY1) as idp,
        # A short refresh: fetches may follow each other after 0.2 s rather than 10.
        running_gateway(**jwt_settings(idp.url, jwks_refresh_s=0.2)) as (base, _),
        httpx.Client(base_url=base, timeout=10) as http,
    ):
        old = KEY1.sign(claims(sub="carol", tenant="acme", scope="openid run"))
        started = start_run(http, old)
        assert started.status_code in (200, 201), started.text
        assert started.json()["owner"] == {"subject": "carol", "tenant": "acme"}
        assert idp.fetches == 1

        idp.publish(KEY1, KEY2)
        new = KEY2.sign(claims(sub="carol", tenant="acme"))
        answers = until(lambda: http.get("/v1/runs", headers=bearer(new)), ok=200)
        assert answers[-1].json()["runs"][0]["id"] == started.json()["id"]
        assert {a.status_code for a in answers[:-1]} <= {401}
        assert http.get("/v1/runs", headers=bearer(old)).status_code == 200

        idp.publish(KEY2)
        # Key 1's tokens go on working until the key set without it is fetched (every 0.2 s).
        refused = until(lambda: http.get("/v1/runs", headers=bearer(old)), ok=401)[-1]
        assert "not signed by a key of the configured identity provider" in refused.text
        assert http.get("/v1/runs", headers=bearer(new)).status_code == 200
        # One fetch per 0.2 s at most, however many requests were made meanwhile.
        assert idp.fetches <= (time.monotonic() - began) / 0.2 + 1


def until(call: Any, *, ok: int, deadline_s: float = 10) -> list[httpx.Response]:
    """Call until it answers ``ok`` (the gateway may fetch the keys again only so often)."""
    answers: list[httpx.Response] = []
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        answers.append(call())
        if answers[-1].status_code == ok:
            return answers
    raise AssertionError(f"never answered {ok}: {[a.status_code for a in answers][-5:]}")


def refused_tokens() -> dict[str, tuple[str, str, str]]:
    """name -> (token, reason class, words the refusal says)."""
    now = int(time.time())
    good = KEY1.sign(claims())
    head, _, signature = good.split(".")
    forged = b64(json.dumps(claims(sub="root", scope="admin")).encode())
    return {
        "expired": (KEY1.sign(claims(exp=now - 120)), "expired", "has expired"),
        "not_yet_valid": (KEY1.sign(claims(nbf=now + 120)), "not_yet_valid", "not valid yet"),
        "issued_in_the_future": (KEY1.sign(claims(iat=now + 600)), "not_yet_valid", "not valid"),
        "wrong_issuer": (
            KEY1.sign(claims(iss="https://evil.example")),
            "wrong_issuer",
            "not the one trusted",
        ),
        "wrong_audience": (
            KEY1.sign(claims(aud="another-api")),
            "wrong_audience",
            "another audience",
        ),
        "no_expiry": (KEY1.sign(claims(exp=None)), "malformed", "no expiry"),
        "alg_none": (
            unsigned({"alg": "none", "kid": KEY1.kid}, claims(), None),
            "bad_signature",
            "unsigned or signed with an algorithm",
        ),
        "hs256_with_the_public_key": (
            unsigned({"alg": "HS256", "kid": KEY1.kid}, claims(), KEY1.public_pem),
            "bad_signature",
            "unsigned or signed with an algorithm",
        ),
        "tampered_payload": (f"{head}.{forged}.{signature}", "bad_signature", "altered or forged"),
        "unknown_signer": (
            rsa_key(KEY1.kid).sign(claims()),
            "bad_signature",
            "altered or forged",
        ),
        "payload_not_json": (
            jwt.api_jws.encode(b"not json", KEY1.private, "RS256", {"kid": KEY1.kid}),
            "malformed",
            "not a well-formed JWT",
        ),
        "control_characters_in_subject": (
            KEY1.sign(claims(sub='carol\n{"audit":"forged"}')),
            "bad_identity",
            "control characters",
        ),
        "no_subject": (KEY1.sign(claims(sub=None)), "bad_identity", "no subject"),
    }


def test_every_bad_token_is_refused_with_its_reason_and_none_of_its_text(
    audit_lines: AuditLines,
) -> None:
    cases = refused_tokens()
    with (
        jwks_server(KEY1) as idp,
        running_gateway(**jwt_settings(idp.url)) as (base, _),
        httpx.Client(base_url=base, timeout=10) as http,
    ):
        # Within the clock skew allowed (30 s by default): taken.
        late = KEY1.sign(claims(exp=int(time.time()) - 10, nbf=int(time.time()) + 10))
        assert http.get("/v1/runs", headers=bearer(late)).status_code == 200
        for name, (token, reason, words) in cases.items():
            audit_lines.lines.clear()
            answer = http.get("/v1/runs", headers=bearer(token))
            assert answer.status_code == 401, (name, answer.text)
            assert answer.headers["www-authenticate"] == 'Bearer error="invalid_token"'
            assert words in answer.json()["detail"], (name, answer.text)
            assert audit_lines.reasons() == [reason], name
            for part in token.split("."):
                assert not part or part not in answer.text, name
            for said in PYJWT_WORDS:
                assert said not in answer.text.replace("an algorithm", ""), (name, said)
        # Not a JWT at all: no source takes it (the JWT source leaves it to the others).
        audit_lines.lines.clear()
        answer = http.get("/v1/runs", headers=bearer("not-a.jwt-at.all"))
        assert answer.status_code == 401 and "wrong bearer token" in answer.json()["detail"]
        assert audit_lines.reasons() == ["no_or_unknown_credentials"]
        assert idp.fetches == 1  # the unknown signer's key id was known: no fetch for it


def test_a_websocket_upgrade_carries_the_token_in_the_query() -> None:
    async def main(base: str) -> None:
        token = KEY1.sign(claims(sub="dave", tenant="initech", scope="run"))
        url = base.replace("http://", "ws://") + "/rpc/ws"
        async with connect(f"{url}?token={token}") as ws:
            await ws.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "run.start",
                                      "params": {"input": "hi"}}))  # fmt: skip
            started = json.loads(await ws.recv())
            assert "runId" in started["result"], started
        # The run is dave's: its owner says so, and another subject of the provider's does
        # not find it.
        run_id = started["result"]["runId"]
        async with httpx.AsyncClient(base_url=base, timeout=10) as http:
            mine = await http.get(f"/v1/runs/{run_id}", headers=bearer(token))
            assert mine.json()["owner"] == {"subject": "dave", "tenant": "initech"}
            erin = KEY1.sign(claims(sub="erin", tenant="initech"))
            assert (await http.get(f"/v1/runs/{run_id}", headers=bearer(erin))).status_code == 404
        expired = KEY1.sign(claims(exp=int(time.time()) - 600))
        for wrong in (expired, "nope"):
            with pytest.raises(InvalidStatus) as refused:
                async with connect(f"{url}?token={wrong}"):
                    pass
            assert refused.value.response.status_code == 403

    with jwks_server(KEY1) as idp, running_gateway(**jwt_settings(idp.url)) as (base, _):
        anyio.run(main, base)


def test_cached_keys_keep_working_while_the_jwks_is_down_or_slow() -> None:
    """The refresh that finds the endpoint failing costs the request that made it nothing
    (503) or at most jwks_timeout_s (no answer); the keys fetched before serve meanwhile."""
    token = KEY1.sign(claims())
    with (
        jwks_server(KEY1) as idp,
        running_gateway(**jwt_settings(idp.url, jwks_refresh_s=0.2, jwks_timeout_s=0.5)) as (
            base,
            _,
        ),
        httpx.Client(base_url=base, timeout=10) as http,
    ):
        assert http.get("/v1/runs", headers=bearer(token)).status_code == 200
        for mode in ("down", "hang"):
            idp.mode = mode
            seen = idp.fetches
            slowest = 0.0
            # Each request is answered with the cached keys while the refresh fails.
            while idp.fetches == seen:
                began = time.perf_counter()
                assert http.get("/v1/runs", headers=bearer(token)).status_code == 200
                slowest = max(slowest, time.perf_counter() - began)
            began = time.perf_counter()
            assert http.get("/v1/runs", headers=bearer(token)).status_code == 200
            slowest = max(slowest, time.perf_counter() - began)
            assert slowest < 0.5 + 0.5, (mode, slowest)
            print(f"JWKS {mode}: slowest request {slowest * 1000:.0f} ms (timeout 500 ms)")


@pytest.mark.parametrize("failure", ["refused", "hang"])
def test_with_no_keys_cached_a_token_is_refused_as_unavailable_in_bounded_time(
    failure: str, audit_lines: AuditLines
) -> None:
    token = KEY1.sign(claims())
    with jwks_server(KEY1) as idp:
        if failure == "refused":
            idp.stop()
        else:
            idp.mode = "hang"
        with running_gateway(**jwt_settings(idp.url, jwks_timeout_s=0.5)) as (base, _):

            async def main() -> list[tuple[float, httpx.Response]]:
                answers: list[tuple[float, httpx.Response]] = []

                async def one(http: httpx.AsyncClient) -> None:
                    began = time.perf_counter()
                    answer = await http.get("/v1/runs", headers=bearer(token))
                    answers.append((time.perf_counter() - began, answer))

                # Five at once: one fetch, the others wait for it rather than start their own.
                async with (
                    httpx.AsyncClient(base_url=base, timeout=10) as http,
                    anyio.create_task_group() as tg,
                ):
                    for _ in range(5):
                        tg.start_soon(one, http)
                return answers

            answers = anyio.run(main)
            for took, answer in answers:
                assert answer.status_code == 401
                assert "out of reach" in answer.json()["detail"]
                assert took < 0.5 + 0.5, took
            assert audit_lines.reasons() == ["unavailable"] * 5
            # The next within the fetch interval: refused at once, no fetch tried.
            with httpx.Client(base_url=base, timeout=10) as http:
                began = time.perf_counter()
                assert http.get("/v1/runs", headers=bearer(token)).status_code == 401
                took_after = time.perf_counter() - began
            slowest = max(t for t, _ in answers)
            print(
                f"JWKS {failure}, nothing cached: 401 in {slowest * 1000:.0f} ms (timeout "
                f"500 ms), then {took_after * 1000:.0f} ms"
            )
            if failure == "hang":
                assert slowest >= 0.45, slowest
                assert idp.fetches == 1


def test_api_keys_jwts_and_the_single_token_each_go_to_their_source(tmp_path: Path) -> None:
    keys = write_test_keys(tmp_path / "keys.json")
    alice = keys["alice"]
    # Three dot-separated parts, but not a JWT: it must still reach the single token.
    single = "c2luZ2xl.dG9rZW4h.aXNoZXJl"
    with (
        jwks_server(KEY1) as idp,
        running_gateway(
            keys_file=str(tmp_path / "keys.json"), token=single, **jwt_settings(idp.url)
        ) as (base, _),
        httpx.Client(base_url=base, timeout=10) as http,
    ):
        by_key = start_run(http, alice.key)
        assert by_key.json()["owner"] == {"subject": "alice", "tenant": "acme"}
        by_jwt = start_run(http, KEY1.sign(claims(sub="alice", tenant="other-idp")))
        # The same subject from another source and tenant is someone else.
        assert by_jwt.json()["owner"] == {"subject": "alice", "tenant": "other-idp"}
        assert idp.fetches == 1  # the API key never reached the JWT source
        mine = http.get("/v1/runs", headers=alice.headers).json()["runs"]
        assert [r["id"] for r in mine] == [by_key.json()["id"]]
        everyone = http.get("/v1/runs", headers=bearer(single)).json()["runs"]
        assert {r["id"] for r in everyone} == {by_key.json()["id"], by_jwt.json()["id"]}
        wrong_key = alice.key[:-4] + "xxxx"
        assert "secret does not match" in http.get("/v1/runs", headers=bearer(wrong_key)).text
        assert http.get("/v1/runs").status_code == 401


# The source on its own: claims to principals, the key cache with a clock of our own.


def source_of(tmp_path: Path, *keys: SigningKey, **options: Any) -> JwtSource:
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps({"keys": [k.jwk for k in keys]}))
    return JwtSource(KeySet(file=str(path)), issuer=ISSUER, audience=AUDIENCE, **options)


def resolve(source: JwtSource, token: str) -> Principal | None:
    async def main() -> Principal | None:
        return await source.resolve(Presented(bearer=token, headers={}, client="127.0.0.1"))

    return anyio.run(main)


def reason_of(source: JwtSource, token: str) -> str:
    with pytest.raises(Rejected) as refused:
        resolve(source, token)
    assert token not in refused.value.detail
    return refused.value.reason


@pytest.mark.parametrize(
    ("extra", "options", "scopes"),
    [
        ({}, {}, ("run",)),
        ({"scope": "openid profile email"}, {}, ("run",)),
        ({"scope": "openid read"}, {}, ("read",)),
        ({"scp": ["run", "loopgate:admin"]}, {}, ("admin", "run")),
        ({"scp": "loopgate.read"}, {}, ("read",)),
        ({"roles": ["admin", "billing"]}, {}, ("admin",)),
        ({"roles": [{"admin": True}, ["run"], 7, "read"], "scp": 3}, {}, ("read",)),
        ({"realm_access": {"roles": ["read"]}, "scope": "admin"}, {}, ("admin",)),
        (
            {"realm_access": {"roles": ["read"]}, "scope": "admin"},
            {"scopes_claim": "realm_access.roles"},
            ("read",),
        ),
        ({"groups": "ops admin"}, {"scopes_claim": "groups"}, ("admin",)),
    ],
)
def test_scopes_come_from_scope_scp_roles_or_the_configured_claim(
    tmp_path: Path, extra: dict[str, Any], options: dict[str, Any], scopes: tuple[str, ...]
) -> None:
    source = source_of(tmp_path, KEY1, **options)
    principal = resolve(source, KEY1.sign(claims(**extra)))
    assert principal is not None and principal.scopes == scopes


def test_claims_become_the_principal(tmp_path: Path) -> None:
    source = source_of(tmp_path, KEY1, EC_KEY, ED_KEY, tenant_claim="org_id")
    token = KEY1.sign(claims(sub="u-17", org_id="acme", name="Carol Q.", email="c@acme.test"))
    assert resolve(source, token) == Principal(
        subject="u-17", tenant="acme", scopes=("run",), name="Carol Q.", via="jwt"
    )
    by_email = resolve(source, EC_KEY.sign(claims(email="c@acme.test")))
    assert by_email is not None
    assert (by_email.tenant, by_email.name) == ("default", "c@acme.test")
    by_ed = resolve(source, ED_KEY.sign(claims(name="\u202eevil\x07")))
    assert by_ed is not None and by_ed.name == "evil"
    # PS256 with an RSA key; a token without a key id is tried against the keys of its type.
    assert resolve(source, KEY1.sign(claims(), alg="PS256")) is not None
    assert resolve(source, EC_KEY.sign(claims(), kid=False)) is not None
    # Not JWTs: left to the other sources.
    for other in ("lg_0123456789ab_secret", "a.b", "a.b.c", "e30.e30.", "W10.e30.x"):
        assert resolve(source, other) is None, other


@pytest.mark.parametrize(
    ("extra", "reason"),
    [
        ({"sub": "carol\x00"}, "bad_identity"),
        ({"sub": "car\u202eol"}, "bad_identity"),
        ({"sub": ""}, "bad_identity"),
        ({"sub": "x" * 300}, "bad_identity"),
        ({"sub": 17}, "malformed"),  # PyJWT's own check: sub must be a string
        ({"tenant": "acme\r\n"}, "bad_identity"),
        ({"tenant": ["acme"]}, "bad_identity"),
        ({"iss": None}, "wrong_issuer"),
        ({"aud": None}, "wrong_audience"),
        ({"aud": [AUDIENCE, "another-api"]}, None),
        ({"exp": "tomorrow"}, "malformed"),
    ],
)
def test_unusable_identities_and_claims(
    tmp_path: Path, extra: dict[str, Any], reason: str | None
) -> None:
    source = source_of(tmp_path, KEY1)
    token = KEY1.sign(claims(**extra))
    if reason is None:
        assert resolve(source, token) is not None
    else:
        assert reason_of(source, token) == reason


def test_a_token_that_verified_is_remembered_until_it_expires_under_the_same_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = source_of(tmp_path, KEY1)
    checks: list[str] = []
    verify = source._verified

    def counted(*args: Any) -> Any:
        checks.append("verified")
        return verify(*args)

    monkeypatch.setattr(source, "_verified", counted)
    token = KEY1.sign(claims(exp=int(time.time()) + 60))
    first = resolve(source, token)
    assert first is not None and resolve(source, token) == first and len(checks) == 1
    # Another token of the same subject is checked on its own.
    assert resolve(source, KEY1.sign(claims(exp=int(time.time()) + 61))) == first
    assert len(checks) == 2
    # Past its expiry (and the leeway) it is checked again: PyJWT's clock decides then.
    later = time.time() + 60 + 30 + 1
    monkeypatch.setattr(time, "time", lambda: later)
    resolve(source, token)
    assert len(checks) == 3


def test_a_key_is_used_only_for_its_own_algorithms(tmp_path: Path) -> None:
    pinned = rsa_key("pinned")
    pinned.jwk["alg"] = "RS256"
    secret = {"kty": "oct", "kid": "shared", "k": b64(b"s" * 32)}
    junk = [{"kty": "nope"}, {**EC_KEY.jwk, "crv": ["P-256"]}, {**KEY2.jwk, "alg": {}}, 7]
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps({"keys": [pinned.jwk, EC_KEY.jwk, secret, *junk]}))
    source = JwtSource(KeySet(file=str(path)), issuer=ISSUER, audience=AUDIENCE)
    assert source.keys.keys is not None and len(source.keys.keys) == 2  # oct and junk left out
    assert resolve(source, pinned.sign(claims())) is not None
    assert reason_of(source, pinned.sign(claims(), alg="PS256")) == "bad_signature"
    # The EC key's id on an RSA signature: no key of that type has the id.
    crossed = jwt.encode(claims(), KEY1.private, algorithm="RS256", headers={"kid": EC_KEY.kid})
    assert reason_of(source, crossed) == "bad_signature"
    header = {"alg": "HS256", "kid": "shared"}
    assert reason_of(source, unsigned(header, claims(), b"s" * 32)) == "bad_signature"
    for odd in ({"alg": ["RS256"]}, {"alg": {"RS256": 1}}, {"alg": None}):
        assert reason_of(source, unsigned(odd, claims(), b"x")) == "bad_signature"
    with_odd_kid = unsigned({"alg": "RS256", "kid": ["pinned"]}, claims(), b"x")
    assert reason_of(source, with_odd_kid) == "malformed"


@pytest.mark.anyio
async def test_the_key_cache_refreshes_on_schedule_and_for_unknown_key_ids_at_most_so_often(
    anyio_backend: str,
) -> None:
    now = [1000.0]
    with jwks_server(KEY1) as idp:
        keys = KeySet(url=idp.url, timeout_s=2, refresh_s=300, clock=lambda: now[0])
        source = JwtSource(keys, issuer=ISSUER, audience=AUDIENCE)

        async def who(token: str) -> str:
            try:
                principal = await source.resolve(Presented(token, {}, "127.0.0.1"))
            except Rejected as rejected:
                return rejected.reason
            assert principal is not None
            return "ok"

        old, new = KEY1.sign(claims()), KEY2.sign(claims())
        assert await who(old) == "ok" and idp.fetches == 1
        idp.publish(KEY1, KEY2)
        # Key 2 named within 10 s of the last fetch: not fetched for yet.
        assert await who(new) == "bad_signature" and idp.fetches == 1
        now[0] += REFETCH_EVERY_S
        assert await who(new) == "ok" and idp.fetches == 2
        # Made-up key ids cost one fetch per 10 s at most, however many arrive.
        now[0] += REFETCH_EVERY_S
        for _ in range(50):
            kid = {"kid": str(uuid.uuid4())}
            made_up = jwt.encode(claims(), KEY2.private, algorithm="RS256", headers=kid)
            assert await who(made_up) == "bad_signature"
        assert idp.fetches == 3
        idp.publish(KEY2)
        assert await who(old) == "ok"  # cached until the next refresh
        now[0] += 300
        assert await who(old) == "bad_signature" and idp.fetches == 4
        # Down: the cached keys serve, and the next attempt waits its turn.
        idp.mode = "down"
        now[0] += 300
        assert await who(new) == "ok" and idp.fetches == 5
        assert await who(new) == "ok" and idp.fetches == 5
        idp.mode = "ok"
        now[0] += REFETCH_EVERY_S
        assert await who(new) == "ok" and idp.fetches == 6


def self_signed(tmp_path: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 that no CA vouches for, and its key."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "jwks.test")])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(IPv4Address("127.0.0.1"))]), False
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = tmp_path / "jwks.crt", tmp_path / "jwks.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_file, key_file


def test_an_https_jwks_is_fetched_only_from_a_certificate_trusted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Verified against the CA bundle, or the one SSL_CERT_FILE names (a private CA's)."""
    tls = self_signed(tmp_path)
    token = KEY1.sign(claims())
    with jwks_server(KEY1, tls=tls) as idp:
        assert idp.url.startswith("https://127.0.0.1:")
        untrusted = JwtSource(KeySet(url=idp.url, timeout_s=5), issuer=ISSUER, audience=AUDIENCE)
        assert reason_of(untrusted, token) == "unavailable"
        monkeypatch.setenv("SSL_CERT_FILE", str(tls[0]))
        trusted = JwtSource(KeySet(url=idp.url, timeout_s=5), issuer=ISSUER, audience=AUDIENCE)
        assert resolve(trusted, token) is not None


def test_a_jwks_that_is_not_one_keeps_the_keys_before_it(tmp_path: Path) -> None:
    now = [0.0]
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps({"keys": [KEY1.jwk]}))
    keys = KeySet(file=str(path), refresh_s=60, clock=lambda: now[0])
    source = JwtSource(keys, issuer=ISSUER, audience=AUDIENCE)
    path.write_text("{not json")
    now[0] += 60
    assert resolve(source, KEY1.sign(claims())) is not None
    path.write_text(json.dumps({"keys": [KEY2.jwk]}))
    now[0] += 60
    assert resolve(source, KEY2.sign(claims())) is not None
    assert keys.fetches == 2


# Settings and the command line.


def test_settings_require_a_safe_url_an_issuer_and_an_audience() -> None:
    ok = Settings(**jwt_settings("https://idp.example/jwks"))
    assert ok.has_credentials and not Settings().has_credentials
    Settings(host="0.0.0.0", **jwt_settings("https://idp.example/jwks")).check_listening()
    for url in ("http://127.0.0.1:9/jwks", "http://[::1]:9/jwks", "http://localhost/jwks"):
        assert Settings(**jwt_settings(url)).jwks_url == url
    wrong = {
        "must use https": jwt_settings("http://idp.example/jwks"),
        "must be an https:// URL": jwt_settings("ftp://idp.example/jwks"),
        "needs --jwt-issuer and --jwt-audience": {"jwks_url": "https://idp.example/jwks"},
        "needs --jwt-audience": {"jwks_file": "x.json", "jwt_issuer": ISSUER},
        "not both": jwt_settings("https://idp.example/jwks", jwks_file="x.json"),
        "without a JWKS": {"jwt_issuer": ISSUER},
        "must not be negative": jwt_settings("https://idp.example/jwks", jwt_leeway_s=-1),
        "jwks_timeout_s must be positive": jwt_settings(
            "https://idp.example/jwks", jwks_timeout_s=0
        ),
    }
    for words, values in wrong.items():
        with pytest.raises(ValueError, match=words):
            Settings(**values)
    assert Settings(**jwt_settings("https://idp.example/jwks", jwt_leeway_s=0)).jwt_leeway_s == 0


def test_flags_and_environment_configure_it(tmp_path: Path) -> None:
    from loopgate.gateway.cli import build_parser
    from loopgate.gateway.commands.serve import SETTING_FLAGS

    path = tmp_path / "jwks.json"
    path.write_text(json.dumps({"keys": [KEY1.jwk]}))
    args = build_parser().parse_args(
        ["serve", "--jwks-file", str(path), "--jwt-issuer", ISSUER, "--jwt-audience", AUDIENCE]
    )
    env = {"LOOPGATE_JWT_TENANT_CLAIM": "org", "LOOPGATE_JWT_LEEWAY_S": "5"}
    settings = load_settings(env, {k: getattr(args, k) for k in SETTING_FLAGS})
    (source,) = credential_sources(settings)
    assert isinstance(source, JwtSource)
    assert (source.issuer, source.audience, source.tenant_claim, source.leeway_s) == (
        ISSUER,
        AUDIENCE,
        "org",
        5,
    )
    missing = {"jwks_file": str(tmp_path / "none.json"), "jwt_issuer": ISSUER}
    with pytest.raises(ValueError, match="cannot read the JWKS file"):
        credential_sources(Settings(**missing, jwt_audience=AUDIENCE))
    path.write_text("[]")
    with pytest.raises(ValueError, match="is not a JWKS"):
        credential_sources(Settings(**{**missing, "jwks_file": str(path)}, jwt_audience=AUDIENCE))
