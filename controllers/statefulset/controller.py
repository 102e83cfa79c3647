"""The StatefulSet controller (upstream pkg/controller/statefulset: stateful_set.go, stateful_set_control.go,
stateful_pod_control.go, stateful_set_status_updater.go): pods with stable names `<set>-<ordinal>`, each with
its own claims, made and removed in order.

One reconcile of a StatefulSet key, as upstream's sync:
1. claim the pods (adopt orphans whose name is `<set>-<n>` and that the selector matches, release the
   others), read the revisions the set controls;
2. the revisions (getStatefulSetRevisions): the update revision is the one of the current template (created,
   or an old one renumbered after a `rollout undo`), the current revision the one status names;
3. updateStatefulSet: pods in the ordinal range [start, start+replicas) are the replicas, the others are
   condemned. Failed pods are deleted to be made again; a missing pod is created with its claims (the
   current revision below the partition, the update revision from it on); OrderedReady waits for each
   pod to be Running and Ready (and available for minReadySeconds) before the next, and removes condemned
   pods from the highest ordinal one at a time; Parallel does neither wait. Then RollingUpdate deletes the
   highest-ordinal pod at or above the partition that is not at the update revision, one at a time,
   waiting for each to come back healthy; OnDelete leaves that to the user;
4. status (replicas, ready, available, current, updated, revisions, collisionCount, observedGeneration),
   written only when it changed; old revisions beyond revisionHistoryLimit that no pod runs are deleted.

Claims outlive their pods; persistentVolumeClaimRetentionPolicy decides, through owner references for the
garbage collector, whether they go with the set (whenDeleted) or with a scaled-down pod (whenScaled).
"""

from __future__ import annotations

import logging
from typing import Any

from controllers import history
from controllers.controller_ref_manager import (
    ControllerRefManager,
    controller_ref,
    recheck_deletion_timestamp,
    resolve_controller_key,
)
from controllers.controller_utils import (
    ORPHAN_INDEX,
    ensure_indexers,
    is_pod_ready,
    label_selector_of,
    namespace_terminating,
    orphan_index,
    owned_and_orphans,
    owners_selecting,
)
from controllers.statefulset.utils import (
    apply_revision,
    claim_owner_refs,
    compute_replica_status,
    get_ordinal,
    has_stale_owner_ref,
    identity_matches,
    is_created,
    is_failed,
    is_healthy,
    is_member_of,
    is_pending,
    is_running_and_available,
    is_running_and_ready,
    is_succeeded,
    is_terminating,
    max_unavailable_of,
    new_revision,
    new_versioned_stateful_set_pod,
    persistent_volume_claims,
    pod_revision,
    retention_policy,
    revisions_to_truncate,
    start_ordinal,
    storage_matches,
    update_identity,
)
from machinery import timeutil
from machinery.api.apps_v1 import ControllerRevision, StatefulSet, StatefulSetStatus
from machinery.api.core_v1 import PersistentVolumeClaim, Pod
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

CONTROLLER_NAME = "statefulset-controller"
MAX_CREATE_COLLISIONS = 10


def _error_text(e: Exception) -> str:
    return e.message if isinstance(e, ApiError) and e.message else str(e)


class _Wait(Exception):
    """The sync has done what it may this round (OrderedReady waits for a pod)."""


