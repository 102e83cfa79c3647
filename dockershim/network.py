"""The pod network of the shim's sandboxes through the project's CNI runtime (`cni/`), as
cri-dockerd's network plugin (network/cni/cni.go) does it: CNI ADD when a sandbox runs, DEL when
it stops, the pod IP from the cached ADD result, and garbage collection of attachments and
leases no sandbox owns.

The network is ready once the node's podCIDR is known (UpdateRuntimeConfig); it is kept in the
state directory so a restarted shim is ready again at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from cni import host
from cni.config import DEFAULT_CLUSTER_CIDR, NodeNetwork, loopback_config_list
from cni.invoke import CniError, CniResult, CniRuntime, RuntimeConf
from machinery.cri import api_pb2 as cri

log = logging.getLogger(__name__)

RULES_RESYNC_SECONDS = 30.0
_PROTOCOLS = {cri.TCP: "tcp", cri.UDP: "udp", cri.SCTP: "sctp"}


def port_mappings(mappings: Any) -> list[dict[str, Any]]:
    """portmap's runtimeConfig from a sandbox's CRI port mappings (those with a host port)."""
    out: list[dict[str, Any]] = []
    for m in mappings:
        if not m.host_port:
            continue
        entry: dict[str, Any] = {"hostPort": m.host_port, "containerPort": m.container_port,
                                 "protocol": _PROTOCOLS.get(m.protocol, "tcp")}
        if m.host_ip:
            entry["hostIP"] = m.host_ip
        out.append(entry)
    return out


class PodNetwork:
    def __init__(self, node_name: str, root_dir: Path, cni_bin_dirs: list[str],
                 cluster_cidr: str = DEFAULT_CLUSTER_CIDR) -> None:
        self.node_name = node_name
        self.root_dir = root_dir
        self.cluster_cidr = cluster_cidr
        self.cni = CniRuntime(root_dir / "cni" / "results", cni_bin_dirs)
        self.net: NodeNetwork | None = None
        self._rules_checked = 0.0
        self._cidr_file = root_dir / "dockershim" / "pod-cidr"
        self._ips: dict[str, str] = {}  # sandbox id → its address, from its ADD result, until its teardown
        with contextlib.suppress(OSError, ValueError):
            saved = self._cidr_file.read_text().strip()
            if saved:
                self.net = NodeNetwork(node_name, saved, root_dir, cluster_cidr)

    @property
    def ready(self) -> bool:
        return self.net is not None

    @property
    def pod_cidr(self) -> str:
        return self.net.pod_cidr if self.net else ""

    def configure(self, pod_cidr: str) -> bool:
        """Use `pod_cidr` for new pods (ValueError if it is no usable IPv4 CIDR); True if it changed."""
        if self.net is not None and self.net.pod_cidr == pod_cidr:
            return False
        self.net = NodeNetwork(self.node_name, pod_cidr, self.root_dir, self.cluster_cidr)
        self._cidr_file.parent.mkdir(parents=True, exist_ok=True)
        self._cidr_file.write_text(pod_cidr + "\n")
        log.info("pod network: node %s uses %s on bridge %s", self.node_name, pod_cidr, self.net.bridge)
        return True

    def network_name(self) -> str:
        return self.net.name if self.net else f"minik8s-{self.node_name}"

    def pod_ip(self, sandbox_id: str) -> str:
        """The sandbox's address: every status of it says it (a pod's start builds four), so it is kept from
        its ADD result, or read once from the cached result of an ADD before this shim started."""
        ip = self._ips.get(sandbox_id)
        if ip is None:
            cached = self.cni.read_cache(self.network_name(), sandbox_id)
            if not cached:
                return ""
            ip = CniResult(cached.get("result") or {}).ip or ""
            if ip:
                self._ips[sandbox_id] = ip
        return ip

    async def ensure_rules(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._rules_checked < RULES_RESYNC_SECONDS:
            return
        await asyncio.to_thread(host.ensure_cluster_rules, self.cluster_cidr)
        self._rules_checked = now

    async def setup(self, sandbox_id: str, pid: int, meta: cri.PodSandboxMetadata,
                    mappings: list[dict[str, Any]]) -> str:
        """CNI ADD for a running sandbox (pod network on eth0, loopback on lo); the pod's IP."""
        if self.net is None:
            raise CniError("network plugin is not ready: the node has no podCIDR yet", 11)
        netns = f"/proc/{pid}/ns/net"
        args = [("K8S_POD_NAMESPACE", meta.namespace), ("K8S_POD_NAME", meta.name),
                ("K8S_POD_INFRA_CONTAINER_ID", sandbox_id), ("K8S_POD_UID", meta.uid)]
        caps: dict[str, Any] = {"portMappings": mappings} if mappings else {}
        fd = host.try_host_lock(True)
        if fd is None:  # the shared rules are being taken down: wait for that off the event loop
            fd = await asyncio.to_thread(host.acquire_host_lock, True)
        try:
            await self.ensure_rules(force=self._rules_checked == 0)
            # lo and eth0 are independent attachments: their plugins run at once (go-cni's Setup, which
            # containerd calls, attaches a sandbox's networks in parallel too); both are waited for before an
            # error is raised, so the caller's teardown finds every attachment that was made
            lists = ((loopback_config_list(), RuntimeConf(sandbox_id, netns, "lo", args)),
                     (self.net.config_list(), RuntimeConf(sandbox_id, netns, "eth0", args, caps)))
            added = await asyncio.gather(*(self.cni.add(conflist, rt) for conflist, rt in lists),
                                         return_exceptions=True)
            for (conflist, rt), outcome in zip(lists, added, strict=True):
                if isinstance(outcome, BaseException):
                    # a list that failed half-way has no cached result, yet its first plugins may have made
                    # something (bridge's veth, host-local's lease): DEL through the whole list with its config,
                    # as libcni's DelNetworkList does when nothing is cached
                    with contextlib.suppress(CniError):
                        await self.cni.delete(conflist, rt, force=True)
        finally:
            host.release_host_lock(fd)
        for outcome in added:
            if isinstance(outcome, BaseException):
                raise outcome
        result = added[1]
        assert isinstance(result, CniResult)
        if not result.ip:
            raise CniError(f"the CNI result names no address: {result.raw}", 6)
        self._ips[sandbox_id] = result.ip
        return result.ip

    async def teardown(self, sandbox_id: str, pid: int = 0) -> None:
        """CNI DEL for a sandbox, in its netns while its process runs (else the plugins just free the IP)."""
        self._ips.pop(sandbox_id, None)  # read from the cache again while a failed DEL leaves it
        netns = ""
        if pid and os.path.exists(f"/proc/{pid}/ns/net"):
            netns = f"/proc/{pid}/ns/net"
        if self.cni.read_cache(None, sandbox_id) is not None:
            await self.cni.delete(None, RuntimeConf(sandbox_id, netns, "eth0"))
        if self.cni.read_cache(loopback_config_list()["name"], sandbox_id, "lo") is not None:
            try:
                await self.cni.delete(loopback_config_list(), RuntimeConf(sandbox_id, netns, "lo"))
            except CniError as e:
                log.warning("loopback DEL for %s: %s", sandbox_id[:12], e)

    async def gc(self, live_sandbox_ids: Callable[[], Awaitable[set[str]]]) -> None:
        """DEL the attachments of sandboxes that no longer exist and drop the leases nobody holds.

        The cache and the leases are read before the live sandboxes are listed: an attachment or a
        lease made in between belongs to a sandbox the list then shows (a sandbox exists before its
        ADD), so a pod being set up is never torn down."""
        networks = ((self.network_name(), "eth0"), (loopback_config_list()["name"], "lo"))
        cached = [(name, ifname, cid) for name, ifname in networks for cid in self.cni.cached_container_ids(name)]
        lease_dir = self.net.lease_dir if self.net is not None else None
        held = host.leases(lease_dir) if lease_dir is not None else {}
        if not cached and not held:
            return
        live = await live_sandbox_ids()
        for name, ifname, cid in cached:
            if cid in live:
                continue
            log.info("releasing the network of vanished sandbox %s", cid[:12])
            self._ips.pop(cid, None)
            with contextlib.suppress(CniError):
                await self.cni.delete(None if ifname == "eth0" else loopback_config_list(),
                                      RuntimeConf(cid, "", ifname))
            with contextlib.suppress(FileNotFoundError):
                self.cni.cache_path(name, cid, ifname).unlink()
        if lease_dir is None:
            return
        freed = []
        for address, cid in held.items():
            if cid in live:
                continue
            path = lease_dir / address
            with contextlib.suppress(OSError, IndexError):
                if path.read_text().splitlines()[0].strip() == cid:  # still that sandbox's lease
                    path.unlink()
                    freed.append(address)
        if freed:
            log.info("released leaked addresses %s", ", ".join(sorted(freed)))
