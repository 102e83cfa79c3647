"""Remove what a node's kubelet itself wrote on this host: its pods' directories (volumes, with
their tmpfs mounts, /etc/hosts files, termination-message files) and its container log
directories. Containers, sandboxes and the pod network belong to the container runtime, whose own
cleanup removes them (`python -m dockershim.cleanup --node NAME` for the Docker shim).

`python -m kubelet.cleanup --node NAME [--root-dir DIR]` — for tests (which must leave nothing
behind, even when they fail) and for tearing down a local cluster.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import subprocess
from pathlib import Path

DEFAULT_ROOT = Path("/var/lib/minik8s/kubelet")


def cleanup_kubelet_state(node_name: str, root_dir: Path | None = None) -> None:
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
    args = p.parse_args(argv)
    if args.root_dir and len(args.node) > 1:
        p.error("--root-dir goes with one --node")
    for node in args.node:
        cleanup_kubelet_state(node, Path(args.root_dir) if args.root_dir else None)
        print(f"node {node}: kubelet state removed")


if __name__ == "__main__":
    main()
