"""The ReplicaSet controller (upstream pkg/controller/replicaset): keep spec.replicas pods alive.

One reconcile of a ReplicaSet key, as upstream's syncReplicaSet:
1. claim pods: adopt orphans the selector matches (patch a controller ownerReference in), release
   owned pods it no longer matches; pods being deleted or finished do not count;
2. if the expectations are satisfied (every create and delete asked for last time has been seen
   by the informer, or five minutes passed), create or delete the difference: creates in slow-start
   batches of 1, 2, 4 ... so a failing create costs one request, not a thousand; deletes the least
   useful pods first (unscheduled, pending, not ready, ready for less time, more restarts, newer);
3. write status (replicas, fullyLabeledReplicas, readyReplicas, availableReplicas honouring
   minReadySeconds, observedGeneration, the ReplicaFailure condition) through /status.

Expectations are what keeps a lagging informer from causing over-creation: after asking for N
pods the controller does nothing more for that ReplicaSet until the informer has shown N new pods.

The pieces other controllers use too live in controllers/controller_utils.py (expectations, pod
helpers, deletion order, slow start, indexes) and controllers/controller_ref_manager.py (claiming).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Sequence
from typing import Any

from controllers.controller_ref_manager import (
    ControllerRefManager,
    controller_ref,
    new_controller_ref,
    recheck_deletion_timestamp,
)
from controllers.controller_utils import (
    ORPHAN_INDEX,
    SLOW_START_INITIAL_BATCH_SIZE,
    UIDTrackingControllerExpectations,
    ensure_indexers,
    is_pod_active,
    is_pod_available,
    is_pod_ready,
    label_selector_of,
    namespace_terminating,
    orphan_index,
    owned_and_orphans,
    pod_body_from_template,
    pod_ready_condition,
    rank_pods_for_deletion,
    slow_start_batch,
)
from machinery import timeutil
from machinery.api.apps_v1 import ReplicaSet, ReplicaSetCondition, ReplicaSetStatus
from machinery.api.core_v1 import Pod
from machinery.api.meta import OwnerReference
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

CONTROLLER_NAME = "replicaset-controller"
BURST_REPLICAS = 500  # creates/deletes per sync at most (upstream BurstReplicas)
# Pod creates/deletes in flight at once, over all ReplicaSets: upstream's client-side QPS limit plays
# this part; a Python apiserver answers fewer writes, not more, when hundreds arrive at once.
MAX_CONCURRENT_WRITES = 32
EVENT_WORKERS = 1


# -- pods -------------------------------------------------------------------------------------


def _sync_inputs(pod: Pod) -> tuple[Any, ...]:
    """What a ReplicaSet sync reads from a pod it owns, besides its labels, owner and deletion: its
    phase (a finished pod is replaced) and its Ready condition (ready and available counts)."""
    condition = pod_ready_condition(pod)
    return ((pod.status.phase if pod.status else None),
            None if condition is None else (condition.status, condition.last_transition_time))


def pods_to_delete(pods: Sequence[Pod], related: Sequence[Pod], diff: int, now: dt.datetime | None = None) -> list[Pod]:
    """getPodsToDelete: the `diff` least useful pods (no sorting when all of them go)."""
    if diff < len(pods):
        return rank_pods_for_deletion(pods, related, now)[:diff]
    return list(pods)[:diff]


def _error_text(e: Exception) -> str:
    return e.message if isinstance(e, ApiError) and e.message else str(e)


# -- status -----------------------------------------------------------------------------------


def calculate_status(rs: ReplicaSet, pods: Sequence[Pod], manage_error: Exception | None,
                     now: dt.datetime | None = None) -> ReplicaSetStatus:
    """The status a sync reports: counts over the active claimed pods, and ReplicaFailure while
    creating or deleting pods fails."""
    now = now or timeutil.now()
    spec = rs.spec
    assert spec is not None
    template_labels = (spec.template.metadata.labels if spec.template and spec.template.metadata else None) or {}
    min_ready = spec.min_ready_seconds or 0
    fully = ready = available = 0
    wanted = template_labels.items()
    for pod in pods:  # once per sync over every pod: kept lean
        if wanted <= (pod.metadata.labels or {}).items():
            fully += 1
        condition = pod_ready_condition(pod)
        if condition is not None and condition.status == "True":
            ready += 1
            if min_ready <= 0 or is_pod_available(pod, min_ready, now):
                available += 1
    old = rs.status or ReplicaSetStatus(replicas=0)
    conditions = list(old.conditions or [])
    failure = next((c for c in conditions if c.type == "ReplicaFailure"), None)
    if manage_error is not None and failure is None:
        diff = len(pods) - (spec.replicas or 0)
        reason = "FailedCreate" if diff < 0 else "FailedDelete" if diff > 0 else ""
        conditions.append(ReplicaSetCondition(type="ReplicaFailure", status="True", reason=reason,
                                              message=_error_text(manage_error),
                                              last_transition_time=timeutil.format_rfc3339(now)))
    elif manage_error is None and failure is not None:
        conditions = [c for c in conditions if c.type != "ReplicaFailure"]
    return old.model_copy(update={
        "replicas": len(pods), "fully_labeled_replicas": fully, "ready_replicas": ready,
        "available_replicas": available, "conditions": conditions or None,
    })


def status_unchanged(rs: ReplicaSet, new: ReplicaSetStatus) -> bool:
    old = rs.status or ReplicaSetStatus(replicas=0)
    return (old.replicas == new.replicas and (old.fully_labeled_replicas or 0) == (new.fully_labeled_replicas or 0)
            and (old.ready_replicas or 0) == (new.ready_replicas or 0)
            and (old.available_replicas or 0) == (new.available_replicas or 0)
            and (old.observed_generation or 0) == (rs.metadata.generation or 0)
            and (old.conditions or []) == (new.conditions or []))


# -- the controller ---------------------------------------------------------------------------


class ReplicaSetController(Controller):
    name = "replicaset"  # its --controllers name; it writes as CONTROLLER_NAME
    # what it manages; the ReplicationManager (controllers/replication.py) sets these to
    # ReplicationController's, as upstream's replication controller runs this logic on RCs
    model: Any = ReplicaSet
    api_version = "apps/v1"
    kind = "ReplicaSet"
    controller_name = CONTROLLER_NAME

    def __init__(self, client: ApiClient, informers: SharedInformerFactory, workers: int = 5,
                 burst_replicas: int = BURST_REPLICAS, max_concurrent_writes: int = MAX_CONCURRENT_WRITES) -> None:
        super().__init__(workers)
        self.client = client
        self._writes = asyncio.Semaphore(max_concurrent_writes)
        # One writer: SuccessfulCreate/Delete events trail the pod writes rather than compete with them.
        self.recorder = EventRecorder(client, self.controller_name, workers=EVENT_WORKERS)
        self.burst_replicas = burst_replicas
        self.expectations = UIDTrackingControllerExpectations()
        self.rs_informer: Informer[ReplicaSet] = informers.informer_for(self.model)
        self.pod_informer: Informer[Pod] = informers.informer_for(Pod)
        indexes = {CONTROLLER_UID_INDEX: controller_uid_index, ORPHAN_INDEX: orphan_index}
        ensure_indexers(self.rs_informer, indexes)
        ensure_indexers(self.pod_informer, indexes)
        self.rs_informer.add_event_handler(self._rs_added, self._rs_updated, self._rs_deleted)
        self.pod_informer.add_event_handler(self._pod_added, self._pod_updated, self._pod_deleted)
        self.informers.extend([self.rs_informer, self.pod_informer])

    def selector_of(self, rs: Any) -> Any:
        return label_selector_of(rs)

    def calculate_status(self, rs: Any, pods: Sequence[Pod], manage_error: Exception | None) -> Any:
        return calculate_status(rs, pods, manage_error)

    # -- event handlers: enqueue, and count what the expectations wait for ---------------------

    def _rs_added(self, rs: ReplicaSet) -> None:
        self.queue.add(meta_namespace_key(rs))

    def _rs_updated(self, old: ReplicaSet, cur: ReplicaSet) -> None:
        if old.metadata.uid != cur.metadata.uid:
            self._rs_deleted(old)  # deleted and recreated under the same name
        self.queue.add(meta_namespace_key(cur))

    def _rs_deleted(self, rs: ReplicaSet) -> None:
        key = meta_namespace_key(rs)
        self.expectations.delete_expectations(key)
        self.queue.add(key)

    def _resolve(self, namespace: str | None, ref: OwnerReference | None) -> ReplicaSet | None:
        if ref is None or ref.kind != self.kind:
            return None
        rs = self.rs_informer.store.get_by_name(ref.name, namespace)
        return rs if rs is not None and rs.metadata.uid == ref.uid else None

    def _replicasets_for_pod(self, pod: Pod) -> list[ReplicaSet]:
        """ReplicaSets of the pod's namespace whose selector matches it (an orphan's candidates)."""
        labels = pod.metadata.labels or {}
        out = []
        for rs in self.rs_informer.store.list():
            if rs.metadata.namespace != pod.metadata.namespace or rs.spec is None:
                continue
            sel = self.selector_of(rs)
            if not sel.empty and sel.matches(labels):
                out.append(rs)
        return out

    def _pod_added(self, pod: Pod) -> None:
        if pod.metadata.deletion_timestamp is not None:
            self._pod_deleted(pod)  # a restarted controller sees pods already going
            return
        ref = controller_ref(pod)
        if ref is not None:
            rs = self._resolve(pod.metadata.namespace, ref)
            if rs is not None:
                key = meta_namespace_key(rs)
                self.expectations.creation_observed(key)
                self.queue.add(key)
            return
        for rs in self._replicasets_for_pod(pod):
            self.queue.add(meta_namespace_key(rs))

    def _pod_updated(self, old: Pod, cur: Pod) -> None:
        if old.metadata.resource_version == cur.metadata.resource_version:
            return  # a resync: nothing changed
        labels_changed = (old.metadata.labels or {}) != (cur.metadata.labels or {})
        if cur.metadata.deletion_timestamp is not None:
            # A graceful delete shows as an update setting deletionTimestamp: count it as the
            # deletion now, so replacements are made while the pod is still terminating.
            self._pod_deleted(cur)
            if labels_changed:
                self._pod_deleted(old)
            return
        cur_ref, old_ref = controller_ref(cur), controller_ref(old)
        ref_changed = (cur_ref.uid if cur_ref else None) != (old_ref.uid if old_ref else None)
        if ref_changed and old_ref is not None:
            rs = self._resolve(old.metadata.namespace, old_ref)
            if rs is not None:
                self.queue.add(meta_namespace_key(rs))
        if cur_ref is not None:
            if not ref_changed and not labels_changed and _sync_inputs(old) == _sync_inputs(cur):
                return  # e.g. bound to a node, a container's status: nothing a sync reads from it changed
            rs = self._resolve(cur.metadata.namespace, cur_ref)
            if rs is not None:
                key = meta_namespace_key(rs)
                self.queue.add(key)
                min_ready = (rs.spec.min_ready_seconds if rs.spec else None) or 0
                if min_ready > 0 and not is_pod_ready(old) and is_pod_ready(cur):
                    self.queue.add_after(key, min_ready + 1)  # look again when it becomes available
            return
        if labels_changed or ref_changed:
            for rs in self._replicasets_for_pod(cur):
                self.queue.add(meta_namespace_key(rs))

    def _pod_deleted(self, pod: Pod) -> None:
        rs = self._resolve(pod.metadata.namespace, controller_ref(pod))
        if rs is None:
            return
        key = meta_namespace_key(rs)
        self.expectations.deletion_observed_of(key, meta_namespace_key(pod))
        self.queue.add(key)

    # -- reconcile ----------------------------------------------------------------------------

    async def reconcile(self, key: str) -> float | None:
        namespace, _ = split_meta_namespace_key(key)
        rs = self.rs_informer.store.get(key)
        if rs is None:
            self.expectations.delete_expectations(key)
            return None
        needs_sync = self.expectations.satisfied(key)
        selector = self.selector_of(rs)
        candidates = owned_and_orphans(self.pod_informer, rs.metadata.uid or "", namespace or "")
        active = [p for p in candidates if is_pod_active(p)]
        manager = ControllerRefManager(self.client, rs, self.api_version, self.kind, selector, Pod,
                                       recheck_deletion_timestamp(self.client, rs))
        pods = await manager.claim(active)

        manage_error: Exception | None = None
        if needs_sync and rs.metadata.deletion_timestamp is None:
            try:
                await self._manage_replicas(pods, rs, key)
            except Exception as e:
                manage_error = e
        new_status = self.calculate_status(rs, pods, manage_error)
        updated = await self._update_status(rs, new_status)
        if manage_error is not None:
            raise manage_error
        spec = updated.spec
        status = updated.status
        if (spec is not None and status is not None and (spec.min_ready_seconds or 0) > 0
                and (status.ready_replicas or 0) == (spec.replicas or 0)
                and (status.available_replicas or 0) != (spec.replicas or 0)):
            return float(spec.min_ready_seconds or 0)
        return None

    async def _manage_replicas(self, pods: list[Pod], rs: ReplicaSet, key: str) -> None:
        """Create or delete the difference to spec.replicas (manageReplicas)."""
        assert rs.spec is not None
        diff = len(pods) - (rs.spec.replicas or 0)
        if diff < 0:
            count = min(-diff, self.burst_replicas)
            self.expectations.expect_creations(key, count)
            log.info("%s: too few replicas (need %d, have %d): creating %d", key, rs.spec.replicas, len(pods), count)
            assert rs.spec.template is not None
            body = pod_body_from_template(rs.spec.template, rs, new_controller_ref(rs, self.api_version, self.kind))
            successes, error = await slow_start_batch(count, SLOW_START_INITIAL_BATCH_SIZE,
                                                      lambda: self._create_pod(rs, body))
            for _ in range(count - successes):
                self.expectations.creation_observed(key)  # never to be seen: stop waiting for it
            if error is not None:
                raise error
        elif diff > 0:
            count = min(diff, self.burst_replicas)
            log.info("%s: too many replicas (need %d, have %d): deleting %d", key, rs.spec.replicas, len(pods), count)
            doomed = pods_to_delete(pods, self._related_pods(rs), count)
            self.expectations.expect_deletions_of(key, [meta_namespace_key(p) for p in doomed])
            results = await asyncio.gather(*(self._delete_pod(rs, key, p) for p in doomed), return_exceptions=True)
            for r in results:
                if isinstance(r, BaseException):
                    raise r

    async def _create_pod(self, rs: ReplicaSet, body: dict[str, Any]) -> None:
        try:
            async with self._writes:
                created = await self.client.create_raw(Pod, body, rs.metadata.namespace)
        except Exception as e:
            if namespace_terminating(e):
                return  # every create would fail: nothing to do
            self.recorder.event(rs, "Warning", "FailedCreate", f"Error creating: {_error_text(e)}")
            raise
        self.recorder.event(rs, "Normal", "SuccessfulCreate", f"Created pod: {created['metadata']['name']}")

    async def _delete_pod(self, rs: ReplicaSet, key: str, pod: Pod) -> None:
        name = pod.metadata.name or ""
        try:
            async with self._writes:
                await self.client.delete(Pod, name, pod.metadata.namespace)
        except Exception as e:
            self.expectations.deletion_observed_of(key, meta_namespace_key(pod))  # never to be seen
            if isinstance(e, ApiError) and e.is_not_found:
                return
            self.recorder.event(rs, "Warning", "FailedDelete", f"Error deleting: {_error_text(e)}")
            raise
        self.recorder.event(rs, "Normal", "SuccessfulDelete", f"Deleted pod: {name}")

    def _related_pods(self, rs: ReplicaSet) -> list[Pod]:
        """Pods of every ReplicaSet with the same controller (a Deployment's old and new ones), for
        the "doubled up on a node" rank."""
        owner = controller_ref(rs)
        siblings = [rs]
        if owner is not None:
            siblings = [r for r in self.rs_informer.store.by_index(CONTROLLER_UID_INDEX, owner.uid)
                        if r.metadata.namespace == rs.metadata.namespace] or [rs]
        out: dict[str, Pod] = {}
        for sibling in siblings:
            for pod in self.pod_informer.store.by_index(CONTROLLER_UID_INDEX, sibling.metadata.uid or ""):
                out.setdefault(pod.metadata.uid or meta_namespace_key(pod), pod)
        return list(out.values())

    async def _update_status(self, rs: ReplicaSet, status: ReplicaSetStatus) -> ReplicaSet:
        """updateReplicaSetStatus: write only when something changed; one retry on a fresh read."""
        if status_unchanged(rs, status):
            return rs
        status = status.model_copy(update={"observed_generation": rs.metadata.generation})
        current = rs
        for attempt in range(2):
            try:
                return await self.client.update_status(current.model_copy(update={"status": status}))
            except ApiError as e:
                if attempt == 1 or e.is_not_found:
                    raise
                current = await self.client.get(self.model, rs.metadata.name or "", rs.metadata.namespace)
        raise AssertionError("unreachable")
