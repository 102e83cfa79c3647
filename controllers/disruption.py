"""The disruption controller (upstream pkg/controller/disruption/disruption.go): keeps each
PodDisruptionBudget's status, which the eviction subresource spends.

For a budget: its pods (selector; policy/v1's empty selector selects the whole namespace), the
number of pods expected (minAvailable as an integer: the pods found; a percent, or maxUnavailable:
the sum of the scales of the pods' controllers, found through the ReplicaSet (or the Deployment
owning it) in the informers' caches, else the scale subresource of the controller's kind, so a
StatefulSet or ReplicationController counts when it is served), desiredHealthy (percents rounded
up), currentHealthy (Ready pods not being deleted and not in disruptedPods), disruptionsAllowed =
currentHealthy - desiredHealthy (0 when no pod is expected), the DisruptionAllowed condition
(SufficientPods / InsufficientPods) and disruptedPods: the pods the eviction subresource promised to
delete, each forgotten 2 minutes after (DeletionTimeout) with a NotDeleted event if it still stands.
A sync that fails (a pod with no controller found, say) sets disruptionsAllowed to 0 and the
condition to False, reason SyncFailed, with the error (failSafe); a conflict is just retried.

A second kind of key, `stale/<ns>/<name>`, clears a pod's DisruptionTarget condition that no deletion
followed within 2 minutes (upstream's stalePodDisruption queue).
"""

from __future__ import annotations

import datetime as dt
import logging
import math
from collections.abc import Callable
from typing import Any

from controllers.controller_utils import ensure_indexers
from machinery import timeutil
from machinery.api.apps_v1 import Deployment, ReplicaSet
from machinery.api.core_v1 import Pod
from machinery.api.meta import OwnerReference
from machinery.api.policy_v1 import (
    DISRUPTION_ALLOWED_CONDITION,
    INSUFFICIENT_PODS_REASON,
    SUFFICIENT_PODS_REASON,
    SYNC_FAILED_REASON,
    PodDisruptionBudget,
)
from machinery.api.resources import resource_for_kind
from machinery.client import ApiClient, ApiError
from machinery.controller import Controller
from machinery.events import EventRecorder
from machinery.informer import Informer, SharedInformerFactory, meta_namespace_key, namespace_index
from machinery.selectors import LabelSelector, selector_from_label_selector

log = logging.getLogger(__name__)

DELETION_TIMEOUT = 120.0  # upstream DeletionTimeout: 2 minutes for an evicted pod to go
STALE_POD_DISRUPTION_TIMEOUT = 120.0  # upstream stalePodDisruptionTimeout
NAMESPACE_INDEX = "namespace"
STALE_PREFIX = "stale/"
Obj = dict[str, Any]


# -- pure parts ------------------------------------------------------------------------------------


def scaled_value(value: int | str, total: int, round_up: bool = True) -> int:
    """intstr.GetScaledValueFromIntOrPercent."""
    if isinstance(value, int):
        return value
    if not value.endswith("%"):
        raise ValueError("invalid value for IntOrString: invalid type: string is not a percentage")
    try:
        percent = int(value[:-1])
    except ValueError:
        raise ValueError(f'invalid value "{value}": strconv.Atoi: parsing "{value[:-1]}": invalid syntax') from None
    scaled = percent * total / 100
    return math.ceil(scaled) if round_up else math.floor(scaled)


def pdb_selector(pdb: PodDisruptionBudget) -> LabelSelector:
    sel = pdb.spec.selector if pdb.spec is not None else None
    try:
        return selector_from_label_selector(sel.to_dict() if sel is not None else None)
    except ValueError:
        return LabelSelector.nothing()


def is_pod_ready(pod: Pod) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in (pod.status.conditions if pod.status else None) or [])


