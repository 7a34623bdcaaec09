"""A real MCP server, written with the ``mcp`` SDK's own server API, for the tool-source tests.

    python tests/fakes/mcp_server.py          # stdio
    python tests/fakes/mcp_server.py --http   # streamable HTTP on 127.0.0.1, port printed first

Over HTTP it binds an ephemeral port itself and prints ``PORT <n>`` on stdout once the socket
listens, so a test waits on that line instead of sleeping or guessing a free port.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ImageContent, TextContent, ToolAnnotations
from pydantic import BaseModel

server = MCPServer("loopgate-fake", log_level="WARNING")
notes: dict[str, str] = {"todo": "buy milk"}


class Weather(BaseModel):
    city: str
    celsius: float
    conditions: str


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    return text


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def read_note(name: str) -> str:
    """Read a note by name."""
    if name not in notes:
        raise ToolError(f"no note named {name}")
    return notes[name]


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True))
def delete_note(name: str) -> str:
    """Delete a note."""
    notes.pop(name, None)
    return f"deleted {name}"


@server.tool()
def fail(message: str) -> str:
    """Always fails with the given message."""
    raise ToolError(message)


@server.tool()
async def slow(seconds: float) -> str:
    """Sleep, then answer."""
    await anyio.sleep(seconds)
    return f"slept {seconds}"


@server.tool()
def weather(city: str) -> Weather:
    """Structured weather for a city."""
    return Weather(city=city, celsius=21.5, conditions="sunny")


@server.tool(structured_output=False)
def picture() -> list[TextContent | ImageContent]:
    """A caption and a tiny PNG."""
    return [
        TextContent(type="text", text="a red dot"),
        ImageContent(type="image", data="iVBORw0KGgo=", mime_type="image/png"),
    ]


@server.tool()
def pid() -> int:
    """The server's process id, so a test can kill it."""
    return os.getpid()


@server.tool()
def header(name: str, ctx: Context) -> str:
    """The value of an HTTP request header ("" over stdio or when absent)."""
    return (ctx.headers or {}).get(name.lower(), "")


def serve_http() -> None:
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(server.streamable_http_app(), log_level="warning", http="h11")
    uvicorn.Server(config).run(sockets=[sock])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", action="store_true", help="serve streamable HTTP, not stdio")
    if parser.parse_args().http:
        serve_http()
    else:
        server.run("stdio")


if __name__ == "__main__":
    sys.exit(main())
