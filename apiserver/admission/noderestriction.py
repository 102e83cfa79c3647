"""The NodeRestriction admission plugin (upstream: plugin/pkg/admission/noderestriction/admission.go;
the kubelet's labels, pkg/kubelet/apis/well_known_labels.go, are in machinery/nodelabels.py). The
Node authorizer saw only names; this looks at the objects a kubelet (system:node:NAME) writes:

- nodes: only its own; it may set only the `kubernetes.io` / `k8s.io` labels a kubelet owns
  (kubernetes.io/hostname, os, arch, topology, instance type, and anything under
  kubelet.kubernetes.io/ and node.kubernetes.io/), never a `node-restriction.kubernetes.io/` or
  `node-role.kubernetes.io/` one, on create or update; taints it may set when it registers, not
  change after; nor may it point its Node at a config source;
- pods: only the status (and the final delete) of pods bound to it, and evictions of those;
  minik8s has no mirror pods;
- leases in kube-node-lease: only its own;
- serviceaccounts/token: only tokens bound to a pod (with its uid) scheduled on it (admit_token_request,
  called by the token endpoint, which the generic store's admission does not see).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from apiserver import errors
from apiserver.admission.interfaces import AdmissionAttributes
from machinery.api.resources import ResourceInfo
from machinery.nodelabels import in_namespace, is_kubelet_label, is_kubernetes_label, label_namespace
from machinery.types import Obj

NODE_RESTRICTION_NAMESPACE = "node-restriction.kubernetes.io"


def modified_labels(new: dict[str, str], old: dict[str, str]) -> set[str]:
    return {k for k in new.keys() | old.keys() if new.get(k) != old.get(k) or (k in new) != (k in old)}


def forbidden_labels(modified: set[str]) -> list[str]:
    """The labels among modified a node may not set (sorted, as upstream's sets.String.List)."""
    return sorted(k for k in modified
                  if in_namespace(label_namespace(k), NODE_RESTRICTION_NAMESPACE)
                  or (is_kubernetes_label(k) and not is_kubelet_label(k)))


def _labels(obj: Obj | None) -> dict[str, str]:
    return ((obj or {}).get("metadata") or {}).get("labels") or {}


def _spec(obj: Obj | None) -> Obj:
    return (obj or {}).get("spec") or {}


def admit_node(a: AdmissionAttributes, node: str) -> None:
    info, name = a.store.info, a.name
    if name != node:
        raise errors.forbidden(info, name, f'node "{node}" is not allowed to modify node "{name}"')
    if a.operation == "CREATE":
        if _spec(a.obj).get("configSource") is not None:
            raise errors.forbidden(info, name, f'node "{node}" is not allowed to create pods with a non-nil '
                                   "configSource")
        bad = forbidden_labels(set(_labels(a.obj)))
        if bad:
            raise errors.forbidden(info, name, f'node "{node}" is not allowed to set the following labels: '
                                   f"{', '.join(bad)}")
    elif a.operation == "UPDATE":
        new_spec, old_spec = _spec(a.obj), _spec(a.old)
        if new_spec.get("configSource") is not None and new_spec.get("configSource") != old_spec.get("configSource"):
            raise errors.forbidden(info, name, f'node "{node}" is not allowed to update configSource to reference '
                                   "a config map")
        # an absent list and an empty one are the same taints (upstream's Semantic.DeepEqual of a nil slice)
        if (new_spec.get("taints") or []) != (old_spec.get("taints") or []):
            raise errors.forbidden(info, name, f'node "{node}" is not allowed to modify taints')
        bad = forbidden_labels(modified_labels(_labels(a.obj), _labels(a.old)))
        if bad:
            raise errors.forbidden(info, name, f"is not allowed to modify labels: {', '.join(bad)}")


def node_restriction(a: AdmissionAttributes, node: str) -> None:
    """Upstream's NodeRestriction plugin for a write by the kubelet of `node`."""
    info = a.store.info
    name = a.name
    if info.group == "" and info.plural == "nodes":
        admit_node(a, node)
    elif info.group == "" and info.plural == "pods":
        if a.operation == "CREATE" and a.subresource == "eviction":
            # admitPodEviction: a.old is the pod to evict
            if ((a.old or {}).get("spec") or {}).get("nodeName") != node:
                raise errors.forbidden(info, name, f'node "{node}" can only evict pods with spec.nodeName set to '
                                       "itself")
            return
        if a.operation == "CREATE" and not a.subresource:
            raise errors.forbidden(info, name, f'node "{node}" can only create mirror pods, and minik8s has none')
        bound = ((a.old or {}).get("spec") or {}).get("nodeName")
        if bound != node:
            raise errors.forbidden(info, name, f'node "{node}" can only update pod status and delete pods '
                                   f"with spec.nodeName set to itself")
        if a.operation == "UPDATE" and a.subresource != "status":
            raise errors.forbidden(info, name, f'node "{node}" can only update pod status')
    elif info.group == "coordination.k8s.io" and info.plural == "leases" and a.namespace == "kube-node-lease" \
            and name != node:
        raise errors.forbidden(info, name, "can only access node lease with the same name as the requesting node")


async def admit_token_request(info: ResourceInfo, account: str, body: Obj,
                              get_pod: Callable[[str], Awaitable[Obj]], node: str) -> None:
    """upstream admitServiceAccount: a TokenRequest from a node is bound to a pod scheduled on that node.
    `get_pod(name)` reads the bound pod as stored (a missing one raises NotFound, as upstream answers)."""
    ref = ((body.get("spec") or {}).get("boundObjectRef")) or {}
    if not ref or ref.get("apiVersion") != "v1" or ref.get("kind") != "Pod" or not ref.get("name"):
        raise errors.forbidden(info, account, "node requested token not bound to a pod")
    if not ref.get("uid"):
        raise errors.forbidden(info, account, "node requested token with a pod binding without a uid")
    pod = await get_pod(ref["name"])
    if ref["uid"] != (pod.get("metadata") or {}).get("uid"):
        raise errors.forbidden(info, account, f"the UID in the bound object reference ({ref['uid']}) does not "
                               "match the UID in record. The object might have been deleted and then recreated")
    if (pod.get("spec") or {}).get("nodeName") != node:
        raise errors.forbidden(info, account, "node requested token bound to a pod scheduled on a different node")
