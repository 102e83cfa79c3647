"""Which volume a claim gets (upstream pkg/controller/volume/persistentvolume/index.go and
component-helpers/storage/volume/pv_helpers.go FindMatchingVolume, CheckVolumeModeMismatches).

The smallest Available volume of the claim's class whose access modes include all the claim's,
whose capacity covers the request, whose labels match the claim's selector and whose volumeMode is
the claim's; a volume pre-bound to the claim (claimRef naming it) wins over all of them.
"""

from __future__ import annotations

from collections.abc import Mapping

from machinery.api.core_v1 import NodeSelector
from machinery.nodeaffinity import node_selector_matches
from machinery.quantity import Quantity, parse_quantity
from machinery.selectors import selector_from_label_selector
from machinery.types import Obj
from machinery.volumeutil import claim_class, volume_class

ZERO = parse_quantity("0")


def storage_of(resources: Obj | None) -> Quantity:
    value = (resources or {}).get("storage")
    try:
        return parse_quantity(value) if value is not None else ZERO
    except (ValueError, TypeError):
        return ZERO


def claim_request(claim: Obj) -> Quantity:
    return storage_of(((claim.get("spec") or {}).get("resources") or {}).get("requests"))


def volume_capacity(volume: Obj) -> Quantity:
    return storage_of((volume.get("spec") or {}).get("capacity"))


def is_volume_bound_to_claim(volume: Obj, claim: Obj) -> bool:
    """IsVolumeBoundToClaim: claimRef names the claim, and its uid (when set) is the claim's."""
    ref = (volume.get("spec") or {}).get("claimRef")
    meta = claim.get("metadata") or {}
    if not ref or ref.get("name") != meta.get("name") or ref.get("namespace") != meta.get("namespace"):
        return False
    return not ref.get("uid") or ref.get("uid") == meta.get("uid")


def _volume_mode(spec: Obj) -> str:
    return spec.get("volumeMode") or "Filesystem"


def volume_mode_mismatch(claim: Obj, volume: Obj) -> bool:
    return _volume_mode(claim.get("spec") or {}) != _volume_mode(volume.get("spec") or {})


def access_modes_contained(volume_modes: list[str] | None, claim_modes: list[str] | None) -> bool:
    return set(claim_modes or []) <= set(volume_modes or [])


def satisfies_claim(volume: Obj, claim: Obj) -> str:
    """checkVolumeSatisfyClaim: "" when the volume can serve the claim, else why not (upstream's words)."""
    if claim_request(claim) > volume_capacity(volume):
        return "requested PV is too small"
    if claim_class(claim) != volume_class(volume):
        return "storageClassName does not match"
    if volume_mode_mismatch(claim, volume):
        return "incompatible volumeMode"
    if not access_modes_contained((volume.get("spec") or {}).get("accessModes"),
                                  (claim.get("spec") or {}).get("accessModes")):
        return "incompatible accessMode"
    return ""


def volume_allows_node(volume: Obj, labels: Mapping[str, str], node_name: str) -> bool:
    """CheckNodeAffinity: no required node affinity, or one the node satisfies."""
    required = ((volume.get("spec") or {}).get("nodeAffinity") or {}).get("required")
    return required is None or node_selector_matches(NodeSelector.from_dict(required), labels, node_name)


def find_best_match(claim: Obj, volumes: list[Obj], delay_binding: bool,
                    node: tuple[Mapping[str, str], str] | None = None) -> Obj | None:
    """findMatchingVolume: with delayBinding (and no node chosen) only a pre-bound volume matches; with
    the scheduler's node (labels, name), only volumes whose node affinity allows it."""
    spec = claim.get("spec") or {}
    requested = claim_request(claim)
    requested_class = claim_class(claim)
    selector = selector_from_label_selector(spec["selector"]) if spec.get("selector") else None
    smallest: Obj | None = None
    for volume in volumes:
        vspec = volume.get("spec") or {}
        if not access_modes_contained(vspec.get("accessModes"), spec.get("accessModes")):
            continue
        if volume_mode_mismatch(claim, volume) or (volume.get("metadata") or {}).get("deletionTimestamp"):
            continue
        allowed = node is None or volume_allows_node(volume, *node)
        if is_volume_bound_to_claim(volume, claim):
            return volume if allowed else None
        if delay_binding:
            continue
        if (volume.get("status") or {}).get("phase") != "Available" or vspec.get("claimRef"):
            continue
        if selector is not None and not selector.matches((volume.get("metadata") or {}).get("labels") or {}):
            continue
        if volume_class(volume) != requested_class or not allowed:
            continue
        capacity = volume_capacity(volume)
        if capacity >= requested and (smallest is None or volume_capacity(smallest) > capacity):
            smallest = volume
    return smallest
