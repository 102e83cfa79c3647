"""The docker-compose cluster end to end (docker-compose.yml, hack/compose-up.sh, hack/compose-down.sh):
images built locally (hack/cluster-images.sh: debootstrap base, wheels built on the host), etcd, the
apiserver, the controller-manager, the scheduler and two kubelets as containers; a Deployment of the
httpd image gets a Running pod with an IP on each node, each answering HTTP from the host; then
`docker-compose down` and hack/compose-down.sh leave no containers, networks, pods, bridges, state or
iptables rules behind.

The cluster runs under its own project name, ports, node names and cluster CIDR, so it cannot collide
with a developer's compose or process cluster, nor with other tests' kubelets. The first run builds
the images (a few minutes); later runs reuse them.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import random
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import httpx
import pytest

from cni.config import bridge_name
from machinery.kubeconfig import load_kubeconfig
from tests.cluster import REPO, free_port, make_workdir, wait_for
from tests.manifests import deployment

pytestmark = pytest.mark.compose

HTTPD = "minik8s/httpd:1"
KUBELET_STATE = Path("/var/lib/minik8s/kubelet")
IMAGES_TIMEOUT = 1800  # the first build: debootstrap, the wheels, the component image
UP_TIMEOUT = 300
DOWN_TIMEOUT = 240

JSONDict = dict[str, Any]


# -- environment -------------------------------------------------------------------------------------


def _missing_prerequisite() -> str | None:
    if os.geteuid() != 0:
        return "the compose cluster needs root (kubelets manage bridges and iptables on this host)"
    if shutil.which("docker") is None:
        return "docker is not installed (hack/setup.sh installs it)"
    if subprocess.run(["docker", "info"], capture_output=True, timeout=60).returncode != 0:
        return "docker does not answer (hack/setup.sh starts dockerd)"
    if shutil.which("docker-compose") is None:
        return "docker-compose is not installed (hack/setup.sh installs Debian's docker-compose)"
    return None


def free_cluster_cidr() -> str:
    """A 10.x.0.0/16 that no route on this host overlaps (10.244/16 is the default clusters' own)."""
    routes = subprocess.run(["ip", "-4", "route", "show"], capture_output=True, text=True, check=True).stdout
    used = []
    for line in routes.splitlines():
        with contextlib.suppress(ValueError, IndexError):
            used.append(ipaddress.ip_network(line.split()[0], strict=False))
    candidates = [ipaddress.ip_network(f"10.{i}.0.0/16") for i in range(230, 255) if i != 244]
    free = [c for c in candidates if not any(c.overlaps(u) for u in used)]
    assert free, "no free 10.230-254.0.0/16 for the test cluster's pod network"
    return str(random.choice(free))


@dataclass
class ComposeCluster:
    project: str
    nodes: list[str]
    cluster_cidr: str
    env: dict[str, str]
    kubeconfig: Path
    workdir: Path
    up_seconds: float = 0.0

    def run(self, *argv: str, timeout: float = 120, check: bool = False) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(list(argv), cwd=REPO, env=self.env, capture_output=True, text=True, timeout=timeout)
        if check:
            assert done.returncode == 0, f"{' '.join(argv)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
        return done

    def compose(self, *args: str, timeout: float = 120, check: bool = False) -> subprocess.CompletedProcess[str]:
        return self.run("docker-compose", "-f", str(REPO / "docker-compose.yml"), "-p", self.project, *args,
                        timeout=timeout, check=check)

    def logs(self, tail: int = 40) -> str:
        with contextlib.suppress(Exception):
            done = self.compose("logs", "--no-color", f"--tail={tail}", timeout=60)
            return done.stdout + done.stderr
        return ""

    def client(self) -> httpx.Client:
        """An API client from the admin kubeconfig compose-up.sh wrote (TLS and credentials as it says)."""
        config = load_kubeconfig(self.kubeconfig)
        verify: bool | str = False if config.insecure else (config.ca_file or True)
        cert = (config.cert_file, config.key_file) if config.cert_file and config.key_file else None
        headers = {"Authorization": f"Bearer {config.token}"} if config.token else {}
        return httpx.Client(base_url=config.server, verify=verify, cert=cert, headers=headers, timeout=10)


def docker_ids(*args: str) -> list[str]:
    out = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=60, check=True).stdout
    return out.split()


