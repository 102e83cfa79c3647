"""ControllerRevision history shared by the DaemonSet and StatefulSet controllers (upstream
pkg/controller/history/controller_history.go): revision names `<owner>-<hash>`, the revision hash, a new
revision for an owner, the revisions an owner controls in revision order, equality by data, and the
template patch (`{"spec": {"template": {..., "$patch": "replace"}}}`) both controllers store as data and
`kubectl rollout undo` applies."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from controllers.controller_ref_manager import controller_ref, new_controller_ref
from controllers.hashing import canonical_json, fnv32a, safe_encode_string
from machinery.api.apps_v1 import ControllerRevision
from machinery.api.core_v1 import PodTemplateSpec
from machinery.api.meta import ObjectMeta

# apps/v1 ControllerRevisionHashLabelKey: on revisions, and on the pods made from them
CONTROLLER_REVISION_HASH_LABEL = "controller-revision-hash"
MAX_PREFIX_LENGTH = 223  # ControllerRevisionName: 253 less a hash and a dash


def revision_name(prefix: str, hash_: str) -> str:
    """history.ControllerRevisionName."""
    return f"{prefix[:MAX_PREFIX_LENGTH]}-{hash_}"


def template_patch(template: PodTemplateSpec) -> dict[str, Any]:
    """getPatch of both controllers: the strategic merge patch that puts the template back as it is."""
    data = template.to_dict()
    data["$patch"] = "replace"
    return {"spec": {"template": data}}


def template_of_patch(data: dict[str, Any] | None) -> dict[str, Any]:
    """The pod template a revision's patch puts back, without the directive (ApplyRevision's result)."""
    template = copy.deepcopy(((data or {}).get("spec") or {}).get("template") or {})
    template.pop("$patch", None)
    return template


def hash_controller_revision(data: dict[str, Any] | None, probe: int | None = None) -> str:
    """history.HashControllerRevision: FNV-32a of the revision's data, then the collision count in decimal."""
    h = fnv32a(canonical_json(data or {}))
    if probe is not None:
        h = fnv32a(str(probe).encode(), h)
    return safe_encode_string(str(h))


def new_controller_revision(parent: Any, api_version: str, kind: str, template_labels: dict[str, str] | None,
                            data: dict[str, Any], number: int, collision_count: int | None,
                            hash_: str | None = None) -> ControllerRevision:
    """history.NewControllerRevision: labels of the template plus the hash, a controller reference to the
    parent, the parent's annotations (both callers copy them), named by the hash."""
    hash_ = hash_ if hash_ is not None else hash_controller_revision(data, collision_count)
    labels = dict(template_labels or {})
    labels[CONTROLLER_REVISION_HASH_LABEL] = hash_
    annotations = dict(parent.metadata.annotations) if parent.metadata.annotations else None
    meta = ObjectMeta(name=revision_name(parent.metadata.name or "", hash_), namespace=parent.metadata.namespace,
                      labels=labels, annotations=annotations,
                      owner_references=[new_controller_ref(parent, api_version, kind)])
    return ControllerRevision(metadata=meta, data=data, revision=number)


def sort_revisions(revisions: Sequence[ControllerRevision]) -> list[ControllerRevision]:
    """history.SortControllerRevisions: by revision, then by creation time and name."""
    return sorted(revisions, key=lambda r: (r.revision, r.metadata.creation_timestamp or "", r.metadata.name or ""))


def owned_revisions(revisions: Sequence[ControllerRevision], owner_uid: str | None) -> list[ControllerRevision]:
    """The revisions the owner controls (by uid), in revision order."""
    return sort_revisions([r for r in revisions if (ref := controller_ref(r)) is not None and ref.uid == owner_uid])


def equal_revision(a: ControllerRevision, b: ControllerRevision) -> bool:
    """history.EqualRevision: the same data (upstream compares the hash label first, then the bytes)."""
    return a.data == b.data


def find_equal_revisions(revisions: Sequence[ControllerRevision],
                         needle: ControllerRevision) -> list[ControllerRevision]:
    return [r for r in revisions if equal_revision(r, needle)]


def next_revision(revisions: Sequence[ControllerRevision]) -> int:
    """nextRevision: one more than the highest (revisions sorted), 1 for none."""
    return max((r.revision for r in revisions), default=0) + 1


def with_revision(revision: ControllerRevision, number: int) -> ControllerRevision:
    return revision.model_copy(update={"revision": number, "metadata": copy.deepcopy(revision.metadata)})
