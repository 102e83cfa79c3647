"""Node registration, the Lease heartbeat and Node status (upstream kubelet_node_status.go and the
node lease controller).

- On start the kubelet creates its Node (labels kubernetes.io/hostname, os, arch; capacity and
  allocatable for cpu, memory, pods; addresses; the kubelet's port in daemonEndpoints; nodeInfo;
  conditions) or, if it exists, brings its labels and status up to date.
- A Lease `kube-node-lease/<node>` is renewed every leaseDuration/4 seconds: the cheap "I am
  alive" the node lifecycle controller watches.
- The Node status is recomputed every `update_frequency` seconds and written when it changed or
  `report_frequency` seconds passed (with fresh heartbeat times), as upstream does.
- Ready is False (KubeletNotReady) until the node has a podCIDR, since no pod can get an IP before.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from machinery.api.coordination_v1 import Lease, LeaseSpec
from machinery.api.core_v1 import Node
from machinery.api.meta import ObjectMeta, OwnerReference
from machinery.client import KUBE_VERSION, ApiClient, ApiError, ApiUnavailable
from machinery.timeutil import now_rfc3339, now_rfc3339_micro

log = logging.getLogger(__name__)

NODE_LEASE_NAMESPACE = "kube-node-lease"
MAX_PODS = 110


def memory_total_bytes() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _read(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""


def os_image() -> str:
    for line in _read("/etc/os-release").splitlines():
        if line.startswith("PRETTY_NAME="):
            return line.split("=", 1)[1].strip('"')
    return platform.system()


def arch() -> str:
    machine = platform.machine()
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(machine, machine)


@dataclass
class NodeFacts:
    """What the kubelet reports about its node (computed once; conditions are added per report)."""

    node_name: str
    node_ip: str
    port: int
    pod_cidr: str | None = None
    runtime_version: str = "unknown://unknown"  # the CRI runtime's name://version, from its Version
    labels: dict[str, str] = field(default_factory=dict)
    cpu_millis: int = field(default_factory=lambda: (os.cpu_count() or 1) * 1000)
    memory_bytes: int = field(default_factory=memory_total_bytes)

    def node_labels(self) -> dict[str, str]:
        return {"kubernetes.io/hostname": self.node_name, "kubernetes.io/os": "linux",
                "kubernetes.io/arch": arch(), "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": arch(),
                **self.labels}

    def capacity(self) -> dict[str, str]:
        cpu = self.cpu_millis // 1000 if self.cpu_millis % 1000 == 0 else f"{self.cpu_millis}m"
        return {"cpu": str(cpu), "memory": f"{self.memory_bytes // 1024}Ki", "pods": str(MAX_PODS)}

    def status(self, ready: bool, reason: str, message: str, heartbeat: str,
               previous: dict[str, dict[str, Any]]) -> dict[str, Any]:
        def condition(ctype: str, status: str, cond_reason: str, cond_message: str) -> dict[str, Any]:
            old = previous.get(ctype) or {}
            transition = old.get("lastTransitionTime") if old.get("status") == status else heartbeat
            return {"type": ctype, "status": status, "lastHeartbeatTime": heartbeat,
                    "lastTransitionTime": transition or heartbeat, "reason": cond_reason, "message": cond_message}

        conditions = [
            condition("MemoryPressure", "False", "KubeletHasSufficientMemory",
                      "kubelet has sufficient memory available"),
            condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
            condition("Ready", "True" if ready else "False", reason, message),
        ]
        return {
            "capacity": self.capacity(),
            "allocatable": self.capacity(),
            "conditions": conditions,
            "addresses": [{"type": "InternalIP", "address": self.node_ip},
                          {"type": "Hostname", "address": self.node_name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": self.port}},
            "nodeInfo": {
                "machineID": _read("/etc/machine-id"),
                "systemUUID": _read("/sys/class/dmi/id/product_uuid") or _read("/etc/machine-id"),
                "bootID": _read("/proc/sys/kernel/random/boot_id"),
                "kernelVersion": platform.release(),
                "osImage": os_image(),
                "containerRuntimeVersion": self.runtime_version,
                "kubeletVersion": KUBE_VERSION,
                "kubeProxyVersion": KUBE_VERSION,
                "operatingSystem": "linux",
                "architecture": arch(),
            },
        }


def _comparable(status: dict[str, Any]) -> Any:
    """A node status without heartbeat times, to tell a real change from a heartbeat."""
    out = dict(status)
    out["conditions"] = [{k: v for k, v in c.items() if k != "lastHeartbeatTime"}
                         for c in status.get("conditions") or []]
    return out


class NodeStatusManager:
    def __init__(self, client: ApiClient, facts: NodeFacts, *, lease_duration: int = 40,
                 update_frequency: float = 10.0, report_frequency: float = 300.0) -> None:
        self.client = client
        self.facts = facts
        self.lease_duration = lease_duration
        self.update_frequency = update_frequency
        self.report_frequency = report_frequency
        self.node_uid: str | None = None
        self.ready_reason = ("KubeletNotReady", "container runtime network not ready: the node has no podCIDR")
        self.network_ready = False
        self._last_sent: dict[str, Any] | None = None
        self._last_sent_at = 0.0
        self._lease: Lease | None = None
        self._kick = asyncio.Event()

    @property
    def cpu_millis(self) -> int:
        return self.facts.cpu_millis

    @property
    def memory_bytes(self) -> int:
        return self.facts.memory_bytes

    def set_network_ready(self, ready: bool) -> None:
        if ready != self.network_ready:
            self.network_ready = ready
            self._kick.set()

    def set_runtime_not_ready(self, message: str) -> None:
        """The runtime's Status as the node's Ready condition: "" is ready, else upstream's message
        ("container runtime network not ready: NetworkReady=false reason:...")."""
        if message:
            self.ready_reason = ("KubeletNotReady", message)
        self.set_network_ready(not message)

    def _readiness(self) -> tuple[bool, str, str]:
        if self.network_ready:
            return True, "KubeletReady", "kubelet is posting ready status"
        return False, *self.ready_reason

    # -- registration ---------------------------------------------------------------------------

    async def register(self) -> Node:
        """Create the Node, or update an existing one; retried until the apiserver answers."""
        delay = 0.2
        while True:
            try:
                node = await self._register_once()
                self.node_uid = node.metadata.uid
                log.info("node %s registered", self.facts.node_name)
                return node
            except (ApiError, ApiUnavailable) as e:
                log.warning("registering node %s: %s", self.facts.node_name, e)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    async def _register_once(self) -> Node:
        facts = self.facts
        ready, reason, message = self._readiness()
        status = facts.status(ready, reason, message, now_rfc3339(), {})
        spec: dict[str, Any] = {}
        if facts.pod_cidr:
            spec = {"podCIDR": facts.pod_cidr, "podCIDRs": [facts.pod_cidr]}
        body = {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": facts.node_name, "labels": facts.node_labels()}, "spec": spec, "status": status}
        try:
            created = await self.client.create_raw(Node, body)
            node = Node.model_validate(created)
            # the apiserver may drop status on create (upstream does): write it through /status
            await self._write_status(status)
            return node
        except ApiError as e:
            if not e.is_already_exists:
                raise
        existing = await self.client.get(Node, facts.node_name)
        patch: dict[str, Any] = {"metadata": {"labels": facts.node_labels()}}
        if facts.pod_cidr and not (existing.spec and existing.spec.pod_cidr):
            patch["spec"] = spec
        node = await self.client.patch(Node, facts.node_name, patch, "merge")
        previous = {c.type: c.to_dict() for c in (existing.status.conditions if existing.status else None) or []}
        await self._write_status(facts.status(ready, reason, message, now_rfc3339(), previous))
        return node

    async def _write_status(self, status: dict[str, Any]) -> None:
        await self.client.patch(Node, self.facts.node_name, {"status": status}, "strategic", subresource="status")
        self._last_sent = status
        self._last_sent_at = time.monotonic()

    # -- heartbeats -----------------------------------------------------------------------------

    async def run(self) -> None:
        await asyncio.gather(self._lease_loop(), self._status_loop())

    async def _lease_loop(self) -> None:
        interval = max(self.lease_duration / 4, 0.5)
        while True:
            try:
                await self.renew_lease()
            except (ApiError, ApiUnavailable) as e:
                log.warning("renewing node lease: %s", e)
                self._lease = None
                await asyncio.sleep(min(interval, 1.0))
                continue
            await asyncio.sleep(interval)

    async def renew_lease(self) -> Lease:
        name = self.facts.node_name
        if self._lease is None:
            try:
                self._lease = await self.client.get(Lease, name, NODE_LEASE_NAMESPACE)
            except ApiError as e:
                if not e.is_not_found:
                    raise
                owner = []
                if self.node_uid:
                    owner = [OwnerReference(api_version="v1", kind="Node", name=name, uid=self.node_uid)]
                lease = Lease(metadata=ObjectMeta(name=name, namespace=NODE_LEASE_NAMESPACE, owner_references=owner),
                              spec=LeaseSpec(holder_identity=name, lease_duration_seconds=self.lease_duration,
                                             renew_time=now_rfc3339_micro()))
                self._lease = await self.client.create(lease)
                return self._lease
        lease = self._lease.model_copy(deep=True)
        lease.spec = (lease.spec or LeaseSpec()).model_copy(update={
            "holder_identity": name, "lease_duration_seconds": self.lease_duration, "renew_time": now_rfc3339_micro()})
        try:
            self._lease = await self.client.update(lease)
        except ApiError as e:
            if e.is_conflict or e.is_not_found:
                self._lease = None  # re-read (or recreate) next time
            raise
        return self._lease

    async def _status_loop(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._kick.wait(), self.update_frequency)
            self._kick.clear()
            try:
                await self.update_status()
            except (ApiError, ApiUnavailable) as e:
                log.warning("updating node status: %s", e)

    async def update_status(self, force: bool = False) -> bool:
        ready, reason, message = self._readiness()
        previous = {c["type"]: c for c in (self._last_sent or {}).get("conditions") or []}
        status = self.facts.status(ready, reason, message, now_rfc3339(), previous)
        due = time.monotonic() - self._last_sent_at >= self.report_frequency
        if not force and not due and self._last_sent is not None \
                and _comparable(status) == _comparable(self._last_sent):
            return False
        await self._write_status(status)
        return True
