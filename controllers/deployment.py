"""The Deployment controller (upstream pkg/controller/deployment): roll pods from one template to
the next through ReplicaSets.

A Deployment owns one ReplicaSet per pod template it has had, named `{deployment}-{hash}` where
the hash (controllers.hashing) is also the `pod-template-hash` label on the ReplicaSet, its
selector and its template, so the ReplicaSets never select each other's pods. The one whose
template equals the Deployment's is the *new* ReplicaSet; the others are *old*. One reconcile,
as upstream's syncDeployment:

- claim ReplicaSets (adopt matching orphans, release owned ones that stopped matching);
- paused, or a scaling event (spec.replicas differs from what the active ReplicaSets were sized
  for): only scale, proportionally across the active ReplicaSets during a rollout;
- Recreate: scale every old ReplicaSet to 0, wait until no old pod is left, then create/scale the new;
- RollingUpdate: scale the new ReplicaSet up while the total stays within replicas + maxSurge,
  scale old ones down while available pods stay at least replicas - maxUnavailable;
- write status: counts, observedGeneration, conditions Available and Progressing (with the
  progressDeadlineSeconds check), the revision annotation; clean up old ReplicaSets past
  revisionHistoryLimit once the rollout is complete.

Rollback is what `kubectl rollout undo` does in apps/v1: kubectl copies an old ReplicaSet's
template back into the Deployment; here that template finds its old ReplicaSet, whose revision is
bumped to the newest (the old number goes to the revision-history annotation) and which is then
scaled up like any new ReplicaSet.

The arithmetic is in pure functions at the top of this file (tests/unit/test_deployment_logic.py);
the controller below only reads the caches, calls them and writes the results.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import logging
import math
from collections.abc import Iterable, Sequence
from typing import Any

from controllers.hashing import POD_TEMPLATE_HASH_LABEL, compute_hash
from controllers.replicaset import (
    ORPHAN_INDEX,
    ControllerRefManager,
    controller_ref,
    ensure_indexers,
    label_selector_of,
    new_controller_ref,
    orphan_index,
    owned_and_orphans,
    recheck_deletion_timestamp,
)
from machinery.api.apps_v1 import Deployment, DeploymentCondition, DeploymentStatus, ReplicaSet, ReplicaSetSpec
from machinery.api.core_v1 import Pod, PodTemplateSpec
from machinery.api.meta import LabelSelector, ObjectMeta
from machinery.client import ApiClient, ApiError
from machinery.controller import Controller
from machinery.events import EventRecorder
from machinery.informer import (
    CONTROLLER_UID_INDEX,
    Informer,
    SharedInformerFactory,
    controller_uid_index,
    meta_namespace_key,
)
from machinery.timeutil import format_rfc3339 as rfc3339
from machinery.timeutil import now as now_utc
from machinery.timeutil import parse_rfc3339 as parse_time

log = logging.getLogger(__name__)

CONTROLLER_NAME = "deployment-controller"

REVISION_ANNOTATION = "deployment.kubernetes.io/revision"
REVISION_HISTORY_ANNOTATION = "deployment.kubernetes.io/revision-history"
DESIRED_REPLICAS_ANNOTATION = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS_ANNOTATION = "deployment.kubernetes.io/max-replicas"
LAST_APPLIED_ANNOTATION = "kubectl.kubernetes.io/last-applied-configuration"
ROLLBACK_TO_ANNOTATION = "deprecated.deployment.rollback.to"
MAX_REV_HISTORY_LENGTH_IN_CHARS = 2000
ANNOTATIONS_TO_SKIP = frozenset({LAST_APPLIED_ANNOTATION, REVISION_ANNOTATION, REVISION_HISTORY_ANNOTATION,
                                 DESIRED_REPLICAS_ANNOTATION, MAX_REPLICAS_ANNOTATION, ROLLBACK_TO_ANNOTATION})

# condition types and reasons (deploymentutil)
AVAILABLE = "Available"
PROGRESSING = "Progressing"
REPLICA_FAILURE = "ReplicaFailure"
REPLICASET_UPDATED = "ReplicaSetUpdated"
FAILED_RS_CREATE = "ReplicaSetCreateError"
NEW_REPLICASET_CREATED = "NewReplicaSetCreated"
FOUND_NEW_REPLICASET = "FoundNewReplicaSet"
NEW_RS_AVAILABLE = "NewReplicaSetAvailable"
TIMED_OUT = "ProgressDeadlineExceeded"
PAUSED = "DeploymentPaused"
RESUMED = "DeploymentResumed"
MINIMUM_REPLICAS_AVAILABLE = "MinimumReplicasAvailable"
MINIMUM_REPLICAS_UNAVAILABLE = "MinimumReplicasUnavailable"


# =============================================================================================
# Pure computations
# =============================================================================================


def replicas(obj: ReplicaSet | Deployment | None) -> int:
    """spec.replicas (the apiserver defaults it; an absent one reads as 0 for a ReplicaSet)."""
    if obj is None or obj.spec is None:
        return 0
    if obj.spec.replicas is None:
        return 1 if isinstance(obj, Deployment) else 0
    return obj.spec.replicas


def _status_int(rs: ReplicaSet | None, name: str) -> int:
    if rs is None or rs.status is None:
        return 0
    return getattr(rs.status, name) or 0


def int_or_percent(value: int | str | None, total: int, round_up: bool) -> int:
    """intstr.GetScaledValueFromIntOrPercent: an int as is; "25%" of total, rounded up or down."""
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    text = value.strip()
    if not text.endswith("%"):
        try:
            return int(text)
        except ValueError:
            raise ValueError(f"invalid value for IntOrString: string is not a percentage: {value!r}") from None
    percent = int(text[:-1])
    scaled = percent * total / 100
    return math.ceil(scaled) if round_up else math.floor(scaled)


def is_rolling_update(d: Deployment) -> bool:
    strategy = d.spec.strategy if d.spec else None
    return strategy is None or strategy.type in (None, "RollingUpdate")


def resolve_fenceposts(max_surge: int | str | None, max_unavailable: int | str | None, desired: int) -> tuple[int, int]:
    """(surge, unavailable): surge rounds up, unavailable down; both 0 means unavailable 1."""
    surge = int_or_percent(max_surge if max_surge is not None else 0, desired, True)
    unavailable = int_or_percent(max_unavailable if max_unavailable is not None else 0, desired, False)
    if surge == 0 and unavailable == 0:
        unavailable = 1  # rounding down made both zero: surge may be blocked by quota, so allow one
    return surge, unavailable


def _rolling_params(d: Deployment) -> tuple[int | str | None, int | str | None]:
    strategy = d.spec.strategy if d.spec else None
    rolling = strategy.rolling_update if strategy else None
    if rolling is None:
        return "25%", "25%"
    return rolling.max_surge, rolling.max_unavailable


def max_surge(d: Deployment) -> int:
    if not is_rolling_update(d):
        return 0
    surge, _ = resolve_fenceposts(*_rolling_params(d), replicas(d))
    return surge


def max_unavailable(d: Deployment) -> int:
    if not is_rolling_update(d) or replicas(d) == 0:
        return 0
    _, unavailable = resolve_fenceposts(*_rolling_params(d), replicas(d))
    return min(unavailable, replicas(d))


# -- ordering ----------------------------------------------------------------------------------


def _created(rs: ReplicaSet) -> dt.datetime:
    return parse_time(rs.metadata.creation_timestamp) or dt.datetime.min.replace(tzinfo=dt.UTC)


def _by_creation_less(a: ReplicaSet, b: ReplicaSet) -> bool:
    ta, tb = _created(a), _created(b)
    if ta == tb:
        return (a.metadata.name or "") < (b.metadata.name or "")
    return ta < tb


def _sorted(items: Iterable[ReplicaSet], less: Any) -> list[ReplicaSet]:
    def cmp(a: ReplicaSet, b: ReplicaSet) -> int:
        return -1 if less(a, b) else 1 if less(b, a) else 0

    return sorted(items, key=functools.cmp_to_key(cmp))


def by_creation(rss: Iterable[ReplicaSet]) -> list[ReplicaSet]:
    """ReplicaSetsByCreationTimestamp: oldest first, then by name."""
    return _sorted(rss, _by_creation_less)


def by_size_older(rss: Iterable[ReplicaSet]) -> list[ReplicaSet]:
    """ReplicaSetsBySizeOlder: largest first, ties older first (scaling down)."""
    return _sorted(rss, lambda a, b: _by_creation_less(a, b) if replicas(a) == replicas(b)
                   else replicas(a) > replicas(b))


def by_size_newer(rss: Iterable[ReplicaSet]) -> list[ReplicaSet]:
    """ReplicaSetsBySizeNewer: largest first, ties newer first (scaling up)."""
    return _sorted(rss, lambda a, b: _by_creation_less(b, a) if replicas(a) == replicas(b)
                   else replicas(a) > replicas(b))


def revision(rs: ReplicaSet) -> int | None:
    """The revision annotation (0 if absent, None if it is not a number)."""
    value = (rs.metadata.annotations or {}).get(REVISION_ANNOTATION)
    if value is None:
        return 0
    try:
        return int(value)
    except ValueError:
        return None


def by_revision(rss: Iterable[ReplicaSet]) -> list[ReplicaSet]:
    """ReplicaSetsByRevision: lowest revision first; unparsable or equal ones by creation."""
    def less(a: ReplicaSet, b: ReplicaSet) -> bool:
        ra, rb = revision(a), revision(b)
        if ra is None or rb is None or ra == rb:
            return _by_creation_less(a, b)
        return ra < rb

    return _sorted(rss, less)


def max_revision(rss: Iterable[ReplicaSet]) -> int:
    return max((r for r in (revision(rs) for rs in rss) if r is not None), default=0)


def active(rss: Iterable[ReplicaSet | None]) -> list[ReplicaSet]:
    """controller.FilterActiveReplicaSets: those with spec.replicas > 0."""
    return [rs for rs in rss if rs is not None and replicas(rs) > 0]


# -- counting ------------------------------------------------------------------------------------


def spec_replica_count(rss: Iterable[ReplicaSet | None]) -> int:
    """GetReplicaCountForReplicaSets: the sum of spec.replicas."""
    return sum(replicas(rs) for rs in rss if rs is not None)


def actual_replica_count(rss: Iterable[ReplicaSet | None]) -> int:
    """GetActualReplicaCountForReplicaSets: the sum of status.replicas."""
    return sum(_status_int(rs, "replicas") for rs in rss if rs is not None)


def ready_replica_count(rss: Iterable[ReplicaSet | None]) -> int:
    return sum(_status_int(rs, "ready_replicas") for rs in rss if rs is not None)


def available_replica_count(rss: Iterable[ReplicaSet | None]) -> int:
    """GetAvailableReplicaCountForReplicaSets: the sum of status.availableReplicas."""
    return sum(_status_int(rs, "available_replicas") for rs in rss if rs is not None)


def current_pods(rs: ReplicaSet) -> int:
    """Pods a ReplicaSet has or is about to have: spec.replicas, or more while pods it was scaled
    down from are not yet seen gone (status.replicas lags the scale-down)."""
    return max(replicas(rs), _status_int(rs, "replicas"))


def safe_available(rs: ReplicaSet) -> int:
    """Available pods a ReplicaSet can be counted on for: status.availableReplicas, but no more than
    spec.replicas (a scale-down deletes pods before the status says so)."""
    return min(_status_int(rs, "available_replicas"), replicas(rs))


# -- templates -------------------------------------------------------------------------------------


def _template_without_hash(template: PodTemplateSpec | None) -> dict[str, Any]:
    data = template.to_dict() if template is not None else {}
    meta = data.get("metadata") or {}
    labels = dict(meta.get("labels") or {})
    labels.pop(POD_TEMPLATE_HASH_LABEL, None)
    if labels:
        meta["labels"] = labels
    else:
        meta.pop("labels", None)
    if meta:
        data["metadata"] = meta
    else:
        data.pop("metadata", None)
    return data


def equal_ignore_hash(t1: PodTemplateSpec | None, t2: PodTemplateSpec | None) -> bool:
    """EqualIgnoreHash: the templates are equal but for the pod-template-hash label."""
    return _template_without_hash(t1) == _template_without_hash(t2)


def find_new_replicaset(d: Deployment, rss: Sequence[ReplicaSet]) -> ReplicaSet | None:
    """FindNewReplicaSet: the oldest ReplicaSet whose template equals the Deployment's."""
    template = d.spec.template if d.spec else None
    for rs in by_creation(rss):
        if rs.spec is not None and equal_ignore_hash(rs.spec.template, template):
            return rs
    return None


