"""Span trees of the recorded streams: ``conformance/expected/otel/<stream>.json``.

    python -m conformance.otel            # check, exit 1 on a difference
    python -m conformance.otel --write    # regenerate

A tree is what a dashboard shows, without random ids: each span's name, kind, start and end
(ns after the run span's start), attributes, status, events and children (ordered by start,
then name). Both the projector's records and the spans an SDK exported fold into this form,
so the tests compare real exported spans with the goldens.

The run is traced as a replay of the stream would be (source ``replay``, content capture off),
with the run created at the first event's ``ts``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import msgspec
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

from loopgate.contracts.envelope import Envelope, decode_recording
from loopgate.gateway.telemetry.projector import TraceProjector
from loopgate.gateway.telemetry.records import Record, SpanEnd, SpanEvent, SpanStart, TraceContext

ROOT = Path(__file__).resolve().parent
STREAMS = ROOT / "streams"
EXPECTED = ROOT / "expected" / "otel"

_KIND_NAMES = {SpanKind.INTERNAL: "internal", SpanKind.CLIENT: "client"}


def stream_context(envelopes: Sequence[Envelope], name: str) -> TraceContext:
    run_id = envelopes[0].run_id if envelopes else name
    return TraceContext(
        run_id=run_id,
        thread_id=run_id,
        source="replay",
        created_at=envelopes[0].ts if envelopes else 0,
    )


def project(
    envelopes: Sequence[Envelope], context: TraceContext, *, content: bool = False
) -> list[Record]:
    """Every record of the run; a stream that stops short ends as the hub ends it (with a
    ``failed/truncated`` completion one seq later, at the last event's time)."""
    projector = TraceProjector(context, content=content)
    records = list(projector.start())
    for env in envelopes:
        records.extend(projector.feed(env))
    if not projector.finished and envelopes:
        last = envelopes[-1]
        end = {"status": "failed", "reason": "truncated"}
        records.extend(
            projector.feed(Envelope(last.run_id, last.seq + 1, last.ts, "completion", end))
        )
    return records


def tree_from_records(records: Iterable[Record]) -> dict[str, Any]:
    nodes: dict[str, dict[str, Any]] = {}
    parents: dict[str, str | None] = {}
    order: list[str] = []
    for record in records:
        if isinstance(record, SpanStart):
            nodes[record.key] = _node(
                record.name, record.kind, record.start_ns, dict(record.attributes)
            )
            parents[record.key] = record.parent
            order.append(record.key)
        elif isinstance(record, SpanEnd):
            node = nodes[record.key]
            node["end"] = record.end_ns
            node["attributes"].update(record.attributes)
            if record.error is not None:
                node["status"] = {"code": "error", "description": record.error}
        elif isinstance(record, SpanEvent):
            nodes[record.key]["events"].append(
                {"name": record.name, "ts": record.ts, "attributes": dict(record.attributes)}
            )
    return _assemble(nodes, {k: parents[k] for k in order}, order)


def tree_from_spans(spans: Iterable[ReadableSpan]) -> dict[str, Any]:
    """The tree of one trace's exported spans (the root is the span whose parent was not
    exported: the run span)."""
    nodes: dict[str, dict[str, Any]] = {}
    parents: dict[str, str | None] = {}
    spans = list(spans)
    ids = {f"{s.context.span_id:016x}" for s in spans if s.context is not None}
    for span in spans:
        assert span.context is not None and span.start_time is not None
        key = f"{span.context.span_id:016x}"
        node = _node(
            span.name,
            _KIND_NAMES[span.kind],
            span.start_time,
            {k: list(v) if isinstance(v, tuple) else v for k, v in (span.attributes or {}).items()},
        )
        node["end"] = span.end_time
        if span.status.status_code is StatusCode.ERROR:
            node["status"] = {"code": "error", "description": span.status.description}
        node["events"] = [
            {"name": e.name, "ts": e.timestamp, "attributes": dict(e.attributes or {})}
            for e in span.events
        ]
        nodes[key] = node
        parent = f"{span.parent.span_id:016x}" if span.parent is not None else None
        parents[key] = parent if parent in ids else None
    order = sorted(nodes, key=lambda k: nodes[k]["start"])
    return _assemble(nodes, parents, order)


def _node(name: str, kind: str, start: int, attributes: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": name,
        "kind": kind,
        "start": start,
        "end": None,
        "status": {"code": "unset"},
        "attributes": attributes,
        "events": [],
        "children": [],
    }


def _assemble(
    nodes: dict[str, dict[str, Any]], parents: dict[str, str | None], order: list[str]
) -> dict[str, Any]:
    roots = [k for k in order if parents[k] is None]
    if len(roots) != 1:
        raise ValueError(f"expected one root span, found {len(roots)}")
    for key in order:
        parent = parents[key]
        if parent is not None:
            nodes[parent]["children"].append(nodes[key])
    root = nodes[roots[0]]
    _normalise(root, root["start"])
    return root


def _normalise(node: dict[str, Any], origin: int) -> None:
    node["start"] -= origin
    if node["end"] is not None:
        node["end"] -= origin
    node["attributes"] = dict(sorted(node["attributes"].items()))
    for event in node["events"]:
        event["ts"] -= origin
        event["attributes"] = dict(sorted(event["attributes"].items()))
    for child in node["children"]:
        _normalise(child, origin)
    node["children"].sort(key=lambda c: (c["start"], c["name"]))


def encode_tree(tree: dict[str, Any]) -> bytes:
    return msgspec.json.format(msgspec.json.encode(tree), indent=2) + b"\n"


def load_stream(path: Path) -> list[Envelope]:
    """A recording's envelopes as recorded, unvalidated (odd input must not break tracing)."""
    return decode_recording(path.read_bytes(), path.stem, path.name)


def render_golden(stream: Path) -> bytes:
    envelopes = load_stream(stream)
    return encode_tree(
        tree_from_records(project(envelopes, stream_context(envelopes, stream.stem)))
    )


def golden_path(stream: Path) -> Path:
    return EXPECTED / f"{stream.stem}.json"


def run(*, write: bool) -> list[str]:
    problems: list[str] = []
    streams = sorted(STREAMS.glob("*.jsonl"))
    names = {s.stem for s in streams}
    for stale in sorted(EXPECTED.glob("*.json")):
        if stale.stem not in names:
            if write:
                stale.unlink()
            else:
                problems.append(f"otel: golden {stale.name} has no stream")
    for stream in streams:
        path = golden_path(stream)
        actual = render_golden(stream)
        if write:
            path.parent.mkdir(parents=True, exist_ok=True)
            if not path.exists() or path.read_bytes() != actual:
                path.write_bytes(actual)
        elif not path.exists() or path.read_bytes() != actual:
            problems.append(f"otel: {path.relative_to(ROOT)} differs or is missing")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance.otel", description=__doc__)
    parser.add_argument("--write", action="store_true", help="regenerate instead of checking")
    problems = run(write=parser.parse_args(argv).write)
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        print("regenerate with: python -m conformance.otel --write", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
