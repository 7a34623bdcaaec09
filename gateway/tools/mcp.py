"""An MCP server as a tool source, through the official ``mcp`` SDK (stdio or streamable HTTP).

The SDK's client transports are async context managers on anyio task groups, which must be
exited by the task that entered them. So one owner task per server holds the connection: it
enters the transport and the session, reports readiness (or why not), and waits to be told to
close. Calls may come from any task; every wait is bounded.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any, TextIO

import anyio
import msgspec
from anyio.abc import TaskGroup
from mcp import Client, MCPError, StdioServerParameters
from mcp import types as mcp_types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from loopgate import __version__

from ...contracts.messages import ToolCall, ToolSpec
from ..reference.tools import ToolMeta, ToolMetaLookup
from ..reference.types import LoopContext, ToolResult
from .mcp_specs import McpOptions, McpServerSpec, ToolSourceError

log = logging.getLogger("loopgate.tools")

MAX_TOOL_PAGES = 100  # a server whose tools/list never ends cannot hang a connect
MAX_ERROR_CHARS = 2000

CLIENT_INFO = mcp_types.Implementation(name="loopgate", version=__version__)


class McpTools(ToolMetaLookup):
    """The tools of one MCP server as a ``ToolExecutor``; ``start`` it in a task group first."""

    def __init__(
        self,
        spec: McpServerSpec,
        options: McpOptions | None = None,
        *,
        stderr: TextIO | None = None,
    ) -> None:
        """``stderr`` receives a stdio server's stderr; by default ours when it is a real file,
        else nothing. It is handed to the child as a file, never piped through us, so a chatty
        server cannot fill a pipe and hang."""
        self.spec = spec
        self.options = options if options is not None else McpOptions()
        self.source = f"MCP server {spec.name!r}"
        self._stderr = stderr
        self._tools: dict[str, tuple[ToolSpec, ToolMeta]] = {}
        self._client: Client | None = None
        self._started = False
        self._lost = False
        self._failure: str | None = None
        self._ready = anyio.Event()
        self._stop = anyio.Event()
        self._exited = anyio.Event()
        self._scope = anyio.CancelScope()

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def connected(self) -> bool:
        return self._client is not None and not self._lost

    # --- lifecycle ----------------------------------------------------------------------------

    async def start(self, task_group: TaskGroup) -> None:
        """Connect, initialize and list tools, with the connection owned by a task in
        ``task_group``. Raises :class:`ToolSourceError` (the owner then winds down on its own)."""
        if self._started:
            raise RuntimeError(f"{self.source} was already started")
        self._started = True
        task_group.start_soon(self._own, name=f"mcp:{self.spec.name}")
        timeout = self.options.connect_timeout_s
        try:
            with anyio.move_on_after(timeout):
                await self._ready.wait()
        except BaseException:
            self._scope.cancel()
            raise
        if not self._ready.is_set():
            self._scope.cancel()
            raise self._unusable(
                f"{self.source} did not answer initialize within {_seconds(timeout)} s"
            )
        if self._failure is not None:
            raise self._unusable(self._failure)

    def _unusable(self, why: str) -> ToolSourceError:
        """The cause to the log, one sentence to the client whatever it was: a client that
        names a URL must not learn a closed port from an open one that is no MCP server, nor a
        filtered one from either (a port scan of the gateway's network)."""
        log.warning("%s", why)
        return ToolSourceError(f"{self.source} could not be used (the gateway's log says why)")

    async def aclose(self) -> None:
        """Close the connection and wait (bounded) for the owner task to finish."""
        self._lost = True  # no new calls on a connection that is going away
        self._stop.set()
        if not self._started:
            return
        if not self._ready.is_set():
            self._scope.cancel()  # still connecting: nothing to close gracefully
        # Shielded but bounded: closing must finish even when the caller is being cancelled,
        # or a server process would outlive its session.
        with anyio.CancelScope(shield=True):
            with anyio.move_on_after(self.options.close_timeout_s):
                await self._exited.wait()
            if not self._exited.is_set():
                self._scope.cancel()
                with anyio.move_on_after(self.options.close_timeout_s):
                    await self._exited.wait()
        if not self._exited.is_set():
            log.warning("%s did not shut down in time", self.source)

    async def wait_closed(self) -> None:
        """Wait until the owner task has let go of the connection (after a close or a loss)."""
        if self._started:
            await self._exited.wait()

    @classmethod
    @asynccontextmanager
    async def connect(
        cls, spec: McpServerSpec, options: McpOptions | None = None, *, stderr: TextIO | None = None
    ) -> AsyncIterator[McpTools]:
        """``async with McpTools.connect(spec) as tools:`` — a connection with its own owner."""
        tools = cls(spec, options, stderr=stderr)
        async with anyio.create_task_group() as tg:
            try:
                await tools.start(tg)
                yield tools
            finally:
                await tools.aclose()

    async def _own(self) -> None:
        try:
            with self._scope:
                async with AsyncExitStack() as stack:
                    client = await stack.enter_async_context(self._client_for(stack))
                    await self._list_tools(client)
                    self._client = client
                    self._ready.set()
                    await self._stop.wait()
        except Exception as exc:
            self._ended_by(exc)
        except BaseExceptionGroup as group:
            # Errors mixed with a cancellation: the errors are the story; never let them out
            # into the caller's task group.
            errors = group.subgroup(Exception)
            if errors is None:
                raise
            self._ended_by(errors)
        finally:
            self._client = None
            self._lost = True
            if not self._ready.is_set() and self._failure is None:
                self._failure = f"{self.source} was closed before it was ready"
            self._ready.set()
            self._exited.set()

    def _ended_by(self, exc: Exception) -> None:
        if self._ready.is_set():
            log.warning("%s disconnected (%s)", self.source, _summary(exc))
        else:
            self._failure = self._explain(exc)

    def _client_for(self, stack: AsyncExitStack) -> Client:
        spec = self.spec
        if spec.command is not None:
            params = StdioServerParameters(
                command=spec.command, args=list(spec.args), env=dict(spec.env), cwd=spec.cwd
            )
            errlog = self._stderr if self._stderr is not None else _our_stderr()
            if errlog is None:
                errlog = stack.enter_context(open(os.devnull, "w"))  # noqa: SIM115
            transport = stdio_client(params, errlog=errlog)
        else:
            assert spec.url is not None
            http = create_mcp_http_client(headers=dict(spec.headers))
            stack.push_async_callback(http.aclose)
            transport = streamable_http_client(spec.url, http_client=http)
        # No response cache: the tool list is read once per connection and kept here.
        return Client(transport, cache=None, mode=self.options.protocol, client_info=CLIENT_INFO)

    async def _list_tools(self, client: Client) -> None:
        caps = client.server_capabilities
        if caps.tools is None:
            return
        cursor: str | None = None
        seen: set[str] = set()
        for _ in range(MAX_TOOL_PAGES):
            page = await client.list_tools(cursor=cursor)
            for tool in page.tools:
                if tool.name in self._tools:
                    log.warning("%s lists tool %r twice; the first is kept", self.source, tool.name)
                    continue
                self._tools[tool.name] = (_tool_spec(tool), _tool_meta(tool))
            cursor = page.next_cursor
            if cursor is None or cursor in seen:
                return
            seen.add(cursor)
        log.warning(
            "%s: more than %d pages of tools; the rest is ignored", self.source, MAX_TOOL_PAGES
        )

    def _explain(self, exc: BaseException) -> str:
        """Why a connection failed, in our own words (never exception text from inside), for
        the log: clients read only that the server could not be used (``_unusable``)."""
        spec = self.spec
        causes = list(_leaves(exc))
        for cause in causes:
            if isinstance(cause, OSError) and spec.command is not None:
                if spec.cwd is not None and not os.path.isdir(spec.cwd):
                    why = f"working directory not found: {spec.cwd}"
                elif isinstance(cause, FileNotFoundError):
                    why = f"command not found: {spec.command}"
                elif isinstance(cause, PermissionError):
                    why = f"permission denied: {spec.command}"
                else:
                    why = os.strerror(cause.errno) if cause.errno else type(cause).__name__
                return f"{self.source} could not be started: {why}"
        for cause in causes:
            if isinstance(cause, MCPError):
                if cause.code == mcp_types.CONNECTION_CLOSED:
                    if spec.command is not None:
                        return f"{self.source} exited during start"
                    return f"{self.source} closed the connection during initialize"
                if cause.code == mcp_types.REQUEST_TIMEOUT:
                    return f"{self.source} did not answer initialize in time"
                return f"{self.source} answered initialize with an error (code {cause.code})"
            names = {k.__name__ for k in type(cause).__mro__}
            # httpx2's errors, known by name: the SDK's HTTP client is not our dependency.
            if "ConnectError" in names:
                return f"{self.source} could not be reached at {spec.url} (connection failed)"
            if "TimeoutException" in names:
                return f"{self.source} did not answer at {spec.url} in time"
            if "HTTPError" in names or "StreamError" in names:
                return f"{self.source}: HTTP error talking to {spec.url} ({type(cause).__name__})"
        log.error("%s could not be connected", self.source, exc_info=exc)
        return f"{self.source} could not be connected (unexpected error; see the gateway log)"

    # --- the ToolExecutor port ----------------------------------------------------------------

    def specs(self) -> list[ToolSpec]:
        return [spec for spec, _ in self._tools.values()]

    def meta(self, name: str) -> ToolMeta | None:
        entry = self._tools.get(name)
        return entry[1] if entry else None

    async def execute(self, call: ToolCall, ctx: LoopContext) -> ToolResult:
        if call.name not in self._tools:
            return ToolResult(success=False, error=f"unknown tool {call.name!r}")
        client = self._client
        if client is None or self._lost:
            return self._not_connected()
        timeout = self.options.call_timeout_s
        result: mcp_types.CallToolResult | None = None  # stays None when the call times out
        try:
            with anyio.move_on_after(timeout):
                result = await client.call_tool(call.name, call.arguments)
        except MCPError as exc:
            if exc.code == mcp_types.CONNECTION_CLOSED:
                return self._lose()
            if exc.code == mcp_types.REQUEST_TIMEOUT:
                return self._timed_out(call, timeout)
            # The peer's own JSON-RPC error (unknown tool, invalid params): meant for clients.
            return ToolResult(success=False, error=f"{call.name}: {_clip(exc.message)}")
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return self._lose()
        except Exception:
            log.exception("%s: tools/call %s failed", self.source, call.name)
            return ToolResult(success=False, error=f"{call.name} failed with an internal error")
        if result is None:
            return self._timed_out(call, timeout)
        return _tool_result(call.name, result)

    def _not_connected(self) -> ToolResult:
        return ToolResult(success=False, error=f"{self.source} is not connected")

    def _lose(self) -> ToolResult:
        if not self._lost:
            log.warning("%s closed the connection", self.source)
        self._lost = True
        self._stop.set()  # let the owner wind the transport down (and reap a child process)
        return self._not_connected()

    def _timed_out(self, call: ToolCall, timeout: float) -> ToolResult:
        return ToolResult(
            success=False,
            error=f"{self.source}: {call.name} timed out after {_seconds(timeout)} s",
        )


async def start_all(tools: Sequence[McpTools], task_group: TaskGroup) -> None:
    """Start several servers at once, owned by ``task_group``. If any fails, one
    :class:`ToolSourceError` names every failure; closing them all is the caller's part."""
    errors: list[str] = []

    async def start(one: McpTools) -> None:
        try:
            await one.start(task_group)
        except ToolSourceError as exc:
            errors.append(exc.message)

    async with anyio.create_task_group() as starting:
        for one in tools:
            starting.start_soon(start, one)
    if errors:
        raise ToolSourceError("; ".join(sorted(errors)))


# --- conversions ------------------------------------------------------------------------------


def _tool_spec(tool: mcp_types.Tool) -> ToolSpec:
    schema = tool.input_schema if isinstance(tool.input_schema, dict) else {}
    return ToolSpec(
        name=tool.name,
        description=tool.description or tool.title or "",
        parameters=schema or {"type": "object", "properties": {}},
    )


def _tool_meta(tool: mcp_types.Tool) -> ToolMeta:
    hints = tool.annotations
    if hints is not None and hints.read_only_hint is True:
        return ToolMeta(kind="read", concurrency_safe=True)
    # Only an explicit destructiveHint asks first: the spec's default (true) would put every
    # unannotated tool behind a prompt.
    if hints is not None and hints.destructive_hint is True:
        return ToolMeta(kind="edit", needs_approval=True)
    return ToolMeta(kind="other")


def _tool_result(name: str, result: mcp_types.CallToolResult) -> ToolResult:
    text = "\n".join(_describe(block) for block in result.content)
    data = result.structured_content
    if result.is_error:
        return ToolResult(success=False, error=_clip(text) or f"{name} reported an error")
    if not text and data is not None:
        text = msgspec.json.encode(data).decode()
    return ToolResult(success=True, content=text, data=data)


def _describe(block: Any) -> str:
    if isinstance(block, mcp_types.TextContent):
        return block.text
    if isinstance(block, mcp_types.ImageContent | mcp_types.AudioContent):
        return f"[{block.type} {block.mime_type}]"
    if isinstance(block, mcp_types.ResourceLink):
        return f"[resource {block.uri}]"
    if isinstance(block, mcp_types.EmbeddedResource):
        contents = block.resource
        if isinstance(contents, mcp_types.TextResourceContents):
            return f"[resource {contents.uri}]\n{contents.text}"
        return f"[resource {contents.uri} {contents.mime_type or 'binary'}]"
    return f"[{getattr(block, 'type', 'content')}]"


# --- helpers ----------------------------------------------------------------------------------


def _our_stderr() -> TextIO | None:
    """Our stderr when it is a real file a child can inherit (not e.g. a test's StringIO)."""
    try:
        sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return None
    return sys.stderr


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    else:
        yield exc


def _summary(exc: BaseException) -> str:
    return ", ".join(sorted({type(leaf).__name__ for leaf in _leaves(exc)}))


def _seconds(value: float) -> str:
    return f"{value:g}"


def _clip(text: str) -> str:
    return text if len(text) <= MAX_ERROR_CHARS else text[:MAX_ERROR_CHARS] + "…"
