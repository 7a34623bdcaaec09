"""``GET /v1/me``: the caller as the gateway resolved it, under each way of signing in: the
development default (no credential configured: the local user), the single token, API keys.
Never the credential, never the quota; without a good credential, the 401 problem."""

from __future__ import annotations

from pathlib import Path

import httpx
import msgspec

from loopgate.contracts.principal import Quota
from loopgate.gateway.identity.keys import KeysFile
from tests.gateway.harness import running_gateway
from tests.identity.principals import secret_of, write_test_keys

TOKEN = "me-test-token-0123456789"
FIELDS = {"subject", "tenant", "scopes", "name", "via"}


def test_with_no_credential_configured_it_is_the_local_user() -> None:
    with running_gateway() as (base, _):
        answer = httpx.get(f"{base}/v1/me")
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "application/json"
    assert answer.json() == {
        "subject": "local",
        "tenant": "default",
        "scopes": ["admin"],
        "name": "local user",
        "via": "local",
    }


def test_the_single_token_is_its_admin_and_nothing_else_gets_in() -> None:
    with running_gateway(token=TOKEN) as (base, _), httpx.Client(base_url=base) as http:
        signed_in = http.get("/v1/me", headers={"authorization": f"Bearer {TOKEN}"})
        nothing = http.get("/v1/me")
        wrong = http.get("/v1/me", headers={"authorization": "Bearer not-the-token-at-all"})
        # Only event streams and WebSocket upgrades take ?token= (a URL ends up in logs).
        in_query = http.get("/v1/me", params={"token": TOKEN})
    assert signed_in.status_code == 200
    assert signed_in.json() == {
        "subject": "admin",
        "tenant": "default",
        "scopes": ["admin"],
        "name": "token holder",
        "via": "token",
    }
    assert TOKEN not in signed_in.text
    for refused in (nothing, wrong, in_query):
        assert refused.status_code == 401
        assert refused.headers["content-type"] == "application/problem+json"
        assert refused.headers["www-authenticate"].startswith("Bearer")
        assert refused.json()["status"] == 401
    assert "not-the-token-at-all" not in wrong.text
    assert "no bearer token" in nothing.json()["detail"]
    assert "wrong bearer token" in wrong.json()["detail"]


def test_each_api_key_is_its_own_principal_without_its_secret_or_quota(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    keys = write_test_keys(path)
    # alice's key has limits of its own: what she may spend is not hers to read here.
    stored = msgspec.json.decode(path.read_bytes(), type=KeysFile)
    for entry in stored.keys:
        if entry.name == "alice":
            entry.quota = Quota(concurrent_runs=2, runs_per_minute=7)
    path.write_bytes(msgspec.json.encode(stored))

    with (
        running_gateway(keys_file=str(path), token=TOKEN) as (base, _),
        httpx.Client(base_url=base) as http,
    ):
        seen = {name: http.get("/v1/me", headers=key.headers) for name, key in keys.items()}
        token = http.get("/v1/me", headers={"authorization": f"Bearer {TOKEN}"})
        tampered = keys["alice"].key[:-4] + "XXXX"
        wrong = http.get("/v1/me", headers={"authorization": f"Bearer {tampered}"})

    for name, answer in seen.items():
        key = keys[name]
        assert answer.status_code == 200, answer.text
        me = answer.json()
        assert set(me) == FIELDS
        assert (me["subject"], me["tenant"], me["scopes"], me["via"]) == (
            key.subject,
            key.tenant,
            [key.scope],
            "key",
        )
        assert me["name"] == name
        secret = secret_of(key.key)
        assert secret not in answer.text and key.key not in answer.text
    assert not {"quota", "concurrent_runs", "runs_per_minute"} & set(seen["alice"].json())
    # Keys and the token side by side: the token is still the admin.
    assert token.json()["subject"] == "admin" and token.json()["via"] == "token"
    assert wrong.status_code == 401
    assert tampered not in wrong.text
