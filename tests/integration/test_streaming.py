"""kubectl attach and port-forward through the whole path, over websockets: real kubectl 1.33 and 1.30 → the
secure apiserver (authn, RBAC, audit) → the kubelet's HTTPS server (`/attach`, `/portForward`) → CRI Attach /
PortForward → the Docker shim's streaming server (Docker's attach; a socket made inside the pod's network
namespace) and containerd's own CRI streaming server when containerd is installed.

One apiserver and one kubelet per runtime for the module. Attach sees the output of what is typed after
attaching (`kubectl attach -i`, `kubectl run -it --rm`, the official Python client's `stream()`); port-forward
carries an HTTP request and 10 MB both ways (checksums) for `pod/x`, `svc/x` and `deployment/x`, kubectl's
SPDY/3.1-in-websocket tunnel and the plain v4.channel.k8s.io websocket of the official clients. Bad input: a
port nothing listens on (kubectl's error line, the connection closed, no hung stream), attach to a finished
container, a pod that does not exist, a user with `view` only (403).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.auth_cluster import SecureApiServer, SecureKubectl
from tests.cluster import Etcd, make_workdir, wait_for
from tests.integration.test_kubelet import container, create, phase, pod_manifest, running, wait_pod
from tests.integration.test_mkubectl import run_in_terminal
from tests.kubectl import find_kubectl
from tests.node_process import BUSYBOX, KubeletProcess, cleanup, ensure_images, free_pod_cidrs

VERSIONS = ("1.33", "1.30", "1.27")  # 1.27: SPDY/3.1, bridged by streamtranslator.py
TEN_MB = 10 * 1024 * 1024
# the web pod: busybox httpd on 8080 and, on 9000, a server that reads 10 MB, answers its sha256, then echoes it
# (a file of its own per connection; no `$$` or `$(...)`, which the kubelet expands in a command)
WEB_SCRIPT = (
    "mkdir -p /www && echo hello-from-the-pod > /www/index.html && httpd -p 8080 -h /www && "
    "printf '#!/bin/sh\\nf=`mktemp`\\nhead -c %d > $f\\nsha256sum < $f\\ncat $f\\nrm -f $f\\n' "
    f"{TEN_MB} > /echo.sh && chmod +x /echo.sh && exec nc -ll -p 9000 -e /echo.sh"
)


@pytest.fixture(scope="module")
def secure(workdir: Path, own_etcd: Etcd) -> Iterator[SecureApiServer]:
    server = SecureApiServer(workdir, own_etcd).start()
    yield server
    server.stop()


def _start_node(secure: SecureApiServer, runtime: str) -> Iterator[KubeletProcess]:
    if runtime == "containerd" and (shutil.which("containerd") is None or shutil.which("runc") is None):
        pytest.skip("no containerd/runc on this host (apt-get install containerd)")
    ensure_images()
    workdir = make_workdir(f"minik8s-stream-{runtime}-")
    node = secure.kubelet(workdir, f"st-{runtime[:2]}-{uuid.uuid4().hex[:6]}", free_pod_cidrs(1)[0],
                          container_runtime=runtime)
    try:
        with secure.client("admin", timeout=30) as admin:
            node.start(admin)
        yield node
    finally:
        cleanup([node])
        with secure.client("admin", timeout=30) as admin:
            admin.delete(f"/api/v1/nodes/{node.node}")
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(scope="module")
def docker_node(secure: SecureApiServer) -> Iterator[KubeletProcess]:
    yield from _start_node(secure, "docker")


@pytest.fixture(scope="module")
def containerd_node(secure: SecureApiServer) -> Iterator[KubeletProcess]:
    yield from _start_node(secure, "containerd")


@pytest.fixture(params=["docker", "containerd"])
def node(request: pytest.FixtureRequest) -> KubeletProcess:
    return request.getfixturevalue(f"{request.param}_node")  # type: ignore[no-any-return]


def _kubectl(secure: SecureApiServer, version: str, ns: str, tmp_path: Path, identity: str = "admin",
             ) -> SecureKubectl:
    binary = find_kubectl(version)
    if binary is None:
        pytest.fail(f"kubectl {version} is not installed on this machine")
    kubectl = SecureKubectl(binary, version, secure, identity, tmp_path / f"kubectl-{version}-{identity}", ns)
    if version == "1.30":  # its websocket port-forward is alpha there, off unless asked for
        kubectl.env["KUBECTL_PORT_FORWARD_WEBSOCKETS"] = "true"
    return kubectl


# -- attach ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_kubectl_attach_sees_what_is_typed_after_attaching(node: KubeletProcess, admin: httpx.Client, ns: str,
                                                           secure: SecureApiServer, tmp_path: Path,
                                                           version: str) -> None:
    """The container waits for a line on its stdin; `kubectl attach -i` sends one and prints the answer, and
    ends when the container does."""
    name = f"reader-{version.replace('.', '')}"
    create(admin, ns, pod_manifest(name, node.node, [container(
        "c", command=["sh", "-c", "echo started; read line; echo got $line"], stdin=True, stdinOnce=True)],
        restartPolicy="Never"))
    wait_pod(admin, ns, name, running, what=f"{name} running")
    kubectl = _kubectl(secure, version, ns, tmp_path)
    result = kubectl.run("attach", "-i", name, stdin="typed after attaching\n", timeout=60)
    assert result.returncode == 0, result
    assert "got typed after attaching" in result.stdout, result
    wait_pod(admin, ns, name, lambda p: phase(p) == "Succeeded", what=f"{name} done")


def test_kubectl_run_it_rm(node: KubeletProcess, admin: httpx.Client, ns: str, secure: SecureApiServer,
                           tmp_path: Path) -> None:
    """`kubectl run -it --rm`: kubectl creates the pod, attaches with a terminal, the shell answers what is
    typed, and the pod is deleted after."""
    kubectl = _kubectl(secure, "1.33", ns, tmp_path)
    overrides = json.dumps({"spec": {"nodeName": node.node}})
    output, _ = run_in_terminal(kubectl.argv("run", "shell", "-it", "--rm", "--restart=Never", f"--image={BUSYBOX}",
                                             "--image-pull-policy=IfNotPresent", f"--overrides={overrides}",
                                             "--", "sh"),
                                b"echo hi-$((40+2)); exit 0\r", kubectl.env, timeout=90)
    assert b"hi-42" in output, output
    assert b'pod "shell" deleted' in output, output


def test_python_client_attach_stream(docker_node: KubeletProcess, admin: httpx.Client, ns: str,
                                     secure: SecureApiServer) -> None:
    """The official Python client's `stream(connect_get_namespaced_pod_attach, ...)` (its websocket,
    v4.channel.k8s.io) reads what the container writes after the attach."""
    kubernetes = pytest.importorskip("kubernetes")
    from kubernetes.stream import stream

    create(admin, ns, pod_manifest("pyattach", docker_node.node, [container(
        "c", command=["sh", "-c", "read line; echo got $line; sleep 30"], stdin=True)]))
    wait_pod(admin, ns, "pyattach", running, what="pyattach running")
    config = kubernetes.client.Configuration()
    config.host = secure.secure_url
    config.ssl_ca_cert = str(secure.pki.ca_cert)
    config.cert_file, config.key_file = str(secure.pki.cert("admin")), str(secure.pki.key("admin"))
    with kubernetes.client.ApiClient(config) as client:
        api = kubernetes.client.CoreV1Api(client)
        resp = stream(api.connect_get_namespaced_pod_attach, "pyattach", ns, stdin=True, stdout=True,
                      stderr=True, tty=False, _preload_content=False)
        try:
            resp.write_stdin("from python\n")
            out = ""
            deadline = time.monotonic() + 30
            while "got from python" not in out and time.monotonic() < deadline:
                resp.update(timeout=1)
                out += resp.read_stdout() if resp.peek_stdout() else ""
            assert "got from python" in out
        finally:
            resp.close()


def test_attach_bad_input(docker_node: KubeletProcess, admin: httpx.Client, ns: str, secure: SecureApiServer,
                          tmp_path: Path) -> None:
    """A finished container: kubectl's own message for a completed pod, and the kubelet's (upstream's
    `container not found`) for the raw request; a pod that does not exist: NotFound from the apiserver."""
    create(admin, ns, pod_manifest("done", docker_node.node, [container("c", command=["true"])],
                                   restartPolicy="Never"))
    wait_pod(admin, ns, "done", lambda p: phase(p) == "Succeeded", what="done Succeeded")
    kubectl = _kubectl(secure, "1.33", ns, tmp_path)
    result = kubectl.run("attach", "done")
    assert result.returncode != 0
    assert "cannot attach a container in a completed pod; current phase is Succeeded" in result.stderr, result
    code, body = _ws_refusal(secure, f"/api/v1/namespaces/{ns}/pods/done/attach?stdout=true",
                             ["v5.channel.k8s.io"])
    assert code == 500 and body["message"] == 'container not found ("c")', body
    result = kubectl.run("attach", "nope")
    assert result.returncode != 0 and 'pods "nope" not found' in result.stderr, result
    code, body = _ws_refusal(secure, f"/api/v1/namespaces/{ns}/pods/done/attach", ["v5.channel.k8s.io"])
    assert code == 400 and body["message"] == "you must specify at least 1 of stdin, stdout, stderr", body


def _ws_refusal(secure: SecureApiServer, path: str, protocols: list[str],
                identity: str = "admin") -> tuple[int, dict[str, Any]]:
    """The HTTP answer of a websocket upgrade the server refuses: (code, Status)."""
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    try:
        with connect(secure.secure_url.replace("https://", "wss://") + path, subprotocols=protocols,  # type: ignore[arg-type]
                     ssl=secure.ssl_context(identity), open_timeout=30):
            pass
    except InvalidStatus as e:
        return e.response.status_code, json.loads(e.response.body or b"{}")
    raise AssertionError(f"{path} was upgraded")


# -- port-forward ----------------------------------------------------------------------------------------


@pytest.fixture
def web(node: KubeletProcess, admin: httpx.Client, ns: str) -> str:
    """The web pod (labels app=web), a Service and a Deployment selecting it (kubectl resolves their pod)."""
    manifest = pod_manifest("web", node.node, [container("c", command=["sh", "-c", WEB_SCRIPT], ports=[
        {"name": "http", "containerPort": 8080}, {"name": "echo", "containerPort": 9000}],
        readinessProbe={"tcpSocket": {"port": 8080}, "periodSeconds": 1})])
    manifest["metadata"]["labels"] = {"app": "web"}
    create(admin, ns, manifest)
    r = admin.post(f"/api/v1/namespaces/{ns}/services", json={
        "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": "http"},
                                                       {"name": "echo", "port": 90, "targetPort": 9000}]}})
    assert r.status_code == 201, r.text
    r = admin.post(f"/apis/apps/v1/namespaces/{ns}/deployments", json={
        "metadata": {"name": "web"},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "c", "image": BUSYBOX}]}}}})
    assert r.status_code == 201, r.text
    wait_pod(admin, ns, "web", lambda p: running(p) and all(cs.get("ready") for cs in p["status"]["containerStatuses"]),
             60, what="web ready (its servers listening)")
    return "web"


class PortForward:
    """A running `kubectl port-forward`: the local ports it reports, and its output."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path, count: int) -> None:
        self.stderr_path = cwd / f"port-forward-{time.monotonic_ns()}.stderr"
        self._stderr = open(self.stderr_path, "w")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self._stderr, text=True, env=env, cwd=cwd)
        self.ports: list[int] = []
        self.lines: list[str] = []
        assert self.proc.stdout is not None
        deadline = time.monotonic() + 30
        os.set_blocking(self.proc.stdout.fileno(), True)
        while len(self.ports) < count:
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.close()
                self.lines += self.proc.stdout.readlines()
                raise AssertionError(f"kubectl port-forward did not forward: {self.lines} {self.errors()}")
            line = self.proc.stdout.readline()
            self.lines.append(line)
            if m := re.match(r"Forwarding from 127\.0\.0\.1:(\d+) ->", line):
                self.ports.append(int(m.group(1)))

    def errors(self) -> str:
        if not self._stderr.closed:
            self._stderr.flush()
        return self.stderr_path.read_text()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._stderr.close()


