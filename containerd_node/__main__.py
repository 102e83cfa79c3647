"""`python -m containerd_node`: one node's containerd for local-up, hack/down.sh and hand use.

    run            --node N --dir D   write the node's directory, then become its containerd (foreground,
                                      for hack/supervise.sh)
    wait           --dir D            wait until the node's socket answers CRI (exit 1 on timeout)
    import-images  --dir D IMAGE...   docker save | ctr -n k8s.io images import (no registry)
    cleanup        D...               remove all a node's containerd made (containerd_node.cleanup)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from containerd_node import cleanup
from containerd_node.config import ConfigError, NodeLayout
from containerd_node.launcher import ContainerdError, exec_containerd, import_images, read_marker, wait_for_cri


def _layout(d: Path, node: str | None = None, cluster_cidr: str | None = None) -> NodeLayout:
    d = d.resolve()
    if node is None:
        marker = read_marker(d)
        if marker is None:
            raise ContainerdError(f"{d} is not a containerd node directory (start it with `run` first)")
        node = str(marker["node"])
    return NodeLayout(node, d, **({"cluster_cidr": cluster_cidr} if cluster_cidr else {}))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="containerd_node", description=__doc__.split("\n\n")[0] if __doc__ else None)
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="write the node's directory and exec containerd")
    run.add_argument("--node", required=True)
    run.add_argument("--dir", required=True, type=Path)
    run.add_argument("--cluster-cidr", default=None)
    wait = sub.add_parser("wait", help="wait until CRI answers")
    wait.add_argument("--dir", required=True, type=Path)
    wait.add_argument("--timeout", type=float, default=30.0)
    imp = sub.add_parser("import-images", help="copy images from Docker")
    imp.add_argument("--dir", required=True, type=Path)
    imp.add_argument("images", nargs="+")
    clean = sub.add_parser("cleanup", help="remove everything of these nodes")
    clean.add_argument("dirs", nargs="+", type=Path)
    clean.add_argument("--keep-host-rules", action="store_true")
    args = p.parse_args(argv)
    try:
        if args.command == "run":
            exec_containerd(_layout(args.dir, args.node, args.cluster_cidr))
        elif args.command == "wait":
            # `run` may not have written the directory yet: its marker is waited for as well
            deadline = time.monotonic() + args.timeout
            while read_marker(args.dir.resolve()) is None and time.monotonic() < deadline:
                time.sleep(0.05)
            version = wait_for_cri(_layout(args.dir), max(deadline - time.monotonic(), 0.1))
            print(f"{version.runtime_name} {version.runtime_version} (CRI {version.runtime_api_version})")
        elif args.command == "import-images":
            import_images(_layout(args.dir), args.images)
        else:
            cleanup.main([*map(str, args.dirs), *(["--keep-host-rules"] if args.keep_host_rules else [])])
    except (ContainerdError, ConfigError) as e:
        print(f"containerd_node: {e}", file=sys.stderr)
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