def find_old_replicasets(d: Deployment, rss: Sequence[ReplicaSet]) -> tuple[list[ReplicaSet], list[ReplicaSet]]:
    """FindOldReplicaSets: (old ones with replicas, all old ones)."""
    new = find_new_replicaset(d, rss)
    old = [rs for rs in rss if new is None or rs.metadata.uid != new.metadata.uid]
    return [rs for rs in old if replicas(rs) != 0], old


def new_replicaset_template(d: Deployment, pod_template_hash: str) -> PodTemplateSpec:
    """The Deployment's template with the pod-template-hash label added."""
    assert d.spec is not None
    template = d.spec.template.model_copy(deep=True)
    meta = template.metadata.model_copy() if template.metadata else ObjectMeta()
    meta.labels = {**(meta.labels or {}), POD_TEMPLATE_HASH_LABEL: pod_template_hash}
    template.metadata = meta
    return template


def selector_with_hash(selector: LabelSelector, pod_template_hash: str) -> LabelSelector:
    """labelsutil.CloneSelectorAndAddLabel."""
    out = selector.model_copy(deep=True)
    out.match_labels = {**(out.match_labels or {}), POD_TEMPLATE_HASH_LABEL: pod_template_hash}
    return out


# -- rolling-update arithmetic -------------------------------------------------------------------


