"""Kubelets as real processes against the real apiserver, running pods as real Docker containers on
real CNI bridges: registration and heartbeats, sandboxes and networking across two nodes, the
container spec, restarts and back-off, probes, image pull policies, graceful deletion, logs and exec
through the apiserver (with a real kubectl), and adoption after `kill -9`.

Every test node's containers, bridge, leases and state are removed at the end of the module, even
when a test fails (`dockershim.cleanup`); every wait is a condition with a deadline.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import shutil
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import docker
import httpx
import pytest

from tests.cluster import ApiServer, make_workdir, wait_for
from tests.kubectl import Kubectl, find_kubectl
from tests.node_process import BACKOFF_BASE, BUSYBOX, HTTPD, KubeletProcess, cleanup, ensure_images, free_pod_cidrs

JSONDict = dict[str, Any]


# -- environment -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def workdir_k() -> Iterator[Path]:
    path = make_workdir("minik8s-kubelet-test-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def nodes(apiserver: ApiServer, workdir_k: Path) -> Iterator[tuple[KubeletProcess, KubeletProcess]]:
    """Two kubelets (two nodes, two bridges) on this host for the whole module."""
    ensure_images()
    tag = uuid.uuid4().hex[:6]
    cidr_a, cidr_b = free_pod_cidrs(2)
    a = KubeletProcess(workdir_k, apiserver, f"kt-{tag}-a", cidr_a)
    b = KubeletProcess(workdir_k, apiserver, f"kt-{tag}-b", cidr_b)
    try:
        with httpx.Client(base_url=apiserver.url, timeout=10) as api:
            a.start(api)
            b.start(api)
        yield a, b
    finally:
        cleanup([a, b])


# -- helpers -------------------------------------------------------------------------------------------


def container(name: str, image: str = BUSYBOX, command: list[str] | None = None, **extra: Any) -> JSONDict:
    out: JSONDict = {"name": name, "image": image, **extra}
    if command is not None:
        out["command"] = command
    return out


def sh(script: str) -> list[str]:
    return ["sh", "-c", script]


def pod_manifest(name: str, node: str, containers: list[JSONDict], **spec: Any) -> JSONDict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"nodeName": node, "containers": containers, **spec}}


def create(api: httpx.Client, ns: str, manifest: JSONDict) -> JSONDict:
    r = api.post(f"/api/v1/namespaces/{ns}/pods", json=manifest)
    assert r.status_code == 201, r.text
    return r.json()


def get_pod(api: httpx.Client, ns: str, name: str) -> JSONDict:
    r = api.get(f"/api/v1/namespaces/{ns}/pods/{name}")
    assert r.status_code == 200, r.text
    return r.json()


def wait_pod(api: httpx.Client, ns: str, name: str, check: Callable[[JSONDict], object], timeout: float = 30,
             what: str = "") -> JSONDict:
    last: list[JSONDict] = []

    def probe() -> object:
        pod = get_pod(api, ns, name)
        last[:] = [pod]
        return check(pod)

    try:
        wait_for(probe, timeout, 0.1, what=what or f"pod {name}")
    except TimeoutError as e:
        status = json.dumps((last[0] if last else {}).get("status"), indent=1)
        raise TimeoutError(f"{e}\nlast status: {status}") from None
    return last[0]


def phase(p: JSONDict) -> str:
    return (p.get("status") or {}).get("phase") or ""


def cstatus(p: JSONDict, name: str) -> JSONDict:
    for cs in (p.get("status") or {}).get("containerStatuses") or []:
        if cs["name"] == name:
            return cs
    return {}


def condition(p: JSONDict, ctype: str) -> str:
    for c in (p.get("status") or {}).get("conditions") or []:
        if c["type"] == ctype:
            return c["status"]
    return ""


def running(p: JSONDict) -> bool:
    statuses = (p.get("status") or {}).get("containerStatuses") or []
    return phase(p) == "Running" and bool(statuses) and all("running" in cs["state"] for cs in statuses)


def log_of(api: httpx.Client, ns: str, name: str, **params: Any) -> str:
    r = api.get(f"/api/v1/namespaces/{ns}/pods/{name}/log", params=params)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain")
    return r.text


def events_of(api: httpx.Client, ns: str, name: str) -> list[JSONDict]:
    items = api.get(f"/api/v1/namespaces/{ns}/events").json()["items"]
    return [e for e in items if e["involvedObject"].get("name") == name]


def reasons(api: httpx.Client, ns: str, name: str) -> set[str]:
    return {e["reason"] for e in events_of(api, ns, name)}


def pod_containers(uid: str) -> list[Any]:
    client = docker.from_env()
    try:
        return client.containers.list(all=True, filters={"label": f"io.kubernetes.pod.uid={uid}"})
    finally:
        client.close()


def in_cidr(ip: str, cidr: str) -> bool:
    return ipaddress.ip_address(ip) in ipaddress.ip_network(cidr)


# -- tests ----------------------------------------------------------------------------------------------


def test_node_registers_with_capacity_labels_addresses_and_lease(nodes: tuple[KubeletProcess, KubeletProcess],
                                                                 api: httpx.Client) -> None:
    a, _ = nodes
    node = api.get(f"/api/v1/nodes/{a.node}").json()
    labels = node["metadata"]["labels"]
    assert labels["kubernetes.io/hostname"] == a.node and labels["kubernetes.io/os"] == "linux"
    status = node["status"]
    for key in ("cpu", "memory", "pods"):
        assert status["capacity"][key] and status["allocatable"][key]
    assert {a_["type"] for a_ in status["addresses"]} >= {"InternalIP", "Hostname"}
    assert status["daemonEndpoints"]["kubeletEndpoint"]["Port"] == a.port
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True" and ready["reason"] == "KubeletReady"
    assert status["nodeInfo"]["containerRuntimeVersion"].startswith("docker://")
    assert node["spec"]["podCIDR"] == a.pod_cidr

    lease_path = f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{a.node}"
    lease = api.get(lease_path).json()
    assert lease["spec"]["holderIdentity"] == a.node
    assert lease["metadata"]["ownerReferences"][0]["name"] == a.node
    first = lease["spec"]["renewTime"]
    wait_for(lambda: api.get(lease_path).json()["spec"]["renewTime"] != first, 10, 0.2, what="lease renewal")


def test_two_container_pod_shares_one_ip_and_localhost(nodes: tuple[KubeletProcess, KubeletProcess],
                                                       api: httpx.Client, namespace: str) -> None:
    a, _ = nodes
    create(api, namespace, pod_manifest("duo", a.node, [
        container("web", HTTPD, ports=[{"containerPort": 80}]),
        container("probe", command=sh("until wget -qO- http://localhost:80/ > /tmp/page; do sleep 0.2; done; "
                                      "grep -o '<title>.*</title>' /tmp/page; hostname; sleep 3600")),
    ]))
    pod = wait_pod(api, namespace, "duo", running, what="duo running")
    status = pod["status"]
    ip = status["podIP"]
    assert in_cidr(ip, a.pod_cidr) and status["podIPs"] == [{"ip": ip}]
    assert status["hostIP"] and status["startTime"]
    assert condition(pod, "Ready") == "True" and condition(pod, "PodScheduled") == "True"
    for cs in status["containerStatuses"]:
        assert cs["containerID"].startswith("docker://") and cs["imageID"].startswith("docker://sha256:")
        assert cs["ready"] and cs["restartCount"] == 0

    # the sidecar reached httpd over localhost, and both share the sandbox's namespaces and hostname
    # the page's title, then the hostname (wget's "can't connect" lines may come first, while httpd starts;
    # the log may be read between two writes)
    def after_title() -> list[str]:
        lines = log_of(api, namespace, "duo", container="probe").splitlines()
        titles = [n for n, line in enumerate(lines) if "Welcome to minik8s httpd" in line]
        return lines[titles[0] + 1:] if titles else []

    wait_for(after_title, 15, what="sidecar fetched the page over localhost")
    assert after_title()[0] == "duo"
    containers = pod_containers(pod["metadata"]["uid"])
    sandbox = next(c for c in containers if c.labels["io.kubernetes.docker.type"] == "podsandbox")
    assert sandbox.attrs["HostConfig"]["NetworkMode"] == "none"
    for c in containers:
        assert c.labels["io.minik8s.managed"] == "true" and c.labels["io.minik8s.node"] == a.node
        assert c.labels["io.kubernetes.pod.namespace"] == namespace and c.labels["io.kubernetes.pod.name"] == "duo"
        if c.id != sandbox.id:
            assert c.attrs["HostConfig"]["NetworkMode"] == f"container:{sandbox.id}"
    assert {c.labels["io.kubernetes.container.name"] for c in containers} == {"POD", "web", "probe"}

    # the host reaches the pod IP (its node bridge is directly connected)
    page = httpx.get(f"http://{ip}/", timeout=5)
    assert page.status_code == 200 and "Welcome to minik8s httpd" in page.text


def test_pod_reaches_pod_on_the_other_node_without_nat(nodes: tuple[KubeletProcess, KubeletProcess],
                                                       api: httpx.Client, namespace: str) -> None:
    a, b = nodes
    create(api, namespace, pod_manifest("server", a.node, [container("web", HTTPD)]))
    server = wait_pod(api, namespace, "server", running, what="server running")
    server_ip = server["status"]["podIP"]
    create(api, namespace, pod_manifest("client", b.node, [
        container("get", command=sh(f"timeout 10 wget -qO- http://{server_ip}/"))], restartPolicy="Never"))
    client = wait_pod(api, namespace, "client", lambda p: phase(p) in ("Succeeded", "Failed"), 30,
                      what="client finished")
    assert phase(client) == "Succeeded", log_of(api, namespace, "client")
    client_ip = client["status"]["podIP"]
    assert in_cidr(client_ip, b.pod_cidr) and in_cidr(server_ip, a.pod_cidr)
    assert "Welcome to minik8s httpd" in log_of(api, namespace, "client")
    # httpd logged the client's own pod IP: no NAT between pods of different nodes
    wait_for(lambda: client_ip in log_of(api, namespace, "server"), 10, what="server saw the client's pod IP")
    # a finished pod gives its address back (its sandbox is stopped) but keeps its logs
    wait_for(lambda: client_ip not in b.leases(), 10, what="finished pod's lease released")


def test_env_field_refs_command_args_workdir_user_and_volumes(nodes: tuple[KubeletProcess, KubeletProcess],
                                                             api: httpx.Client, namespace: str,
                                                             tmp_path: Path) -> None:
    a, _ = nodes
    host_dir = tmp_path / "hostpath"
    env = [
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {"name": "GREETING", "value": "hello"},
        {"name": "MESSAGE", "value": "$(GREETING) from $(POD_NAME)"},
    ]
    writer = container("writer", command=["sh", "-c"],
                       args=["echo name=$POD_NAME ns=$POD_NAMESPACE ip=$POD_IP node=$NODE_NAME; echo $(MESSAGE); "
                             "pwd; echo shared > /data/file; echo from-pod > /host/out; sleep 3600"],
                       env=env, workingDir="/tmp",
                       volumeMounts=[{"name": "scratch", "mountPath": "/data"},
                                     {"name": "hostdir", "mountPath": "/host"}])
    reader = container("reader", command=sh("until [ -f /shared/file ]; do sleep 0.1; done; cat /shared/file; "
                                            "touch /shared/ro 2>/dev/null || echo read-only; sleep 3600"),
                       volumeMounts=[{"name": "scratch", "mountPath": "/shared", "readOnly": True}])
    user = container("user", command=sh("id -u; id -g; sleep 3600"),
                     securityContext={"runAsUser": 1000, "runAsGroup": 3000})
    create(api, namespace, pod_manifest("envvol", a.node, [writer, reader, user], volumes=[
        {"name": "scratch", "emptyDir": {}},
        {"name": "hostdir", "hostPath": {"path": str(host_dir), "type": "DirectoryOrCreate"}},
    ]))
    pod = wait_pod(api, namespace, "envvol", running, what="envvol running")
    ip = pod["status"]["podIP"]
    wait_for(lambda: "read-only" in log_of(api, namespace, "envvol", container="reader"), 15, what="reader output")
    # each container writes its lines on its own time: wait for them all, then compare
    wait_for(lambda: len(log_of(api, namespace, "envvol", container="writer").splitlines()) >= 3, 15,
             what="writer output")
    out = log_of(api, namespace, "envvol", container="writer").splitlines()
    assert out[0] == f"name=envvol ns={namespace} ip={ip} node={a.node}"
    assert out[1:3] == ["hello from envvol", "/tmp"]
    wait_for(lambda: len(log_of(api, namespace, "envvol", container="user").splitlines()) >= 2, 15,
             what="user output")
    assert log_of(api, namespace, "envvol", container="user").splitlines() == ["1000", "3000"]
    assert log_of(api, namespace, "envvol", container="reader").splitlines() == ["shared", "read-only"]
    wait_for(lambda: (host_dir / "out").exists(), 10, what="file written through the hostPath volume")
    assert (host_dir / "out").read_text() == "from-pod\n"


def test_init_containers_run_first_in_order(nodes: tuple[KubeletProcess, KubeletProcess], api: httpx.Client,
                                           namespace: str) -> None:
    _, b = nodes
    mount = [{"name": "work", "mountPath": "/work"}]
    create(api, namespace, pod_manifest("initialized", b.node, [
        container("app", command=sh("cat /work/steps; sleep 3600"), volumeMounts=mount)],
        initContainers=[container("first", command=sh("echo first >> /work/steps"), volumeMounts=mount),
                        container("second", command=sh("sleep 1; echo second >> /work/steps"), volumeMounts=mount)],
        volumes=[{"name": "work", "emptyDir": {}}]))
    pending = wait_pod(api, namespace, "initialized",
                       lambda p: any("running" in cs["state"] for cs in p["status"].get("initContainerStatuses", [])),
                       20, what="an init container running")
    assert phase(pending) == "Pending" and condition(pending, "Initialized") == "False"
    pod = wait_pod(api, namespace, "initialized", running, 30, what="initialized running")
    assert condition(pod, "Initialized") == "True"
    assert [cs["state"]["terminated"]["reason"] for cs in pod["status"]["initContainerStatuses"]] == \
        ["Completed", "Completed"]
    wait_for(lambda: log_of(api, namespace, "initialized", container="app") == "first\nsecond\n", 10,
             what="the app seeing both init steps in order")


def test_host_network_pod_uses_the_node_address(nodes: tuple[KubeletProcess, KubeletProcess], api: httpx.Client,
                                                namespace: str) -> None:
    a, _ = nodes
    created = create(api, namespace, pod_manifest("hostnet", a.node, [container("c", command=["sleep", "3600"])],
                                                  hostNetwork=True, terminationGracePeriodSeconds=0))
    pod = wait_pod(api, namespace, "hostnet", running, what="hostnet running")
    assert pod["status"]["podIP"] == pod["status"]["hostIP"]
    sandbox = next(c for c in pod_containers(created["metadata"]["uid"])
                   if c.labels["io.kubernetes.docker.type"] == "podsandbox")
    assert sandbox.attrs["HostConfig"]["NetworkMode"] == "host"
    assert api.delete(f"/api/v1/namespaces/{namespace}/pods/hostnet").status_code == 200
    wait_for(lambda: pod_containers(created["metadata"]["uid"]) == [], 20, what="hostnet removed")
    lo = subprocess.run(["ip", "link", "show", "lo"], capture_output=True, text=True, check=True).stdout
    assert "UP" in lo.split(">")[0]  # no CNI plugin ever ran in the host's namespace


def test_host_pid_pod_sees_the_nodes_processes(nodes: tuple[KubeletProcess, KubeletProcess], api: httpx.Client,
                                               namespace: str) -> None:
    """hostPID was accepted and ignored; now the pod's containers join the node's PID namespace (and
    hostIPC its IPC namespace), as upstream's kubelet does: this test's own process is visible."""
    a, _ = nodes
    me = os.getpid()
    script = f"tr '\\0' ' ' < /proc/{me}/cmdline || echo missing; echo; sleep 3600"
    created = create(api, namespace, pod_manifest("hostpid", a.node, [container("c", command=sh(script))],
                                                  hostPID=True, hostIPC=True, terminationGracePeriodSeconds=0))
    create(api, namespace, pod_manifest("ownpid", a.node, [container("c", command=sh(script))],
                                        terminationGracePeriodSeconds=0))
    wait_pod(api, namespace, "hostpid", running, what="hostpid running")
    wait_pod(api, namespace, "ownpid", running, what="ownpid running")
    # this process's command line as the pod prints it (a pytest-xdist worker's names no "pytest")
    mine = Path(f"/proc/{me}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    wait_for(lambda: mine in log_of(api, namespace, "hostpid"), 20, what="the hostPID pod seeing this test's pid")
    wait_for(lambda: log_of(api, namespace, "ownpid").strip() != "", 20, what="the other pod's answer")
    assert mine not in log_of(api, namespace, "ownpid")
    app = next(c for c in pod_containers(created["metadata"]["uid"])
               if c.labels["io.kubernetes.docker.type"] != "podsandbox")
    assert app.attrs["HostConfig"]["PidMode"] == "host" and app.attrs["HostConfig"]["IpcMode"] == "host"
    for name in ("hostpid", "ownpid"):
        assert api.delete(f"/api/v1/namespaces/{namespace}/pods/{name}").status_code == 200


def test_memory_limit_oom_kills_and_cpu_limit_applies(nodes: tuple[KubeletProcess, KubeletProcess],
                                                      api: httpx.Client, namespace: str) -> None:
    a, _ = nodes
    # the short sleep lets Docker's OOM watch attach first: a process killed within its first
    # milliseconds is reported with exit 137 but without OOMKilled (a Docker/containerd race)
    hog = container("hog", command=sh("sleep 0.5; dd if=/dev/zero of=/dev/null bs=64M count=1"),
                    resources={"limits": {"memory": "20Mi", "cpu": "500m"}})
    created = create(api, namespace, pod_manifest("hog", a.node, [hog], restartPolicy="Never"))
    pod = wait_pod(api, namespace, "hog", lambda p: phase(p) == "Failed", 30, what="hog failed")
    term = cstatus(pod, "hog")["state"]["terminated"]
    assert term["reason"] == "OOMKilled" and term["exitCode"] == 137
    app = next(c for c in pod_containers(created["metadata"]["uid"])
               if c.labels["io.kubernetes.container.name"] == "hog")
    host_config = app.attrs["HostConfig"]
    assert host_config["Memory"] == 20 * 1024 * 1024 and host_config["MemorySwap"] == 20 * 1024 * 1024
    assert host_config["CpuQuota"] == 50000 and host_config["CpuPeriod"] == 100000


def test_crash_loop_back_off_grows_and_restart_count_is_kept(nodes: tuple[KubeletProcess, KubeletProcess],
                                                             api: httpx.Client, namespace: str) -> None:
    a, _ = nodes
    created = create(api, namespace, pod_manifest("crasher", a.node, [
        container("c", command=sh("echo attempt; exit 3"))]))
    first_seen: dict[int, float] = {}
    waiting: set[str] = set()

    def restarted_4_times(p: JSONDict) -> bool:
        cs = cstatus(p, "c")
        first_seen.setdefault(cs.get("restartCount", 0), time.monotonic())
        reason = (cs.get("state") or {}).get("waiting", {}).get("reason")
        if reason:
            waiting.add(reason)
        return cs.get("restartCount", 0) >= 4

    pod = wait_pod(api, namespace, "crasher", restarted_4_times, 40, what="4 restarts")
    cs = cstatus(pod, "c")
    assert cs["lastState"]["terminated"]["exitCode"] == 3 and cs["lastState"]["terminated"]["reason"] == "Error"
    assert phase(pod) == "Running"
    assert "CrashLoopBackOff" in waiting
    # restarts wait 0, 1, 2, 4 s after the previous exit (base 1 s): restart 3 comes ~2 s after
    # restart 2, restart 4 ~4 s after restart 3
    gap3, gap4 = first_seen[3] - first_seen[2], first_seen[4] - first_seen[3]
    assert gap3 > 1.6 * BACKOFF_BASE and gap4 > 3.2 * BACKOFF_BASE and gap4 > gap3, first_seen
    pod = wait_pod(api, namespace, "crasher",
                   lambda p: cstatus(p, "c").get("state", {}).get("waiting", {}).get("reason") == "CrashLoopBackOff",
                   20, what="CrashLoopBackOff")
    message = cstatus(pod, "c")["state"]["waiting"]["message"]
    assert message.startswith("back-off ") and "restarting failed container=c" in message
    # older attempts are garbage-collected: the current one and the previous one stay
    attempts = [c for c in pod_containers(created["metadata"]["uid"])
                if c.labels["io.kubernetes.container.name"] == "c"]
    assert len(attempts) <= 2
    found = reasons(api, namespace, "crasher")
    assert {"Created", "Started", "BackOff"} <= found
    backoff = next(e for e in events_of(api, namespace, "crasher") if e["reason"] == "BackOff")
    assert backoff["type"] == "Warning" and backoff["source"] == {"component": "kubelet", "host": a.node}


def test_readiness_drives_ready_and_liveness_restarts(nodes: tuple[KubeletProcess, KubeletProcess],
                                                      api: httpx.Client, namespace: str) -> None:
    _, b = nodes
    web = container("web", HTTPD, ports=[{"name": "http", "containerPort": 80}],
                    readinessProbe={"httpGet": {"path": "/ready.html", "port": "http"}, "periodSeconds": 1},
                    livenessProbe={"tcpSocket": {"port": 80}, "periodSeconds": 1})
    worker = container("worker", command=sh("touch /tmp/alive; sleep 3600"),
                       livenessProbe={"exec": {"command": ["cat", "/tmp/alive"]}, "periodSeconds": 1,
                                      "failureThreshold": 2},
                       readinessProbe={"exec": {"command": ["true"]}, "periodSeconds": 1})
    created = create(api, namespace, pod_manifest("probed", b.node, [web, worker], terminationGracePeriodSeconds=1))
    pod = wait_pod(api, namespace, "probed", running, what="probed running")
    # /ready.html does not exist: httpd answers 404, so the pod is not Ready
    pod = wait_pod(api, namespace, "probed", lambda p: cstatus(p, "worker").get("ready"), 15, what="worker ready")
    assert not cstatus(pod, "web")["ready"] and condition(pod, "Ready") == "False"
    ready_cond = next(c for c in pod["status"]["conditions"] if c["type"] == "ContainersReady")
    assert ready_cond["reason"] == "ContainersNotReady" and "web" in ready_cond["message"]
    wait_for(lambda: any(e["reason"] == "Unhealthy" and "Readiness probe failed" in e["message"]
                         for e in events_of(api, namespace, "probed")), 10, what="Unhealthy event")

    uid = created["metadata"]["uid"]
    client = docker.from_env()
    try:
        web_id = next(c.id for c in pod_containers(uid) if c.labels["io.kubernetes.container.name"] == "web")
        client.containers.get(web_id).exec_run(["sh", "-c", "echo ok > /var/www/ready.html"])
        wait_pod(api, namespace, "probed", lambda p: condition(p, "Ready") == "True", 15, what="Ready")

        # the worker's liveness probe fails once its file is gone: the container is restarted
        worker_id = next(c.id for c in pod_containers(uid) if c.labels["io.kubernetes.container.name"] == "worker")
        client.containers.get(worker_id).exec_run(["rm", "/tmp/alive"])
    finally:
        client.close()
    pod = wait_pod(api, namespace, "probed", lambda p: cstatus(p, "worker").get("restartCount", 0) >= 1
                   and "running" in cstatus(p, "worker")["state"], 30, what="worker restarted by liveness")
    assert cstatus(pod, "web")["restartCount"] == 0
    killing = [e for e in events_of(api, namespace, "probed") if e["reason"] == "Killing"]
    assert any("failed liveness probe" in e["message"] for e in killing)


def test_missing_image_ends_in_back_off_without_crashing(nodes: tuple[KubeletProcess, KubeletProcess],
                                                         api: httpx.Client, namespace: str) -> None:
    a, _ = nodes
    create(api, namespace, pod_manifest("noimage", a.node, [
        container("pull", "minik8s/does-not-exist:1", imagePullPolicy="IfNotPresent"),
        container("never", "minik8s/does-not-exist:2", imagePullPolicy="Never"),
        container("fine", BUSYBOX, command=sh("sleep 3600")),
    ]))
    seen: set[str] = set()

    def both_reasons_seen(p: JSONDict) -> bool:
        reason = (cstatus(p, "pull").get("state") or {}).get("waiting", {}).get("reason")
        if reason:
            seen.add(reason)
        return {"ErrImagePull", "ImagePullBackOff"} <= seen

    pod = wait_pod(api, namespace, "noimage", both_reasons_seen, 30, what="ErrImagePull then ImagePullBackOff")
    never = cstatus(pod, "never")["state"]["waiting"]
    assert never["reason"] == "ErrImageNeverPull" and "pull policy of Never" in never["message"]
    assert phase(pod) == "Pending"
    wait_pod(api, namespace, "noimage", lambda p: "running" in cstatus(p, "fine").get("state", {}), 15,
             what="the other container runs")
    found = reasons(api, namespace, "noimage")
    assert {"Pulling", "Failed", "BackOff", "ErrImageNeverPull"} <= found, found
    assert a.process.alive()


@contextlib.contextmanager
def silent_registry() -> Iterator[tuple[int, list[socket.socket]]]:
    """A "registry" on 127.0.0.1 that accepts connections and never answers: Docker's pull from it
    hangs (about 25 s here, its TLS then plain-HTTP attempts timing out). Yields the port and the
    connections it took."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    taken: list[socket.socket] = []
    done = threading.Event()

    def serve() -> None:
        while not done.is_set():
            with contextlib.suppress(OSError):
                taken.append(server.accept()[0])

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1], taken
    finally:
        done.set()
        thread.join(5)
        for conn in taken:
            conn.close()
        server.close()


