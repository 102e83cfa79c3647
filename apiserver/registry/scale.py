"""The scale subresource's storage (upstream: the ScaleREST of pkg/registry/apps/deployment/storage and
replicaset/storage): an autoscaling/v1 Scale read from and written to the object's spec.replicas
through the resource's Store. The HTTP side is apiserver/endpoints/subresources.py."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable

from pydantic import ValidationError

from apiserver import errors, fieldmanager
from apiserver.registry.generic import Store, WriteOptions, loc_to_path
from apiserver.validation import required, validate_replicas
from machinery.api.autoscaling_v1 import Scale
from machinery.selectors import label_selector_to_string
from machinery.types import Obj


def _at(obj: Obj, path: str) -> object:
    """The value at a simple JSON path (`.spec.replicas`), or None."""
    node: object = obj
    for part in path.strip(".").split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


def _set_at(obj: Obj, path: str, value: object) -> None:
    parts = path.strip(".").split(".")
    node = obj
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value


def scale_of(obj: Obj, paths: tuple[str, str, str] | None = None) -> Obj:
    """The object's Scale; `paths` are a custom resource's (specReplicasPath, statusReplicasPath,
    labelSelectorPath) from its CRD (upstream customresource/tableconvertor's sibling, scale.go)."""
    meta = obj["metadata"]
    if paths is None:
        spec_replicas = (obj.get("spec") or {}).get("replicas", 0)
        status_replicas = (obj.get("status") or {}).get("replicas", 0)
        label_selector = (obj.get("spec") or {}).get("selector") or {}
        if obj.get("kind") == "ReplicationController":  # a plain label map
            label_selector = {"matchLabels": label_selector}
        selector = label_selector_to_string(label_selector)
    else:
        spec_replicas = _at(obj, paths[0]) or 0
        status_replicas = _at(obj, paths[1]) or 0
        found = _at(obj, paths[2]) if paths[2] else ""
        selector = found if isinstance(found, str) else ""
    status: Obj = {"replicas": status_replicas}
    if selector or paths is None:
        status["selector"] = selector
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                     if k in meta},
        "spec": {"replicas": spec_replicas},
        "status": status,
    }


def _checked_scale(store: Store, name: str, scale: Obj) -> Obj:
    try:
        scale = Scale.from_dict(scale).to_dict()
    except ValidationError as e:
        p = e.errors()[0]
        path = loc_to_path(p["loc"])
        raise errors.ApiError(422, "Invalid", f'Scale.autoscaling "{name}" is invalid: {path}: {p["msg"]}',
                              {"name": name, "group": "autoscaling", "kind": "Scale",
                               "causes": [{"reason": "FieldValueInvalid", "message": p["msg"], "field": path}]}) from e
    replicas = (scale.get("spec") or {}).get("replicas")
    if replicas is None:
        err = required("spec.replicas")
    elif errs := validate_replicas(replicas, "spec.replicas"):
        err = errs[0]
    else:
        return scale
    raise errors.ApiError(422, "Invalid", f'Scale.autoscaling "{name}" is invalid: {err.full()}',
                          {"name": name, "group": "autoscaling", "kind": "Scale",
                           "causes": [{"reason": err.reason, "message": err.message(), "field": err.field}]})


async def write_scale(store: Store, namespace: str | None, name: str, opts: WriteOptions,
                      make_scale: Callable[[Obj], Obj]) -> Obj:
    """Set spec.replicas to the Scale `make_scale` makes of the current object (a PUT's body, or a
    patch applied to the current Scale); the Scale's resourceVersion, if any, must be the object's."""
    if store.scale_paths is None:  # the managedFields are the scale's (track_scale), not an Update of the object's
        opts = dataclasses.replace(opts, apply=True)

    async def transform(old: Obj) -> Obj:
        scale = _checked_scale(store, name, make_scale(old))
        pinned = scale["metadata"].get("resourceVersion")
        if pinned and pinned != old["metadata"]["resourceVersion"]:
            raise errors.conflict(store.info, name)
        new = copy.deepcopy(old)
        if store.scale_paths is None:
            new.setdefault("spec", {})["replicas"] = scale["spec"]["replicas"]
            fieldmanager.track_scale(store.info, old, new, store.field_manager(opts))
        else:
            # a custom resource's: recorded as an Update of the whole object, as before (upstream's own
            # tracking of a custom resource's scale is in question, kubernetes/kubernetes#131892)
            _set_at(new, store.scale_paths[0], scale["spec"]["replicas"])
        return new

    return scale_of(await store.guaranteed_update(namespace, name, transform, opts, None), store.scale_paths)