def new_rs_new_replicas(d: Deployment, all_rss: Sequence[ReplicaSet | None], new_rs: ReplicaSet) -> int:
    """NewRSNewReplicas: what the new ReplicaSet may be scaled to now. RollingUpdate: up to
    replicas + maxSurge pods in all; Recreate: all the replicas at once."""
    if not is_rolling_update(d):
        return replicas(d)
    surge = int_or_percent(_rolling_params(d)[0], replicas(d), True)
    current = sum(current_pods(rs) for rs in all_rss if rs is not None)
    max_total = replicas(d) + surge
    if current >= max_total:
        return replicas(new_rs)  # cannot scale up
    scale_up = min(max_total - current, replicas(d) - replicas(new_rs))
    return replicas(new_rs) + max(scale_up, 0)


def old_replicas_max_scaled_down(d: Deployment, all_rss: Sequence[ReplicaSet | None], new_rs: ReplicaSet | None) -> int:
    """reconcileOldReplicaSets' budget: pods that may go without dropping below
    replicas - maxUnavailable, counting the new ReplicaSet's unavailable pods as already missing."""
    min_available = replicas(d) - max_unavailable(d)
    new_unavailable = replicas(new_rs) - safe_available(new_rs) if new_rs is not None else 0
    return spec_replica_count(all_rss) - min_available - new_unavailable


def cleanup_unhealthy_plan(old_rss: Sequence[ReplicaSet], max_cleanup: int) -> list[tuple[ReplicaSet, int]]:
    """cleanupUnhealthyReplicas: scale old ReplicaSets down by their unavailable pods first
    (oldest first), at most max_cleanup in all. Returns (ReplicaSet, new size) for each change."""
    plan: list[tuple[ReplicaSet, int]] = []
    total = 0
    for rs in by_creation(old_rss):
        if total >= max_cleanup:
            break
        size = replicas(rs)
        unhealthy = size - safe_available(rs)
        if size == 0 or unhealthy <= 0:
            continue
        count = min(max_cleanup - total, unhealthy)
        plan.append((rs, size - count))
        total += count
    return plan


def scale_down_old_plan(d: Deployment, all_rss: Sequence[ReplicaSet | None],
                        old_rss: Sequence[ReplicaSet]) -> list[tuple[ReplicaSet, int]]:
    """scaleDownOldReplicaSetsForRollingUpdate: take available pods from old ReplicaSets (oldest
    first) while more than replicas - maxUnavailable are available."""
    min_available = replicas(d) - max_unavailable(d)
    available = sum(safe_available(rs) for rs in all_rss if rs is not None)
    if available <= min_available:
        return []
    budget = available - min_available
    plan: list[tuple[ReplicaSet, int]] = []
    total = 0
    for rs in by_creation(old_rss):
        if total >= budget:
            break
        size = replicas(rs)
        if size == 0:
            continue
        count = min(size, budget - total)
        plan.append((rs, size - count))
        total += count
    return plan


# -- scaling ---------------------------------------------------------------------------------------


def _int_annotation(rs: ReplicaSet, key: str) -> int | None:
    value = (rs.metadata.annotations or {}).get(key)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None


def desired_replicas_annotation(rs: ReplicaSet) -> int | None:
    return _int_annotation(rs, DESIRED_REPLICAS_ANNOTATION)


def find_active_or_latest(new_rs: ReplicaSet | None, old_rss: Sequence[ReplicaSet]) -> ReplicaSet | None:
    """FindActiveOrLatest: the only active ReplicaSet, or the newest if none is active; None when
    several are active (then they are scaled proportionally)."""
    if new_rs is None and not old_rss:
        return None
    old_sorted = list(reversed(by_creation(old_rss)))
    live = active([*old_sorted, new_rs])
    if not live:
        return new_rs if new_rs is not None else old_sorted[0]
    if len(live) == 1:
        return live[0]
    return None


def is_saturated(d: Deployment, rs: ReplicaSet | None) -> bool:
    """The ReplicaSet is sized for the Deployment and has every replica available."""
    if rs is None:
        return False
    desired = desired_replicas_annotation(rs)
    return (desired is not None and replicas(rs) == replicas(d) and desired == replicas(d)
            and _status_int(rs, "available_replicas") == replicas(d))


def replicaset_fraction(rs: ReplicaSet, d: Deployment) -> int:
    """getReplicaSetFraction: how much this ReplicaSet grows (or shrinks) for the Deployment's new
    size, in proportion to the size it was made for (its max-replicas annotation)."""
    if replicas(d) == 0:
        return -replicas(rs)
    deployment_max = replicas(d) + max_surge(d)
    before = _int_annotation(rs, MAX_REPLICAS_ANNOTATION)
    if not before:
        before = (d.status.replicas if d.status else None) or 0
        if before == 0:
            return 0
    new_size = replicas(rs) * deployment_max / before
    return _round_half_away(new_size) - replicas(rs)


def _round_half_away(x: float) -> int:
    """Go's math.Round (integer.RoundToInt32): halves away from zero."""
    return math.floor(x + 0.5) if x >= 0 else -math.floor(-x + 0.5)


def replicaset_proportion(rs: ReplicaSet, d: Deployment, to_add: int, added: int) -> int:
    """GetReplicaSetProportion: this ReplicaSet's share of to_add, never past what is left."""
    if replicas(rs) == 0 or to_add == 0 or to_add == added:
        return 0
    fraction = replicaset_fraction(rs, d)
    allowed = to_add - added
    return min(fraction, allowed) if to_add > 0 else max(fraction, allowed)


def proportional_scale(d: Deployment, rss: Sequence[ReplicaSet | None]) -> tuple[list[tuple[ReplicaSet, int]], str]:
    """The proportional part of `scale`: new sizes of the active ReplicaSets when the Deployment
    is resized in the middle of a rollout, and the direction ("up", "down" or "")."""
    live = active(rss)
    allowed = replicas(d) + max_surge(d) if replicas(d) > 0 else 0
    to_add = allowed - spec_replica_count(live)
    operation = ""
    if to_add > 0:
        live = by_size_newer(live)
        operation = "up"
    elif to_add < 0:
        live = by_size_older(live)
        operation = "down"
    sizes: dict[str, int] = {}
    added = 0
    for rs in live:
        if to_add != 0:
            share = replicaset_proportion(rs, d, to_add, added)
            sizes[rs.metadata.name or ""] = replicas(rs) + share
            added += share
        else:
            sizes[rs.metadata.name or ""] = replicas(rs)
    plan: list[tuple[ReplicaSet, int]] = []
    for i, rs in enumerate(live):
        name = rs.metadata.name or ""
        if i == 0 and to_add != 0:
            sizes[name] = max(sizes[name] + to_add - added, 0)  # leftovers go to the largest
        plan.append((rs, sizes[name]))
    return plan, operation


