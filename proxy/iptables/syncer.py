"""The proxier's sync: the cached Services and slices into the kernel, partially or in full.

Upstream's Proxier.syncProxyRules (pkg/proxy/iptables/proxier.go) around the pure rule building in
proxier.py: it remembers what each per-Service chain held after the last successful batch, so the
next batch rewrites only chains that changed; a failed batch forces the next sync to be full.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass

from machinery.api.core_v1 import Service
from machinery.api.discovery_v1 import EndpointSlice
from proxy.iptables.proxier import (
    ProxierConfig,
    RuleCache,
    build_rules,
    cleanup_batch,
    restore_batch,
)
from proxy.iptables.runner import Runner
from proxy.serviceport import (
    EndpointInfo,
    ServicePortInfo,
    ServicePortName,
    endpoints_of_slice,
    merge_endpoints,
    service_ports,
)

log = logging.getLogger(__name__)


@dataclass
class SyncResult:
    full: bool
    services: int
    written: int  # per-Service chains rewritten
    deleted: int
    seconds: float


class Proxier:
    def __init__(self, config: ProxierConfig, runner: Runner) -> None:
        self.config = config
        self.runner = runner
        self._written: dict[str, list[str]] | None = None  # None: the next sync is a full one
        self._present: set[str] = set()  # our per-Service chains in the kernel
        self._jumps_ensured = False
        self._cache: RuleCache = {}
        # each slice's endpoints by its key, with the resourceVersion they were read at
        self._slices: dict[str, tuple[str | None, list[tuple[ServicePortName, EndpointInfo]]]] = {}

    def force_full_sync(self) -> None:
        self._written = None
        self._cache = {}

    def ensure_jumps_next_sync(self) -> None:
        """Check the jump rules from the built-in chains again (the periodic sync: someone may have
        flushed a built-in chain; a flushed chain of ours fails the batch and forces a full sync)."""
        self._jumps_ensured = False

    async def read_kernel(self) -> None:
        """Which of our chains exist (a restarted proxy deletes what it no longer wants)."""
        c = self.config.chains
        self._present = {chain for chain in await self.runner.chains("nat")
                         if c.is_own(chain) and chain not in c.nat_top()}

    async def sync(self, services: Iterable[Service], slices: Iterable[EndpointSlice]) -> SyncResult:
        start = time.monotonic()
        ports: dict[ServicePortName, ServicePortInfo] = {}
        for service in services:
            for port in service_ports(service):
                ports[port.name] = port
        rules = build_rules(self.config, ports, self._endpoints(slices), self._cache)
        full = self._written is None
        batch = restore_batch(rules, self._written, self._present)
        try:
            await self.runner.restore(batch.text)
        except Exception:
            self.force_full_sync()
            await self.read_kernel()
            raise
        self._written = dict(rules.nat_chains)
        self._present = set(rules.nat_chains)
        if full or not self._jumps_ensured:
            # once the chains exist, then on full and periodic syncs
            for table, chain, rule in self.config.chains.jump_rules():
                if await self.runner.ensure_rule(table, chain, rule):
                    log.info("added the jump to %s in %s %s", rule[-1], table, chain)
            self._jumps_ensured = True
        return SyncResult(full, len(ports), len(batch.written), len(batch.deleted), time.monotonic() - start)

    def _endpoints(self, slices: Iterable[EndpointSlice]) -> dict[ServicePortName, list[EndpointInfo]]:
        """The endpoints of all slices, reading again only the slices whose resourceVersion moved."""
        seen: dict[str, tuple[str | None, list[tuple[ServicePortName, EndpointInfo]]]] = {}
        for s in slices:
            key = f"{s.metadata.namespace}/{s.metadata.name}"
            cached = self._slices.get(key)
            rv = s.metadata.resource_version
            seen[key] = cached if cached is not None and rv is not None and cached[0] == rv \
                else (rv, endpoints_of_slice(s))
        self._slices = seen
        return merge_endpoints(pairs for _, pairs in seen.values())

    async def cleanup(self) -> bool:
        """Remove every jump rule and chain of ours (upstream's --cleanup); True if there was any."""
        batch = cleanup_batch(await self.runner.save("filter", "nat"), self.config.chains)
        if batch:
            await self.runner.restore(batch)
        self.force_full_sync()
        self._present, self._jumps_ensured = set(), False
        return bool(batch)
