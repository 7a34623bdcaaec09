"""The checks of the settings that say who is calling (docs/auth.md): the JWKS a token is
verified with, and the trusted proxies' addresses and headers."""

from __future__ import annotations

import ipaddress
import re
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from .settings import Settings


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_jwt_settings(settings: Settings) -> None:
    """A JWKS from one place, fetched safely, with the issuer and audience a token must name
    (without them any token the provider signs for anyone would do)."""
    if settings.jwks_url and settings.jwks_file:
        raise ValueError("give --jwks-url or --jwks-file, not both")
    if settings.jwt_leeway_s < 0:
        raise ValueError(f"jwt_leeway_s must not be negative, got {settings.jwt_leeway_s}")
    if not settings.jwt_tenant_claim.strip():
        raise ValueError("jwt_tenant_claim must name a claim, not be blank")
    if not (settings.jwks_url or settings.jwks_file):
        given = [n for n in ("jwt_issuer", "jwt_audience") if getattr(settings, n)]
        if given:
            raise ValueError(
                f"{' and '.join(given)} given without a JWKS: set --jwks-url or --jwks-file"
            )
        return
    missing = [n for n in ("jwt_issuer", "jwt_audience") if not getattr(settings, n)]
    if missing:
        flags = " and ".join("--" + n.replace("_", "-") for n in missing)
        raise ValueError(
            f"a JWKS needs {flags} too: a token is taken only when it names both (else any "
            "token its provider signs, for any service, would do)"
        )
    if settings.jwks_url:
        url = urlsplit(settings.jwks_url)
        if url.scheme not in ("https", "http") or not url.hostname:
            raise ValueError(f"jwks_url must be an https:// URL, got {settings.jwks_url!r}")
        if url.scheme == "http" and not is_loopback(url.hostname):
            # Keys fetched in the clear could be swapped on the way for an attacker's.
            raise ValueError(
                "jwks_url must use https (http only to this machine: 127.0.0.1, ::1, "
                f"localhost), got {settings.jwks_url!r}"
            )


PROXY_HEADERS = (
    "proxy_user_header",
    "proxy_email_header",
    "proxy_tenant_header",
    "proxy_groups_header",
)
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9a-z-]+")


def proxy_network(entry: str) -> str:
    """A trusted proxy's address or network, as ipaddress writes it; ValueError if it is none."""
    try:
        return str(ipaddress.ip_network(entry.strip(), strict=False))
    except ValueError:
        raise ValueError(
            f"trusted_proxies: {entry!r} is not an IP address or network (e.g. 10.0.0.5, "
            "10.0.0.0/8, ::1)"
        ) from None


def check_header_name(header: str, setting: str) -> str:
    name = header.strip().lower()
    if not _HEADER_NAME.fullmatch(name):
        raise ValueError(f"{setting}: {header!r} is not an HTTP header name")
    return name
