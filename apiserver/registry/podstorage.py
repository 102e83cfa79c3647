"""The pod's own storage beside the generic Store (upstream pkg/registry/core/pod/storage/storage.go):
BindingREST, the scheduler's way to set a pod's node. As upstream's setPodHostAndAnnotations, it writes
through the raw storage with compare-and-swap, not through the Store's update path: spec.nodeName is
immutable to every update, and a binding is the one write that may set it, so the Store need not know
the word "binding". What the pod store always enforces still holds: admission sees the write (as the
pod, operation CREATE of pods/binding; apiserver/admission/chain.py) and the bound pod must be a valid pod
(a node name is an RFC 1123 subdomain).
"""

from __future__ import annotations

import copy
from typing import Any

from apiserver import errors
from apiserver.admission.interfaces import AdmissionAttributes
from apiserver.registry.generic import Obj, Store, WriteOptions, now_rfc3339
from apiserver.registry.meta import validate_object_meta
from apiserver.storage import codec
from apiserver.storage.etcd import KeyNotFound, RevisionConflict
from machinery.api.core_v1 import Binding

SUBRESOURCE = "binding"
_MAX_CAS_RETRIES = 16


def _conflict(name: str, message: str) -> errors.ApiError:
    return errors.ApiError(409, "Conflict", f'Operation cannot be fulfilled on pods/binding "{name}": {message}',
                           {"name": name, "kind": "pods/binding"})


def validate_binding(name: str, binding: Binding) -> str:
    """Upstream ValidatePodBinding, plus the name check of the binding subresource; the target node."""
    node = binding.target.name if binding.target else None
    if not node:
        raise errors.ApiError(422, "Invalid", f'Binding "{name}" is invalid: target.name: Required value',
                              {"name": name, "kind": "Binding",
                               "causes": [{"reason": "FieldValueRequired", "message": "Required value",
                                           "field": "target.name"}]})
    if binding.metadata.name and binding.metadata.name != name:
        raise errors.bad_request(f"the name of the binding ({binding.metadata.name}) does not match the pod "
                                 f"({name})")
    return node


class BindingREST:
    """POST pods/{name}/binding: assign the pod to the binding's node, once."""

    def __init__(self, pods: Store) -> None:
        self.pods = pods

    async def create(self, namespace: str | None, name: str, binding: Binding, opts: WriteOptions) -> None:
        node = validate_binding(name, binding)
        pods = self.pods
        key = pods.key(namespace, name)
        for _ in range(_MAX_CAS_RETRIES):
            kv = await pods.storage.get(key)
            if kv is None:
                raise errors.not_found(pods.info, name)
            old = codec.decode(kv.value, kv.mod_revision)
            new = self._assign(copy.deepcopy(old), name, binding, node)
            admission = pods.admission if opts.user is not None else None
            if admission is not None:
                attrs = AdmissionAttributes("UPDATE", pods, namespace, name, SUBRESOURCE, new, old, opts.user,
                                            opts.dry_run)
                new = await admission.mutate(attrs)
            errs = validate_object_meta(new["metadata"], pods.info.namespaced, pods.info.kind)
            errs += pods.strategy.validate(new)
            if errs:
                raise errors.invalid(pods.info, name, errs)
            # a new spec is a new generation, as for every write of the pod store
            new["metadata"]["generation"] = old["metadata"].get("generation", 1) + 1
            if admission is not None:
                attrs.obj = new
                await admission.validate(attrs)
            if opts.dry_run:
                return
            try:
                await pods.storage.update(key, codec.encode(new), kv.mod_revision)
            except RevisionConflict:
                continue
            except KeyNotFound:
                raise errors.not_found(pods.info, name) from None
            return
        raise errors.conflict(pods.info, name, "too many concurrent writers; try again")

    def _assign(self, pod: Obj, name: str, binding: Binding, node: str) -> Obj:
        """Upstream setPodHostAndAnnotations: the node, the binding's annotations, PodScheduled=True."""
        meta: dict[str, Any] = pod["metadata"]
        spec = pod.setdefault("spec", {})
        if meta.get("deletionTimestamp"):
            raise errors.conflict(self.pods.info, name, f"pod {name} is being deleted, cannot be assigned to a host")
        uid = binding.metadata.uid
        if uid and uid != meta.get("uid"):  # the pod the scheduler chose is gone
            raise _conflict(name, f"Precondition failed: UID in precondition: {uid}, UID in object meta: "
                                  f"{meta.get('uid')}")
        if spec.get("nodeName"):
            raise _conflict(name, f'pod {name} is already assigned to node "{spec["nodeName"]}"')
        spec["nodeName"] = node
        if binding.metadata.annotations:
            meta.setdefault("annotations", {}).update(binding.metadata.annotations)
        status = pod.setdefault("status", {})
        conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
        conditions.append({"type": "PodScheduled", "status": "True", "lastProbeTime": None,
                           "lastTransitionTime": now_rfc3339()})
        status["conditions"] = [{k: v for k, v in c.items() if v is not None} for c in conditions]
        return pod
