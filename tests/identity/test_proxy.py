"""A trusted front proxy names the user in headers: believed from the configured proxies' TCP
addresses only, refused (not ignored) from any other, and checked for unusable values."""

from __future__ import annotations

import socket
from pathlib import Path

import httpx
import pytest

from loopgate.gateway.identity.presented import Presented, Rejected
from loopgate.gateway.identity.proxy import TrustedProxy
from loopgate.gateway.settings import Settings, load_settings
from tests.gateway.harness import gateway_process, running_gateway
from tests.identity.audit_capture import captured_audit
from tests.identity.principals import write_test_keys

ALICE = {"x-forwarded-user": "alice", "x-forwarded-email": "alice@acme.example"}
BOB = {"x-forwarded-user": "bob"}


def start(http: httpx.Client, headers: dict[str, str]) -> httpx.Response:
    return http.post("/v1/runs", json={"input": "hi"}, headers=headers)


def test_a_trusted_proxys_users_own_their_runs() -> None:
    settings = {
        "trusted_proxies": ["127.0.0.1"],
        "proxy_tenant_header": "x-forwarded-tenant",
        "proxy_groups_header": "x-forwarded-groups",
        "proxy_admin_groups": ["ops"],
    }
    with (
        running_gateway(**settings) as (base, _),
        httpx.Client(base_url=base, timeout=10) as http,
    ):
        mine = start(http, {**ALICE, "x-forwarded-tenant": "acme"})
        assert mine.status_code in (200, 201), mine.text
        run = mine.json()
        assert run["owner"] == {"subject": "alice", "tenant": "acme"}
        # The same name in another tenant is someone else.
        assert http.get(f"/v1/runs/{run['id']}", headers=ALICE).status_code == 404
        assert http.get(f"/v1/runs/{run['id']}", headers=BOB).status_code == 404
        other = start(http, BOB).json()
        assert other["owner"] == {"subject": "bob", "tenant": "default"}
        listed = http.get("/v1/runs", headers={**ALICE, "x-forwarded-tenant": "acme"}).json()
        assert [r["id"] for r in listed["runs"]] == [run["id"]]
        # A group named in proxy_admin_groups makes an admin, who sees every run.
        admin = {"x-forwarded-user": "carol", "x-forwarded-groups": "dev, ops"}
        seen = {r["id"] for r in http.get("/v1/runs", headers=admin).json()["runs"]}
        assert {run["id"], other["id"]} <= seen
        plain = {"x-forwarded-user": "dave", "x-forwarded-groups": "dev,opsx"}
        assert http.get("/v1/runs", headers=plain).json()["runs"] == []
        # Through the proxy but with no user: no credentials.
        assert http.get("/v1/runs").status_code == 401


def test_proxy_headers_from_an_address_that_is_no_proxy_are_refused(tmp_path: Path) -> None:
    keys = write_test_keys(tmp_path / "keys.json")
    settings = {"trusted_proxies": ["10.0.0.0/8"], "keys_file": str(tmp_path / "keys.json")}
    with (
        captured_audit() as audit,
        running_gateway(**settings) as (base, _),
        httpx.Client(base_url=base, timeout=10) as http,
    ):
        # X-Forwarded-For is anyone's to write: the TCP peer (127.0.0.1) is what counts.
        refused = http.get("/v1/runs", headers={**ALICE, "x-forwarded-for": "10.0.0.5"})
        assert refused.status_code == 401
        problem = refused.json()
        assert "trusted proxies" in problem["detail"] and "alice" not in problem["detail"]
        # Refused even beside a good key: a client that went around the proxy shows up.
        both = {**ALICE, **keys["alice"].headers}
        assert http.get("/v1/runs", headers=both).status_code == 401
        # Without the header, the other sources answer as ever.
        assert http.get("/v1/runs", headers=keys["alice"].headers).status_code == 200
    assert audit.reasons().count("untrusted_proxy") == 2


@pytest.mark.parametrize(
    "user",
    [
        "a" * 257,
        "ali\tce",
        "   ",
        "\xc2\x85alice",  # U+0085 (NEL), a control character, as its UTF-8 bytes
    ],
)
def test_unusable_identities_are_refused(user: str) -> None:
    with (
        running_gateway(trusted_proxies=["127.0.0.1/32"]) as (_, server),
        socket.create_connection(("127.0.0.1", server.config.port), 10) as sock,
    ):
        # Raw bytes: HTTP clients refuse to send some of these.
        sock.sendall(
            b"GET /v1/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
            + b"X-Forwarded-User: "
            + user.encode("latin-1")
            + b"\r\n\r\n"
        )
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.split()[1] == b"401", head
    assert b"printable characters" in body


def test_utf8_names_are_read_as_utf8() -> None:
    with (
        running_gateway(trusted_proxies=["127.0.0.0/8"]) as (base, _),
        httpx.Client(base_url=base, timeout=10) as http,
    ):
        run = http.post(
            "/v1/runs", json={"input": "hi"}, headers={"x-forwarded-user": "José".encode()}
        ).json()
    assert run["owner"]["subject"] == "José"


@pytest.mark.anyio
async def test_dual_stack_and_unix_peers() -> None:
    proxy = TrustedProxy(["10.0.0.0/8", "fd00::1"])
    assert proxy.trusts("10.1.2.3") and proxy.trusts("::ffff:10.1.2.3") and proxy.trusts("fd00::1")
    assert not proxy.trusts("11.0.0.1") and not proxy.trusts(None) and not proxy.trusts("sock")
    got = await proxy.resolve(Presented(None, {"x-forwarded-user": " al "}, "10.0.0.1"))
    assert got is not None and (got.subject, got.tenant, got.via) == ("al", "default", "proxy")
    assert got.scopes == ("run",)
    assert await proxy.resolve(Presented("tok", {}, "10.0.0.1")) is None
    with pytest.raises(Rejected) as info:
        await proxy.resolve(Presented(None, {"x-forwarded-user": "al"}, "192.0.2.1"))
    assert info.value.reason == "untrusted_proxy"


def test_the_settings_and_flags() -> None:
    env = {"LOOPGATE_TRUSTED_PROXIES": "10.0.0.5, 192.168.0.0/16", "LOOPGATE_HOST": "0.0.0.0"}
    settings = load_settings(env)
    assert settings.trusted_proxies == ["10.0.0.5/32", "192.168.0.0/16"]
    assert settings.has_credentials
    settings.check_listening()  # a proxy is a credential source: it may listen beyond loopback
    with pytest.raises(ValueError, match="not an IP address or network"):
        load_settings({"LOOPGATE_TRUSTED_PROXIES": "proxy.internal"})
    with pytest.raises(ValueError, match="not an HTTP header name"):
        Settings(trusted_proxies=["10.0.0.1"], proxy_user_header="x user")
    admins = load_settings({"LOOPGATE_PROXY_ADMIN_GROUPS": "ops, sre"}).proxy_admin_groups
    assert admins == ["ops", "sre"]


def test_serve_flags_name_the_proxy_and_its_header() -> None:
    flags = ("--trusted-proxy", "192.0.2.7", "--trusted-proxy", "127.0.0.1")
    with (
        gateway_process(*flags, "--proxy-user-header", "X-Auth-User") as (base, _),
        httpx.Client(base_url=base, timeout=10) as http,
    ):
        run = start(http, {"x-auth-user": "erin"})
        assert run.status_code in (200, 201), run.text
        assert run.json()["owner"]["subject"] == "erin"
        # The default header means nothing now: no credentials.
        assert http.get("/v1/runs", headers=BOB).status_code == 401
