"""Hostile input and tolerant payloads (issue 13, items 5, 8, 9 and the JSON-RPC batch bound)."""

from collections.abc import Iterator

import pytest

from tests.gateway.harness import running_gateway


@pytest.fixture(scope="package")
def gateway() -> Iterator[str]:
    """One gateway (a thread, real sockets) for the package's tests that need no settings of
    their own."""
    with running_gateway(max_active_runs=64) as (base, _):
        yield base
