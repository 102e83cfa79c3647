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

The shared pieces the Deployment controller uses too live here: controller references, claiming
(ControllerRefManager) and the indexes of owned and orphaned objects.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import functools
import logging
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel

from machinery import timeutil
from machinery.api.apps_v1 import ReplicaSet, ReplicaSetCondition, ReplicaSetStatus
from machinery.api.core_v1 import Pod, PodTemplateSpec
from machinery.api.meta import ObjectMeta, OwnerReference
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
from machinery.selectors import LabelSelector, selector_from_label_selector

log = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)

CONTROLLER_NAME = "replicaset-controller"
BURST_REPLICAS = 500  # creates/deletes per sync at most (upstream BurstReplicas)
# Pod creates/deletes in flight at once, over all ReplicaSets: upstream's client-side QPS limit plays
# this part; a Python apiserver answers fewer writes, not more, when hundreds arrive at once.
MAX_CONCURRENT_WRITES = 32
SLOW_START_INITIAL_BATCH_SIZE = 1
EVENT_WORKERS = 1
EXPECTATIONS_TIMEOUT = 300.0  # seconds (upstream ExpectationsTimeout)
POD_DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
ORPHAN_INDEX = "minik8s/orphansByNamespace"


# -- owner references and indexes -------------------------------------------------------------


def controller_ref(obj: Any) -> OwnerReference | None:
    """metav1.GetControllerOf: the ownerReference with controller: true, if any."""
    for ref in obj.metadata.owner_references or []:
        if ref.controller:
            return ref
    return None


def new_controller_ref(owner: Any, api_version: str, kind: str) -> OwnerReference:
    """metav1.NewControllerRef: controller and blockOwnerDeletion both true."""
    return OwnerReference(api_version=api_version, kind=kind, name=owner.metadata.name or "",
                          uid=owner.metadata.uid or "", controller=True, block_owner_deletion=True)


def orphan_index(obj: Any) -> list[str]:
    """Objects with no controller, by namespace: the candidates for adoption."""
    if controller_uid_index(obj):
        return []
    ns = obj.metadata.namespace if not isinstance(obj, dict) else (obj.get("metadata") or {}).get("namespace")
    return [ns or ""]


def ensure_indexers(informer: Informer[Any], indexers: dict[str, Callable[[Any], list[str]]]) -> None:
    """Add indexes to a shared informer unless another controller already did."""
    for name, fn in indexers.items():
        with contextlib.suppress(ValueError):
            informer.add_indexers({name: fn})


def owned_and_orphans(informer: Informer[M], owner_uid: str, namespace: str) -> list[M]:
    """What an owner may claim: objects it controls and the namespace's orphans (objects controlled
    by someone else are never claimed, so upstream's list of the whole namespace comes to this)."""
    store = informer.store
    owned = store.by_index(CONTROLLER_UID_INDEX, owner_uid)
    orphans = store.by_index(ORPHAN_INDEX, namespace)
    return [*owned, *(o for o in orphans if o.metadata.namespace == namespace)]  # type: ignore[attr-defined]


def label_selector_of(obj: Any) -> LabelSelector:
    """The spec.selector of a ReplicaSet or Deployment as a matcher (a broken one matches nothing)."""
    sel = obj.spec.selector if obj.spec is not None else None
    try:
        return selector_from_label_selector(sel.to_dict() if sel is not None else None)
    except ValueError:
        return LabelSelector.nothing()


# -- claiming (controller.ControllerRefManager) ------------------------------------------------


