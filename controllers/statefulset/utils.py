"""The StatefulSet controller's pure parts (upstream pkg/controller/statefulset/stateful_set_utils.go): ordinals
from pod names, the identity a pod of ordinal n has (name `<set>-<n>`, hostname, subdomain, the pod-name and
pod-index labels), its storage (one claim per volumeClaimTemplate, `<template>-<set>-<n>`), the claims' owner
references per persistentVolumeClaimRetentionPolicy, the pod revision, the pod state predicates, and the
revisions (`getPatch`, `ApplyRevision`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from controllers import history
from controllers.controller_ref_manager import new_controller_ref
from controllers.controller_utils import is_pod_available, is_pod_ready, pod_from_template
from controllers.deployment.util import int_or_percent
from machinery.api.apps_v1 import ControllerRevision, StatefulSet, StatefulSetStatus
from machinery.api.core_v1 import (
    PersistentVolumeClaim,
    PersistentVolumeClaimVolumeSource,
    Pod,
    PodTemplateSpec,
    Volume,
)
from machinery.api.meta import ObjectMeta, OwnerReference

# apps/v1 labels on every pod of a StatefulSet
STATEFULSET_POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"
CONTROLLER_REVISION_HASH_LABEL = history.CONTROLLER_REVISION_HASH_LABEL

RETAIN = "Retain"
DELETE = "Delete"

_STATEFUL_POD_REGEX = re.compile(r"^(.*)-([0-9]+)$")


# -- ordinals and identity ----------------------------------------------------------------------


def parent_name_and_ordinal(pod: Pod) -> tuple[str, int]:
    """getParentNameAndOrdinal: (`web`, 1) for `web-1`; ("", -1) for a name without an ordinal."""
    match = _STATEFUL_POD_REGEX.match(pod.metadata.name or "")
    if match is None:
        return "", -1
    try:
        ordinal = int(match.group(2))
    except ValueError:
        return match.group(1), -1
    return match.group(1), ordinal if ordinal < 2**31 else -1


def get_ordinal(pod: Pod) -> int:
    return parent_name_and_ordinal(pod)[1]


def pod_name(sts: StatefulSet, ordinal: int) -> str:
    return f"{sts.metadata.name}-{ordinal}"


def is_member_of(sts: StatefulSet, pod: Pod) -> bool:
    return parent_name_and_ordinal(pod)[0] == sts.metadata.name


def start_ordinal(sts: StatefulSet) -> int:
    """getStartOrdinal: spec.ordinals.start, 0 without it."""
    assert sts.spec is not None
    return (sts.spec.ordinals.start or 0) if sts.spec.ordinals is not None else 0


def end_ordinal(sts: StatefulSet) -> int:
    """getEndOrdinal: the last ordinal in range (start + replicas - 1)."""
    assert sts.spec is not None
    return start_ordinal(sts) + (sts.spec.replicas if sts.spec.replicas is not None else 1) - 1


def pod_in_ordinal_range(pod: Pod, sts: StatefulSet) -> bool:
    ordinal = get_ordinal(pod)
    return start_ordinal(sts) <= ordinal <= end_ordinal(sts)


def identity_matches(sts: StatefulSet, pod: Pod) -> bool:
    """identityMatches: the name of its ordinal, the set's namespace, the pod-name label."""
    parent, ordinal = parent_name_and_ordinal(pod)
    labels = pod.metadata.labels or {}
    return (ordinal >= 0 and parent == sts.metadata.name and pod.metadata.name == pod_name(sts, ordinal)
            and pod.metadata.namespace == sts.metadata.namespace
            and labels.get(STATEFULSET_POD_NAME_LABEL) == pod.metadata.name
            and labels.get(POD_INDEX_LABEL) == str(ordinal))


def update_identity(sts: StatefulSet, pod: Pod) -> None:
    """updateIdentity: name, namespace and the pod-name and pod-index labels (PodIndexLabel, on since 1.28)."""
    ordinal = get_ordinal(pod)
    pod.metadata.name = pod_name(sts, ordinal)
    pod.metadata.namespace = sts.metadata.namespace
    labels = dict(pod.metadata.labels or {})
    labels[STATEFULSET_POD_NAME_LABEL] = pod.metadata.name
    labels[POD_INDEX_LABEL] = str(ordinal)
    pod.metadata.labels = labels


# -- storage --------------------------------------------------------------------------------------


def claim_name(sts: StatefulSet, template: PersistentVolumeClaim, ordinal: int) -> str:
    """getPersistentVolumeClaimName: `<template>-<set>-<ordinal>`."""
    return f"{template.metadata.name}-{sts.metadata.name}-{ordinal}"


def persistent_volume_claims(sts: StatefulSet, ordinal: int) -> list[tuple[str, PersistentVolumeClaim]]:
    """getPersistentVolumeClaims: (template name, the claim of this ordinal) per template, in template
    order; each claim carries the selector's matchLabels over the template's labels."""
    assert sts.spec is not None
    out = []
    match_labels = sts.spec.selector.match_labels or {}
    for template in sts.spec.volume_claim_templates or []:
        claim = template.model_copy(deep=True)
        labels = dict(claim.metadata.labels or {})
        labels.update(match_labels)
        claim.metadata = claim.metadata.model_copy(update={
            "name": claim_name(sts, template, ordinal), "namespace": sts.metadata.namespace,
            "labels": labels or None})
        claim.status = None
        out.append((template.metadata.name or "", claim))
    return out


