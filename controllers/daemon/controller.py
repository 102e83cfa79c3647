"""The DaemonSet controller (upstream pkg/controller/daemon/daemon_controller.go and update.go): one pod
of the template on every eligible node.

One reconcile of a DaemonSet key, as upstream's syncDaemonSet:
1. construct the history: the ControllerRevision of the current template (created, or an old one given
   the highest revision number again after a `rollout undo`), its hash labels the pods;
2. if the expectations are satisfied (every pod create and delete asked for has been seen by the
   informer), manage: claim pods (adopt orphans the selector matches, release the others), then for
   every node decide (nodeSelector, required node affinity, taints against the template's tolerations
   plus the daemon tolerations) whether it should run a daemon pod: create one on an eligible node
   without one, delete the pods of a node that may no longer keep them, the extra pods of a node with
   several, and failed pods (FailedDaemonPod); then, for RollingUpdate, replace old pods as
   maxUnavailable / maxSurge allow (OnDelete waits for a user to delete them); prune old revisions;
3. write status (desired, current, misscheduled, ready, updated, available, unavailable,
   observedGeneration) through /status.

The pods are not bound here: as upstream since 1.12, each carries a required node affinity
`metadata.name In [node]` and the default scheduler binds it, so resources and ports are checked there.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from typing import Any

from controllers.controller_ref_manager import (
    ControllerRefManager,
    controller_ref,
    new_controller_ref,
    recheck_deletion_timestamp,
    resolve_controller_key,
)
from controllers.controller_utils import (
    ORPHAN_INDEX,
    ControllerExpectations,
    ensure_indexers,
    is_pod_available,
    is_pod_ready,
    label_selector_of,
    namespace_terminating,
    orphan_index,
    owned_and_orphans,
    owners_selecting,
    pod_body_from_template,
)
from controllers.daemon.history import (
    matches,
    new_revision,
    owned_revisions,
    revision_hash,
    revisions_to_prune,
)
from controllers.daemon.util import (
    CONTROLLER_REVISION_HASH_LABEL,
    POD_TEMPLATE_GENERATION_LABEL,
    FailedPodsBackoff,
    add_daemon_tolerations,
    is_pod_updated,
    node_name_affinity,
    node_should_run_daemon_pod,
    oldest_first,
    rolling_update_with_surge,
    rolling_update_without_surge,
    surge_and_unavailable,
    target_node_name,
    template_generation,
)
from machinery import timeutil
from machinery.api.apps_v1 import ControllerRevision, DaemonSet, DaemonSetStatus
from machinery.api.core_v1 import Node, Pod
from machinery.client import ApiClient, ApiError
from machinery.controller import Controller
from machinery.events import EventRecorder
from machinery.informer import (
    CONTROLLER_UID_INDEX,
    Informer,
    SharedInformerFactory,
    controller_uid_index,
    meta_namespace_key,
    split_meta_namespace_key,
)

log = logging.getLogger(__name__)

CONTROLLER_NAME = "daemonset-controller"
BURST_REPLICAS = 250  # creates/deletes per sync at most (upstream BurstReplicas)
MAX_CONCURRENT_WRITES = 32
BACKOFF_GC_INTERVAL = 60.0  # upstream BackoffGCInterval


def _error_text(e: Exception) -> str:
    return e.message if isinstance(e, ApiError) and e.message else str(e)


class DaemonSetsController(Controller):
    name = "daemonset"  # its --controllers name; it writes as the daemon-set-controller account

    def __init__(self, client: ApiClient, informers: SharedInformerFactory, workers: int = 2,
                 burst_replicas: int = BURST_REPLICAS) -> None:
        super().__init__(workers)
        self.client = client
        self.burst_replicas = burst_replicas
        self._writes = asyncio.Semaphore(MAX_CONCURRENT_WRITES)
        self.recorder = EventRecorder(client, CONTROLLER_NAME)
        self.expectations = ControllerExpectations()
        self.failed_pods_backoff = FailedPodsBackoff()
        self._backoff_gc_at = time.monotonic() + BACKOFF_GC_INTERVAL
        self.ds_informer: Informer[DaemonSet] = informers.informer_for(DaemonSet)
        self.pod_informer: Informer[Pod] = informers.informer_for(Pod)
        self.node_informer: Informer[Node] = informers.informer_for(Node)
        self.history_informer: Informer[ControllerRevision] = informers.informer_for(ControllerRevision)
        indexes = {CONTROLLER_UID_INDEX: controller_uid_index, ORPHAN_INDEX: orphan_index}
        ensure_indexers(self.pod_informer, indexes)
        ensure_indexers(self.history_informer, {CONTROLLER_UID_INDEX: controller_uid_index})
        self.ds_informer.add_event_handler(self._ds_changed, lambda old, cur: self._ds_changed(cur),
                                           self._ds_deleted)
        self.pod_informer.add_event_handler(self._pod_added, self._pod_updated, self._pod_deleted)
        self.node_informer.add_event_handler(self._node_changed, self._node_updated, self._node_changed)
        self.history_informer.add_event_handler(self._history_changed, lambda old, cur: self._history_changed(cur),
                                                self._history_changed)
        self.informers.extend([self.ds_informer, self.pod_informer, self.node_informer, self.history_informer])

    # -- event handlers ----------------------------------------------------------------------

    def _ds_changed(self, ds: DaemonSet) -> None:
        self.queue.add(meta_namespace_key(ds))

    def _ds_deleted(self, ds: DaemonSet) -> None:
        key = meta_namespace_key(ds)
        self.expectations.delete_expectations(key)
        self.queue.add(key)

    def _owner_key(self, obj: Any) -> str | None:
        return resolve_controller_key(obj, "DaemonSet", self.ds_informer.store)

    def _daemon_sets_selecting(self, pod: Pod) -> list[str]:
        return owners_selecting(pod, self.ds_informer.store.list())

    def _pod_added(self, pod: Pod) -> None:
        if pod.metadata.deletion_timestamp is not None:
            self._pod_deleted(pod)
            return
        key = self._owner_key(pod)
        if key is not None:
            self.expectations.creation_observed(key)
            self.queue.add(key)
        elif controller_ref(pod) is None:
            for key in self._daemon_sets_selecting(pod):
                self.queue.add(key)

    def _pod_updated(self, old: Pod, cur: Pod) -> None:
        if old.metadata.resource_version == cur.metadata.resource_version:
            return
        if cur.metadata.deletion_timestamp is not None and old.metadata.deletion_timestamp is None:
            self._pod_deleted(cur)  # a graceful delete counts as the deletion at once
            return
        for pod in (old, cur):
            key = self._owner_key(pod)
            if key is not None:
                self.queue.add(key)
                min_ready = self._min_ready_seconds(key)
                if min_ready > 0 and not is_pod_ready(old) and is_pod_ready(cur):
                    self.queue.add_after(key, min_ready + 1)  # look again when it becomes available
            elif controller_ref(pod) is None:
                for key in self._daemon_sets_selecting(pod):
                    self.queue.add(key)

    def _pod_deleted(self, pod: Pod) -> None:
        key = self._owner_key(pod)
        if key is not None:
            self.expectations.deletion_observed(key)
            self.queue.add(key)

    def _min_ready_seconds(self, key: str) -> int:
        ds = self.ds_informer.store.get(key)
        return (ds.spec.min_ready_seconds or 0) if ds is not None and ds.spec is not None else 0

    def _node_changed(self, node: Node) -> None:
        """A node came or went: every DaemonSet looks again (upstream narrows this to those whose
        verdict on the node changed; the verdict is cheap to recompute here)."""
        for ds in self.ds_informer.store.list():
            self.queue.add(meta_namespace_key(ds))

    def _node_updated(self, old: Node, cur: Node) -> None:
        if ((old.metadata.labels or {}) != (cur.metadata.labels or {})
                or (old.spec.taints if old.spec else None) != (cur.spec.taints if cur.spec else None)):
            self._node_changed(cur)

    def _history_changed(self, revision: ControllerRevision) -> None:
        key = self._owner_key(revision)
        if key is not None:
            self.queue.add(key)

    # -- reconcile ---------------------------------------------------------------------------

    async def reconcile(self, key: str) -> float | None:
        if time.monotonic() >= self._backoff_gc_at:  # upstream runs failedPodsBackoff.GC every minute
            self.failed_pods_backoff.gc()
            self._backoff_gc_at = time.monotonic() + BACKOFF_GC_INTERVAL
        namespace, _ = split_meta_namespace_key(key)
        ds = self.ds_informer.store.get(key)
        if ds is None:
            self.expectations.delete_expectations(key)
            return None
        if ds.metadata.deletion_timestamp is not None or ds.spec is None:
            return None  # the garbage collector removes its pods and revisions
        selector = label_selector_of(ds)
        if selector.empty:
            return None  # an empty selector matches everything: never act on it (upstream neither)
        old_revisions, current = await self._construct_history(ds)
        hash_ = (current.metadata.labels or {}).get(CONTROLLER_REVISION_HASH_LABEL, "")

        candidates = owned_and_orphans(self.pod_informer, ds.metadata.uid or "", namespace or "")
        manager = ControllerRefManager(self.client, ds, "apps/v1", "DaemonSet", selector, Pod,
                                       recheck_deletion_timestamp(self.client, ds))
        pods = await manager.claim(candidates)
        node_to_pods: dict[str, list[Pod]] = defaultdict(list)
        for pod in pods:
            node = target_node_name(pod)
            if node is not None:
                node_to_pods[node].append(pod)
        nodes = self.node_informer.store.list()

        after: float | None = None
        if self.expectations.satisfied(key):
            after = await self._manage(ds, key, nodes, node_to_pods, hash_)
            if ds.spec.update_strategy is not None and ds.spec.update_strategy.type == "RollingUpdate":
                await self._rolling_update(ds, key, nodes, node_to_pods, hash_)
            await self._cleanup_history(ds, old_revisions, pods)
        await self._update_status(ds, nodes, node_to_pods, hash_)
        return after

    # -- history -------------------------------------------------------------------------------

    async def _construct_history(self, ds: DaemonSet) -> tuple[list[ControllerRevision], ControllerRevision]:
        """constructHistory: (old revisions, the current one); the current one is created, or renumbered
        above every other when the template went back to an old revision's."""
        revisions = owned_revisions(self.history_informer.store.by_index(CONTROLLER_UID_INDEX, ds.metadata.uid or ""),
                                    ds)
        highest = max((r.revision for r in revisions), default=0)
        current_matches = [r for r in revisions if matches(ds, r)]
        old = [r for r in revisions if not matches(ds, r)]
        if current_matches:
            current = current_matches[-1]
            old.extend(current_matches[:-1])  # duplicates: kept as history, pruned in time
            if current.revision < highest:
                current = await self.client.patch(ControllerRevision, current.metadata.name or "",
                                                  {"revision": highest + 1}, namespace=ds.metadata.namespace)
            return old, current
        hash_ = revision_hash(ds)
        revision = new_revision(ds, hash_, highest + 1)
        try:
            current = await self.client.create(revision)
        except ApiError as e:
            if e.code != 409:
                raise
            existing = await self.client.get(ControllerRevision, revision.metadata.name or "", ds.metadata.namespace)
            ref = controller_ref(existing)
            if ref is None or ref.uid != ds.metadata.uid or existing.data != revision.data:
                await self._bump_collision_count(ds)  # a hash collision: the next try hashes differently
                raise
            current = existing
        return old, current

    async def _bump_collision_count(self, ds: DaemonSet) -> None:
        status = ds.status or DaemonSetStatus()
        status = status.model_copy(update={"collision_count": (status.collision_count or 0) + 1})
        await self.client.update_status(ds.model_copy(update={"status": status}))

    async def _cleanup_history(self, ds: DaemonSet, old: list[ControllerRevision], pods: list[Pod]) -> None:
        for revision in revisions_to_prune(ds, old, [p for p in pods if p.metadata.deletion_timestamp is None]):
            try:
                await self.client.delete(ControllerRevision, revision.metadata.name or "", ds.metadata.namespace)
            except ApiError as e:
                if not e.is_not_found:
                    raise

    # -- manage --------------------------------------------------------------------------------

    async def _manage(self, ds: DaemonSet, key: str, nodes: list[Node], node_to_pods: dict[str, list[Pod]],
                      hash_: str) -> float | None:
        """manage + podsShouldBeOnNode for every node, then one syncNodes."""
        assert ds.spec is not None
        max_surge, _ = surge_and_unavailable(ds, len(nodes))
        surge = max_surge > 0
        create_on: list[str] = []
        delete: list[Pod] = []
        retry_after: float | None = None
        known = set()
        for node in nodes:
            name = node.metadata.name or ""
            known.add(name)
            should_run, should_continue = node_should_run_daemon_pod(node, ds)
            pods = node_to_pods.get(name, [])
            if should_run and not pods:
                create_on.append(name)
            elif should_continue:
                running = []
                for pod in pods:
                    if pod.metadata.deletion_timestamp is not None:
                        continue
                    if pod.status is not None and pod.status.phase == "Failed":
                        delay = self.failed_pods_backoff.admit(ds, name)
                        if delay is not None:  # deleting it again now would be a hot loop with the kubelet
                            retry_after = delay if retry_after is None else min(retry_after, delay)
                            continue
                        self.recorder.event(ds, "Warning", "FailedDaemonPod",
                                            f"Found failed daemon pod {pod.metadata.namespace}/{pod.metadata.name} "
                                            f"on node {name}, will try to kill it")
                        delete.append(pod)
                        continue
                    running.append(pod)
                delete += self._extra_pods(ds, oldest_first(running), hash_, surge)
            elif pods:
                delete += [p for p in pods if p.metadata.deletion_timestamp is None]
        # pods pinned to nodes that no longer exist
        for name, pods in node_to_pods.items():
            if name not in known:
                delete += [p for p in pods if p.metadata.deletion_timestamp is None]
        await self._sync_nodes(ds, key, delete, create_on, hash_)
        return retry_after

    def _extra_pods(self, ds: DaemonSet, running: list[Pod], hash_: str, surge: bool) -> list[Pod]:
        """Of several running pods on one node: without surge all but the oldest; with surge the oldest
        updated and the oldest old pod may stay together until the updated one is available."""
        if len(running) <= 1:
            return []
        if not surge:
            return running[1:]
        assert ds.spec is not None
        generation = template_generation(ds)
        newest: Pod | None = None
        oldest: Pod | None = None
        out: list[Pod] = []
        for pod in running:
            if is_pod_updated(pod, hash_, generation) and newest is None:
                newest = pod
            elif not is_pod_updated(pod, hash_, generation) and oldest is None:
                oldest = pod
            else:
                out.append(pod)
        if newest is not None and oldest is not None and (
                not is_pod_ready(oldest) or is_pod_available(newest, ds.spec.min_ready_seconds or 0, timeutil.now())):
            out.append(oldest)
        return out

    async def _rolling_update(self, ds: DaemonSet, key: str, nodes: list[Node],
                              node_to_pods: dict[str, list[Pod]], hash_: str) -> None:
        assert ds.spec is not None
        if not self.expectations.satisfied(key):
            return  # manage just asked for changes: let them land first
        eligible = {node.metadata.name or "": node_should_run_daemon_pod(node, ds)[0] for node in nodes}
        desired = sum(eligible.values())
        max_surge, max_unavailable = surge_and_unavailable(ds, desired)
        now = timeutil.now()
        min_ready = ds.spec.min_ready_seconds or 0

        def available(pod: Pod) -> bool:
            return is_pod_available(pod, min_ready, now)

        # updatedDesiredNodeCounts: an eligible node without a pod is in the map too, so it counts as unavailable
        relevant = {name: node_to_pods.get(name, []) for name, wanted in eligible.items() if wanted}
        relevant.update({name: pods for name, pods in node_to_pods.items() if name in eligible})
        if max_surge == 0:
            doomed = rolling_update_without_surge(ds, relevant, hash_, max_unavailable, available)
            await self._sync_nodes(ds, key, doomed, [], hash_)
        else:
            doomed, surge_on = rolling_update_with_surge(ds, relevant, hash_, max_surge, available,
                                                         lambda name: eligible.get(name, False))
            await self._sync_nodes(ds, key, doomed, surge_on, hash_)

    async def _sync_nodes(self, ds: DaemonSet, key: str, delete: list[Pod], create_on: list[str], hash_: str) -> None:
        """syncNodes: create a pod on each node named, delete each pod given, within the burst limit."""
        assert ds.spec is not None
        create_on = create_on[:self.burst_replicas]
        delete = delete[:self.burst_replicas]
        if not create_on and not delete:
            return
        self.expectations.set_expectations(key, len(create_on), len(delete))
        log.info("%s: creating daemon pods on %s, deleting %s", key, create_on, [p.metadata.name for p in delete])
        template = ds.spec.template.model_copy(deep=True)
        labels = dict(template.metadata.labels or {}) if template.metadata else {}
        labels[CONTROLLER_REVISION_HASH_LABEL] = hash_
        generation = template_generation(ds)
        if generation is not None:
            labels[POD_TEMPLATE_GENERATION_LABEL] = generation
        assert template.metadata is not None and template.spec is not None
        template.metadata.labels = labels
        template.spec = add_daemon_tolerations(template.spec)
        body = pod_body_from_template(template, ds, new_controller_ref(ds, "apps/v1", "DaemonSet"))
        results = await asyncio.gather(*(self._create_pod(ds, key, body, node) for node in create_on),
                                       *(self._delete_pod(ds, key, pod) for pod in delete), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            raise errors[0]

    async def _create_pod(self, ds: DaemonSet, key: str, body: dict[str, Any], node_name: str) -> None:
        assert ds.spec is not None
        pod_body = {**body, "spec": dict(body["spec"])}
        pod_body["spec"]["affinity"] = node_name_affinity(ds.spec.template.spec.affinity if ds.spec.template.spec
                                                          else None, node_name).to_dict()
        try:
            async with self._writes:
                created = await self.client.create_raw(Pod, pod_body, ds.metadata.namespace)
        except Exception as e:
            self.expectations.creation_observed(key)  # never to be seen
            if namespace_terminating(e):
                return
            self.recorder.event(ds, "Warning", "FailedCreate", f"Error creating: {_error_text(e)}")
            raise
        self.recorder.event(ds, "Normal", "SuccessfulCreate", f"Created pod: {created['metadata']['name']}")

    async def _delete_pod(self, ds: DaemonSet, key: str, pod: Pod) -> None:
        name = pod.metadata.name or ""
        try:
            async with self._writes:
                await self.client.delete(Pod, name, pod.metadata.namespace)
        except Exception as e:
            self.expectations.deletion_observed(key)  # never to be seen
            if isinstance(e, ApiError) and e.is_not_found:
                return
            self.recorder.event(ds, "Warning", "FailedDelete", f"Error deleting: {_error_text(e)}")
            raise
        self.recorder.event(ds, "Normal", "SuccessfulDelete", f"Deleted pod: {name}")

    # -- status ----------------------------------------------------------------------------------

    def calculate_status(self, ds: DaemonSet, nodes: list[Node], node_to_pods: dict[str, list[Pod]],
                         hash_: str) -> DaemonSetStatus:
        """updateDaemonSetStatus' counts, node by node."""
        assert ds.spec is not None
        desired = current = misscheduled = ready = available = updated = 0
        now = timeutil.now()
        generation = template_generation(ds)
        for node in nodes:
            should_run, _ = node_should_run_daemon_pod(node, ds)
            pods = [p for p in node_to_pods.get(node.metadata.name or "", []) if p.metadata.deletion_timestamp is None]
            if should_run:
                desired += 1
                if pods:
                    current += 1
                    pod = oldest_first(pods)[0]
                    if is_pod_ready(pod):
                        ready += 1
                        if is_pod_available(pod, ds.spec.min_ready_seconds or 0, now):
                            available += 1
                    if is_pod_updated(pod, hash_, generation):
                        updated += 1
            elif pods:
                misscheduled += 1
        old = ds.status or DaemonSetStatus()
        return old.model_copy(update={
            "desired_number_scheduled": desired, "current_number_scheduled": current,
            "number_misscheduled": misscheduled, "number_ready": ready,
            # omitempty upstream: a zero is left out of the object
            "number_available": available or None, "number_unavailable": (desired - available) or None,
            "updated_number_scheduled": updated or None, "observed_generation": ds.metadata.generation})

    async def _update_status(self, ds: DaemonSet, nodes: list[Node], node_to_pods: dict[str, list[Pod]],
                             hash_: str) -> None:
        """storeDaemonSetStatus: write only a change; one retry on a fresh read."""
        status = self.calculate_status(ds, nodes, node_to_pods, hash_)
        if ds.status == status:
            return
        current = ds
        for attempt in range(2):
            try:
                await self.client.update_status(current.model_copy(update={"status": status}))
                return
            except ApiError as e:
                if attempt == 1 or e.is_not_found:
                    raise
                current = await self.client.get(DaemonSet, ds.metadata.name or "", ds.metadata.namespace)
                status = status.model_copy(update={"collision_count": (current.status.collision_count
                                                                       if current.status else None)})
