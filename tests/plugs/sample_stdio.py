"""The sample loop as a stdio child speaking the gateway's JSON-RPC (``--loop-cmd``).

Inputs beyond the sample's own: ``die`` exits the process, ``spew`` writes a line that is not
JSON-RPC, ``huge N`` writes a ``run.event`` line of N bytes for its run (``huge N anonymous``:
one that names no run), then completes. ``--refuse`` answers every run.start with an error.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import anyio

from tests.plugs.remote_context import RemoteContext
from tests.plugs.sample_loop import sample


async def main(refuse: bool) -> None:
    out = anyio.wrap_file(sys.stdout.buffer)
    lock = anyio.Lock()
    runs: dict[str, RemoteContext] = {}

    async def write(message: dict[str, Any]) -> None:
        async with lock:
            await out.write(json.dumps(message).encode() + b"\n")
            await out.flush()

    def event_writer(run_id: str) -> Any:
        async def send(item: Any) -> None:
            # Anything but an event object goes out as its `kind`, addressed to its run.
            params = (
                {**item, "run_id": run_id}
                if isinstance(item, dict)
                else {"run_id": run_id, "kind": item}
            )
            await write({"jsonrpc": "2.0", "method": "run.event", "params": params})

        return send

    async def serve(ctx: RemoteContext, send: Any) -> None:
        try:
            async for item in sample(ctx):
                await send(item)
        except RuntimeError:
            pass  # "raise": the run just stops
        finally:
            runs.pop(ctx.run_id, None)

    async with anyio.create_task_group() as tg:
        async for line in anyio.wrap_file(sys.stdin.buffer):
            message = json.loads(line)
            method, params = message.get("method"), message.get("params") or {}
            if method == "run.start":
                if refuse:
                    await write(
                        {
                            "jsonrpc": "2.0",
                            "id": message["id"],
                            "error": {"code": -32000, "message": "secret internals"},
                        }
                    )
                    continue
                await write({"jsonrpc": "2.0", "id": message["id"], "result": None})
                word = params["input"].split(" ", 1)[0]
                if word == "die":
                    os._exit(3)
                if word == "spew":
                    await out.write(b"this is not json-rpc\n")
                    await out.flush()
                    continue
                if word == "huge":
                    size, *anonymous = params["input"].split()[1:]
                    async with lock:
                        await write_huge(out, params["run_id"], int(size), bool(anonymous))
                    await event_writer(params["run_id"])(
                        {"kind": "completion", "data": {"status": "completed"}}
                    )
                    continue
                send = event_writer(params["run_id"])
                ctx = RemoteContext(params, send)
                runs[ctx.run_id] = ctx
                tg.start_soon(serve, ctx, send)
            elif method in ("run.cancel", "run.steer", "run.respond"):
                ctx = runs.get(params.get("run_id"))
                if ctx is not None:
                    ctx.command(method.removeprefix("run."), params)
        tg.cancel_scope.cancel()


async def write_huge(out: Any, run_id: str, size: int, anonymous: bool) -> None:
    """One line of ``size`` bytes, written a MiB at a time (the child holds no more)."""
    named = "" if anonymous else f'"run_id":{json.dumps(run_id)},'
    head = f'{{"jsonrpc":"2.0","method":"run.event","params":{{{named}"kind":"content_delta",'
    head += '"data":{"delta":"'
    tail = b'"}}}\n'
    left = size - len(head) - len(tail)
    await out.write(head.encode())
    piece = b"x" * (1 << 20)
    while left > 0:
        await out.write(piece[:left])
        left -= len(piece)
    await out.write(tail)
    await out.flush()


if __name__ == "__main__":
    anyio.run(main, "--refuse" in sys.argv)
