"""End-to-end fixtures: one whole process-based cluster for the package (`local_cluster`: etcd, apiserver,
controller-manager, scheduler and two kubelets with unique node names, see local_cluster.py), one with the Service
network too for the modules that need it (`service_cluster`), a fresh
namespace per test, real kubectl bound to it, and a second local tag of the web server image for
rollouts. Each cluster is removed when the package's last test is done, also when a test or the start-up fails.

MINIK8S_E2E_RUNTIMES=docker,containerd runs node a on the Docker shim and node b on a containerd of its own
(local-up's one node of each); the default is both nodes on the Docker shim. On the mixed cluster, a real
kubectl's `exec` into a pod the scheduler put on the containerd node fails (kubectl offers websockets only as
v5.channel.k8s.io, containerd 1.6 speaks v4 and SPDY; see test_kubelet_runtimes), so it is not the default."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

import docker
import httpx
import pytest

from containerd_node.launcher import import_images
from tests.cluster import wait_for
from tests.e2e.local_cluster import LocalCluster
from tests.kubectl import Kubectl, find_kubectl
from tests.node_process import HTTPD

KUBECTL_VERSION = "1.33"
E2E_RUNTIMES = tuple(r.strip() for r in os.environ.get("MINIK8S_E2E_RUNTIMES", "docker").split(",") if r.strip())
# the pod garbage collector's period and quarantine shortened and its threshold low, for test_disruption's podgc
# tests (the other tests' pods are never terminated long: their Deployments restart them, their namespaces go)
TERMINATED_POD_GC_THRESHOLD = 3
PODGC_ARGS = ("--podgc-period=1s", "--podgc-quarantine=2s",
              f"--terminated-pod-gc-threshold={TERMINATED_POD_GC_THRESHOLD}")
HTTPD_B = "minik8s/httpd:1-b"  # minik8s/httpd:1 plus /var/www/version.txt ("b"): a second image to roll to


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # pytest then tears the fixtures down: the cluster is removed, not orphaned


@pytest.fixture(scope="package")
def local_cluster() -> Iterator[LocalCluster]:
    """The e2e package's cluster: removed when the package's last test is done (its kubelets, controllers and
    apiserver would otherwise keep working beside the rest of the suite)."""
    previous = signal.signal(signal.SIGTERM, _terminate)  # e.g. `timeout` ending the run
    cluster = LocalCluster("e2e", audit=True, runtimes=E2E_RUNTIMES, controller_args=PODGC_ARGS)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        signal.signal(signal.SIGTERM, previous)


def iptables_lines(prefix: str) -> list[str]:
    saved = subprocess.run(["iptables-save"], capture_output=True, text=True, check=True).stdout
    return [line for line in saved.splitlines() if f"{prefix}-" in line]


@pytest.fixture(scope="package")
def service_cluster() -> Iterator[LocalCluster]:
    """A cluster with the Service network (kube-proxy on the host's packet filter, the cluster DNS) for the modules
    that need it (test_services, test_statefulsets: the same flags, so one cluster started once; each test works in
    namespaces of its own). When it stops, no rule of its kube-proxy's chain prefix is left."""
    previous = signal.signal(signal.SIGTERM, _terminate)
    cluster = LocalCluster("svc", service_network=True)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        signal.signal(signal.SIGTERM, previous)
    assert iptables_lines(cluster.proxy_prefix) == [], "rules of the stopped cluster's kube-proxy are left"


@pytest.fixture
def api(local_cluster: LocalCluster) -> Iterator[httpx.Client]:
    with local_cluster.client() as client:
        yield client


@pytest.fixture
def namespace(api: httpx.Client) -> Iterator[str]:
    """A namespace per test; deleting it at the end deletes its objects (namespace controller and kubelets)."""
    name = f"e2e-{uuid.uuid4().hex[:8]}"
    r = api.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    assert r.status_code == 201, r.text
    yield name
    api.delete(f"/api/v1/namespaces/{name}")
    # the next test starts on quiet nodes: the namespace and every pod in it are gone first
    wait_for(lambda: api.get(f"/api/v1/namespaces/{name}").status_code == 404, 60, 0.2,
             what=f"namespace {name} deleted (its pods stopped by the kubelets)")


@pytest.fixture
def kubectl(local_cluster: LocalCluster, namespace: str, tmp_path: Path) -> Kubectl:
    binary = find_kubectl(KUBECTL_VERSION)
    if binary is None:
        pytest.skip(f"kubectl {KUBECTL_VERSION} is not installed on this machine: this end-to-end test drives it")
    return Kubectl(binary, KUBECTL_VERSION, local_cluster.url, tmp_path / "kubectl", namespace)


@pytest.fixture(scope="session")
def httpd_b_image() -> Iterator[str]:
    """A second web server image, built locally from minik8s/httpd:1 (no registry), removed afterwards: for
    any cluster on this host's Docker (the compose cluster's test takes it too)."""
    client = docker.from_env()
    dockerfile = (f"FROM {HTTPD}\nRUN echo b > /var/www/version.txt\n"
                  "LABEL io.minik8s.managed=true io.minik8s.test=e2e\n").encode()
    try:
        client.images.build(fileobj=io.BytesIO(dockerfile), tag=HTTPD_B, rm=True, forcerm=True, pull=False,
                            network_mode="none")
        yield HTTPD_B
    finally:
        with contextlib.suppress(docker.errors.ImageNotFound):
            client.images.remove(HTTPD_B, force=True)
        client.close()


@pytest.fixture(scope="package")
def httpd_b(local_cluster: LocalCluster, httpd_b_image: str) -> str:
    """That image on every node of the e2e cluster: containerd nodes have no registry either, so it is imported."""
    for k in local_cluster.kubelets:
        if k.container_runtime == "containerd":
            import_images(k.runtime.containerd.layout, [httpd_b_image])  # type: ignore[union-attr]
    return httpd_b_image
