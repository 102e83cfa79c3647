"""The metrics path as local-up runs it, with every identity checked: an apiserver with its gate on
(`--metrics-server-url` over HTTPS, presenting the front-proxy-client certificate), a kubelet serving HTTPS
and authorizing non-masters with SubjectAccessReviews, and `python -m metrics_server` as
system:metrics-server (its kubeconfig, and the same certificate towards the kubelet), serving HTTPS only to
the front proxy. Checked: who may read the kubelet's `/stats/summary` (nodes/stats), who may read
metrics.k8s.io (view aggregates system:aggregated-metrics-reader), and that the metrics-server refuses
anyone but the apiserver."""

from __future__ import annotations

import shutil
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.auth_cluster import SecureApiServer
from tests.cluster import Etcd, Process, free_port, make_workdir, wait_for
from tests.node_process import KubeletProcess, cleanup, ensure_images, free_pod_cidrs

METRICS = "/apis/metrics.k8s.io/v1beta1"


class Cluster:
    def __init__(self, secure: SecureApiServer, kubelet: KubeletProcess, metrics_url: str) -> None:
        self.secure, self.kubelet, self.metrics_url = secure, kubelet, metrics_url


@pytest.fixture(scope="module")
def cluster(own_etcd: Etcd) -> Iterator[Cluster]:
    try:
        import docker

        docker.from_env().ping()
    except Exception as e:
        pytest.skip(f"no Docker engine to run a kubelet: {e}")
    ensure_images()
    workdir = make_workdir("minik8s-metrics-tls-")
    port = free_port()
    url = f"https://127.0.0.1:{port}"
    secure = SecureApiServer(workdir, own_etcd)
    pki = secure.pki
    secure.process.argv += ["--metrics-server-url", url,
                            "--proxy-client-cert-file", str(pki.cert("front-proxy-client")),
                            "--proxy-client-key-file", str(pki.key("front-proxy-client")),
                            "--metrics-server-certificate-authority", str(pki.ca_cert)]
    metrics = Process("metrics-server", [
        sys.executable, "-m", "metrics_server", "--kubeconfig", str(pki.kubeconfig("metrics-server")),
        "--bind-address", "127.0.0.1", "--secure-port", str(port), "--metric-resolution", "2s",
        "--tls-cert-file", str(pki.cert("metrics-server-serving")),
        "--tls-private-key-file", str(pki.key("metrics-server-serving")),
        "--requestheader-client-ca-file", str(pki.ca_cert), "--requestheader-allowed-names", "front-proxy-client",
        "--kubelet-client-certificate", str(pki.cert("metrics-server")),
        "--kubelet-client-key", str(pki.key("metrics-server")),
        "--kubelet-certificate-authority", str(pki.ca_cert)], workdir / "metrics-server.log")
    kubelet: KubeletProcess | None = None
    try:
        secure.start()
        kubelet = secure.kubelet(workdir, f"mtls-{uuid.uuid4().hex[:6]}", free_pod_cidrs(1)[0])
        with secure.client("admin") as admin:
            kubelet.start(admin, timeout=60)
        metrics.start()

        def ready() -> bool:
            if not metrics.alive():
                raise RuntimeError(f"metrics-server exited:\n{metrics.log_tail()}")
            try:
                return httpx.get(f"{url}/readyz", verify=secure.ssl_context(), timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(ready, 30, 0.2, what="metrics-server ready")
        yield Cluster(secure, kubelet, url)
    finally:
        metrics.stop()
        if kubelet is not None:
            cleanup([kubelet])
        secure.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def kubelet_get(cluster: Cluster, path: str, identity: str) -> httpx.Response:
    with httpx.Client(base_url=cluster.kubelet.address, verify=cluster.secure.ssl_context(identity),
                      timeout=30) as client:
        return client.get(path)


def test_kubelet_stats_are_authorized_by_subject_access_review(cluster: Cluster) -> None:
    allowed = kubelet_get(cluster, "/stats/summary", "metrics-server")
    assert allowed.status_code == 200, allowed.text
    assert allowed.json()["node"]["nodeName"] == cluster.kubelet.node
    assert kubelet_get(cluster, "/metrics/resource", "metrics-server").status_code == 200  # nodes/metrics
    assert "kubelet_runtime_operations_total" in kubelet_get(cluster, "/metrics", "metrics-server").text
    own = kubelet_get(cluster, "/metrics", "scheduler")
    assert own.status_code == 403 and "subresource=metrics" in own.json()["message"]
    denied = kubelet_get(cluster, "/stats/summary", "scheduler")
    assert denied.status_code == 403
    assert denied.json()["message"] == ("Forbidden (user=system:kube-scheduler, verb=get, resource=nodes, "
                                        "subresource=stats)")
    proxy = kubelet_get(cluster, "/pods", "metrics-server")
    assert proxy.status_code == 403 and "subresource=proxy" in proxy.json()["message"]


def test_kubelet_takes_bearer_tokens_through_token_review(cluster: Cluster) -> None:
    """Upstream's kubelet authentication.webhook: a caller without a certificate is who the apiserver's
    TokenReview says its token is, then authorized as any other caller."""
    secure = cluster.secure
    with secure.client("admin") as admin:
        role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": "node-stats-reader"},
                "rules": [{"apiGroups": [""], "resources": ["nodes/stats"], "verbs": ["get"]}]}
        assert admin.post("/apis/rbac.authorization.k8s.io/v1/clusterroles", json=role).status_code == 201
        binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                   "metadata": {"name": "node-stats-reader"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                               "name": "node-stats-reader"},
                   "subjects": [{"kind": "ServiceAccount", "name": "stats-reader", "namespace": "default"}]}
        assert admin.post("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", json=binding).status_code == 201
    reader = secure.request_token("stats-reader", "default")
    secure.wait_known(reader, resource={"verb": "get", "resource": "nodes", "subresource": "stats",
                                        "name": cluster.kubelet.node})
    with httpx.Client(base_url=cluster.kubelet.address, verify=secure.ssl_context(), timeout=30) as client:
        assert client.get("/stats/summary", headers={"Authorization": f"Bearer {reader}"}).status_code == 200
        denied = client.get("/pods", headers={"Authorization": f"Bearer {reader}"})
        assert denied.status_code == 403
        assert denied.json()["message"] == ("Forbidden (user=system:serviceaccount:default:stats-reader, verb=get, "
                                            "resource=nodes, subresource=proxy)")
        assert client.get("/stats/summary", headers={"Authorization": "Bearer garbage"}).status_code == 401
        assert client.get("/stats/summary").status_code == 401


