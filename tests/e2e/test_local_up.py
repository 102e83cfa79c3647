"""hack/local-up-cluster.sh keeps its components running: each runs under hack/supervise.sh, which
restarts it with back-off when it exits and says so in its log (as a kubelet restarts a static pod).
A controller-manager killed with SIGKILL comes back and holds its lease again; one node runs on the Docker shim
and one on a containerd of its own, each running a pod; hack/down.sh stops the supervisors with their
components and leaves no process, pid file, containerd shim, mount or bridge behind.

local-up uses fixed ports (6443, 2379, 10250...) and _output/local-up of this checkout: the module
takes /tmp/minik8s-fixed-ports.lock for the cluster's life (unless a process it runs under holds it
already, as `flock /tmp/minik8s-fixed-ports.lock pytest ...` does)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import ssl
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import httpx
import pytest

from tests.cluster import REPO, assert_etcd_takes_only_the_apiserver, wait_for

OUT = REPO / "_output" / "local-up"
LOCK = Path("/tmp/minik8s-fixed-ports.lock")
LOCK_TIMEOUT = 1200
NODES = "node-1 node-2"
CONTAINERD_NODES = "node-2"  # one node of each runtime: node-1 on the Docker shim, node-2 on its own containerd
COMPONENTS = ["etcd", "apiserver", "controllers", "scheduler", "dns", "proxy", "dockershim-node-1", "kubelet-node-1",
              "containerd-node-2", "kubelet-node-2", "local-path-provisioner", "ingress-nginx"]
LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"


def _ancestors() -> set[int]:
    pids, pid = set(), os.getpid()
    while pid > 1:
        pids.add(pid)
        stat = Path(f"/proc/{pid}/stat").read_text()
        pid = int(stat.rsplit(")", 1)[1].split()[1])
    return pids


def _held_by_an_ancestor(path: Path) -> bool:
    """True when a process this one runs under holds an flock on path (flock(1) keeps it for its command)."""
    if not path.exists():
        return False
    st = path.stat()
    inode = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    ancestors = _ancestors()
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if len(fields) > 5 and fields[1] == "FLOCK" and fields[5] == inode and int(fields[4]) in ancestors:
            return True
    return False


@contextlib.contextmanager
def fixed_ports_lock() -> Iterator[None]:
    if _held_by_an_ancestor(LOCK):
        yield
        return
    with open(LOCK, "a") as f:
        deadline = time.monotonic() + LOCK_TIMEOUT
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    pytest.fail(f"{LOCK} still held after {LOCK_TIMEOUT}s")
                time.sleep(1)  # polling a lock another run holds
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def alive(pid: int | None) -> bool:
    if pid is None:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def run_script(name: str, *args: str, log: IO[Any], timeout: float = 900) -> None:
    env = {**os.environ, "NODES": NODES, "CONTAINERD_NODES": CONTAINERD_NODES}
    r = subprocess.run([str(REPO / "hack" / name), *args], cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
                       timeout=timeout)
    assert r.returncode == 0, f"hack/{name} exited {r.returncode}; see {log.name}"


class LocalUp:
    def __init__(self, log: IO[Any]) -> None:
        self.log = log
        self.seen_pids: set[int] = set()

    def remember_pids(self) -> None:
        for name in COMPONENTS:
            for suffix in ("pid", "child"):
                if (pid := read_pid(OUT / f"{name}.{suffix}")) is not None:
                    self.seen_pids.add(pid)

    def client(self) -> httpx.Client:
        pki = OUT / "pki"
        ctx = ssl.create_default_context(cafile=pki / "ca.crt")
        ctx.load_cert_chain(pki / "admin.crt", pki / "admin.key")
        return httpx.Client(base_url="https://127.0.0.1:6443", verify=ctx, timeout=10)

    def down(self) -> None:
        self.remember_pids()
        run_script("down.sh", "--purge", log=self.log, timeout=300)


@pytest.fixture(scope="module")
def local_up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalUp]:
    try:
        import docker

        docker.from_env().ping()
    except Exception as e:
        pytest.skip(f"no Docker engine for local-up's kubelet: {e}")
    log_path = tmp_path_factory.mktemp("local-up") / "scripts.log"
    with fixed_ports_lock(), open(log_path, "a") as log:
        if OUT.exists():
            pytest.fail(f"{OUT} exists: a local-up cluster of this checkout may run; hack/down.sh --purge first")
        cluster = LocalUp(log)
        try:
            run_script("local-up-cluster.sh", log=log)
            cluster.remember_pids()
            yield cluster
        finally:
            if OUT.exists():
                cluster.down()


def lease(client: httpx.Client, name: str) -> dict[str, Any]:
    r = client.get(f"{LEASES}/{name}")
    assert r.status_code == 200, r.text
    spec: dict[str, Any] = r.json()["spec"]
    return spec


def test_every_component_runs_under_a_supervisor(local_up: LocalUp) -> None:
    for name in COMPONENTS:
        supervisor, child = read_pid(OUT / f"{name}.pid"), read_pid(OUT / f"{name}.child")
        assert alive(supervisor) and alive(child), name
        assert "hack/supervise.sh" in Path(f"/proc/{supervisor}/cmdline").read_text()
        # the supervisor leads the group down.sh signals, and the component is in it
        assert os.getpgid(supervisor) == supervisor and os.getpgid(child) == supervisor, name  # type: ignore[arg-type]


def test_every_component_traces_to_the_loopback_collector(local_up: LocalUp) -> None:
    """Issue 15: one TracingConfiguration (127.0.0.1:4317, every span sampled) on every component's command line;
    nothing listens there in this test, and the components serve regardless (the other tests here)."""
    from machinery.tracing import TracingConfiguration, load_config

    config = OUT / "tracing-config.yaml"
    assert load_config(str(config)) == TracingConfiguration("127.0.0.1:4317", 1_000_000)
    for name in ("apiserver", "controllers", "scheduler", "dockershim-node-1", "kubelet-node-1", "kubelet-node-2"):
        argv = Path(f"/proc/{read_pid(OUT / f'{name}.child')}/cmdline").read_text().split("\0")
        assert argv[argv.index("--tracing-config-file") + 1] == str(config), name


def test_etcd_takes_only_the_apiservers_client_certificate(local_up: LocalUp) -> None:
    assert_etcd_takes_only_the_apiserver("https://127.0.0.1:2379", OUT / "pki")


def test_a_killed_controller_manager_is_restarted_and_takes_its_lease_again(local_up: LocalUp) -> None:
    with local_up.client() as client:
        wait_for(lambda: lease(client, "kube-controller-manager").get("holderIdentity"), 60,
                 what="the controller-manager's lease to be held")
        before = lease(client, "kube-controller-manager")
        old = read_pid(OUT / "controllers.child")
        assert alive(old)
        os.kill(old, signal.SIGKILL)  # type: ignore[arg-type]

        def restarted() -> int | None:
            pid = read_pid(OUT / "controllers.child")
            return pid if pid != old and alive(pid) else None

        new = wait_for(restarted, 30, what="the controller-manager to be started again")
        local_up.seen_pids.add(new)  # type: ignore[arg-type]
        # the new process has a new identity; it takes the lease once the dead one's has expired
        wait_for(lambda: lease(client, "kube-controller-manager").get("holderIdentity") not in
                 (None, "", before["holderIdentity"]), 90, what="the restarted controller-manager to hold its lease")
        after = lease(client, "kube-controller-manager")
        assert after["leaseTransitions"] > before.get("leaseTransitions", 0)
    log = (OUT / "controllers.log").read_text()
    assert "controllers was killed by signal 9 (SIGKILL) after" in log
    assert "; restarting in 1s" in log
    assert alive(read_pid(OUT / "controllers.pid"))


def test_one_node_of_each_runtime_runs_a_pod(local_up: LocalUp) -> None:
    runtimes = {"node-1": "docker://", "node-2": "containerd://"}
    with local_up.client() as client:
        for node, prefix in runtimes.items():
            def ready(node: str = node) -> bool:
                r = client.get(f"/api/v1/nodes/{node}")
                conditions = (r.json().get("status") or {}).get("conditions") or [] if r.status_code == 200 else []
                return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

            wait_for(ready, 60, what=f"{node} Ready")
            info = client.get(f"/api/v1/nodes/{node}").json()["status"]["nodeInfo"]
            assert info["containerRuntimeVersion"].startswith(prefix), info
            pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"on-{node}"},
                   "spec": {"nodeName": node, "terminationGracePeriodSeconds": 0,
                            "containers": [{"name": "web", "image": "minik8s/httpd:1"}]}}
            r = client.post("/api/v1/namespaces/default/pods", json=pod)
            assert r.status_code == 201, r.text
        for node, prefix in runtimes.items():
            def running(node: str = node) -> dict[str, Any] | None:
                status = client.get(f"/api/v1/namespaces/default/pods/on-{node}").json().get("status") or {}
                return status if status.get("phase") == "Running" and status.get("podIP") else None

            status = wait_for(running, 60, what=f"the pod on {node} Running")
            assert status["containerStatuses"][0]["containerID"].startswith(prefix)  # type: ignore[index]
            page = httpx.get(f"http://{status['podIP']}/", timeout=5)  # type: ignore[index]
            assert page.status_code == 200


def test_a_pod_on_each_runtime_reaches_a_service_by_its_name(local_up: LocalUp) -> None:
    """local-up's cluster DNS and kube-proxy: a busybox pod on each node (Docker shim, containerd) fetches a page
    through the Service's short name (its resolv.conf search path, the kube-dns ClusterIP DNATed to the DNS on the
    host, the Service's ClusterIP DNATed to the pod) and exits 0 once it has."""
    web = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "lu-web", "labels": {"app": "lu-web"}},
           "spec": {"nodeName": "node-1", "terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "web", "image": "minik8s/httpd:1"}]}}
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "lu-web"},
               "spec": {"selector": {"app": "lu-web"}, "ports": [{"port": 80}]}}
    fetch = "for i in $(seq 60); do timeout 3 wget -q -O /dev/null http://lu-web/ && exit 0; sleep 1; done; exit 1"
    with local_up.client() as client:
        for body, kind in ((web, "pods"), (service, "services")):
            r = client.post(f"/api/v1/namespaces/default/{kind}", json=body)
            assert r.status_code == 201, r.text
        for node in ("node-1", "node-2"):
            pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"lu-client-{node}"},
                   "spec": {"nodeName": node, "restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                            "containers": [{"name": "fetch", "image": "minik8s/busybox:1.35",
                                            "command": ["sh", "-c", fetch]}]}}
            r = client.post("/api/v1/namespaces/default/pods", json=pod)
            assert r.status_code == 201, r.text
        for node in ("node-1", "node-2"):
            def finished(node: str = node) -> str | None:
                status = client.get(f"/api/v1/namespaces/default/pods/lu-client-{node}").json().get("status") or {}
                return status.get("phase") if status.get("phase") in ("Succeeded", "Failed") else None

            phase = wait_for(finished, 90, what=f"the client pod on {node} to finish")
            log = client.get(f"/api/v1/namespaces/default/pods/lu-client-{node}/log").text
            assert phase == "Succeeded", f"the pod on {node} could not fetch http://lu-web/: {log}"