def build_disrupted_pod_map(pods: list[Pod], disrupted: dict[str, str] | None, now: dt.datetime
                            ) -> tuple[dict[str, str], dt.datetime | None, list[Pod]]:
    """buildDisruptedPodMap: the entries still within DeletionTimeout of pods that are not being
    deleted yet, the earliest time one expires, and the pods whose entry expired (NotDeleted)."""
    result: dict[str, str] = {}
    recheck: dt.datetime | None = None
    expired: list[Pod] = []
    if not disrupted:
        return result, recheck, expired
    for pod in pods:
        if pod.metadata.deletion_timestamp is not None:
            continue
        when = disrupted.get(pod.metadata.name or "")
        if when is None:
            continue
        at = timeutil.parse_rfc3339(when)
        if at is None:
            continue
        expected = at + dt.timedelta(seconds=DELETION_TIMEOUT)
        if expected < now:
            expired.append(pod)
        else:
            if recheck is None or expected < recheck:
                recheck = expected
            result[pod.metadata.name or ""] = when
    return result, recheck, expired


def count_healthy_pods(pods: list[Pod], disrupted: dict[str, str], now: dt.datetime) -> int:
    """countHealthyPods: Ready, not being deleted, not about to be (in disruptedPods)."""
    healthy = 0
    for pod in pods:
        if pod.metadata.deletion_timestamp is not None:
            continue
        when = disrupted.get(pod.metadata.name or "")
        at = timeutil.parse_rfc3339(when) if when else None
        if at is not None and at + dt.timedelta(seconds=DELETION_TIMEOUT) > now:
            continue
        if is_pod_ready(pod):
            healthy += 1
    return healthy


def set_condition(conditions: list[Obj], wanted: Obj, now: str) -> None:
    """apimeta.SetStatusCondition: lastTransitionTime moves only when the status does."""
    for c in conditions:
        if c.get("type") == wanted["type"]:
            if c.get("status") != wanted["status"]:
                c["lastTransitionTime"] = now
            c.update({k: v for k, v in wanted.items() if k != "lastTransitionTime"})
            return
    conditions.append({**wanted, "lastTransitionTime": now})


def new_status(old: Obj, generation: int, current_healthy: int, desired_healthy: int, expected: int,
               disrupted: dict[str, str], now: str) -> Obj:
    """updatePdbStatus: disruptionsAllowed and the DisruptionAllowed condition."""
    allowed = current_healthy - desired_healthy
    if expected <= 0 or allowed <= 0:
        allowed = 0
    status: Obj = {"observedGeneration": generation, "disruptionsAllowed": allowed, "currentHealthy": current_healthy,
                   "desiredHealthy": desired_healthy, "expectedPods": expected,
                   "conditions": [dict(c) for c in old.get("conditions") or []]}
    if disrupted:
        status["disruptedPods"] = dict(disrupted)
    set_condition(status["conditions"], {
        "type": DISRUPTION_ALLOWED_CONDITION, "status": "True" if allowed > 0 else "False",
        "reason": SUFFICIENT_PODS_REASON if allowed > 0 else INSUFFICIENT_PODS_REASON, "message": "",
        "observedGeneration": generation}, now)
    return status


# -- the controller --------------------------------------------------------------------------------