def storage_matches(sts: StatefulSet, pod: Pod) -> bool:
    """storageMatches: every claim template is a volume of the pod naming this ordinal's claim."""
    ordinal = get_ordinal(pod)
    if ordinal < 0:
        return False
    volumes = {v.name: v for v in (pod.spec.volumes if pod.spec else None) or []}
    for name, claim in persistent_volume_claims(sts, ordinal):
        volume = volumes.get(name)
        if volume is None or volume.persistent_volume_claim is None \
                or volume.persistent_volume_claim.claim_name != claim.metadata.name:
            return False
    return True


def update_storage(sts: StatefulSet, pod: Pod) -> None:
    """updateStorage: the claims' volumes first, then the pod's other volumes."""
    assert pod.spec is not None
    claims = persistent_volume_claims(sts, get_ordinal(pod))
    names = {name for name, _ in claims}
    volumes = [Volume(name=name, persistent_volume_claim=PersistentVolumeClaimVolumeSource(
        claim_name=claim.metadata.name or "", read_only=False)) for name, claim in claims]
    volumes += [v for v in pod.spec.volumes or [] if v.name not in names]
    pod.spec.volumes = volumes or None


def new_stateful_set_pod(sts: StatefulSet, ordinal: int) -> Pod:
    """newStatefulSetPod: the template's pod, its name, identity (hostname, subdomain) and storage."""
    assert sts.spec is not None
    pod = pod_from_template(sts.spec.template, sts, new_controller_ref(sts, "apps/v1", "StatefulSet"))
    pod.metadata.generate_name = None
    pod.metadata.name = pod_name(sts, ordinal)
    update_identity(sts, pod)
    assert pod.spec is not None
    pod.spec.hostname = pod.metadata.name
    if sts.spec.service_name:
        pod.spec.subdomain = sts.spec.service_name
    update_storage(sts, pod)
    return pod


def max_unavailable_of(value: int | str | None, replicas: int) -> int:
    """getStatefulSetMaxUnavailable: a count, or a percent of the replicas rounded down; at least 1."""
    return max(1, int_or_percent(value, replicas, False))


def pod_revision(pod: Pod) -> str:
    """getPodRevision: the controller-revision-hash label (a revision's name)."""
    return (pod.metadata.labels or {}).get(CONTROLLER_REVISION_HASH_LABEL, "")


def set_pod_revision(pod: Pod, revision: str) -> None:
    labels = dict(pod.metadata.labels or {})
    labels[CONTROLLER_REVISION_HASH_LABEL] = revision
    pod.metadata.labels = labels


def new_versioned_stateful_set_pod(current_set: StatefulSet, update_set: StatefulSet, current_revision: str,
                                   update_revision: str, ordinal: int, current_replicas: int) -> Pod:
    """newVersionedStatefulSetPod: below the partition (or, without a rollingUpdate, below the current
    replicas) a pod of the current revision, else of the update revision."""
    assert current_set.spec is not None
    strategy = current_set.spec.update_strategy
    start = start_ordinal(current_set)
    if strategy is not None and strategy.type == "RollingUpdate" and (
            (strategy.rolling_update is None and ordinal < start + current_replicas)
            or (strategy.rolling_update is not None
                and ordinal < start + (strategy.rolling_update.partition or 0))):
        pod = new_stateful_set_pod(current_set, ordinal)
        set_pod_revision(pod, current_revision)
        return pod
    pod = new_stateful_set_pod(update_set, ordinal)
    set_pod_revision(pod, update_revision)
    return pod


# -- pod state --------------------------------------------------------------------------------------


def is_created(pod: Pod) -> bool:
    """isCreated: the apiserver gave it a phase."""
    return bool(pod.status is not None and pod.status.phase)


def is_pending(pod: Pod) -> bool:
    return pod.status is not None and pod.status.phase == "Pending"


def is_failed(pod: Pod) -> bool:
    return pod.status is not None and pod.status.phase == "Failed"


def is_succeeded(pod: Pod) -> bool:
    return pod.status is not None and pod.status.phase == "Succeeded"


def is_terminating(pod: Pod) -> bool:
    return pod.metadata.deletion_timestamp is not None


def is_running_and_ready(pod: Pod) -> bool:
    return pod.status is not None and pod.status.phase == "Running" and is_pod_ready(pod)


def is_running_and_available(pod: Pod, min_ready_seconds: int, now: datetime) -> bool:
    return pod.status is not None and pod.status.phase == "Running" and is_pod_available(pod, min_ready_seconds, now)


def is_healthy(pod: Pod) -> bool:
    return is_running_and_ready(pod) and not is_terminating(pod)


def ordinal_sorted(pods: Sequence[Pod]) -> list[Pod]:
    return sorted(pods, key=get_ordinal)


