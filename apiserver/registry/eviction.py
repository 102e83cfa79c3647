"""The pods/eviction subresource (upstream pkg/registry/core/pod/storage/eviction.go, EvictionREST):
deleting a pod only if the PodDisruptionBudget that covers it allows one more disruption.

- A pod that is terminal (Succeeded, Failed), Pending, or already being deleted has caused its
  disruption already: it is deleted at once, no budget asked (canIgnorePDB), with its
  resourceVersion as a precondition unless it is terminal, so no budget-relevant change races it.
- No budget: the pod is deleted. More than one: 500, "This pod has more than one
  PodDisruptionBudget, which the eviction subresource does not support."
- One budget: a not-Ready pod is deleted without spending the budget when the budget says
  `unhealthyPodEvictionPolicy: AlwaysAllow`, or when it is healthy enough (currentHealthy >=
  desiredHealthy > 0, IfHealthyBudget, the default); else the budget is checked and decremented by
  a write of its status (disruptionsAllowed - 1, the pod in disruptedPods) with its
  resourceVersion, re-read and retried on a conflict; a budget with nothing left, or not yet
  observed by the disruption controller, is a 429 with the DisruptionBudget cause.
- Before the delete the pod gets the DisruptionTarget condition (reason EvictionByEvictionAPI).

DeleteOptions are the eviction's (grace period, preconditions, dryRun); the query's dryRun=All
counts too. The answer is a Success Status, 201.
"""

from __future__ import annotations

import copy
from typing import Any

from apiserver import errors
from apiserver.admission.interfaces import AdmissionAttributes
from apiserver.registry.generic import DeleteOptions, Store, WriteOptions
from apiserver.storage.predicate import Predicate
from machinery.api.policy_v1 import DISRUPTION_ALLOWED_CONDITION, DISRUPTION_BUDGET_CAUSE, INSUFFICIENT_PODS_REASON
from machinery.selectors import SelectorError, selector_from_label_selector
from machinery.timeutil import now_rfc3339
from machinery.types import Obj

SUBRESOURCE = "eviction"
# upstream EvictionsRetry: 20 steps of 500 ms back-off; here conflicts are retried at once
EVICTION_RETRIES = 20
# upstream MaxDisruptedPodSize: evictions the disruption controller has not confirmed yet
MAX_DISRUPTED_POD_SIZE = 2000
TOO_MANY_REQUESTS = "Cannot evict pod as it would violate the pod's disruption budget."
MORE_THAN_ONE = "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."


def too_many_requests(cause: str, retry_after: int) -> errors.ApiError:
    """errors.NewTooManyRequests with the DisruptionBudget cause."""
    details: dict[str, Any] = {"causes": [{"reason": DISRUPTION_BUDGET_CAUSE, "message": cause}]}
    if retry_after:
        details["retryAfterSeconds"] = retry_after
    return errors.ApiError(429, "TooManyRequests", TOO_MANY_REQUESTS, details)


def is_pod_ready(pod: Obj) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def can_ignore_pdb(pod: Obj) -> bool:
    """canIgnorePDB: the pod's disruption has happened already (or it never ran)."""
    phase = (pod.get("status") or {}).get("phase")
    return phase in ("Succeeded", "Failed", "Pending") or bool(pod["metadata"].get("deletionTimestamp"))