# -- annotations -----------------------------------------------------------------------------------


def set_replicas_annotations(rs: ReplicaSet, desired: int, max_replicas: int) -> bool:
    """Record the Deployment size (and size + surge) a ReplicaSet was scaled for; True if changed."""
    annotations = dict(rs.metadata.annotations or {})
    changed = False
    for key, value in ((DESIRED_REPLICAS_ANNOTATION, str(desired)), (MAX_REPLICAS_ANNOTATION, str(max_replicas))):
        if annotations.get(key) != value:
            annotations[key] = value
            changed = True
    rs.metadata.annotations = annotations
    return changed


def replicas_annotations_need_update(rs: ReplicaSet, desired: int, max_replicas: int) -> bool:
    annotations = rs.metadata.annotations or {}
    return (annotations.get(DESIRED_REPLICAS_ANNOTATION) != str(desired)
            or annotations.get(MAX_REPLICAS_ANNOTATION) != str(max_replicas))


def set_new_replicaset_annotations(d: Deployment, rs: ReplicaSet, new_revision: str, exists: bool,
                                   history_limit_chars: int = MAX_REV_HISTORY_LENGTH_IN_CHARS) -> bool:
    """SetNewReplicaSetAnnotations: copy the Deployment's own annotations, raise the revision to
    new_revision (keeping the old number in revision-history: that is a rollback), and for a
    ReplicaSet about to be created the replicas annotations. True if anything changed."""
    annotations = dict(rs.metadata.annotations or {})
    changed = False
    for k, v in (d.metadata.annotations or {}).items():
        if k in ANNOTATIONS_TO_SKIP or annotations.get(k) == v:
            continue
        annotations[k] = v
        changed = True
    old_revision = annotations.get(REVISION_ANNOTATION)
    try:
        old_int = int(old_revision) if old_revision else 0
    except ValueError:
        rs.metadata.annotations = annotations
        return changed
    new_int = int(new_revision)
    if old_int < new_int:
        annotations[REVISION_ANNOTATION] = new_revision
        changed = True
        if old_revision is not None:
            history = annotations.get(REVISION_HISTORY_ANNOTATION, "")
            olds = history.split(",") if history else []
            if not olds:
                annotations[REVISION_HISTORY_ANNOTATION] = old_revision
            else:
                total = len(history) + len(old_revision) + 1
                start = 0
                while total > history_limit_chars and start < len(olds):
                    total -= len(olds[start]) + 1
                    start += 1
                if total <= history_limit_chars:
                    annotations[REVISION_HISTORY_ANNOTATION] = ",".join([*olds[start:], old_revision])
    rs.metadata.annotations = annotations
    if not exists and set_replicas_annotations(rs, replicas(d), replicas(d) + max_surge(d)):
        changed = True
    return changed


# -- status and conditions -------------------------------------------------------------------------


def get_condition(status: DeploymentStatus | None, type_: str) -> DeploymentCondition | None:
    for c in (status.conditions if status else None) or []:
        if c.type == type_:
            return c
    return None


def new_condition(type_: str, status: str, reason: str, message: str,
                  now: dt.datetime | None = None) -> DeploymentCondition:
    t = rfc3339(now or now_utc())
    return DeploymentCondition(type=type_, status=status, reason=reason, message=message,
                               last_update_time=t, last_transition_time=t)


def set_condition(status: DeploymentStatus, condition: DeploymentCondition) -> None:
    """SetDeploymentCondition: no-op if status and reason are unchanged; keeps the transition time
    when only the reason changes; the condition moves to the end."""
    current = get_condition(status, condition.type)
    if current is not None and current.status == condition.status and current.reason == condition.reason:
        return
    if current is not None and current.status == condition.status:
        condition = condition.model_copy(update={"last_transition_time": current.last_transition_time})
    status.conditions = [*(c for c in status.conditions or [] if c.type != condition.type), condition]


def remove_condition(status: DeploymentStatus, type_: str) -> None:
    status.conditions = [c for c in status.conditions or [] if c.type != type_] or None


def calculate_status(all_rss: Sequence[ReplicaSet | None], new_rs: ReplicaSet | None, d: Deployment,
                     now: dt.datetime | None = None) -> DeploymentStatus:
    """calculateStatus: counts over the ReplicaSets, observedGeneration, the Available condition."""
    available = available_replica_count(all_rss)
    total = spec_replica_count(all_rss)
    old = d.status or DeploymentStatus()
    status = DeploymentStatus(
        observed_generation=d.metadata.generation,
        replicas=actual_replica_count(all_rss),
        updated_replicas=actual_replica_count([new_rs]),
        ready_replicas=ready_replica_count(all_rss),
        available_replicas=available,
        unavailable_replicas=max(total - available, 0),
        collision_count=old.collision_count,
        conditions=[c.model_copy() for c in old.conditions or []] or None,
    )
    if available >= replicas(d) - max_unavailable(d):
        set_condition(status, new_condition(AVAILABLE, "True", MINIMUM_REPLICAS_AVAILABLE,
                                            "Deployment has minimum availability.", now))
    else:
        set_condition(status, new_condition(AVAILABLE, "False", MINIMUM_REPLICAS_UNAVAILABLE,
                                            "Deployment does not have minimum availability.", now))
    return status


def has_progress_deadline(d: Deployment) -> bool:
    deadline = d.spec.progress_deadline_seconds if d.spec else None
    return deadline is not None and deadline != 2**31 - 1


def deployment_complete(d: Deployment, status: DeploymentStatus | None) -> bool:
    """Every replica updated and available, and the newest spec observed."""
    s = status or DeploymentStatus()
    want = replicas(d)
    return ((s.updated_replicas or 0) == want and (s.replicas or 0) == want
            and (s.available_replicas or 0) == want
            and (s.observed_generation or 0) >= (d.metadata.generation or 0))


def deployment_progressing(d: Deployment, new: DeploymentStatus) -> bool:
    """More updated, ready or available pods, or fewer old ones, than the last status said."""
    old = d.status or DeploymentStatus()
    old_old = (old.replicas or 0) - (old.updated_replicas or 0)
    new_old = (new.replicas or 0) - (new.updated_replicas or 0)
    return ((new.updated_replicas or 0) > (old.updated_replicas or 0) or new_old < old_old
            or (new.ready_replicas or 0) > (old.ready_replicas or 0)
            or (new.available_replicas or 0) > (old.available_replicas or 0))


