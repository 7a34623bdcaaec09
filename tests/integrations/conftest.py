import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # pydantic-ai's cancellation is asyncio's
