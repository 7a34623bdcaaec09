"""Suite-wide test settings, and the fixtures most modules share."""

import os
from collections.abc import Iterator

import pytest
from hypothesis import settings

from tests.gateway.harness import running_gateway

# Every projector of the suite is strict: a protocol hook that raises fails its test instead
# of ending a client's stream with an error (adapters/shared/projector.py, RunProjector.strict).
# An environment variable, so gateways the tests start as child processes are strict too.
os.environ["LOOPGATE_STRICT_PROJECTORS"] = "1"

# Property tests draw the same examples on every run, so a red CI run is the code's doing, not
# a lucky draw; `pytest --hypothesis-profile=explore` looks for new failures with fresh ones.
settings.register_profile("deterministic", derandomize=True, database=None, print_blob=True)
settings.register_profile("explore", derandomize=False, max_examples=500)
settings.load_profile("deterministic")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "gateway(**settings): the settings of the module's `gateway` fixture"
    )


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    """Every async test runs on asyncio (pydantic-ai's cancellation and uvicorn's are asyncio's);
    session-wide, so module-scoped async fixtures (one shared MCP connection) can use it."""
    return "asyncio"


@pytest.fixture(scope="module")
def gateway(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """One real gateway for a module's tests (uvicorn on 127.0.0.1 in a thread:
    tests/gateway/harness.py), its base URL. Its settings are the module's
    ``pytestmark = pytest.mark.gateway(**settings)``, the defaults without one; its workspace
    (where the demo tools write) a directory of its own."""
    marker = request.node.get_closest_marker("gateway")
    overrides = {"workspace": str(tmp_path_factory.mktemp("workspace"))}
    with running_gateway(**{**overrides, **(marker.kwargs if marker else {})}) as (base, _):
        yield base
