"""pods/exec over SPDY/3.1, as kubectl 1.27-1.29 speak it (apiserver/endpoints/streamtranslator.py, machinery/spdy.py):
real kubectl binaries through the apiserver to a real kubelet and its container (the Docker shim), one node and
one pod for the module. exec with stdin and exit codes, `-it` on a terminal, `kubectl cp` of 5 MB both ways, the
websocket client unchanged, RBAC refusing before any upgrade, a protocol nobody shares, and a garbled frame
that ends the connection without leaving the command running in the container.
"""

from __future__ import annotations

import hashlib
import os
import socket
import time
import urllib.parse
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from machinery import spdy
from tests.cluster import ApiServer, wait_for
from tests.integration.test_kubelet import container, create, pod_manifest, running, wait_pod
from tests.integration.test_kubelet_runtimes import _exit_code, _ws_exec
from tests.integration.test_mkubectl import run_in_terminal
from tests.kubectl import Kubectl, find_kubectl

SPDY_VERSIONS = ("1.27", "1.29")
POD = "spdy"


@pytest.fixture(scope="module")
def spdy_ns(apiserver: ApiServer, kubelet_node: str) -> Iterator[str]:
    """A namespace with one running busybox pod on the module's node."""
    name = f"spdy-{uuid.uuid4().hex[:6]}"
    with httpx.Client(base_url=apiserver.url, timeout=30) as api:
        assert api.post("/api/v1/namespaces", json={"metadata": {"name": name}}).status_code == 201
        try:
            create(api, name, pod_manifest(POD, kubelet_node, [container("c", command=["sleep", "3600"])],
                                           terminationGracePeriodSeconds=0))
            wait_pod(api, name, POD, running, 90, what="the spdy pod running")
            yield name
        finally:
            api.delete(f"/api/v1/namespaces/{name}/pods/{POD}", params={"gracePeriodSeconds": "0"})
            api.delete(f"/api/v1/namespaces/{name}")


def _kubectl(version: str, apiserver: ApiServer, namespace: str, tmp_path: Path) -> Kubectl:
    binary = find_kubectl(version)
    if binary is None:
        pytest.fail(f"kubectl {version} is not installed on this machine")
    return Kubectl(binary, version, apiserver.url, tmp_path / f"kubectl-{version}", namespace)


def _processes(apiserver: ApiServer, namespace: str) -> str:
    """The container's process list (ps through a websocket exec)."""
    _, channels = _ws_exec(apiserver, namespace, POD, ["ps", "-o", "pid,args"], ["v5.channel.k8s.io"])
    return channels.get(1, b"").decode()


@pytest.mark.parametrize("version", SPDY_VERSIONS)
def test_kubectl_exec_over_spdy(apiserver: ApiServer, spdy_ns: str, tmp_path: Path, version: str) -> None:
    """Output on stdout and stderr, the exit code, stdin to its end, and a TTY with the exit code relayed."""
    kubectl = _kubectl(version, apiserver, spdy_ns, tmp_path)
    result = kubectl.run("exec", POD, "--", "sh", "-c", "echo out; echo err >&2; exit 3")
    assert result.returncode == 3, result
    assert result.stdout == "out\n" and "err\n" in result.stderr
    assert kubectl.run("exec", POD, "--", "hostname").ok().stdout == f"{POD}\n"
    wrong = kubectl.run("exec", POD, "-c", "nosuch", "--", "true")  # refused before the upgrade
    assert wrong.returncode == 1 and f"container nosuch is not valid for pod {POD}" in wrong.stderr, wrong
    # stdin's end (the stream's FIN) reaches the command: tr ends
    assert kubectl.run("exec", "-i", POD, "--", "tr", "a-z", "A-Z", stdin="piped in\n").ok().stdout == "PIPED IN\n"
    output, code = run_in_terminal(kubectl.argv("exec", "-it", POD, "--", "sh"),
                                   b"stty size; echo hi-$((40+2)); exit 4\r", kubectl.env)
    assert b"hi-42" in output and b"command terminated with exit code 4" in output, output
    assert code == 4


