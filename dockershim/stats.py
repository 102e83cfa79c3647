"""Container and sandbox stats from Docker's stats API (cri-dockerd core/stats_linux.go,
docker_stats.go): `GET /containers/{id}/stats?stream=false&one-shot=true`, one answer per container
without Docker's one-second wait for a second sample.

Docker's numbers are cgroup counters: `cpu_stats.cpu_usage.total_usage` is the cumulative CPU time
in nanoseconds (usage_core_nano_seconds); memory `usage` less the inactive file cache is the working
set, as cri-dockerd and cAdvisor compute it (cgroup v1 `total_inactive_file`, v2 `inactive_file`).
A one-shot answer has no previous sample, so usage_nano_cores is left out: the kubelet derives it
from two successive cumulative values, as its CRI stats provider does for runtimes that do not say.
"""

from __future__ import annotations

import time
from typing import Any

from dockershim import translate as tr
from machinery.cri import api_pb2 as cri


def working_set(memory: dict[str, Any]) -> int:
    usage = int(memory.get("usage") or 0)
    stats = memory.get("stats") or {}
    inactive = int(stats.get("total_inactive_file", stats.get("inactive_file", 0)) or 0)
    return max(usage - inactive, 0)


def container_stats(item: dict[str, Any], stats: dict[str, Any], now_ns: int | None = None) -> cri.ContainerStats:
    """One ContainerStats from a container's list entry (names, labels) and its one-shot stats."""
    now = now_ns if now_ns is not None else time.time_ns()
    labels, annotations = tr.split_labels(item.get("Labels"))
    names = item.get("Names") or [""]
    out = cri.ContainerStats(attributes=cri.ContainerAttributes(
        id=item["Id"], metadata=tr.container_metadata(names[0]), labels=labels, annotations=annotations))
    total = ((stats.get("cpu_stats") or {}).get("cpu_usage") or {}).get("total_usage")
    if total is not None:
        out.cpu.timestamp = now
        out.cpu.usage_core_nano_seconds.value = int(total)
    memory = stats.get("memory_stats") or {}
    if memory.get("usage") is not None:
        out.memory.timestamp = now
        out.memory.working_set_bytes.value = working_set(memory)
        out.memory.usage_bytes.value = int(memory["usage"])
        rss = (memory.get("stats") or {}).get("total_rss", (memory.get("stats") or {}).get("anon"))
        if rss is not None:
            out.memory.rss_bytes.value = int(rss)
        limit = int(memory.get("limit") or 0)
        if limit:
            out.memory.available_bytes.value = max(limit - out.memory.working_set_bytes.value, 0)
    return out


def sandbox_stats(sandbox: dict[str, Any], containers: list[cri.ContainerStats]) -> cri.PodSandboxStats:
    """A sandbox's stats: its containers', and their sums as the pod's cpu and memory (the pause
    container's own few hundred kilobytes left out, as Docker keeps it in a cgroup of its own)."""
    labels, annotations = tr.split_labels(sandbox.get("Labels"))
    names = sandbox.get("Names") or [""]
    out = cri.PodSandboxStats(attributes=cri.PodSandboxAttributes(
        id=sandbox["Id"], metadata=tr.sandbox_metadata(names[0]), labels=labels, annotations=annotations))
    out.linux.containers.extend(containers)
    with_cpu = [c for c in containers if c.HasField("cpu")]
    if with_cpu:
        out.linux.cpu.timestamp = max(c.cpu.timestamp for c in with_cpu)
        out.linux.cpu.usage_core_nano_seconds.value = sum(c.cpu.usage_core_nano_seconds.value for c in with_cpu)
    with_memory = [c for c in containers if c.HasField("memory")]
    if with_memory:
        out.linux.memory.timestamp = max(c.memory.timestamp for c in with_memory)
        out.linux.memory.working_set_bytes.value = sum(c.memory.working_set_bytes.value for c in with_memory)
        out.linux.memory.usage_bytes.value = sum(c.memory.usage_bytes.value for c in with_memory)
    return out
