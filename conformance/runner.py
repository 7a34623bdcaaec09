"""Drive adapters' projectors over the recorded streams; write or check the goldens.

    python -m conformance.runner                 # check every target, exit 1 on a difference
    python -m conformance.runner --write agui    # regenerate conformance/expected/agui/

A stream is ``conformance/streams/<name>.jsonl``: one envelope (``run_id, seq, ts, kind, data``)
per line. Its golden for a target is ``conformance/expected/<target>/<name>.jsonl``: one wire
message (``adapter.to_builtins``) per line, JSON with keys in the adapter's order.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import msgspec

from loopgate.contracts.envelope import Envelope, decode_recording
from loopgate.contracts.projector import Adapter, as_served, project_run

ROOT = Path(__file__).resolve().parent
STREAMS = ROOT / "streams"
EXPECTED = ROOT / "expected"


class Target(msgspec.Struct, frozen=True, kw_only=True):
    """One golden set: which adapter, and what the client is assumed to have negotiated."""

    adapter: str  # "module:ClassName", instantiated without arguments
    protocol_version: str | int | None = None


# One line per golden set; conformance/expected/README.md says why each is configured so.
TARGETS: dict[str, Target] = {
    "agui": Target(adapter="loopgate.adapters.agui:AguiAdapter", protocol_version="1.0"),
    "acp": Target(adapter="loopgate.adapters.acp:AcpAdapter", protocol_version=1),
    "jsonrpc": Target(adapter="loopgate.adapters.jsonrpc:JsonRpcAdapter"),
    "openai": Target(adapter="loopgate.adapters.openai:OpenAIAdapter"),
    "vercel": Target(adapter="loopgate.adapters.vercel:VercelAdapter"),
    "mcp": Target(adapter="loopgate.adapters.mcp:McpAdapter"),
    "a2a": Target(adapter="loopgate.adapters.a2a:A2AAdapter", protocol_version="1.0"),
}

_line_encoder = msgspec.json.Encoder()


def load_adapter(target: Target) -> Adapter:
    module, _, name = target.adapter.partition(":")
    return getattr(importlib.import_module(module), name)()


def stream_paths() -> list[Path]:
    return sorted(STREAMS.glob("*.jsonl"))


def load_stream(path: Path) -> list[Envelope]:
    """Envelopes of a recorded stream, unvalidated: projectors must cope with recorded garbage."""
    return decode_recording(path.read_bytes(), path.stem, path.name)


def project_stream(
    adapter: Adapter,
    envelopes: Iterable[Envelope],
    *,
    protocol_version: str | int | None = None,
    run_id: str | None = None,
    close_reason: str | None = None,
) -> list[Any]:
    """What one subscriber of the run receives, as builtins (see contracts.projector)."""
    messages = project_run(
        adapter,
        envelopes,
        protocol_version=protocol_version,
        run_id=run_id,
        close_reason=close_reason,
    )
    return [adapter.to_builtins(m) for m in messages]


def encode_lines(messages: list[Any]) -> bytes:
    return b"".join(_line_encoder.encode(m) + b"\n" for m in messages)


def golden_path(target: str, stream: Path) -> Path:
    return EXPECTED / target / f"{stream.stem}.jsonl"


def render_golden(target: str, stream: Path) -> bytes:
    spec = TARGETS[target]
    # What a live subscriber receives (`loopgate replay` prints the same): a recording cut
    # short gets the terminal event the hub synthesises.
    messages = project_stream(
        load_adapter(spec), as_served(load_stream(stream)), protocol_version=spec.protocol_version
    )
    return encode_lines(messages)


def regenerate_command(target: str) -> str:
    return f"python -m conformance.runner --write {target}"


def run(targets: list[str], *, write: bool) -> list[str]:
    """Write or check goldens; return the problems found (empty when all match)."""
    problems: list[str] = []
    streams = stream_paths()
    for target in targets:
        names = {s.stem for s in streams}
        for stale in sorted((EXPECTED / target).glob("*.jsonl")):
            if stale.stem not in names:
                if write:
                    stale.unlink()
                else:
                    problems.append(f"{target}: golden {stale.name} has no stream")
        for stream in streams:
            path = golden_path(target, stream)
            actual = render_golden(target, stream)
            if write:
                path.parent.mkdir(parents=True, exist_ok=True)
                if not path.exists() or path.read_bytes() != actual:
                    path.write_bytes(actual)
            elif not path.exists():
                problems.append(f"{target}: missing golden {path.relative_to(ROOT)}")
            elif path.read_bytes() != actual:
                problems.append(f"{target}: {path.relative_to(ROOT)} differs")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance.runner", description=__doc__)
    parser.add_argument("targets", nargs="*", help=f"golden sets (default: all of {list(TARGETS)})")
    parser.add_argument("--write", action="store_true", help="regenerate instead of checking")
    args = parser.parse_args(argv)
    targets = args.targets or list(TARGETS)
    unknown = [t for t in targets if t not in TARGETS]
    if unknown:
        parser.error(f"unknown target(s): {', '.join(unknown)}")
    problems = run(targets, write=args.write)
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        fix = " && ".join(regenerate_command(t) for t in targets)
        print(f"regenerate with: {fix}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
