"""Suite-wide test settings."""

import os

import pytest
from hypothesis import settings

# Every projector of the suite is strict: a protocol hook that raises fails its test instead
# of ending a client's stream with an error (adapters/shared/projector.py, RunProjector.strict).
# An environment variable, so gateways the tests start as child processes are strict too.
os.environ["LOOPGATE_STRICT_PROJECTORS"] = "1"

# Property tests draw the same examples on every run, so a red CI run is the code's doing, not
# a lucky draw; `pytest --hypothesis-profile=explore` looks for new failures with fresh ones.
settings.register_profile("deterministic", derandomize=True, database=None, print_blob=True)
settings.register_profile("explore", derandomize=False, max_examples=500)
settings.load_profile("deterministic")


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    """Every async test runs on asyncio (pydantic-ai's cancellation and uvicorn's are asyncio's);
    session-wide, so module-scoped async fixtures (one shared MCP connection) can use it."""
    return "asyncio"
