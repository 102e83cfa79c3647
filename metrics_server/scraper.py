"""Scraping the kubelets (metrics-server pkg/scraper): every resolution, each Node's kubelet is asked
for `/stats/summary` at the address its status reports (InternalIP, then Hostname, ExternalIP) and
its kubelet port, over HTTPS with the client certificate when one is given (the kubelet authorizes
`nodes/stats` for it), concurrently and each within the resolution."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
from typing import Any

import aiohttp

from machinery.api.core_v1 import Node
from machinery.timeutil import parse_rfc3339
from metrics_server.storage import Point, Storage

log = logging.getLogger(__name__)

Obj = dict[str, Any]


def kubelet_url(node: Node, scheme: str) -> str | None:
    status = node.status
    if status is None:
        return None
    by_type = {a.type: a.address for a in status.addresses or [] if a.address}
    address = by_type.get("InternalIP") or by_type.get("Hostname") or by_type.get("ExternalIP")
    endpoints = status.daemon_endpoints
    port = endpoints.kubelet_endpoint.port if endpoints and endpoints.kubelet_endpoint else None
    if not address or not port:
        return None
    host = f"[{address}]" if ":" in address else address
    return f"{scheme}://{host}:{port}"


def _seconds(value: Any) -> float | None:
    parsed = parse_rfc3339(value) if value else None
    return parsed.timestamp() if parsed else None


def _point(stats: Obj, start: float = 0.0) -> Point | None:
    cpu, memory = stats.get("cpu") or {}, stats.get("memory") or {}
    stamp = _seconds(cpu.get("time"))
    if stamp is None or "usageCoreNanoSeconds" not in cpu or "workingSetBytes" not in memory:
        return None
    return Point(stamp, int(cpu["usageCoreNanoSeconds"]), int(memory["workingSetBytes"]), start)


def decode_summary(summary: Obj) -> tuple[Point | None, dict[tuple[str, str], dict[str, Point]]]:
    """(the node's point, {(namespace, pod): {container: point}}) of one Summary."""
    node = summary.get("node") or {}
    node_point = _point(node, _seconds(node.get("startTime")) or 0.0)
    pods: dict[tuple[str, str], dict[str, Point]] = {}
    for pod in summary.get("pods") or []:
        ref = pod.get("podRef") or {}
        containers = {}
        for c in pod.get("containers") or []:
            point = _point(c, _seconds(c.get("startTime")) or 0.0)
            if point is not None:
                containers[c["name"]] = point
        if containers:
            pods[(ref.get("namespace", ""), ref.get("name", ""))] = containers
    return node_point, pods


class Scraper:
    def __init__(self, storage: Storage, nodes: Any, *, tls: ssl.SSLContext | None, resolution: float) -> None:
        self.storage = storage
        self.nodes = nodes  # an Informer[Node]
        self.tls = tls
        self.resolution = resolution
        self.scrapes = 0
        self.last_duration = 0.0
        self._session: aiohttp.ClientSession | None = None

    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=self.tls if self.tls is not None else False))
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def scrape_node(self, node: Node) -> None:
        name = node.metadata.name or ""
        url = kubelet_url(node, "https" if self.tls is not None else "http")
        if url is None:
            log.info("node %s: no kubelet address yet", name)
            return
        asked = time.time()
        try:
            timeout = aiohttp.ClientTimeout(total=max(self.resolution * 0.9, 1.0))
            async with self.session().get(f"{url}/stats/summary", timeout=timeout) as r:
                if r.status != 200:
                    log.warning("node %s: /stats/summary answered %d: %s", name, r.status, (await r.text())[:200])
                    return
                summary = await r.json()
        except (aiohttp.ClientError, TimeoutError, OSError, ValueError) as e:
            log.warning("node %s: scraping %s/stats/summary failed: %s", name, url, e)
            return
        answered = time.time()
        node_point, pods = decode_summary(summary)
        self.storage.store_node(name, node_point, pods)
        # each hop of the metrics' delay, to the millisecond (bench/hpa_bench.py reads it at -v 4)
        log.debug("node %s: scraped %d pods: asked %.3f answered %.3f stored %.3f", name, len(pods), asked,
                  answered, time.time())

    async def scrape_once(self) -> None:
        started = time.monotonic()
        nodes = self.nodes.list()
        await asyncio.gather(*(self.scrape_node(n) for n in nodes))
        live = {n.metadata.name for n in nodes}
        for gone in set(self.storage.node_pods) - live:
            self.storage.forget_node(gone)
        self.scrapes += 1
        self.last_duration = time.monotonic() - started

    async def run(self, stop: asyncio.Event) -> None:
        """Scrape every resolution (the first scrape, at start, was scrape_once's: wait a whole one first, so
        that no rate is taken over a few milliseconds)."""
        started = time.monotonic()
        while not stop.is_set():
            delay = max(self.resolution - (time.monotonic() - started), 0.0)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), delay)
            if stop.is_set():
                return
            started = time.monotonic()
            await self.scrape_once()