@contextlib.contextmanager
def port_forward(kubectl: SecureKubectl, target: str, *ports: str) -> Iterator[PortForward]:
    forward = PortForward(kubectl.argv("port-forward", target, *ports), kubectl.env, kubectl.workdir, len(ports))
    try:
        yield forward
    finally:
        forward.close()


def _http_get(port: int) -> str:
    with httpx.Client(timeout=30) as client:
        r = client.get(f"http://127.0.0.1:{port}/index.html")
        assert r.status_code == 200, r.text
        return r.text


def _echo_10mb(port: int) -> None:
    """Send 10 MB, read back the pod's sha256 of what it got and the 10 MB echoed: all must match."""
    payload = os.urandom(TEN_MB)
    digest = hashlib.sha256(payload).hexdigest()
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(payload)
        received = bytearray()
        while len(received) < TEN_MB + 66:
            chunk = sock.recv(1 << 20)
            if not chunk:
                break
            received += chunk
    line, _, echoed = bytes(received).partition(b"\n")
    assert line.split()[0].decode() == digest, line[:100]
    assert len(echoed) == TEN_MB and hashlib.sha256(echoed).hexdigest() == digest


@pytest.mark.parametrize("version", VERSIONS)
def test_kubectl_port_forward_pod_svc_deployment(web: str, admin: httpx.Client, ns: str, secure: SecureApiServer,
                                                 tmp_path: Path, version: str) -> None:
    kubectl = _kubectl(secure, version, ns, tmp_path)
    with port_forward(kubectl, "pod/web", ":8080", ":9000") as pf:
        assert _http_get(pf.ports[0]) == "hello-from-the-pod\n"
        _echo_10mb(pf.ports[1])
        assert _http_get(pf.ports[0]) == "hello-from-the-pod\n"  # a second connection on the same session
    with port_forward(kubectl, "svc/web", ":80", ":90") as pf:  # kubectl maps the Service's ports to the pod's
        assert _http_get(pf.ports[0]) == "hello-from-the-pod\n"
        _echo_10mb(pf.ports[1])
    with port_forward(kubectl, "deployment/web", ":8080") as pf:
        assert _http_get(pf.ports[0]) == "hello-from-the-pod\n"