def test_an_ingress_routes_to_a_pod_through_the_hosts_nginx(local_up: LocalUp) -> None:
    """local-up's ingress controller: an Ingress of class nginx (created by local-up) routes a host on :8880 to a
    pod on the Docker-shim node, straight to its address; the controller writes this host's address into the
    Ingress's status."""
    web = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "lu-ing", "labels": {"app": "lu-ing"}},
           "spec": {"nodeName": "node-1", "terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "web", "image": "minik8s/httpd:1"}]}}
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "lu-ing"},
               "spec": {"selector": {"app": "lu-ing"}, "ports": [{"port": 80}]}}
    ingress = {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "lu-ing"},
               "spec": {"ingressClassName": "nginx", "rules": [{"host": "lu.example.com", "http": {"paths": [
                   {"path": "/", "pathType": "Prefix",
                    "backend": {"service": {"name": "lu-ing", "port": {"number": 80}}}}]}}]}}
    with local_up.client() as client:
        for body, path in ((web, "/api/v1/namespaces/default/pods"), (service, "/api/v1/namespaces/default/services"),
                           (ingress, "/apis/networking.k8s.io/v1/namespaces/default/ingresses")):
            r = client.post(path, json=body)
            assert r.status_code == 201, r.text

        def routed() -> bool:
            try:
                r = httpx.get("http://127.0.0.1:8880/", headers={"Host": "lu.example.com"}, timeout=3)
            except httpx.HTTPError:
                return False
            return r.status_code == 200

        wait_for(routed, 90, what="lu.example.com routed through nginx on :8880")
        assert httpx.get("http://127.0.0.1:8880/", headers={"Host": "nobody.example.com"}, timeout=3).status_code \
            == 404  # the default backend
        wait_for(lambda: client.get("/apis/networking.k8s.io/v1/namespaces/default/ingresses/lu-ing").json()
                 ["status"]["loadBalancer"].get("ingress"), 30, what="status.loadBalancer")


