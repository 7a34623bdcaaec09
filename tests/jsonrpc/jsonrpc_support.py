"""Shared helpers of the JSON-RPC tests: the spec-example registry, servers and a WS client."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anyio
import msgspec
from starlette.applications import Starlette
from websockets.asyncio.client import ClientConnection, connect

from loopgate.adapters.jsonrpc.dispatch import Dispatcher
from loopgate.adapters.jsonrpc.http import routes
from loopgate.adapters.jsonrpc.limits import RpcLimits
from loopgate.adapters.jsonrpc.methods import METHODS, CallContext, Method, NoParams, method_table
from loopgate.contracts.limits import EndpointLimits
from tests.fakes.servers import serve_app

# --- the TEST-ONLY registry of the specification's examples ------------------------------


class SubtractParams(msgspec.Struct, forbid_unknown_fields=True):
    minuend: int | float
    subtrahend: int | float


async def subtract(ctx: CallContext, p: SubtractParams) -> int | float:
    return p.minuend - p.subtrahend


async def total(ctx: CallContext, values: list[int | float]) -> int | float:
    return sum(values)


async def ignore(ctx: CallContext, values: list[Any]) -> None:
    return None


async def get_data(ctx: CallContext, p: NoParams) -> list[Any]:
    return ["hello", 5]


async def explode(ctx: CallContext, p: NoParams) -> None:
    raise RuntimeError("secret internal detail /etc/passwd")


SPEC_METHODS = method_table(
    *METHODS.values(),
    Method(name="subtract", handler=subtract, params=SubtractParams),
    Method(name="sum", handler=total, params=list[int | float]),
    Method(name="notify_sum", handler=total, params=list[int | float]),
    Method(name="update", handler=ignore, params=list[Any]),
    Method(name="notify_hello", handler=ignore, params=list[Any]),
    Method(name="get_data", handler=get_data),
    Method(name="test.explode", handler=explode),
)


def spec_dispatcher(**limits: Any) -> Dispatcher:
    # The spec's examples never reach the run service.
    return Dispatcher(None, RpcLimits(**limits), SPEC_METHODS)  # type: ignore[arg-type]


@contextmanager
def spec_server(**limits: Any) -> Iterator[str]:
    """POST /rpc on a real uvicorn, with the spec-example methods registered."""
    app = Starlette(routes=routes(spec_dispatcher(**limits), EndpointLimits()))
    with serve_app(app) as base:
        yield base


# --- a small WebSocket JSON-RPC client over the `websockets` library ---------------------


class RpcSocket:
    """Sends requests and collects everything the server sends, in order."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.inbox: list[Any] = []
        self._next = 0

    async def send(self, message: Any) -> None:
        await self.ws.send(message if isinstance(message, str | bytes) else json.dumps(message))

    async def recv(self, within: float = 10) -> Any:
        with anyio.fail_after(within):
            return json.loads(await self.ws.recv())

    async def call(self, method: str, params: Any = None, within: float = 10) -> Any:
        """The response to one request; anything received before it is kept in ``inbox``."""
        self._next += 1
        rid = self._next
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "id": rid}
        if params is not None:
            message["params"] = params
        await self.send(message)
        with anyio.fail_after(within):
            while True:
                received = await self.recv(within)
                if (
                    isinstance(received, dict)
                    and received.get("id") == rid
                    and ("result" in received or "error" in received)
                ):
                    return received
                self.inbox.append(received)

    async def result(self, method: str, params: Any = None) -> Any:
        response = await self.call(method, params)
        assert "result" in response, response
        return response["result"]

    async def until_end(self, subscription: str, within: float = 20) -> list[Any]:
        """Messages of ``subscription`` (from ``inbox`` first) up to its ``run.end``."""
        got: list[Any] = []
        pending = self.inbox
        self.inbox = []
        with anyio.fail_after(within):
            while True:
                message = pending.pop(0) if pending else await self.recv(within)
                params = message.get("params") if isinstance(message, dict) else None
                if isinstance(params, dict) and params.get("subscription") == subscription:
                    got.append(message)
                    if message.get("method") == "run.end":
                        self.inbox.extend(pending)
                        return got
                else:
                    self.inbox.append(message)


def ws_url(base: str) -> str:
    return base.replace("http://", "ws://") + "/rpc/ws"


def rpc_connect(base: str, **kwargs: Any) -> Any:
    return connect(ws_url(base), **kwargs)


def events_of(messages: list[Any]) -> list[dict[str, Any]]:
    return [m["params"]["event"] for m in messages if m.get("method") == "run.event"]


# --- `loopgate rpc` as a child process ------------------------------------------------------


class RpcProcess:
    """``loopgate rpc`` spawned the way an editor or a script would: JSON lines on its pipes."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        import os
        import queue
        import subprocess
        import sys
        import threading

        from tests.gateway.harness import REPO

        self.proc = subprocess.Popen(
            [sys.executable, "-m", "loopgate", "rpc", *args],
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, **(env or {})},
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.stderr = b""

        def pump() -> None:
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                self.lines.put(line)
            self.lines.put(b"")

        threading.Thread(target=pump, daemon=True).start()
        self._next = 0

    def send(self, message: Any) -> None:
        assert self.proc.stdin is not None
        raw = message if isinstance(message, bytes) else json.dumps(message).encode()
        self.proc.stdin.write(raw if raw.endswith(b"\n") else raw + b"\n")
        self.proc.stdin.flush()

    def recv_line(self, timeout: float = 15) -> bytes:
        line = self.lines.get(timeout=timeout)
        assert line, f"loopgate rpc closed its stdout: {self.finish()}"
        return line

    def recv(self, timeout: float = 15) -> Any:
        return json.loads(self.recv_line(timeout))

    def call(self, method: str, params: Any = None) -> tuple[Any, list[Any]]:
        """The response, and whatever came before it."""
        self._next += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "id": self._next}
        if params is not None:
            message["params"] = params
        self.send(message)
        before = []
        while True:
            received = self.recv()
            if (
                isinstance(received, dict)
                and received.get("id") == self._next
                and ("result" in received or "error" in received)
            ):
                return received, before
            before.append(received)

    def finish(self, timeout: float = 15) -> int:
        """Close stdin (EOF) and wait for the process; its stderr is kept in ``stderr``."""
        import subprocess

        if self.proc.stdin and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise
        finally:
            if self.proc.stderr:
                self.stderr = self.proc.stderr.read()
                self.proc.stderr.close()
        return code

    def __enter__(self) -> RpcProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            try:
                self.finish(10)
            except Exception:
                self.proc.kill()
        if self.proc.stdout:
            self.proc.stdout.close()
