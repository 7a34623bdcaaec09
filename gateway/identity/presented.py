"""What a request presents to prove who it is, and the shape every credential source has.

A source looks at what was presented and answers with a principal (the credential is one of
its own and is good), None (not one of its own: the next source is asked), or raises
:class:`Rejected` (one of its own, and bad: expired, revoked, wrongly signed). The middleware
(gateway/identity/middleware.py) asks each configured source in turn.
"""

from __future__ import annotations

from typing import Literal, NamedTuple, Protocol

from ...contracts.principal import Principal

# The reason classes a refusal names (never the token, never the library's words).
RejectReason = Literal[
    "malformed",  # not a credential of the shape this source takes
    "expired",  # past its expiry (with the configured clock skew)
    "not_yet_valid",
    "wrong_issuer",
    "wrong_audience",
    "bad_signature",  # unsigned (alg none), signed by an unknown key or wrongly
    "revoked",  # a key revoked in the keys file
    "unknown",  # no key, token or user with this id
    "unavailable",  # what would verify it (a JWKS endpoint) is out of reach for now
    "bad_identity",  # the identity it carries is unusable (empty, control characters)
    "untrusted_proxy",  # proxy headers from an address that is not a configured proxy
]


class Presented(NamedTuple):
    """A request's credentials, read once: the bearer token (header, or ``?token=`` where a
    browser cannot set one), every header, and the peer's address."""

    bearer: str | None
    headers: dict[str, str]  # lower-cased names; the first value of each
    client: str | None  # the peer's IP address (the TCP connection's, not a header's)


class Rejected(Exception):
    """The credential is a source's own, and is not good. ``detail`` says which reason class,
    in words a user can act on; it never repeats the credential."""

    def __init__(self, reason: RejectReason, detail: str, *, status: int = 401) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail
        self.status = status


class CredentialSource(Protocol):
    # How its principals say they were proven ("key", "jwt", "proxy", "token").
    via: str

    async def resolve(self, presented: Presented) -> Principal | None: ...