def test_deleting_a_pod_abandons_its_hanging_image_pull(nodes: tuple[KubeletProcess, KubeletProcess],
                                                        api: httpx.Client, namespace: str) -> None:
    """A pod deleted while its image is being pulled goes at once, as upstream's pod worker cancels the
    sync under way when a pod becomes terminating; it used to wait for the pull to give up (a Deployment
    rolled back from a missing image kept its stuck pod for as long as the registry took to answer)."""
    pytest.skip("the Docker shim pulls nothing (there is no registry: its PullImage is local images only); "
                "tests/unit/test_kubelet_cri.py::test_deleting_a_pod_abandons_its_hanging_image_pull covers it")
    a, _ = nodes
    with silent_registry() as (port, taken):
        created = create(api, namespace, pod_manifest("hung", a.node, [container("c", f"127.0.0.1:{port}/hang:1")],
                                                      terminationGracePeriodSeconds=1))
        uid = created["metadata"]["uid"]
        wait_for(lambda: taken and "Pulling" in reasons(api, namespace, "hung"), 20, 0.1,
                 what="the kubelet pulling from the silent registry")
        r = api.delete(f"/api/v1/namespaces/{namespace}/pods/hung")
        assert r.status_code == 200, r.text
        # well before the pull itself would give up (about 25 s)
        wait_for(lambda: api.get(f"/api/v1/namespaces/{namespace}/pods/hung").status_code == 404, 12, 0.1,
                 what="the pod gone while its image pull still hangs")
        assert pod_containers(uid) == []
        assert not (a.root_dir / "pods" / uid).exists()
    assert a.process.alive()


