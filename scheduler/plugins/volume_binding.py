"""VolumeBinding, cut to what minik8s needs (upstream pkg/scheduler/framework/plugins/volumebinding):

- Filter: every claim the pod uses exists and is not being deleted, and is bound, unless its class
  binds WaitForFirstConsumer (such a claim is provisioned for whichever node the pod lands on);
  upstream's messages, all UnschedulableAndUnresolvable until a claim changes.
- PreBind: the pod's unbound WaitForFirstConsumer claims get volume.kubernetes.io/selected-node (the
  node chosen), which tells the binder to bind or the provisioner to provision for that node.

Not here (yet): matching the node affinity of static volumes for delayed-binding claims, and
waiting in PreBind until the claims are bound (the kubelet waits for them instead).
"""

from __future__ import annotations

from collections.abc import Callable

from machinery.api.core_v1 import PersistentVolumeClaim
from machinery.api.storage_v1 import StorageClass
from machinery.volumeutil import ANN_SELECTED_NODE, BINDING_WAIT_FOR_FIRST_CONSUMER, claim_class, pod_claim_names
from scheduler.framework import SUCCESS, NodeInfo, PodInfo, Status

NAME = "VolumeBinding"
UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"

GetClaim = Callable[[str, str], PersistentVolumeClaim | None]  # (namespace, name)
GetClass = Callable[[str], StorageClass | None]


def claim_names(pod: PodInfo) -> list[str]:
    return pod_claim_names(pod.pod.to_dict())


def skip(pod: PodInfo) -> bool:
    """PreFilter: a pod with no claims has nothing to bind."""
    spec = pod.pod.spec
    return spec is None or not any(v.persistent_volume_claim is not None or v.ephemeral is not None
                                   for v in spec.volumes or ())


def delayed(claim: PersistentVolumeClaim, get_class: GetClass) -> bool:
    name = claim_class(claim.to_dict())
    found = get_class(name) if name else None
    return found is not None and found.volume_binding_mode == BINDING_WAIT_FOR_FIRST_CONSUMER


def check_claims(pod: PodInfo, get_claim: GetClaim, get_class: GetClass) -> Status:
    for name in claim_names(pod):
        claim = get_claim(pod.namespace, name)
        if claim is None:
            return Status.unschedulable(f'persistentvolumeclaim "{name}" not found', unresolvable=True)
        if claim.metadata.deletion_timestamp is not None:
            return Status.unschedulable(f'persistentvolumeclaim "{name}" is being deleted', unresolvable=True)
        if not (claim.spec and claim.spec.volume_name) and not delayed(claim, get_class):
            return Status.unschedulable(UNBOUND_IMMEDIATE, unresolvable=True)
    return SUCCESS


def volume_binding(get_claim: GetClaim, get_class: GetClass) -> Callable[[PodInfo, NodeInfo], Status]:
    def filter_(pod: PodInfo, node: NodeInfo) -> Status:
        return check_claims(pod, get_claim, get_class)
    return filter_


def claims_to_select_node(pod: PodInfo, get_claim: GetClaim, get_class: GetClass) -> list[PersistentVolumeClaim]:
    """PreBind's work: unbound delayed claims without a selected node yet."""
    out = []
    for name in claim_names(pod):
        claim = get_claim(pod.namespace, name)
        if claim is None or (claim.spec and claim.spec.volume_name) or not delayed(claim, get_class):
            continue
        if ANN_SELECTED_NODE not in (claim.metadata.annotations or {}):
            out.append(claim)
    return out
