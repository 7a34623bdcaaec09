"""The single token (``--token``/``--token-file``): one principal, an admin, as before there
were identities."""

from __future__ import annotations

import hmac

from ...contracts.principal import Principal
from .presented import Presented

# Shorter than this is guessable; blank is a mistake (``LOOPGATE_TOKEN=' '``).
MIN_TOKEN_CHARS = 16

TOKEN_ADMIN = Principal(subject="admin", scopes=("admin",), name="token holder", via="token")


def check_token(token: str, where: str) -> str:
    """``token`` if it is usable as a credential; ValueError naming ``where`` otherwise."""
    if not token.strip() or any(c.isspace() for c in token):
        raise ValueError(f"{where} must be one token without spaces, not blank")
    if len(token) < MIN_TOKEN_CHARS:
        raise ValueError(f"{where} must be at least {MIN_TOKEN_CHARS} characters long")
    return token


class SingleToken:
    via = "token"

    def __init__(self, token: str) -> None:
        self.token = token.encode()

    async def resolve(self, presented: Presented) -> Principal | None:
        bearer = presented.bearer
        if bearer is not None and hmac.compare_digest(bearer.encode(), self.token):
            return TOKEN_ADMIN
        return None