def test_graceful_deletion_sends_sigterm_and_honours_the_grace_period(
        nodes: tuple[KubeletProcess, KubeletProcess], api: httpx.Client, namespace: str, tmp_path: Path) -> None:
    a, _ = nodes
    marks = tmp_path / "marks"
    polite = container("polite", command=sh("trap 'echo TERM > /marks/polite; exit 0' TERM; "
                                            "while true; do sleep 0.1; done"),
                       volumeMounts=[{"name": "marks", "mountPath": "/marks"}])
    stubborn = container("stubborn", command=["sleep", "3600"])  # PID 1 ignores SIGTERM: only SIGKILL ends it
    created = create(api, namespace, pod_manifest("leaving", a.node, [polite, stubborn],
                                                  terminationGracePeriodSeconds=3,
                                                  volumes=[{"name": "marks", "hostPath": {
                                                      "path": str(marks), "type": "DirectoryOrCreate"}}]))
    pod = wait_pod(api, namespace, "leaving", running, what="leaving running")
    ip, uid = pod["status"]["podIP"], created["metadata"]["uid"]
    assert ip in a.leases()

    started = time.monotonic()
    r = api.delete(f"/api/v1/namespaces/{namespace}/pods/leaving")
    assert r.status_code == 200 and r.json()["metadata"]["deletionGracePeriodSeconds"] == 3
    wait_for(lambda: api.get(f"/api/v1/namespaces/{namespace}/pods/leaving").status_code == 404, 20,
             what="pod removed from the API by the kubelet")
    elapsed = time.monotonic() - started
    assert 2.5 <= elapsed < 15, elapsed  # the stubborn container got its full 3 s before SIGKILL
    assert (marks / "polite").read_text() == "TERM\n"
    assert pod_containers(uid) == []
    assert ip not in a.leases()
    assert not (a.root_dir / "pods" / uid).exists()
    assert any(e["reason"] == "Killing" for e in events_of(api, namespace, "leaving"))


