"""The latest points in memory and CPU rates from cumulative usage (metrics-server pkg/storage:
node.go, pod.go).

Each scrape gives, per node and per container, a cumulative CPU time and a memory working set at a
timestamp. A node or container is served once two points of the same start are held: cpu =
Δcumulative / Δtime over the window between them, memory = the newer working set. A pod is served
only when every container it reported has a rate (metrics-server leaves out a pod with a container
not yet measured twice, rather than under-report it), with the time and window of its container
measured earliest.

A fresh container (upstream's rule, pod.go): one whose point is at least 10 s
(FRESH_CONTAINER_MIN_WINDOW) but less than one resolution after its start gets its first rate at
once, over the window from its start (cumulative 0 then) to the point, rather than a resolution
later from two scrapes; a younger one's rate would be too rough, and an older one was seen by a
scrape before. A container whose start is not before the stored point's time is another one (a
restart): its pair begins again."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Obj = dict[str, Any]

FRESH_CONTAINER_MIN_WINDOW = 10.0  # upstream's freshContainerMinMetricsResolution


@dataclass(frozen=True)
class Point:
    timestamp: float  # seconds since the epoch
    cumulative_cpu: int  # core-nanoseconds
    memory: int  # working set bytes
    start: float = 0.0  # the container's (or node's) start time, 0 when not known; a new one resets the pair


@dataclass(frozen=True)
class Usage:
    timestamp: float
    window: float
    nano_cores: int
    memory: int


def rate(prev: Point | None, last: Point) -> Usage | None:
    if prev is None or last.timestamp <= prev.timestamp or last.cumulative_cpu < prev.cumulative_cpu \
            or last.start != prev.start:
        return None
    window = last.timestamp - prev.timestamp
    return Usage(last.timestamp, window, int((last.cumulative_cpu - prev.cumulative_cpu) / window), last.memory)


@dataclass
class _Pair:
    prev: Point | None = None
    last: Point | None = None

    def add(self, point: Point) -> None:
        """A node's point: a new start (a reboot) or a counter gone back begins the pair again."""
        if self.last is not None and point.timestamp == self.last.timestamp:
            return  # the kubelet answered the same reading again
        last = self.last
        if last is not None and (point.start != last.start or point.cumulative_cpu < last.cumulative_cpu):
            self.prev = None  # restarted: begin again
            self.last = point
            return
        self.prev, self.last = self.last, point

    def add_container(self, point: Point, resolution: float) -> None:
        """A container's point (metrics-server's podStorage.Store): the fresh-container rule first, then a
        container started at or after the stored point's time (or a counter gone back) is a restart."""
        if point.start > 0 and FRESH_CONTAINER_MIN_WINDOW <= point.timestamp - point.start < resolution:
            self.prev = Point(point.start, 0, point.memory, point.start)
            self.last = point
            return
        last = self.last
        if last is not None and point.timestamp == last.timestamp:
            return  # the kubelet answered the same reading again
        if last is not None and (point.start >= last.timestamp or point.cumulative_cpu < last.cumulative_cpu):
            self.prev = None
            self.last = point
            return
        self.prev, self.last = last, point

    def usage(self) -> Usage | None:
        return rate(self.prev, self.last) if self.last is not None else None


@dataclass
class _PodEntry:
    containers: dict[str, _Pair] = field(default_factory=dict)


class Storage:
    def __init__(self, resolution: float = 15.0) -> None:
        self.resolution = resolution  # the scrape period (--metric-resolution): the fresh-container rule's bound
        self.nodes: dict[str, _Pair] = {}
        self.pods: dict[tuple[str, str], _PodEntry] = {}
        self.node_pods: dict[str, set[tuple[str, str]]] = {}  # node -> the pods its last scrape had

    def store_node(self, node: str, point: Point | None, pods: dict[tuple[str, str], dict[str, Point]]) -> None:
        """One node's scrape: its own point and its pods' containers' points. Pods of this node not in
        the scrape are dropped (they ended)."""
        if point is not None:
            self.nodes.setdefault(node, _Pair()).add(point)
        for key in self.node_pods.get(node, set()) - set(pods):
            self.pods.pop(key, None)
        self.node_pods[node] = set(pods)
        for key, containers in pods.items():
            entry = self.pods.setdefault(key, _PodEntry())
            for name in list(entry.containers):
                if name not in containers:
                    del entry.containers[name]
            for name, p in containers.items():
                entry.containers.setdefault(name, _Pair()).add_container(p, self.resolution)

    def forget_node(self, node: str) -> None:
        self.nodes.pop(node, None)
        for key in self.node_pods.pop(node, set()):
            self.pods.pop(key, None)

    def node_usage(self, node: str) -> Usage | None:
        pair = self.nodes.get(node)
        return pair.usage() if pair else None

    def pod_usage(self, namespace: str, name: str) -> tuple[float, float, dict[str, Usage]] | None:
        """(timestamp, window, usage per container) when every container has a rate; the time and window
        are those of the container measured earliest (upstream's earliest TimeInfo)."""
        entry = self.pods.get((namespace, name))
        if entry is None or not entry.containers:
            return None
        usages: dict[str, Usage] = {}
        for cname, pair in entry.containers.items():
            usage = pair.usage()
            if usage is None:
                return None
            usages[cname] = usage
        earliest = min(usages.values(), key=lambda u: u.timestamp)
        return earliest.timestamp, earliest.window, usages
