"""Starting one node's containerd and giving it the project's images (what a node's provisioning does
upstream: systemd's containerd.service with /etc/containerd/config.toml, images pre-loaded as kind does
with `ctr -n k8s.io images import`).

- `prepare` writes the directory (config, CNI template, the marker naming the node), makes sure the host
  rules exist (forwarding and masquerading of the cluster CIDR, `cni.host`: containerd's bridge plugin runs
  with ipMasq off, like the Docker shim's) and registers the node among the users of those rules, so no
  other clean-up removes them while this containerd runs;
- `ContainerdNode.start` runs containerd as a child (tests, benchmarks); `exec_containerd` replaces the
  calling process with it (under hack/supervise.sh); both wait on nothing but the socket answering CRI;
- `import_images`: `docker save IMAGE... | ctr -a SOCK -n k8s.io images import -` (unpacked for overlayfs).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

import grpc

from cni import host
from containerd_node.cleanup import CleanupReport, cleanup_node
from containerd_node.config import K8S_NAMESPACE, NodeLayout, read_marker, registry_name, write_marker
from machinery.cri import api_pb2, api_pb2_grpc

log = logging.getLogger(__name__)

CONTAINERD = "containerd"
CTR = "ctr"
START_TIMEOUT = 30.0


class ContainerdError(Exception):
    pass


def prepare(layout: NodeLayout) -> None:
    """Write the node's directory and make sure the host forwards and masquerades the cluster CIDR."""
    if layout.base_dir.exists() and any(layout.base_dir.iterdir()) and read_marker(layout.base_dir) is None:
        raise ContainerdError(f"{layout.base_dir} exists and is not a containerd node directory (no marker): "
                              "refusing to use it")
    marker = read_marker(layout.base_dir)
    if marker is not None and marker.get("node") != layout.node_name:
        raise ContainerdError(f"{layout.base_dir} belongs to node {marker.get('node')!r}, not {layout.node_name!r}")
    for d in (layout.base_dir, layout.root, layout.state, layout.runc_root, layout.cni_conf_dir, layout.ipam_dir):
        d.mkdir(parents=True, exist_ok=True)
    layout.base_dir.chmod(0o700)
    write_marker(layout, 0)
    layout.config_path.write_text(layout.config_toml())
    layout.cni_template.write_text(layout.conf_template())
    with host.host_lock(shared=True):
        host.ensure_cluster_rules(layout.cluster_cidr)


def register(layout: NodeLayout, pid: int) -> None:
    write_marker(layout, pid)
    host.register_kubelet(registry_name(layout.node_name), pid)


def containerd_argv(layout: NodeLayout) -> list[str]:
    return [CONTAINERD, "--config", str(layout.config_path)]


def exec_containerd(layout: NodeLayout) -> None:
    """Become the node's containerd (same pid: the marker and the host registry name this process)."""
    prepare(layout)
    register(layout, os.getpid())
    os.execvp(CONTAINERD, containerd_argv(layout))


def cri_version(layout: NodeLayout, timeout: float = 2.0) -> api_pb2.VersionResponse:
    """RuntimeService.Version over the node's socket (raises grpc.RpcError when it does not answer)."""
    with grpc.insecure_channel(layout.endpoint) as channel:
        stub = api_pb2_grpc.RuntimeServiceStub(channel)  # type: ignore[no-untyped-call]
        version: api_pb2.VersionResponse = stub.Version(api_pb2.VersionRequest(version="v1"), timeout=timeout)
        return version


def wait_for_cri(layout: NodeLayout, timeout: float, alive: object = None) -> api_pb2.VersionResponse:
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        if callable(alive) and not alive():
            raise ContainerdError(f"containerd of node {layout.node_name} exited:\n{log_tail(layout)}")
        if layout.socket.exists():
            try:
                return cri_version(layout)
            except grpc.RpcError as e:
                last = e
        time.sleep(0.05)
    raise ContainerdError(f"containerd of node {layout.node_name} did not answer CRI within {timeout}s"
                          f" (last error: {last}):\n{log_tail(layout)}")


def log_tail(layout: NodeLayout, lines: int = 30) -> str:
    try:
        return "\n".join(layout.log_path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def import_images(layout: NodeLayout, images: Sequence[str], timeout: float = 300.0) -> None:
    """Copy images from the local Docker engine into the node's containerd (namespace k8s.io, unpacked)."""
    if not images:
        return
    missing = [i for i in images if subprocess.run(["docker", "image", "inspect", i], capture_output=True,
                                                   timeout=60).returncode != 0]
    if missing:
        raise ContainerdError(f"images not in the local Docker engine (build them with hack/images.sh): "
                              f"{', '.join(missing)}")
    save = subprocess.Popen(["docker", "save", *images], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        load = subprocess.run([CTR, "--address", str(layout.socket), "--namespace", K8S_NAMESPACE, "images",
                               "import", "-"], stdin=save.stdout, capture_output=True, text=True, timeout=timeout)
    finally:
        assert save.stdout is not None
        save.stdout.close()
        save_err = save.stderr.read().decode(errors="replace") if save.stderr else ""
        save.wait(timeout)
    if save.returncode != 0:
        raise ContainerdError(f"docker save {' '.join(images)}: exit {save.returncode}: {save_err.strip()}")
    if load.returncode != 0:
        raise ContainerdError(f"ctr images import: exit {load.returncode}: {load.stderr.strip()}")


class ContainerdNode:
    """One node's containerd as a child process (tests and benchmarks)."""

    def __init__(self, node_name: str, base_dir: Path, **layout_args: object) -> None:
        self.layout = NodeLayout(node_name, Path(base_dir).resolve(), **layout_args)  # type: ignore[arg-type]
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def node_name(self) -> str:
        return self.layout.node_name

    @property
    def endpoint(self) -> str:
        return self.layout.endpoint

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.alive() and self.proc else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, images: Sequence[str] = (), timeout: float = START_TIMEOUT) -> None:
        """Start containerd (a containerd of this node must not be running), wait for CRI, import `images`."""
        prepare(self.layout)
        with open(self.layout.log_path, "ab") as logfile:
            self.proc = subprocess.Popen(containerd_argv(self.layout), stdout=logfile, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        register(self.layout, self.proc.pid)
        try:
            wait_for_cri(self.layout, timeout, self.alive)
            import_images(self.layout, images)
        except BaseException:
            self.kill()
            raise

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM, then SIGKILL: containerd goes, its shims and pods stay (as on a containerd restart)."""
        if not self.alive():
            return
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
            self.proc.wait(10)

    def restart(self, timeout: float = START_TIMEOUT) -> None:
        self.stop()
        self.start(timeout=timeout)

    def log_tail(self, lines: int = 30) -> str:
        return log_tail(self.layout, lines)

    def cleanup(self, host_rules: bool = True) -> CleanupReport:
        """Kill it and remove everything it made (containerd_node.cleanup)."""
        report = cleanup_node(self.layout.base_dir, host_rules=host_rules)
        if self.proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(10)  # reaped: no zombie left behind
        return report