def test_logs_through_the_apiserver(nodes: tuple[KubeletProcess, KubeletProcess], api: httpx.Client,
                                    namespace: str, apiserver: ApiServer, tmp_path: Path) -> None:
    _, b = nodes
    create(api, namespace, pod_manifest("talker", b.node, [
        container("c", command=sh("for i in 1 2 3; do echo line $i; done; echo oops >&2; "
                                  "while true; do sleep 0.3; echo tick; done")),
        container("d", command=sh("echo other; sleep 3600")),
    ]))
    wait_pod(api, namespace, "talker", running, what="talker running")
    wait_for(lambda: "oops" in log_of(api, namespace, "talker", container="c"), 10, what="first lines")
    text = log_of(api, namespace, "talker", container="c")
    first = text.splitlines()[:4]  # stdout and stderr are copied separately: only each one's order holds
    assert sorted(first) == ["line 1", "line 2", "line 3", "oops"]
    assert [line for line in first if line != "oops"] == ["line 1", "line 2", "line 3"]
    last = log_of(api, namespace, "talker", container="c", tailLines=1)
    assert last.count("\n") == 1 and last in log_of(api, namespace, "talker", container="c")
    stamped = log_of(api, namespace, "talker", container="c", tailLines=2, timestamps="true").splitlines()
    assert all(len(line.split(" ", 1)[0]) >= 20 and line.split(" ", 1)[0].endswith("Z") for line in stamped)
    r = api.get(f"/api/v1/namespaces/{namespace}/pods/talker/log")
    assert r.status_code == 400 and "a container name must be specified" in r.json()["message"]
    r = api.get(f"/api/v1/namespaces/{namespace}/pods/talker/log", params={"container": "nope"})
    assert r.status_code == 400 and r.json()["reason"] == "BadRequest"
    r = api.get(f"/api/v1/namespaces/{namespace}/pods/talker/log", params={"container": "c", "previous": "true"})
    assert r.status_code == 400 and "previous terminated container" in r.json()["message"]

    # follow streams lines as they are written
    with httpx.stream("GET", f"{apiserver.url}/api/v1/namespaces/{namespace}/pods/talker/log",
                      params={"container": "c", "follow": "true", "tailLines": "0"},
                      timeout=httpx.Timeout(10.0)) as stream:
        assert stream.status_code == 200
        deadline = time.monotonic() + 10
        got = b""
        for chunk in stream.iter_raw():
            got += chunk
            if got.count(b"tick\n") >= 2 or time.monotonic() > deadline:
                break
        assert got.count(b"tick\n") >= 2

    # and real kubectl follows too
    kubectl_bin = find_kubectl("1.33")
    if kubectl_bin is None:
        pytest.fail("kubectl 1.33 is not installed on this machine")
    kubectl = Kubectl(kubectl_bin, "1.33", apiserver.url, tmp_path / "kubectl", namespace)
    assert kubectl.run("logs", "talker", "-c", "d").ok().stdout == "other\n"
    with kubectl.watch("logs", "-f", "talker", "-c", "c", "--tail", "1") as follow:
        follow.wait_for_line(lambda line: line == "tick", 10, "a first tick")
        follow.wait_for_line(lambda line: line == "tick", 10, "a later tick")