class ControllerRefManager:
    """Adopt orphans that match the selector, release owned objects that stopped matching.

    `can_adopt` re-reads the owner from the apiserver once (RecheckDeletionTimestamp), so an owner
    deleted a moment ago does not adopt anything on the strength of a stale cache.
    """

    def __init__(self, client: ApiClient, owner: Any, owner_api_version: str, owner_kind: str,
                 selector: LabelSelector, model: type[M], can_adopt: Callable[[], Awaitable[None]]) -> None:
        self.client = client
        self.owner = owner
        self.api_version = owner_api_version
        self.kind = owner_kind
        self.selector = selector
        self.model = model
        self._can_adopt = can_adopt
        self._adopt_checked: Exception | bool = False

    async def claim(self, objs: Sequence[M]) -> list[M]:
        """The objects this owner controls after claiming; raises the first error after trying all."""
        owner_uid = self.owner.metadata.uid
        owner_deleting = self.owner.metadata.deletion_timestamp is not None
        claimed: list[M] = []
        errors: list[Exception] = []
        for obj in objs:
            meta: ObjectMeta = obj.metadata  # type: ignore[attr-defined]
            ref = controller_ref(obj)
            matches = self.selector.matches(meta.labels or {})
            try:
                if ref is not None:
                    if ref.uid != owner_uid:
                        continue  # someone else's
                    if matches:
                        claimed.append(obj)
                    elif not owner_deleting:
                        await self._release(obj)
                    continue
                if owner_deleting or not matches or meta.deletion_timestamp is not None:
                    continue
                if self.owner.metadata.namespace and meta.namespace != self.owner.metadata.namespace:
                    continue
                adopted = await self._adopt(obj)
                if adopted is not None:
                    claimed.append(adopted)
            except ApiError as e:
                if not e.is_not_found:
                    errors.append(e)
            except Exception as e:
                errors.append(e)
        if errors:
            raise errors[0]
        return claimed

    async def _check_can_adopt(self) -> None:
        if self._adopt_checked is False:
            try:
                await self._can_adopt()
                self._adopt_checked = True
            except Exception as e:
                self._adopt_checked = e
        if isinstance(self._adopt_checked, Exception):
            raise self._adopt_checked

    async def _adopt(self, obj: M) -> M | None:
        await self._check_can_adopt()
        meta: ObjectMeta = obj.metadata  # type: ignore[attr-defined]
        ref = new_controller_ref(self.owner, self.api_version, self.kind).to_dict()
        patch = {"metadata": {"ownerReferences": [ref], "uid": meta.uid}}
        log.info("%s %s/%s adopts %s", self.kind, self.owner.metadata.namespace, self.owner.metadata.name, meta.name)
        return await self.client.patch(self.model, meta.name or "", patch, "strategic", meta.namespace)

    async def _release(self, obj: M) -> None:
        meta: ObjectMeta = obj.metadata  # type: ignore[attr-defined]
        patch = {"metadata": {"ownerReferences": [{"$patch": "delete", "uid": self.owner.metadata.uid}],
                              "uid": meta.uid}}
        log.info("%s %s/%s releases %s", self.kind, self.owner.metadata.namespace, self.owner.metadata.name, meta.name)
        await self.client.patch(self.model, meta.name or "", patch, "strategic", meta.namespace)


def recheck_deletion_timestamp(client: ApiClient, owner: Any) -> Callable[[], Awaitable[None]]:
    """controller.RecheckDeletionTimestamp: a fresh read says the owner is the same and not deleting."""
    model = type(owner)

    async def check() -> None:
        meta = owner.metadata
        fresh = await client.get(model, meta.name, meta.namespace)
        if fresh.metadata.uid != meta.uid:  # type: ignore[attr-defined]
            raise RuntimeError(f"original {model.__name__} {meta.namespace}/{meta.name} is gone: got uid "
                               f"{fresh.metadata.uid}, wanted {meta.uid}")  # type: ignore[attr-defined]
        if fresh.metadata.deletion_timestamp is not None:  # type: ignore[attr-defined]
            raise RuntimeError(f"{meta.namespace}/{meta.name} has just been deleted at "
                               f"{fresh.metadata.deletion_timestamp}")  # type: ignore[attr-defined]

    return check


# -- expectations (client-go's ControllerExpectations) ----------------------------------------


@dataclass
class _Expectation:
    add: int
    delete: int
    timestamp: float

    def fulfilled(self) -> bool:
        return self.add <= 0 and self.delete <= 0


