"""Pod and container stats from the CRI runtime (upstream pkg/kubelet/stats/cri_stats_provider.go,
with PodAndContainerStatsFromCRI), and the node's own from the host (cAdvisor's root cgroup).

Pods come from `ListPodSandboxStats` (each sandbox with its containers' stats; the Docker shim sums
the containers for the pod, containerd reads the pod cgroup the kubelet made, kubelet/cm); a runtime
that cannot answer it (UNIMPLEMENTED; containerd 1.6 when it has no pod cgroup to read, with
--cgroups-per-qos=false) is read through `ListPodSandbox` + `ListContainerStats`, summed per
sandbox, from then on. When the runtime gives
only the cumulative CPU time, usageNanoCores is derived from the previous value this provider saw
for the same container (or pod, or node), as upstream's `getAndUpdateContainerUsageNanoCores` does;
the first reading has none. With the kubelet's QoS cgroups, the pods' and containers' cpu and memory are
read from their cgroups instead (cgroup_stats.py: cAdvisor's source upstream), and the runtime only lists
them. A container's startTime is its creation time from `ListContainers` (upstream's
makeContainerStats: "the StartTime in the summary API is the container creation time"), which the
metrics-server's fresh-container rule and restart detection read.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import time
from typing import Any, Protocol

import grpc

from kubelet.cm.container_manager import ContainerManager
from kubelet.stats.cgroup_stats import sandbox_stats_from_cgroups
from machinery.cri import api_pb2 as pb
from machinery.cri.errors import CriError
from machinery.timeutil import format_rfc3339_micro

log = logging.getLogger(__name__)

Obj = dict[str, Any]
CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


class StatsRuntime(Protocol):
    async def list_pod_sandbox_stats(self) -> list[pb.PodSandboxStats]: ...
    async def list_container_stats(self, sandbox_id: str = "") -> list[pb.ContainerStats]: ...
    async def list_pod_sandbox(self, labels: dict[str, str] | None = None) -> list[pb.PodSandbox]: ...
    async def list_containers(self, labels: dict[str, str] | None = None,
                              sandbox_id: str = "") -> list[pb.Container]: ...


@dataclasses.dataclass
class _Sample:
    timestamp: int  # ns
    cumulative: int  # core-ns


def _rfc3339(ns: int) -> str:
    return format_rfc3339_micro(ns / 1e9)


class CpuUsageCache:
    """The last cumulative CPU reading per id: usageNanoCores = Δcumulative / Δt."""

    def __init__(self) -> None:
        self.samples: dict[str, _Sample] = {}
        self.rates: dict[str, int] = {}

    def nano_cores(self, key: str, timestamp: int, cumulative: int) -> int | None:
        previous = self.samples.get(key)
        if previous is not None and timestamp == previous.timestamp:
            return self.rates.get(key)  # the same reading again: the same rate
        self.samples[key] = _Sample(timestamp, cumulative)
        if previous is None or timestamp < previous.timestamp or cumulative < previous.cumulative:
            self.rates.pop(key, None)  # a first reading, or a restarted counter
            return None
        rate = int((cumulative - previous.cumulative) * 1e9 / (timestamp - previous.timestamp))
        self.rates[key] = rate
        return rate

    def keep(self, keys: set[str]) -> None:
        """Forget what is gone (upstream's cache is pruned the same way)."""
        for key in list(self.samples):
            if key not in keys:
                del self.samples[key]
                self.rates.pop(key, None)


def cpu_stats(usage: pb.CpuUsage, key: str, cache: CpuUsageCache, update: bool) -> Obj | None:
    if not usage.timestamp:
        return None
    out: Obj = {"time": _rfc3339(usage.timestamp)}
    if usage.HasField("usage_core_nano_seconds"):
        out["usageCoreNanoSeconds"] = usage.usage_core_nano_seconds.value
    if usage.HasField("usage_nano_cores"):
        out["usageNanoCores"] = usage.usage_nano_cores.value
    elif "usageCoreNanoSeconds" in out:
        # taken between two periodic readings (update), as upstream's eviction manager refreshes the cache every
        # 10 s; a reader gets the last one, so two requests close together do not make a rate of nothing
        rate = cache.nano_cores(key, usage.timestamp, out["usageCoreNanoSeconds"]) if update else cache.rates.get(key)
        if rate is not None:
            out["usageNanoCores"] = rate
    return out


def memory_stats(usage: pb.MemoryUsage) -> Obj | None:
    if not usage.timestamp:
        return None
    out: Obj = {"time": _rfc3339(usage.timestamp)}
    for field, name in (("available_bytes", "availableBytes"), ("usage_bytes", "usageBytes"),
                        ("working_set_bytes", "workingSetBytes"), ("rss_bytes", "rssBytes"),
                        ("page_faults", "pageFaults"), ("major_page_faults", "majorPageFaults")):
        if usage.HasField(field):
            out[name] = getattr(usage, field).value
    return out


def _sum_stats(containers: list[pb.ContainerStats]) -> tuple[pb.CpuUsage, pb.MemoryUsage]:
    cpu, memory = pb.CpuUsage(), pb.MemoryUsage()
    with_cpu = [c.cpu for c in containers if c.HasField("cpu") and c.cpu.timestamp]
    if with_cpu:
        cpu.timestamp = max(c.timestamp for c in with_cpu)
        cpu.usage_core_nano_seconds.value = sum(c.usage_core_nano_seconds.value for c in with_cpu)
    with_memory = [c.memory for c in containers if c.HasField("memory") and c.memory.timestamp]
    if with_memory:
        memory.timestamp = max(m.timestamp for m in with_memory)
        memory.working_set_bytes.value = sum(m.working_set_bytes.value for m in with_memory)
        memory.usage_bytes.value = sum(m.usage_bytes.value for m in with_memory)
    return cpu, memory


class CRIStatsProvider:
    def __init__(self, runtime: StatsRuntime, proc: str = "/proc") -> None:
        self.runtime = runtime
        self.proc = proc
        self.cache = CpuUsageCache()
        self.boot_time = self._boot_time()
        self.sandbox_stats = True  # the runtime answers ListPodSandboxStats (until it does not)
        # the kubelet's pod cgroups (--cgroups-per-qos), set once made: cpu and memory are read from them
        self.container_manager: ContainerManager | None = None

    async def _sandbox_stats(self) -> list[pb.PodSandboxStats]:
        if self.sandbox_stats:
            try:
                return await self.runtime.list_pod_sandbox_stats()
            except CriError as e:
                # UNIMPLEMENTED: an older runtime; containerd 1.6 cannot read a pod cgroup it was not given a
                # parent for ("cgroupPath is empty", without QoS cgroups): from then on, the containers' stats
                # summed per sandbox
                if e.code == grpc.StatusCode.UNAVAILABLE:
                    raise
                log.info("ListPodSandboxStats: %s; summing ListContainerStats per sandbox instead", e.message)
                self.sandbox_stats = False
        sandboxes = [s for s in await self.runtime.list_pod_sandbox() if s.state == pb.SANDBOX_READY]
        containers = await self.runtime.list_container_stats()
        out = []
        for sandbox in sandboxes:
            mine = [c for c in containers if c.attributes.labels.get("io.kubernetes.pod.uid") == sandbox.metadata.uid]
            cpu, memory = _sum_stats(mine)
            stats = pb.PodSandboxStats(attributes=pb.PodSandboxAttributes(
                id=sandbox.id, metadata=sandbox.metadata, labels=sandbox.labels, annotations=sandbox.annotations))
            stats.linux.containers.extend(mine)
            stats.linux.cpu.CopyFrom(cpu)
            stats.linux.memory.CopyFrom(memory)
            out.append(stats)
        return out

    async def _stats_and_containers(self) -> tuple[list[pb.PodSandboxStats], list[pb.Container]]:
        """The sandboxes' stats and the containers listed (for their creation times): from the cgroups when the
        kubelet made them and every running container's is found there, else from the runtime's stats."""
        manager = self.container_manager
        if manager is not None:
            sandboxes, listed = await asyncio.gather(self.runtime.list_pod_sandbox(), self.runtime.list_containers())

            def read() -> list[pb.PodSandboxStats] | None:
                return sandbox_stats_from_cgroups(manager.cgroups, manager.pod_cgroups(), sandboxes, listed)

            found = await asyncio.to_thread(read)
            if found is not None:
                return found, listed
            log.debug("a running container's cgroup is not under its pod's: its runtime's stats instead")
        # the containers' creation times, asked beside the stats rather than after them
        stats, listed = await asyncio.gather(self._sandbox_stats(), self.runtime.list_containers())
        return stats, listed

    async def list_pod_stats(self, update: bool = False) -> list[Obj]:
        """stats/v1alpha1 PodStats of every ready sandbox (the newest attempt of each pod); `update` takes this
        reading into the CPU rates (the kubelet's periodic refresh), else the last rates are reported."""
        newest: dict[str, pb.PodSandboxStats] = {}
        sandbox_stats, listed = await self._stats_and_containers()
        created = {c.id: c.created_at for c in listed if c.created_at}
        for stats in sandbox_stats:
            uid = stats.attributes.metadata.uid
            if uid not in newest or stats.attributes.metadata.attempt > newest[uid].attributes.metadata.attempt:
                newest[uid] = stats
        keys: set[str] = {"node"}
        pods = []
        for uid, stats in newest.items():
            meta = stats.attributes.metadata
            containers = []
            cpu, memory = stats.linux.cpu, stats.linux.memory
            if not cpu.timestamp and stats.linux.containers:
                cpu, memory = _sum_stats(list(stats.linux.containers))
            for c in sorted(stats.linux.containers, key=lambda c: c.attributes.metadata.name):
                keys.add(c.attributes.id)
                entry: Obj = {"name": c.attributes.metadata.name}
                if c.attributes.id in created:
                    entry["startTime"] = _rfc3339(created[c.attributes.id])
                if (cs := cpu_stats(c.cpu, c.attributes.id, self.cache, update)) is not None:
                    entry["cpu"] = cs
                if (ms := memory_stats(c.memory)) is not None:
                    entry["memory"] = ms
                containers.append(entry)
            keys.add(f"pod/{uid}")
            pod: Obj = {"podRef": {"name": meta.name, "namespace": meta.namespace, "uid": uid},
                        "containers": containers}
            if (pcpu := cpu_stats(cpu, f"pod/{uid}", self.cache, update)) is not None:
                pod["cpu"] = pcpu
            if (pmem := memory_stats(memory)) is not None:
                pod["memory"] = pmem
            pods.append(pod)
        if update:
            self.cache.keep(keys)
        return sorted(pods, key=lambda p: (p["podRef"]["namespace"], p["podRef"]["name"]))

    # -- the node (cAdvisor's root container: the whole host) --------------------------------------

    def _boot_time(self) -> float:
        try:
            with open(os.path.join(self.proc, "stat")) as f:
                for line in f:
                    if line.startswith("btime "):
                        return float(line.split()[1])
        except OSError:
            pass
        return time.time()

    def node_cpu(self, update: bool = False) -> Obj:
        """The host's cumulative CPU time from /proc/stat (user+nice+system+irq+softirq+steal)."""
        now = time.time_ns()
        with open(os.path.join(self.proc, "stat")) as f:
            fields = f.readline().split()
        busy = sum(int(fields[i]) for i in (1, 2, 3, 6, 7, 8) if i < len(fields))
        usage = pb.CpuUsage(timestamp=now)
        usage.usage_core_nano_seconds.value = busy * 1_000_000_000 // CLOCK_TICKS
        return cpu_stats(usage, "node", self.cache, update) or {}

    def node_memory(self) -> Obj:
        """The host's memory from /proc/meminfo: usage is what is not free, the working set that less
        the inactive file cache (cAdvisor's root cgroup rule)."""
        info: dict[str, int] = {}
        with open(os.path.join(self.proc, "meminfo")) as f:
            for line in f:
                key, _, rest = line.partition(":")
                parts = rest.split()
                if parts:
                    info[key] = int(parts[0]) * 1024
        total, free = info.get("MemTotal", 0), info.get("MemFree", 0)
        usage = total - free
        working_set = max(usage - info.get("Inactive(file)", 0), 0)
        return {"time": _rfc3339(time.time_ns()), "availableBytes": info.get("MemAvailable", total - working_set),
                "usageBytes": usage, "workingSetBytes": working_set}