def test_previous_logs_of_a_restarted_container(nodes: tuple[KubeletProcess, KubeletProcess], api: httpx.Client,
                                                namespace: str) -> None:
    a, _ = nodes
    create(api, namespace, pod_manifest("again", a.node, [container("c", command=sh("echo run $(date +%s%N); "
                                                                                     "exit 1"))]))
    wait_pod(api, namespace, "again", lambda p: cstatus(p, "c").get("restartCount", 0) >= 1, 20, what="a restart")
    previous = log_of(api, namespace, "again", container="c", previous="true")
    assert previous.startswith("run ")


def test_exec_through_the_apiserver_with_kubectl(nodes: tuple[KubeletProcess, KubeletProcess], api: httpx.Client,
                                                  namespace: str, apiserver: ApiServer, tmp_path: Path) -> None:
    a, _ = nodes
    create(api, namespace, pod_manifest("shell", a.node, [container("c", command=["sleep", "3600"])]))
    wait_pod(api, namespace, "shell", running, what="shell running")
    kubectl_bin = find_kubectl("1.33")
    if kubectl_bin is None:
        pytest.fail("kubectl 1.33 is not installed on this machine")
    kubectl = Kubectl(kubectl_bin, "1.33", apiserver.url, tmp_path / "kubectl", namespace)
    result = kubectl.run("exec", "shell", "--", "sh", "-c", "echo out; echo err >&2; exit 3")
    if "Upgrade request required" in result.stderr:
        pytest.fail("the apiserver refused the websocket upgrade of pods/exec (kubectl then tried SPDY): its "
                    "router must hand websocket requests to SUBRESOURCE_HANDLERS['exec']['WEBSOCKET'] "
                    "(see apiserver/endpoints/proxy.py)\n" + str(result))
    assert result.returncode == 3, result
    assert result.stdout == "out\n" and "err\n" in result.stderr
    assert kubectl.run("exec", "shell", "--", "hostname").ok().stdout == "shell\n"
    assert kubectl.run("exec", "-i", "shell", "--", "sh", "-c", "tr a-z A-Z", stdin="piped in\n").ok().stdout \
        == "PIPED IN\n"
    missing = kubectl.run("exec", "shell", "-c", "nope", "--", "true")
    assert missing.returncode != 0


