"""The road server (`python -m road`) as local-up runs it, for tests and benchmarks: HTTPS with its serving
certificate, only for the apiserver's front-proxy client certificate, watching as system:road-server, OTLP
on a free loopback port; and `Tracers`, OpenTelemetry SDK tracer providers that export to it over OTLP/gRPC
as a component does (TRACING-CONTRACT.md: BatchSpanProcessor, 200 ms schedule delay, W3C propagation)."""

from __future__ import annotations

import ssl
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.propagate import extract, inject
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from apiserver.auth.pki import Pki
from machinery.tracing import STEP_DURATION
from tests.cluster import Process, free_port, wait_for

ROAD = "/apis/road.minik8s.io/v1alpha1"


def road_args(pki: Pki, port: int) -> list[str]:
    """The apiserver's flags for a road server on `port` (before the apiserver starts)."""
    return ["--road-server-url", f"https://127.0.0.1:{port}",
            "--proxy-client-cert-file", str(pki.cert("front-proxy-client")),
            "--proxy-client-key-file", str(pki.key("front-proxy-client")),
            "--road-server-certificate-authority", str(pki.ca_cert)]


class RoadServer:
    def __init__(self, pki: Pki, workdir: Path, *extra: str) -> None:
        self.pki = pki
        self.port = free_port()
        self.otlp_port = free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        self.process = Process("road", [
            sys.executable, "-m", "road", "--kubeconfig", str(pki.kubeconfig("road-server")),
            "--otlp-address", f"127.0.0.1:{self.otlp_port}", "--bind-address", "127.0.0.1",
            "--secure-port", str(self.port), "--tls-cert-file", str(pki.cert("road-server-serving")),
            "--tls-private-key-file", str(pki.key("road-server-serving")),
            "--requestheader-client-ca-file", str(pki.ca_cert), "--requestheader-allowed-names",
            "front-proxy-client", *extra], workdir / f"road-{self.port}.log")

    def start(self) -> RoadServer:
        self.process.start()
        wait_for(self.ready, 30, 0.1, what="road server ready")
        return self

    def ready(self) -> bool:
        if not self.process.alive():
            raise RuntimeError(f"road server exited:\n{self.process.log_tail()}")
        try:
            verify = ssl.create_default_context(cafile=str(self.pki.ca_cert))
            return httpx.get(f"{self.url}/readyz", verify=verify, timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def stop(self) -> None:
        self.process.stop()


def write_tracing_config(path: Path, otlp_port: int, per_million: int = 1_000_000) -> Path:
    """A TracingConfiguration as upstream's (and local-up's): every component's --tracing-config-file."""
    path.write_text("apiVersion: apiserver.config.k8s.io/v1beta1\nkind: TracingConfiguration\n"
                    f"endpoint: \"127.0.0.1:{otlp_port}\"\nsamplingRatePerMillion: {per_million}\n")
    return path


class Tracers:
    """One TracerProvider per component identity, each exporting to the road server over OTLP/gRPC."""

    def __init__(self, otlp_port: int) -> None:
        self.endpoint = f"127.0.0.1:{otlp_port}"
        self.providers: dict[str, TracerProvider] = {}

    def tracer(self, service: str, node: str | None = None) -> trace.Tracer:
        key = f"{service}/{node or ''}"
        provider = self.providers.get(key)
        if provider is None:
            attrs: dict[str, Any] = {"service.name": service, "service.instance.id": f"test:{key}"}
            if node:
                attrs["k8s.node.name"] = node
            provider = TracerProvider(resource=Resource.create(attrs))
            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=self.endpoint, insecure=True),
                                                           schedule_delay_millis=200))
            self.providers[key] = provider
        return provider.get_tracer("minik8s-test")

    def flush(self) -> None:
        for provider in self.providers.values():
            provider.force_flush()

    def shutdown(self) -> None:
        for provider in self.providers.values():
            provider.shutdown()


def object_attrs(obj: dict[str, Any], resource_version: str | None = None) -> dict[str, Any]:
    """The contract's object attributes of an API object (its controller owner included)."""
    meta = obj["metadata"]
    attrs: dict[str, Any] = {"k8s.object.uid": meta["uid"], "k8s.object.kind": obj["kind"],
                             "k8s.object.api_version": obj["apiVersion"], "k8s.object.name": meta["name"],
                             "k8s.object.namespace": meta.get("namespace", ""),
                             "k8s.object.resource_version": resource_version or meta["resourceVersion"]}
    if "generation" in meta:
        attrs["k8s.object.generation"] = meta["generation"]
    owner = next((o for o in meta.get("ownerReferences") or () if o.get("controller")), None)
    if owner:
        attrs.update({"k8s.owner.uid": owner["uid"], "k8s.owner.kind": owner["kind"], "k8s.owner.name": owner["name"]})
    return attrs


@contextmanager
def api_request(tracers: Tracers, verb: str, resource: str, user: str, obj: dict[str, Any] | None,
                subresource: str = "", code: int = 200) -> Iterator[trace.Span]:
    """The apiserver's request span as the apiserver makes it: a SERVER span, the caller's context carried over
    as a `traceparent` header (W3C), with its admission and etcd steps as events on it for a write (the revision:
    the object's resourceVersion)."""
    headers: dict[str, str] = {}
    inject(headers)  # the caller's side: machinery/client.py injects into every request
    parent = extract(headers)  # the apiserver's side
    attrs: dict[str, Any] = {"http.request.method": {"create": "POST", "patch": "PATCH"}.get(verb, "PUT"),
                             "k8s.verb": verb, "k8s.resource": resource, "enduser.id": user,
                             "http.response.status_code": code}
    if subresource:
        attrs["k8s.subresource"] = subresource
    if obj is not None:
        attrs.update(object_attrs(obj))
        attrs["k8s.etcd.revision"] = int(obj["metadata"]["resourceVersion"])
    tracer = tracers.tracer("kube-apiserver")
    token = otel_context.attach(parent)
    try:
        with tracer.start_as_current_span("apiserver.request", kind=trace.SpanKind.SERVER, attributes=attrs) as span:
            if verb in ("create", "update", "patch") and obj is not None:  # steps: events on the span
                start = time.time_ns()
                span.add_event("apiserver.admission", {
                    "k8s.admission.plugin": "DefaultTolerationSeconds", "k8s.admission.phase": "mutating",
                    "k8s.admission.mutated": False, STEP_DURATION: 20_000}, timestamp=start)
                span.add_event("apiserver.etcd", {
                    "k8s.etcd.op": "txn", "k8s.etcd.revision": int(obj["metadata"]["resourceVersion"]),
                    STEP_DURATION: 300_000}, timestamp=start + 50_000)
            yield span
    finally:
        otel_context.detach(token)