def test_a_claim_of_the_default_class_gets_a_directory_on_its_pods_node(local_up: LocalUp) -> None:
    """local-up's local-path provisioner (its manifests applied as kubernetes-admin, the provisioner as its service
    account): a claim of no class gets local-path, the scheduler puts its pod on node-2 (containerd), the helper pod
    makes the directory under _output/local-up/local-path, the pod writes there; deleting the claim removes it."""
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "lu-data"},
             "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "16Mi"}}}}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "lu-writer"},
           "spec": {"nodeSelector": {"kubernetes.io/hostname": "node-2"}, "restartPolicy": "Never",
                    "terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "w", "image": "minik8s/busybox:1.35",
                                    "command": ["sh", "-c", "echo from-node-2 > /data/f"],
                                    "volumeMounts": [{"name": "d", "mountPath": "/data"}]}],
                    "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "lu-data"}}]}}
    with local_up.client() as client:
        r = client.post("/api/v1/namespaces/default/persistentvolumeclaims", json=claim)
        assert r.status_code == 201, r.text
        assert r.json()["spec"]["storageClassName"] == "local-path"
        uid = r.json()["metadata"]["uid"]
        r = client.post("/api/v1/namespaces/default/pods", json=pod)
        assert r.status_code == 201, r.text

        def finished() -> str | None:
            status = client.get("/api/v1/namespaces/default/pods/lu-writer").json().get("status") or {}
            return status.get("phase") if status.get("phase") in ("Succeeded", "Failed") else None

        assert wait_for(finished, 120, what="the writer pod to finish") == "Succeeded"
        directory = OUT / "local-path" / f"pvc-{uid}_default_lu-data"
        assert (directory / "f").read_text() == "from-node-2\n"
        pv = client.get(f"/api/v1/persistentvolumes/pvc-{uid}").json()
        assert pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == \
            ["node-2"]
        client.delete("/api/v1/namespaces/default/pods/lu-writer")
        client.delete("/api/v1/namespaces/default/persistentvolumeclaims/lu-data")
        wait_for(lambda: client.get(f"/api/v1/persistentvolumes/pvc-{uid}").status_code == 404, 120,
                 what="the volume deleted")
        assert not directory.exists()


