"""Remove everything a node's runtime made on this host, as its shim would for its pods: CNI DEL for
each sandbox (while its netns still exists), then the containers, the node's bridge, address leases
and the runtime's state (<root>/cni, <root>/dockershim); finally the shared host rules if nothing uses
them any more. The Docker-level part of what a node leaves behind (upstream has no such tool: a node's
VM goes away instead); the kubelet's own part (pods' directories, logs) is `kubelet.cleanup`'s, to run
after this one (the containers that used those directories are gone by then).

For tests (which must leave nothing behind, even when they fail) and for tearing a local cluster
down: `python -m dockershim.cleanup --node NAME [--node NAME2] [--root-dir DIR]`, or `--all` for
every node with containers here.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any

import aiodocker

from cni import host
from cni.config import bridge_name, loopback_config_list, network_name
from cni.invoke import CniError, CniRuntime, RuntimeConf
from dockershim.translate import LABEL_HOST_NETWORK, LABEL_MANAGED, LABEL_NODE, LABEL_TYPE, TYPE_SANDBOX, node_filters

log = logging.getLogger(__name__)

DEFAULT_ROOT = Path("/var/lib/minik8s/kubelet")


async def _list(docker: aiodocker.Docker, filters: dict[str, list[str]], all_: bool = True) -> list[Any]:
    return await docker.containers.list(all="1" if all_ else "0", filters=json.dumps(filters))


async def cleanup_node(node_name: str, root_dir: Path | None = None, *, docker: aiodocker.Docker | None = None,
                       remove_state: bool = True) -> int:
    """Tear down one node's pods, network and state; returns how many containers were removed."""
    root = root_dir or DEFAULT_ROOT / node_name
    own = docker is None
    docker = docker or aiodocker.Docker()
    removed = 0
    try:
        infos = []
        for item in await _list(docker, node_filters(node_name)):
            with contextlib.suppress(aiodocker.DockerError):
                infos.append(await docker.containers.container(item.id).show())
        cni = CniRuntime(root / "cni" / "results")

        def labels(data: dict[str, Any]) -> dict[str, str]:
            return (data.get("Config") or {}).get("Labels") or {}

        def is_sandbox(data: dict[str, Any]) -> bool:
            return labels(data).get(LABEL_TYPE) == TYPE_SANDBOX

        for sb in infos:
            if not is_sandbox(sb) or labels(sb).get(LABEL_HOST_NETWORK) == "true":
                continue
            state = sb.get("State") or {}
            pid = int(state.get("Pid") or 0)
            netns = f"/proc/{pid}/ns/net" if state.get("Running") and pid and os.path.exists(
                f"/proc/{pid}/ns/net") else ""
            for conflist, ifname in ((None, "eth0"), (loopback_config_list(), "lo")):
                try:  # only attachments with a cached ADD result are deleted
                    await cni.delete(conflist, RuntimeConf(sb["Id"], netns, ifname))
                except CniError as e:
                    log.warning("CNI DEL of %s: %s", sb["Id"][:12], e)
        for data in sorted(infos, key=is_sandbox):  # app containers first
            with contextlib.suppress(aiodocker.DockerError):
                await docker.containers.container(data["Id"]).delete(force=True, v=True)
                removed += 1
    finally:
        if own:
            await docker.close()
    await asyncio.to_thread(_remove_host_state, node_name, root, remove_state)
    return removed


def _remove_host_state(node_name: str, root: Path, remove_state: bool) -> None:
    host.delete_bridge(bridge_name(node_name))
    host.unregister_kubelet(node_name)
    host.unregister_kubelet(f"{node_name}.dockershim")
    if not remove_state:
        shutil.rmtree(root / "cni" / "ipam" / network_name(node_name), ignore_errors=True)
        return
    # the runtime's part of the node's state; the kubelet's own (pods, logs) is kubelet.cleanup's
    for sub in ("cni", "dockershim"):
        shutil.rmtree(root / sub, ignore_errors=True)
    with contextlib.suppress(OSError):  # the directory goes only if nothing else is left in it
        root.rmdir()


async def cleanup_host_rules_if_unused(docker: aiodocker.Docker | None = None, *, running_only: bool = False) -> bool:
    """Remove the shared forwarding/masquerade rules when no node agent runs and no pod container is left
    (with `running_only`, stopped containers do not count: a shim going away leaves them to the next)."""
    own = docker is None
    docker = docker or aiodocker.Docker()
    try:
        fd = await asyncio.to_thread(host.acquire_host_lock, False, 30.0)
        try:
            if host.other_kubelets_alive(""):
                return False
            if await _list(docker, {"label": [f"{LABEL_MANAGED}=true", LABEL_NODE]}, not running_only):
                return False
            await asyncio.to_thread(host.remove_cluster_rules)
            await asyncio.to_thread(host.remove_portmap_chains_if_unused)
            return True
        finally:
            host.release_host_lock(fd)
    finally:
        if own:
            await docker.close()


async def nodes_on_host(docker: aiodocker.Docker) -> list[str]:
    listed = await _list(docker, {"label": [f"{LABEL_MANAGED}=true", LABEL_NODE]})
    return sorted({(c["Labels"] or {}).get(LABEL_NODE, "") for c in listed} - {""})


async def main_async(args: argparse.Namespace) -> None:
    docker = aiodocker.Docker()
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
    p = argparse.ArgumentParser(prog="dockershim.cleanup", description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--node", action="append", default=[], help="a node name (repeatable)")
    p.add_argument("--all", action="store_true", help="every node with pod containers on this host")
    p.add_argument("--root-dir", default=None, help="the node's --root-dir (with one --node)")
    p.add_argument("--keep-state", action="store_true", help="keep the state directory (only leases are dropped)")
    args = p.parse_args(argv)
    if not args.node and not args.all:
        p.error("name a --node or give --all")
    if args.root_dir and len(args.node) != 1:
        p.error("--root-dir goes with exactly one --node")
    logging.basicConfig(level=logging.WARNING)
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