def should_enforce_resource_version(pod: Obj) -> bool:
    """A terminal pod cannot become healthy again: no need to pin its resourceVersion."""
    return (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


def pdbs_for_pod(pdbs: list[Obj], pod: Obj) -> list[Obj]:
    """getPodDisruptionBudgets: the pod's namespace's budgets whose selector selects it (policy/v1:
    an empty selector selects every pod; an invalid one none)."""
    labels = pod["metadata"].get("labels") or {}
    out = []
    for pdb in pdbs:
        try:
            selector = selector_from_label_selector((pdb.get("spec") or {}).get("selector"))
        except (SelectorError, ValueError):
            continue
        if selector.matches(labels):
            out.append(pdb)
    return out


def update_disruption_allowed_condition(status: Obj, observed_generation: int | None) -> None:
    """pdbhelper.UpdateDisruptionAllowedCondition via apimeta.SetStatusCondition."""
    allowed = (status.get("disruptionsAllowed") or 0) > 0
    wanted: dict[str, Any] = {"type": DISRUPTION_ALLOWED_CONDITION, "status": "True" if allowed else "False",
              "reason": "SufficientPods" if allowed else INSUFFICIENT_PODS_REASON, "message": ""}
    if observed_generation is not None:
        wanted["observedGeneration"] = observed_generation
    set_status_condition(status.setdefault("conditions", []), wanted)


def set_status_condition(conditions: list[Obj], wanted: Obj, now: str | None = None) -> bool:
    """apimeta.SetStatusCondition: the transition time moves only when the status changes. True if
    anything changed."""
    for c in conditions:
        if c.get("type") == wanted["type"]:
            before = dict(c)
            if c.get("status") != wanted["status"]:
                c["status"] = wanted["status"]
                c["lastTransitionTime"] = wanted.get("lastTransitionTime") or now or now_rfc3339()
            for key in ("reason", "message", "observedGeneration"):
                if key in wanted:
                    c[key] = wanted[key]
            return c != before
    conditions.append({**wanted, "lastTransitionTime": wanted.get("lastTransitionTime") or now or now_rfc3339()})
    return True


def _options(eviction: Obj, dry_run_query: bool, user: Any) -> DeleteOptions:
    raw = eviction.get("deleteOptions") or {}
    dry_run = raw.get("dryRun") or []
    if any(d != "All" for d in dry_run):
        raise errors.bad_request(f'unsupported dryRun value: {dry_run}; only "All" is supported')
    pre = raw.get("preconditions") or {}
    grace = raw.get("gracePeriodSeconds")
    return DeleteOptions(grace_period_seconds=None if grace is None else max(grace, 0),
                         propagation_policy=raw.get("propagationPolicy"), orphan_dependents=raw.get("orphanDependents"),
                         precondition_uid=pre.get("uid"), precondition_rv=pre.get("resourceVersion"),
                         dry_run=bool(dry_run) or dry_run_query, user=user)


class EvictionREST:
    """POST pods/{name}/eviction."""

    def __init__(self, pods: Store, pdbs: Store) -> None:
        self.pods = pods
        self.pdbs = pdbs

    async def create(self, namespace: str, name: str, eviction: Obj, opts: WriteOptions) -> Obj:
        meta = eviction.get("metadata") or {}
        if meta.get("name") and meta["name"] != name:
            raise errors.bad_request("name in URL does not match name in Eviction object")
        if meta.get("namespace") and meta["namespace"] != namespace:
            raise errors.bad_request("the namespace of the provided object does not match the namespace sent on "
                                     "the request")
        options = _options(eviction, opts.dry_run, opts.user)
        pod = await self.pods.get(namespace, name)
        if self.pods.admission is not None and opts.user is not None:  # the eviction is admitted as a CREATE
            await self.pods.admission.validate(AdmissionAttributes("CREATE", self.pods, namespace, name, SUBRESOURCE,
                                                                   eviction, pod, opts.user, options.dry_run))
        # the pod's disruption has happened already: delete it, no budget asked
        for _ in range(EVICTION_RETRIES):
            pod = await self.pods.get(namespace, name)
            if not can_ignore_pdb(pod):
                break
            delete = copy.copy(options)
            if should_enforce_resource_version(pod) and not options.precondition_rv:
                delete.precondition_rv = pod["metadata"]["resourceVersion"]
            try:
                await self._delete(namespace, name, delete, condition=False)
            except errors.ApiError as e:
                if e.code == 409 and not options.precondition_rv:
                    continue
                raise
            return _success()
        else:
            raise errors.conflict(self.pods.info, name, "too many concurrent writers; try again")

        listed = await self.pdbs.list(namespace, Predicate(namespace))
        pdbs = pdbs_for_pod(listed.items, pod)
        if len(pdbs) > 1:
            raise errors.internal(MORE_THAN_ONE)
        pin_rv = False
        if pdbs:
            pdb = pdbs[0]
            policy = (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy")
            status = pdb.get("status") or {}
            if not is_pod_ready(pod) and policy == "AlwaysAllow":
                pin_rv = True  # delete without the budget, as long as the pod does not become Ready meanwhile
            elif not is_pod_ready(pod) and (status.get("currentHealthy") or 0) >= (status.get("desiredHealthy") or 0) \
                    and (status.get("desiredHealthy") or 0) > 0:
                pin_rv = True  # unhealthy pods of a healthy budget go without spending it
            else:
                await self._check_and_decrement(namespace, name, pdb, options.dry_run)
        delete = copy.copy(options)
        if pin_rv and not options.precondition_rv:
            delete.precondition_rv = pod["metadata"]["resourceVersion"]
        await self._delete(namespace, name, delete, condition=True)
        return _success()

    async def _check_and_decrement(self, namespace: str, pod_name: str, pdb: Obj, dry_run: bool) -> None:
        """checkAndDecrement, with the budget re-read after a conflict (RetryOnConflict)."""
        name = pdb["metadata"]["name"]
        for attempt in range(EVICTION_RETRIES):
            if attempt:
                pdb = await self.pdbs.get(namespace, name)
            status = pdb.get("status") or {}
            if (status.get("observedGeneration") or 0) < (pdb["metadata"].get("generation") or 0):
                raise too_many_requests(f"The disruption budget {name} is still being processed by the server.", 10)
            allowed = status.get("disruptionsAllowed") or 0
            if allowed < 0:
                raise errors.forbidden(self.pdbs.info, name, "pdb disruptions allowed is negative")
            if len(status.get("disruptedPods") or {}) > MAX_DISRUPTED_POD_SIZE:
                raise errors.forbidden(self.pdbs.info, name, "DisruptedPods map too big - too many evictions not "
                                       "confirmed by PDB controller")
            if allowed == 0:
                raise too_many_requests(f"The disruption budget {name} needs {status.get('desiredHealthy') or 0} "
                                        f"healthy pods and has {status.get('currentHealthy') or 0} currently", 0)
            new = copy.deepcopy(pdb)
            new_status = new.setdefault("status", {})
            new_status["disruptionsAllowed"] = allowed - 1
            if allowed - 1 == 0:
                update_disruption_allowed_condition(new_status, new_status.get("observedGeneration"))
            if dry_run:
                return
            new_status.setdefault("disruptedPods", {})[pod_name] = now_rfc3339()
            written = new

            async def transform(old: Obj, written: Obj = written) -> Obj:
                return written

            try:
                await self.pdbs.guaranteed_update(namespace, name, transform, WriteOptions(), "status",
                                                  expected_rv=pdb["metadata"]["resourceVersion"])
            except errors.ApiError as e:
                if e.code == 409:
                    continue
                raise
            return
        raise errors.conflict(self.pdbs.info, name, "too many concurrent writers; try again")

    async def _delete(self, namespace: str, name: str, options: DeleteOptions, condition: bool) -> None:
        """addConditionAndDeletePod: DisruptionTarget on the pod (not for dry runs), then the delete
        (admitted as the eviction was: the store is asked without the user)."""
        if condition and not options.dry_run:
            async def add_condition(old: Obj) -> Obj:
                if old["metadata"].get("uid") and options.precondition_uid \
                        and old["metadata"]["uid"] != options.precondition_uid:
                    return old  # the delete below refuses it with upstream's message
                status = old.setdefault("status", {})
                conditions = [c for c in status.get("conditions") or [] if c.get("type") != "DisruptionTarget"]
                conditions.append({"type": "DisruptionTarget", "status": "True", "lastProbeTime": None,
                                   "lastTransitionTime": now_rfc3339(), "reason": "EvictionByEvictionAPI",
                                   "message": "Eviction API: evicting"})
                status["conditions"] = [{k: v for k, v in c.items() if v is not None} for c in conditions]
                return old

            pinned = options.precondition_rv
            updated = await self.pods.guaranteed_update(namespace, name, add_condition, WriteOptions(), "status",
                                                        expected_rv=pinned or None)
            if pinned:  # the condition write moved the pod's resourceVersion: pin the one it wrote
                options = copy.copy(options)
                options.precondition_rv = updated["metadata"]["resourceVersion"]
        options = copy.copy(options)
        options.user = None
        await self.pods.delete(namespace, name, options)


def _success() -> Obj:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
