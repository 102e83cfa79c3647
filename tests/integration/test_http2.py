"""HTTP/2 on the apiserver's secure port, chosen by ALPN (machinery/http2.py), against a real apiserver process:
real kubectl 1.27 and 1.33 negotiate h2 and get, apply and watch over it (Go's own http2 debug log, GODEBUG=
http2debug=1, says so); the official Python client, which offers only http/1.1, is served as before; the
server's SETTINGS are upstream's (250 streams, 256 KiB windows and frames); and a client resetting a watch's
stream (RST_STREAM, as client-go cancels a watch) ends that watch at once, the connection serving on."""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import h2.config
import h2.connection
import h2.errors
import h2.events
import httpx
import kubernetes
import pytest

from tests.auth_cluster import SecureApiServer
from tests.cluster import Etcd, wait_for
from tests.kubectl import Kubectl, find_kubectl, kubectl_dir

VERSIONS = ("1.27", "1.33")


@pytest.fixture(scope="module")
def secure(workdir: Path, etcd: Etcd) -> Iterator[SecureApiServer]:
    server = SecureApiServer(workdir, etcd)
    server.start()
    yield server
    server.stop()


@pytest.fixture(params=VERSIONS, ids=[f"kubectl{v}" for v in VERSIONS])
def kubectl(request: pytest.FixtureRequest, tmp_path: Path, secure: SecureApiServer) -> Kubectl:
    """kubectl.<version> as the cluster admin (client certificate) on the secure port, Go's http2 log on."""
    version: str = request.param
    binary = find_kubectl(version)
    if binary is None:
        pytest.skip(f"kubectl.{version} is not installed (looked next to `kubectl` in {kubectl_dir()} and on PATH)")
    k = Kubectl(binary, version, secure.secure_url, tmp_path / f"kubectl-{version}")
    k.kubeconfig = secure.pki.kubeconfig("admin")
    k.env["GODEBUG"] = "http2debug=1"
    return k


# what x/net/http2's Transport logs (http2debug=1) once it speaks HTTP/2 on a connection: the server's SETTINGS
H2_USED = re.compile(r"http2: Transport received SETTINGS")


def test_kubectl_get_apply_and_watch_over_h2(kubectl: Kubectl, ns: str, admin: httpx.Client, tmp_path: Path) -> None:
    manifest = tmp_path / "cm.yaml"
    manifest.write_text(f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\n  namespace: {ns}\n"
                        "data:\n  key: value\n")
    r = kubectl.run("apply", "-f", str(manifest)).ok()
    assert r.stdout.strip() == "configmap/applied created", r
    assert H2_USED.search(r.stderr), r.stderr[-2000:]
    r = kubectl.run("get", "configmap", "applied", "-n", ns, "-o", "jsonpath={.data.key}").ok()
    assert r.stdout == "value" and H2_USED.search(r.stderr), r
    r = kubectl.run("apply", "-f", str(manifest), "--server-side", "--force-conflicts").ok()
    assert "configmap/applied serverside-applied" in r.stdout, r

    with kubectl.watch("get", "configmaps", "-n", ns, "-w", "--output-watch-events") as watch:
        watch.wait_for_line(lambda line: "applied" in line, what="the existing configmap")
        assert admin.post(f"/api/v1/namespaces/{ns}/configmaps",
                          json={"metadata": {"name": "later"}}).status_code == 201
        line = watch.wait_for_line(lambda line: "later" in line, what="the new configmap's event")
        assert line.split()[0] == "ADDED", line
        assert H2_USED.search(watch.output()), watch.output()[-2000:]


def test_official_python_client_is_served_over_http11(secure: SecureApiServer, ns: str) -> None:
    config = kubernetes.client.Configuration()
    config.host = secure.secure_url
    config.ssl_ca_cert = secure.ca
    config.cert_file, config.key_file = str(secure.pki.cert("admin")), str(secure.pki.key("admin"))
    with kubernetes.client.ApiClient(config) as api:
        core = kubernetes.client.CoreV1Api(api)
        core.create_namespaced_config_map(ns, {"metadata": {"name": "py"}, "data": {"a": "b"}})
        assert core.read_namespaced_config_map("py", ns).data == {"a": "b"}
        w = kubernetes.watch.Watch()
        for event in w.stream(core.list_namespaced_config_map, ns, timeout_seconds=5):
            assert event["type"] == "ADDED" and event["object"].metadata.name == "py"
            w.stop()


