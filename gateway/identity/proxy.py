"""A trusted front proxy (oauth2-proxy, an ingress with auth) that has signed the user in and
names them in request headers (``--trusted-proxy``, docs/auth.md).

Headers are only as good as whoever set them: they are believed from the configured proxies'
addresses alone, judged by the TCP peer (never X-Forwarded-For, which any client writes). The
same header from any other address is refused, not ignored: a deployment whose proxy address
is wrong, or a client that reached the gateway around its proxy, shows up as 401s and
``untrusted_proxy`` audit lines instead of quietly falling through to other credentials.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from typing import Protocol

from ...contracts.principal import DEFAULT_TENANT, Principal, Scope
from .presented import Presented, Rejected

MAX_IDENTITY_CHARS = 256
MAX_GROUPS = 256

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class ProxySettings(Protocol):
    """What the source reads of the settings (gateway/settings.py, the proxy block)."""

    trusted_proxies: list[str]
    proxy_user_header: str
    proxy_email_header: str
    proxy_tenant_header: str | None
    proxy_groups_header: str | None
    proxy_admin_groups: list[str]


class TrustedProxy:
    via = "proxy"

    def __init__(
        self,
        trusted: Sequence[str],
        *,
        user_header: str = "x-forwarded-user",
        email_header: str = "x-forwarded-email",
        tenant_header: str | None = None,
        groups_header: str | None = None,
        admin_groups: Sequence[str] = (),
    ) -> None:
        self.networks: tuple[Network, ...] = tuple(
            ipaddress.ip_network(entry, strict=False) for entry in trusted
        )
        self.user_header = user_header.lower()
        self.email_header = email_header.lower()
        self.tenant_header = tenant_header.lower() if tenant_header else None
        self.groups_header = groups_header.lower() if groups_header else None
        self.admin_groups = frozenset(admin_groups)

    @classmethod
    def from_settings(cls, settings: ProxySettings) -> TrustedProxy:
        return cls(
            settings.trusted_proxies,
            user_header=settings.proxy_user_header,
            email_header=settings.proxy_email_header,
            tenant_header=settings.proxy_tenant_header,
            groups_header=settings.proxy_groups_header,
            admin_groups=settings.proxy_admin_groups,
        )

    def trusts(self, client: str | None) -> bool:
        if client is None:
            return False
        try:
            address = ipaddress.ip_address(client)
        except ValueError:
            return False  # a Unix socket's peer, or no address: not a configured proxy
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped  # ::ffff:10.0.0.5 is 10.0.0.5 on a dual-stack socket
        return any(address in network for network in self.networks)

    async def resolve(self, presented: Presented) -> Principal | None:
        headers = presented.headers
        user = headers.get(self.user_header)
        if user is None:
            return None  # not proxied: an API key or token, perhaps
        if not self.trusts(presented.client):
            raise Rejected(
                "untrusted_proxy",
                f"the {self.user_header} header is taken only from this gateway's trusted "
                "proxies, and this request did not come from one",
            )
        subject = identity(user, self.user_header)
        email = headers.get(self.email_header)
        name = identity(email, self.email_header) if email is not None else None
        tenant = DEFAULT_TENANT
        if self.tenant_header is not None and self.tenant_header in headers:
            tenant = identity(headers[self.tenant_header], self.tenant_header)
        scopes: tuple[Scope, ...] = ("run",)
        if self.groups_header is not None and self.admin_groups:
            raw = headers.get(self.groups_header)
            if raw is not None and self.admin_groups & groups(raw, self.groups_header):
                scopes = ("admin",)
        return Principal(subject=subject, tenant=tenant, scopes=scopes, name=name, via="proxy")


def identity(raw: str, header: str) -> str:
    """A header's value as an identity: UTF-8, trimmed, not empty, printable, not over-long."""
    value = utf8(raw)
    # Printable before trimmed: str.strip would quietly drop control characters at the ends.
    printable = value.isprintable()
    value = value.strip(" ")
    if not printable or not value or len(value) > MAX_IDENTITY_CHARS:
        raise Rejected(
            "bad_identity",
            f"the {header} header must be 1 to {MAX_IDENTITY_CHARS} printable characters",
        )
    return value


def groups(raw: str, header: str) -> frozenset[str]:
    """``a, b,c`` → {a, b, c}; oauth2-proxy writes its groups comma separated."""
    raw = utf8(raw)
    if len(raw) > MAX_IDENTITY_CHARS * MAX_GROUPS or not raw.isprintable():
        raise Rejected("bad_identity", f"the {header} header must be printable, and not huge")
    return frozenset(g.strip() for g in raw.split(",") if g.strip())


def utf8(value: str) -> str:
    """Header values arrive as latin-1 (each byte one character); proxies write UTF-8 names
    (``José``). Bytes that are not UTF-8 stay as they were, and fail the printable check if
    they hold control characters."""
    try:
        return value.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return value
