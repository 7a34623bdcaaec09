"""A --tools module for the loop scope test: a tool that makes an HTTP request of its own."""

from __future__ import annotations

import httpx

# Set by the test: where the tool's request goes.
TARGET: dict[str, str] = {}


async def fetch(path: str) -> str:
    """Fetch a path from the test server.

    Args:
        path: The path to fetch.
    """
    async with httpx.AsyncClient() as client:
        return (await client.get(f"{TARGET['url']}/{path}")).text