def test_kubelet_restart_adopts_containers_and_cleans_orphans(apiserver: ApiServer, api: httpx.Client,
                                                              namespace: str, workdir_k: Path) -> None:
    ensure_images()
    (cidr,) = free_pod_cidrs(1)
    k = KubeletProcess(workdir_k, apiserver, f"kt-{uuid.uuid4().hex[:6]}-r", cidr)
    try:
        k.start(api)
        create(api, namespace, pod_manifest("stay", k.node, [container("web", HTTPD),
                                                             container("side", command=["sleep", "3600"])]))
        create(api, namespace, pod_manifest("gone", k.node, [container("c", command=["sleep", "3600"])]))
        stay = wait_pod(api, namespace, "stay", running, what="stay running")
        gone = wait_pod(api, namespace, "gone", running, what="gone running")
        before = sorted(c.id for c in pod_containers(stay["metadata"]["uid"]))
        assert len(before) == 3
        gone_ip = gone["status"]["podIP"]

        k.kill()  # kill -9: no chance to clean anything up
        r = api.delete(f"/api/v1/namespaces/{namespace}/pods/gone", params={"gracePeriodSeconds": "0"})
        assert r.status_code == 200
        k.start(api)

        def adopted() -> bool:
            workers = k.debug()["workers"]
            w = workers.get(stay["metadata"]["uid"])
            return w is not None and w["syncs"] >= 1 and not pod_containers(gone["metadata"]["uid"])

        wait_for(adopted, 30, 0.1, what="stay synced after the restart, gone's containers removed")
        after = sorted(c.id for c in pod_containers(stay["metadata"]["uid"]))
        assert after == before, "the restarted kubelet started duplicates"
        pod = get_pod(api, namespace, "stay")
        assert running(pod) and pod["status"]["podIP"] == stay["status"]["podIP"]
        assert all(cs["restartCount"] == 0 for cs in pod["status"]["containerStatuses"])
        wait_for(lambda: gone_ip not in k.leases(), 10, what="the orphan's lease released")
        assert httpx.get(f"http://{pod['status']['podIP']}/", timeout=5).status_code == 200
    finally:
        cleanup([k])


def test_ready_set_false_by_another_writer_is_reconciled(nodes: tuple[KubeletProcess, KubeletProcess],
                                                         api: httpx.Client, namespace: str) -> None:
    """The node lifecycle controller marks pods Ready=False when their node goes NotReady; once the kubelet
    is back it writes what it sees again (upstream's status manager reconciles with the apiserver's copy)."""
    a, _ = nodes
    create(api, namespace, pod_manifest("steady", a.node, [container("web", HTTPD)], terminationGracePeriodSeconds=1))
    pod = wait_pod(api, namespace, "steady", lambda p: condition(p, "Ready") == "True", 30, what="Ready")
    conditions = [dict(c, status="False") if c["type"] == "Ready" else c for c in pod["status"]["conditions"]]
    r = api.patch(f"/api/v1/namespaces/{namespace}/pods/steady/status", json={"status": {"conditions": conditions}},
                  headers={"content-type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text
    assert condition(r.json(), "Ready") == "False"
    wait_pod(api, namespace, "steady", lambda p: condition(p, "Ready") == "True", 30,
             what="the kubelet to write Ready=True back")
