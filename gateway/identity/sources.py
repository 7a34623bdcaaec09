"""The credential sources the settings configure, in the order they are asked."""

from __future__ import annotations

from ..settings import Settings
from .jwt_source import JwtSource
from .keys import ApiKeys
from .presented import CredentialSource
from .proxy import TrustedProxy
from .single_token import SingleToken


def credential_sources(settings: Settings) -> list[CredentialSource]:
    """None configured: the development default (loopback only; Settings.check_listening)."""
    sources: list[CredentialSource] = []
    if settings.trusted_proxies:
        # First: a proxied request's user header is refused from anyone but the proxy, even
        # with a good token beside it.
        sources.append(TrustedProxy.from_settings(settings))
    if settings.keys_file:
        sources.append(ApiKeys(settings.keys_file))
    if settings.jwks_url or settings.jwks_file:
        # Before the single token: a JWT is told apart by its shape, so the token still works.
        sources.append(JwtSource.from_settings(settings))
    if settings.token:
        sources.append(SingleToken(settings.token))
    return sources
