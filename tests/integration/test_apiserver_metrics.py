"""/metrics of the apiserver, the controller-manager and the scheduler on a secure apiserver (TLS, Node,RBAC,
audit): scraped and parsed with prometheus-client's own parser.

- The apiserver counts requests with upstream's labels (verb refined to LIST, WATCH, APPLY; scope; code, also for a
  request the gate refused), times them in upstream's buckets, shows a watch in the long-running gauge while it
  streams; its /metrics is RBAC's: system:monitoring and cluster-admin may read it, others get 403.
- The controller-manager's (10257) and the scheduler's (10259) secure ports, as real processes under their own
  identities: /healthz open to anyone, /metrics for a client certificate the apiserver authorizes by a
  SubjectAccessReview (401 without one, 403 for a user without the right); the workqueue metrics of each controller
  and the scheduler's attempts and queues."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.auth_cluster import SecureApiServer
from tests.cluster import Etcd, free_port, wait_for
from tests.controller_process import ControllerProcess
from tests.scheduler_process import SchedulerProcess


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


def value(samples: dict[str, list[tuple[dict[str, str], float]]], metric: str, /, **labels: str) -> float:
    return sum(v for got, v in samples.get(metric, []) if all(got.get(k) == want for k, want in labels.items()))


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


def component_client(secure: SecureApiServer, port: int, identity: str | None) -> httpx.Client:
    """HTTPS to a component's secure port (its certificate is self-signed: not verified, as a scraper told to)."""
    import ssl

    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    if identity is not None:
        ctx.load_cert_chain(secure.pki.cert(identity), secure.pki.key(identity))
    return httpx.Client(base_url=f"https://127.0.0.1:{port}", verify=ctx, timeout=10)


def test_controller_manager_and_scheduler_serve_metrics_to_whom_rbac_allows(secure: SecureApiServer, workdir: Path,
                                                                             admin: httpx.Client, ns: str) -> None:
    secure.issue("nobody", "jane")
    secure.issue("scraper", "prometheus", ["system:monitoring"])
    cm_port, scheduler_port = free_port(), free_port()
    serving = ("--bind-address", "127.0.0.1", "--client-ca-file", secure.ca)
    manager = ControllerProcess(workdir, secure.secure_url, ["deployment", "replicaset"], "--kubeconfig",
                                str(secure.kubeconfig("controller-manager")), "--secure-port", str(cm_port), *serving)
    scheduler = SchedulerProcess(workdir, secure.secure_url, None, "--kubeconfig", str(secure.kubeconfig("scheduler")),
                                 "--secure-port", str(scheduler_port), *serving)
    manager.start()
    scheduler.start()
    try:
        deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
                      "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                               "template": {"metadata": {"labels": {"app": "web"}},
                                            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}
        assert admin.post(f"/apis/apps/v1/namespaces/{ns}/deployments", json=deployment).status_code == 201
        # no node: the pod is unschedulable, which the scheduler counts
        for port in (cm_port, scheduler_port):
            with component_client(secure, port, None) as anonymous:
                assert anonymous.get("/healthz").text == "ok"
                assert anonymous.get("/metrics").status_code == 401
            with component_client(secure, port, "nobody") as jane:
                r = jane.get("/metrics")
                assert r.status_code == 403 and r.text == 'forbidden: User "jane" cannot get path "/metrics"'
        with component_client(secure, cm_port, "scraper") as prometheus:
            wait_for(lambda: value(scrape(prometheus), "workqueue_adds_total", name="deployment") >= 1, 30,
                     what="the deployment controller's queue in the controller-manager's /metrics")
            samples = scrape(prometheus)
            assert value(samples, "workqueue_adds_total", name="replicaset") >= 1
            assert value(samples, "workqueue_work_duration_seconds_count", name="deployment") >= 1
            assert value(samples, "process_resident_memory_bytes") > 0
        # a bearer token (a service account's, as an in-cluster Prometheus holds) is known through a TokenReview
        with secure.client("admin") as cluster_admin:
            binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                       "metadata": {"name": "prometheus-monitoring"},
                       "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                   "name": "system:monitoring"},
                       "subjects": [{"kind": "ServiceAccount", "name": "prometheus", "namespace": ns}]}
            assert cluster_admin.post("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
                                      json=binding).status_code == 201
        scraper_token = secure.request_token("prometheus", ns)
        stranger_token = secure.request_token("stranger", ns)
        secure.wait_known(scraper_token, non_resource={"verb": "get", "path": "/metrics"})
        for port in (cm_port, scheduler_port):
            with component_client(secure, port, None) as anonymous:
                scraped = anonymous.get("/metrics", headers={"Authorization": f"Bearer {scraper_token}"})
                assert scraped.status_code == 200 and "process_resident_memory_bytes" in scraped.text
                r = anonymous.get("/metrics", headers={"Authorization": f"Bearer {stranger_token}"})
                assert r.status_code == 403
                assert r.text == f'forbidden: User "system:serviceaccount:{ns}:stranger" cannot get path "/metrics"'
                assert anonymous.get("/metrics", headers={"Authorization": "Bearer garbage"}).status_code == 401
        with component_client(secure, scheduler_port, "admin") as master:  # system:masters: no review needed
            wait_for(lambda: value(scrape(master), "scheduler_schedule_attempts_total", result="unschedulable",
                                   profile="default-scheduler") >= 1, 30, what="an unschedulable attempt counted")
            assert value(scrape(master), "scheduler_pending_pods", queue="unschedulable") >= 1
    finally:
        manager.stop()
        scheduler.stop()
