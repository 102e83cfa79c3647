"""The kubelet's side of pod networking: CNI ADD on a new sandbox, DEL when it goes, the pod's
IP from the cached result, and garbage collection of attachments and leases nobody owns.

The network is "ready" once the node has a podCIDR (from Node.spec, or --pod-cidr). A sandbox
counts as attached when its ADD result is cached: a sandbox without one (a kubelet killed during
set-up) is torn down and replaced, never trusted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from pathlib import Path

from cni import host
from cni.config import DEFAULT_CLUSTER_CIDR, NodeNetwork, loopback_config_list, port_mappings
from cni.invoke import CniError, CniResult, CniRuntime, RuntimeConf
from kubelet.runtime import ContainerInfo
from machinery.api.core_v1 import Pod

log = logging.getLogger(__name__)

RULES_RESYNC_SECONDS = 30.0


class PodNetwork:
    def __init__(self, node_name: str, root_dir: Path, cni_bin_dirs: list[str],
                 cluster_cidr: str = DEFAULT_CLUSTER_CIDR) -> None:
        self.node_name = node_name
        self.root_dir = root_dir
        self.cluster_cidr = cluster_cidr
        self.cni = CniRuntime(root_dir / "cni" / "results", cni_bin_dirs)
        self.net: NodeNetwork | None = None
        self._rules_checked = 0.0

    @property
    def ready(self) -> bool:
        return self.net is not None

    @property
    def pod_cidr(self) -> str | None:
        return self.net.pod_cidr if self.net else None

    def configure(self, pod_cidr: str) -> bool:
        """Use `pod_cidr` for new pods; True if it changed."""
        if self.net is not None and self.net.pod_cidr == pod_cidr:
            return False
        self.net = NodeNetwork(self.node_name, pod_cidr, self.root_dir, self.cluster_cidr)
        log.info("pod network: node %s uses %s on bridge %s", self.node_name, pod_cidr, self.net.bridge)
        return True

    def network_name(self) -> str:
        return self.net.name if self.net else f"minik8s-{self.node_name}"

    # -- attachments ---------------------------------------------------------------------------

    def attached(self, sandbox_id: str) -> bool:
        return self.cni.read_cache(self.network_name(), sandbox_id) is not None

    def pod_ip(self, sandbox_id: str) -> str | None:
        cached = self.cni.read_cache(self.network_name(), sandbox_id)
        if not cached:
            return None
        return CniResult(cached.get("result") or {}).ip

    async def ensure_rules(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._rules_checked < RULES_RESYNC_SECONDS:
            return
        await asyncio.to_thread(host.ensure_cluster_rules, self.cluster_cidr)
        self._rules_checked = now

    async def setup(self, sandbox: ContainerInfo, pod: Pod) -> str:
        """CNI ADD for a running sandbox (pod network on eth0, loopback on lo); the pod's IP."""
        if self.net is None:
            raise CniError("network plugin is not ready: the node has no podCIDR yet", 11)
        netns = f"/proc/{sandbox.pid}/ns/net"
        meta = pod.metadata
        args = [("K8S_POD_NAMESPACE", meta.namespace or ""), ("K8S_POD_NAME", meta.name or ""),
                ("K8S_POD_INFRA_CONTAINER_ID", sandbox.id), ("K8S_POD_UID", meta.uid or "")]
        caps = {}
        mappings = port_mappings(list(pod.spec.containers) if pod.spec else [])
        if mappings:
            caps["portMappings"] = mappings
        fd = await asyncio.to_thread(host.acquire_host_lock, True)
        try:
            await self.ensure_rules(force=self._rules_checked == 0)
            await self.cni.add(loopback_config_list(), RuntimeConf(sandbox.id, netns, "lo", args))
            result = await self.cni.add(self.net.config_list(), RuntimeConf(sandbox.id, netns, "eth0", args, caps))
        finally:
            host.release_host_lock(fd)
        ip = result.ip
        if not ip:
            raise CniError(f"the CNI result names no address: {result.raw}", 6)
        return ip

    async def teardown(self, sandbox_id: str, pid: int = 0) -> None:
        """CNI DEL for a sandbox, with its netns if its process still runs (else plugins just free the IP)."""
        netns = ""
        if pid and os.path.exists(f"/proc/{pid}/ns/net"):
            netns = f"/proc/{pid}/ns/net"
        conflist = self.net.config_list() if self.net else None
        if conflist is None:
            cached = self.cni.read_cache(None, sandbox_id)
            conflist = cached["config"] if cached else None
        if conflist is not None and self.cni.read_cache(conflist["name"], sandbox_id) is not None:
            await self.cni.delete(conflist, RuntimeConf(sandbox_id, netns, "eth0"))
        if self.cni.read_cache(loopback_config_list()["name"], sandbox_id, "lo") is not None:
            try:
                await self.cni.delete(loopback_config_list(), RuntimeConf(sandbox_id, netns, "lo"))
            except CniError as e:
                log.warning("loopback DEL for %s: %s", sandbox_id[:12], e)

    async def gc(self, live_sandbox_ids: set[str]) -> None:
        """DEL attachments of sandboxes that no longer exist; drop leases nobody holds."""
        for name, ifname in ((self.network_name(), "eth0"), (loopback_config_list()["name"], "lo")):
            for cid in self.cni.cached_container_ids(name):
                if cid in live_sandbox_ids:
                    continue
                log.info("releasing the network of vanished sandbox %s", cid[:12])
                with contextlib.suppress(CniError):
                    await self.cni.delete(None if ifname == "eth0" else loopback_config_list(),
                                          RuntimeConf(cid, "", ifname))
                with contextlib.suppress(FileNotFoundError):
                    self.cni.cache_path(name, cid, ifname).unlink()
        if self.net is not None:
            freed = host.release_leases(self.net.lease_dir, live_sandbox_ids)
            if freed:
                log.info("released leaked addresses %s", ", ".join(sorted(freed)))
