"""Upstream's request labels (endpoints/metrics: CleanVerb, CleanScope) from the apiserver's request info."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from apiserver.metrics import ApiServerMetrics, clean_scope, reported_verb
from apiserver.requestinfo import request_info


@pytest.mark.parametrize(("method", "path", "query", "content_type", "verb", "scope"), [
    ("GET", "/api/v1/namespaces/a/pods", b"", b"", "LIST", "namespace"),
    ("GET", "/api/v1/pods", b"", b"", "LIST", "cluster"),
    ("GET", "/api/v1/namespaces/a/pods", b"watch=1", b"", "WATCH", "namespace"),
    ("GET", "/api/v1/namespaces/a/pods/p", b"", b"", "GET", "resource"),
    ("POST", "/api/v1/namespaces/a/pods", b"", b"", "POST", "resource"),
    ("PUT", "/apis/apps/v1/namespaces/a/deployments/d/status", b"", b"", "PUT", "resource"),
    ("PATCH", "/api/v1/namespaces/a/configmaps/c", b"", b"application/merge-patch+json", "PATCH", "resource"),
    ("PATCH", "/api/v1/namespaces/a/configmaps/c", b"", b"application/apply-patch+yaml", "APPLY", "resource"),
    ("DELETE", "/api/v1/namespaces/a/pods", b"", b"", "DELETE", "namespace"),
    ("POST", "/api/v1/namespaces/a/pods/p/exec", b"command=ls", b"", "CONNECT", "resource"),
    ("GET", "/healthz", b"", b"", "GET", ""),
])
def test_verb_and_scope(method: str, path: str, query: bytes, content_type: bytes, verb: str, scope: str) -> None:
    info = request_info(method, path, query)
    assert reported_verb(info, method, content_type) == verb
    assert clean_scope(info) == scope


def test_observations_render_as_upstreams_families() -> None:
    metrics = ApiServerMetrics()
    key = ("GET", "", "", "v1", "pods", "", "resource", "apiserver")
    for elapsed in (0.001, 0.005, 0.3, 100.0):  # on a bound counts in that bucket; beyond the last in +Inf
        metrics.observe(key, "200", elapsed)
    metrics.observe(key, "404", None)  # counted, not timed (a long-running request)
    metrics.inflight["mutating"] = 2
    families = {f.name: f for f in text_string_to_metric_families(metrics.render().decode())}
    labels = dict(zip(("verb", "dry_run", "group", "version", "resource", "subresource", "scope", "component"), key,
                      strict=True))
    counts = {s.labels["code"]: s.value for s in families["apiserver_request"].samples if s.name.endswith("_total")}
    assert counts == {"200": 4, "404": 1}
    buckets = {s.labels["le"]: s.value for s in families["apiserver_request_duration_seconds"].samples
               if s.name.endswith("_bucket") and all(s.labels[k] == v for k, v in labels.items())}
    assert buckets["0.005"] == 2 and buckets["0.025"] == 2 and buckets["0.4"] == 3 and buckets["60.0"] == 3
    assert buckets["+Inf"] == 4
    sums = [s.value for s in families["apiserver_request_duration_seconds"].samples if s.name.endswith("_sum")]
    assert sums == [pytest.approx(100.306)]
    assert {s.labels["request_kind"]: s.value for s in families["apiserver_current_inflight_requests"].samples} == \
        {"readOnly": 0, "mutating": 2}
    assert "process_resident_memory_bytes" in {s.name for f in families.values() for s in f.samples}
