"""VolumeBinding, cut to what minik8s needs (upstream pkg/scheduler/framework/plugins/volumebinding):

- Filter: every claim the pod uses exists and is not being deleted, and is bound, unless its class
  binds WaitForFirstConsumer (such a claim is provisioned for whichever node the pod lands on);
  upstream's messages, all UnschedulableAndUnresolvable until a claim changes.
- Filter, per node: a bound claim's PersistentVolume must allow the node (its spec.nodeAffinity, as a
  local volume's names its node): "node(s) had volume node affinity conflict".
- PreBind: the pod's unbound WaitForFirstConsumer claims get volume.kubernetes.io/selected-node (the
  node chosen), which tells the binder to bind or the provisioner to provision for that node.

Not here (yet): finding static volumes per node for delayed-binding claims (the binder matches
them once selected-node is set), and waiting in PreBind until the claims are bound (the kubelet
waits for them instead).
"""

from __future__ import annotations

from collections.abc import Callable

from machinery.api.core_v1 import PersistentVolume, PersistentVolumeClaim
from machinery.api.storage_v1 import StorageClass
from machinery.nodeaffinity import node_selector_matches
from machinery.volumeutil import ANN_SELECTED_NODE, BINDING_WAIT_FOR_FIRST_CONSUMER, claim_class, pod_claim_names
from scheduler.framework import SUCCESS, NodeInfo, PodInfo, Status

NAME = "VolumeBinding"
UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
NODE_CONFLICT = "node(s) had volume node affinity conflict"

GetClaim = Callable[[str, str], PersistentVolumeClaim | None]  # (namespace, name)
GetClass = Callable[[str], StorageClass | None]
GetVolume = Callable[[str], PersistentVolume | None]


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


def volume_allows(volume: PersistentVolume, node: NodeInfo) -> bool:
    """CheckNodeAffinity: a volume without required node affinity is reachable from every node."""
    affinity = volume.spec.node_affinity if volume.spec else None
    if affinity is None or affinity.required is None:
        return True
    return node_selector_matches(affinity.required, node.labels, node.name)


def check_bound_volumes(pod: PodInfo, node: NodeInfo, get_claim: GetClaim, get_volume: GetVolume) -> Status:
    for name in claim_names(pod):
        claim = get_claim(pod.namespace, name)
        volume_name = claim.spec.volume_name if claim is not None and claim.spec else None
        volume = get_volume(volume_name) if volume_name else None
        if volume is not None and not volume_allows(volume, node):
            return Status.unschedulable(NODE_CONFLICT, unresolvable=True)
    return SUCCESS


def volume_binding(get_claim: GetClaim, get_class: GetClass,
                   get_volume: GetVolume) -> Callable[[PodInfo, NodeInfo], Status]:
    def filter_(pod: PodInfo, node: NodeInfo) -> Status:
        status = check_claims(pod, get_claim, get_class)
        return status if not status.is_success else check_bound_volumes(pod, node, get_claim, get_volume)
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
