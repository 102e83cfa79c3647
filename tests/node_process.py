"""Kubelets as real OS processes for tests and benchmarks: `python -m kubelet` for one test node with its
own state dir, port and (optionally) pod CIDR, beside its CRI runtime `python -m dockershim` (as
cri-dockerd runs beside a kubelet; the kubelet is given its --container-runtime-endpoint); the project's
images; free /24s of the cluster CIDR on this host; and the complete clean-up of a node (containers, CNI
attachments, bridge, leases, state) through `dockershim.cleanup`, as a test must leave nothing behind even
when it fails."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import fcntl
import ipaddress
import json
import os
import random
import ssl
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import docker
import httpx

from cni.config import bridge_name, network_name
from dockershim.cleanup import cleanup_host_rules_if_unused, cleanup_node
from kubelet.cleanup import cleanup_kubelet_state, node_cgroup_root
from tests.cluster import REPO, ApiServer, Process, free_port, wait_for

PAUSE = "minik8s/pause:3.9"
BUSYBOX = "minik8s/busybox:1.35"
HTTPD = "minik8s/httpd:1"
REDIS = "minik8s/redis:1"  # the guestbook example's images (hack/guestbook-images.sh)
GUESTBOOK = "minik8s/guestbook:1"
BACKOFF_BASE = 1.0  # --crashloop-backoff-base-seconds of test kubelets: restarts after 0, 1, 2, 4 s ...

JSONDict = dict[str, Any]


def ensure_images() -> None:
    """The project's images, built by hack/images.sh (idempotent) when one is missing."""
    client = docker.from_env()
    try:
        missing = []
        for image in (PAUSE, BUSYBOX, HTTPD):
            try:
                client.images.get(image)
            except docker.errors.ImageNotFound:
                missing.append(image)
    finally:
        client.close()
    if missing:
        done = subprocess.run([str(REPO / "hack" / "images.sh")], capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"hack/images.sh failed:\n{done.stdout}\n{done.stderr}"


def ensure_guestbook_images() -> None:
    """minik8s/redis:1 and minik8s/guestbook:1 by hack/guestbook-images.sh (skips an image whose recipe is built)."""
    done = subprocess.run([str(REPO / "hack" / "guestbook-images.sh")], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"hack/guestbook-images.sh failed:\n{done.stdout}\n{done.stderr}"


# Test clusters on one host (several sessions may run tests at once) pick their pod CIDRs among
# 10.244.200.0-10.244.255.255. A /24 is taken when a route covers it (a node bridge holds its gateway
# address once its first pod got one) or when a live test process claimed it here: the claim covers the
# window between picking a CIDR and the bridge's first pod.
CLAIMS_DIR = Path("/run/minik8s-test-cidrs")


def _used_networks() -> set[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    routes = subprocess.run(["ip", "-4", "route", "show"], capture_output=True, text=True, check=True).stdout
    used = set()
    for line in routes.splitlines():
        with contextlib.suppress(ValueError):
            used.add(ipaddress.ip_network(line.split()[0], strict=False))
    return used


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def _claims_locked() -> Iterator[dict[str, int]]:
    """The live claims (file name → owner pid) under an exclusive lock; dead owners' claims are dropped."""
    CLAIMS_DIR.mkdir(parents=True, exist_ok=True)
    with open(CLAIMS_DIR / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        claims: dict[str, int] = {}
        for path in CLAIMS_DIR.iterdir():
            if path.name.startswith("."):
                continue
            try:
                pid = int(path.read_text().strip() or "0")
            except (OSError, ValueError):
                pid = 0
            if _pid_alive(pid):
                claims[path.name] = pid
            else:
                path.unlink(missing_ok=True)
        yield claims


def _claim_key(cidr: str) -> str:
    return cidr.replace("/", "_")


def _pick(candidates: list[str], count: int) -> list[str]:
    """`count` random candidates overlapping no route and no live claim, claimed for this process."""
    with _claims_locked() as claims:
        taken = _used_networks() | {ipaddress.ip_network(name.replace("_", "/")) for name in claims}
        free = [c for c in candidates if not any(ipaddress.ip_network(c).overlaps(u) for u in taken)]
        if len(free) < count:
            return []
        chosen = random.sample(free, count)
        for cidr in chosen:
            (CLAIMS_DIR / _claim_key(cidr)).write_text(str(os.getpid()))
        if not _release_at_exit:
            _release_at_exit.append(atexit.register(_release_all))
        return chosen


_release_at_exit: list[object] = []


def _release_all() -> None:
    """At exit: drop every claim of this process (a dead owner's claims would lapse anyway)."""
    with contextlib.suppress(OSError), _claims_locked() as claims:
        for name, pid in claims.items():
            if pid == os.getpid():
                (CLAIMS_DIR / name).unlink(missing_ok=True)


def release_cidr(cidr: str) -> None:
    """Give back a CIDR this process claimed (claims of dead processes lapse by themselves)."""
    with _claims_locked() as claims:
        if claims.get(_claim_key(cidr)) == os.getpid():
            (CLAIMS_DIR / _claim_key(cidr)).unlink(missing_ok=True)


def free_pod_cidrs(count: int) -> list[str]:
    """/24s of the cluster CIDR no bridge, route or other test on this host uses yet, claimed for this process."""
    chosen = _pick([f"10.244.{i}.0/24" for i in range(200, 255)], count)
    assert chosen, "no free /24 left in 10.244.200.0-10.244.254.0"
    return chosen


def free_cidr_block(prefix: int = 23) -> str:
    """An aligned block of /24s (a /23 holds two) in 10.244.200.0-10.244.255.255 that no bridge, route or other
    test on this host overlaps, claimed for this process: the cluster CIDR of a test controller-manager's node
    IPAM, so the subnets it hands out never collide with another cluster running on the same host."""
    size = 1 << (24 - prefix)
    chosen = _pick([f"10.244.{i}.0/{prefix}" for i in range(200, 256, size)], 1)
    assert chosen, f"no free /{prefix} left in 10.244.200.0-10.244.255.255"
    return chosen[0]


def free_service_cidr() -> str:
    """A /24 of 10.97.0.0/16 for one test cluster's Service ClusterIPs, claimed for this process: the kube-proxies
    of several clusters on this host program the same packet filter, so their Service addresses must differ."""
    chosen = _pick([f"10.97.{i}.0/24" for i in range(256)], 1)
    assert chosen, "no free /24 left in 10.97.0.0/16"
    return chosen[0]


SHIM_RUN_DIR = Path("/run/minik8s")


class DockershimProcess:
    """`python -m dockershim` for one test node: the node's CRI runtime over Docker, as cri-dockerd beside a
    kubelet. Its socket lives under /run/minik8s/<node>/ (a unix socket path must stay short); its CNI state
    goes to the node's root dir, where the kubelet's has always been."""

    def __init__(self, workdir: Path, node: str, root_dir: Path, extra_args: Sequence[str] = ()) -> None:
        self.node = node
        self.root_dir = root_dir
        self.socket_path = SHIM_RUN_DIR / node / "dockershim.sock"
        self.endpoint = f"unix://{self.socket_path}"
        argv = [sys.executable, "-m", "dockershim", "--node-name", node, "--container-runtime-endpoint",
                self.endpoint, "--root-dir", str(root_dir), *extra_args]
        self.process = Process(f"dockershim-{node}", argv, workdir / f"dockershim-{node}.log")

    def start(self, timeout: float = 30.0) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()  # a killed shim's
        self.process.start()

        def serving() -> bool:
            if not self.process.alive():
                raise RuntimeError(f"dockershim {self.node} exited:\n{self.process.log_tail()}")
            return self.socket_path.exists()

        wait_for(serving, timeout, 0.05, what=f"dockershim {self.node} serving on {self.endpoint}")

    def stop(self) -> None:
        self.process.stop()

    def kill(self) -> None:
        self.process.kill()

    def remove_socket_dir(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()
        with contextlib.suppress(OSError):
            self.socket_path.parent.rmdir()

    def log_tail(self, lines: int = 60) -> str:
        return self.process.log_tail(lines)


class ContainerdRuntimeProcess:
    """A node's own containerd (containerd_node: containerd's CRI plugin) as the kubelet's runtime, with the
    test images imported from Docker; the same face as DockershimProcess. Its directory (socket, root, state,
    CNI config and leases) is <workdir>/containerd-<node>."""

    IMAGES = (PAUSE, BUSYBOX, HTTPD)

    def __init__(self, workdir: Path, node: str) -> None:
        from containerd_node.launcher import ContainerdNode

        self.node = node
        self.containerd = ContainerdNode(node, workdir / f"containerd-{node}")
        self.endpoint = self.containerd.endpoint
        self.process = self.containerd  # alive() and proc, as a Process has them

    @property
    def lease_dir(self) -> Path:
        return self.containerd.layout.lease_dir

    def start(self, timeout: float = 30.0) -> None:
        self.containerd.start(images=self.IMAGES, timeout=timeout)

    def stop(self) -> None:
        self.containerd.stop()

    def kill(self) -> None:
        self.containerd.kill()

    def remove_socket_dir(self) -> None:
        """Nothing apart: the socket lives in the node's directory, which `cleanup` removes with the rest."""

    def cleanup(self) -> None:
        report = self.containerd.cleanup(host_rules=False)
        assert not report.errors, report.summary()

    def log_tail(self, lines: int = 60) -> str:
        return self.containerd.log_tail(lines)


RUNTIMES = ("docker", "containerd")


class KubeletProcess:
    """`python -m kubelet` for one test node, with its own state dir and port, and its dockershim beside it.

    The shim outlives the kubelet's stops and kills (a kubelet restart is no runtime restart, as upstream);
    `cleanup` ends both. With a `pod_cidr` the kubelet is given `--pod-cidr` (and writes it into its Node);
    without one the Node's `spec.podCIDR` comes from the controller-manager's node IPAM, and `start` waits
    for it."""

    def __init__(self, workdir: Path, apiserver: ApiServer, node: str, pod_cidr: str | None = None, *,
                 backoff_base: float = BACKOFF_BASE, extra_args: Sequence[str] = (),
                 tls: tuple[Path, Path, Path] | None = None, runtime: bool = True,
                 container_runtime: str = "docker") -> None:
        self.node = node
        # (ca, client cert, client key) when the kubelet serves HTTPS and wants a client certificate
        self.tls = tls
        self.pod_cidr = pod_cidr or ""
        self.port = free_port()
        self.root_dir = workdir / f"kubelet-{node}"
        self.cgroup_root = node_cgroup_root(node)
        # the node's CRI runtime: the Docker shim, or a containerd of its own (none for a node that brings its
        # own, like bench's hollow node)
        if container_runtime not in RUNTIMES:
            raise ValueError(f"container runtime {container_runtime!r}: choose among {', '.join(RUNTIMES)}")
        self.container_runtime = container_runtime
        self.runtime: DockershimProcess | ContainerdRuntimeProcess | None = None
        if runtime:
            self.runtime = (ContainerdRuntimeProcess(workdir, node) if container_runtime == "containerd"
                            else DockershimProcess(workdir, node, self.root_dir))
        argv = [sys.executable, "-m", "kubelet", "--node-name", node, "--master", apiserver.url,
                "--port", str(self.port), "--root-dir", str(self.root_dir),
                "--crashloop-backoff-base-seconds", str(backoff_base), "--node-lease-duration-seconds", "4",
                "--node-status-update-frequency", "1", "--housekeeping-interval", "1",
                # each test node its own kubepods, as a machine of its own (extra_args may say otherwise)
                "--cgroup-root", self.cgroup_root, *extra_args]
        if pod_cidr:
            argv += ["--pod-cidr", pod_cidr]
        if self.runtime is not None:
            argv += ["--container-runtime-endpoint", self.runtime.endpoint,
                     "--image-service-endpoint", self.runtime.endpoint]
        self.process = Process(f"kubelet-{node}", argv, workdir / f"kubelet-{node}.log")
        self.address = ""

    def start(self, api: httpx.Client, timeout: float = 60.0) -> None:
        if self.runtime is not None and not self.runtime.process.alive():
            self.runtime.start()
        self.process.start()

        def ready() -> bool:
            if not self.process.alive():
                raise RuntimeError(f"kubelet {self.node} exited:\n{self.process.log_tail()}")
            node = api.get(f"/api/v1/nodes/{self.node}")
            if node.status_code != 200:
                return False
            body = node.json()
            status = body.get("status") or {}
            ip = next((a["address"] for a in status.get("addresses") or [] if a["type"] == "InternalIP"), "")
            cidr = (body.get("spec") or {}).get("podCIDR") or ""
            node_ready = any(c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions") or [])
            if not ip or not cidr or not node_ready:
                return False
            self.pod_cidr = cidr
            self.address = f"{'https' if self.tls else 'http'}://{ip}:{self.port}"
            try:
                return bool(self._get("/debug/pods", 1).json().get("ready"))
            except httpx.HTTPError:
                return False

        try:
            wait_for(ready, timeout, 0.1, what=f"kubelet {self.node} ready")
        except TimeoutError as e:
            # which of the conditions is missing (podCIDR from node IPAM, address, Ready, the kubelet's own)
            node = api.get(f"/api/v1/nodes/{self.node}")
            shown = node.text if node.status_code != 200 else json.dumps(
                {"spec": node.json().get("spec"), "status": node.json().get("status")}, indent=1)
            raise TimeoutError(f"{e}\nnode: {shown}\nkubelet log:\n{self.process.log_tail()}") from None

    @property
    def pid(self) -> int | None:
        return self.process.proc.pid if self.process.alive() and self.process.proc else None

    def debug(self) -> JSONDict:
        return self._get("/debug/pods", 5).json()

    def pods(self) -> list[JSONDict]:
        """The kubelet's own view of its pods (its /pods endpoint, as upstream's kubelet serves it)."""
        return self._get("/pods", 5).json()["items"]

    def _get(self, path: str, timeout: float) -> httpx.Response:
        if self.tls is None:
            return httpx.get(f"{self.address}{path}", timeout=timeout)
        ca, cert, key = self.tls
        ctx = ssl.create_default_context(cafile=str(ca))
        ctx.load_cert_chain(cert, key)
        return httpx.get(f"{self.address}{path}", timeout=timeout, verify=ctx)

    def stop(self) -> None:
        self.process.stop()

    def kill(self) -> None:
        self.process.kill()

    def kill_runtime(self) -> None:
        if self.runtime is not None:
            self.runtime.kill()
            self.runtime.remove_socket_dir()

    @property
    def runtime_pid(self) -> int | None:
        process = self.runtime.process if self.runtime is not None else None
        return process.proc.pid if process is not None and process.alive() and process.proc else None

    def log_tail(self, lines: int = 60) -> str:
        return self.process.log_tail(lines)

    @property
    def bridge(self) -> str:
        return bridge_name(self.node)

    @property
    def lease_dir(self) -> Path:
        """The node's CNI host-local IPAM directory: one file per allocated address."""
        if isinstance(self.runtime, ContainerdRuntimeProcess):
            return self.runtime.lease_dir
        return self.root_dir / "cni" / "ipam" / network_name(self.node)

    def leases(self) -> set[str]:
        d = self.lease_dir
        return {p.name for p in d.iterdir() if p.name[0].isdigit()} if d.is_dir() else set()


def cleanup(nodes: Sequence[KubeletProcess]) -> None:
    """kill -9 the kubelets and their runtimes, then remove everything they made on this host
    (for a containerd node first `containerd_node.cleanup`; then `dockershim.cleanup` and `kubelet.cleanup`):
    containers after CNI DEL, the bridges, leases and state dirs, and the shared host rules if nothing uses them."""
    for k in nodes:
        k.kill()
        k.kill_runtime()
    for k in nodes:
        if isinstance(k.runtime, ContainerdRuntimeProcess):
            k.runtime.cleanup()  # its shims, containers, pod networks, mounts and directory

    async def run() -> None:
        for k in nodes:
            await cleanup_node(k.node, k.root_dir)
            # the kubelet's own (pod dirs, logs, QoS cgroups), once its containers are gone
            cleanup_kubelet_state(k.node, k.root_dir, k.cgroup_root)
        await cleanup_host_rules_if_unused()

    asyncio.run(run())
    for k in nodes:
        if k.pod_cidr:
            release_cidr(k.pod_cidr)
        assert not Path("/sys/class/net", bridge_name(k.node)).exists()
    lo = subprocess.run(["ip", "link", "show", "lo"], capture_output=True, text=True, check=True).stdout
    assert "UP" in lo.split(">")[0], "the host's loopback interface must stay up"
