"""Remove what a node's kubelet itself wrote on this host: its pods' directories (volumes, with
their tmpfs mounts, /etc/hosts files, termination-message files), its container log
directories and its QoS cgroups (kubepods under its --cgroup-root; /minik8s-NODE by default, as
local-up and the tests give each node its own). Containers, sandboxes and the pod network belong
to the container runtime, whose own cleanup removes them (`python -m dockershim.cleanup --node
NAME` for the Docker shim).

`python -m kubelet.cleanup --node NAME [--root-dir DIR] [--cgroup-root PATH]` — for tests (which must leave nothing
behind, even when they fail) and for tearing down a local cluster.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import subprocess
from pathlib import Path

from kubelet.cm.cgroup_manager import CgroupManager
from kubelet.cm.container_manager import KUBEPODS

DEFAULT_ROOT = Path("/var/lib/minik8s/kubelet")


def node_cgroup_root(node_name: str) -> str:
    """The --cgroup-root local-up and the tests give a node's kubelet: nodes sharing this host are separate
    machines, each with its own kubepods."""
    return f"/minik8s-{node_name}"


def remove_qos_cgroups(cgroup_root: str) -> None:
    """kubepods under `cgroup_root` and what is left in it (its pods' containers gone), then the root itself
    unless it is the host's. OSError (EBUSY) while a process still runs in one."""
    manager = CgroupManager()
    root = "/" + cgroup_root.strip("/")
    manager.destroy(root.rstrip("/") + "/" + KUBEPODS)
    if root != "/":
        manager.destroy(root)


def cleanup_kubelet_state(node_name: str, root_dir: Path | None = None, cgroup_root: str | None = None) -> None:
    """`cgroup_root`: the kubelet's --cgroup-root (node_cgroup_root by default)."""
    with contextlib.suppress(OSError):  # a host without (writable) cgroups; or a process still in one
        remove_qos_cgroups(cgroup_root or node_cgroup_root(node_name))
    root = root_dir or DEFAULT_ROOT / node_name
    pods = root / "pods"
    if pods.is_dir():
        for line in Path("/proc/self/mounts").read_text().splitlines():
            parts = line.split()
            if len(parts) > 1 and parts[1].startswith(str(pods) + "/"):
                subprocess.run(["umount", parts[1]], capture_output=True, timeout=30)
    for sub in ("pods", "logs"):  # what a kubelet writes there; the directory itself goes only if then empty
        shutil.rmtree(root / sub, ignore_errors=True)
    with contextlib.suppress(OSError):
        root.rmdir()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="kubelet.cleanup", description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--node", action="append", default=[], required=True, help="a node name (repeatable)")
    p.add_argument("--root-dir", default=None, help="the kubelet's --root-dir (with one --node)")
    p.add_argument("--cgroup-root", default=None,
                   help="the kubelet's --cgroup-root (with one --node; default /minik8s-NODE)")
    args = p.parse_args(argv)
    for flag in ("root_dir", "cgroup_root"):
        if getattr(args, flag) and len(args.node) > 1:
            p.error(f"--{flag.replace('_', '-')} goes with one --node")
    for node in args.node:
        cleanup_kubelet_state(node, Path(args.root_dir) if args.root_dir else None, args.cgroup_root)
        print(f"node {node}: kubelet state removed")


if __name__ == "__main__":
    main()
