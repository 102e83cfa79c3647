"""Helpers several controllers share (upstream pkg/controller/controller_utils.go, with the pod
helpers of pkg/api/v1/pod and the indexes a controller claims from).

- expectations: creates and deletes a controller asked for and has not yet seen in its informer
  (ControllerExpectations, UIDTrackingControllerExpectations), so a lagging informer does not
  cause over-creation;
- pods: active, ready, available (minReadySeconds), the deletion order of ActivePodsWithRanks,
  a pod from a template (GetPodFromTemplate), creates in slow-start batches;
- indexes: objects by controller UID and the orphans of a namespace, what an owner may claim;
- a create refused because its namespace is terminating;
- the time format of metav1.Time.

Claiming itself (adopt, release) is controllers/controller_ref_manager.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import functools
import logging
import math
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel

from machinery import timeutil
from machinery.api.core_v1 import Pod, PodTemplateSpec
from machinery.api.meta import ObjectMeta, OwnerReference
from machinery.client import ApiError
from machinery.informer import CONTROLLER_UID_INDEX, Informer, controller_uid_index, meta_namespace_key
from machinery.selectors import LabelSelector, selector_from_label_selector

log = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)

SLOW_START_INITIAL_BATCH_SIZE = 1
EXPECTATIONS_TIMEOUT = 300.0  # seconds (upstream ExpectationsTimeout)
POD_DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
ORPHAN_INDEX = "minik8s/orphansByNamespace"


# -- API errors -------------------------------------------------------------------------------


def namespace_terminating(e: Exception) -> bool:
    """The create was refused because its namespace is being deleted (upstream checks the Status cause
    NamespaceTerminating): every further create there fails the same way, so it is not worth an event."""
    return isinstance(e, ApiError) and e.is_forbidden and "being terminated" in e.message


# -- indexes ----------------------------------------------------------------------------------


def orphan_index(obj: Any) -> list[str]:
    """Objects with no controller, by namespace: the candidates for adoption."""
    if controller_uid_index(obj):
        return []
    ns = obj.metadata.namespace if not isinstance(obj, dict) else (obj.get("metadata") or {}).get("namespace")
    return [ns or ""]


def ensure_indexers(informer: Informer[Any], indexers: Mapping[str, Callable[[Any], list[str]]]) -> None:
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


def owners_selecting(pod: Pod, owners: Iterable[Any]) -> list[str]:
    """The keys of the owners in the pod's namespace whose (non-empty) selector matches its labels: the
    controllers that may adopt an orphan (getPodStatefulSets, getDaemonSetsForPod, ...)."""
    labels = pod.metadata.labels or {}
    return [meta_namespace_key(owner) for owner in owners
            if owner.metadata.namespace == pod.metadata.namespace and owner.spec is not None
            and not (selector := label_selector_of(owner)).empty and selector.matches(labels)]


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


def pod_ready_condition(pod: Pod) -> Any:
    for c in (pod.status.conditions if pod.status else None) or []:
        if c.type == "Ready":
            return c
    return None


def is_pod_ready(pod: Pod) -> bool:
    c = pod_ready_condition(pod)
    return c is not None and c.status == "True"


def pod_ready_time(pod: Pod) -> dt.datetime | None:
    """When the pod last became ready (None if it is not ready)."""
    c = pod_ready_condition(pod)
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