def deployment_timed_out(d: Deployment, new: DeploymentStatus, now: dt.datetime | None = None) -> bool:
    """No progress for progressDeadlineSeconds since the Progressing condition last changed."""
    if not has_progress_deadline(d):
        return False
    cond = get_condition(new, PROGRESSING)
    if cond is None or cond.reason == NEW_RS_AVAILABLE:
        return False
    if cond.reason == TIMED_OUT:
        return True
    since = parse_time(cond.last_update_time)
    if since is None:
        return False
    deadline = since + dt.timedelta(seconds=d.spec.progress_deadline_seconds or 0)  # type: ignore[union-attr]
    return deadline < (now or now_utc())


def rollout_status(d: Deployment, all_rss: Sequence[ReplicaSet | None], new_rs: ReplicaSet | None,
                   now: dt.datetime | None = None) -> DeploymentStatus:
    """syncRolloutStatus' computation: the status plus the Progressing and ReplicaFailure conditions."""
    now = now or now_utc()
    status = calculate_status(all_rss, new_rs, d, now)
    if not has_progress_deadline(d):
        remove_condition(status, PROGRESSING)
    current = get_condition(d.status, PROGRESSING)
    complete_before = (status.replicas == status.updated_replicas and current is not None
                       and current.reason == NEW_RS_AVAILABLE)
    if has_progress_deadline(d) and not complete_before:
        name = new_rs.metadata.name if new_rs is not None else None
        if deployment_complete(d, status):
            msg = (f'ReplicaSet "{name}" has successfully progressed.' if name
                   else f'Deployment "{d.metadata.name}" has successfully progressed.')
            set_condition(status, new_condition(PROGRESSING, "True", NEW_RS_AVAILABLE, msg, now))
        elif deployment_progressing(d, status):
            msg = (f'ReplicaSet "{name}" is progressing.' if name
                   else f'Deployment "{d.metadata.name}" is progressing.')
            cond = new_condition(PROGRESSING, "True", REPLICASET_UPDATED, msg, now)
            if current is not None:
                if current.status == "True":
                    cond = cond.model_copy(update={"last_transition_time": current.last_transition_time})
                remove_condition(status, PROGRESSING)
            set_condition(status, cond)
        elif deployment_timed_out(d, status, now):
            msg = (f'ReplicaSet "{name}" has timed out progressing.' if name
                   else f'Deployment "{d.metadata.name}" has timed out progressing.')
            set_condition(status, new_condition(PROGRESSING, "False", TIMED_OUT, msg, now))
    failures = replica_failures(all_rss, new_rs)
    if failures:
        set_condition(status, failures[0])
    else:
        remove_condition(status, REPLICA_FAILURE)
    status.conditions = status.conditions or None
    return status


def replica_failures(all_rss: Sequence[ReplicaSet | None], new_rs: ReplicaSet | None) -> list[DeploymentCondition]:
    """ReplicaFailure conditions of the new ReplicaSet, else of any ReplicaSet, as Deployment conditions."""
    def of(rs: ReplicaSet | None) -> list[DeploymentCondition]:
        out = []
        for c in (rs.status.conditions if rs is not None and rs.status else None) or []:
            if c.type == REPLICA_FAILURE:
                out.append(DeploymentCondition(type=c.type, status=c.status, reason=c.reason, message=c.message,
                                               last_transition_time=c.last_transition_time,
                                               last_update_time=c.last_transition_time))
        return out

    found = of(new_rs)
    if found:
        return found
    return [c for rs in all_rss for c in of(rs)]


def requeue_after(d: Deployment, new: DeploymentStatus, now: dt.datetime | None = None) -> float | None:
    """requeueStuckDeployment: when to look again to notice the progress deadline passing."""
    current = get_condition(d.status, PROGRESSING)
    if not has_progress_deadline(d) or current is None:
        return None
    if deployment_complete(d, new) or current.reason == TIMED_OUT:
        return None
    since = parse_time(current.last_update_time)
    if since is None:
        return None
    deadline = since + dt.timedelta(seconds=d.spec.progress_deadline_seconds or 0)  # type: ignore[union-attr]
    after = (deadline - (now or now_utc())).total_seconds()
    return max(after, 0.0) + 1.0  # a second more, for the whole seconds timestamps are kept in


def status_equal(a: DeploymentStatus | None, b: DeploymentStatus | None) -> bool:
    return (a.to_dict() if a else {}) == (b.to_dict() if b else {})


def old_pods_running(new_rs: ReplicaSet | None, old_rss: Sequence[ReplicaSet],
                     pods_by_rs: dict[str, list[Pod]]) -> bool:
    """Recreate waits for this to be false: an old ReplicaSet still reports pods, or an old pod is
    not finished."""
    if actual_replica_count(old_rss) > 0:
        return True
    for uid, pods in pods_by_rs.items():
        if new_rs is not None and new_rs.metadata.uid == uid:
            continue
        for pod in pods:
            if (pod.status.phase if pod.status else None) not in ("Failed", "Succeeded"):
                return True
    return False


# =============================================================================================
# The controller
# =============================================================================================


