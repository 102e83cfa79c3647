"""A DaemonSet's rollout history as ControllerRevisions (upstream pkg/controller/daemon/update.go
constructHistory, cleanupHistory): one revision per distinct pod template, named `<ds>-<hash>`, holding
the strategic merge patch that puts that template back (what `kubectl rollout undo` applies), numbered so
the current template always has the highest revision. What the StatefulSet controller shares with it
(names, the patch, a new revision, ownership) is controllers/history.py, as upstream's pkg/controller/history."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from controllers import history
from controllers.daemon.util import CONTROLLER_REVISION_HASH_LABEL
from controllers.hashing import compute_hash
from machinery.api.apps_v1 import ControllerRevision, DaemonSet
from machinery.api.core_v1 import Pod

revision_name = history.revision_name
with_revision = history.with_revision


def revision_patch(ds: DaemonSet) -> dict[str, Any]:
    """getPatch: `{"spec": {"template": {..., "$patch": "replace"}}}`."""
    assert ds.spec is not None
    return history.template_patch(ds.spec.template)


def revision_hash(ds: DaemonSet) -> str:
    """controller.ComputeHash(&ds.Spec.Template, ds.Status.CollisionCount)."""
    assert ds.spec is not None
    return compute_hash(ds.spec.template, ds.status.collision_count if ds.status is not None else None)


def new_revision(ds: DaemonSet, hash_: str, number: int) -> ControllerRevision:
    """history.NewControllerRevision for the DaemonSet's current template."""
    assert ds.spec is not None
    labels = ds.spec.template.metadata.labels if ds.spec.template.metadata else None
    return history.new_controller_revision(ds, "apps/v1", "DaemonSet", labels, revision_patch(ds), number, None,
                                           hash_=hash_)


def owned_revisions(revisions: Sequence[ControllerRevision], ds: DaemonSet) -> list[ControllerRevision]:
    """The revisions this DaemonSet controls (by uid), in revision order."""
    return sorted(history.owned_revisions(revisions, ds.metadata.uid),
                  key=lambda r: (r.revision, r.metadata.name or ""))


def matches(ds: DaemonSet, revision: ControllerRevision) -> bool:
    """history.Match / controllerrevision equality: the revision's patch is the one of the current template."""
    return revision.data == revision_patch(ds)


def revisions_to_prune(ds: DaemonSet, old: Sequence[ControllerRevision],
                       live_pods: Sequence[Pod]) -> list[ControllerRevision]:
    """cleanupHistory: beyond revisionHistoryLimit, the oldest old revisions no live pod still runs."""
    assert ds.spec is not None
    limit = ds.spec.revision_history_limit if ds.spec.revision_history_limit is not None else 10
    excess = len(old) - limit
    if excess <= 0:
        return []
    live_hashes = {(p.metadata.labels or {}).get(CONTROLLER_REVISION_HASH_LABEL) for p in live_pods}
    out = []
    for revision in sorted(old, key=lambda r: r.revision):
        if excess <= 0:
            break
        if (revision.metadata.labels or {}).get(CONTROLLER_REVISION_HASH_LABEL) in live_hashes:
            continue
        out.append(revision)
        excess -= 1
    return out