@pytest.mark.parametrize("version", SPDY_VERSIONS)
def test_kubectl_cp_5mb_both_ways(apiserver: ApiServer, spdy_ns: str, tmp_path: Path, version: str) -> None:
    """kubectl cp (exec of tar over SPDY) of 5 MB into the container and back, checksums equal."""
    kubectl = _kubectl(version, apiserver, spdy_ns, tmp_path)
    source = tmp_path / "blob.bin"
    source.write_bytes(os.urandom(5 * 1024 * 1024))
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    remote_path = f"/tmp/blob-{version}.bin"
    kubectl.run("cp", str(source), f"{POD}:{remote_path}", timeout=120).ok()
    remote = kubectl.run("exec", POD, "--", "sha256sum", remote_path).ok().stdout.split()[0]
    assert remote == digest
    back = tmp_path / "back.bin"
    kubectl.run("cp", f"{POD}:{remote_path}", str(back), timeout=120).ok()
    assert hashlib.sha256(back.read_bytes()).hexdigest() == digest


def test_websocket_clients_still_work(apiserver: ApiServer, spdy_ns: str, tmp_path: Path) -> None:
    chosen, channels = _ws_exec(apiserver, spdy_ns, POD, ["sh", "-c", "echo ws; exit 2"], ["v5.channel.k8s.io"])
    assert (chosen, channels.get(1), _exit_code(channels[3])) == ("v5.channel.k8s.io", b"ws\n", 2)
    result = _kubectl("1.33", apiserver, spdy_ns, tmp_path).run("exec", POD, "--", "sh", "-c", "exit 3")
    assert result.returncode == 3, result


# -- a raw SPDY client: the handshake, the refusals before it, a garbled frame ---------------------------------


def _exec_request(namespace: str, command: list[str], protocols: list[str], extra: str = "", **flags: str) -> bytes:
    q = urllib.parse.urlencode([*(("command", c) for c in command), *flags.items()])
    lines = [f"POST /api/v1/namespaces/{namespace}/pods/{POD}/exec?{q} HTTP/1.1", "Host: minik8s",
             "Content-Length: 0", "Connection: Upgrade", "Upgrade: SPDY/3.1",
             *(f"X-Stream-Protocol-Version: {p}" for p in protocols)]
    return ("\r\n".join(lines) + "\r\n" + extra + "\r\n").encode()


def _connect(apiserver: ApiServer) -> socket.socket:
    url = urllib.parse.urlsplit(apiserver.url)
    sock = socket.create_connection((url.hostname or "127.0.0.1", url.port or 80), timeout=30)
    return sock


