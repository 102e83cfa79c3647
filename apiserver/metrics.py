"""The apiserver's Prometheus metrics, with upstream's names, labels and buckets
(k8s.io/apiserver/pkg/endpoints/metrics/metrics.go: MonitorRequest, CleanVerb, CleanScope), served at `/metrics`
in the text exposition format by prometheus-client.

One ASGI middleware, outermost, times every request from its first byte in to its handler's return and counts
it by the request info the gate parsed (a request the gate refused is counted too, with its 401/403/429 code):

- `apiserver_request_total{verb, dry_run, group, version, resource, subresource, scope, component, code}`;
- `apiserver_request_duration_seconds{verb, dry_run, group, version, resource, subresource, scope, component}`,
  not for long-running requests (a watch's life is not its latency);
- `apiserver_longrunning_requests{verb, group, version, resource, subresource, scope, component}`: watches,
  exec, logs being served now;
- `apiserver_current_inflight_requests{request_kind}`: the requests being served now, `readOnly` and `mutating`;
- the process's own (`process_resident_memory_bytes`, `process_cpu_seconds_total`, ...).

Upstream's verbs are HTTP's with its refinements: LIST (a GET of a collection), WATCH, APPLY (a server-side apply
PATCH), CONNECT (exec, attach, port-forward, proxy). `/metrics` is a non-resource URL: RBAC gives it to
`system:monitoring` (a group, as upstream's bootstrap binding) and cluster-admin.

"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Iterator
from itertools import accumulate
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.process_collector import ProcessCollector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from apiserver.requestinfo import RequestInfo, of_scope

COMPONENT = "apiserver"
# upstream's buckets: fine below 1 s for the latency SLO, coarse up to the 60 s request timeout
REQUEST_BUCKETS = (0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0,
                   15.0, 20.0, 30.0, 45.0, 60.0)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"  # what upstream answers (prometheus expfmt)
_VERBS = {"get": "GET", "list": "LIST", "watch": "WATCH", "create": "POST", "update": "PUT", "patch": "PATCH",
          "delete": "DELETE", "deletecollection": "DELETE"}
_CONNECT = frozenset({"exec", "attach", "portforward", "proxy"})
_LABELS = ("verb", "dry_run", "group", "version", "resource", "subresource", "scope", "component")


def reported_verb(info: RequestInfo, method: str, content_type: bytes) -> str:
    """CleanVerb: the HTTP verb, refined to LIST, WATCH, APPLY or CONNECT."""
    if info.subresource in _CONNECT:
        return "CONNECT"
    if not info.is_resource_request:
        return method.upper()
    if info.verb == "patch" and content_type.startswith(b"application/apply-patch"):
        return "APPLY"
    return _VERBS.get(info.verb, method.upper())


def clean_scope(info: RequestInfo) -> str:
    """CleanScope: resource (one object, or a create), namespace, cluster, or "" for a non-resource path."""
    if info.name or info.verb == "create":
        return "resource"
    if info.namespace:
        return "namespace"
    return "cluster" if info.is_resource_request else ""


class _Histogram:
    """One label set's histogram: counts per bucket (not cumulative until collected), sum and count."""

    __slots__ = ("counts", "sum")

    def __init__(self) -> None:
        self.counts = [0] * (len(REQUEST_BUCKETS) + 1)  # the last is +Inf
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(REQUEST_BUCKETS, value)] += 1  # le: a value on a bound counts in that bucket
        self.sum += value


