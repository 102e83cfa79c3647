"""What the apiserver, the controllers and the scheduler share about volumes and claims (upstream
k8s.io/component-helpers/storage/volume/helpers.go and pv_helpers.go, pkg/apis/storage/util): the
class of a claim or volume, the default class, access modes, and the well-known annotations."""

from __future__ import annotations

from machinery.types import Obj

BETA_STORAGE_CLASS_ANNOTATION = "volume.beta.kubernetes.io/storage-class"
IS_DEFAULT_STORAGE_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"
BETA_IS_DEFAULT_STORAGE_CLASS_ANNOTATION = "storageclass.beta.kubernetes.io/is-default-class"
# the binder's annotations (pkg/controller/volume/persistentvolume/util)
ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
ANN_STORAGE_PROVISIONER = "volume.kubernetes.io/storage-provisioner"
ANN_BETA_STORAGE_PROVISIONER = "volume.beta.kubernetes.io/storage-provisioner"
ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node"
ANN_DYNAMICALLY_PROVISIONED = "pv.kubernetes.io/provisioned-by"
# the protection finalizers (StorageObjectInUseProtection admission, the two protection controllers)
PVC_PROTECTION_FINALIZER = "kubernetes.io/pvc-protection"
PV_PROTECTION_FINALIZER = "kubernetes.io/pv-protection"

ACCESS_MODES = ("ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod")
VOLUME_MODES = ("Block", "Filesystem")
BINDING_IMMEDIATE = "Immediate"
BINDING_WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"


def _annotations(obj: Obj) -> dict[str, str]:
    return (obj.get("metadata") or {}).get("annotations") or {}


def claim_class(claim: Obj) -> str:
    """GetPersistentVolumeClaimClass: the beta annotation first, then spec.storageClassName; "" none."""
    beta = _annotations(claim).get(BETA_STORAGE_CLASS_ANNOTATION)
    if beta is not None:
        return beta
    return (claim.get("spec") or {}).get("storageClassName") or ""


def volume_class(volume: Obj) -> str:
    """GetPersistentVolumeClass."""
    beta = _annotations(volume).get(BETA_STORAGE_CLASS_ANNOTATION)
    if beta is not None:
        return beta
    return (volume.get("spec") or {}).get("storageClassName") or ""


def is_default_class(storage_class: Obj) -> bool:
    """IsDefaultAnnotation: the GA or the beta annotation set to "true"."""
    ann = _annotations(storage_class)
    return ann.get(IS_DEFAULT_STORAGE_CLASS_ANNOTATION) == "true" \
        or ann.get(BETA_IS_DEFAULT_STORAGE_CLASS_ANNOTATION) == "true"


def default_class(classes: list[Obj]) -> Obj | None:
    """GetDefaultClass: of several defaults, the newest (then by name), as upstream since 1.26."""
    defaults = [c for c in classes if is_default_class(c)]
    if not defaults:
        return None
    return max(defaults, key=lambda c: ((c.get("metadata") or {}).get("creationTimestamp") or "",
                                        (c.get("metadata") or {}).get("name") or ""))


def binding_mode(storage_class: Obj | None) -> str:
    return (storage_class or {}).get("volumeBindingMode") or BINDING_IMMEDIATE


def access_modes_short(modes: list[str] | None) -> str:
    """GetAccessModesAsString: RWO,ROX,RWX,RWOP in that order, each once (kubectl's column)."""
    wanted = set(modes or [])
    short = [("ReadWriteOnce", "RWO"), ("ReadOnlyMany", "ROX"), ("ReadWriteMany", "RWX"), ("ReadWriteOncePod", "RWOP")]
    return ",".join(s for mode, s in short if mode in wanted)


def pod_claim_names(pod: Obj) -> list[str]:
    """The claims a pod uses through its volumes (persistentVolumeClaim and generic ephemeral)."""
    spec = pod.get("spec") or {}
    name = (pod.get("metadata") or {}).get("name") or ""
    out = []
    for volume in spec.get("volumes") or []:
        if volume.get("persistentVolumeClaim") is not None:
            out.append(volume["persistentVolumeClaim"].get("claimName") or "")
        elif volume.get("ephemeral") is not None:
            out.append(f"{name}-{volume.get('name')}")  # ephemeral.VolumeClaimName
    return [c for c in out if c]