def test_metrics_api_through_the_gate(cluster: Cluster) -> None:
    secure = cluster.secure

    def node_metrics() -> Any:
        with secure.client("admin") as admin:
            r = admin.get(f"{METRICS}/nodes/{cluster.kubelet.node}")
            return r.json() if r.status_code == 200 else None

    found = wait_for(node_metrics, 40, 0.5, what="NodeMetrics through the apiserver")
    assert found["kind"] == "NodeMetrics" and found["usage"]["cpu"].endswith("n")
    secure.issue("viewer", "metrics-viewer")
    secure.issue("nobody", "metrics-nobody")
    with secure.client("admin") as admin:
        r = admin.post("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", json={
            "metadata": {"name": "metrics-viewer"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                                                "kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "metrics-viewer"}]})
        assert r.status_code == 201, r.text
        reader = admin.get("/apis/rbac.authorization.k8s.io/v1/clusterroles/system:aggregated-metrics-reader").json()
        assert reader["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-view"] == "true"

    def viewer_reads() -> bool:
        with secure.client("viewer") as viewer:
            return viewer.get(f"{METRICS}/nodes").status_code == 200

    wait_for(viewer_reads, 10, 0.2, what="view to read NodeMetrics")
    with secure.client("nobody") as nobody:
        r = nobody.get(f"{METRICS}/nodes")
        assert r.status_code == 403
        assert r.json()["message"] == ('nodes.metrics.k8s.io is forbidden: User "metrics-nobody" cannot list '
                                       'resource "nodes" in API group "metrics.k8s.io" at the cluster scope')


def test_metrics_server_takes_only_the_front_proxy(cluster: Cluster, tmp_path: Path) -> None:
    secure = cluster.secure
    with httpx.Client(verify=secure.ssl_context("admin"), timeout=10) as admin:
        r = admin.get(f"{cluster.metrics_url}{METRICS}/nodes")
        assert r.status_code == 401, r.text
    with httpx.Client(verify=secure.ssl_context(), timeout=10) as anonymous:
        assert anonymous.get(f"{cluster.metrics_url}{METRICS}/nodes").status_code == 401
        assert anonymous.get(f"{cluster.metrics_url}/healthz").status_code == 200
    with httpx.Client(verify=secure.ssl_context("front-proxy-client"), timeout=10) as proxy:
        assert proxy.get(f"{cluster.metrics_url}{METRICS}/nodes").status_code == 200
