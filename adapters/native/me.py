"""``GET /v1/me``: who the gateway takes the caller to be.

The principal the gateway resolved for this request (contracts.principal.current(): an API
key's, a verified token's, a trusted proxy's, the single token's admin, or the machine's own
user on a loopback gateway with no credential configured). A client (the console) asks it to
learn whether it must ask its user for a key, and to say who is signed in. The answer never
holds the credential, and not the principal's quota: what a key may spend is the operator's.
"""

from __future__ import annotations

from typing import Annotated

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ...contracts.principal import Principal, Scope, current

JSON = "application/json"


class MeView(msgspec.Struct, kw_only=True):
    """The caller as the gateway resolved it."""

    subject: Annotated[str, msgspec.Meta(description="who: what runs it starts are owned by")]
    tenant: Annotated[str, msgspec.Meta(description="the organisation it belongs to")]
    scopes: Annotated[
        list[Scope],
        msgspec.Meta(description="`admin`: every run; `run`: start and control its own; `read`"),
    ]
    name: Annotated[
        str | None, msgspec.Meta(description="a display name (an API key's name), if any")
    ]
    via: Annotated[
        str,
        msgspec.Meta(
            description="how it was proven: `key`, `jwt`, `proxy`, `token`, or `local` (no "
            "credential configured, on loopback)"
        ),
    ]


def me_view(principal: Principal) -> MeView:
    return MeView(
        subject=principal.subject,
        tenant=principal.tenant,
        scopes=list(principal.scopes),
        name=principal.name,
        via=principal.via,
    )


def routes() -> list[BaseRoute]:
    async def get_me(request: Request) -> Response:
        return Response(msgspec.json.encode(me_view(current())), media_type=JSON)

    return [Route("/v1/me", get_me, methods=["GET"])]