def compute_replica_status(pods: Sequence[Pod], min_ready_seconds: int, current_revision: str,
                           update_revision: str, now: datetime) -> StatefulSetStatus:
    """computeReplicaStatus: created, ready, available, and of those not terminating the ones at the current
    and at the update revision."""
    replicas = ready = available = current = updated = 0
    for pod in pods:
        if is_created(pod):
            replicas += 1
        if is_running_and_ready(pod):
            ready += 1
            if is_running_and_available(pod, min_ready_seconds, now):
                available += 1
        if is_created(pod) and not is_terminating(pod):
            revision = pod_revision(pod)
            if revision == current_revision:
                current += 1
            if revision == update_revision:
                updated += 1
    return StatefulSetStatus(replicas=replicas, ready_replicas=ready, available_replicas=available,
                             current_replicas=current, updated_replicas=updated)


# -- the claims' owner references (StatefulSetAutoDeletePVC) ---------------------------------------------


def retention_policy(sts: StatefulSet) -> tuple[str, str]:
    """(whenDeleted, whenScaled), Retain for what is unset."""
    assert sts.spec is not None
    policy = sts.spec.persistent_volume_claim_retention_policy
    if policy is None:
        return RETAIN, RETAIN
    return policy.when_deleted or RETAIN, policy.when_scaled or RETAIN


def _has_owner_ref(refs: list[OwnerReference], uid: str | None) -> bool:
    return any(r.uid == uid for r in refs)


def _owner_ref(api_version: str, kind: str, meta: ObjectMeta) -> OwnerReference:
    """setOwnerRef's reference: not a controller reference, no blockOwnerDeletion."""
    return OwnerReference(api_version=api_version, kind=kind, name=meta.name or "", uid=meta.uid or "")


def claim_owner_refs(claim: PersistentVolumeClaim, sts: StatefulSet, pod: Pod) -> list[OwnerReference] | None:
    """updateClaimOwnerRefForSetAndPod: the owner references the claim should have under the set's policy
    (WhenDeleted=Delete: the set owns it while its pod is in range; WhenScaled=Delete: the pod owns it
    once scaled down), or None when they are already right."""
    when_deleted, when_scaled = retention_policy(sts)
    refs = list(claim.metadata.owner_references or [])
    set_uid, pod_uid = sts.metadata.uid, pod.metadata.uid
    want_set = want_pod = False
    if when_scaled == DELETE and not pod_in_ordinal_range(pod, sts):
        want_pod = True
    elif when_deleted == DELETE:
        want_set = True
    changed = False
    for uid, want, ref in ((set_uid, want_set, lambda: _owner_ref("apps/v1", "StatefulSet", sts.metadata)),
                           (pod_uid, want_pod, lambda: _owner_ref("v1", "Pod", pod.metadata))):
        if not uid:
            continue
        has = _has_owner_ref(refs, uid)
        if want and not has:
            refs.append(ref())
            changed = True
        elif not want and has:
            refs = [r for r in refs if r.uid != uid]
            changed = True
    return refs if changed else None


def has_stale_owner_ref(claim: PersistentVolumeClaim, pod: Pod) -> bool:
    """hasStaleOwnerRef: the claim names a pod of this name with another uid (or the pod has none yet)."""
    return any(r.kind == "Pod" and r.name == pod.metadata.name and r.uid != (pod.metadata.uid or "")
               for r in claim.metadata.owner_references or [])


# -- revisions ----------------------------------------------------------------------------------------------


def revision_patch(sts: StatefulSet) -> dict[str, Any]:
    """getPatch: the template, replacing."""
    assert sts.spec is not None
    return history.template_patch(sts.spec.template)


def new_revision(sts: StatefulSet, number: int, collision_count: int | None) -> ControllerRevision:
    """newRevision: history.NewControllerRevision of the set's template patch (labels of the template)."""
    assert sts.spec is not None
    labels = sts.spec.template.metadata.labels if sts.spec.template.metadata else None
    return history.new_controller_revision(sts, "apps/v1", "StatefulSet", labels, revision_patch(sts), number,
                                           collision_count)


def apply_revision(sts: StatefulSet, revision: ControllerRevision) -> StatefulSet:
    """ApplyRevision: the set with the revision's template."""
    assert sts.spec is not None
    template = PodTemplateSpec.from_dict(history.template_of_patch(revision.data))
    spec = sts.spec.model_copy(update={"template": template})
    return sts.model_copy(update={"spec": spec})


def revisions_to_truncate(sts: StatefulSet, pods: Sequence[Pod], revisions: Sequence[ControllerRevision],
                          current: ControllerRevision | None, update: ControllerRevision | None
                          ) -> list[ControllerRevision]:
    """truncateHistory: the oldest revisions no pod runs and that are neither current nor update, beyond
    revisionHistoryLimit."""
    assert sts.spec is not None
    live = {r.metadata.name for r in (current, update) if r is not None}
    live |= {pod_revision(p) for p in pods}
    old = [r for r in history.sort_revisions(revisions) if r.metadata.name not in live]
    limit = sts.spec.revision_history_limit if sts.spec.revision_history_limit is not None else 10
    return old[:max(0, len(old) - limit)]