@dataclass
class ControllerExpectations:
    """Creates and deletes a controller asked for and has not yet seen in its informer, per key.

    `satisfied(key)` is true when nothing is outstanding, when there is no record (a new
    controller, or the key was deleted), or when the record is older than the TTL (a lost watch
    event must not freeze the controller forever).
    """

    ttl: float = EXPECTATIONS_TIMEOUT
    clock: Callable[[], float] = time.monotonic
    _store: dict[str, _Expectation] = field(default_factory=dict)

    def get(self, key: str) -> tuple[int, int] | None:
        e = self._store.get(key)
        return None if e is None else (e.add, e.delete)

    def satisfied(self, key: str) -> bool:
        e = self._store.get(key)
        if e is None:
            return True
        if e.fulfilled():
            return True
        if self.clock() - e.timestamp > self.ttl:
            log.info("expectations of %s expired (add %d, delete %d)", key, e.add, e.delete)
            return True
        return False

    def set_expectations(self, key: str, add: int, delete: int) -> None:
        self._store[key] = _Expectation(add, delete, self.clock())

    def expect_creations(self, key: str, adds: int) -> None:
        self.set_expectations(key, adds, 0)

    def expect_deletions(self, key: str, dels: int) -> None:
        self.set_expectations(key, 0, dels)

    def lower_expectations(self, key: str, add: int, delete: int) -> None:
        e = self._store.get(key)
        if e is not None:
            e.add -= add
            e.delete -= delete

    def raise_expectations(self, key: str, add: int, delete: int) -> None:
        e = self._store.get(key)
        if e is not None:
            e.add += add
            e.delete += delete

    def creation_observed(self, key: str) -> None:
        self.lower_expectations(key, 1, 0)

    def deletion_observed(self, key: str) -> None:
        self.lower_expectations(key, 0, 1)

    def delete_expectations(self, key: str) -> None:
        self._store.pop(key, None)


@dataclass
class UIDTrackingControllerExpectations(ControllerExpectations):
    """Deletions tracked by pod key, so a pod seen going twice (deletionTimestamp set, then the
    DELETED event) lowers the count once."""

    _uids: dict[str, set[str]] = field(default_factory=dict)

    def expect_deletions_of(self, key: str, pod_keys: list[str]) -> None:
        self._uids[key] = set(pod_keys)
        self.expect_deletions(key, len(pod_keys))

    def deletion_observed_of(self, key: str, pod_key: str) -> None:
        uids = self._uids.get(key)
        if uids is not None and pod_key in uids:
            uids.discard(pod_key)
            self.deletion_observed(key)

    def delete_expectations(self, key: str) -> None:
        super().delete_expectations(key)
        self._uids.pop(key, None)


# -- pods -------------------------------------------------------------------------------------


def is_pod_active(pod: Pod) -> bool:
    """controller.IsPodActive: not finished and not being deleted."""
    phase = pod.status.phase if pod.status else None
    return phase not in ("Succeeded", "Failed") and pod.metadata.deletion_timestamp is None


def _ready_condition(pod: Pod) -> Any:
    for c in (pod.status.conditions if pod.status else None) or []:
        if c.type == "Ready":
            return c
    return None


def is_pod_ready(pod: Pod) -> bool:
    c = _ready_condition(pod)
    return c is not None and c.status == "True"


def pod_ready_time(pod: Pod) -> dt.datetime | None:
    """When the pod last became ready (None if it is not ready)."""
    c = _ready_condition(pod)
    if c is None or c.status != "True":
        return None
    return timeutil.parse_rfc3339(c.last_transition_time)


def is_pod_available(pod: Pod, min_ready_seconds: int, now: dt.datetime) -> bool:
    """podutil.IsPodAvailable: ready, and for at least minReadySeconds."""
    if not is_pod_ready(pod):
        return False
    if min_ready_seconds <= 0:
        return True
    since = pod_ready_time(pod)
    return since is not None and since + dt.timedelta(seconds=min_ready_seconds) < now


def _sync_inputs(pod: Pod) -> tuple[Any, ...]:
    """What a ReplicaSet sync reads from a pod it owns, besides its labels, owner and deletion: its
    phase (a finished pod is replaced) and its Ready condition (ready and available counts)."""
    condition = _ready_condition(pod)
    return ((pod.status.phase if pod.status else None),
            None if condition is None else (condition.status, condition.last_transition_time))


def _deletion_cost(pod: Pod) -> int:
    raw = (pod.metadata.annotations or {}).get(POD_DELETION_COST)
    try:
        return int(raw) if raw is not None else 0
    except ValueError:
        return 0


def _max_restarts(pod: Pod) -> tuple[int, int]:
    """(max restarts of a regular container, max restarts of a sidecar init container)."""
    status = pod.status
    regular = max((c.restart_count for c in (status.container_statuses if status else None) or []), default=0)
    sidecars = {c.name for c in (pod.spec.init_containers if pod.spec else None) or [] if c.restart_policy == "Always"}
    sidecar = max((c.restart_count for c in (status.init_container_statuses if status else None) or []
                   if c.name in sidecars), default=0)
    return regular, sidecar


_PHASE_ORDINAL = {"Pending": 0, "Unknown": 1, "Running": 2}


def _after_or_zero(t1: dt.datetime | None, t2: dt.datetime | None) -> bool:
    if t1 is None or t2 is None:
        return t1 is None
    return t1 > t2


