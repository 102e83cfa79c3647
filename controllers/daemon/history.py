"""A DaemonSet's rollout history as ControllerRevisions (upstream pkg/controller/daemon/update.go
constructHistory, cleanupHistory, and pkg/controller/history): one revision per distinct pod template,
named `<ds>-<hash>`, holding the strategic merge patch that puts that template back (what `kubectl
rollout undo` applies), numbered so the current template always has the highest revision."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from controllers.controller_ref_manager import controller_ref, new_controller_ref
from controllers.daemon.util import CONTROLLER_REVISION_HASH_LABEL
from controllers.hashing import compute_hash
from machinery.api.apps_v1 import ControllerRevision, DaemonSet
from machinery.api.core_v1 import Pod
from machinery.api.meta import ObjectMeta

MAX_PREFIX_LENGTH = 223  # history.ControllerRevisionName: 253 less a hash and a dash


def revision_patch(ds: DaemonSet) -> dict[str, Any]:
    """getPatch: `{"spec": {"template": {..., "$patch": "replace"}}}`."""
    assert ds.spec is not None
    template = ds.spec.template.to_dict()
    template["$patch"] = "replace"
    return {"spec": {"template": template}}


def revision_hash(ds: DaemonSet) -> str:
    """controller.ComputeHash(&ds.Spec.Template, ds.Status.CollisionCount)."""
    assert ds.spec is not None
    return compute_hash(ds.spec.template, ds.status.collision_count if ds.status is not None else None)


def revision_name(prefix: str, hash_: str) -> str:
    return f"{prefix[:MAX_PREFIX_LENGTH]}-{hash_}"


def new_revision(ds: DaemonSet, hash_: str, number: int) -> ControllerRevision:
    """history.NewControllerRevision for the DaemonSet's current template."""
    assert ds.spec is not None
    labels = dict(ds.spec.template.metadata.labels or {}) if ds.spec.template.metadata else {}
    labels[CONTROLLER_REVISION_HASH_LABEL] = hash_
    meta = ObjectMeta(name=revision_name(ds.metadata.name or "", hash_), namespace=ds.metadata.namespace,
                      labels=labels, annotations=dict(ds.metadata.annotations) if ds.metadata.annotations else None,
                      owner_references=[new_controller_ref(ds, "apps/v1", "DaemonSet")])
    return ControllerRevision(metadata=meta, data=revision_patch(ds), revision=number)


def owned_revisions(revisions: Sequence[ControllerRevision], ds: DaemonSet) -> list[ControllerRevision]:
    """The revisions this DaemonSet controls (by uid), in revision order."""
    uid = ds.metadata.uid
    out = [r for r in revisions if (ref := controller_ref(r)) is not None and ref.uid == uid]
    return sorted(out, key=lambda r: (r.revision, r.metadata.name or ""))


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


def with_revision(revision: ControllerRevision, number: int) -> ControllerRevision:
    return revision.model_copy(update={"revision": number, "metadata": copy.deepcopy(revision.metadata)})