class StatefulSetController(Controller):
    name = "statefulset"  # its --controllers name; it writes as the statefulset-controller account

    def __init__(self, client: ApiClient, informers: SharedInformerFactory, workers: int = 5) -> None:
        super().__init__(workers)
        self.client = client
        self.recorder = EventRecorder(client, CONTROLLER_NAME)
        self.set_informer: Informer[StatefulSet] = informers.informer_for(StatefulSet)
        self.pod_informer: Informer[Pod] = informers.informer_for(Pod)
        self.history_informer: Informer[ControllerRevision] = informers.informer_for(ControllerRevision)
        self.claim_informer: Informer[PersistentVolumeClaim] = informers.informer_for(PersistentVolumeClaim)
        ensure_indexers(self.pod_informer, {CONTROLLER_UID_INDEX: controller_uid_index, ORPHAN_INDEX: orphan_index})
        ensure_indexers(self.history_informer, {CONTROLLER_UID_INDEX: controller_uid_index})
        self.set_informer.add_event_handler(self._set_changed, lambda old, cur: self._set_changed(cur),
                                            self._set_changed)
        self.pod_informer.add_event_handler(self._pod_added, self._pod_updated, self._pod_deleted)
        self.history_informer.add_event_handler(self._owned_changed, lambda old, cur: self._owned_changed(cur),
                                                self._owned_changed)
        self.informers.extend([self.set_informer, self.pod_informer, self.history_informer, self.claim_informer])

    # -- event handlers ----------------------------------------------------------------------

    def _set_changed(self, sts: StatefulSet) -> None:
        self.queue.add(meta_namespace_key(sts))

    def _owner_key(self, obj: Any) -> str | None:
        return resolve_controller_key(obj, "StatefulSet", self.set_informer.store)

    def _sets_selecting(self, pod: Pod) -> list[str]:
        """getStatefulSetsForPod: the sets of the pod's namespace whose selector matches it."""
        return owners_selecting(pod, self.set_informer.store.list())

    def _owned_changed(self, obj: Any) -> None:
        key = self._owner_key(obj)
        if key is not None:
            self.queue.add(key)

    def _pod_added(self, pod: Pod) -> None:
        if pod.metadata.deletion_timestamp is not None:
            self._pod_deleted(pod)
            return
        key = self._owner_key(pod)
        if key is not None:
            self.queue.add(key)
        elif controller_ref(pod) is None:
            for key in self._sets_selecting(pod):
                self.queue.add(key)

    def _pod_updated(self, old: Pod, cur: Pod) -> None:
        if old.metadata.resource_version == cur.metadata.resource_version:
            return
        for pod in (old, cur):
            key = self._owner_key(pod)
            if key is not None:
                self.queue.add(key)
                sts = self.set_informer.store.get(key)
                min_ready = (sts.spec.min_ready_seconds or 0) if sts is not None and sts.spec is not None else 0
                if min_ready > 0 and not is_pod_ready(old) and is_pod_ready(cur):
                    self.queue.add_after(key, min_ready)  # look again when it becomes available
            elif controller_ref(pod) is None:
                for key in self._sets_selecting(pod):
                    self.queue.add(key)

    def _pod_deleted(self, pod: Pod) -> None:
        key = self._owner_key(pod)
        if key is not None:
            self.queue.add(key)

    # -- reconcile ---------------------------------------------------------------------------

    async def reconcile(self, key: str) -> float | None:
        namespace, _ = split_meta_namespace_key(key)
        sts = self.set_informer.store.get(key)
        if sts is None or sts.spec is None:
            return None
        selector = label_selector_of(sts)
        if selector.empty:
            return None  # an empty selector would match every pod: never act on it
        revisions = history.owned_revisions(
            self.history_informer.store.by_index(CONTROLLER_UID_INDEX, sts.metadata.uid or ""), sts.metadata.uid)
        candidates = [p for p in owned_and_orphans(self.pod_informer, sts.metadata.uid or "", namespace or "")
                      if controller_ref(p) is not None or is_member_of(sts, p)]
        manager = ControllerRefManager(self.client, sts, "apps/v1", "StatefulSet", selector, Pod,
                                       recheck_deletion_timestamp(self.client, sts))
        pods = sorted(await manager.claim(candidates), key=get_ordinal)

        current, update, collision_count = await self._revisions(sts, revisions)
        status = await self._update_stateful_set(sts, current, update, collision_count, pods)
        status = status.model_copy(update={"observed_generation": sts.metadata.generation,
                                           "current_revision": current.metadata.name,
                                           "update_revision": update.metadata.name,
                                           "collision_count": collision_count})  # upstream: always set
        strategy = sts.spec.update_strategy
        if ((strategy is None or strategy.type != "OnDelete") and status.updated_replicas == status.replicas
                and status.ready_replicas == status.replicas):
            # completeRollingUpdate
            status.current_replicas = status.updated_replicas
            status.current_revision = status.update_revision
        await self._update_status(sts, status)
        # truncateHistory, over the revisions as they are now
        all_revisions = history.owned_revisions(
            self.history_informer.store.by_index(CONTROLLER_UID_INDEX, sts.metadata.uid or ""), sts.metadata.uid)
        current_now = next((r for r in all_revisions if r.metadata.name == status.current_revision), current)
        for revision in revisions_to_truncate(sts, pods, all_revisions, current_now, update):
            try:
                await self.client.delete(ControllerRevision, revision.metadata.name or "", sts.metadata.namespace)
            except ApiError as e:
                if not e.is_not_found:
                    raise
        min_ready = sts.spec.min_ready_seconds or 0
        replicas = sts.spec.replicas if sts.spec.replicas is not None else 1
        if min_ready > 0 and status.available_replicas != replicas:
            return float(min_ready)
        return None

    # -- revisions -------------------------------------------------------------------------------

    async def _revisions(self, sts: StatefulSet, revisions: list[ControllerRevision]
                         ) -> tuple[ControllerRevision, ControllerRevision, int]:
        """getStatefulSetRevisions: (current, update, collisionCount)."""
        collision_count = (sts.status.collision_count or 0) if sts.status is not None else 0
        candidate = new_revision(sts, history.next_revision(revisions), collision_count)
        equal = history.find_equal_revisions(revisions, candidate)
        if equal and revisions and history.equal_revision(revisions[-1], equal[-1]):
            update = revisions[-1]  # the template has not changed
        elif equal:
            # the template went back to an older revision's: that one becomes the newest again
            update = await self.client.patch(ControllerRevision, equal[-1].metadata.name or "",
                                             {"revision": candidate.revision}, namespace=sts.metadata.namespace)
        else:
            update, collision_count = await self._create_revision(sts, candidate, collision_count)
        status_current = sts.status.current_revision if sts.status is not None else None
        current = next((r for r in revisions if r.metadata.name == status_current), None) or update
        return current, update, collision_count

    async def _create_revision(self, sts: StatefulSet, revision: ControllerRevision,
                               collision_count: int) -> tuple[ControllerRevision, int]:
        """CreateControllerRevision: on a name taken by other data, count a collision and hash again."""
        for _ in range(MAX_CREATE_COLLISIONS):
            candidate = new_revision(sts, revision.revision, collision_count)
            try:
                return await self.client.create(candidate), collision_count
            except ApiError as e:
                if e.code != 409:
                    raise
            existing = await self.client.get(ControllerRevision, candidate.metadata.name or "", sts.metadata.namespace)
            if history.equal_revision(existing, candidate):
                return existing, collision_count
            collision_count += 1
        raise RuntimeError(f"{sts.metadata.namespace}/{sts.metadata.name}: too many revision hash collisions")

    # -- updateStatefulSet -----------------------------------------------------------------------

    async def _update_stateful_set(self, sts: StatefulSet, current: ControllerRevision, update: ControllerRevision,
                                   collision_count: int, pods: list[Pod]) -> StatefulSetStatus:
        assert sts.spec is not None
        current_set, update_set = apply_revision(sts, current), apply_revision(sts, update)
        current_name, update_name = current.metadata.name or "", update.metadata.name or ""
        min_ready = sts.spec.min_ready_seconds or 0
        now = timeutil.now()
        status = compute_replica_status(pods, min_ready, current_name, update_name, now)
        replica_count = sts.spec.replicas if sts.spec.replicas is not None else 1
        start = start_ordinal(sts)
        replicas: list[Pod | None] = [None] * replica_count
        condemned: list[Pod] = []
        for pod in pods:
            ordinal = get_ordinal(pod)
            if start <= ordinal < start + replica_count:
                replicas[ordinal - start] = pod
            elif ordinal >= 0:
                condemned.append(pod)
        status_current = (sts.status.current_replicas or 0) if sts.status is not None else 0
        slots: list[Pod] = [
            pod if pod is not None else new_versioned_stateful_set_pod(current_set, update_set, current_name,
                                                                        update_name, i + start, status_current)
            for i, pod in enumerate(replicas)]
        condemned.sort(key=get_ordinal, reverse=True)
        first_unhealthy = next((p for p in [*slots, *reversed(condemned)] if not is_healthy(p)), None)
        if sts.metadata.deletion_timestamp is not None:
            return status
        monotonic = sts.spec.pod_management_policy != "Parallel"
        try:
            # the claims of pods being scaled down get their owner references first (whenScaled)
            for pod in condemned:
                await self._fix_claims(update_set, pod)
            for i in range(replica_count):
                await self._process_replica(sts, current_set, update_set, current_name, update_name, slots, i,
                                            status, monotonic, now)
            for pod in condemned:
                await self._process_condemned(sts, pod, first_unhealthy, current_name, update_name, status,
                                              monotonic)
            strategy = sts.spec.update_strategy
            if strategy is not None and strategy.type == "OnDelete":
                return status
            partition = (strategy.rolling_update.partition or 0) if strategy and strategy.rolling_update else 0
            if strategy is not None and strategy.rolling_update is not None \
                    and strategy.rolling_update.max_unavailable is not None:
                await self._update_with_max_unavailable(sts, slots, partition, current_name, update_name, status,
                                                        now)
                return status
            for target in range(len(slots) - 1, partition - 1, -1):
                pod = slots[target]
                if pod_revision(pod) != update_name and not is_terminating(pod):
                    log.info("%s/%s: pod %s is terminating for update", sts.metadata.namespace, sts.metadata.name,
                             pod.metadata.name)
                    await self._delete_pod(sts, pod)
                    if pod_revision(pod) == current_name:
                        status.current_replicas = (status.current_replicas or 0) - 1
                    return status
                if not is_healthy(pod):
                    return status  # wait for it to come back before the next
        except _Wait:
            pass
        return status

    async def _update_with_max_unavailable(self, sts: StatefulSet, slots: list[Pod], partition: int,
                                           current_name: str, update_name: str, status: StatefulSetStatus,
                                           now: Any) -> None:
        """updateStatefulSetAfterInvariantEstablished (MaxUnavailableStatefulSet, honoured here when the field is
        set): with U of the replicas unavailable, delete up to maxUnavailable - U pods not at the update revision,
        from the highest ordinal down to the partition."""
        assert sts.spec is not None and sts.spec.update_strategy is not None
        rolling = sts.spec.update_strategy.rolling_update
        assert rolling is not None
        max_unavailable = max(1, max_unavailable_of(rolling.max_unavailable, len(slots)))
        min_ready = sts.spec.min_ready_seconds or 0
        unavailable = sum(1 for p in slots if not (is_running_and_available(p, min_ready, now)
                                                   and not is_terminating(p)))
        if unavailable >= max_unavailable:
            return
        budget = max_unavailable - unavailable
        for target in range(len(slots) - 1, partition - 1, -1):
            if budget <= 0:
                break
            pod = slots[target]
            if pod_revision(pod) != update_name and not is_terminating(pod):
                await self._delete_pod(sts, pod)
                budget -= 1
                if pod_revision(pod) == current_name:
                    status.current_replicas = (status.current_replicas or 0) - 1

    async def _process_replica(self, sts: StatefulSet, current_set: StatefulSet, update_set: StatefulSet,
                               current_name: str, update_name: str, slots: list[Pod], i: int,
                               status: StatefulSetStatus, monotonic: bool, now: Any) -> None:
        """processReplica: recreate a finished pod, create a missing one, wait (OrderedReady) for a pod that
        is not yet healthy, fix the identity and claims of one that drifted."""
        assert sts.spec is not None
        pod = slots[i]
        if is_created(pod) and (is_failed(pod) or is_succeeded(pod)):
            if is_failed(pod):
                self.recorder.event(sts, "Warning", "RecreatingFailedPod",
                                    f"StatefulSet {sts.metadata.namespace}/{sts.metadata.name} is recreating failed "
                                    f"Pod {pod.metadata.name}")
            else:
                self.recorder.event(sts, "Normal", "RecreatingTerminatedPod",
                                    f"StatefulSet {sts.metadata.namespace}/{sts.metadata.name} is recreating "
                                    f"terminated Pod {pod.metadata.name}")
            if not is_terminating(pod):
                await self._delete_pod(sts, pod)
            if monotonic:
                raise _Wait  # its DELETED event brings the sync that makes it again
            return
        if not is_created(pod):
            if await self._claims_stale(sts, pod):
                if monotonic:
                    raise _Wait
                return
            created = await self._create_pod(sts, pod)
            if created:
                status.replicas += 1
                if pod_revision(pod) == current_name:
                    status.current_replicas = (status.current_replicas or 0) + 1
                if pod_revision(pod) == update_name:
                    status.updated_replicas = (status.updated_replicas or 0) + 1
            if monotonic:
                raise _Wait
            return
        if is_pending(pod):
            await self._create_missing_claims(sts, pod)
        if not is_terminating(pod):
            await self._fix_claims(update_set, pod)  # upstream after the waits; here also for a pod still pending
        if is_terminating(pod) and monotonic:
            raise _Wait
        if monotonic and not (is_running_and_ready(pod)
                              and is_running_and_available(pod, sts.spec.min_ready_seconds or 0, now)):
            raise _Wait
        if is_terminating(pod):
            return
        if not identity_matches(sts, pod):
            fixed = pod.model_copy(deep=True)
            update_identity(sts, fixed)
            try:
                await self.client.update(fixed)
                self.recorder.event(sts, "Normal", "SuccessfulUpdate",
                                    f"update Pod {pod.metadata.name} in StatefulSet {sts.metadata.name} successful")
            except ApiError as e:
                if e.code != 409 and not e.is_not_found:
                    self.recorder.event(sts, "Warning", "FailedUpdate",
                                        f"update Pod {pod.metadata.name} in StatefulSet {sts.metadata.name} failed "
                                        f"error: {_error_text(e)}")
                    raise
        if not storage_matches(update_set, pod):
            # a pod's volumes cannot change once it exists: only its missing claims are made
            await self._create_missing_claims(update_set, pod)

    async def _process_condemned(self, sts: StatefulSet, pod: Pod, first_unhealthy: Pod | None, current_name: str,
                                 update_name: str, status: StatefulSetStatus, monotonic: bool) -> None:
        """processCondemned: from the highest ordinal; OrderedReady one at a time and only when every other
        pod is healthy."""
        if is_terminating(pod):
            if monotonic:
                raise _Wait
            return
        if monotonic and not is_running_and_ready(pod) and pod is not first_unhealthy:
            raise _Wait
        log.info("%s/%s: pod %s is terminating for scale down", sts.metadata.namespace, sts.metadata.name,
                 pod.metadata.name)
        await self._delete_pod(sts, pod)
        if pod_revision(pod) == current_name:
            status.current_replicas = (status.current_replicas or 0) - 1
        if pod_revision(pod) == update_name:
            status.updated_replicas = (status.updated_replicas or 0) - 1
        if monotonic:
            raise _Wait

    # -- pod control (stateful_pod_control.go) -------------------------------------------------------

    async def _create_pod(self, sts: StatefulSet, pod: Pod) -> bool:
        """CreateStatefulPod: the claims first, then the pod, then the claims' owner references."""
        try:
            await self._create_missing_claims(sts, pod)
        except Exception as e:
            self._pod_event("create", sts, pod, e)
            raise
        body = {"apiVersion": "v1", "kind": "Pod", **pod.to_dict()}
        try:
            created = await self.client.create_raw(Pod, body, sts.metadata.namespace)
        except ApiError as e:
            if e.code == 409:
                return False  # the informer has not seen it yet
            if namespace_terminating(e):
                return False
            self._pod_event("create", sts, pod, e)
            raise
        self._pod_event("create", sts, pod, None)
        await self._fix_claims(sts, Pod.model_validate(created))
        return True

    async def _delete_pod(self, sts: StatefulSet, pod: Pod) -> None:
        try:
            await self.client.delete(Pod, pod.metadata.name or "", pod.metadata.namespace,
                                     preconditions={"uid": pod.metadata.uid or ""})
        except ApiError as e:
            if e.is_not_found or e.code == 409:
                return
            self._pod_event("delete", sts, pod, e)
            raise
        self._pod_event("delete", sts, pod, None)

    def _pod_event(self, verb: str, sts: StatefulSet, pod: Pod, error: Exception | None) -> None:
        """recordPodEvent."""
        if error is None:
            self.recorder.event(sts, "Normal", f"Successful{verb.title()}",
                                f"{verb} Pod {pod.metadata.name} in StatefulSet {sts.metadata.name} successful")
        else:
            self.recorder.event(sts, "Warning", f"Failed{verb.title()}",
                                f"{verb} Pod {pod.metadata.name} in StatefulSet {sts.metadata.name} failed error: "
                                f"{_error_text(error)}")

    def _claim_event(self, verb: str, sts: StatefulSet, pod: Pod, claim: PersistentVolumeClaim,
                     error: Exception | None) -> None:
        """recordClaimEvent."""
        if error is None:
            self.recorder.event(sts, "Normal", f"Successful{verb.title()}",
                                f"{verb} Claim {claim.metadata.name} Pod {pod.metadata.name} in StatefulSet "
                                f"{sts.metadata.name} success")
        else:
            self.recorder.event(sts, "Warning", f"Failed{verb.title()}",
                                f"{verb} Claim {claim.metadata.name} for Pod {pod.metadata.name} in StatefulSet "
                                f"{sts.metadata.name} failed error: {_error_text(error)}")

    def _cached_claim(self, namespace: str | None, name: str | None) -> PersistentVolumeClaim | None:
        return self.claim_informer.store.get_by_name(name or "", namespace)

    async def _create_missing_claims(self, sts: StatefulSet, pod: Pod) -> None:
        """createPersistentVolumeClaims: each claim of the pod's ordinal that does not exist yet."""
        errors: list[Exception] = []
        for _, claim in persistent_volume_claims(sts, get_ordinal(pod)):
            existing = self._cached_claim(claim.metadata.namespace, claim.metadata.name)
            if existing is not None:
                if existing.metadata.deletion_timestamp is not None:
                    errors.append(RuntimeError(f"pvc {claim.metadata.name} is being deleted"))
                continue
            try:
                await self.client.create(claim)
            except ApiError as e:
                if e.code == 409:
                    continue  # made a moment ago; the informer will show it
                self._claim_event("create", sts, pod, claim, e)
                errors.append(e)
                continue
            self._claim_event("create", sts, pod, claim, None)
        if errors:
            raise errors[0]

    async def _claims_stale(self, sts: StatefulSet, pod: Pod) -> bool:
        """PodClaimIsStale: under whenScaled=Delete, a claim still owned by an earlier pod of this name (being
        removed with it) blocks the new pod until it is gone."""
        if retention_policy(sts)[1] != "Delete":
            return False
        for _, claim in persistent_volume_claims(sts, get_ordinal(pod)):
            existing = self._cached_claim(claim.metadata.namespace, claim.metadata.name)
            if existing is not None and has_stale_owner_ref(existing, pod):
                return True
        return False

    async def _fix_claims(self, sts: StatefulSet, pod: Pod) -> None:
        """UpdatePodClaimForRetentionPolicy: the owner references the retention policy asks for."""
        for _, claim in persistent_volume_claims(sts, get_ordinal(pod)):
            existing = self._cached_claim(claim.metadata.namespace, claim.metadata.name)
            if existing is None or existing.metadata.deletion_timestamp is not None:
                continue
            refs = claim_owner_refs(existing, sts, pod)
            if refs is None:
                continue
            meta = existing.metadata.model_copy(update={"owner_references": refs or None})
            try:
                await self.client.update(existing.model_copy(update={"metadata": meta}))
            except ApiError as e:
                if e.code == 409 or e.is_not_found:
                    continue  # the next sync sees the fresh claim
                self._claim_event("update", sts, pod, existing, e)
                raise

    # -- status (stateful_set_status_updater.go) -----------------------------------------------------

    async def _update_status(self, sts: StatefulSet, status: StatefulSetStatus) -> None:
        """UpdateStatefulSetStatus: only when it differs; a conflict retries on a fresh read."""
        status = status.model_copy(update={
            # omitempty upstream: a zero count is left out of the object
            "ready_replicas": max(0, status.ready_replicas or 0) or None,
            "current_replicas": max(0, status.current_replicas or 0) or None,
            "updated_replicas": max(0, status.updated_replicas or 0) or None,
            "conditions": sts.status.conditions if sts.status is not None else None})
        if sts.status == status:
            return
        current = sts
        for attempt in range(3):
            try:
                await self.client.update_status(current.model_copy(update={"status": status}))
                return
            except ApiError as e:
                if e.is_not_found:
                    return
                if e.code != 409 or attempt == 2:
                    raise
                current = await self.client.get(StatefulSet, sts.metadata.name or "", sts.metadata.namespace)
