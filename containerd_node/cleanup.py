"""Removing everything one node's containerd made on this host, even after a kill -9 of containerd (and of
its shims): the Docker shim's `dockershim.cleanup` for the containerd side.

Only directories labelled by the marker file (`minik8s-containerd-node.json`) are touched, and within them
only what the node's own layout names, so other containerds (Docker's, other nodes') stay untouched:

1. containerd itself (the marker's pid, if its command line still names the node's config), SIGKILL: it must
   not start anything new while the rest goes;
2. its shims (`containerd-shim-runc-v2 ... -address <the node's socket>`), SIGKILL;
3. every container runc still knows under the node's runc root: `runc delete --force` (kills what runs,
   removes its cgroups); leftover empty cgroups of those IDs are removed;
4. CNI DEL for each pod attachment in libcni's cache (/var/lib/cni/results, network `minik8s-<node>`), while
   the pod's network namespace is still mounted: portmap's hostPort rules, host-local's lease, the veth;
   the loopback entries of the node's sandboxes are dropped;
5. every mount under the directory (rootfs overlays, /dev/shm tmpfs, network namespaces), deepest first;
   the shims' sockets under /run/containerd/s;
6. the node's bridge, its entry among the users of the host rules, the directory; finally the shared host
   rules when no kubelet, containerd node or Docker pod container is left on the host.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import concurrent.futures
import contextlib
import json
import logging
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cni import host
from cni.invoke import CniError, CniRuntime, RuntimeConf
from containerd_node.config import (
    CNI_BIN_DIR,
    CNI_RESULTS_DIR,
    LOOPBACK_NETWORK,
    MARKER,
    NodeLayout,
    read_marker,
    registry_name,
)

log = logging.getLogger(__name__)

SHIM = b"containerd-shim"
CGROUP_ROOT = Path("/sys/fs/cgroup")
CONTAINERD_SOCKET_DIR = Path("/run/containerd/s")  # the runc v2 shims' sockets (containerd's socketDir + "/s")


@dataclass
class CleanupReport:
    node: str
    killed: list[int] = field(default_factory=list)
    containers: list[str] = field(default_factory=list)
    cni_deleted: list[str] = field(default_factory=list)
    unmounted: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return (f"node {self.node}: killed {len(self.killed)} process(es), removed {len(self.containers)} "
                f"container(s), {len(self.cni_deleted)} pod network(s), {len(self.unmounted)} mount(s)"
                + (f"; errors: {'; '.join(self.errors)}" if self.errors else ""))


def _cmdline(pid: int) -> list[bytes]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return []


def _pids() -> Iterator[int]:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            yield int(entry.name)


def _kill_and_wait(pids: list[int], timeout: float = 10.0) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    for pid in pids:
        while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
            # a zombie child of ours (tests start containerd as a child) is gone once reaped
            with contextlib.suppress(ChildProcessError, OSError):
                if os.waitpid(pid, os.WNOHANG)[0] == pid:
                    break
            state = ""
            with contextlib.suppress(OSError):
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            if state == "Z":
                break
            time.sleep(0.02)


def containerd_pids(layout: NodeLayout) -> list[int]:
    """The node's containerd: a process whose command line names the node's config file."""
    config = str(layout.config_path).encode()
    return [pid for pid in _pids() if (argv := _cmdline(pid)) and argv[0].endswith(b"containerd") and config in argv]


def shim_pids(layout: NodeLayout) -> list[int]:
    """The node's shims: `containerd-shim-runc-v2 -namespace k8s.io -id ID -address <the node's socket>`."""
    socket = str(layout.socket).encode()
    out = []
    for pid in _pids():
        argv = _cmdline(pid)
        if argv and SHIM in argv[0] and b"-address" in argv:
            i = argv.index(b"-address")
            if i + 1 < len(argv) and argv[i + 1] == socket:
                out.append(pid)
    return out


def _runc_containers(layout: NodeLayout) -> list[tuple[Path, str]]:
    """(runc root, container ID) for every container runc keeps state of under the node's runc root."""
    out = []
    if layout.runc_root.is_dir():
        for ns_root in layout.runc_root.iterdir():
            if ns_root.is_dir():
                out += [(ns_root, c.name) for c in ns_root.iterdir() if c.is_dir()]
    return out


def _known_ids(layout: NodeLayout) -> set[str]:
    """Container and sandbox IDs the node's containerd made (its task bundles, CRI's dirs, runc's state)."""
    ids = {cid for _, cid in _runc_containers(layout)}
    for d in (layout.task_dir, layout.state / "io.containerd.grpc.v1.cri" / "sandboxes",
              layout.state / "io.containerd.grpc.v1.cri" / "containers",
              layout.root / "io.containerd.grpc.v1.cri" / "sandboxes",
              layout.root / "io.containerd.grpc.v1.cri" / "containers"):
        if d.is_dir():
            ids |= {p.name for p in d.iterdir()}
    return ids


def remove_containers(layout: NodeLayout, report: CleanupReport) -> None:
    for root, cid in _runc_containers(layout):
        done = subprocess.run(["runc", "--root", str(root), "delete", "--force", cid], capture_output=True,
                              text=True, timeout=60)
        if done.returncode == 0 or "does not exist" in done.stderr:
            report.containers.append(cid)
        else:
            report.errors.append(f"runc delete {cid[:12]}: {done.stderr.strip()}")


def remove_cgroups(ids: set[str]) -> None:
    """Empty cgroups named by our IDs (containerd puts them at /k8s.io/<id> or under the kubelet's parent)."""
    if not ids or not CGROUP_ROOT.is_dir():
        return
    for hierarchy in CGROUP_ROOT.iterdir():
        if not hierarchy.is_dir() or hierarchy.is_symlink():
            continue
        for parent in (hierarchy / "k8s.io", hierarchy):
            for cid in ids:
                with contextlib.suppress(OSError):
                    (parent / cid).rmdir()


async def delete_pod_networks(layout: NodeLayout, sandbox_ids: set[str], report: CleanupReport) -> None:
    """CNI DEL from libcni's cache for each attachment to the node's network (the netns may still exist)."""
    cni = CniRuntime(CNI_RESULTS_DIR, (CNI_BIN_DIR,))
    for cid in cni.cached_container_ids(layout.network):
        cached = cni.read_cache(layout.network, cid, "eth0")
        if cached is None:
            continue
        try:
            config = cached["config"]
            conflist = json.loads(base64.b64decode(config)) if isinstance(config, str) else config
        except (ValueError, TypeError) as e:
            report.errors.append(f"cached CNI config of {cid[:12]}: {e}")
            continue
        netns = next((i.get("sandbox", "") for i in (cached.get("result") or {}).get("interfaces") or []
                      if i.get("sandbox")), "")
        if netns and not Path(netns).exists():
            netns = ""
        args = [(str(k), str(v)) for k, v in cached.get("cniArgs") or [] if k != "IgnoreUnknown"]
        capability_args = {k: v for k, v in (cached.get("capabilityArgs") or {}).items() if v is not None}
        try:
            await cni.delete(conflist, RuntimeConf(cid, netns, "eth0", args, capability_args))
            report.cni_deleted.append(cid)
        except CniError as e:
            report.errors.append(f"CNI DEL of {cid[:12]}: {e}")
            with contextlib.suppress(FileNotFoundError):
                cni.cache_path(layout.network, cid, "eth0").unlink()
    for cid in sandbox_ids | set(report.cni_deleted):  # the loopback's DEL only touches the dying netns
        with contextlib.suppress(FileNotFoundError):
            cni.cache_path(LOOPBACK_NETWORK, cid, "lo").unlink()


def _mount_points_under(base: Path) -> list[str]:
    prefix = str(base).rstrip("/") + "/"
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        parts = line.split()
        if len(parts) > 4:
            point = parts[4].encode().decode("unicode_escape")  # \040 for spaces
            if point.startswith(prefix):
                points.append(point)
    return points


def unmount_all(base: Path, report: CleanupReport) -> None:
    for _ in range(5):  # stacked mounts need several rounds
        points = _mount_points_under(base)
        if not points:
            return
        for point in sorted(set(points), key=len, reverse=True):
            done = subprocess.run(["umount", point], capture_output=True, text=True, timeout=30)
            if done.returncode != 0:
                done = subprocess.run(["umount", "-l", point], capture_output=True, text=True, timeout=30)
            if done.returncode == 0:
                report.unmounted.append(point)
    left = _mount_points_under(base)
    if left:
        report.errors.append(f"still mounted: {', '.join(left)}")


def shim_sockets(layout: NodeLayout) -> list[Path]:
    """The shims' sockets named by their bundles' `address` files (unix:///run/containerd/s/<hash>)."""
    out = []
    if layout.task_dir.is_dir():
        for bundle in layout.task_dir.iterdir():
            with contextlib.suppress(OSError):
                address = (bundle / "address").read_text().strip().removeprefix("unix://")
                if address.startswith(str(CONTAINERD_SOCKET_DIR) + "/"):
                    out.append(Path(address))
    return out


def docker_pod_containers_left() -> bool:
    """Do pod containers of any Docker-side node remain (labelled io.minik8s.managed)? False without Docker."""
    try:
        done = subprocess.run(["docker", "ps", "-aq", "--filter", "label=io.minik8s.managed=true"],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0 and bool(done.stdout.strip())


def remove_host_rules_if_unused() -> bool:
    """The shared forwarding/masquerade rules go when no kubelet, containerd node or Docker pod is left."""
    with host.host_lock(shared=False, timeout=30.0):
        if host.other_kubelets_alive("") or docker_pod_containers_left():
            return False
        host.remove_cluster_rules()
        host.remove_portmap_chains_if_unused()
        return True


def _run_to_completion(coro: Coroutine[Any, Any, None]) -> None:
    """Run `coro` to its end, also when called from inside an event loop (an async test's teardown)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(coro)
        return
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, coro).result()


def cleanup_node(base_dir: Path, *, host_rules: bool = True) -> CleanupReport:
    """Remove one containerd node (see the module docstring); refuses a directory without the marker."""
    base_dir = Path(base_dir).resolve()
    marker = read_marker(base_dir)
    if marker is None:
        if not base_dir.exists():
            return CleanupReport(node="")
        raise ValueError(f"{base_dir} is not a containerd node directory (no {MARKER}): refusing to clean it up")
    layout = NodeLayout(str(marker["node"]), base_dir)
    report = CleanupReport(node=layout.node_name)
    ids = _known_ids(layout)
    daemons = containerd_pids(layout)
    _kill_and_wait(daemons)
    shims = shim_pids(layout)
    _kill_and_wait(shims)
    report.killed = daemons + shims
    remove_containers(layout, report)
    _run_to_completion(delete_pod_networks(layout, ids, report))
    sockets = shim_sockets(layout)
    unmount_all(base_dir, report)
    remove_cgroups(ids)
    for sock in sockets:
        with contextlib.suppress(FileNotFoundError):
            sock.unlink()
    host.delete_bridge(layout.bridge)
    host.unregister_kubelet(registry_name(layout.node_name))
    if not _mount_points_under(base_dir):  # never remove what a mount still shows
        shutil.rmtree(base_dir, ignore_errors=True)
    if host_rules:
        remove_host_rules_if_unused()
    return report


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="containerd_node.cleanup",
                                description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("dirs", nargs="+", type=Path, help="containerd node directories (each with its marker)")
    p.add_argument("--keep-host-rules", action="store_true", help="leave the shared host rules alone")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    failed = False
    for d in args.dirs:
        report = cleanup_node(d, host_rules=not args.keep_host_rules)
        print(report.summary())
        failed |= bool(report.errors)
    raise SystemExit(1 if failed else 0)


if __name__ == "__main__":
    main()
