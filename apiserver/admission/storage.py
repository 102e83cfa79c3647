"""The storage admission plugins (upstream plugin/pkg/admission/storage/):

  DefaultStorageClass           a new claim that names no class (no storageClassName at all, not
                                even "") gets the default StorageClass (storageclass/setdefault)
  StorageObjectInUseProtection  new volumes and claims carry kubernetes.io/pv-protection and
                                kubernetes.io/pvc-protection, removed by the protection controllers
                                once nothing uses them (storageobjectinuseprotection)
  PersistentVolumeClaimResize   a claim grows only when bound and its class allows expansion
                                (persistentvolume/resize)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from apiserver import errors
from apiserver.admission.interfaces import AdmissionAttributes
from machinery.quantity import parse_quantity
from machinery.types import Obj
from machinery.volumeutil import (
    BETA_STORAGE_CLASS_ANNOTATION,
    PV_PROTECTION_FINALIZER,
    PVC_PROTECTION_FINALIZER,
    claim_class,
    default_class,
)

# every StorageClass, read consistently (a class created a moment ago counts)
StorageClasses = Callable[[], Awaitable[list[Obj]]]


def _is(a: AdmissionAttributes, plural: str) -> bool:
    return a.store.info.group == "" and a.store.info.plural == plural and not a.subresource


async def set_default_storage_class(a: AdmissionAttributes, classes: StorageClasses) -> None:
    """setdefault.Admit: only on CREATE, only when the claim says nothing about its class."""
    if a.operation != "CREATE" or not _is(a, "persistentvolumeclaims") or a.obj is None:
        return
    spec = a.obj.setdefault("spec", {})
    annotations = (a.obj.get("metadata") or {}).get("annotations") or {}
    if spec.get("storageClassName") is not None or BETA_STORAGE_CLASS_ANNOTATION in annotations:
        return
    chosen = default_class(await classes())
    if chosen is not None:
        spec["storageClassName"] = chosen["metadata"]["name"]


def add_protection_finalizer(a: AdmissionAttributes) -> None:
    """storageobjectinuseprotection.Admit: on CREATE, once."""
    if a.operation != "CREATE" or a.obj is None:
        return
    if _is(a, "persistentvolumes"):
        finalizer = PV_PROTECTION_FINALIZER
    elif _is(a, "persistentvolumeclaims"):
        finalizer = PVC_PROTECTION_FINALIZER
    else:
        return
    finalizers = a.obj.setdefault("metadata", {}).setdefault("finalizers", [])
    if finalizer not in finalizers:
        finalizers.append(finalizer)


def _storage(claim: Obj) -> object:
    return (((claim.get("spec") or {}).get("resources") or {}).get("requests") or {}).get("storage")


async def validate_claim_resize(a: AdmissionAttributes, classes: StorageClasses) -> None:
    """resize.Validate: growing needs a bound claim whose class has allowVolumeExpansion."""
    if a.operation != "UPDATE" or not _is(a, "persistentvolumeclaims") or a.obj is None or a.old is None:
        return
    try:
        old_size, new_size = parse_quantity(_storage(a.old)), parse_quantity(_storage(a.obj))
    except (ValueError, TypeError):
        return  # validation has said so already
    if not new_size > old_size:
        return
    if (a.old.get("status") or {}).get("phase") != "Bound":
        raise errors.forbidden(a.store.info, a.name, "Only bound persistent volume claims can be expanded")
    name = claim_class(a.old)
    chosen = next((c for c in await classes() if c["metadata"]["name"] == name), None) if name else None
    if chosen is None or not chosen.get("allowVolumeExpansion"):
        raise errors.forbidden(a.store.info, a.name, "only dynamically provisioned pvc can be resized and the "
                                                     "storageclass that provisions the pvc must support resize")
