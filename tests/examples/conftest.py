from collections.abc import Iterator

import pytest

from tests.examples.support import HttpLoop, started_http_loop


@pytest.fixture
def http_loop() -> Iterator[HttpLoop]:
    with started_http_loop() as loop:
        yield loop