class H2Client:
    """A bare HTTP/2 client (the h2 library on a TLS socket): frames as a test wants them."""

    def __init__(self, server: SecureApiServer, name: str = "admin") -> None:
        context = server.ssl_context(name)
        context.set_alpn_protocols(["h2"])
        raw = socket.create_connection(("127.0.0.1", server.secure_port), timeout=10)
        self.sock = context.wrap_socket(raw, server_hostname="127.0.0.1")
        assert self.sock.selected_alpn_protocol() == "h2"
        self.authority = f"127.0.0.1:{server.secure_port}"
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        self.conn.initiate_connection()
        self.flush()
        self.events: list[h2.events.Event] = []

    def flush(self) -> None:
        self.sock.sendall(self.conn.data_to_send())

    def get(self, path: str) -> int:
        stream_id = self.conn.get_next_available_stream_id()
        self.conn.send_headers(stream_id, [(":method", "GET"), (":path", path), (":scheme", "https"),
                                           (":authority", self.authority), ("accept", "application/json")],
                               end_stream=True)
        self.flush()
        return stream_id

    def read_until(self, done: object, timeout: float = 20.0) -> None:
        """Read frames until done(events) is true."""
        deadline = time.monotonic() + timeout
        while not done(self.events):  # type: ignore[operator]
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"events so far: {self.events}")
            self.sock.settimeout(left)
            data = self.sock.recv(65536)
            if not data:
                raise AssertionError(f"the server closed the connection; events: {self.events}")
            for event in self.conn.receive_data(data):
                if isinstance(event, h2.events.DataReceived):
                    self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                self.events.append(event)
            self.flush()

    def body(self, stream_id: int) -> bytes:
        return b"".join(e.data for e in self.events
                        if isinstance(e, h2.events.DataReceived) and e.stream_id == stream_id)

    def ended(self, stream_id: int) -> bool:
        return any(isinstance(e, h2.events.StreamEnded) and e.stream_id == stream_id for e in self.events)

    def close(self) -> None:
        self.sock.close()


def test_settings_are_upstreams(secure: SecureApiServer) -> None:
    client = H2Client(secure)
    try:
        client.read_until(lambda events: any(isinstance(e, h2.events.RemoteSettingsChanged) for e in events))
        settings = client.conn.remote_settings
        assert settings.max_concurrent_streams == 250
        assert settings.initial_window_size == 256 * 1024
        assert settings.max_frame_size == 256 * 1024
        assert settings.max_header_list_size == 1 << 20
    finally:
        client.close()


def watching(admin: httpx.Client, resource: str) -> int:
    """apiserver_longrunning_requests{verb="WATCH"} of `resource`: the watches being served."""
    total = 0
    for line in admin.get("/metrics").text.splitlines():
        if line.startswith("apiserver_longrunning_requests{") and 'verb="WATCH"' in line \
                and f'resource="{resource}"' in line:
            total += int(float(line.rsplit(" ", 1)[1]))
    return total


def test_a_reset_stream_ends_its_watch(secure: SecureApiServer, admin: httpx.Client, ns: str) -> None:
    client = H2Client(secure)
    try:
        before = watching(admin, "secrets")
        watch = client.get(f"/api/v1/namespaces/{ns}/secrets?watch=1&allowWatchBookmarks=true")
        client.read_until(lambda events: any(isinstance(e, h2.events.ResponseReceived) and e.stream_id == watch
                                             for e in events))
        wait_for(lambda: watching(admin, "secrets") == before + 1, 10, what="the watch being served")
        assert admin.post(f"/api/v1/namespaces/{ns}/secrets", json={"metadata": {"name": "s"}}).status_code == 201
        client.read_until(lambda _: b'"name":"s"' in client.body(watch))

        client.conn.reset_stream(watch, h2.errors.ErrorCodes.CANCEL)
        client.flush()
        wait_for(lambda: watching(admin, "secrets") == before, 10, what="the reset watch to end")

        # the connection serves on: another stream on it
        get = client.get(f"/api/v1/namespaces/{ns}/secrets/s")
        client.read_until(lambda _: client.ended(get))
        assert b'"kind":"Secret"' in client.body(get)
        assert not client.ended(watch)
    finally:
        client.close()


def test_kubectl_asks_for_exec_over_http11(kubectl: Kubectl, ns: str, admin: httpx.Client) -> None:
    """exec is an upgrade (SPDY/3.1 for 1.27, websocket for 1.33), which HTTP/2 cannot carry: kubectl makes its
    request on a connection of its own that offers only http/1.1, while its GET of the pod goes over h2. (The
    pod's node has no kubelet here, so the apiserver answers the upgrade with an error; test_streaming.py runs
    exec, attach and port-forward through to a real kubelet on the secure port.)"""
    assert admin.post(f"/api/v1/namespaces/{ns}/pods", json={
        "metadata": {"name": "p"},
        "spec": {"nodeName": "node-a", "containers": [{"name": "c", "image": "busybox"}]}}).status_code == 201
    r = kubectl.run("exec", "p", "-n", ns, "--", "true")
    assert r.returncode != 0
    h2_paths = re.findall(r'http2: Transport encoding header ":path" = "([^"]*)"', r.stderr)
    assert any(path.startswith(f"/api/v1/namespaces/{ns}/pods/p") and "/exec" not in path for path in h2_paths), \
        r.stderr[-3000:]
    assert not [path for path in h2_paths if "/exec" in path], h2_paths
    # the apiserver's answer to the exec request itself (it looks the node up to reach its kubelet)
    assert 'Error from server (InternalError): nodes "node-a" not found' in r.stderr, r.stderr[-3000:]