def _read_head(sock: socket.socket) -> tuple[str, bytes]:
    """The response head, and what followed it in the same reads."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    return head.decode(), rest


def _read_all(sock: socket.socket) -> bytes:
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def test_a_protocol_nobody_shares_is_refused_before_the_upgrade(apiserver: ApiServer, spdy_ns: str) -> None:
    with _connect(apiserver) as sock:
        sock.sendall(_exec_request(spdy_ns, ["true"], ["v2.channel.k8s.io"], stdout="true"))
        head, rest = _read_head(sock)
        body = rest + _read_all(sock)
    assert head.startswith("HTTP/1.1 403 "), head
    assert b"unable to upgrade: unable to negotiate protocol: client supports [v2.channel.k8s.io], server accepts " \
           b"[v4.channel.k8s.io]" in body, body


def test_a_user_without_pods_exec_is_refused_before_any_upgrade(apiserver: ApiServer, spdy_ns: str,
                                                                tmp_path: Path) -> None:
    """RBAC decides on `create pods/exec` before the upgrade: a user who may read pods but not exec gets upstream's
    Forbidden on kubectl 1.27, and a raw upgrade request gets the 403, not a 101."""
    rbac = "/apis/rbac.authorization.k8s.io/v1/namespaces/" + spdy_ns
    with httpx.Client(base_url=apiserver.url, timeout=30) as api:
        assert api.post(f"{rbac}/roles", json={"metadata": {"name": "pod-reader"}, "rules": [
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]}).status_code == 201
        assert api.post(f"{rbac}/rolebindings", json={
            "metadata": {"name": "pod-reader"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "spdy-reader"}]},
        ).status_code == 201
    forbidden = (f'pods "{POD}" is forbidden: User "spdy-reader" cannot create resource "pods/exec" in API group "" '
                 f'in the namespace "{spdy_ns}"')
    kubectl = _kubectl("1.27", apiserver, spdy_ns, tmp_path)
    wait_for(lambda: kubectl.run("--as=spdy-reader", "get", "pod", POD).returncode == 0, timeout=30, interval=0.5,
             what="the role binding in effect")
    result = kubectl.run("--as=spdy-reader", "exec", POD, "--", "true")
    assert result.returncode == 1, result
    assert forbidden in result.stderr, result
    with _connect(apiserver) as sock:
        sock.sendall(_exec_request(spdy_ns, ["true"], ["v4.channel.k8s.io"], "Impersonate-User: spdy-reader\r\n",
                                   stdout="true"))
        head, rest = _read_head(sock)
        body = rest + _read_all(sock)
    assert head.startswith("HTTP/1.1 403 "), head
    assert forbidden.replace('"', '\\"').encode() in body, body


class RawClient:
    """The client side of a SPDY connection, frame by frame (machinery/spdy.py's Framer)."""

    def __init__(self, sock: socket.socket, rest: bytes) -> None:
        self.sock = sock
        self.framer = spdy.Framer()
        self.frames: list[spdy.Frame] = self.framer.feed(rest)
        self.next_id = 1

    def open(self, stream_type: str) -> int:
        stream_id, self.next_id = self.next_id, self.next_id + 2
        self.sock.sendall(self.framer.encode(spdy.SynStream(stream_id, {"streamtype": [stream_type]})))
        return stream_id

    def wait(self, check: object, timeout: float = 30) -> list[spdy.Frame]:
        """Read frames until check(frames) is true or the connection ends."""
        deadline = time.monotonic() + timeout
        while not check(self.frames):  # type: ignore[operator]
            self.sock.settimeout(max(deadline - time.monotonic(), 0.01))
            chunk = self.sock.recv(65536)
            if not chunk:
                break
            self.frames += self.framer.feed(chunk)
        return self.frames


def test_a_garbled_frame_ends_the_connection_and_the_command(apiserver: ApiServer, spdy_ns: str) -> None:
    """After the streams of a running `cat`, a control frame of SPDY version 2: the apiserver answers GOAWAY with
    PROTOCOL_ERROR and closes; the kubelet's stream closes, and no `cat` stays behind in the container."""
    marker = f"/tmp/spdy-{uuid.uuid4().hex[:6]}"
    with _connect(apiserver) as sock:
        sock.sendall(_exec_request(spdy_ns, ["cat", marker, "-"], ["v4.channel.k8s.io"], stdin="true",
                                   stdout="true"))
        head, rest = _read_head(sock)
        assert head.startswith("HTTP/1.1 101 "), head
        assert "x-stream-protocol-version: v4.channel.k8s.io" in head.lower()
        client = RawClient(sock, rest)
        ids = [client.open(t) for t in ("error", "stdin", "stdout")]
        client.wait(lambda fs: {f.stream_id for f in fs if isinstance(f, spdy.SynReply)} >= set(ids))
        wait_for(lambda: marker in _processes(apiserver, spdy_ns), timeout=30, interval=0.5, what="cat running")
        sock.sendall(b"\x80\x02\x00\x01\x00\x00\x00\x04garb")  # a SYN_STREAM of SPDY/2, cut short
        frames = client.wait(lambda fs: False)  # to the connection's end
    assert any(isinstance(f, spdy.GoAway) and f.status == spdy.GOAWAY_PROTOCOL_ERROR for f in frames), frames
    wait_for(lambda: marker not in _processes(apiserver, spdy_ns), timeout=30, interval=0.5, what="cat gone")
