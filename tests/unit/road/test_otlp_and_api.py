"""road/otlp.py's protobuf → Span conversion, the road group as the apiserver sees it (discovery, what the
request path means to the gate), and how `mkubectl road` prints steps."""

from __future__ import annotations

import time

import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

from apiserver.endpoints import aggregator
from apiserver.requestinfo import request_info
from kubectl.commands import road as road_command
from machinery.api.resources import resource_for
from road import otlp
from road.api import RESOURCE_LIST


def kv(key: str, **value: object) -> common_pb2.KeyValue:
    return common_pb2.KeyValue(key=key, value=common_pb2.AnyValue(**value))  # type: ignore[arg-type]


def test_spans_of_an_export_request() -> None:
    span = trace_pb2.Span(trace_id=bytes(range(16)), span_id=bytes(range(8)), parent_span_id=b"", name="kubelet.probe",
                          kind=trace_pb2.Span.SPAN_KIND_INTERNAL, start_time_unix_nano=1_500_000_000,
                          end_time_unix_nano=2_000_000_000,
                          attributes=[kv("k8s.probe.result", string_value="success"), kv("n", int_value=3),
                                      kv("ok", bool_value=True), kv("ms", double_value=1.5)],
                          status=trace_pb2.Status(code=trace_pb2.Status.STATUS_CODE_ERROR))
    request = trace_service_pb2.ExportTraceServiceRequest(resource_spans=[trace_pb2.ResourceSpans(
        resource={"attributes": [kv("service.name", string_value="kubelet"), kv("k8s.node.name", string_value="n1")]},
        scope_spans=[trace_pb2.ScopeSpans(spans=[span])])])
    [got] = otlp.spans_of(request, received=42.0)
    assert got.trace_id == bytes(range(16)).hex() and got.span_id == "0001020304050607" and got.parent_id == ""
    assert (got.start, got.end, got.kind, got.status, got.received) == (1.5, 2.0, "INTERNAL", "error", 42.0)
    assert got.attrs == {"k8s.probe.result": "success", "n": 3, "ok": True, "ms": 1.5}
    assert got.resource == {"service.name": "kubelet", "k8s.node.name": "n1"}


def test_the_road_group_as_the_apiserver_serves_and_authorizes_it() -> None:
    assert aggregator.ROAD.resource_list == RESOURCE_LIST  # the apiserver's discovery is the road server's
    kinds = {r["name"]: r for r in RESOURCE_LIST["resources"]}
    assert kinds["deployments"]["namespaced"] and not kinds["nodes"]["namespaced"]
    assert kinds["pods"]["kind"] == "Road" and kinds["pods"]["verbs"] == ["get", "watch"]
    info = request_info("GET", "/apis/road.minik8s.io/v1alpha1/namespaces/ns/deployments/web", b"")
    assert (info.verb, info.api_group, info.resource, info.namespace, info.name) == (
        "get", "road.minik8s.io", "deployments", "ns", "web")
    watch = request_info("GET", "/apis/road.minik8s.io/v1alpha1/namespaces/ns/deployments",
                         b"watch=true&fieldSelector=metadata.name%3Dweb")
    assert watch.verb == "watch" and watch.long_running and watch.namespace == "ns"  # streamed by the proxy


def test_mkubectl_road_rows() -> None:
    step = {"offset": 1.25, "duration": 0.0042, "lane": "kubelet/node-1", "depth": 2, "level": 1,
            "object": {"kind": "Pod", "name": "web-1"}, "step": "start container httpd", "delay": 0.012,
            "slo": {"name": "pod-startup-latency", "limitSeconds": 5.0, "seconds": 6.5, "met": False},
            "details": {"k8s.container.name": "httpd", "k8s.object.resource_version": "7"}}
    assert road_command.row(step).split("\t") == [
        "+1.250s", "4ms", "kubelet/node-1", "    pod/web-1", "  start container httpd",
        "delay=12ms SLO pod-startup-latency ≤5.0s: 6.50s MISSED container.name=httpd resource_version=7"]
    road = {"steps": [{**step, "offset": 0.5}], "depth": 0,
            "roads": [{"depth": 1, "steps": [{**step, "offset": 0.1, "step": "first"}], "roads": []}]}
    lines = road_command.table(road).splitlines()
    assert lines[0].split() == ["OFFSET", "DURATION", "LANE", "OBJECT", "STEP", "DETAILS"]
    assert "first" in lines[1] and "  pod/web-1" in lines[1] and "+0.500s" in lines[2]  # in time order
    deployments = resource_for("apps", "deployments")
    assert deployments is not None
    assert road_command.road_path(deployments, "ns", "web") == \
        "/apis/road.minik8s.io/v1alpha1/namespaces/ns/deployments/web"