def pod_container_ids(nodes: list[str]) -> list[str]:
    ids: list[str] = []
    for node in nodes:
        ids += docker_ids("ps", "-aq", "--filter", "label=io.minik8s.managed=true", "--filter",
                          f"label=io.minik8s.node={node}")
    return ids


def cidr_rules(cidr: str) -> list[str]:
    rules = []
    for table, chain in (("filter", "MINIK8S-FORWARD"), ("nat", "MINIK8S-POSTROUTING")):
        done = subprocess.run(["iptables", "-w", "10", "-t", table, "-S", chain], capture_output=True, text=True,
                              timeout=30)
        rules += [line for line in done.stdout.splitlines() if line.startswith("-A ") and cidr in line]
    return rules


def leftovers(cluster: ComposeCluster, *, rules: bool = True) -> list[str]:
    """What of the cluster is still on this host."""
    found = []
    if ids := docker_ids("ps", "-aq", "--filter", f"label=com.docker.compose.project={cluster.project}"):
        found.append(f"compose containers {ids}")
    if ids := docker_ids("network", "ls", "-q", "--filter", f"label=com.docker.compose.project={cluster.project}"):
        found.append(f"compose networks {ids}")
    if ids := pod_container_ids(cluster.nodes):
        found.append(f"pod containers {ids}")
    for node in cluster.nodes:
        if Path("/sys/class/net", bridge_name(node)).exists():
            found.append(f"bridge {bridge_name(node)}")
        if (KUBELET_STATE / node).exists():
            found.append(f"state dir {KUBELET_STATE / node}")
        if Path("/run/minik8s/kubelets", node).exists():
            found.append(f"kubelet registration /run/minik8s/kubelets/{node}")
    if rules and (left := cidr_rules(cluster.cluster_cidr)):
        found.append(f"iptables rules {left}")
    return found


# -- fixtures ----------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def compose_images() -> float:
    """hack/cluster-images.sh: builds what is missing or stale (minutes the first time); its duration."""
    reason = _missing_prerequisite()
    if reason:
        pytest.skip(reason)
    start = time.monotonic()
    done = subprocess.run([str(REPO / "hack" / "cluster-images.sh")], cwd=REPO, capture_output=True, text=True,
                          timeout=IMAGES_TIMEOUT)
    assert done.returncode == 0, f"hack/cluster-images.sh failed:\n{done.stdout[-4000:]}\n{done.stderr[-8000:]}"
    return time.monotonic() - start


