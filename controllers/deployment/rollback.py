"""Rollback, the controller's share of it (upstream pkg/controller/deployment/rollback.go, and
deploymentutil.SetNewReplicaSetAnnotations).

Upstream's rollback.go serves the deprecated spec.rollbackTo of extensions/v1beta1. In apps/v1
`kubectl rollout undo` copies an old ReplicaSet's template back into the Deployment; that
template then finds its old ReplicaSet as the new one, and what is left to the controller is
the bookkeeping here: the ReplicaSet's revision is raised to the newest, its old number goes
to the revision-history annotation (bounded in length), and the Deployment's own annotations
are copied over except those that describe the rollout itself.
"""

from __future__ import annotations

from controllers.deployment.util import (
    DESIRED_REPLICAS_ANNOTATION,
    MAX_REPLICAS_ANNOTATION,
    REVISION_ANNOTATION,
    max_surge,
    replicas,
    set_replicas_annotations,
)
from machinery.api.apps_v1 import Deployment, ReplicaSet

REVISION_HISTORY_ANNOTATION = "deployment.kubernetes.io/revision-history"
LAST_APPLIED_ANNOTATION = "kubectl.kubernetes.io/last-applied-configuration"
ROLLBACK_TO_ANNOTATION = "deprecated.deployment.rollback.to"
MAX_REV_HISTORY_LENGTH_IN_CHARS = 2000
ANNOTATIONS_TO_SKIP = frozenset({LAST_APPLIED_ANNOTATION, REVISION_ANNOTATION, REVISION_HISTORY_ANNOTATION,
                                 DESIRED_REPLICAS_ANNOTATION, MAX_REPLICAS_ANNOTATION, ROLLBACK_TO_ANNOTATION})


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
