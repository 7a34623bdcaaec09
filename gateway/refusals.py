"""The shape of the gateway's own refusals (401, 403, 404, 405, 421): the protocol's whose
endpoint was asked for, an RFC 9457 problem otherwise (contracts/refusals.py)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from starlette.responses import Response
from starlette.routing import BaseRoute, Match
from starlette.types import Scope

from ..adapters.shared.problem import problem_response
from ..contracts.projector import Adapter
from ..contracts.refusals import (
    Refusal,
    ShapesRefusals,
    claims_paths,
    shapes_refusals,
)


class Refusals:
    """Picks who words a refusal: the adapter whose route the request matches (by path, any
    method), else the one claiming the longest prefix of an unknown path, else nobody."""

    def __init__(self, served: Iterable[tuple[Adapter, Sequence[BaseRoute]]] = ()) -> None:
        self._routes: list[tuple[BaseRoute, ShapesRefusals | None]] = []
        # An adapter may claim paths without a shape of its own (the native API's, under
        # OpenAI's /v1): their refusals are problems, as where nobody claims the path.
        self._prefixes: list[tuple[str, ShapesRefusals | None]] = []
        for adapter, routes in served:
            shaper = adapter if shapes_refusals(adapter) else None
            self._routes.extend((route, shaper) for route in routes)
            if claims_paths(adapter):
                self._prefixes.extend((p.rstrip("/"), shaper) for p in adapter.refusal_prefixes)
        self._prefixes.sort(key=lambda item: len(item[0]), reverse=True)

    def response(self, scope: Scope, refusal: Refusal) -> Response:
        shaper = self.shaper(scope) if scope["type"] == "http" else None
        if shaper is not None:
            answer: Response = shaper.refusal_response(refusal)
            return answer
        return problem_response(refusal.status, refusal.detail, headers=refusal.headers)

    def shaper(self, scope: Scope) -> ShapesRefusals | None:
        for route, shaper in self._routes:
            matched, _ = route.matches(scope)
            if matched is not Match.NONE:
                return shaper
        path: str = scope["path"]
        for prefix, shaper in self._prefixes:
            if path == prefix or path.startswith(prefix + "/"):
                return shaper
        return None


# Every refusal a problem: for a gateway built without adapters, and for tests of one guard.
PROBLEMS = Refusals()