class DeploymentController(Controller):
    name = "deployment"  # its --controllers name; it writes as CONTROLLER_NAME

    def __init__(self, client: ApiClient, informers: SharedInformerFactory, workers: int = 5) -> None:
        super().__init__(workers)
        self.client = client
        self.recorder = EventRecorder(client, CONTROLLER_NAME)
        self.d_informer: Informer[Deployment] = informers.informer_for(Deployment)
        self.rs_informer: Informer[ReplicaSet] = informers.informer_for(ReplicaSet)
        self.pod_informer: Informer[Pod] = informers.informer_for(Pod)
        indexes = {CONTROLLER_UID_INDEX: controller_uid_index, ORPHAN_INDEX: orphan_index}
        ensure_indexers(self.rs_informer, indexes)
        ensure_indexers(self.pod_informer, indexes)
        enqueue = self._enqueue
        self.d_informer.add_event_handler(enqueue, lambda old, new: enqueue(new), enqueue)
        self.rs_informer.add_event_handler(self._rs_added, self._rs_updated, self._rs_deleted)
        self.pod_informer.add_event_handler(on_delete=self._pod_deleted)
        self.informers.extend([self.d_informer, self.rs_informer, self.pod_informer])

    # -- event handlers ---------------------------------------------------------------------------

    def _enqueue(self, d: Deployment) -> None:
        self.queue.add(meta_namespace_key(d))

    def _resolve(self, namespace: str | None, rs: ReplicaSet) -> Deployment | None:
        ref = controller_ref(rs)
        if ref is None or ref.kind != "Deployment":
            return None
        d = self.d_informer.store.get_by_name(ref.name, namespace)
        return d if d is not None and d.metadata.uid == ref.uid else None

    def _deployments_for_rs(self, rs: ReplicaSet) -> list[Deployment]:
        labels = rs.metadata.labels or {}
        out = []
        for d in self.d_informer.store.list():
            if d.metadata.namespace != rs.metadata.namespace:
                continue
            sel = label_selector_of(d)
            if not sel.empty and sel.matches(labels):
                out.append(d)
        return out

    def _rs_added(self, rs: ReplicaSet) -> None:
        if rs.metadata.deletion_timestamp is not None:
            self._rs_deleted(rs)
            return
        if controller_ref(rs) is not None:
            d = self._resolve(rs.metadata.namespace, rs)
            if d is not None:
                self._enqueue(d)
            return
        for d in self._deployments_for_rs(rs):
            self._enqueue(d)

    def _rs_updated(self, old: ReplicaSet, cur: ReplicaSet) -> None:
        if old.metadata.resource_version == cur.metadata.resource_version:
            return
        cur_ref, old_ref = controller_ref(cur), controller_ref(old)
        ref_changed = (cur_ref.uid if cur_ref else None) != (old_ref.uid if old_ref else None)
        if ref_changed and old_ref is not None:
            d = self._resolve(old.metadata.namespace, old)
            if d is not None:
                self._enqueue(d)
        if cur_ref is not None:
            d = self._resolve(cur.metadata.namespace, cur)
            if d is not None:
                self._enqueue(d)
            return
        if ref_changed or (old.metadata.labels or {}) != (cur.metadata.labels or {}):
            for d in self._deployments_for_rs(cur):
                self._enqueue(d)

    def _rs_deleted(self, rs: ReplicaSet) -> None:
        d = self._resolve(rs.metadata.namespace, rs)
        if d is not None:
            self._enqueue(d)

    def _pod_deleted(self, pod: Pod) -> None:
        """Recreate waits for the old pods to be gone: a pod going may be the last one."""
        ref = controller_ref(pod)
        if ref is None or ref.kind != "ReplicaSet":
            return
        rs = self.rs_informer.store.get_by_name(ref.name, pod.metadata.namespace)
        if rs is None or rs.metadata.uid != ref.uid:
            return
        d = self._resolve(rs.metadata.namespace, rs)
        if d is not None and not is_rolling_update(d):
            self._enqueue(d)

    # -- reconcile --------------------------------------------------------------------------------

    async def reconcile(self, key: str) -> float | None:
        cached = self.d_informer.store.get(key)
        if cached is None:
            return None
        return await _Sync(self, cached).run()


