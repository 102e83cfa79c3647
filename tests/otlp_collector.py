"""A real OTLP/gRPC trace collector for tests and benchmarks: the opentelemetry-proto package's own
TraceService, served by grpc on a free loopback port, keeping every span it is sent (decoded into `Span`).

An export is kept as grpc decoded it (the protobuf request) and turned into `Span`s only when they are asked for
(snapshot, find, ...): decoding them as they come cost ~60 µs of Python per span in the receiving process, which in
a benchmark is the load generator's (bench.tracing_bench: its closed loops ran slower with tracing on for that
alone)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from machinery.tracing import STEP_DURATION
from tests.cluster import free_port, wait_for

KINDS = {0: "UNSPECIFIED", 1: "INTERNAL", 2: "SERVER", 3: "CLIENT", 4: "PRODUCER", 5: "CONSUMER"}


def _value(v: AnyValue) -> Any:
    which = v.WhichOneof("value")
    if which is None:
        return None
    raw = getattr(v, which)
    if which == "array_value":
        return [_value(x) for x in raw.values]
    return raw


@dataclass
class Span:
    name: str
    trace_id: str
    span_id: str
    parent_id: str  # "" for a root span
    kind: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any] = field(default_factory=dict)
    resource: dict[str, Any] = field(default_factory=dict)
    # its step events (machinery/tracing.record_step), each as a Span: start_ns the event's time, end_ns that plus
    # its k8s.step.duration_ns, the attributes without it
    steps: list[Span] = field(default_factory=list)

    @property
    def service(self) -> str:
        return str(self.resource.get("service.name", ""))

    def __getitem__(self, key: str) -> Any:
        return self.attributes[key]

    def steps_named(self, name: str) -> list[Span]:
        return [s for s in self.steps if s.name == name]

    def get(self, key: str, default: Any = None) -> Any:
        return self.attributes.get(key, default)


class Collector(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, names: set[str] | None = None) -> None:
        self.names = names  # keep only spans of these names (a benchmark's thousands); None: every span
        self.received = 0
        self.spans: list[Span] = []
        self.exports = 0
        self._pending: list[Any] = []  # exports not yet decoded into spans
        self._lock = threading.Lock()
        self.port = free_port()
        self.endpoint = f"127.0.0.1:{self.port}"
        self._server: grpc.Server | None = None

    def Export(self, request: Any, context: Any) -> Any:  # the service's method name
        count = sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
        with self._lock:
            self._pending.append(request)
            self.received += count
            self.exports += 1
        return trace_service_pb2.ExportTraceServiceResponse()

    def _decode(self, request: Any) -> list[Span]:
        found = []
        for rs in request.resource_spans:
            resource = {kv.key: _value(kv.value) for kv in rs.resource.attributes}
            for ss in rs.scope_spans:
                for s in ss.spans:
                    if self.names is not None and s.name not in self.names:
                        continue
                    span = Span(s.name, s.trace_id.hex(), s.span_id.hex(), s.parent_span_id.hex(),
                                KINDS.get(s.kind, str(s.kind)), s.start_time_unix_nano, s.end_time_unix_nano,
                                {kv.key: _value(kv.value) for kv in s.attributes}, resource)
                    for i, e in enumerate(s.events):
                        attrs = {kv.key: _value(kv.value) for kv in e.attributes}
                        duration = attrs.pop(STEP_DURATION, None)
                        if isinstance(duration, int):
                            span.steps.append(Span(e.name, span.trace_id, f"{span.span_id}.{i}", span.span_id,
                                                   "INTERNAL", e.time_unix_nano, e.time_unix_nano + duration,
                                                   attrs, resource))
                    found.append(span)
        return found

    def start(self) -> Collector:
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(self, server)
        server.add_insecure_port(self.endpoint)
        server.start()
        self._server = server
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop(0)
            self._server = None

    def snapshot(self) -> list[Span]:
        """Every span kept so far, in the order they came (the exports since the last call decoded now)."""
        with self._lock:
            pending, self._pending = self._pending, []
            for request in pending:  # under the lock: two callers decode each export once, in order
                self.spans.extend(self._decode(request))
            return list(self.spans)

    def find(self, name: str, attributes: dict[str, Any] | None = None, service: str | None = None) -> list[Span]:
        """The spans of this name (and service) whose attributes include these."""
        wanted = attributes or {}
        return [s for s in self.snapshot()
                if s.name == name and (service is None or s.service == service)
                and all(s.attributes.get(k) == v for k, v in wanted.items())]

    def wait(self, condition: Callable[[list[Span]], Any], timeout: float = 30.0, what: str = "spans") -> Any:
        return wait_for(lambda: condition(self.snapshot()), timeout, 0.1, what)

    def children(self, parent: Span, name: str | None = None) -> list[Span]:
        return [s for s in self.snapshot() if s.parent_id == parent.span_id and s.trace_id == parent.trace_id
                and (name is None or s.name == name)]


def config_file(path: Any, endpoint: str, rate: int = 1_000_000) -> str:
    """Write a TracingConfiguration to path; its name."""
    with open(path, "w") as f:
        f.write("apiVersion: apiserver.config.k8s.io/v1beta1\nkind: TracingConfiguration\n"
                f'endpoint: "{endpoint}"\nsamplingRatePerMillion: {rate}\n')
    return str(path)
