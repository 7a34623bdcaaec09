"""``loopgate replay``: what an adapter sends for a recording, or the recording as a live run."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import msgspec

from ...contracts.envelope import Envelope
from ...contracts.projector import as_served, project_run
from ..client import unreachable
from ..registry import ALIASES, find_adapter, load_adapters
from ..settings import RECORDINGS
from ..sources.replay import read_recording
from .flags import add_client_token_flags, client_token

PUSH_TIMEOUT_S = 30.0


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "replay",
        help="print an adapter's wire output for a recording, or push it to a server",
        description="Replay a recorded stream (NDJSON envelopes, as `loopgate run --json` "
        "writes) through an adapter, printing the bytes its wire would carry, or into a "
        "running server as a new ingest run.",
    )
    p.add_argument(
        "file",
        type=Path,
        nargs="?",
        help="a recording file (NDJSON envelopes), or the name of one that comes with "
        "loopgate, e.g. parallel-tools (see conformance/streams/README.md)",
    )
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument(
        "--adapter",
        help="adapter name (see `loopgate replay --list`); "
        + ", ".join(f"{old} = {new}" for old, new in ALIASES.items()),
    )
    target.add_argument("--server", help="gateway base URL, e.g. http://127.0.0.1:8000")
    target.add_argument("--list", action="store_true", help="list the adapters and exit")
    p.add_argument("--protocol-version", help="the protocol version the client would ask for")
    p.add_argument(
        "--messages",
        action="store_true",
        help="one JSON message per line instead of the wire bytes (the conformance golden format)",
    )
    add_client_token_flags(p)
    p.set_defaults(func=main)


def recording_path(given: Path) -> Path | None:
    """The file named, else the packaged recording of that name (``parallel-tools``)."""
    if given.exists():
        return given
    packaged = RECORDINGS / f"{given.name.removesuffix('.jsonl')}.jsonl"
    return packaged if given.parent == Path(".") and packaged.is_file() else None


def protocol_version(raw: str | None) -> str | int | None:
    """ACP versions are integers, AG-UI's strings: digits alone mean an integer."""
    return int(raw) if raw is not None and raw.isascii() and raw.isdigit() else raw


def main(args: argparse.Namespace) -> int:
    adapters = load_adapters()
    if args.list:
        print("\n".join(adapters))
        return 0
    if args.file is None:
        print("loopgate replay: name a recording file", file=sys.stderr)
        return 2
    path = recording_path(args.file)
    if path is None:
        known = ", ".join(sorted(p.stem for p in RECORDINGS.glob("*.jsonl")))
        print(
            f"loopgate replay: no file {str(args.file)!r} and no recording of that name; "
            f"recordings: {known}",
            file=sys.stderr,
        )
        return 2
    try:
        envelopes = read_recording(path)
    except ValueError as exc:
        print(f"loopgate replay: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        reason = (exc.strerror or type(exc).__name__).lower()
        print(f"loopgate replay: cannot read {path}: {reason}", file=sys.stderr)
        return 2
    if args.server:
        try:
            token = client_token(args, os.environ)
        except ValueError as exc:
            print(f"loopgate replay: {exc}", file=sys.stderr)
            return 2
        return push_to_server(args.server, envelopes, token)
    adapter = find_adapter(adapters, args.adapter)
    if adapter is None:
        print(
            f"loopgate replay: no adapter {args.adapter!r}; have: {', '.join(adapters)}",
            file=sys.stderr,
        )
        return 2
    messages = project_run(
        adapter, as_served(envelopes), protocol_version=protocol_version(args.protocol_version)
    )
    if args.messages:
        encode = msgspec.json.Encoder().encode
        out = b"".join(encode(adapter.to_builtins(m)) + b"\n" for m in messages)
    else:
        out = adapter.render(messages)
    sys.stdout.buffer.write(out)
    sys.stdout.flush()
    return 0


def push_to_server(base: str, envelopes: list[Envelope], token: str | None) -> int:
    url = urlsplit(base)
    if url.scheme not in ("http", "https") or not url.hostname:
        print(
            "loopgate replay: --server must be an http:// or https:// URL, e.g. "
            f"http://127.0.0.1:8000 (got {base!r})",
            file=sys.stderr,
        )
        return 2
    try:
        return _push(base, envelopes, token)
    except httpx.TransportError as exc:
        print(f"loopgate replay: {unreachable(base, exc)}", file=sys.stderr)
        return 1


def _push(base: str, envelopes: list[Envelope], token: str | None) -> int:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    with httpx.Client(base_url=base.rstrip("/"), headers=headers, timeout=PUSH_TIMEOUT_S) as client:
        started = client.post("/v1/runs", json={"source": "ingest"})
        if started.status_code != 201:
            print(
                f"loopgate replay: server said {started.status_code}: {started.text}",
                file=sys.stderr,
            )
            return 1
        run_id = started.json()["id"]
        body = b"".join(
            msgspec.json.encode({"kind": e.kind, "data": e.data}) + b"\n" for e in envelopes
        )
        pushed = client.post(
            f"/v1/runs/{run_id}/events",
            params={"end": "1"},
            content=body,
            headers={"content-type": "application/x-ndjson"},
        )
        if pushed.status_code != 200:
            print(
                f"loopgate replay: server said {pushed.status_code}: {pushed.text}", file=sys.stderr
            )
            return 1
    print(run_id)
    return 0