def test_secrets_are_encrypted_at_rest(local_up: LocalUp) -> None:
    """local-up made pki/encryption-config.yaml (0600) with the PKI and runs the apiserver with it: etcd holds
    a Secret under upstream's aescbc prefix, never its value."""
    import asyncio

    from apiserver.storage.etcd import EtcdStorage, EtcdTLS

    pki = OUT / "pki"
    assert (pki / "encryption-config.yaml").stat().st_mode & 0o777 == 0o600
    value = "e2e-at-rest-" + os.urandom(6).hex()

    async def stored() -> bytes:
        storage = EtcdStorage(["https://127.0.0.1:2379"], EtcdTLS(str(pki / "etcd" / "ca.crt"),
                                                                  str(pki / "apiserver-etcd-client.crt"),
                                                                  str(pki / "apiserver-etcd-client.key")))
        try:
            kv = await storage.get("/registry/secrets/default/e2e-at-rest")
            assert kv is not None
            return kv.value
        finally:
            await storage.close()

    with local_up.client() as client:
        r = client.post("/api/v1/namespaces/default/secrets",
                        json={"metadata": {"name": "e2e-at-rest"}, "stringData": {"p": value}})
        assert r.status_code == 201, r.text
        try:
            raw = asyncio.run(stored())
        finally:
            client.delete("/api/v1/namespaces/default/secrets/e2e-at-rest")
    assert raw.startswith(b"k8s:enc:aescbc:v1:key1:") and value.encode() not in raw


def test_down_stops_the_supervisors_and_leaves_nothing_behind(local_up: LocalUp) -> None:
    supervisors = [read_pid(OUT / f"{name}.pid") for name in COMPONENTS]
    # a supervisor killed on its own leaves its component running: down.sh stops that one too
    orphan = read_pid(OUT / "scheduler.child")
    os.kill(read_pid(OUT / "scheduler.pid"), signal.SIGKILL)  # type: ignore[arg-type]
    wait_for(lambda: not alive(read_pid(OUT / "scheduler.pid")), 10, what="the scheduler's supervisor to die")
    assert alive(orphan)
    local_up.down()
    assert not OUT.exists()
    assert local_up.seen_pids and supervisors
    # nothing restarted behind down.sh's back, nothing left running
    left = [pid for pid in local_up.seen_pids if alive(pid)]
    assert left == [], [Path(f"/proc/{p}/cmdline").read_bytes() for p in left]
    ps = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True, check=True).stdout
    assert str(REPO / "hack" / "supervise.sh") not in ps
    assert str(OUT / "containerd") not in ps  # node-2's containerd and its shims
    assert str(OUT) not in Path("/proc/self/mountinfo").read_text()  # no rootfs, shm or netns mount left
    assert not Path("/sys/class/net/mk8s-node-2").exists()
    # the kubelets' QoS cgroups (--cgroup-root /minik8s-NODE), node-2's too, once its containerd's containers went
    cgroups = Path("/sys/fs/cgroup")
    assert not [str(p) for p in [*cgroups.glob("minik8s-node-[12]"), *cgroups.glob("*/minik8s-node-[12]")]]
    assert not Path("/run/minik8s/node-1").exists()  # node-1's dockershim socket and its directory
    assert "/run/minik8s/ingress-nginx" not in ps  # the ingress controller's nginx, and its files
    assert not Path("/run/minik8s/ingress-nginx").exists()
    rules = subprocess.run(["iptables-save"], capture_output=True, text=True, check=True).stdout
    assert "KUBE-SERVICES" not in rules and "KUBE-SVC-" not in rules  # kube-proxy's chains went with --cleanup
