"""The Deployment controller's arithmetic on plain objects (upstream
pkg/controller/deployment/util/deployment_util.go, "deploymentutil"): replicas, maxSurge and
maxUnavailable, the orderings of ReplicaSets, revisions, counts over ReplicaSets, new and old
ReplicaSets by template, the desired/max replicas annotations, proportional shares, conditions,
complete / progressing / timed out. No I/O: tests/unit/test_deployment_logic.py drives it.
"""

from __future__ import annotations

import datetime as dt
import functools
import math
from collections.abc import Iterable, Sequence
from typing import Any

from controllers.hashing import POD_TEMPLATE_HASH_LABEL
from machinery.api.apps_v1 import Deployment, DeploymentCondition, DeploymentStatus, ReplicaSet
from machinery.api.core_v1 import PodTemplateSpec
from machinery.api.meta import LabelSelector, ObjectMeta
from machinery.timeutil import format_rfc3339 as rfc3339
from machinery.timeutil import now as now_utc
from machinery.timeutil import parse_rfc3339 as parse_time

REVISION_ANNOTATION = "deployment.kubernetes.io/revision"
DESIRED_REPLICAS_ANNOTATION = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS_ANNOTATION = "deployment.kubernetes.io/max-replicas"

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


def replicas(obj: ReplicaSet | Deployment | None) -> int:
    """spec.replicas (the apiserver defaults it; an absent one reads as 0 for a ReplicaSet)."""
    if obj is None or obj.spec is None:
        return 0
    if obj.spec.replicas is None:
        return 1 if isinstance(obj, Deployment) else 0
    return obj.spec.replicas


def status_int(rs: ReplicaSet | None, name: str) -> int:
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
    return sum(status_int(rs, "replicas") for rs in rss if rs is not None)


def ready_replica_count(rss: Iterable[ReplicaSet | None]) -> int:
    return sum(status_int(rs, "ready_replicas") for rs in rss if rs is not None)


def available_replica_count(rss: Iterable[ReplicaSet | None]) -> int:
    """GetAvailableReplicaCountForReplicaSets: the sum of status.availableReplicas."""
    return sum(status_int(rs, "available_replicas") for rs in rss if rs is not None)


def current_pods(rs: ReplicaSet) -> int:
    """Pods a ReplicaSet has or is about to have: spec.replicas, or more while pods it was scaled
    down from are not yet seen gone (status.replicas lags the scale-down)."""
    return max(replicas(rs), status_int(rs, "replicas"))


def safe_available(rs: ReplicaSet) -> int:
    """Available pods a ReplicaSet can be counted on for: status.availableReplicas, but no more than
    spec.replicas (a scale-down deletes pods before the status says so)."""
    return min(status_int(rs, "available_replicas"), replicas(rs))


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
            and status_int(rs, "available_replicas") == replicas(d))


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


def status_equal(a: DeploymentStatus | None, b: DeploymentStatus | None) -> bool:
    return (a.to_dict() if a else {}) == (b.to_dict() if b else {})
