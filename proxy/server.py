"""kube-proxy's process: informers, the bounded-frequency sync loop, /healthz and /metrics.

Follows upstream's cmd/kube-proxy/app/server.go, pkg/util/async/bounded_frequency_runner.go (a
change asks for a sync; syncs are at least --min-sync-period apart and at most --sync-period) and
pkg/proxy/healthcheck/proxier_health.go (/healthz answers 200 with lastUpdated/currentTime while the
last successful sync is younger than twice the sync period, 503 otherwise).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import gc
import logging
import time
from datetime import UTC, datetime
from typing import Any

import prometheus_client
from aiohttp import web

from machinery.api.core_v1 import Service
from machinery.api.discovery_v1 import EndpointSlice
from machinery.client import ApiClient
from machinery.informer import Informer, SharedInformerFactory
from proxy.iptables.syncer import Proxier, SyncResult

log = logging.getLogger(__name__)

FULL_SYNC_PERIOD = 3600.0  # upstream's proxyutil.FullSyncPeriod: every chain rewritten at least hourly


def release_memory() -> None:
    """Return freed heap to the system (glibc's malloc_trim): Python's allocator keeps the peak of a
    large batch otherwise, and RSS is what a node's operator sees."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


class Metrics:
    """Upstream's kubeproxy_* metrics that say how syncs go (pkg/proxy/metrics/metrics.go)."""

    def __init__(self) -> None:
        self.registry = prometheus_client.CollectorRegistry()
        buckets = (0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256, 0.512, 1.024, 2.048, 4.096, 8.192)
        self.sync_duration = prometheus_client.Histogram(
            "kubeproxy_sync_proxy_rules_duration_seconds", "SyncProxyRules latency in seconds",
            buckets=buckets, registry=self.registry)
        self.full_sync_duration = prometheus_client.Histogram(
            "kubeproxy_sync_full_proxy_rules_duration_seconds", "SyncProxyRules latency in seconds for full resyncs",
            buckets=buckets, registry=self.registry)
        self.partial_sync_duration = prometheus_client.Histogram(
            "kubeproxy_sync_partial_proxy_rules_duration_seconds",
            "SyncProxyRules latency in seconds for partial resyncs", buckets=buckets, registry=self.registry)
        self.last_sync = prometheus_client.Gauge(
            "kubeproxy_sync_proxy_rules_last_timestamp_seconds", "The last time proxy rules were successfully synced",
            registry=self.registry)
        self.restore_failures = prometheus_client.Counter(
            "kubeproxy_sync_proxy_rules_iptables_restore_failures", "Cumulative proxy iptables restore failures",
            registry=self.registry)
        self.chains_written = prometheus_client.Gauge(
            "kubeproxy_sync_proxy_rules_last_written_chains", "Per-Service chains written by the last sync "
            "(minik8s)", registry=self.registry)
        self.services = prometheus_client.Gauge(
            "kubeproxy_sync_proxy_rules_service_ports", "Service ports programmed by the last sync (minik8s)",
            registry=self.registry)

    def observe(self, result: SyncResult) -> None:
        self.sync_duration.observe(result.seconds)
        (self.full_sync_duration if result.full else self.partial_sync_duration).observe(result.seconds)
        self.last_sync.set_to_current_time()
        self.chains_written.set(result.written)
        self.services.set(result.services)


class ProxyServer:
    def __init__(self, client: ApiClient, proxier: Proxier, *, node_name: str, sync_period: float,
                 min_sync_period: float) -> None:
        self.client = client
        self.proxier = proxier
        self.node_name = node_name
        self.sync_period = sync_period
        self.min_sync_period = min_sync_period
        self.factory = SharedInformerFactory(client)
        self.services: Informer[Service] = self.factory.informer_for(Service)
        self.slices: Informer[EndpointSlice] = self.factory.informer_for(EndpointSlice)
        self.metrics = Metrics()
        self.last_synced: float | None = None  # wall time of the last successful sync
        self.syncs = 0
        self._change = asyncio.Event()
        for informer in (self.services, self.slices):
            informer.add_event_handler(self._changed, self._changed_update, self._changed)

    def _changed(self, _obj: Any) -> None:
        self._change.set()

    def _changed_update(self, _old: Any, _new: Any) -> None:
        self._change.set()

    async def sync_once(self) -> SyncResult:
        try:
            result = await self.proxier.sync(self.services.list(), self.slices.list())
        except Exception:
            self.metrics.restore_failures.inc()
            raise
        self.metrics.observe(result)
        if result.full:
            release_memory()  # a full sync's batch is megabytes at 1,000 Services; give them back
        self.last_synced = time.time()
        self.syncs += 1
        log.log(logging.INFO if result.full else logging.DEBUG,
                "synced %s: %d service ports, %d chains written, %d deleted in %.3fs",
                "in full" if result.full else "partially", result.services, result.written, result.deleted,
                result.seconds)
        return result

    async def run(self, stop: asyncio.Event) -> None:
        """Sync on every change (at most once per min_sync_period), at least every sync_period, and in
        full at least every FULL_SYNC_PERIOD."""
        self.factory.start()
        await self.proxier.read_kernel()
        while not await self.factory.wait_for_cache_sync(timeout=5):
            if stop.is_set():
                return
            log.info("waiting for the Service and EndpointSlice caches")
        last_run = 0.0
        last_full = last_periodic = time.monotonic()
        while not stop.is_set():
            self._change.clear()
            if time.monotonic() - last_full >= FULL_SYNC_PERIOD:
                self.proxier.force_full_sync()
                last_full = time.monotonic()
            if time.monotonic() - last_periodic >= self.sync_period:
                self.proxier.ensure_jumps_next_sync()
                last_periodic = time.monotonic()
            last_run = time.monotonic()
            try:
                await self.sync_once()
            except Exception as e:
                log.error("sync failed, the next one is a full sync: %s", e)
                self._change.set()  # retry after min_sync_period
            # wait for a change (or the periodic sync), then at least min_sync_period after the last run
            waiters = {asyncio.ensure_future(self._change.wait()), asyncio.ensure_future(stop.wait())}
            remaining = self.sync_period - (time.monotonic() - last_periodic)
            _, pending = await asyncio.wait(waiters, timeout=max(remaining, 0),
                                            return_when=asyncio.FIRST_COMPLETED)
            for waiter in pending:
                waiter.cancel()
            delay = self.min_sync_period - (time.monotonic() - last_run)
            if delay > 0 and not stop.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), delay)

    # -- /healthz and /metrics -------------------------------------------------------------

    def healthy(self) -> bool:
        return self.last_synced is not None and time.time() - self.last_synced < 2 * self.sync_period

    async def _healthz(self, _request: web.Request) -> web.Response:
        now = datetime.now(UTC)
        last = datetime.fromtimestamp(self.last_synced, UTC) if self.last_synced else None
        body = {"lastUpdated": last.isoformat() if last else "", "currentTime": now.isoformat(),
                "nodeName": self.node_name, "nodeEligible": True}
        return web.json_response(body, status=200 if self.healthy() else 503)

    async def _metrics(self, _request: web.Request) -> web.Response:
        return web.Response(body=prometheus_client.generate_latest(self.metrics.registry),
                            headers={"Content-Type": prometheus_client.CONTENT_TYPE_LATEST})

    async def serve(self, healthz: str | None, metrics: str | None) -> list[web.AppRunner]:
        """Start the health and metrics servers on host:port addresses (one server when equal)."""
        runners = []
        addresses: dict[str, list[tuple[str, Any]]] = {}
        if healthz:
            addresses.setdefault(healthz, []).append(("/healthz", self._healthz))
            addresses[healthz].append(("/livez", self._healthz))
        if metrics:
            addresses.setdefault(metrics, []).append(("/metrics", self._metrics))
        for address, routes in addresses.items():
            host, _, port = address.rpartition(":")
            app = web.Application()
            for path, handler in routes:
                app.router.add_get(path, handler)
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            await web.TCPSite(runner, host or "0.0.0.0", int(port)).start()
            runners.append(runner)
        return runners
