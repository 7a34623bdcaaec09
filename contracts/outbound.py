"""Where a client may have the gateway send requests: the operator's allowlist of outbound URLs.

A client on the network that names a URL (an ACP session's http MCP server; later an A2A push
webhook or an attachment to fetch) makes the gateway connect from inside the operator's network:
without a list, to anything the gateway can reach (cloud metadata, admin ports, a port scan).
So such clients may name only URLs the operator allowed. Here, in contracts, because adapters
decide it (before anything is contacted) and never import the gateway; gateway/outbound.py
builds the policy from the settings.

An entry is either a URL prefix (``https://mcp.example.com/tools/``: same scheme, host and
port, and a path under it, segment by segment) or a ``host[:port]`` pattern (``mcp.internal``,
``mcp.internal:8443``, ``*.example.com``: http or https; without a port, the scheme's default
one). ``*`` allows every URL. Names are compared as written: the list is about what a client
may name, and a host's name is the operator's to trust.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import msgspec

DEFAULT_PORTS = {"http": 80, "https": 443}
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


class OutboundPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """``unrestricted``: any URL (a local client: stdio, or a loopback gateway with no
    credentials, whose user could reach those URLs themselves); else only ``allowed``."""

    allowed: tuple[str, ...] = ()
    unrestricted: bool = False

    def allows(self, url: str) -> bool:
        if self.unrestricted:
            return True
        target = _Target.of(url)
        return target is not None and any(_matches(entry, target) for entry in self.allowed)

    def webhook_refusal(self, url: str) -> str | None:
        """Why the gateway will not POST to ``url`` (a client's webhook), or None when it will.
        Unrestricted is loopback only here: a webhook is sent later, on the gateway's own, so
        not even a local user's reach is a reason to send it anywhere else."""
        parts = urlsplit(url)
        if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
            return "the webhook must be an http(s) URL"
        if parts.username is not None or parts.password is not None:
            # Where it goes must be plain to see, and a password in the URL would be logged.
            return "the webhook's URL may not carry a user or password (use its path or query)"
        allowed = parts.hostname in LOOPBACK if self.unrestricted else self.allows(url)
        if allowed:
            return None
        return (
            "this gateway does not send webhooks there; the operator allows hosts with "
            "allowed_outbound (a gateway without credentials: loopback only)"
        )


def check_outbound_entry(entry: str) -> str:
    """``entry`` if it is a URL prefix or host[:port] pattern; ValueError saying why not."""
    if entry == "*":
        return entry
    if "://" in entry:
        parts = urlsplit(entry)
        try:
            port = parts.port
        except ValueError:
            port = -1
        if (
            parts.scheme not in DEFAULT_PORTS
            or not parts.hostname
            or port == -1
            or parts.username is not None
            or parts.query
            or parts.fragment
        ):
            raise ValueError(
                f"allowed_outbound: {entry!r} is not an http(s) URL prefix without user, query "
                "or fragment (e.g. https://mcp.example.com/)"
            )
        return entry
    host, port_text = _split_host_port(entry)
    if not host or (port_text is not None and not _port(port_text)) or "/" in entry:
        raise ValueError(
            f"allowed_outbound: {entry!r} is neither a URL prefix (https://host/path/) nor a "
            "host[:port] pattern (mcp.internal, mcp.internal:8443, *.example.com)"
        )
    return entry


class _Target(msgspec.Struct, frozen=True):
    scheme: str
    host: str
    port: int
    path: str

    @classmethod
    def of(cls, url: str) -> _Target | None:
        parts = urlsplit(url)
        try:
            port = parts.port
        except ValueError:
            return None
        if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
            return None
        if parts.username is not None or parts.password is not None:
            return None  # userinfo is how "https://allowed@elsewhere/" hides where it goes
        return cls(
            parts.scheme,
            parts.hostname.rstrip("."),
            port if port is not None else DEFAULT_PORTS[parts.scheme],
            parts.path or "/",
        )


def _matches(entry: str, target: _Target) -> bool:
    if entry == "*":
        return True
    if "://" in entry:
        prefix = _Target.of(entry)
        if prefix is None or (prefix.scheme, prefix.host, prefix.port) != (
            target.scheme,
            target.host,
            target.port,
        ):
            return False
        base = prefix.path
        if base.endswith("/"):
            return target.path.startswith(base)
        # "https://h/api" allows /api and /api/…, not /apiary.
        return target.path == base or target.path.startswith(base + "/")
    host, port_text = _split_host_port(entry)
    port = _port(port_text) if port_text is not None else DEFAULT_PORTS[target.scheme]
    if port != target.port:
        return False
    if host.startswith("*."):
        return target.host.endswith(host[1:]) and len(target.host) > len(host) - 1
    return target.host == host


def _split_host_port(entry: str) -> tuple[str, str | None]:
    """``host``, ``host:port``, ``[v6]`` or ``[v6]:port`` → (lower-cased host, port text)."""
    entry = entry.strip().lower()
    if entry.startswith("["):
        host, _, rest = entry[1:].partition("]")
        return host, rest[1:] if rest.startswith(":") else None
    host, sep, port = entry.rpartition(":")
    if not sep or ":" in host:
        return entry.rstrip("."), None
    return host.rstrip("."), port


def _port(text: str) -> int | None:
    return int(text) if text.isdigit() and 0 < int(text) < 65536 else None
