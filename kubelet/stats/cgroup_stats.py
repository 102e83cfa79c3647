"""Pods' and containers' CPU and memory read from their cgroups, as upstream's kubelet reads them through
cAdvisor: on a Docker node cAdvisor is its only source (cadvisor.UsingLegacyCadvisorStats for the
cri-dockerd socket), and for other CRI runtimes listPodStatsPartiallyFromCRI still takes cpu and memory
from cAdvisor's cgroup stats.

cAdvisor samples each cgroup every housekeeping interval and the summary serves its latest sample; here the
cgroups are read when the summary is asked for, which is cAdvisor's housekeeping run right before each
scrape: the sample is as fresh as the request, and no runtime stats call is waited for (Docker's stats API
answers at its stats collector's next one-second tick, one-shot or not, and later on a busy host).

A pod's cgroup is the kubelet's own (kubelet/cm: <tier>/pod<UID>, cgroupfs); a container's is the child the
runtime makes of it named by the container's ID (Docker's and containerd's cgroupfs layout). The figures are
cAdvisor's: cumulative CPU from cpuacct.usage (v1) or cpu.stat usage_usec (v2); memory usage, and the
working set as usage less the inactive file cache, rss, and the bytes left under a limit when there is one.
When a running container's cgroup is not where that layout puts it (a runtime on another layout), the caller
reads the runtime's CRI stats instead. Blocking file reads: the caller runs them in a thread."""

from __future__ import annotations

import posixpath
import time

from kubelet.cm.cgroup_manager import CgroupManager
from machinery.cri import api_pb2 as pb

V1_UNLIMITED = 1 << 62  # memory.limit_in_bytes without a limit is near 2^63 (page-rounded)


def _stat(text: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if value.strip().isdigit():
            out[key] = int(value)
    return out


def read_usage(cgroups: CgroupManager, name: str) -> tuple[pb.CpuUsage, pb.MemoryUsage]:
    """The cgroup's CPU and memory as CRI usages stamped with the time they were read. FileNotFoundError when
    the cgroup is gone."""
    cpu, memory = pb.CpuUsage(), pb.MemoryUsage()
    if cgroups.unified:
        cumulative = _stat(cgroups.read(name, "cpu.stat"))["usage_usec"] * 1000
        cpu.timestamp = time.time_ns()
        usage = int(cgroups.read(name, "memory.current"))
        stat = _stat(cgroups.read(name, "memory.stat"))
        inactive, rss = stat.get("inactive_file", 0), stat.get("anon", 0)
        raw_limit = cgroups.read(name, "memory.max")
        limit = None if raw_limit == "max" else int(raw_limit)
    else:
        cumulative = int(cgroups.read(name, "cpuacct.usage"))
        cpu.timestamp = time.time_ns()
        usage = int(cgroups.read(name, "memory.usage_in_bytes"))
        stat = _stat(cgroups.read(name, "memory.stat"))
        inactive, rss = stat.get("total_inactive_file", 0), stat.get("total_rss", 0)
        limit = int(cgroups.read(name, "memory.limit_in_bytes"))
        limit = None if limit >= V1_UNLIMITED else limit
    cpu.usage_core_nano_seconds.value = cumulative
    memory.timestamp = cpu.timestamp
    working_set = max(usage - inactive, 0)
    memory.working_set_bytes.value = working_set
    memory.usage_bytes.value = usage
    memory.rss_bytes.value = rss
    if limit is not None:
        memory.available_bytes.value = max(limit - working_set, 0)
    return cpu, memory


def sandbox_stats_from_cgroups(cgroups: CgroupManager, pod_cgroups: dict[str, list[str]],
                               sandboxes: list[pb.PodSandbox],
                               containers: list[pb.Container]) -> list[pb.PodSandboxStats] | None:
    """PodSandboxStats of the ready sandboxes and their running containers from the cgroups (`pod_cgroups`:
    pod UID -> its cgroups, ContainerManager.pod_cgroups); None when a pod or running container has no cgroup
    where the kubelet's layout puts it. A container gone between the listing and the reading is left out."""
    out = []
    for sandbox in sandboxes:
        if sandbox.state != pb.SANDBOX_READY:
            continue
        names = pod_cgroups.get(sandbox.metadata.uid)
        if not names:
            return None
        stats = pb.PodSandboxStats(attributes=pb.PodSandboxAttributes(
            id=sandbox.id, metadata=sandbox.metadata, labels=sandbox.labels, annotations=sandbox.annotations))
        for c in containers:
            if c.pod_sandbox_id != sandbox.id or c.state != pb.CONTAINER_RUNNING:
                continue
            where = next((posixpath.join(n, c.id) for n in names if cgroups.exists(posixpath.join(n, c.id))), None)
            if where is None:
                return None
            try:
                cpu, memory = read_usage(cgroups, where)
            except FileNotFoundError:
                continue  # it ended meanwhile
            entry = stats.linux.containers.add()
            entry.attributes.CopyFrom(pb.ContainerAttributes(id=c.id, metadata=c.metadata, labels=c.labels,
                                                             annotations=c.annotations))
            entry.cpu.CopyFrom(cpu)
            entry.memory.CopyFrom(memory)
        try:
            cpu, memory = read_usage(cgroups, names[0])
        except FileNotFoundError:
            continue  # the pod ended meanwhile
        stats.linux.cpu.CopyFrom(cpu)
        stats.linux.memory.CopyFrom(memory)
        out.append(stats)
    return out