def test_kubectl_port_forward_to_a_closed_port(web: str, ns: str, secure: SecureApiServer, tmp_path: Path) -> None:
    """Nothing listens on 81 in the pod: the local connection is closed at once and kubectl prints the
    kubelet's error (no hung stream)."""
    kubectl = _kubectl(secure, "1.33", ns, tmp_path)
    with port_forward(kubectl, "pod/web", ":81") as pf:
        with socket.create_connection(("127.0.0.1", pf.ports[0]), timeout=30) as sock:
            sock.sendall(b"GET / HTTP/1.0\r\n\r\n")
            assert sock.recv(100) == b""  # closed, not hung (the timeout would raise)
        wait_for(lambda: "error forwarding port 81" in pf.errors(), 30, what="kubectl's error line")
        assert "an error occurred forwarding" in pf.errors() or "lost connection" in pf.errors(), pf.errors()


def test_websocket_port_forward_v4(web: str, ns: str, secure: SecureApiServer) -> None:
    """The official clients' port-forward: websocket v4.channel.k8s.io with `?ports=`: per port a data and an
    error channel, the server's first frame on each the port (two bytes, little-endian); 10 MB both ways."""
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    url = (secure.secure_url.replace("https://", "wss://") +
           f"/api/v1/namespaces/{ns}/pods/web/portforward?ports=8080,9000")
    with connect(url, subprotocols=["v4.channel.k8s.io"], ssl=secure.ssl_context("admin"),  # type: ignore[list-item]
                 open_timeout=30, max_size=None) as ws:
        assert ws.subprotocol == "v4.channel.k8s.io"
        first = {ws.recv(timeout=30) for _ in range(4)}
        assert first == {bytes([channel]) + port.to_bytes(2, "little")
                         for channel, port in ((0, 8080), (1, 8080), (2, 9000), (3, 9000))}
        ws.send(b"\x00GET /index.html HTTP/1.0\r\n\r\n")
        payload = os.urandom(TEN_MB)
        digest = hashlib.sha256(payload).hexdigest()
        for i in range(0, TEN_MB, 1 << 16):
            ws.send(b"\x02" + payload[i:i + (1 << 16)])
        got: dict[int, bytes] = {0: b"", 2: b""}
        with contextlib.suppress(ConnectionClosed):  # the server closes once both connections have ended
            while len(got[2]) < TEN_MB + 67 or not got[0].endswith(b"hello-from-the-pod\n"):
                message = ws.recv(timeout=30)
                assert isinstance(message, bytes)
                got[message[0]] = got.get(message[0], b"") + message[1:]
    assert got[0].startswith(b"HTTP/1.") and got[0].endswith(b"hello-from-the-pod\n"), got[0][:200]
    line, _, echoed = got[2].partition(b"\n")
    assert line.split()[0].decode() == digest, line[:100]
    assert hashlib.sha256(echoed).hexdigest() == digest


