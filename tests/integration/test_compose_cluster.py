"""The docker-compose cluster end to end (docker-compose.yml, hack/compose-up.sh, hack/compose-down.sh):
images built locally (hack/cluster-images.sh: debootstrap base, wheels built on the host); the one-shot
`pki` service generating the cluster PKI and one kubeconfig per identity; etcd (client and peer TLS, taking
only the apiserver's client certificate of its own CA), the apiserver (HTTPS only,
audit log on the host), the controller-manager, the scheduler and two kubelets as containers, each under
its own identity. The road of the examples Deployment driven with real kubectl as kubernetes-admin: 3
Running pods with IPs on both nodes answering HTTP from the host, the Events and the audit log showing
each step by its component's identity (also through `python -m apiserver.audit`), scale to 5 and back,
roll to a second image and back, delete: no pod container left. Then `docker-compose down` and
hack/compose-down.sh leave no containers, networks, pods, bridges, state or iptables rules behind.

The cluster runs under its own project name, ports, node names, cluster CIDR and state dir, so it cannot
collide with a developer's compose or process cluster, nor with other tests' kubelets. One bring-up serves
the whole module (the last test takes it down). The first run builds the images (a few minutes); later
runs reuse them.
"""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import json
import os
import random
import shutil
import ssl
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import httpx
import pytest
import yaml

from apiserver.audit import read_events
from cni.config import bridge_name
from machinery.kubeconfig import load_kubeconfig, write_kubeconfig
from tests.cluster import REPO, assert_etcd_takes_only_the_apiserver, free_port, make_workdir, wait_for
from tests.e2e.conftest import KUBECTL_VERSION
from tests.e2e.conftest import httpd_b_image as httpd_b_image  # the second web server image to roll to (a fixture)
from tests.e2e.test_guestbook import RequestLoop, ready
from tests.e2e.test_road import PAGE_TITLE, events_about, http_get, n_ready, recorded_at, wait_pods, write_manifest
from tests.e2e.test_road_server import ADMIN, DEPLOYMENT_CONTROLLER, flatten, pod_road
from tests.e2e.test_road_server import first as first_step
from tests.kubectl import Kubectl, find_kubectl
from tests.manifests import deployment
from tests.node_process import ensure_guestbook_images

pytestmark = pytest.mark.compose

HTTPD = "minik8s/httpd:1"
SA = "system:serviceaccount:kube-system:"
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
    up_output: str = ""  # what hack/compose-up.sh printed (its next steps on stdout)
    files: tuple[str, ...] = ("docker-compose.yml",)  # in REPO, as `docker-compose -f` takes them

    def run(self, *argv: str, timeout: float = 120, check: bool = False) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(list(argv), cwd=REPO, env=self.env, capture_output=True, text=True, timeout=timeout)
        if check:
            assert done.returncode == 0, f"{' '.join(argv)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
        return done

    def compose(self, *args: str, timeout: float = 120, check: bool = False) -> subprocess.CompletedProcess[str]:
        files = [arg for name in self.files for arg in ("-f", str(REPO / name))]
        return self.run("docker-compose", *files, "-p", self.project, *args, timeout=timeout, check=check)

    def logs(self, tail: int = 40) -> str:
        with contextlib.suppress(Exception):
            done = self.compose("logs", "--no-color", f"--tail={tail}", timeout=60)
            return done.stdout + done.stderr
        return ""

    @property
    def url(self) -> str:
        return load_kubeconfig(self.kubeconfig).server

    @property
    def pki(self) -> Path:
        return self.workdir / "pki"

    @property
    def audit_log(self) -> Path:
        return self.workdir / "log" / "audit.log"

    def audit_events(self) -> list[JSONDict]:
        return list(read_events(self.audit_log))

    def client(self) -> httpx.Client:
        """An API client from the admin kubeconfig compose-up.sh wrote (TLS and credentials as it says)."""
        config = load_kubeconfig(self.kubeconfig)
        context = ssl.create_default_context(cafile=config.ca_file)
        if config.cert_file and config.key_file:
            context.load_cert_chain(config.cert_file, config.key_file)
        headers = {"Authorization": f"Bearer {config.token}"} if config.token else {}
        return httpx.Client(base_url=config.server, verify=context, headers=headers, timeout=10)


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
    return _build_images()


