"""The apiserver's /metrics on a secure apiserver (TLS, Node,RBAC, audit): scraped and parsed with
prometheus-client's own parser. Requests are counted with upstream's labels (verb refined to LIST, WATCH, APPLY;
scope; code, also for a request the gate refused), timed in upstream's buckets, a watch shows in the long-running
gauge while it streams; /metrics itself is RBAC's: system:monitoring and cluster-admin may read it, others get 403."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.auth_cluster import SecureApiServer
from tests.cluster import Etcd, wait_for


@pytest.fixture(scope="module")
def secure(workdir: Path, own_etcd: Etcd) -> Iterator[SecureApiServer]:
    server = SecureApiServer(workdir, own_etcd).start()
    yield server
    server.stop()


def scrape(client: httpx.Client) -> dict[str, list[tuple[dict[str, str], float]]]:
    r = client.get("/metrics")
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
    samples: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(r.text):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((sample.labels, sample.value))
    return samples


def value(samples: dict[str, list[tuple[dict[str, str], float]]], name: str, **labels: str) -> float:
    return sum(v for got, v in samples.get(name, []) if all(got.get(k) == want for k, want in labels.items()))


def test_requests_are_counted_and_timed_with_upstreams_labels(secure: SecureApiServer, admin: httpx.Client,
                                                             ns: str) -> None:
    cms = f"/api/v1/namespaces/{ns}/configmaps"
    assert admin.post(cms, json={"metadata": {"name": "a"}, "data": {"k": "v"}}).status_code == 201
    assert admin.get(cms).status_code == 200
    assert admin.get(f"{cms}/a").status_code == 200
    applied = admin.patch(f"{cms}/b", params={"fieldManager": "t"}, content=b'{"apiVersion":"v1","kind":"ConfigMap",'
                          b'"metadata":{"name":"b"}}', headers={"content-type": "application/apply-patch+yaml"})
    assert applied.status_code == 201, applied.text
    assert admin.post(cms, params={"dryRun": "All"}, json={"metadata": {"name": "c"}}).status_code == 201
    assert admin.get(f"{cms}/missing").status_code == 404
    with secure.token_client("not-a-token") as stranger:  # refused by the gate, and counted with its code
        assert stranger.get(cms).status_code == 401
    samples = scrape(admin)
    base = {"group": "", "version": "v1", "resource": "configmaps", "subresource": "", "component": "apiserver"}
    assert value(samples, "apiserver_request_total", verb="POST", scope="resource", code="201", dry_run="",
                 **base) == 1
    assert value(samples, "apiserver_request_total", verb="POST", dry_run="All", code="201", **base) == 1
    assert value(samples, "apiserver_request_total", verb="LIST", scope="namespace", code="200", **base) == 1
    assert value(samples, "apiserver_request_total", verb="GET", scope="resource", code="200", **base) == 1
    assert value(samples, "apiserver_request_total", verb="GET", scope="resource", code="404", **base) == 1
    assert value(samples, "apiserver_request_total", verb="APPLY", scope="resource", code="201", **base) == 1
    assert value(samples, "apiserver_request_total", verb="LIST", scope="namespace", code="401", **base) == 1
    # the histogram: one observation per request (the refused LIST too), in upstream's buckets
    assert value(samples, "apiserver_request_duration_seconds_count", verb="LIST", **base) == 2
    buckets = [labels["le"] for labels, _ in samples["apiserver_request_duration_seconds_bucket"]
               if labels["verb"] == "LIST" and labels["resource"] == "configmaps"]
    assert buckets[:3] == ["0.005", "0.025", "0.05"] and buckets[-2:] == ["60.0", "+Inf"]
    assert value(samples, "process_resident_memory_bytes") > 0


def test_a_watch_is_a_long_running_request_while_it_streams(secure: SecureApiServer, admin: httpx.Client,
                                                           ns: str) -> None:
    cms = f"/api/v1/namespaces/{ns}/configmaps"
    labels = {"verb": "WATCH", "resource": "configmaps", "scope": "namespace"}
    assert value(scrape(admin), "apiserver_longrunning_requests", **labels) == 0
    opened = threading.Event()
    stop = threading.Event()

    def watch() -> None:
        with secure.client("admin", timeout=30) as client, \
                client.stream("GET", cms, params={"watch": "1", "timeoutSeconds": "20"}) as r:
            opened.set()
            for _ in r.iter_raw():
                if stop.is_set():
                    return

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    assert opened.wait(10)
    wait_for(lambda: value(scrape(admin), "apiserver_longrunning_requests", **labels) == 1, 10,
             what="the watch in the long-running gauge")
    stop.set()
    assert admin.post(cms, json={"metadata": {"name": "wake"}}).status_code == 201  # an event ends the loop
    thread.join(20)
    wait_for(lambda: value(scrape(admin), "apiserver_longrunning_requests", **labels) == 0, 10,
             what="the watch gone from the gauge")
    samples = scrape(admin)
    assert value(samples, "apiserver_request_total", verb="WATCH", resource="configmaps", code="200") == 1
    assert value(samples, "apiserver_request_duration_seconds_count", verb="WATCH") == 0  # a life, not a latency


def test_metrics_is_for_system_monitoring_and_admins_only(secure: SecureApiServer) -> None:
    secure.issue("nobody", "jane")
    secure.issue("scraper", "prometheus", ["system:monitoring"])
    with secure.client("nobody") as jane:
        r = jane.get("/metrics")
        assert r.status_code == 403
        assert r.json()["message"] == 'forbidden: User "jane" cannot get path "/metrics"'
    with secure.client("scraper") as prometheus:
        assert "apiserver_request_total" in scrape(prometheus)
