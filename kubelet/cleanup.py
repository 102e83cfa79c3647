"""Remove everything a node's kubelet made on this host, as a kubelet would for its pods:
CNI DEL for each sandbox (while its netns still exists), then the containers, the node's bridge,
address leases and state directory; finally the shared host rules if nothing uses them anymore.

For tests (which must leave nothing behind, even when they fail) and for tearing down a local
cluster: `python -m kubelet.cleanup --node NAME [--node NAME2] [--root-dir DIR]`, or `--all`
for every node that has containers here.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import shutil
import subprocess
from pathlib import Path

from cni import host
from cni.config import bridge_name, loopback_config_list, network_name
from cni.invoke import CniError, CniRuntime, RuntimeConf
from kubelet.docker_client import DockerClient, DockerError
from kubelet.runtime import LABEL_MANAGED, LABEL_NODE, ContainerInfo

log = logging.getLogger(__name__)

DEFAULT_ROOT = Path("/var/lib/minik8s/kubelet")


async def cleanup_node(node_name: str, root_dir: Path | None = None, *, docker: DockerClient | None = None,
                       remove_state: bool = True) -> int:
    """Tear down one node's pods, network and state; returns how many containers were removed."""
    root = root_dir or DEFAULT_ROOT / node_name
    own = docker is None
    docker = docker or DockerClient()
    removed = 0
    try:
        listed = await docker.list_containers({"label": [f"{LABEL_MANAGED}=true", f"{LABEL_NODE}={node_name}"]})
        infos = []
        for item in listed:
            with contextlib.suppress(DockerError):
                infos.append(ContainerInfo.from_inspect(await docker.inspect_container(item["Id"])))
        cni = CniRuntime(root / "cni" / "results")
        for sb in [i for i in infos if i.is_sandbox and not i.host_network]:
            netns = f"/proc/{sb.pid}/ns/net" if sb.running and sb.pid else ""
            for conflist, ifname in ((None, "eth0"), (loopback_config_list(), "lo")):
                try:  # only attachments with a cached ADD result are deleted
                    await cni.delete(conflist, RuntimeConf(sb.id, netns, ifname))
                except CniError as e:
                    log.warning("CNI DEL of %s: %s", sb.id[:12], e)
        for info in sorted(infos, key=lambda i: i.is_sandbox):  # app containers first
            with contextlib.suppress(DockerError):
                await docker.remove_container(info.id, force=True)
                removed += 1
    finally:
        if own:
            await docker.close()
    await asyncio.to_thread(_remove_host_state, node_name, root, remove_state)
    return removed


def _remove_host_state(node_name: str, root: Path, remove_state: bool) -> None:
    host.delete_bridge(bridge_name(node_name))
    host.unregister_kubelet(node_name)
    if not remove_state:
        shutil.rmtree(root / "cni" / "ipam" / network_name(node_name), ignore_errors=True)
        return
    pods = root / "pods"
    if pods.is_dir():
        mounts = Path("/proc/self/mounts").read_text().splitlines()
        for line in mounts:
            parts = line.split()
            if len(parts) > 1 and parts[1].startswith(str(pods) + "/"):
                subprocess.run(["umount", parts[1]], capture_output=True, timeout=30)
    for sub in ("pods", "cni"):  # what a kubelet writes there; the directory itself goes only if then empty
        shutil.rmtree(root / sub, ignore_errors=True)
    with contextlib.suppress(OSError):
        root.rmdir()


async def cleanup_host_rules_if_unused(docker: DockerClient | None = None) -> bool:
    """Remove the shared forwarding/masquerade rules when no kubelet runs and no pod container is left."""
    own = docker is None
    docker = docker or DockerClient()
    try:
        fd = await asyncio.to_thread(host.acquire_host_lock, False, 30.0)
        try:
            if host.other_kubelets_alive(""):
                return False
            if await docker.list_containers({"label": [f"{LABEL_MANAGED}=true", LABEL_NODE]}):
                return False
            await asyncio.to_thread(host.remove_cluster_rules)
            await asyncio.to_thread(host.remove_portmap_chains_if_unused)
            return True
        finally:
            host.release_host_lock(fd)
    finally:
        if own:
            await docker.close()


async def nodes_on_host(docker: DockerClient) -> list[str]:
    listed = await docker.list_containers({"label": [f"{LABEL_MANAGED}=true", LABEL_NODE]})
    return sorted({c.get("Labels", {}).get(LABEL_NODE, "") for c in listed} - {""})


async def main_async(args: argparse.Namespace) -> None:
    docker = DockerClient()
    try:
        nodes = list(args.node)
        if args.all:
            nodes = sorted(set(nodes) | set(await nodes_on_host(docker)))
        for node in nodes:
            root = Path(args.root_dir) if args.root_dir and len(nodes) == 1 else None
            count = await cleanup_node(node, root, docker=docker, remove_state=not args.keep_state)
            print(f"node {node}: removed {count} container(s), its bridge and network state")
        if await cleanup_host_rules_if_unused(docker):
            print("host: minik8s iptables rules removed")
    finally:
        await docker.close()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="kubelet.cleanup", description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--node", action="append", default=[], help="a node name (repeatable)")
    p.add_argument("--all", action="store_true", help="every node with pod containers on this host")
    p.add_argument("--root-dir", default=None, help="the kubelet's --root-dir (with one --node)")
    p.add_argument("--keep-state", action="store_true", help="keep the state directory (only leases are dropped)")
    args = p.parse_args(argv)
    if not args.node and not args.all:
        p.error("name a --node or give --all")
    logging.basicConfig(level=logging.WARNING)
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