@functools.cache
def _build_images() -> float:
    """Once per session, however many modules import the fixture."""
    start = time.monotonic()
    done = subprocess.run([str(REPO / "hack" / "cluster-images.sh")], cwd=REPO, capture_output=True, text=True,
                          timeout=IMAGES_TIMEOUT)
    assert done.returncode == 0, f"hack/cluster-images.sh failed:\n{done.stdout[-4000:]}\n{done.stderr[-8000:]}"
    return time.monotonic() - start


@pytest.fixture(scope="module")
def compose_cluster(compose_images: float) -> Iterator[ComposeCluster]:
    """The compose cluster up (hack/compose-up.sh --no-build) on settings of its own; always taken down."""
    with compose_cluster_up("e2e") as cluster:
        yield cluster


@contextlib.contextmanager
def compose_cluster_up(kind: str, *up_args: str, files: tuple[str, ...] = ("docker-compose.yml",),
                       extra_env: dict[str, str] | None = None) -> Iterator[ComposeCluster]:
    """hack/compose-up.sh --no-build [up_args] as project minik8s-<kind>-<tag>, with ports, node names, cluster
    CIDR and state dir of its own (and `extra_env` on top); hack/compose-down.sh --purge at the end, come what may."""
    tag = uuid.uuid4().hex[:6]
    workdir = make_workdir("minik8s-compose-")
    cidr = free_cluster_cidr()
    prefix = f"c{tag[:4]}-"
    env = {
        **os.environ,
        **(extra_env or {}),
        "COMPOSE_PROJECT_NAME": f"minik8s-{kind}-{tag}",
        "MINIK8S_API_PORT": str(free_port()),
        "MINIK8S_KUBELET_PORT_1": str(free_port()),
        "MINIK8S_KUBELET_PORT_2": str(free_port()),
        "MINIK8S_NODE_PREFIX": prefix,
        "MINIK8S_CLUSTER_CIDR": cidr,
        "MINIK8S_PROXY_CHAIN_PREFIX": f"KC{tag[:4].upper()}",  # kube-proxy's chains, apart from other clusters'
        "MINIK8S_PROXY_HEALTHZ_PORT": str(free_port()),
        "MINIK8S_PROXY_METRICS_PORT": str(free_port()),
        "MINIK8S_ROAD_OTLP_PORT": str(free_port()),  # the road server's OTLP port on the host, for the nodes' spans
        "MINIK8S_COMPOSE_OUT": str(workdir),
    }
    for var in ("KUBECONFIG", "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        env.pop(var, None)
    cluster = ComposeCluster(project=env["COMPOSE_PROJECT_NAME"], nodes=[f"{prefix}node-1", f"{prefix}node-2"],
                             cluster_cidr=cidr, env=env, kubeconfig=workdir / "kubeconfig", workdir=workdir,
                             files=files)
    try:
        start = time.monotonic()
        done = cluster.run(str(REPO / "hack" / "compose-up.sh"), "--no-build", *up_args, timeout=UP_TIMEOUT)
        cluster.up_seconds = time.monotonic() - start
        cluster.up_output = done.stdout
        assert done.returncode == 0, (f"hack/compose-up.sh exited {done.returncode}:\n{done.stdout}\n"
                                      f"{done.stderr[-6000:]}\n{cluster.logs()}")
        yield cluster
    finally:
        cluster.run(str(REPO / "hack" / "compose-down.sh"), "--purge", timeout=DOWN_TIMEOUT)
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
    # etcd, apiserver, controller-manager, scheduler, the cluster DNS, kube-proxy, the local-path provisioner, the
    # metrics-server, the road server, 2 nodes
    assert len(containers) == 11, containers
    labelled = docker_ids("ps", "-q", "--filter", f"label=com.docker.compose.project={cluster.project}",
                          "--filter", "label=io.minik8s.managed=true")
    assert sorted(labelled) == sorted(containers)
    node_ids = docker_ids("ps", "-q", "--filter", f"label=com.docker.compose.project={cluster.project}",
                          "--filter", "label=io.minik8s.role=node")
    inspected = json.loads(subprocess.run(["docker", "inspect", *node_ids], capture_output=True, text=True,
                                          check=True, timeout=60).stdout)
    assert [(c["HostConfig"]["NetworkMode"], c["HostConfig"]["PidMode"]) for c in inspected] == [("host", "host")] * 2
    # the next steps name the road and its page (through kubectl proxy)
    assert "-m kubectl road deployment/web" in cluster.up_output, cluster.up_output
    assert "http://127.0.0.1:8001/apis/road.minik8s.io/v1alpha1/namespaces/default/deployments/web" in cluster.up_output
    print(f"compose-up.sh --no-build: {cluster.up_seconds:.1f}s to 2 Ready nodes")


def test_the_apiserver_serves_only_tls_and_each_component_has_its_own_identity(
        compose_cluster: ComposeCluster) -> None:
    cluster = compose_cluster
    config = load_kubeconfig(cluster.kubeconfig)
    assert config.server.startswith("https://") and config.cert_file and config.key_file and config.ca_file
    # No credentials on the published port: 401 with a Status (the public health path stays open).
    with httpx.Client(base_url=config.server, verify=ssl.create_default_context(cafile=cluster.pki / "ca.crt"),
                      timeout=10) as anonymous:
        r = anonymous.get("/api/v1/namespaces/default/pods")
        assert r.status_code == 401, r.text
        assert r.json()["kind"] == "Status" and r.json()["reason"] == "Unauthorized"
        assert anonymous.get("/readyz").status_code == 200
    with cluster.client() as api:
        review = api.post("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", json={
            "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {"verb": "delete", "group": "apps", "resource": "deployments"}}})
        assert review.status_code == 201 and review.json()["status"]["allowed"] is True, review.text

    # The apiserver publishes 6443 only and has its plain port off; the one-shot pki service is done.
    ids = docker_ids("ps", "-aq", "--filter", f"label=com.docker.compose.project={cluster.project}")
    containers = {c["Config"]["Labels"]["com.docker.compose.service"]: c
                  for c in json.loads(cluster.run("docker", "inspect", *ids, check=True).stdout)}
    apiserver = containers["apiserver"]
    assert list(apiserver["HostConfig"]["PortBindings"]) == ["6443/tcp"]
    assert "--port=0" in apiserver["Config"]["Cmd"] and "--secure-port=6443" in apiserver["Config"]["Cmd"]
    assert (containers["pki"]["State"]["Status"], containers["pki"]["State"]["ExitCode"]) == ("exited", 0)

    # Each component mounts its own kubeconfig, naming its own identity (a client certificate by the CA).
    def mounted(service: str, target: str) -> Path:
        return Path(next(m["Source"] for m in containers[service]["Mounts"] if m["Destination"] == target))

    expected = {"controller-manager": ("/etc/kubernetes/controller-manager.conf", "system:kube-controller-manager"),
                "scheduler": ("/etc/kubernetes/scheduler.conf", "system:kube-scheduler"),
                "node-1": ("/etc/kubernetes/kubelet.conf", f"system:node:{cluster.nodes[0]}"),
                "node-2": ("/etc/kubernetes/kubelet.conf", f"system:node:{cluster.nodes[1]}")}
    for service, (target, user) in expected.items():
        doc = yaml.safe_load(mounted(service, target).read_text())
        assert doc["users"][0]["name"] == user, (service, doc["users"][0]["name"])
    # The kubelets serve HTTPS with certificates from the cluster CA for the address they report, and
    # want the apiserver's client certificate: none → 401, another identity's → 403.
    with cluster.client() as api:
        nodes = {n["metadata"]["name"]: n for n in api.get("/api/v1/nodes").json()["items"]}
    for name in cluster.nodes:
        address = next(a["address"] for a in nodes[name]["status"]["addresses"] if a["type"] == "InternalIP")
        port = nodes[name]["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"]
        ca = ssl.create_default_context(cafile=cluster.pki / "ca.crt")
        as_scheduler = ssl.create_default_context(cafile=cluster.pki / "ca.crt")
        as_scheduler.load_cert_chain(cluster.pki / "scheduler.crt", cluster.pki / "scheduler.key")
        for context, code in ((ca, 401), (as_scheduler, 403)):
            r = httpx.get(f"https://{address}:{port}/pods", verify=context, timeout=10, trust_env=False)
            assert r.status_code == code, (name, r.status_code, r.text)
    # The controller-manager's and scheduler's secure ports take the cluster CA's client certificates: /metrics
    # for kubernetes-admin (system:masters), 401 without one.
    admin = ssl.create_default_context()
    admin.check_hostname, admin.verify_mode = False, ssl.CERT_NONE  # their serving certificates are self-signed
    admin.load_cert_chain(cluster.pki / "admin.crt", cluster.pki / "admin.key")
    anonymous = ssl.create_default_context()
    anonymous.check_hostname, anonymous.verify_mode = False, ssl.CERT_NONE
    for service, port in (("controller-manager", 10257), ("scheduler", 10259)):
        address = next(iter(containers[service]["NetworkSettings"]["Networks"].values()))["IPAddress"]
        scraped = httpx.get(f"https://{address}:{port}/metrics", verify=admin, timeout=10, trust_env=False)
        assert scraped.status_code == 200 and "process_resident_memory_bytes" in scraped.text, (service, scraped.text)
        assert httpx.get(f"https://{address}:{port}/metrics", verify=anonymous, timeout=10,
                         trust_env=False).status_code == 401
    # Only the apiserver signs service-account tokens (TokenRequest): no other component gets sa.key.
    assert not any(m["Destination"].endswith("sa.key") for s in ("controller-manager", "scheduler", "node-1", "node-2")
                   for m in containers[s]["Mounts"])


def test_etcd_takes_only_the_apiservers_client_certificate(compose_cluster: ComposeCluster) -> None:
    """etcd serves TLS and wants a client certificate of its own CA (issue 10, finding 7: any process that
    reached its port read and wrote every object): plain, without a certificate, or with the cluster CA's
    kubernetes-admin it refuses; the apiserver's kube-apiserver-etcd-client gets in. Only the apiserver
    mounts that certificate, and of etcd's PKI it sees the CA certificate alone."""
    cluster = compose_cluster
    ids = docker_ids("ps", "-aq", "--filter", f"label=com.docker.compose.project={cluster.project}")
    containers = {c["Config"]["Labels"]["com.docker.compose.service"]: c
                  for c in json.loads(cluster.run("docker", "inspect", *ids, check=True).stdout)}
    address = next(iter(containers["etcd"]["NetworkSettings"]["Networks"].values()))["IPAddress"]
    # its certificate names the service; the host reaches it at its address
    assert_etcd_takes_only_the_apiserver(f"https://{address}:2379", cluster.pki, server_name="etcd")
    assert "--etcd-certfile=/etc/kubernetes/pki/apiserver-etcd-client.crt" in containers["apiserver"]["Config"]["Cmd"]

    # No other container mounts etcd's PKI or the apiserver's etcd client certificate.
    etcd_files = (str(cluster.pki / "etcd"), str(cluster.pki / "apiserver-etcd-client"))
    for service, container in containers.items():
        sources = [m["Source"] for m in container["Mounts"] if m["Type"] == "bind"]
        if service not in ("apiserver", "etcd"):
            assert not [s for s in sources if s.startswith(etcd_files) or s == str(cluster.pki)], service
    seen = cluster.run("docker", "exec", containers["apiserver"]["Id"], "ls", "-A", "/etc/kubernetes/pki/etcd",
                       check=True).stdout.split()
    assert seen == ["ca.crt"], seen


@pytest.fixture
def namespace(compose_cluster: ComposeCluster) -> Iterator[str]:
    """A namespace per test; deleted at the end, waiting until its pods are gone from the nodes."""
    name = f"road-{uuid.uuid4().hex[:6]}"
    with compose_cluster.client() as api:
        r = api.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        assert r.status_code == 201, r.text
        try:
            yield name
        finally:
            api.delete(f"/api/v1/namespaces/{name}")
            wait_for(lambda: api.get(f"/api/v1/namespaces/{name}").status_code == 404, 90, 0.25,
                     what=f"namespace {name} deleted")


@pytest.fixture
def kubectl(compose_cluster: ComposeCluster, namespace: str, tmp_path: Path) -> Kubectl:
    """Real kubectl as kubernetes-admin: the compose cluster's admin certificate, its CA, the test's namespace."""
    binary = find_kubectl(KUBECTL_VERSION)
    if binary is None:
        pytest.skip(f"kubectl {KUBECTL_VERSION} is not installed on this machine: this end-to-end test drives it")
    cluster = compose_cluster
    kubectl = Kubectl(binary, KUBECTL_VERSION, cluster.url, tmp_path / "kubectl", namespace)
    write_kubeconfig(kubectl.kubeconfig, cluster.url, "kubernetes-admin", ca_file=cluster.pki / "ca.crt",
                     cert_file=cluster.pki / "admin.crt", key_file=cluster.pki / "admin.key", embed=True,
                     namespace=namespace)
    return kubectl


def web_manifest(path: Path) -> Path:
    """examples/web-deployment.yaml at 3 replicas; busybox httpd ignores SIGTERM, so a 1 s grace period."""
    example = yaml.safe_load((REPO / "examples" / "web-deployment.yaml").read_text())
    example["spec"]["replicas"] = 3
    example["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = 1
    return write_manifest(path, example)


def assert_no_pod_containers(cluster: ComposeCluster, uids: set[str]) -> None:
    """No container of these pods is left on this host's Docker (sandbox or app)."""
    def left() -> list[str]:
        return [u for u in uids if docker_ids("ps", "-aq", "--filter", f"label=io.kubernetes.pod.uid={u}")]

    wait_for(lambda: not left(), 90, 0.25, what=f"the containers of {len(uids)} pods removed")


def test_the_examples_deployment_road_by_identity(compose_cluster: ComposeCluster, namespace: str,
                                                  kubectl: Kubectl, tmp_path: Path) -> None:
    cluster, ns = compose_cluster, namespace
    manifest = web_manifest(tmp_path / "web.yaml")
    start = time.monotonic()
    assert kubectl.run("apply", "-f", str(manifest)).ok().stdout.strip() == "deployment.apps/web created"
    with cluster.client() as api:
        pods = wait_pods(api, ns, "web", n_ready(3), 120, "3 web pods Running and Ready")
        elapsed = time.monotonic() - start
        on = {p["metadata"]["name"]: (p["spec"]["nodeName"], p["status"]["podIP"], p["metadata"]["uid"]) for p in pods}
        assert {node for node, *_ in on.values()} == set(cluster.nodes), f"pods {on}: want both nodes"
        for name, (node, ip, uid) in on.items():
            assert ipaddress.ip_address(ip) in ipaddress.ip_network(cluster.cluster_cidr), (name, node, ip)
            page = http_get(f"http://{ip}/")  # from the host, through the node's bridge
            assert page.status_code == 200 and PAGE_TITLE in page.text, (name, ip, page.text)
            # pod containers on the host's Docker, labelled with their node: a sandbox and httpd
            ids = docker_ids("ps", "-q", "--filter", f"label=io.kubernetes.pod.uid={uid}",
                             "--filter", f"label=io.minik8s.node={node}")
            assert len(ids) == 2, (name, node, ids)
        print(f"apply -> 3 replicas Running and Ready on {sorted(cluster.nodes)}: {elapsed:.1f}s")
        # the apiserver reaches the kubelets (kubectl logs goes through pods/{name}/log)
        first = pods[0]["metadata"]["name"]
        wait_for(lambda: "response:200" in kubectl.run("logs", first).stdout, 20, 0.25, what=f"{first}'s access log")

        # The Events of each pod: the road in order, each step by its component.
        rs_name = next(o["name"] for o in pods[0]["metadata"]["ownerReferences"] if o.get("controller"))

        def road(name: str) -> list[JSONDict] | None:
            scaled = [e for e in events_about(api, ns, "Deployment", "web") if e["reason"] == "ScalingReplicaSet"]
            created = [e for e in events_about(api, ns, "ReplicaSet", rs_name)
                       if e["reason"] == "SuccessfulCreate" and e["message"] == f"Created pod: {name}"]
            about = events_about(api, ns, "Pod", name)
            steps = [scaled, created] + [[e for e in about if e["reason"] == r]
                                         for r in ("Scheduled", "Pulled", "Created", "Started")]
            return [found[0] for found in steps] if all(len(found) == 1 for found in steps) else None

        for name, (node, *_) in on.items():
            chain = cast(list[JSONDict], wait_for(lambda name=name: road(name), 30, 0.25, what=f"{name}'s events"))
            assert [e["source"]["component"] for e in chain] == [
                "deployment-controller", "replicaset-controller", "default-scheduler", "kubelet", "kubelet", "kubelet"]
            assert all(e["source"].get("host") == node for e in chain[3:]), chain
            at = {e["reason"]: recorded_at(e) for e in chain}
            # SuccessfulCreate and Scheduled race (the scheduler's watch can beat the controller's own
            # response), as upstream; both follow the scale-up and precede the kubelet's steps.
            assert at["ScalingReplicaSet"] < min(at["SuccessfulCreate"], at["Scheduled"])
            assert max(at["SuccessfulCreate"], at["Scheduled"]) < at["Pulled"] < at["Created"] < at["Started"], at
        # The road server (issue 15) through the apiserver: every pod's steps from the apiserver, the
        # controller-manager, the scheduler and its kubelet, each component's spans sent to it over OTLP.
        nodes = {uid: node for node, _, uid in on.values()}

        def complete() -> JSONDict | None:
            r = api.get(f"/apis/road.minik8s.io/v1alpha1/namespaces/{ns}/deployments/web")
            assert r.status_code == 200, r.text
            road = cast(JSONDict, r.json())
            rs = road["roads"]
            if len(rs) != 1 or len(rs[0]["roads"]) != 3:
                return None
            return road if all(pod_road(pod["steps"], nodes[pod["object"]["uid"]]) for pod in rs[0]["roads"]) else None

        traced = cast(JSONDict, wait_for(complete, 60, 0.5, what="every pod's steps in the Deployment's road"))
        apply = first_step(traced["steps"], "apiserver.request", lane=ADMIN, **{"http.request.method": "POST"})
        assert apply is not None, traced["steps"]
        assert first_step(traced["roads"][0]["steps"], "apiserver.request", lane=DEPLOYMENT_CONTROLLER) is not None
        lanes = {s["lane"] for s in flatten(traced)}
        want = {ADMIN, DEPLOYMENT_CONTROLLER, "kube-scheduler"} | {f"kubelet/{n}" for n in cluster.nodes}
        assert want <= lanes, lanes
    # mkubectl road with the kubeconfig compose-up.sh wrote: the finished table
    done = cluster.run(str(REPO / ".venv" / "bin" / "python"), "-m", "kubectl", "--kubeconfig", str(cluster.kubeconfig),
                       "-n", ns, "road", "deployment/web", check=True)
    table = done.stdout.splitlines()
    assert table[0].split() == ["OFFSET", "DURATION", "LANE", "OBJECT", "STEP", "DETAILS"], done.stdout
    assert any("deployment/web" in line and ADMIN in line and "create deployments" in line for line in table)
    assert any(f"kubelet/{cluster.nodes[0]}" in line for line in table), done.stdout

    listed = kubectl.run("get", "events", "--sort-by=.metadata.creationTimestamp").ok().stdout
    assert all(reason in listed for reason in ("ScalingReplicaSet", "SuccessfulCreate", "Scheduled", "Started"))

    # The audit log on the host: each request of the road by its own identity, in order, per pod.
    def audited(verb: str | tuple[str, ...], resource: str, subresource: str | None, name: str) -> JSONDict | None:
        verbs = (verb,) if isinstance(verb, str) else verb
        return next((e for e in cluster.audit_events() if e["stage"] == "ResponseComplete" and e["verb"] in verbs
                     and (ref := e.get("objectRef") or {}).get("resource") == resource
                     and ref.get("subresource") == subresource and ref.get("name") == name
                     and ref.get("namespace") == ns and 200 <= e["responseStatus"]["code"] < 300), None)

    for name, (node, *_) in on.items():
        steps = [("create", "deployments", None, "web", "kubernetes-admin", "kubectl"),
                 ("create", "replicasets", None, rs_name, f"{SA}deployment-controller", "kube-controller-manager/"),
                 ("create", "pods", None, name, f"{SA}replicaset-controller", "kube-controller-manager/"),
                 ("create", "pods", "binding", name, "system:kube-scheduler", "kube-scheduler/"),
                 (("patch", "update"), "pods", "status", name, f"system:node:{node}", "kubelet/")]
        found = cast(list[JSONDict], wait_for(
            lambda steps=steps: all(hit := [audited(*step[:4]) for step in steps]) and hit, 20, 0.25,
            what=f"{name}'s road in {cluster.audit_log}"))
        assert [e["user"]["username"] for e in found] == [user for *_, user, _ in steps]
        agents = [e["userAgent"] for e in found]
        assert all(a.startswith(want) for a, (*_, want) in zip(agents, steps, strict=True)), agents
        received = [e["requestReceivedTimestamp"] for e in found]
        assert received == sorted(received), list(zip([s[:4] for s in steps], received, strict=True))

    # The audit CLI on the compose audit log answers the seed question: who bound the pods?
    done = cluster.run(str(REPO / ".venv" / "bin" / "python"), "-m", "apiserver.audit", str(cluster.audit_log),
                       "--resource", "pods/binding", "--namespace", ns, check=True)
    rows = [line.split() for line in done.stdout.splitlines()[1:]]
    assert sorted(r[4] for r in rows) == sorted(on), done.stdout
    assert {r[6] for r in rows} == {"system:kube-scheduler"}, done.stdout
    done = cluster.run(str(REPO / ".venv" / "bin" / "python"), "-m", "apiserver.audit", str(cluster.audit_log),
                       "--resource", "deployments.apps", "--verb", "create", "-n", ns, "-o", "json", check=True)
    created = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(e["objectRef"]["name"], e["user"]["username"]) for e in created] == [("web", "kubernetes-admin")]
    assert "system:masters" in created[0]["user"]["groups"]

    # delete: no pod container left
    kubectl.run("delete", "-f", str(manifest)).ok()
    assert_no_pod_containers(cluster, {p["metadata"]["uid"] for p in pods})
    with cluster.client() as api:
        wait_for(lambda: not api.get(f"/api/v1/namespaces/{ns}/pods").json()["items"], 60, 0.25, what="no pods")


def test_scale_to_5_and_back_roll_to_a_second_image_and_back_then_delete(
        compose_cluster: ComposeCluster, namespace: str, kubectl: Kubectl, httpd_b_image: str, tmp_path: Path) -> None:
    httpd_b = httpd_b_image
    cluster, ns = compose_cluster, namespace
    manifest = web_manifest(tmp_path / "web.yaml")
    kubectl.run("apply", "-f", str(manifest)).ok()
    uids: set[str] = set()

    def rollout_done() -> None:
        done = kubectl.run("rollout", "status", "deployment/web", "--timeout=120s", timeout=150)
        assert done.returncode == 0 and "successfully rolled out" in done.stdout, done

    with cluster.client() as api:
        three = wait_pods(api, ns, "web", n_ready(3, HTTPD), 120, "3 pods")
        kubectl.run("scale", "deployment/web", "--replicas=5").ok()
        five = wait_pods(api, ns, "web", n_ready(5, HTTPD), 120, "5 pods")
        assert {p["metadata"]["uid"] for p in three} < {p["metadata"]["uid"] for p in five}
        assert {p["spec"]["nodeName"] for p in five} == set(cluster.nodes)
        kubectl.run("scale", "deployment/web", "--replicas=3").ok()
        back = wait_pods(api, ns, "web", n_ready(3, HTTPD), 120, "back to 3 pods")
        removed = {p["metadata"]["uid"] for p in five} - {p["metadata"]["uid"] for p in back}
        assert len(removed) == 2
        assert_no_pod_containers(cluster, removed)
        uids |= {p["metadata"]["uid"] for p in five}

        # roll to the second image: new pods serving its page; then back (rollout undo)
        kubectl.run("set", "image", "deployment/web", f"httpd={httpd_b}").ok()
        rollout_done()
        rolled = wait_pods(api, ns, "web", n_ready(3, httpd_b), 120, f"3 pods of {httpd_b}")
        uids |= {p["metadata"]["uid"] for p in rolled}
        for p in rolled:
            page = http_get(f"http://{p['status']['podIP']}/version.txt")
            assert page.status_code == 200 and page.text == "b\n", (p["metadata"]["name"], page.text)
        kubectl.run("rollout", "undo", "deployment/web").ok()
        rollout_done()
        undone = wait_pods(api, ns, "web", n_ready(3, HTTPD), 120, "3 pods of the first image again")
        uids |= {p["metadata"]["uid"] for p in undone}
        assert http_get(f"http://{undone[0]['status']['podIP']}/version.txt").status_code == 404
        revision = api.get(f"/apis/apps/v1/namespaces/{ns}/deployments/web").json()["metadata"]["annotations"]
        assert revision["deployment.kubernetes.io/revision"] == "3"

        # delete: no pod, no pod container of any of them
        kubectl.run("delete", "-f", str(manifest)).ok()
        wait_for(lambda: not api.get(f"/api/v1/namespaces/{ns}/pods").json()["items"], 90, 0.25, what="no pods")
    assert_no_pod_containers(cluster, uids)


def test_the_guestbook_example_lives_through_a_new_primary_and_a_rollout(
        compose_cluster: ComposeCluster, namespace: str, kubectl: Kubectl) -> None:
    """examples/guestbook/ (issue 17) on the compose cluster: apply -k, all Ready, entries through the NodePort on
    every frontend pod and Redis pod, redis-0 deleted and back with its claim and entries, a rollout restart under
    a request loop with no failed request, delete -k: no pod, claim or container left. (The local-up cluster runs
    the whole list: tests/e2e/test_guestbook.py.)"""
    cluster, ns = compose_cluster, namespace
    ensure_guestbook_images()  # the compose kubelets run pods on this host's Docker
    folder = str(REPO / "examples" / "guestbook")
    kubectl.run("apply", "-k", folder).ok()
    uids: set[str] = set()
    with cluster.client() as api:
        def get(path: str) -> JSONDict:
            r = api.get(path)
            assert r.status_code == 200, r.text
            body: JSONDict = r.json()
            return body

        def ready_app() -> bool:
            front = get(f"/apis/apps/v1/namespaces/{ns}/deployments/frontend").get("status") or {}
            redis = get(f"/apis/apps/v1/namespaces/{ns}/statefulsets/redis").get("status") or {}
            return front.get("readyReplicas") == 3 and front.get("updatedReplicas") == 3 and \
                redis.get("readyReplicas") == 3

        def pods(selector: str) -> list[JSONDict]:
            items: list[JSONDict] = get(f"/api/v1/namespaces/{ns}/pods?labelSelector={selector}")["items"]
            return items

        def redis_entries(pod: str) -> list[str]:
            done = kubectl.run("exec", pod, "--", "redis-cli", "lrange", "guestbook:entries", "0", "-1")
            return done.stdout.splitlines() if done.returncode == 0 else []

        wait_for(ready_app, 180, 0.5, what="the guestbook Ready")
        node = get(f"/api/v1/nodes/{cluster.nodes[0]}")
        ip = next(a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP")
        url = f"http://{ip}:{get(f'/api/v1/namespaces/{ns}/services/frontend')['spec']['ports'][0]['nodePort']}"
        want = {f"compose entry {i}" for i in range(20)}

        def node_port_answers() -> bool:
            try:
                return httpx.get(f"{url}/healthz", timeout=5).status_code == 200
            except httpx.HTTPError:
                return False

        # Ready frontends are in the endpoints a moment before each node's proxy has programmed the NodePort
        wait_for(node_port_answers, 30, 0.2, what=f"the NodePort {url} answering")
        for entry in sorted(want):
            r = httpx.post(f"{url}/entries", content=entry, timeout=10)
            assert r.status_code == 201, r.text
        for pod in pods("tier=frontend"):
            uids.add(pod["metadata"]["uid"])
            pod_url = f"http://{pod['status']['podIP']}:8080/entries"
            wait_for(lambda u=pod_url: want <= set(httpx.get(u, timeout=5).json()["entries"]), 30, 0.5,  # type: ignore[misc]
                     what=f"the entries from {pod_url}")
        for name in ("redis-0", "redis-1", "redis-2"):
            wait_for(lambda n=name: want <= set(redis_entries(n)), 60, 1, what=f"the entries on {name}")  # type: ignore[misc]

        before = get(f"/api/v1/namespaces/{ns}/pods/redis-0")
        claim = get(f"/api/v1/namespaces/{ns}/persistentvolumeclaims/data-redis-0")
        kubectl.run("delete", "pod", "redis-0").ok()
        wait_for(lambda: (p := api.get(f"/api/v1/namespaces/{ns}/pods/redis-0")).status_code == 200
                 and p.json()["metadata"]["uid"] != before["metadata"]["uid"] and ready(p.json()), 120, 0.5,
                 what="redis-0 back and Ready")
        assert get(f"/api/v1/namespaces/{ns}/persistentvolumeclaims/data-redis-0")["metadata"]["uid"] == \
            claim["metadata"]["uid"]
        assert want <= set(redis_entries("redis-0"))

        loop = RequestLoop(url, limit=240)
        try:
            wait_for(lambda: loop.ok >= 20, 30, 0.2, what="the request loop to run")
            kubectl.run("rollout", "restart", "deployment/frontend").ok()
            done = kubectl.run("rollout", "status", "deployment/frontend", "--timeout=180s", timeout=200)
            assert done.returncode == 0, done
        finally:
            loop.stop()
        assert loop.failed == 0 and loop.ok > 0, loop.errors[:10]
        print(f"compose guestbook rollout: {loop.ok}/{loop.ok + loop.failed} requests answered")
        uids |= {p["metadata"]["uid"] for p in pods("")}

        kubectl.run("delete", "-k", folder, "--timeout=180s", timeout=200).ok()
        wait_for(lambda: not get(f"/api/v1/namespaces/{ns}/pods")["items"], 120, 0.5, what="no pods")
        wait_for(lambda: not get(f"/api/v1/namespaces/{ns}/persistentvolumeclaims")["items"], 60, 0.5,
                 what="no claims (the StatefulSet's go with it: whenDeleted Delete)")
    assert_no_pod_containers(cluster, uids)


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
    # The PKI and the audit log stay for the next compose-up.sh; --purge takes them too.
    assert (cluster.pki / "ca.crt").is_file() and cluster.audit_log.is_file()
    done = cluster.run(str(REPO / "hack" / "compose-down.sh"), "--purge", timeout=DOWN_TIMEOUT)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    assert not cluster.workdir.exists(), sorted(cluster.workdir.rglob("*"))