def test_port_forward_bad_input(docker_node: KubeletProcess, ns: str, secure: SecureApiServer, tmp_path: Path) -> None:
    kubectl = _kubectl(secure, "1.33", ns, tmp_path)
    result = kubectl.run("port-forward", "pod/nope", "8080", timeout=30)
    assert result.returncode != 0 and 'pods "nope" not found' in result.stderr, result
    code, body = _ws_refusal(secure, f"/api/v1/namespaces/{ns}/pods/nope/portforward?ports=80", ["v4.channel.k8s.io"])
    assert (code, body["reason"], body["message"]) == (404, "NotFound", 'pods "nope" not found'), body
    with secure.client("admin", timeout=30) as admin:
        manifest = pod_manifest("idle", docker_node.node, [container("c", command=["sleep", "3600"])])
        create(admin, ns, manifest)
        for sub in ("attach", "portforward"):  # no upgrade: upstream's 400
            r = admin.post(f"/api/v1/namespaces/{ns}/pods/idle/{sub}")
            assert (r.status_code, r.json()["message"]) == (400, "Upgrade request required"), r.text
        wait_pod(admin, ns, "idle", running, what="idle running")
    for query, message in (("", 'query parameter "port" is required'),
                           ("?ports=http", 'unable to parse "http" as a port: invalid syntax'),
                           ("?ports=70000", "port 70000 must be > 0 and < 65536")):
        code, body = _ws_refusal(secure, f"/api/v1/namespaces/{ns}/pods/idle/portforward{query}",
                                 ["v4.channel.k8s.io"])
        assert (code, body["message"]) == (400, message), body