class _Sync:
    """One syncDeployment: the Deployment (a private copy, kept current as it is written) and the
    steps of upstream's sync.go, rolling.go, recreate.go and progress.go."""

    def __init__(self, ctl: DeploymentController, cached: Deployment) -> None:
        self.ctl = ctl
        self.client = ctl.client
        self.d = cached.model_copy(deep=True)
        self._persisted_annotations = dict(cached.metadata.annotations or {})

    @property
    def ns(self) -> str:
        return self.d.metadata.namespace or ""

    # -- the flow ---------------------------------------------------------------------------------

    async def run(self) -> float | None:
        d = self.d
        assert d.spec is not None
        if label_selector_of(d).empty:
            self.ctl.recorder.event(d, "Warning", "SelectingAll",
                                    "This deployment is selecting all pods. A non-empty selector is required.")
            if ((d.status.observed_generation if d.status else None) or 0) < (d.metadata.generation or 0):
                d.status = (d.status or DeploymentStatus()).model_copy(
                    update={"observed_generation": d.metadata.generation})
                await self.write_status()
            return None
        rss = await self.replicasets()
        if d.metadata.deletion_timestamp is not None:
            return await self.sync_status_only(rss)
        await self.check_paused_conditions()
        if d.spec.paused:
            return await self.sync(rss)
        if await self.is_scaling_event(rss):
            return await self.sync(rss)
        if not is_rolling_update(d):
            return await self.rollout_recreate(rss)
        return await self.rollout_rolling(rss)

    async def replicasets(self) -> list[ReplicaSet]:
        """getReplicaSetsForDeployment: owned ReplicaSets and orphans the selector claims."""
        d = self.d
        candidates = owned_and_orphans(self.ctl.rs_informer, d.metadata.uid or "", self.ns)
        manager = ControllerRefManager(self.client, d, "apps/v1", "Deployment", label_selector_of(d), ReplicaSet,
                                       recheck_deletion_timestamp(self.client, d))
        return await manager.claim(candidates)

    def pods_by_replicaset(self, rss: Sequence[ReplicaSet]) -> dict[str, list[Pod]]:
        """getPodMapForDeployment: the Deployment's pods grouped by the ReplicaSet controlling them."""
        selector = label_selector_of(self.d)
        out: dict[str, list[Pod]] = {}
        for rs in rss:
            uid = rs.metadata.uid or ""
            out[uid] = [p for p in self.ctl.pod_informer.store.by_index(CONTROLLER_UID_INDEX, uid)
                        if selector.matches(p.metadata.labels or {})]
        return out

    async def sync_status_only(self, rss: list[ReplicaSet]) -> float | None:
        new_rs, old_rss = await self.get_all_replicasets_and_sync_revision(rss, False)
        await self.sync_deployment_status([*old_rss, new_rs], new_rs)
        return None

    async def sync(self, rss: list[ReplicaSet]) -> float | None:
        """Scaling events and paused Deployments: resize, no rollout."""
        new_rs, old_rss = await self.get_all_replicasets_and_sync_revision(rss, False)
        await self.scale(new_rs, old_rss)
        if self.d.spec and self.d.spec.paused:
            await self.cleanup(old_rss)
        await self.sync_deployment_status([*old_rss, new_rs], new_rs)
        return None

    async def check_paused_conditions(self) -> None:
        d = self.d
        if not has_progress_deadline(d):
            return
        cond = get_condition(d.status, PROGRESSING)
        if cond is not None and cond.reason == TIMED_OUT:
            return  # the reported lack of progress stays
        paused_cond = cond is not None and cond.reason == PAUSED
        status = (d.status or DeploymentStatus()).model_copy(deep=True)
        if d.spec and d.spec.paused and not paused_cond:
            set_condition(status, new_condition(PROGRESSING, "Unknown", PAUSED, "Deployment is paused"))
        elif not (d.spec and d.spec.paused) and paused_cond:
            set_condition(status, new_condition(PROGRESSING, "Unknown", RESUMED, "Deployment is resumed"))
        else:
            return
        d.status = status
        await self.write_status()

    async def is_scaling_event(self, rss: list[ReplicaSet]) -> bool:
        """An active ReplicaSet was sized for another spec.replicas than the Deployment has now."""
        new_rs, old_rss = await self.get_all_replicasets_and_sync_revision(rss, False)
        for rs in active([*old_rss, new_rs]):
            desired = desired_replicas_annotation(rs)
            if desired is not None and desired != replicas(self.d):
                return True
        return False

    # -- new and old ReplicaSets ----------------------------------------------------------------

    async def get_all_replicasets_and_sync_revision(
            self, rss: list[ReplicaSet], create: bool) -> tuple[ReplicaSet | None, list[ReplicaSet]]:
        _, all_old = find_old_replicasets(self.d, rss)
        new_rs = await self.get_new_replicaset(rss, all_old, create)
        return new_rs, all_old

    async def get_new_replicaset(self, rss: list[ReplicaSet], old_rss: list[ReplicaSet],
                                 create: bool) -> ReplicaSet | None:
        """The new ReplicaSet with its revision synced (and the Deployment's); created if asked."""
        d = self.d
        assert d.spec is not None
        existing = find_new_replicaset(d, rss)
        new_revision = str(max_revision(old_rss) + 1)
        if existing is not None:
            rs = existing.model_copy(deep=True)
            annotations_updated = set_new_replicaset_annotations(d, rs, new_revision, True)
            assert rs.spec is not None
            if annotations_updated or (rs.spec.min_ready_seconds or 0) != (d.spec.min_ready_seconds or 0):
                rs.spec.min_ready_seconds = d.spec.min_ready_seconds
                return await self.client.update(rs)
            needs_update = self.set_revision((rs.metadata.annotations or {}).get(REVISION_ANNOTATION, ""))
            if has_progress_deadline(d) and get_condition(d.status, PROGRESSING) is None:
                status = (d.status or DeploymentStatus()).model_copy(deep=True)
                set_condition(status, new_condition(PROGRESSING, "True", FOUND_NEW_REPLICASET,
                                                    f'Found new replica set "{rs.metadata.name}"'))
                d.status = status
                needs_update = True
            if needs_update:
                await self.write_status()
            return rs
        if not create:
            return None

        collision_count = d.status.collision_count if d.status else None
        pod_template_hash = compute_hash(d.spec.template, collision_count)
        template = new_replicaset_template(d, pod_template_hash)
        assert template.metadata is not None
        new_rs = ReplicaSet(
            metadata=ObjectMeta(name=f"{d.metadata.name}-{pod_template_hash}", namespace=self.ns,
                                owner_references=[new_controller_ref(d, "apps/v1", "Deployment")],
                                labels=dict(template.metadata.labels or {})),
            spec=ReplicaSetSpec(replicas=0, min_ready_seconds=d.spec.min_ready_seconds,
                                selector=selector_with_hash(d.spec.selector, pod_template_hash), template=template),
        )
        assert new_rs.spec is not None
        new_rs.spec.replicas = new_rs_new_replicas(d, [*old_rss, new_rs], new_rs)
        set_new_replicaset_annotations(d, new_rs, new_revision, False)
        already_exists = False
        try:
            created = await self.client.create(new_rs)
        except ApiError as e:
            if e.is_already_exists:
                already_exists = True
                found = self.ctl.rs_informer.store.get_by_name(new_rs.metadata.name or "", self.ns)
                if found is None:
                    found = await self.client.get(ReplicaSet, new_rs.metadata.name or "", self.ns)
                ref = controller_ref(found)
                if (ref is not None and ref.uid == d.metadata.uid and found.spec is not None
                        and equal_ignore_hash(d.spec.template, found.spec.template)):
                    created = found
                else:
                    # A hash collision: another template hashed to this name. Bump collisionCount so
                    # the next sync computes another hash.
                    status = (d.status or DeploymentStatus()).model_copy(deep=True)
                    status.collision_count = (status.collision_count or 0) + 1
                    d.status = status
                    await self.write_status()
                    log.info("deployment %s/%s: hash collision on %s, collisionCount now %d", self.ns,
                             d.metadata.name, new_rs.metadata.name, status.collision_count)
                    raise
            elif e.is_forbidden and "being terminated" in e.message:
                raise
            else:
                msg = f'Failed to create new replica set "{new_rs.metadata.name}": {e.message or e}'
                if has_progress_deadline(d):
                    status = (d.status or DeploymentStatus()).model_copy(deep=True)
                    set_condition(status, new_condition(PROGRESSING, "False", FAILED_RS_CREATE, msg))
                    d.status = status
                    with contextlib.suppress(ApiError):  # the create failure is the news
                        await self.write_status()
                self.ctl.recorder.event(d, "Warning", FAILED_RS_CREATE, msg)
                raise
        if not already_exists and replicas(new_rs) > 0:
            self.ctl.recorder.event(d, "Normal", "ScalingReplicaSet",
                                    f"Scaled up replica set {created.metadata.name} to {replicas(new_rs)}")
        needs_update = self.set_revision(new_revision)
        if not already_exists and has_progress_deadline(d):
            status = (d.status or DeploymentStatus()).model_copy(deep=True)
            set_condition(status, new_condition(PROGRESSING, "True", NEW_REPLICASET_CREATED,
                                                f'Created new replica set "{created.metadata.name}"'))
            d.status = status
            needs_update = True
        if needs_update:
            await self.write_status()
        return created

    def set_revision(self, rev: str) -> bool:
        """SetDeploymentRevision on our copy; True if it changed."""
        annotations = dict(self.d.metadata.annotations or {})
        if annotations.get(REVISION_ANNOTATION) == rev:
            return False
        annotations[REVISION_ANNOTATION] = rev
        self.d.metadata.annotations = annotations
        return True

    # -- scaling --------------------------------------------------------------------------------

    async def scale(self, new_rs: ReplicaSet | None, old_rss: list[ReplicaSet]) -> None:
        """Resize for spec.replicas: the only active (or latest) ReplicaSet takes it all; old ones go
        to 0 once the new one is saturated; otherwise, in a rollout, proportionally."""
        d = self.d
        target = find_active_or_latest(new_rs, old_rss)
        if target is not None:
            if replicas(target) != replicas(d):
                await self.scale_replicaset_and_record_event(target, replicas(d))
            return
        if is_saturated(d, new_rs):
            for old in active(old_rss):
                await self.scale_replicaset_and_record_event(old, 0)
            return
        if is_rolling_update(d):
            plan, operation = proportional_scale(d, [*old_rss, new_rs])
            for rs, size in plan:
                await self.scale_replicaset(rs, size, operation)

    async def scale_replicaset_and_record_event(self, rs: ReplicaSet, new_scale: int) -> tuple[bool, ReplicaSet]:
        if replicas(rs) == new_scale:
            return False, rs
        return await self.scale_replicaset(rs, new_scale, "up" if replicas(rs) < new_scale else "down")

    async def scale_replicaset(self, rs: ReplicaSet, new_scale: int, operation: str) -> tuple[bool, ReplicaSet]:
        """Write the new size and the desired/max replicas annotations; record ScalingReplicaSet."""
        d = self.d
        size_changes = replicas(rs) != new_scale
        desired, max_replicas = replicas(d), replicas(d) + max_surge(d)
        if not size_changes and not replicas_annotations_need_update(rs, desired, max_replicas):
            return False, rs
        old_scale = replicas(rs)
        copy = rs.model_copy(deep=True)
        assert copy.spec is not None
        copy.spec.replicas = new_scale
        set_replicas_annotations(copy, desired, max_replicas)
        updated = await self.client.update(copy)
        if size_changes:
            message = f"Scaled {operation} replica set {rs.metadata.name} to {new_scale} from {old_scale}"
            self.ctl.recorder.event(d, "Normal", "ScalingReplicaSet", message)
        return size_changes, updated

    async def cleanup(self, old_rss: list[ReplicaSet]) -> None:
        """cleanupDeployment: delete the oldest old ReplicaSets beyond revisionHistoryLimit, only
        those scaled to 0 whose controller has seen that."""
        d = self.d
        limit = d.spec.revision_history_limit if d.spec else None
        if limit is None:
            return
        cleanable = [rs for rs in old_rss if rs.metadata.deletion_timestamp is None]
        diff = len(cleanable) - limit
        if diff <= 0:
            return
        for rs in by_revision(cleanable)[:diff]:
            if (_status_int(rs, "replicas") != 0 or replicas(rs) != 0
                    or (rs.metadata.generation or 0) > _status_int(rs, "observed_generation")):
                continue
            log.info("deployment %s/%s: deleting old replica set %s", self.ns, d.metadata.name, rs.metadata.name)
            try:
                await self.client.delete(ReplicaSet, rs.metadata.name or "", self.ns)
            except ApiError as e:
                if not e.is_not_found:
                    raise

    # -- strategies -----------------------------------------------------------------------------

    async def rollout_rolling(self, rss: list[ReplicaSet]) -> float | None:
        new_rs, old_rss = await self.get_all_replicasets_and_sync_revision(rss, True)
        assert new_rs is not None
        all_rss: list[ReplicaSet] = [*old_rss, new_rs]
        scaled_up, new_rs = await self.reconcile_new_replicaset(all_rss, new_rs)
        all_rss = [*old_rss, new_rs]
        if scaled_up:
            return await self.sync_rollout_status(all_rss, new_rs)
        if await self.reconcile_old_replicasets(all_rss, active(old_rss), new_rs):
            return await self.sync_rollout_status(all_rss, new_rs)
        if deployment_complete(self.d, self.d.status):
            await self.cleanup(old_rss)
        return await self.sync_rollout_status(all_rss, new_rs)

    async def reconcile_new_replicaset(self, all_rss: list[ReplicaSet], new_rs: ReplicaSet) -> tuple[bool, ReplicaSet]:
        want = replicas(self.d)
        if replicas(new_rs) == want:
            return False, new_rs
        if replicas(new_rs) > want:
            return await self.scale_replicaset_and_record_event(new_rs, want)
        return await self.scale_replicaset_and_record_event(new_rs, new_rs_new_replicas(self.d, all_rss, new_rs))

    async def reconcile_old_replicasets(self, all_rss: list[ReplicaSet], old_rss: list[ReplicaSet],
                                        new_rs: ReplicaSet) -> bool:
        if spec_replica_count(old_rss) == 0:
            return False
        budget = old_replicas_max_scaled_down(self.d, all_rss, new_rs)
        if budget <= 0:
            return False
        scaled = 0
        current = {rs.metadata.uid: rs for rs in old_rss}
        for rs, size in cleanup_unhealthy_plan(old_rss, budget):
            _, updated = await self.scale_replicaset_and_record_event(rs, size)
            scaled += replicas(rs) - size
            current[rs.metadata.uid] = updated
        olds = list(current.values())
        for rs, size in scale_down_old_plan(self.d, [*olds, new_rs], olds):
            await self.scale_replicaset_and_record_event(rs, size)
            scaled += replicas(rs) - size
        return scaled > 0

    async def rollout_recreate(self, rss: list[ReplicaSet]) -> float | None:
        new_rs, old_rss = await self.get_all_replicasets_and_sync_revision(rss, False)
        all_rss: list[ReplicaSet | None] = [*old_rss, new_rs]
        scaled_down = False
        for rs in active(old_rss):
            scaled, _ = await self.scale_replicaset_and_record_event(rs, 0)
            scaled_down = scaled_down or scaled
        if scaled_down:
            return await self.sync_rollout_status(all_rss, new_rs)
        if old_pods_running(new_rs, old_rss, self.pods_by_replicaset(rss)):
            return await self.sync_rollout_status(all_rss, new_rs)
        if new_rs is None:
            new_rs, old_rss = await self.get_all_replicasets_and_sync_revision(rss, True)
            all_rss = [*old_rss, new_rs]
        assert new_rs is not None
        await self.scale_replicaset_and_record_event(new_rs, replicas(self.d))
        if deployment_complete(self.d, self.d.status):
            await self.cleanup(old_rss)
        return await self.sync_rollout_status(all_rss, new_rs)

    # -- status ---------------------------------------------------------------------------------

    async def sync_deployment_status(self, all_rss: Sequence[ReplicaSet | None], new_rs: ReplicaSet | None) -> None:
        status = calculate_status(all_rss, new_rs, self.d)
        if status_equal(self.d.status, status):
            return
        self.d.status = status
        await self.write_status()

    async def sync_rollout_status(self, all_rss: Sequence[ReplicaSet | None],
                                  new_rs: ReplicaSet | None) -> float | None:
        d = self.d
        status = rollout_status(d, all_rss, new_rs)
        if status_equal(d.status, status):
            return requeue_after(d, status)
        d.status = status
        await self.write_status()
        return None

    async def write_status(self) -> None:
        """Write the Deployment's status, and first its revision annotation if that changed.

        Upstream sends both in one UpdateStatus (its status strategy keeps metadata changes other
        than labels); this apiserver's /status keeps only .status, so the annotation goes in a
        merge patch of the object itself (which leaves the generation alone)."""
        d = self.d
        annotations = d.metadata.annotations or {}
        changed = {k: v for k, v in annotations.items() if self._persisted_annotations.get(k) != v}
        if changed:
            # the resourceVersion makes the patch a compare-and-swap, as the PUT of upstream is
            patch = {"metadata": {"annotations": changed, "resourceVersion": d.metadata.resource_version}}
            patched = await self.client.patch(Deployment, d.metadata.name or "", patch, "merge", self.ns)
            d.metadata.resource_version = patched.metadata.resource_version
            self._persisted_annotations.update(changed)
        written = await self.client.update_status(d)
        d.metadata.resource_version = written.metadata.resource_version
