"""A minimal OTLP/HTTP receiver: ``POST /v1/traces`` and ``/v1/metrics``, protobuf bodies.

Decodes each request with the ``opentelemetry-proto`` package (the collector's own message
types) and keeps the spans and metric points, flattened, for assertions. Serve it with
:func:`tests.fakes.servers.serve_app`.
"""

from __future__ import annotations

import gzip
import threading
import zlib
from collections.abc import Callable
from typing import Any, TypeVar

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

PROTOBUF = "application/x-protobuf"
T = TypeVar("T")


def any_value(value: AnyValue) -> Any:
    field = value.WhichOneof("value")
    if field == "array_value":
        return [any_value(v) for v in value.array_value.values]
    if field == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, field) if field else None


class ReceivedSpan:
    """One span as the collector saw it (ids as hex, attributes as Python values)."""

    def __init__(self, span: Any, resource: dict[str, Any], scope: str) -> None:
        self.name: str = span.name
        self.trace_id = span.trace_id.hex()
        self.span_id = span.span_id.hex()
        self.parent_span_id = span.parent_span_id.hex() or None
        self.kind: int = span.kind
        self.start_ns: int = span.start_time_unix_nano
        self.end_ns: int = span.end_time_unix_nano
        self.attributes = {kv.key: any_value(kv.value) for kv in span.attributes}
        self.status_code: int = span.status.code
        self.resource = resource
        self.scope = scope

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"<ReceivedSpan {self.name} trace={self.trace_id}>"


class ReceivedPoint:
    """One data point of a metric (sum or gauge), with its resource."""

    def __init__(self, name: str, point: Any, resource: dict[str, Any]) -> None:
        self.name = name
        self.value = point.as_int if point.HasField("as_int") else point.as_double
        self.attributes = {kv.key: any_value(kv.value) for kv in point.attributes}
        self.resource = resource

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"<ReceivedPoint {self.name}={self.value} {self.attributes}>"


async def parse_into(request: Request, message: Any) -> Response | None:
    """Fill ``message`` from the request's protobuf body; the error response if it is not."""
    body = await request.body()
    encoding = request.headers.get("content-encoding", "")
    if encoding == "gzip":
        body = gzip.decompress(body)
    elif encoding == "deflate":
        body = zlib.decompress(body)
    if request.headers.get("content-type") != PROTOBUF:
        return Response(b"expected application/x-protobuf", 415)
    try:
        message.ParseFromString(body)
    except DecodeError:
        return Response(f"not an {type(message).__name__}".encode(), 400)
    return None


class OtlpReceiver:
    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self.points: list[ReceivedPoint] = []
        self.requests = 0
        # Notified on every request received: tests wait on what arrived, never on time.
        self._lock = threading.Condition()
        self.app = Starlette(
            routes=[
                Route("/v1/traces", self.traces, methods=["POST"]),
                Route("/v1/metrics", self.metrics, methods=["POST"]),
            ]
        )

    async def metrics(self, request: Request) -> Response:
        message = ExportMetricsServiceRequest()
        refused = await parse_into(request, message)
        if refused is not None:
            return refused
        received = []
        for resource_metrics in message.resource_metrics:
            resource = {kv.key: any_value(kv.value) for kv in resource_metrics.resource.attributes}
            for scope_metrics in resource_metrics.scope_metrics:
                for metric in scope_metrics.metrics:
                    data = getattr(metric, metric.WhichOneof("data"))
                    for point in data.data_points:
                        received.append(ReceivedPoint(metric.name, point, resource))
        with self._lock:
            self.points.extend(received)
            self._lock.notify_all()
        return Response(ExportMetricsServiceResponse().SerializeToString(), media_type=PROTOBUF)

    def points_of(self, name: str) -> list[ReceivedPoint]:
        with self._lock:
            return [p for p in self.points if p.name == name]

    async def traces(self, request: Request) -> Response:
        message = ExportTraceServiceRequest()
        refused = await parse_into(request, message)
        if refused is not None:
            return refused
        received = []
        for resource_spans in message.resource_spans:
            resource = {kv.key: any_value(kv.value) for kv in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    received.append(ReceivedSpan(span, resource, scope_spans.scope.name))
        with self._lock:
            self.spans.extend(received)
            self.requests += 1
            self._lock.notify_all()
        return Response(ExportTraceServiceResponse().SerializeToString(), media_type=PROTOBUF)

    def snapshot(self) -> list[ReceivedSpan]:
        with self._lock:
            return list(self.spans)

    def wait_for(self, found: Callable[[OtlpReceiver], T], timeout: float = 10) -> T:
        """What ``found`` returns of the receiver once it is truthy, re-checked as each
        request arrives; AssertionError if it never is within ``timeout`` seconds."""
        with self._lock:
            value = self._lock.wait_for(lambda: found(self), timeout)
        if not value:
            raise AssertionError(f"the receiver did not get what was awaited in {timeout} s")
        return value
