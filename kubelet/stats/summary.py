"""`/stats/summary` and `/metrics/resource` (upstream pkg/kubelet/server/stats/summary.go,
pkg/kubelet/metrics/collectors/resource_metrics.go): the stats/v1alpha1 Summary of the node and its
pods, and the same cpu/memory figures in Prometheus' text format, which metrics-server reads."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubelet.stats.cri_stats_provider import CRIStatsProvider
from machinery.timeutil import format_rfc3339, parse_rfc3339

Obj = dict[str, Any]


class SummaryProvider:
    def __init__(self, node_name: str, provider: CRIStatsProvider,
                 pod_start: Callable[[str, str], str | None] = lambda namespace, name: None) -> None:
        self.node_name = node_name
        self.provider = provider
        self.pod_start = pod_start  # (namespace, name) -> the pod's status.startTime

    async def get(self, update: bool = False) -> Obj:
        """The Summary; `update` (the kubelet's periodic refresh, not a reader) moves the CPU rates on."""
        pods = await self.provider.list_pod_stats(update)
        for pod in pods:
            ref = pod["podRef"]
            start = self.pod_start(ref["namespace"], ref["name"])
            if start:
                pod["startTime"] = start
        node: Obj = {"nodeName": self.node_name,
                     "startTime": format_rfc3339(self.provider.boot_time),
                     "cpu": self.provider.node_cpu(update), "memory": self.provider.node_memory()}
        return {"node": node, "pods": pods}


def _ms(time: str) -> int:
    parsed = parse_rfc3339(time)
    return int(parsed.timestamp() * 1000) if parsed else 0


def _labels(**labels: str) -> str:
    inner = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return f"{{{inner}}}" if inner else ""


_HELP = (
    ("container_cpu_usage_seconds_total", "counter",
     "[STABLE] Cumulative cpu time consumed by the container in core-seconds"),
    ("container_memory_working_set_bytes", "gauge", "[STABLE] Current working set of the container in bytes"),
    ("container_start_time_seconds", "gauge", "[STABLE] Start time of the container since unix epoch in seconds"),
    ("node_cpu_usage_seconds_total", "counter", "[STABLE] Cumulative cpu time consumed by the node in core-seconds"),
    ("node_memory_working_set_bytes", "gauge", "[STABLE] Current working set of the node in bytes"),
    ("pod_cpu_usage_seconds_total", "counter", "[STABLE] Cumulative cpu time consumed by the pod in core-seconds"),
    ("pod_memory_working_set_bytes", "gauge", "[STABLE] Current working set of the pod in bytes"),
    ("scrape_error", "gauge", "[STABLE] 1 if there was an error while getting container metrics, 0 otherwise"),
)


def resource_metrics(summary: Obj | None) -> str:
    """The resource metrics endpoint's text (a failed summary: only scrape_error 1)."""
    samples: dict[str, list[str]] = {name: [] for name, _, _ in _HELP}
    if summary is None:
        samples["scrape_error"].append("scrape_error 1")
    else:
        samples["scrape_error"].append("scrape_error 0")
        node = summary["node"]
        if "usageCoreNanoSeconds" in node.get("cpu", {}):
            samples["node_cpu_usage_seconds_total"].append(
                f"node_cpu_usage_seconds_total {node['cpu']['usageCoreNanoSeconds'] / 1e9} {_ms(node['cpu']['time'])}")
        if "workingSetBytes" in node.get("memory", {}):
            samples["node_memory_working_set_bytes"].append(
                f"node_memory_working_set_bytes {node['memory']['workingSetBytes']} {_ms(node['memory']['time'])}")
        for pod in summary["pods"]:
            ref = pod["podRef"]
            pl = _labels(namespace=ref["namespace"], pod=ref["name"])
            if "usageCoreNanoSeconds" in pod.get("cpu", {}):
                samples["pod_cpu_usage_seconds_total"].append(
                    f"pod_cpu_usage_seconds_total{pl} {pod['cpu']['usageCoreNanoSeconds'] / 1e9} "
                    f"{_ms(pod['cpu']['time'])}")
            if "workingSetBytes" in pod.get("memory", {}):
                samples["pod_memory_working_set_bytes"].append(
                    f"pod_memory_working_set_bytes{pl} {pod['memory']['workingSetBytes']} {_ms(pod['memory']['time'])}")
            for c in pod["containers"]:
                cl = _labels(container=c["name"], namespace=ref["namespace"], pod=ref["name"])
                if c.get("startTime") and (start_ms := _ms(c["startTime"])) > 0:
                    # stamped with the start itself, as upstream's collectContainerStartTime
                    samples["container_start_time_seconds"].append(
                        f"container_start_time_seconds{cl} {start_ms / 1000} {start_ms}")
                if "usageCoreNanoSeconds" in c.get("cpu", {}):
                    samples["container_cpu_usage_seconds_total"].append(
                        f"container_cpu_usage_seconds_total{cl} {c['cpu']['usageCoreNanoSeconds'] / 1e9} "
                        f"{_ms(c['cpu']['time'])}")
                if "workingSetBytes" in c.get("memory", {}):
                    samples["container_memory_working_set_bytes"].append(
                        f"container_memory_working_set_bytes{cl} {c['memory']['workingSetBytes']} "
                        f"{_ms(c['memory']['time'])}")
    lines = []
    for name, kind, text in _HELP:
        if samples[name]:
            lines += [f"# HELP {name} {text}", f"# TYPE {name} {kind}", *samples[name]]
    return "\n".join(lines) + "\n"
