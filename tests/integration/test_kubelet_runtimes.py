"""The kubelet on each CRI runtime: the Docker shim (`dockershim`, the default) and a node's own containerd
(`containerd_node`, containerd's CRI plugin: no Docker involved). The same tests run against both, a subset of
test_kubelet.py chosen to cover what the runtime does for the kubelet while keeping CI time down: sandbox +
CNI (one IP for a pod's containers, reached from the host and from a pod of the other node without NAT),
the runtime's identity in the Node and container IDs, probes (exec through CRI ExecSync, HTTP, TCP),
restarts and back-off, OOMKilled, logs (CRI log files: tail, timestamps, follow, previous), exec through
the apiserver with real kubectls 1.33 and 1.30 (the kubelet relays the websocket to the runtime's own streaming
server: v5.channel.k8s.io to the shim verbatim, v4 to containerd 1.6 with a v5 client's frames translated),
adoption after a kill -9 of the kubelet, and the
clean-up of everything at the end. Containers are inspected through CRI, as the kubelet sees them.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import time
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest

from machinery.cri import api_pb2 as pb
from machinery.cri import api_pb2_grpc as rpc
from tests.cluster import ApiServer, make_workdir, wait_for
from tests.integration.test_kubelet import (
    condition,
    container,
    create,
    cstatus,
    events_of,
    get_pod,
    in_cidr,
    log_of,
    phase,
    pod_manifest,
    running,
    sh,
    wait_pod,
)
from tests.integration.test_mkubectl import run_in_terminal
from tests.kubectl import Kubectl, find_kubectl
from tests.node_process import BACKOFF_BASE, HTTPD, RUNTIMES, KubeletProcess, cleanup, ensure_images, free_pod_cidrs

JSONDict = dict[str, Any]
RUNTIME_PREFIX = {"docker": "docker://", "containerd": "containerd://"}


def _skip_without(runtime: str) -> None:
    if runtime == "containerd" and (shutil.which("containerd") is None or shutil.which("runc") is None):
        pytest.skip("no containerd/runc on this host (apt-get install containerd)")


@pytest.fixture(scope="module", params=RUNTIMES)
def runtime_nodes(request: pytest.FixtureRequest, apiserver: ApiServer) -> Iterator[tuple[KubeletProcess, ...]]:
    """Two kubelets of one runtime (two nodes, two bridges) for the module, and everything removed after."""
    runtime: str = request.param
    _skip_without(runtime)
    ensure_images()
    workdir = make_workdir(f"minik8s-kubelet-{runtime}-")
    tag = uuid.uuid4().hex[:6]
    cidr_a, cidr_b = free_pod_cidrs(2)
    nodes = tuple(KubeletProcess(workdir, apiserver, f"kr-{tag}-{x}", cidr, container_runtime=runtime)
                  for x, cidr in (("a", cidr_a), ("b", cidr_b)))
    try:
        with httpx.Client(base_url=apiserver.url, timeout=10) as api:
            for k in nodes:
                k.start(api)
        yield nodes
    finally:
        cleanup(nodes)
        with httpx.Client(base_url=apiserver.url, timeout=10) as api:
            for k in nodes:
                api.delete(f"/api/v1/nodes/{k.node}")
        shutil.rmtree(workdir, ignore_errors=True)


def runtime_of(k: KubeletProcess) -> str:
    return k.container_runtime


class NodeCri:
    """A test's own CRI client on a node's runtime socket: what the kubelet sees, without going through it."""

    def __init__(self, k: KubeletProcess) -> None:
        assert k.runtime is not None
        self.channel = grpc.insecure_channel(k.runtime.endpoint)
        self.runtime = rpc.RuntimeServiceStub(self.channel)

    def __enter__(self) -> NodeCri:
        return self

    def __exit__(self, *exc: object) -> None:
        self.channel.close()

    def containers(self, pod_uid: str, name: str | None = None) -> list[pb.Container]:
        labels = {"io.kubernetes.pod.uid": pod_uid, **({"io.kubernetes.container.name": name} if name else {})}
        return list(self.runtime.ListContainers(pb.ListContainersRequest(
            filter=pb.ContainerFilter(label_selector=labels)), timeout=10).containers)

    def sandboxes(self, pod_uid: str) -> list[pb.PodSandbox]:
        return list(self.runtime.ListPodSandbox(pb.ListPodSandboxRequest(
            filter=pb.PodSandboxFilter(label_selector={"io.kubernetes.pod.uid": pod_uid})), timeout=10).items)

    def exec(self, container_id: str, cmd: list[str]) -> pb.ExecSyncResponse:
        return self.runtime.ExecSync(pb.ExecSyncRequest(container_id=container_id, cmd=cmd, timeout=10), timeout=30)


def container_id(pod: JSONDict, name: str) -> str:
    return cstatus(pod, name)["containerID"].split("://", 1)[1]


# -- tests ----------------------------------------------------------------------------------------------


def test_node_shows_its_runtime(runtime_nodes: tuple[KubeletProcess, ...], api: httpx.Client) -> None:
    a = runtime_nodes[0]
    node = api.get(f"/api/v1/nodes/{a.node}").json()
    assert node["status"]["nodeInfo"]["containerRuntimeVersion"].startswith(RUNTIME_PREFIX[runtime_of(a)])
    assert condition(node, "Ready") == "True"


def test_two_container_pod_shares_one_ip_and_localhost(runtime_nodes: tuple[KubeletProcess, ...],
                                                       api: httpx.Client, namespace: str) -> None:
    a = runtime_nodes[0]
    created = create(api, namespace, pod_manifest("duo", a.node, [
        container("web", HTTPD, ports=[{"containerPort": 80}]),
        container("probe", command=sh("until wget -qO- http://localhost:80/ > /tmp/page; do sleep 0.2; done; "
                                      "grep -o '<title>.*</title>' /tmp/page; hostname; sleep 3600")),
    ]))
    pod = wait_pod(api, namespace, "duo", running, what="duo running")
    ip = pod["status"]["podIP"]
    assert in_cidr(ip, a.pod_cidr) and pod["status"]["podIPs"] == [{"ip": ip}]
    prefix = RUNTIME_PREFIX[runtime_of(a)]
    for cs in pod["status"]["containerStatuses"]:
        assert cs["containerID"].startswith(prefix) and cs["ready"] and cs["restartCount"] == 0
    # the page's title, then the hostname (wget's "can't connect" lines may come first, while httpd starts;
    # the log may be read between two writes)
    def after_title() -> list[str]:
        lines = log_of(api, namespace, "duo", container="probe").splitlines()
        titles = [n for n, line in enumerate(lines) if "Welcome to minik8s httpd" in line]
        return lines[titles[0] + 1:] if titles else []

    wait_for(after_title, 15, what="sidecar fetched the page over localhost")
    assert after_title()[0] == "duo"
    uid = created["metadata"]["uid"]
    with NodeCri(a) as cri:
        (sandbox,) = cri.sandboxes(uid)
        assert sandbox.state == pb.SANDBOX_READY and sandbox.metadata.name == "duo"
        assert {c.metadata.name for c in cri.containers(uid)} == {"web", "probe"}
        assert all(c.pod_sandbox_id == sandbox.id for c in cri.containers(uid))
    page = httpx.get(f"http://{ip}/", timeout=5)  # the host reaches the pod on its node bridge
    assert page.status_code == 200 and "Welcome to minik8s httpd" in page.text


def test_pod_reaches_pod_on_the_other_node_without_nat(runtime_nodes: tuple[KubeletProcess, ...],
                                                       api: httpx.Client, namespace: str) -> None:
    a, b = runtime_nodes
    create(api, namespace, pod_manifest("server", a.node, [container("web", HTTPD)]))
    server_ip = wait_pod(api, namespace, "server", running, what="server running")["status"]["podIP"]
    create(api, namespace, pod_manifest("client", b.node, [
        container("get", command=sh(f"timeout 10 wget -qO- http://{server_ip}/"))], restartPolicy="Never"))
    client = wait_pod(api, namespace, "client", lambda p: phase(p) in ("Succeeded", "Failed"), 30,
                      what="client finished")
    assert phase(client) == "Succeeded", log_of(api, namespace, "client")
    client_ip = client["status"]["podIP"]
    assert in_cidr(client_ip, b.pod_cidr) and in_cidr(server_ip, a.pod_cidr)
    wait_for(lambda: client_ip in log_of(api, namespace, "server"), 10, what="server saw the client's pod IP")
    wait_for(lambda: client_ip not in b.leases(), 10, what="finished pod's lease released")


def test_memory_limit_oom_kills(runtime_nodes: tuple[KubeletProcess, ...], api: httpx.Client, namespace: str) -> None:
    a = runtime_nodes[0]
    hog = container("hog", command=sh("sleep 0.5; dd if=/dev/zero of=/dev/null bs=64M count=1"),
                    resources={"limits": {"memory": "20Mi", "cpu": "500m"}})
    create(api, namespace, pod_manifest("hog", a.node, [hog], restartPolicy="Never"))
    pod = wait_pod(api, namespace, "hog", lambda p: phase(p) == "Failed", 30, what="hog failed")
    term = cstatus(pod, "hog")["state"]["terminated"]
    assert term["reason"] == "OOMKilled" and term["exitCode"] == 137


def test_crash_loop_back_off_grows_and_old_attempts_are_removed(runtime_nodes: tuple[KubeletProcess, ...],
                                                                api: httpx.Client, namespace: str) -> None:
    a = runtime_nodes[0]
    created = create(api, namespace, pod_manifest("crasher", a.node, [container("c", command=sh("echo hi; exit 3"))]))
    first_seen: dict[int, float] = {}

    def restarted_4_times(p: JSONDict) -> bool:
        count = cstatus(p, "c").get("restartCount", 0)
        first_seen.setdefault(count, time.monotonic())
        return count >= 4

    pod = wait_pod(api, namespace, "crasher", restarted_4_times, 40, what="4 restarts")
    last = cstatus(pod, "c")["lastState"]["terminated"]
    assert (last["exitCode"], last["reason"]) == (3, "Error")
    gap3, gap4 = first_seen[3] - first_seen[2], first_seen[4] - first_seen[3]
    assert gap3 > 1.6 * BACKOFF_BASE and gap4 > 3.2 * BACKOFF_BASE and gap4 > gap3, first_seen
    wait_pod(api, namespace, "crasher",
             lambda p: cstatus(p, "c").get("state", {}).get("waiting", {}).get("reason") == "CrashLoopBackOff",
             20, what="CrashLoopBackOff")
    with NodeCri(a) as cri:
        assert len(cri.containers(created["metadata"]["uid"], "c")) <= 2  # older attempts garbage-collected


def test_probes_drive_ready_and_liveness_restarts(runtime_nodes: tuple[KubeletProcess, ...], api: httpx.Client,
                                                  namespace: str) -> None:
    b = runtime_nodes[1]
    web = container("web", HTTPD, ports=[{"name": "http", "containerPort": 80}],
                    readinessProbe={"httpGet": {"path": "/ready.html", "port": "http"}, "periodSeconds": 1},
                    livenessProbe={"tcpSocket": {"port": 80}, "periodSeconds": 1})
    worker = container("worker", command=sh("touch /tmp/alive; sleep 3600"),
                       livenessProbe={"exec": {"command": ["cat", "/tmp/alive"]}, "periodSeconds": 1,
                                      "failureThreshold": 2},
                       readinessProbe={"exec": {"command": ["true"]}, "periodSeconds": 1})
    create(api, namespace, pod_manifest("probed", b.node, [web, worker], terminationGracePeriodSeconds=1))
    pod = wait_pod(api, namespace, "probed", lambda p: cstatus(p, "worker").get("ready"), 30, what="worker ready")
    assert not cstatus(pod, "web")["ready"] and condition(pod, "Ready") == "False"
    with NodeCri(b) as cri:
        assert cri.exec(container_id(pod, "web"), ["sh", "-c", "echo ok > /var/www/ready.html"]).exit_code == 0
        wait_pod(api, namespace, "probed", lambda p: condition(p, "Ready") == "True", 15, what="Ready")
        assert cri.exec(container_id(pod, "worker"), ["rm", "/tmp/alive"]).exit_code == 0
    pod = wait_pod(api, namespace, "probed", lambda p: cstatus(p, "worker").get("restartCount", 0) >= 1
                   and "running" in cstatus(p, "worker")["state"], 30, what="worker restarted by liveness")
    assert cstatus(pod, "web")["restartCount"] == 0
    killing = [e for e in events_of(api, namespace, "probed") if e["reason"] == "Killing"]
    assert any("failed liveness probe" in e["message"] for e in killing)


def test_logs_tail_timestamps_follow_and_previous(runtime_nodes: tuple[KubeletProcess, ...], api: httpx.Client,
                                                  namespace: str, apiserver: ApiServer) -> None:
    b = runtime_nodes[1]
    create(api, namespace, pod_manifest("talker", b.node, [
        container("c", command=sh("for i in 1 2 3; do echo line $i; done; echo oops >&2; "
                                  "while true; do sleep 0.3; echo tick; done")),
        container("again", command=sh("echo run $(date +%s%N); sleep 0.5; exit 1")),
    ]))
    wait_for(lambda: "oops" in log_of(api, namespace, "talker", container="c"), 30, what="first lines")
    first = log_of(api, namespace, "talker", container="c").splitlines()[:4]
    assert sorted(first) == ["line 1", "line 2", "line 3", "oops"]
    last = log_of(api, namespace, "talker", container="c", tailLines=1)
    assert last.count("\n") == 1
    stamped = log_of(api, namespace, "talker", container="c", tailLines=2, timestamps="true").splitlines()
    assert all(line.split(" ", 1)[0].endswith("Z") for line in stamped)
    with httpx.stream("GET", f"{apiserver.url}/api/v1/namespaces/{namespace}/pods/talker/log",
                      params={"container": "c", "follow": "true", "tailLines": "0"},
                      timeout=httpx.Timeout(10.0)) as stream:
        assert stream.status_code == 200
        got = b""
        deadline = time.monotonic() + 10
        for chunk in stream.iter_raw():
            got += chunk
            if got.count(b"tick\n") >= 2 or time.monotonic() > deadline:
                break
        assert got.count(b"tick\n") >= 2
    wait_pod(api, namespace, "talker", lambda p: cstatus(p, "again").get("restartCount", 0) >= 1, 30,
             what="a restart")
    assert log_of(api, namespace, "talker", container="again", previous="true").startswith("run ")


def _exec_url(apiserver: ApiServer, namespace: str, pod: str, command: list[str], **flags: str) -> str:
    query = urllib.parse.urlencode([*(("command", c) for c in command), *flags.items()])
    return apiserver.url.replace("http://", "ws://") + f"/api/v1/namespaces/{namespace}/pods/{pod}/exec?{query}"


def _ws_exec(apiserver: ApiServer, namespace: str, pod: str, command: list[str], protocols: list[str],
             stdin: list[bytes] | None = None, timeout: float = 30, **flags: str) -> tuple[str, dict[int, bytes]]:
    """pods/exec through the apiserver as a websocket client offering `protocols` and sending the `stdin` frames
    (whole frames, channel byte first): the protocol chosen, bytes per channel until the server closes."""
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    flags = {"stdout": "true", "stderr": "true", **({"stdin": "true"} if stdin is not None else {}), **flags}
    channels: dict[int, bytes] = {}
    with connect(_exec_url(apiserver, namespace, pod, command, **flags), subprotocols=protocols,  # type: ignore[arg-type]
                 open_timeout=30, close_timeout=5) as ws:
        for frame in stdin or []:
            ws.send(frame)
        deadline = time.monotonic() + timeout
        while True:
            try:
                message = ws.recv(timeout=max(deadline - time.monotonic(), 0.01))
            except ConnectionClosed:
                return ws.subprotocol or "", channels
            except TimeoutError:
                raise TimeoutError(f"exec {command} still open after {timeout}s: {channels}") from None
            if isinstance(message, bytes) and message:
                channels[message[0]] = channels.get(message[0], b"") + message[1:]


def _exit_code(status: bytes) -> int:
    parsed = json.loads(status)
    if parsed["status"] == "Success":
        return 0
    assert parsed["reason"] == "NonZeroExitCode", parsed
    return int(parsed["details"]["causes"][0]["message"])


def test_exec_through_the_apiserver_as_a_websocket(runtime_nodes: tuple[KubeletProcess, ...], api: httpx.Client,
                                                   namespace: str, apiserver: ApiServer) -> None:
    """A v4 client gets v4 verbatim from both runtimes; a v5-only client (kubectl ≥ 1.30) gets v5 from both: the
    shim speaks it, containerd 1.6 speaks v4 and the kubelet translates (kubelet/streaming.py)."""
    a = runtime_nodes[0]
    create(api, namespace, pod_manifest("wsexec", a.node, [container("c", command=["sleep", "3600"])]))
    wait_pod(api, namespace, "wsexec", running, what="wsexec running")
    for protocol in ("v4.channel.k8s.io", "v5.channel.k8s.io"):
        chosen, channels = _ws_exec(apiserver, namespace, "wsexec", ["sh", "-c", "echo out; echo err >&2; exit 3"],
                                    [protocol])
        assert chosen == protocol
        assert channels[1] == b"out\n" and channels[2] == b"err\n"
        assert _exit_code(channels[3]) == 3
    # v5 with stdin: its data frames reach the command (translated or not)
    chosen, channels = _ws_exec(apiserver, namespace, "wsexec", ["sh", "-c", "read line; echo got $line; exit 5"],
                                ["v5.channel.k8s.io"], stdin=[b"\x00piped ", b"\x00in\n"])
    assert (chosen, channels.get(1), _exit_code(channels[3])) == ("v5.channel.k8s.io", b"got piped in\n", 5)


def test_exec_tty_stdin_close_ends_the_shell(runtime_nodes: tuple[KubeletProcess, ...], api: httpx.Client,
                                             namespace: str, apiserver: ApiServer) -> None:
    """A v5 client with a TTY types a line at the shell's prompt, then closes stdin (CLOSE frame): the shell there
    ends (on containerd, through the ^D the kubelet sends for it over v4), with its output and exit status."""
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    a = runtime_nodes[0]
    create(api, namespace, pod_manifest("ttyexec", a.node, [container("c", command=["sleep", "3600"])]))
    wait_pod(api, namespace, "ttyexec", running, what="ttyexec running")
    url = _exec_url(apiserver, namespace, "ttyexec", ["sh"], stdin="true", stdout="true", tty="true")
    channels: dict[int, bytes] = {}
    with connect(url, subprotocols=["v5.channel.k8s.io"], open_timeout=30, close_timeout=5) as ws:  # type: ignore[list-item]
        assert ws.subprotocol == "v5.channel.k8s.io"
        deadline = time.monotonic() + 30

        def read_until(done: Callable[[], bool], what: str) -> None:
            while not done():
                try:
                    message = ws.recv(timeout=max(deadline - time.monotonic(), 0.01))
                except TimeoutError:
                    raise TimeoutError(f"no {what} within 30s: {channels}") from None
                if isinstance(message, bytes) and message:
                    channels[message[0]] = channels.get(message[0], b"") + message[1:]

        read_until(lambda: b"# " in channels.get(1, b""), "prompt")  # typed earlier, it may be lost
        ws.send(b"\x00echo hi-$((40+2))\r")
        read_until(lambda: channels[1].count(b"# ") >= 2 and b"hi-42" in channels[1], "output and the next prompt")
        ws.send(bytes([255, 0]))
        with contextlib.suppress(ConnectionClosed):
            read_until(lambda: 3 in channels, "the exit status")
    assert _exit_code(channels[3]) == 0, channels


def _kubectl(version: str, apiserver: ApiServer, namespace: str, tmp_path: Path) -> Kubectl:
    kubectl_bin = find_kubectl(version)
    if kubectl_bin is None:
        pytest.fail(f"kubectl {version} is not installed on this machine")
    return Kubectl(kubectl_bin, version, apiserver.url, tmp_path / "kubectl", namespace)


@pytest.mark.parametrize("version", ["1.33", "1.30"])
def test_exec_through_the_apiserver_with_kubectl(runtime_nodes: tuple[KubeletProcess, ...], api: httpx.Client,
                                                  namespace: str, apiserver: ApiServer, tmp_path: Path,
                                                  version: str) -> None:
    """kubectl ≥ 1.30 offers its websocket only as v5.channel.k8s.io (else SPDY, which the apiserver refuses):
    output, exit code, stdin and a TTY on both runtimes."""
    a = runtime_nodes[0]
    create(api, namespace, pod_manifest("shell", a.node, [container("c", command=["sleep", "3600"])]))
    wait_pod(api, namespace, "shell", running, what="shell running")
    kubectl = _kubectl(version, apiserver, namespace, tmp_path)
    result = kubectl.run("exec", "shell", "--", "sh", "-c", "echo out; echo err >&2; exit 3")
    assert result.returncode == 3, result
    assert result.stdout == "out\n" and "err\n" in result.stderr
    assert kubectl.run("exec", "shell", "--", "hostname").ok().stdout == "shell\n"
    assert kubectl.run("exec", "-i", "shell", "--", "sh", "-c", "read line; echo got $line",
                       stdin="piped in\n").ok().stdout == "got piped in\n"
    if runtime_of(a) == "docker":  # stdin's end reaches the command: the shim takes v5's CLOSE frame
        assert kubectl.run("exec", "-i", "shell", "--", "tr", "a-z", "A-Z", stdin="piped in\n").ok().stdout \
            == "PIPED IN\n"
    # -it: a terminal in raw mode on this side, a TTY on the other, the exit code relayed
    output, code = run_in_terminal(kubectl.argv("exec", "-it", "shell", "--", "sh"),
                                   b"echo hi-$((40+2)); exit 4\r", kubectl.env)
    assert b"hi-42" in output and b"command terminated with exit code 4" in output, output
    assert code == 4


@pytest.mark.xfail(strict=True, raises=TimeoutError, reason="containerd 1.6 gets v4.channel.k8s.io, which cannot "
                   "carry the end of stdin (kubelet/streaming.py): a command reading stdin to its end waits until the "
                   "client goes. SPDY/3.1 towards the runtime would carry it (upstream's StreamTranslator); no "
                   "maintained Python SPDY library exists. When that lands, this passes and the marker must go.")
def test_kubectl_exec_stdin_end_on_containerd(runtime_nodes: tuple[KubeletProcess, ...], api: httpx.Client,
                                              namespace: str, apiserver: ApiServer, tmp_path: Path) -> None:
    a = runtime_nodes[0]
    if runtime_of(a) != "containerd":
        pytest.skip("the Docker shim speaks v5: test_exec_through_the_apiserver_with_kubectl covers stdin's end")
    create(api, namespace, pod_manifest("reader", a.node, [container("c", command=["sleep", "3600"])]))
    wait_pod(api, namespace, "reader", running, what="reader running")
    kubectl = _kubectl("1.33", apiserver, namespace, tmp_path)
    assert kubectl.run("exec", "-i", "reader", "--", "tr", "a-z", "A-Z", stdin="piped in\n",
                       timeout=15).ok().stdout == "PIPED IN\n"


def test_kubelet_restart_adopts_containers_and_cleans_orphans(runtime_nodes: tuple[KubeletProcess, ...],
                                                              api: httpx.Client, namespace: str) -> None:
    k = runtime_nodes[1]
    create(api, namespace, pod_manifest("stay", k.node, [container("web", HTTPD),
                                                         container("side", command=["sleep", "3600"])]))
    create(api, namespace, pod_manifest("gone", k.node, [container("c", command=["sleep", "3600"])]))
    stay = wait_pod(api, namespace, "stay", running, what="stay running")
    gone = wait_pod(api, namespace, "gone", running, what="gone running")
    with NodeCri(k) as cri:
        before = sorted(c.id for c in cri.containers(stay["metadata"]["uid"]))
        assert len(before) == 2
        gone_ip = gone["status"]["podIP"]

        k.kill()  # kill -9: no chance to clean anything up; the runtime keeps running
        r = api.delete(f"/api/v1/namespaces/{namespace}/pods/gone", params={"gracePeriodSeconds": "0"})
        assert r.status_code == 200
        k.start(api)

        def adopted() -> bool:
            w = k.debug()["workers"].get(stay["metadata"]["uid"])
            return w is not None and w["syncs"] >= 1 and not cri.containers(gone["metadata"]["uid"]) \
                and not cri.sandboxes(gone["metadata"]["uid"])

        wait_for(adopted, 30, 0.1, what="stay synced after the restart, gone's containers and sandbox removed")
        assert sorted(c.id for c in cri.containers(stay["metadata"]["uid"])) == before, "duplicates started"
    pod = get_pod(api, namespace, "stay")
    assert running(pod) and pod["status"]["podIP"] == stay["status"]["podIP"]
    assert all(cs["restartCount"] == 0 for cs in pod["status"]["containerStatuses"])
    wait_for(lambda: gone_ip not in k.leases(), 10, what="the orphan's lease released")
    assert httpx.get(f"http://{pod['status']['podIP']}/", timeout=5).status_code == 200