# -- RBAC and audit -------------------------------------------------------------------------------------


def test_rbac_and_audit(docker_node: KubeletProcess, admin: httpx.Client, ns: str, secure: SecureApiServer) -> None:
    """`view` may not attach or port-forward (403, upstream's message); `edit` may (here: on to the pod's lookup,
    NotFound); both subresources land in the audit log."""
    for user, role in (("viewer", "view"), ("editor", "edit")):
        secure.issue(f"stream-{user}", f"stream-{user}")
        r = admin.post(f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings", json={
            "metadata": {"name": user}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                                    "name": role},
            "subjects": [{"kind": "User", "name": f"stream-{user}", "apiGroup": "rbac.authorization.k8s.io"}]})
        assert r.status_code == 201, r.text
    attach = f"/api/v1/namespaces/{ns}/pods/ghost/attach?stdout=true"
    forward = f"/api/v1/namespaces/{ns}/pods/ghost/portforward?ports=80"

    def refused_as(identity: str, path: str, protocol: str) -> tuple[int, dict[str, Any]]:
        return _ws_refusal(secure, path, [protocol], identity=f"stream-{identity}")

    wait_for(lambda: refused_as("editor", attach, "v5.channel.k8s.io")[0] == 404, 15, what="the editor's binding")
    code, body = refused_as("viewer", attach, "v5.channel.k8s.io")
    assert code == 403 and 'cannot create resource "pods/attach"' in body["message"], body
    code, body = refused_as("viewer", forward, "v4.channel.k8s.io")
    assert code == 403 and 'cannot create resource "pods/portforward"' in body["message"], body
    assert refused_as("editor", forward, "v4.channel.k8s.io")[0] == 404

    def audited_users(sub: str) -> set[str]:
        return {e["user"]["username"] for e in secure.audit_events()
                if (e.get("objectRef") or {}).get("subresource") == sub
                and (e.get("objectRef") or {}).get("namespace") == ns}

    for sub in ("attach", "portforward"):  # the audit backend writes in batches after the response
        wait_for(lambda: {"stream-viewer", "stream-editor"} <= audited_users(sub), 20,  # noqa: B023
                 what=f"the {sub} audit events of both users")
