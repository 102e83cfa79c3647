"""The pod's own storage beside the generic Store (upstream pkg/registry/core/pod/storage/storage.go):
BindingREST, the scheduler's way to set a pod's node. As upstream's setPodHostAndAnnotations, it writes
through the raw storage with compare-and-swap, not through the Store's update path: spec.nodeName is
immutable to every update, and a binding is the one write that may set it, so the Store need not know
the word "binding". What the pod store always enforces still holds: admission sees the write (as the
pod, operation CREATE of pods/binding; apiserver/admission/chain.py) and the bound pod must be a valid pod
(a node name is an RFC 1123 subdomain).
"""

from __future__ import annotations

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
        """Upstream's GuaranteedUpdate with the watch cache's copy of the pod as its first state (the cacher's
        cachedExistingObject): a binding is one etcd transaction, not a read and a transaction. A stale copy
        fails the compare-and-swap, whose answer carries the stored pod, or fails a check (already bound,
        another uid), and then the pod is read from etcd and the binding tried on what is stored; only a
        verdict on the stored pod is the answer (origStateIsCurrent)."""
        node = validate_binding(name, binding)
        pods = self.pods
        key = pods.key(namespace, name)
        cached = pods.cached(namespace, name) if pods.cacher.enabled else None
        # (the pod's JSON, its mod revision, whether that is what etcd holds as far as we know)
        state: tuple[bytes, int, bool] | None = (cached.raw, cached.rv, False) if cached is not None else None
        for _ in range(_MAX_CAS_RETRIES):
            if state is None:
                kv = await pods.storage.get(key)
                if kv is None:
                    raise errors.not_found(pods.info, name)
                state = (kv.value, kv.mod_revision, True)
            value, revision, current = state
            old = codec.decode(value, revision)
            try:
                new = await self._bound(namespace, name, binding, node, old, codec.decode(value, revision), opts)
            except errors.ApiError:
                if current:
                    raise
                state = None  # a verdict on a stale copy: try again on the stored pod
                continue
            if opts.dry_run:
                return
            try:
                await pods.storage.update(key, codec.encode(new), revision)
            except RevisionConflict as e:
                state = (e.current.value, e.current.mod_revision, True) if e.current is not None else None
                continue
            except KeyNotFound:
                raise errors.not_found(pods.info, name) from None
            return
        raise errors.conflict(pods.info, name, "too many concurrent writers; try again")

    async def _bound(self, namespace: str | None, name: str, binding: Binding, node: str, old: Obj, pod: Obj,
                     opts: WriteOptions) -> Obj:
        """`pod` (a copy of `old`) bound to `node`, through admission and validation."""
        pods = self.pods
        new = self._assign(pod, name, binding, node)
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
        return new

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