def test_the_apiserver_steps_recorded_as_events_are_child_steps_of_the_request() -> None:
    """The apiserver records authn, authz, admission and etcd as events on its request span (one span a request);
    through the real SDK and OTLP encoding, the road shows each as a step under the request, with its duration."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from machinery import tracing
    from road.model import Store

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.TRACER, tracing.ROOT_RATE = provider.get_tracer("test"), 1.0
    try:
        with tracing.span("apiserver.request", tracing.SERVER, {"k8s.verb": "create", "k8s.resource": "configmaps",
                                                                "enduser.id": "alice"}) as request:
            t0 = time.time_ns()
            tracing.record_step("apiserver.authenticate", t0 + 1_000_000, t0 + 1_500_000, {"k8s.authn.result": "ok"})
            tracing.record_step("apiserver.authorize", t0 + 2_000_000, t0 + 2_250_000, {"k8s.authz.decision": "allow"})
            tracing.record_step("apiserver.admission", t0 + 3_000_000, t0 + 3_100_000, {
                "k8s.admission.plugin": "ResourceQuota", "k8s.admission.phase": "validating"})
            tracing.record_step("apiserver.etcd", t0 + 4_000_000, t0 + 6_000_000, {"k8s.etcd.op": "txn",
                                                                                   "k8s.etcd.revision": 42})
            tracing.record_step("apiserver.etcd", t0 + 7_000_000, t0 + 7_000_000, {"k8s.etcd.op": "txn",
                                                                                   "error.type": "Unavailable"})
            request.add_event("note", {"no": "duration"})  # an event that is no step
            request.set_attributes({"k8s.object.uid": "u1", "k8s.object.kind": "ConfigMap", "k8s.object.name": "c",
                                    "k8s.object.namespace": "ns", "k8s.etcd.revision": 42})
    finally:
        tracing.TRACER, tracing.ROOT_RATE = None, 0.0
        provider.shutdown()
    wire = trace_service_pb2.ExportTraceServiceRequest.FromString(
        encode_spans(exporter.get_finished_spans()).SerializeToString())
    spans = otlp.spans_of(wire, received=1.0)
    parent = spans[0]
    assert [s.name for s in spans] == ["apiserver.request", "apiserver.authenticate", "apiserver.authorize",
                                       "apiserver.admission", "apiserver.etcd", "apiserver.etcd"]
    assert all(s.parent_id == parent.span_id and s.trace_id == parent.trace_id for s in spans[1:])
    assert len({s.span_id for s in spans}) == len(spans)
    etcd = spans[4]
    assert (etcd.start, etcd.end - etcd.start) == pytest.approx(((t0 + 4_000_000) / 1e9, 0.002), abs=1e-6)
    assert (etcd.attrs, etcd.status) == ({"k8s.etcd.op": "txn", "k8s.etcd.revision": 42}, "unset")
    assert spans[5].status == "error"
    store = Store(clock=lambda: 2.0)
    store.add_spans(spans)
    steps = store.road("u1")["steps"]
    assert [(st["step"], st["level"], round(st["duration"], 6)) for st in steps] == [
        ("create configmaps", 0, steps[0]["duration"]), ("authenticate", 1, 0.0005), ("authorize: allow", 1, 0.00025),
        ("admission validating ResourceQuota", 1, 0.0001), ("etcd txn (revision 42)", 1, 0.002), ("etcd txn", 1, 0.0)]
    assert steps[5].get("error") is True
    assert all(st["lane"] == "alice" for st in steps[:1])
