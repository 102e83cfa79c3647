"""The garbage collector: ownerReferences, cascading deletion (upstream pkg/controller/garbagecollector).

A graph of every object of every resource (events aside, as upstream) by uid, with edges from
each owner to the dependents that name it in `metadata.ownerReferences`, kept current by the
shared informers. Three kinds of work come out of it, one queue key per object:

- `delete/<uid>` (attemptToDelete): an object whose owners may all be gone. Each owner is looked
  up live by name and checked by uid (a recreated owner with the same name is not the owner), and
  - some owner still exists: nothing, or drop the references to owners that are gone or
    foreground-deleting (the object stays for its live owner);
  - every owner is foreground-deleting: the object is deleted with Foreground propagation itself,
    so its own blocking dependents go first;
  - no owner exists: the object is deleted (Background, or the propagation its own finalizers ask for).
  An owner marked `foregroundDeletion` (deletionTimestamp + that finalizer) instead waits until no
  dependent with `blockOwnerDeletion` remains, then loses the finalizer, which lets the apiserver
  delete it.
- `verify/<uid>`: an owner named by a dependent but not (yet) seen by an informer: looked up live,
  and if it does not exist, its dependents are collected (attemptToDelete of a virtual node).
- `orphan/<uid>`: an owner deleted with Orphan propagation (finalizer `orphan`) has the references
  to it removed from all its dependents, then loses the finalizer.

Deletes are made with a uid precondition, so an object recreated under the same name is never
deleted for its predecessor.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel

from machinery.api.apiextensions_v1 import custom_resource_model
from machinery.api.meta import OwnerReference
from machinery.api.resources import (
    RESOURCES,
    ResourceInfo,
    forget_discovered,
    register_discovered,
    resource_for_kind,
)
from machinery.client import KUBE_VERSION, ApiClient, ApiError, ClientError, retry_on_conflict
from machinery.controller import Controller
from machinery.informer import Informer, SharedInformerFactory, strip_managed_fields

log = logging.getLogger(__name__)

IDENTITY = "system:serviceaccount:kube-system:generic-garbage-collector"
USER_AGENT = f"kube-controller-manager/{KUBE_VERSION} (linux/amd64) minik8s/{IDENTITY}"

FINALIZER_ORPHAN = "orphan"
FINALIZER_FOREGROUND = "foregroundDeletion"

# upstream garbagecollector.DefaultIgnoredResources: events never own anything worth collecting
IGNORED_RESOURCES = frozenset({("", "events")})

Propagation = Literal["Orphan", "Background", "Foreground"]

_ABSENT_CACHE_SIZE = 4096
# how often the resources to monitor are read again from discovery (custom resources come and go with their
# CRDs); upstream's GarbageCollector.Sync runs every 30 s, shorter here so a new CRD's objects are collected soon
DISCOVERY_PERIOD = 10.0


_NO_DEPENDENTS: frozenset[GraphNode] = frozenset()


@dataclass(eq=False, slots=True)
class GraphNode:
    """One object (or a virtual owner not yet seen) in the dependency graph: one per Pod at least, so small
    (issue 19): slots, the owners list the informer caches (read-only), no set of dependents until one."""

    uid: str
    api_version: str
    kind: str
    name: str
    namespace: str | None
    owners: Sequence[OwnerReference] = ()
    dependents: set[GraphNode] | frozenset[GraphNode] = _NO_DEPENDENTS
    virtual: bool = False  # known only from a dependent's ownerReference
    being_deleted: bool = False  # deletionTimestamp set
    deleting_dependents: bool = False  # deletionTimestamp + foregroundDeletion

    def __repr__(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind} {where}{self.name} ({self.uid}{', virtual' if self.virtual else ''})"

    def add_dependent(self, node: GraphNode) -> None:
        if isinstance(self.dependents, frozenset):
            self.dependents = set()
        self.dependents.add(node)

    def discard_dependent(self, node: GraphNode) -> None:
        if isinstance(self.dependents, set):
            self.dependents.discard(node)

    def blocking_dependents(self) -> list[GraphNode]:
        """Dependents whose reference to this node has blockOwnerDeletion: foreground waits for them."""
        return [d for d in self.dependents
                if any(r.uid == self.uid and r.block_owner_deletion for r in d.owners)]


def _owner_refs(obj: Any) -> Sequence[OwnerReference]:
    refs: Sequence[OwnerReference] = obj.metadata.owner_references or ()  # the cached list: read, never changed
    return refs


def _deleting_dependents(meta: dict[str, Any]) -> bool:
    return bool(meta.get("deletionTimestamp")) and FINALIZER_FOREGROUND in (meta.get("finalizers") or [])


class GarbageCollector(Controller):
    """Deletes objects whose owners are gone, and runs foreground and orphan propagation."""

    name = "garbagecollector"

    def __init__(self, client: ApiClient, informers: SharedInformerFactory, *, workers: int = 20,
                 resources: Iterable[ResourceInfo] | None = None,
                 discovery_period: float | None = DISCOVERY_PERIOD) -> None:
        super().__init__(workers=workers)
        self.client = client
        # custom resources, found by discovery: (group, plural) → (info, its informer); None: built-ins only
        self.discovery_period = discovery_period if resources is None else None
        self._custom: dict[tuple[str, str], tuple[ResourceInfo, Informer[Any]]] = {}
        self.graph: dict[str, GraphNode] = {}
        self._absent: OrderedDict[str, None] = OrderedDict()  # uids known not to exist (uids never come back)
        self.monitored: list[ResourceInfo] = []
        for info in resources if resources is not None else RESOURCES:
            if (info.group, info.plural) in IGNORED_RESOURCES:
                continue
            if not {"list", "watch", "delete"} <= set(info.verbs):
                continue
            self._monitor(info, informers.informer_for(info.model))

    # -- the graph builder (runs in the informers' handler tasks; synchronous, so atomic) -------

    def _monitor(self, info: ResourceInfo, informer: Informer[Any]) -> None:
        informer.add_event_handler(
            on_add=lambda obj: self._observe(info, obj, None),
            on_update=lambda old, new: self._observe(info, new, old),
            on_delete=lambda obj: self._forget(obj.metadata.uid, observed=True),
        )
        self.informers.append(informer)
        self.monitored.append(info)

    def _observe(self, info: ResourceInfo, obj: BaseModel, old: BaseModel | None) -> None:
        meta = obj.metadata  # type: ignore[attr-defined]
        uid = meta.uid
        if not uid:
            return
        node = self.graph.get(uid)
        refs = _owner_refs(obj)
        if node is None:
            node = GraphNode(uid, info.api_version, info.kind, meta.name or "", meta.namespace, owners=refs)
            self.graph[uid] = node
            self._link(node, refs)
        else:
            if node.virtual:  # seen at last: its identity is now the real one
                node.virtual = False
                node.api_version, node.kind, node.name, node.namespace = \
                    info.api_version, info.kind, meta.name or "", meta.namespace
            self._relink(node, refs)
        finalizers = meta.finalizers or []
        was_deleting_dependents = node.deleting_dependents
        node.being_deleted = meta.deletion_timestamp is not None
        node.deleting_dependents = node.being_deleted and FINALIZER_FOREGROUND in finalizers
        if node.being_deleted and FINALIZER_ORPHAN in finalizers:
            old_meta = old.metadata if old is not None else None  # type: ignore[attr-defined]
            if old_meta is None or old_meta.deletion_timestamp is None or FINALIZER_ORPHAN not in (
                    old_meta.finalizers or []):
                self.queue.add(f"orphan/{uid}")
        if node.deleting_dependents and not was_deleting_dependents:
            for dependent in node.dependents:
                self.queue.add(f"delete/{dependent.uid}")
            self.queue.add(f"delete/{uid}")

    def _link(self, node: GraphNode, refs: Sequence[OwnerReference]) -> None:
        for ref in refs:
            owner = self.graph.get(ref.uid)
            if owner is None:
                info = resource_for_kind(ref.api_version, ref.kind)
                namespace = node.namespace if info is None or info.namespaced else None
                owner = GraphNode(ref.uid, ref.api_version, ref.kind, ref.name, namespace, virtual=True)
                self.graph[ref.uid] = owner
                self.queue.add(f"verify/{ref.uid}")  # does the virtual owner exist?
            owner.add_dependent(node)
            if owner.deleting_dependents:  # a dependent appearing while its owner deletes in the foreground
                self.queue.add(f"delete/{node.uid}")

    def _relink(self, node: GraphNode, refs: Sequence[OwnerReference]) -> None:
        old = {r.uid: r for r in node.owners}
        new = {r.uid: r for r in refs}
        if old == new:
            return
        for uid, ref in old.items():
            owner = self.graph.get(uid)
            if owner is None:
                continue
            if uid not in new:
                owner.discard_dependent(node)
                if owner.virtual and not owner.dependents:
                    del self.graph[uid]
            unblocked = ref.block_owner_deletion and (uid not in new or not new[uid].block_owner_deletion)
            if owner.deleting_dependents and unblocked:
                self.queue.add(f"delete/{uid}")  # one blocker fewer: the owner may be finished
        node.owners = refs
        self._link(node, [r for u, r in new.items() if u not in old])

    def _forget(self, uid: str | None, *, observed: bool) -> None:
        """The object is gone (an informer saw it deleted, or a live read found no such uid)."""
        if not uid:
            return
        node = self.graph.get(uid)
        if node is None or (not observed and not node.virtual):
            return  # a live 404 for an object an informer knows: its delete event is on the way
        del self.graph[uid]
        self._remember_absent(uid)
        for ref in node.owners:
            owner = self.graph.get(ref.uid)
            if owner is None:
                continue
            owner.discard_dependent(node)
            if owner.deleting_dependents:
                self.queue.add(f"delete/{owner.uid}")
            elif owner.virtual and not owner.dependents:
                del self.graph[owner.uid]
        for dependent in node.dependents:
            self.queue.add(f"delete/{dependent.uid}")

    def _remember_absent(self, uid: str) -> None:
        self._absent[uid] = None
        self._absent.move_to_end(uid)
        while len(self._absent) > _ABSENT_CACHE_SIZE:
            self._absent.popitem(last=False)

    # -- running ----------------------------------------------------------------------------

    async def run(self) -> None:
        """Start the workers once the graph holds what the first lists returned (upstream waits for
        the graph builder's sync too), so owners are not mistaken for virtual ones at start."""
        rediscover = None
        if self.discovery_period is not None:
            await self._sync_discovery()
            rediscover = asyncio.create_task(self._rediscover(self.discovery_period))
        try:
            await self._run_synced()
        finally:
            if rediscover is not None:
                rediscover.cancel()
            for key in list(self._custom):
                self._stop_custom(key)

    async def _run_synced(self) -> None:
        for informer in self.informers:
            await informer.wait_for_sync()
        for informer in self.informers:
            await informer.wait_for_handlers()
        log.info("garbagecollector: graph synced: %d objects over %d resources", len(self.graph),
                 len(self.monitored))
        await super().run()

    # -- custom resources: what discovery lists (upstream GarbageCollector.Sync) ------------------

    async def _rediscover(self, period: float) -> None:
        while True:
            await asyncio.sleep(period)
            await self._sync_discovery()

    async def _sync_discovery(self) -> None:
        """Monitor every custom resource discovery lists now (list, watch and delete verbs, its group's
        preferred version); stop monitoring those gone."""
        builtin = {info.group for info in RESOURCES}
        found: dict[tuple[str, str], ResourceInfo] = {}
        try:
            groups = await self.client.request("GET", "/apis")
            for group in (groups or {}).get("groups") or []:
                if group.get("name") in builtin:
                    continue
                gv = (group.get("preferredVersion") or {}).get("groupVersion") or ""
                listing = await self.client.request("GET", f"/apis/{gv}")
                name, _, version = gv.partition("/")
                for r in (listing or {}).get("resources") or []:
                    if "/" in r.get("name", "") or not {"list", "watch", "delete"} <= set(r.get("verbs") or []):
                        continue
                    found[(name, r["name"])] = ResourceInfo(
                        name, version, r["kind"], r["name"], r.get("singularName") or "", bool(r.get("namespaced")),
                        custom_resource_model(name, version, r["kind"]), verbs=tuple(r["verbs"]))
        except (ClientError, OSError) as e:
            log.warning("garbagecollector: discovery: %s", e)
            return
        for key, info in found.items():
            known = self._custom.get(key)
            if known is not None and known[0] == info:
                continue
            if known is not None:
                self._stop_custom(key)
            register_discovered(info)
            informer: Informer[Any] = Informer(self.client, info.model, transform=strip_managed_fields)
            self._monitor(info, informer)
            informer.start()
            self._custom[key] = (info, informer)
            log.info("garbagecollector: monitoring %s", info.group_resource)
        for key in set(self._custom) - set(found):
            self._stop_custom(key)

    def _stop_custom(self, key: tuple[str, str]) -> None:
        info, informer = self._custom.pop(key)
        informer.stop()
        if informer in self.informers:
            self.informers.remove(informer)
        if info in self.monitored:
            self.monitored.remove(info)
        forget_discovered(*key)

    async def reconcile(self, key: str) -> float | None:
        action, _, uid = key.partition("/")
        node = self.graph.get(uid)
        if node is None:
            return None
        if action == "orphan":
            await self._orphan_dependents(node)
            return None
        if action == "verify" and not node.virtual:
            return None  # an informer has shown the owner meanwhile (as at start, when lists race)
        return await self._attempt_to_delete(node)

    # -- attemptToDelete --------------------------------------------------------------------

    def _info(self, node: GraphNode) -> ResourceInfo | None:
        info = resource_for_kind(node.api_version, node.kind)
        if info is None:
            log.warning("garbagecollector: %r: no resource serves %s %s", node, node.api_version, node.kind)
        return info

    def _path_namespace(self, info: ResourceInfo, namespace: str | None) -> str | None:
        return namespace if info.namespaced else None

    async def _get_live(self, info: ResourceInfo, name: str, namespace: str | None) -> dict[str, Any] | None:
        try:
            return await self.client.get_raw(info, name, self._path_namespace(info, namespace))
        except ApiError as e:
            if e.is_not_found:
                return None
            raise

    async def _attempt_to_delete(self, node: GraphNode) -> float | None:
        if node.being_deleted and not node.deleting_dependents:
            return None  # on its way out; its dependents are looked at when it is gone
        if node.virtual and node.uid in self._absent:
            self._forget(node.uid, observed=False)  # known gone: no need to ask
            return None
        info = self._info(node)
        if info is None:
            # an owner of a kind not (yet) discovered, a custom resource whose CRD is new: asked again, as
            # upstream requeues a REST-mapping failure
            return self.discovery_period or None if node.virtual else None
        latest = await self._get_live(info, node.name, node.namespace)
        if latest is None or latest["metadata"].get("uid") != node.uid:
            self._forget(node.uid, observed=False)  # a virtual owner that does not exist: collect dependents
            return None
        meta = latest["metadata"]
        if _deleting_dependents(meta):
            await self._process_deleting_dependents(node, info, latest)
            return None
        await self._collect(node, info, latest)
        # a virtual node that exists is looked at again until an informer shows it (upstream #56121)
        return 2.0 if node.virtual and info in self.monitored and self.graph.get(node.uid) is node else None

    async def _collect(self, node: GraphNode, info: ResourceInfo, latest: dict[str, Any]) -> None:
        """Decide from the live object's owner references (upstream attemptToDeleteItem's switch)."""
        meta = latest["metadata"]
        refs = [OwnerReference.model_validate(r) for r in meta.get("ownerReferences") or []]
        if not refs:
            return
        solid, dangling, waiting = await self._classify(node, refs)
        if solid:
            if not dangling and not waiting:
                return
            gone = {r.uid for r in dangling + waiting}
            log.info("garbagecollector: %r keeps owner(s) %s; removing references to %s", node,
                     [r.name for r in solid], sorted(gone))
            await self._remove_owner_refs(info, node, gone)
            return
        if waiting and node.dependents:
            if any(d.deleting_dependents for d in node.dependents):
                # a cycle (the dependent waits for us while we wait for it) would hang: unblock our owners
                await self._unblock_owner_refs(info, node)
            await self._delete(info, node, "Foreground")
            return
        finalizers = meta.get("finalizers") or []
        policy: Propagation = "Orphan" if FINALIZER_ORPHAN in finalizers else \
            "Foreground" if FINALIZER_FOREGROUND in finalizers else "Background"
        await self._delete(info, node, policy)

    async def _classify(self, node: GraphNode, refs: list[OwnerReference]
                        ) -> tuple[list[OwnerReference], list[OwnerReference], list[OwnerReference]]:
        """(solid, dangling, waitingForDependentsDeletion) owner references, by live lookups."""
        solid: list[OwnerReference] = []
        dangling: list[OwnerReference] = []
        waiting: list[OwnerReference] = []
        for ref in refs:
            if ref.uid in self._absent:
                dangling.append(ref)
                continue
            info = resource_for_kind(ref.api_version, ref.kind)
            if info is None:
                log.warning("garbagecollector: %r names owner %s of unknown kind %s %s; keeping it", node,
                            ref.name, ref.api_version, ref.kind)
                solid.append(ref)
                continue
            if info.namespaced and not node.namespace:
                log.warning("garbagecollector: cluster-scoped %r names namespaced owner %s %s; ignoring it",
                            node, ref.kind, ref.name)
                solid.append(ref)
                continue
            owner = await self._get_live(info, ref.name, node.namespace)
            if owner is None or owner["metadata"].get("uid") != ref.uid:
                self._remember_absent(ref.uid)
                dangling.append(ref)
            elif _deleting_dependents(owner["metadata"]):
                waiting.append(ref)
            else:
                solid.append(ref)
        return solid, dangling, waiting

    async def _process_deleting_dependents(self, node: GraphNode, info: ResourceInfo,
                                           latest: dict[str, Any]) -> None:
        blocking = node.blocking_dependents()
        if not blocking:
            log.info("garbagecollector: %r has no blocking dependents left; removing %s", node,
                     FINALIZER_FOREGROUND)
            await self._remove_finalizer(info, node, FINALIZER_FOREGROUND)
            return
        for dependent in blocking:
            if not dependent.deleting_dependents:
                self.queue.add(f"delete/{dependent.uid}")

    async def _delete(self, info: ResourceInfo, node: GraphNode, policy: Propagation) -> None:
        log.info("garbagecollector: deleting %r, propagationPolicy=%s", node, policy)
        try:
            await self.client.delete_raw(info, node.name, self._path_namespace(info, node.namespace),
                                         propagation_policy=policy, preconditions={"uid": node.uid})
        except ApiError as e:
            if e.is_not_found or e.is_conflict:  # gone, or another object now has the name
                return
            raise

    # -- writes that read, change and compare-and-swap ----------------------------------------

    async def _rewrite(self, info: ResourceInfo, node: GraphNode, change: Any) -> None:
        """GET, apply `change(obj) -> bool` (False: nothing to do), PUT with the resourceVersion; 409 retried."""
        namespace = self._path_namespace(info, node.namespace)

        async def attempt() -> None:
            obj = await self._get_live(info, node.name, node.namespace)
            if obj is None or obj["metadata"].get("uid") != node.uid:
                return
            if change(obj):
                await self.client.update_raw(info, node.name, obj, namespace)

        try:
            await retry_on_conflict(attempt, attempts=10)
        except ApiError as e:
            if not e.is_not_found:
                raise

    async def _remove_finalizer(self, info: ResourceInfo, node: GraphNode, finalizer: str) -> None:
        def change(obj: dict[str, Any]) -> bool:
            finalizers = obj["metadata"].get("finalizers") or []
            if finalizer not in finalizers:
                return False
            obj["metadata"]["finalizers"] = [f for f in finalizers if f != finalizer]
            return True

        await self._rewrite(info, node, change)

    async def _remove_owner_refs(self, info: ResourceInfo, node: GraphNode, owner_uids: set[str]) -> None:
        def change(obj: dict[str, Any]) -> bool:
            refs = obj["metadata"].get("ownerReferences") or []
            kept = [r for r in refs if r.get("uid") not in owner_uids]
            if len(kept) == len(refs):
                return False
            obj["metadata"]["ownerReferences"] = kept
            return True

        await self._rewrite(info, node, change)

    async def _unblock_owner_refs(self, info: ResourceInfo, node: GraphNode) -> None:
        def change(obj: dict[str, Any]) -> bool:
            changed = False
            for ref in obj["metadata"].get("ownerReferences") or []:
                if ref.get("blockOwnerDeletion"):
                    ref["blockOwnerDeletion"] = False
                    changed = True
            return changed

        await self._rewrite(info, node, change)

    # -- attemptToOrphan --------------------------------------------------------------------

    async def _orphan_dependents(self, owner: GraphNode) -> None:
        info = self._info(owner)
        if info is None:
            return
        dependents = list(owner.dependents)
        results = await asyncio.gather(*(self._orphan_one(d, owner.uid) for d in dependents), return_exceptions=True)
        failures = [r for r in results if isinstance(r, BaseException)]
        if failures:
            raise RuntimeError(f"orphaning {len(failures)} dependent(s) of {owner!r} failed: {failures[0]}")
        log.info("garbagecollector: orphaned %d dependent(s) of %r; removing %s", len(dependents), owner,
                 FINALIZER_ORPHAN)
        await self._remove_finalizer(info, owner, FINALIZER_ORPHAN)

    async def _orphan_one(self, dependent: GraphNode, owner_uid: str) -> None:
        info = self._info(dependent)
        if info is not None:
            await self._remove_owner_refs(info, dependent, {owner_uid})