def _log_rank(t: dt.datetime, now: dt.datetime) -> int:
    ns = (now - t) / dt.timedelta(microseconds=1) * 1000
    return int(math.log2(ns)) if ns > 0 else -1


@dataclass(frozen=True)
class RankedPod:
    pod: Pod
    rank: int  # ready related pods on the same node


def _less(a: RankedPod, b: RankedPod, now: dt.datetime) -> bool:
    """controller.ActivePodsWithRanks.Less (LogarithmicScaleDown and PodDeletionCost on, their
    defaults): True when `a` should be deleted before `b`."""
    pa, pb = a.pod, b.pod
    na = (pa.spec.node_name if pa.spec else None) or ""
    nb = (pb.spec.node_name if pb.spec else None) or ""
    # 1. unassigned < assigned
    if na != nb and (not na or not nb):
        return not na
    # 2. Pending < Unknown < Running
    oa = _PHASE_ORDINAL.get((pa.status.phase if pa.status else None) or "", 0)
    ob = _PHASE_ORDINAL.get((pb.status.phase if pb.status else None) or "", 0)
    if oa != ob:
        return oa < ob
    # 3. not ready < ready
    ra, rb = is_pod_ready(pa), is_pod_ready(pb)
    if ra != rb:
        return not ra
    # 4. lower pod-deletion-cost < higher
    ca, cb = _deletion_cost(pa), _deletion_cost(pb)
    if ca != cb:
        return ca < cb
    # 5. doubled up (more related pods on the same node) < not doubled up
    if a.rank != b.rank:
        return a.rank > b.rank
    # 6. ready for a shorter time < longer (in log2 buckets)
    if ra and rb:
        ta, tb = pod_ready_time(pa), pod_ready_time(pb)
        if ta != tb:
            if ta is None or tb is None:
                return _after_or_zero(ta, tb)
            diff = _log_rank(ta, now) - _log_rank(tb, now)
            if diff == 0:
                return (pa.metadata.uid or "") < (pb.metadata.uid or "")
            return diff < 0
    # 7. more restarts < fewer
    xa, xb = _max_restarts(pa), _max_restarts(pb)
    if xa[0] != xb[0]:
        return xa[0] > xb[0]
    if xa[1] != xb[1]:
        return xa[1] > xb[1]
    # 8. newer < older (in log2 buckets)
    ta = timeutil.parse_rfc3339(pa.metadata.creation_timestamp)
    tb = timeutil.parse_rfc3339(pb.metadata.creation_timestamp)
    if ta != tb:
        if ta is None or tb is None:
            return _after_or_zero(ta, tb)
        diff = _log_rank(ta, now) - _log_rank(tb, now)
        if diff == 0:
            return (pa.metadata.uid or "") < (pb.metadata.uid or "")
        return diff < 0
    return False


def rank_pods_for_deletion(pods: Sequence[Pod], related: Sequence[Pod], now: dt.datetime | None = None) -> list[Pod]:
    """Pods in deletion order, least useful first (getPodsRankedByRelatedPodsOnSameNode + sort)."""
    now = now or timeutil.now()
    on_node: dict[str, int] = {}
    for p in related:
        if is_pod_active(p):
            node = (p.spec.node_name if p.spec else None) or ""
            on_node[node] = on_node.get(node, 0) + 1
    ranked = [RankedPod(p, on_node.get((p.spec.node_name if p.spec else None) or "", 0)) for p in pods]

    def cmp(x: RankedPod, y: RankedPod) -> int:
        if _less(x, y, now):
            return -1
        if _less(y, x, now):
            return 1
        return 0

    ranked.sort(key=functools.cmp_to_key(cmp))
    return [r.pod for r in ranked]


def pods_to_delete(pods: Sequence[Pod], related: Sequence[Pod], diff: int, now: dt.datetime | None = None) -> list[Pod]:
    """getPodsToDelete: the `diff` least useful pods (no sorting when all of them go)."""
    if diff < len(pods):
        return rank_pods_for_deletion(pods, related, now)[:diff]
    return list(pods)[:diff]