@pytest.fixture(scope="module")
def compose_cluster(compose_images: float) -> Iterator[ComposeCluster]:
    """The compose cluster up (hack/compose-up.sh --no-build) on settings of its own; always taken down."""
    tag = uuid.uuid4().hex[:6]
    workdir = make_workdir("minik8s-compose-")
    cidr = free_cluster_cidr()
    prefix = f"c{tag[:4]}-"
    env = {
        **os.environ,
        "COMPOSE_PROJECT_NAME": f"minik8s-e2e-{tag}",
        "MINIK8S_API_PORT": str(free_port()),
        "MINIK8S_KUBELET_PORT_1": str(free_port()),
        "MINIK8S_KUBELET_PORT_2": str(free_port()),
        "MINIK8S_NODE_PREFIX": prefix,
        "MINIK8S_CLUSTER_CIDR": cidr,
        "MINIK8S_COMPOSE_OUT": str(workdir),
    }
    for var in ("KUBECONFIG", "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        env.pop(var, None)
    cluster = ComposeCluster(project=env["COMPOSE_PROJECT_NAME"], nodes=[f"{prefix}node-1", f"{prefix}node-2"],
                             cluster_cidr=cidr, env=env, kubeconfig=workdir / "kubeconfig", workdir=workdir)
    try:
        start = time.monotonic()
        done = cluster.run(str(REPO / "hack" / "compose-up.sh"), "--no-build", timeout=UP_TIMEOUT)
        cluster.up_seconds = time.monotonic() - start
        assert done.returncode == 0, (f"hack/compose-up.sh exited {done.returncode}:\n{done.stdout}\n"
                                      f"{done.stderr[-6000:]}\n{cluster.logs()}")
        yield cluster
    finally:
        cluster.run(str(REPO / "hack" / "compose-down.sh"), timeout=DOWN_TIMEOUT)
        shutil.rmtree(workdir, ignore_errors=True)


# -- tests -------------------------------------------------------------------------------------------


def test_compose_up_writes_kubeconfig_and_nodes_are_ready(compose_cluster: ComposeCluster) -> None:
    cluster = compose_cluster
    assert cluster.kubeconfig.is_file()
    with cluster.client() as api:
        assert api.get("/readyz").status_code == 200
        nodes = {n["metadata"]["name"]: n for n in api.get("/api/v1/nodes").json()["items"]}
    assert set(cluster.nodes) <= set(nodes), f"nodes {sorted(nodes)}"
    subnet = ipaddress.ip_network(cluster.cluster_cidr)
    cidrs = set()
    for name in cluster.nodes:
        node = nodes[name]
        ready = {c["type"]: c["status"] for c in node["status"]["conditions"]}.get("Ready")
        assert ready == "True", node["status"]
        cidrs.add(node["spec"]["podCIDR"])
        assert ipaddress.ip_network(node["spec"]["podCIDR"]).overlaps(subnet), (name, node["spec"]["podCIDR"])
    assert len(cidrs) == 2, cidrs
    # Every container of the project is labelled, and the kubelets run in the host's namespaces.
    containers = docker_ids("ps", "-q", "--filter", f"label=com.docker.compose.project={cluster.project}")
    assert len(containers) == 6, containers
    labelled = docker_ids("ps", "-q", "--filter", f"label=com.docker.compose.project={cluster.project}",
                          "--filter", "label=io.minik8s.managed=true")
    assert sorted(labelled) == sorted(containers)
    node_ids = docker_ids("ps", "-q", "--filter", f"label=com.docker.compose.project={cluster.project}",
                          "--filter", "label=io.minik8s.role=node")
    inspected = json.loads(subprocess.run(["docker", "inspect", *node_ids], capture_output=True, text=True,
                                          check=True, timeout=60).stdout)
    assert [(c["HostConfig"]["NetworkMode"], c["HostConfig"]["PidMode"]) for c in inspected] == [("host", "host")] * 2
    print(f"compose-up.sh --no-build: {cluster.up_seconds:.1f}s to 2 Ready nodes")


def test_deployment_runs_a_pod_on_each_node_that_answers_http(compose_cluster: ComposeCluster) -> None:
    cluster = compose_cluster
    name = f"web-{uuid.uuid4().hex[:5]}"
    with cluster.client() as api:
        start = time.monotonic()
        r = api.post("/apis/apps/v1/namespaces/default/deployments", json=deployment(name, replicas=2, image=HTTPD))
        assert r.status_code == 201, r.text

        def running() -> list[JSONDict] | None:
            items = api.get("/api/v1/namespaces/default/pods", params={"labelSelector": f"app={name}"}).json()["items"]
            ok = [p for p in items if p.get("status", {}).get("phase") == "Running" and p["status"].get("podIP")
                  and all(s.get("ready") for s in p["status"].get("containerStatuses") or [{}])]
            return ok if len(ok) == 2 and len(items) == 2 else None

        try:
            pods = cast(list[JSONDict], wait_for(running, 120, 0.25, what=f"2 Running pods of {name}"))
        except TimeoutError:
            items = api.get("/api/v1/namespaces/default/pods", params={"labelSelector": f"app={name}"}).json()
            raise AssertionError(f"pods: {json.dumps(items)[:4000]}\n{cluster.logs()}") from None
        elapsed = time.monotonic() - start

        on = {p["spec"]["nodeName"]: p["status"]["podIP"] for p in pods}
        assert set(on) == set(cluster.nodes), f"pods on {on}: want one on each of {cluster.nodes}"
        for node, ip in on.items():
            assert ipaddress.ip_address(ip) in ipaddress.ip_network(cluster.cluster_cidr), (node, ip)
        # Pods are sibling containers on this host's Docker (pause sandbox + httpd), one node label each.
        for node in cluster.nodes:
            ids = pod_container_ids([node])
            assert len(ids) == 2, f"node {node}: pod containers {ids}"
        # Each pod IP answers from the host, through the node's bridge in the host's network namespace.
        for node, ip in on.items():
            done = subprocess.run(["curl", "-sS", "-m", "5", f"http://{ip}/"], capture_output=True, text=True,
                                  timeout=30)
            assert done.returncode == 0, f"curl http://{ip}/ (pod on {node}): {done.stderr}"
            assert "minik8s httpd" in done.stdout, done.stdout
        # And the apiserver reaches the kubelets (logs through pods/{name}/log).
        log = api.get(f"/api/v1/namespaces/default/pods/{pods[0]['metadata']['name']}/log")
        assert log.status_code == 200, log.text
        print(f"2 replicas Running with IPs {on} {elapsed:.1f}s after the create")

        r = api.delete(f"/apis/apps/v1/namespaces/default/deployments/{name}",
                       params={"propagationPolicy": "Foreground"})
        assert r.status_code in (200, 202), r.text


def test_compose_up_again_leaves_the_running_cluster_alone(compose_cluster: ComposeCluster) -> None:
    cluster = compose_cluster
    before = sorted(docker_ids("ps", "-q", "--filter", f"label=com.docker.compose.project={cluster.project}"))
    start = time.monotonic()
    done = cluster.run(str(REPO / "hack" / "compose-up.sh"), "--no-build", timeout=UP_TIMEOUT)
    assert done.returncode == 0, done.stderr[-4000:]
    after = sorted(docker_ids("ps", "-q", "--filter", f"label=com.docker.compose.project={cluster.project}"))
    assert before == after
    assert "is up-to-date" in done.stderr
    print(f"compose-up.sh again: {time.monotonic() - start:.1f}s")


def test_down_leaves_nothing_behind(compose_cluster: ComposeCluster) -> None:
    cluster = compose_cluster
    node1, node2 = cluster.nodes
    with cluster.client() as api:
        r = api.post("/apis/apps/v1/namespaces/default/deployments", json=deployment("leftover", 2, HTTPD))
        assert r.status_code == 201, r.text
    wait_for(lambda: all(len(pod_container_ids([n])) >= 2 for n in cluster.nodes), 60, 0.25,
             what="pod containers on both nodes")

    # node-2 crashes (SIGKILL: no teardown), so its pods outlive it, as a crashed kubelet's do.
    node2_container = docker_ids("ps", "-q", "--filter", f"label=com.docker.compose.project={cluster.project}",
                                 "--filter", "label=com.docker.compose.service=node-2")
    assert len(node2_container) == 1
    subprocess.run(["docker", "kill", node2_container[0]], check=True, capture_output=True, timeout=60)

    # Plain `docker-compose down`: the containers and the network go, and node-1, stopped, takes its
    # pods, bridge and state with it.
    done = cluster.compose("down", timeout=DOWN_TIMEOUT)
    assert done.returncode == 0, done.stderr
    assert not docker_ids("ps", "-aq", "--filter", f"label=com.docker.compose.project={cluster.project}")
    assert not docker_ids("network", "ls", "-q", "--filter", f"label=com.docker.compose.project={cluster.project}")
    assert pod_container_ids([node1]) == []
    assert not Path("/sys/class/net", bridge_name(node1)).exists()
    assert not (KUBELET_STATE / node1).exists()
    assert len(pod_container_ids([node2])) >= 2, "the crashed node's pods should still be there"

    # hack/compose-down.sh: what the crashed node left (pods, bridge, state), this cluster CIDR's
    # iptables rules, the shared mount and the kubeconfig.
    done = cluster.run(str(REPO / "hack" / "compose-down.sh"), timeout=DOWN_TIMEOUT)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    assert leftovers(cluster) == []
    assert not cluster.kubeconfig.exists()