class ApiServerMetrics:
    """The apiserver's registry (one per app: several apps may live in one test process).

    The request figures are kept in plain dictionaries and handed to prometheus-client at scrape time through a
    custom collector (its documented way for state kept elsewhere): a request then costs a few dictionary
    operations, not four locked metric updates (~15 µs, measured by bench/metrics_bench.py's first run). The
    event loop is one thread, so nothing here needs a lock."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        ProcessCollector(registry=self.registry)
        self.requests: dict[tuple[str, ...], int] = {}  # (*labels, code) → count
        self.latency: dict[tuple[str, ...], _Histogram] = {}  # labels → histogram
        self.longrunning: dict[tuple[str, ...], int] = {}  # (verb, group, ..., component) → being served
        self.inflight = {"readOnly": 0, "mutating": 0}
        self.registry.register(self)  # type: ignore[arg-type]  # a collector: collect() below

    def observe(self, key: tuple[str, ...], code: str, elapsed: float | None) -> None:
        counted = (*key, code)
        self.requests[counted] = self.requests.get(counted, 0) + 1
        if elapsed is not None:
            histogram = self.latency.get(key)
            if histogram is None:
                histogram = self.latency[key] = _Histogram()
            histogram.observe(elapsed)

    def collect(self) -> Iterator[Metric]:
        requests = CounterMetricFamily(
            "apiserver_request",
            "[STABLE] Counter of apiserver requests broken out for each verb, dry run value, group, version, "
            "resource, scope, component, and HTTP response code.", labels=(*_LABELS, "code"))
        for labels, count in self.requests.items():
            requests.add_metric(labels, count)
        yield requests
        latency = HistogramMetricFamily(
            "apiserver_request_duration_seconds",
            "[STABLE] Response latency distribution in seconds for each verb, dry run value, group, version, "
            "resource, subresource, scope and component.", labels=_LABELS)
        bounds = [*(repr(float(b)) for b in REQUEST_BUCKETS), "+Inf"]
        for labels, histogram in self.latency.items():
            latency.add_metric(labels, list(zip(bounds, accumulate(histogram.counts), strict=True)),
                               histogram.sum)
        yield latency
        longrunning = GaugeMetricFamily(
            "apiserver_longrunning_requests",
            "[STABLE] Gauge of all active long-running apiserver requests broken out by verb, group, version, "
            "resource, scope and component. Not all requests are tracked this way.",
            labels=("verb", "group", "version", "resource", "subresource", "scope", "component"))
        for labels, count in self.longrunning.items():
            longrunning.add_metric(labels, count)
        yield longrunning
        inflight = GaugeMetricFamily(
            "apiserver_current_inflight_requests",
            "[STABLE] Maximal number of currently used inflight request limit of this apiserver per request kind "
            "in last second.", labels=("request_kind",))
        for kind, count in self.inflight.items():
            inflight.add_metric((kind,), count)
        yield inflight

    def render(self) -> bytes:
        return generate_latest(self.registry)


class RequestMetrics:
    """The ASGI middleware (outermost): counts and times each HTTP request and websocket."""

    def __init__(self, app: ASGIApp, metrics: ApiServerMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind != "http" and kind != "websocket":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        metrics = self.metrics
        info = of_scope(scope)  # parsed once: the gate takes it from the scope
        content_type = b""
        if info.verb == "patch":
            content_type = next((v for k, v in scope["headers"] if k == b"content-type"), b"")
        verb = reported_verb(info, scope.get("method", "GET"), content_type)
        dry_run = ",".join(sorted(set(info.query.getlist("dryRun")))) if not info.read_only and \
            info.query.get("dryRun") else ""
        key = (verb, dry_run, info.api_group, info.api_version, info.resource, info.subresource, clean_scope(info),
               COMPONENT)
        long_running = info.long_running
        gauges: dict[Any, int]  # the long-running requests by their labels, or the others by kind
        gauge: Any
        if long_running:
            gauges, gauge = metrics.longrunning, (verb, *key[2:])
        else:
            gauges, gauge = metrics.inflight, "readOnly" if info.read_only else "mutating"
        sender = _CodeNotingSend(send)  # slots, not a closure: a watch holds it as long as it streams
        gauges[gauge] = gauges.get(gauge, 0) + 1
        try:
            await self.app(scope, receive, sender)
        finally:
            gauges[gauge] -= 1
            metrics.observe(key, str(sender.code or 500), None if long_running else time.perf_counter() - started)


class _CodeNotingSend:
    """A request's send, noting the response's code."""

    __slots__ = ("code", "send")

    def __init__(self, send: Send) -> None:
        self.send = send
        self.code = 0

    async def __call__(self, message: Message) -> None:
        kind = message["type"]
        if kind == "http.response.start":
            self.code = message["status"]
        elif kind == "websocket.accept":
            self.code = 101
        elif kind == "websocket.close" and not self.code:
            self.code = 403  # refused before the upgrade, as the gate refuses a websocket
        await self.send(message)