class DisruptionController(Controller):
    name = "disruption"

    def __init__(self, client: ApiClient, informers: SharedInformerFactory, workers: int = 1,
                 clock: Callable[[], dt.datetime] = timeutil.now) -> None:
        super().__init__(workers)
        self.client = client
        self.clock = clock
        self.recorder = EventRecorder(client, "controllermanager")
        self.pdbs: Informer[PodDisruptionBudget] = informers.informer_for(PodDisruptionBudget)
        self.pods: Informer[Pod] = informers.informer_for(Pod)
        self.replicasets: Informer[ReplicaSet] = informers.informer_for(ReplicaSet)
        self.deployments: Informer[Deployment] = informers.informer_for(Deployment)
        ensure_indexers(self.pdbs, {NAMESPACE_INDEX: namespace_index})
        ensure_indexers(self.pods, {NAMESPACE_INDEX: namespace_index})
        self.watch(self.pdbs)
        self.watch(self.pods, self._keys_for_pod)
        for informer in (self.replicasets, self.deployments):  # caches only, as upstream's listers
            if informer not in self.informers:
                self.informers.append(informer)

    def _keys_for_pod(self, pod: Pod) -> list[str]:
        """The budgets selecting the pod (getPdbForPod), and the pod itself when it carries a
        DisruptionTarget condition that may go stale."""
        labels = pod.metadata.labels or {}
        keys = [meta_namespace_key(p) for p in self.pdbs.store.by_index(NAMESPACE_INDEX, pod.metadata.namespace or "")
                if pdb_selector(p).matches(labels)]
        if _disruption_target(pod) is not None and pod.metadata.deletion_timestamp is None:
            keys.append(STALE_PREFIX + meta_namespace_key(pod))
        return keys

    async def reconcile(self, key: str) -> float | None:
        if key.startswith(STALE_PREFIX):
            return await self._sync_stale_pod_disruption(key[len(STALE_PREFIX):])
        pdb = self.pdbs.store.get(key)
        if pdb is None:
            return None
        try:
            return await self._try_sync(pdb)
        except ApiError as e:
            if e.is_conflict:
                raise
            await self._fail_safe(pdb, e.message)
        except ValueError as e:
            await self._fail_safe(pdb, str(e))
        return None

    def _pods_for(self, pdb: PodDisruptionBudget) -> list[Pod]:
        selector = pdb_selector(pdb)
        return [p for p in self.pods.store.by_index(NAMESPACE_INDEX, pdb.metadata.namespace or "")
                if selector.matches(p.metadata.labels or {})]

    async def _try_sync(self, pdb: PodDisruptionBudget) -> float | None:
        pods = self._pods_for(pdb)
        if not pods:
            self.recorder.event(pdb, "Normal", "NoPods", "No matching pods found")
        expected, desired, unmanaged = await self._expected_pod_count(pdb, pods)
        if unmanaged:
            self.recorder.event(pdb, "Warning", "UnmanagedPods",
                                "Pods selected by this PodDisruptionBudget (selector: "
                                f"{pdb_selector(pdb)}) were found to be unmanaged. As a result, the status of the PDB "
                                "cannot be calculated correctly, which may result in undefined behavior. To account "
                                'for these pods please set ".spec.minAvailable" field of the PDB to an integer value.')
        now = self.clock()
        old = (pdb.status.to_dict() if pdb.status else {})
        disrupted, recheck, expired = build_disrupted_pod_map(pods, old.get("disruptedPods"), now)
        for pod in expired:
            self.recorder.event(pod, "Warning", "NotDeleted", f"Pod was expected by PDB {pdb.metadata.namespace}/"
                                f"{pdb.metadata.name} to be deleted but it wasn't")
        healthy = count_healthy_pods(pods, disrupted, now)
        generation = pdb.metadata.generation or 0
        status = new_status(old, generation, healthy, desired, expected, disrupted, timeutil.format_rfc3339(now))
        if status != old:
            await self._write_status(pdb, status)
        if recheck is not None:
            return max((recheck - now).total_seconds(), 0.0)
        return None

    async def _expected_pod_count(self, pdb: PodDisruptionBudget, pods: list[Pod]) -> tuple[int, int, list[str]]:
        """getExpectedPodCount: (expectedCount, desiredHealthy, unmanaged pods)."""
        spec = pdb.spec
        if spec is None:
            return 0, 0, []
        if spec.max_unavailable is not None:
            expected, unmanaged = await self._expected_scale(pods)
            desired = max(expected - scaled_value(spec.max_unavailable, expected), 0)
            return expected, desired, unmanaged
        if spec.min_available is not None:
            if isinstance(spec.min_available, int):
                return len(pods), spec.min_available, []
            expected, unmanaged = await self._expected_scale(pods)
            return expected, scaled_value(spec.min_available, expected), unmanaged
        return 0, 0, []

    async def _expected_scale(self, pods: list[Pod]) -> tuple[int, list[str]]:
        """getExpectedScale: the sum of the scales of the pods' controllers, each counted once."""
        scales: dict[str, int] = {}
        unmanaged: list[str] = []
        for pod in pods:
            ref = next((r for r in pod.metadata.owner_references or [] if r.controller), None)
            if ref is None:
                unmanaged.append(pod.metadata.name or "")
                continue
            if ref.uid in scales:
                continue
            found = await self._controller_scale(ref, pod.metadata.namespace or "")
            if found is None:
                raise ValueError(f'found no controllers for pod "{pod.metadata.name}"')
            scales[found[0]] = found[1]
        return sum(scales.values()), unmanaged

    async def _controller_scale(self, ref: OwnerReference, namespace: str) -> tuple[str, int] | None:
        """The finders: ReplicaSet under a Deployment (the Deployment's scale), a ReplicaSet alone,
        else the scale subresource of the controller's kind (StatefulSet, ReplicationController, ...)."""
        group = ref.api_version.rpartition("/")[0] if "/" in ref.api_version else ""
        if ref.kind == "ReplicaSet" and group in ("apps", "extensions"):
            rs = self.replicasets.store.get(f"{namespace}/{ref.name}")
            if rs is None or rs.metadata.uid != ref.uid:
                return None
            owner = next((r for r in rs.metadata.owner_references or [] if r.controller), None)
            if owner is not None and owner.kind == "Deployment":
                dep = self.deployments.store.get(f"{namespace}/{owner.name}")
                if dep is None or dep.metadata.uid != owner.uid:
                    return None
                replicas = dep.spec.replicas if dep.spec and dep.spec.replicas is not None else 1
                return dep.metadata.uid or "", replicas
            return rs.metadata.uid or "", rs.spec.replicas if rs.spec and rs.spec.replicas is not None else 1
        info = resource_for_kind(ref.api_version, ref.kind)
        if info is None or "scale" not in info.subresources:
            return None
        try:
            scale = await self.client.get_raw(info, ref.name, namespace, subresource="scale")
        except ApiError as e:
            if e.is_not_found:
                return None
            raise
        if (scale.get("metadata") or {}).get("uid") != ref.uid:
            return None
        return ref.uid, int((scale.get("spec") or {}).get("replicas") or 0)

    async def _write_status(self, pdb: PodDisruptionBudget, status: Obj) -> None:
        body = pdb.to_dict()
        body["status"] = status
        await self.client.update_raw(PodDisruptionBudget, pdb.metadata.name or "", body, pdb.metadata.namespace,
                                     subresource="status")

    async def _fail_safe(self, pdb: PodDisruptionBudget, message: str) -> None:
        """failSafe: nothing may be disrupted while the budget cannot be computed."""
        log.warning("disruption: %s/%s failed to sync: %s", pdb.metadata.namespace, pdb.metadata.name, message)
        self.recorder.event(pdb, "Warning", "CalculateExpectedPodCountFailed",
                            f"Failed to calculate the number of expected pods: {message}")
        status = pdb.status.to_dict() if pdb.status else {}
        status["disruptionsAllowed"] = 0
        conditions = [dict(c) for c in status.get("conditions") or []]
        set_condition(conditions, {"type": DISRUPTION_ALLOWED_CONDITION, "status": "False",
                                   "reason": SYNC_FAILED_REASON, "message": message,
                                   "observedGeneration": status.get("observedGeneration") or 0},
                      timeutil.now_rfc3339())
        status["conditions"] = conditions
        await self._write_status(pdb, status)

    async def _sync_stale_pod_disruption(self, key: str) -> float | None:
        """syncStalePodDisruption: DisruptionTarget=True on a pod still standing 2 minutes later goes False."""
        pod = self.pods.store.get(key)
        if pod is None or pod.metadata.deletion_timestamp is not None:
            return None
        cond = _disruption_target(pod)
        if cond is None:
            return None
        since = timeutil.parse_rfc3339(cond.last_transition_time) if cond.last_transition_time else None
        if since is not None:
            left = (since + dt.timedelta(seconds=STALE_POD_DISRUPTION_TIMEOUT) - self.clock()).total_seconds()
            if left > 0:
                return left
        await self.client.patch_raw(Pod, pod.metadata.name or "", {"status": {"conditions": [
            {"type": "DisruptionTarget", "status": "False", "lastTransitionTime": timeutil.now_rfc3339()}]}},
            "strategic", pod.metadata.namespace, subresource="status")
        return None


def _disruption_target(pod: Pod) -> Any:
    return next((c for c in (pod.status.conditions if pod.status else None) or []
                 if c.type == "DisruptionTarget" and c.status == "True"), None)
