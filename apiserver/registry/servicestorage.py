"""The Service's own storage beside the generic Store (upstream: pkg/registry/core/service/storage/storage.go
and alloc.go): a Service's ClusterIP and NodePorts are taken from the etcd-kept ranges
(apiserver/registry/allocator.py) before the Service is written, and given back when the write fails, when
an update no longer needs them (NodePort → ClusterIP frees its ports) and when the Service is deleted.
Without a transaction spanning both keys, a crash in between may leak an item; upstream's repair loop
finds those, and so does `repair()` here.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass, field

from apiserver import errors
from apiserver.registry.allocator import (
    AllocationError,
    NodePortAllocator,
    RangeFull,
    ServiceIPAllocator,
)
from apiserver.registry.generic import Finish, Store, WriteOptions
from apiserver.registry.service import (
    CLUSTER_IP_NONE,
    is_headless,
    needs_cluster_ip,
    needs_health_check,
    needs_node_port,
    validate_service,
)
from apiserver.storage.predicate import Predicate
from apiserver.validation import FieldError, invalid
from machinery.types import Obj

log = logging.getLogger(__name__)

# upstream numRepairsBeforeLeakCleanup
LEAK_CHECKS = 3


@dataclass
class _Taken:
    """What one write took from the ranges (and gives back if it fails)."""

    ips: list[str] = field(default_factory=list)
    ports: list[int] = field(default_factory=list)


def node_ports_of(spec: Obj) -> set[int]:
    """Every node port a Service holds (its ports' and the health check's)."""
    ports = {p["nodePort"] for p in spec.get("ports") or [] if p.get("nodePort")}
    if spec.get("healthCheckNodePort"):
        ports.add(spec["healthCheckNodePort"])
    return ports


class ServiceStore(Store):
    """Services, with their ClusterIP and NodePorts allocated."""

    ips: ServiceIPAllocator
    node_ports: NodePortAllocator

    def use_allocators(self, ips: ServiceIPAllocator, node_ports: NodePortAllocator) -> None:
        self.ips, self.node_ports = ips, node_ports
        self._suspects: dict[str | int, int] = {}  # item -> repairs in a row that found it unheld

    # -- IP families: a single-stack cluster offers one (upstream initIPFamilyFields) ------------

    def _init_ip_families(self, spec: Obj) -> list[FieldError]:
        if spec.get("type") == "ExternalName":
            return []
        family = self.ips.family
        policy = spec.get("ipFamilyPolicy")
        errs: list[FieldError] = []
        if policy is None:
            spec["ipFamilyPolicy"] = "SingleStack"
        elif policy == "RequireDualStack":
            errs.append(invalid("spec.ipFamilyPolicy", policy,
                                "this cluster is not configured for dual-stack services"))
        families: list[str] = list(spec.get("ipFamilies") or [])
        for i, wanted in enumerate(families):
            if wanted != family:
                errs.append(invalid(f"spec.ipFamilies[{i}]", wanted, "not configured on this cluster"))
        if not families:
            spec["ipFamilies"] = [family]
        ips = [ip for ip in spec.get("clusterIPs") or [] if ip != CLUSTER_IP_NONE]
        if len(ips) > 1:
            errs.append(invalid("spec.clusterIPs", spec.get("clusterIPs"),
                                "this cluster is not configured for dual-stack services"))
        return errs

    def _failed(self, obj: Obj, errs: list[FieldError]) -> errors.ApiError:
        meta = obj.get("metadata") or {}
        return errors.invalid(self.info, meta.get("name") or meta.get("generateName") or "", errs)

    # -- taking and giving back ---------------------------------------------------------------

    async def _take_cluster_ip(self, obj: Obj, taken: _Taken, dry_run: bool) -> None:
        spec = obj["spec"]
        wanted = [ip for ip in spec.get("clusterIPs") or [] if ip]
        if wanted:
            try:
                await self.ips.allocate(wanted[0], dry_run)
            except AllocationError as e:
                raise self._failed(obj, [invalid("spec.clusterIPs", wanted,
                                                 f"failed to allocate IP {wanted[0]}: {e}")]) from None
            ip = wanted[0]
        else:
            try:
                ip = await self.ips.allocate_next(dry_run)
            except RangeFull as e:
                raise errors.internal(f"failed to allocate a serviceIP: {e}") from None
        if not dry_run:
            taken.ips.append(ip)
        spec["clusterIP"], spec["clusterIPs"] = ip, [ip]

    async def _take_node_ports(self, obj: Obj, held: set[int], taken: _Taken, dry_run: bool) -> None:
        """Each port's nodePort: the one asked for, or one picked (ports of one number share it, as
        DNS's TCP and UDP 53 do); a port already held by the old object is kept as it is."""
        spec = obj["spec"]
        mine: set[int] = set(held)  # this Service's own (a repeat is no new allocation)

        async def take(port: int | None, path: str) -> int:
            if port and port in mine:
                return port
            try:
                if port:
                    await self.node_ports.allocate(port, dry_run)
                else:
                    port = await self.node_ports.allocate_next(dry_run)
            except RangeFull as e:
                raise errors.internal(f"failed to allocate a nodePort: {e}") from None
            except AllocationError as e:
                raise self._failed(obj, [invalid(path, port, str(e))]) from None
            mine.add(port)
            if not dry_run:
                taken.ports.append(port)
            return port

        by_number: dict[int, int] = {}
        ports: list[Obj] = spec.get("ports") or []
        for i, p in enumerate(ports):  # the asked-for ones first: a picked one must not take them
            if p.get("nodePort"):
                by_number.setdefault(p.get("port") or 0, await take(p["nodePort"], f"spec.ports[{i}].nodePort"))
        for i, p in enumerate(ports):
            if not p.get("nodePort"):
                number = p.get("port") or 0
                p["nodePort"] = by_number.get(number) or await take(None, f"spec.ports[{i}].nodePort")
                by_number[number] = p["nodePort"]
        if needs_health_check(spec):
            spec["healthCheckNodePort"] = await take(spec.get("healthCheckNodePort"), "spec.healthCheckNodePort")

    async def _give_back(self, ips: list[str], ports: list[int] | set[int]) -> None:
        for ip in ips:
            await self.ips.release(ip)
        for port in ports:
            await self.node_ports.release(port)

    def _finisher(self, taken: _Taken, freed_ips: list[str], freed_ports: set[int]) -> Finish:
        async def finish(succeeded: bool) -> None:
            try:
                if succeeded:
                    await self._give_back(freed_ips, freed_ports)
                else:
                    await self._give_back(taken.ips, taken.ports)
            except Exception:  # the write's answer stands; repair() finds what stayed taken
                log.exception("giving back service IPs %s / node ports %s", taken.ips, taken.ports)

        return finish

    # -- the Store's hooks --------------------------------------------------------------------

    async def begin_create(self, obj: Obj, opts: WriteOptions) -> Finish:
        spec = obj.get("spec") or {}
        if validate_service(obj):
            return await super().begin_create(obj, opts)  # validation answers for it, nothing is taken
        errs = self._init_ip_families(spec)
        if errs:
            raise self._failed(obj, errs)
        taken = _Taken()
        try:
            if needs_cluster_ip(spec):
                await self._take_cluster_ip(obj, taken, opts.dry_run)
            if needs_node_port(spec) or needs_health_check(spec):
                await self._take_node_ports(obj, set(), taken, opts.dry_run)
        except BaseException:
            await self._give_back(taken.ips, taken.ports)
            raise
        return self._finisher(taken, [], set())

    async def begin_update(self, new: Obj, old: Obj, opts: WriteOptions) -> Finish:
        spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
        if validate_service(new) or spec == old_spec:
            return await super().begin_update(new, old, opts)
        if (needs_cluster_ip(spec) or is_headless(spec)) and not (needs_cluster_ip(old_spec) or is_headless(old_spec)):
            errs = self._init_ip_families(spec)  # ExternalName → a type with IP families
            if errs:
                raise self._failed(new, errs)
        taken = _Taken()
        freed_ips: list[str] = []
        try:
            if needs_cluster_ip(spec) and not needs_cluster_ip(old_spec):
                await self._take_cluster_ip(new, taken, opts.dry_run)
            elif needs_cluster_ip(old_spec) and not needs_cluster_ip(spec):
                freed_ips = [ip for ip in old_spec.get("clusterIPs") or [] if ip != CLUSTER_IP_NONE]
            old_ports = node_ports_of(old_spec)
            if needs_node_port(spec) or needs_health_check(spec):
                await self._take_node_ports(new, old_ports, taken, opts.dry_run)
            freed_ports = old_ports - node_ports_of(spec)
        except BaseException:
            await self._give_back(taken.ips, taken.ports)
            raise
        return self._finisher(taken, freed_ips, freed_ports)

    async def after_delete(self, obj: Obj) -> None:
        spec = obj.get("spec") or {}
        ips = [ip for ip in spec.get("clusterIPs") or [] if ip != CLUSTER_IP_NONE] if needs_cluster_ip(spec) else []
        try:
            await self._give_back(ips, node_ports_of(spec))
        except Exception:
            log.exception("giving back service IPs %s / node ports of deleted service", ips)

    # -- repair (upstream ipallocator/controller/repair.go, portallocator/controller/repair.go) ----

    async def repair(self) -> tuple[list[str], list[int]]:
        """Give back what no Service holds (a crash between taking and writing) once it has been seen
        unheld in LEAK_CHECKS repairs in a row (a create under way holds its items before its Service is
        written); take again what a Service holds but the bitmap lost. Returns what was given back."""
        services = (await self.list(None, Predicate.parse(None, None, None))).items
        held_ips: set[str] = set()
        held_ports: set[int] = set()
        for svc in services:
            spec = svc.get("spec") or {}
            if needs_cluster_ip(spec):
                held_ips.update(ip for ip in spec.get("clusterIPs") or [] if ip != CLUSTER_IP_NONE)
            held_ports |= node_ports_of(spec)
        unheld: set[str | int] = {ip for ip in await self.ips.allocated() if ip not in held_ips}
        unheld |= {p for p in await self.node_ports.allocated() if p not in held_ports}
        self._suspects = {item: self._suspects.get(item, 0) + 1 for item in unheld}
        leaked = [item for item, seen in self._suspects.items() if seen >= LEAK_CHECKS]
        freed_ips = [i for i in leaked if isinstance(i, str)]
        freed_ports = [i for i in leaked if isinstance(i, int)]
        if leaked:
            log.warning("repair: giving back leaked service IPs %s and node ports %s", freed_ips, freed_ports)
            await self._give_back(freed_ips, freed_ports)
            for item in leaked:
                del self._suspects[item]
        for ip in held_ips:
            with contextlib.suppress(AllocationError):  # held already, or outside the range (upstream warns)
                await self.ips.allocate(ip)
        for port in held_ports:
            with contextlib.suppress(AllocationError):
                await self.node_ports.allocate(port)
        return freed_ips, freed_ports
