"""The OTLP/gRPC trace receiver (opentelemetry-proto's `TraceService/Export`, as the OpenTelemetry
Collector's otlpreceiver serves it on :4317): each exported span, with its resource's attributes, becomes a
`model.Span` handed to `on_spans`.

A span's step events (machinery/tracing.record_step: an event with `k8s.step.duration_ns`, as the apiserver records
authentication, authorization, each admission plugin and each etcd call on its request span) become child spans of
it here, so the road shows them as the steps under the request, each with its start and duration. Other events
(an exception's) are no steps.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

from machinery.tracing import STEP_DURATION
from road.model import Span

log = logging.getLogger(__name__)

_KINDS = {trace_pb2.Span.SPAN_KIND_INTERNAL: "INTERNAL", trace_pb2.Span.SPAN_KIND_SERVER: "SERVER",
          trace_pb2.Span.SPAN_KIND_CLIENT: "CLIENT", trace_pb2.Span.SPAN_KIND_PRODUCER: "PRODUCER",
          trace_pb2.Span.SPAN_KIND_CONSUMER: "CONSUMER"}
_STATUS = {trace_pb2.Status.STATUS_CODE_OK: "ok", trace_pb2.Status.STATUS_CODE_ERROR: "error"}


def any_value(v: common_pb2.AnyValue) -> Any:
    which = v.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [any_value(x) for x in v.array_value.values]
    if which == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in v.kvlist_value.values}
    if which == "bytes_value":
        return v.bytes_value.hex()
    return getattr(v, which)


def attributes(kvs: Any) -> dict[str, Any]:
    return {kv.key: any_value(kv.value) for kv in kvs}


def spans_of(request: trace_service_pb2.ExportTraceServiceRequest, received: float | None = None) -> list[Span]:
    """The request's spans, each followed by the steps its events record (parents before their steps)."""
    received = time.time() if received is None else received
    out: list[Span] = []
    for rs in request.resource_spans:
        resource = attributes(rs.resource.attributes)
        for ss in rs.scope_spans:
            for s in ss.spans:
                span = Span(s.trace_id.hex(), s.span_id.hex(), s.parent_span_id.hex(), s.name,
                            _KINDS.get(s.kind, "UNSPECIFIED"), s.start_time_unix_nano / 1e9,
                            s.end_time_unix_nano / 1e9, attributes(s.attributes), resource,
                            _STATUS.get(s.status.code, "unset"), received)
                out.append(span)
                for i, event in enumerate(s.events):
                    step = step_of(span, i, event)
                    if step is not None:
                        out.append(step)
    return out


def step_of(span: Span, index: int, event: trace_pb2.Span.Event) -> Span | None:
    """A step event of `span` as its child span (None: an event that is no step). Its id is the span's with the
    event's index: unique, and the same when the batch is sent again."""
    attrs = attributes(event.attributes)
    duration = attrs.pop(STEP_DURATION, None)
    if not isinstance(duration, int) or isinstance(duration, bool) or duration < 0:
        return None
    start = event.time_unix_nano / 1e9
    return Span(span.trace_id, f"{span.span_id}.{index}", span.span_id, event.name, "INTERNAL", start,
                start + duration / 1e9, attrs, span.resource, "error" if "error.type" in attrs else "unset",
                span.received)


class TraceReceiver(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, on_spans: Callable[[list[Span]], None]) -> None:
        self.on_spans = on_spans
        self.received = 0

    async def Export(self, request: trace_service_pb2.ExportTraceServiceRequest,  # the rpc's name
                     context: grpc.aio.ServicerContext[Any, Any]) -> trace_service_pb2.ExportTraceServiceResponse:
        spans = spans_of(request)
        self.received += len(spans)
        try:
            self.on_spans(spans)
        except Exception:  # a span we cannot read must not make the exporter retry the batch forever
            log.exception("road: spans dropped")
        return trace_service_pb2.ExportTraceServiceResponse()


async def serve(address: str, receiver: TraceReceiver) -> tuple[grpc.aio.Server, int]:
    """Listen on `address` (host:port, port 0 picks one); the server and its port."""
    server = grpc.aio.server()
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(receiver, server)  # type: ignore[no-untyped-call]
    port = server.add_insecure_port(address)
    if port == 0:
        raise OSError(f"cannot listen on {address} for OTLP")
    await server.start()
    return server, port