def pod_from_template(template: PodTemplateSpec, parent: Any, ref: OwnerReference, *, copy_spec: bool = True) -> Pod:
    """controller.GetPodFromTemplate: labels, annotations and finalizers of the template, generateName
    `{parent}-`, the controller reference, the template's spec (shared with the template, not copied,
    when `copy_spec` is false: for a pod that is only serialized)."""
    tmeta = template.metadata or ObjectMeta()
    if not tmeta.labels:
        raise ValueError("unable to create pods, no labels")
    meta = ObjectMeta(
        generate_name=f"{parent.metadata.name}-", namespace=parent.metadata.namespace,
        labels=dict(tmeta.labels), annotations=dict(tmeta.annotations) if tmeta.annotations else None,
        finalizers=list(tmeta.finalizers) if tmeta.finalizers else None, owner_references=[ref],
    )
    spec = template.spec.model_copy(deep=True) if template.spec is not None and copy_spec else template.spec
    return Pod(metadata=meta, spec=spec)


def pod_body_from_template(template: PodTemplateSpec, parent: Any, ref: OwnerReference) -> dict[str, Any]:
    """The wire form of `pod_from_template`: what the ReplicaSet controller POSTs. One sync serializes it
    once for all the pods it creates (a deep copy of the template per pod was most of its CPU)."""
    return {"apiVersion": "v1", "kind": "Pod", **pod_from_template(template, parent, ref, copy_spec=False).to_dict()}


async def slow_start_batch(count: int, initial_batch_size: int,
                           fn: Callable[[], Awaitable[None]]) -> tuple[int, Exception | None]:
    """Call fn `count` times in batches of 1, 2, 4 ... run concurrently; stop after a batch with a
    failure. Returns (successes, first error)."""
    remaining, successes = count, 0
    batch = min(remaining, initial_batch_size)
    while batch > 0:
        results = await asyncio.gather(*(fn() for _ in range(batch)), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        successes += batch - len(errors)
        if errors:
            first = errors[0]
            if isinstance(first, asyncio.CancelledError) or not isinstance(first, Exception):
                raise first
            return successes, first
        remaining -= batch
        batch = min(2 * batch, remaining)
    return successes, None


def _namespace_terminating(e: Exception) -> bool:
    return isinstance(e, ApiError) and e.is_forbidden and "being terminated" in e.message


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
        condition = _ready_condition(pod)
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

    def __init__(self, client: ApiClient, informers: SharedInformerFactory, workers: int = 5,
                 burst_replicas: int = BURST_REPLICAS, max_concurrent_writes: int = MAX_CONCURRENT_WRITES) -> None:
        super().__init__(workers)
        self.client = client
        self._writes = asyncio.Semaphore(max_concurrent_writes)
        # One writer: SuccessfulCreate/Delete events trail the pod writes rather than compete with them.
        self.recorder = EventRecorder(client, CONTROLLER_NAME, workers=EVENT_WORKERS)
        self.burst_replicas = burst_replicas
        self.expectations = UIDTrackingControllerExpectations()
        self.rs_informer: Informer[ReplicaSet] = informers.informer_for(ReplicaSet)
        self.pod_informer: Informer[Pod] = informers.informer_for(Pod)
        indexes = {CONTROLLER_UID_INDEX: controller_uid_index, ORPHAN_INDEX: orphan_index}
        ensure_indexers(self.rs_informer, indexes)
        ensure_indexers(self.pod_informer, indexes)
        self.rs_informer.add_event_handler(self._rs_added, self._rs_updated, self._rs_deleted)
        self.pod_informer.add_event_handler(self._pod_added, self._pod_updated, self._pod_deleted)
        self.informers.extend([self.rs_informer, self.pod_informer])

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
        if ref is None or ref.kind != "ReplicaSet":
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
            sel = label_selector_of(rs)
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
        selector = label_selector_of(rs)
        candidates = owned_and_orphans(self.pod_informer, rs.metadata.uid or "", namespace or "")
        active = [p for p in candidates if is_pod_active(p)]
        manager = ControllerRefManager(self.client, rs, "apps/v1", "ReplicaSet", selector, Pod,
                                       recheck_deletion_timestamp(self.client, rs))
        pods = await manager.claim(active)

        manage_error: Exception | None = None
        if needs_sync and rs.metadata.deletion_timestamp is None:
            try:
                await self._manage_replicas(pods, rs, key)
            except Exception as e:
                manage_error = e
        new_status = calculate_status(rs, pods, manage_error)
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
            body = pod_body_from_template(rs.spec.template, rs, new_controller_ref(rs, "apps/v1", "ReplicaSet"))
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
            if _namespace_terminating(e):
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
                current = await self.client.get(ReplicaSet, rs.metadata.name or "", rs.metadata.namespace)
        raise AssertionError("unreachable")
