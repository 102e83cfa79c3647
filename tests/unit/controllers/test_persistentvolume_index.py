"""Which volume a claim gets (controllers/volume/persistentvolume/index.py, upstream's
findMatchingVolume and checkVolumeSatisfyClaim)."""

from __future__ import annotations

from typing import Any

import pytest

from controllers.volume.persistentvolume.index import find_best_match, satisfies_claim
from machinery.types import Obj


def volume(name: str, size: str, cls: str = "std", modes: tuple[str, ...] = ("ReadWriteOnce",),
           phase: str = "Available", **spec: Any) -> Obj:
    return {"metadata": {"name": name, "labels": spec.pop("labels", {})}, "status": {"phase": phase},
            "spec": {"capacity": {"storage": size}, "accessModes": list(modes), "storageClassName": cls, **spec}}


def claim(size: str = "1Gi", cls: str = "std", modes: tuple[str, ...] = ("ReadWriteOnce",), **spec: Any) -> Obj:
    return {"metadata": {"name": "c", "namespace": "ns", "uid": "u1"},
            "spec": {"accessModes": list(modes), "resources": {"requests": {"storage": size}}, "storageClassName": cls,
                     **spec}}


def names(found: Obj | None) -> str | None:
    return found["metadata"]["name"] if found else None


def test_smallest_that_fits() -> None:
    vols = [volume("5g", "5Gi"), volume("2g", "2Gi"), volume("1500m", "1500Mi"), volume("512m", "512Mi")]
    assert names(find_best_match(claim(), vols, False)) == "1500m"


@pytest.mark.parametrize(("vol", "why"), [
    (volume("rox", "1Gi", modes=("ReadOnlyMany",)), "incompatible accessMode"),
    (volume("gold", "1Gi", cls="gold"), "storageClassName does not match"),
    (volume("block", "1Gi", volumeMode="Block"), "incompatible volumeMode"),
    (volume("small", "1Mi"), "requested PV is too small"),
])
def test_mismatches_are_skipped(vol: Obj, why: str) -> None:
    assert find_best_match(claim(), [vol], False) is None
    assert satisfies_claim(vol, claim()) == why


def test_phase_claim_ref_selector_and_deletion() -> None:
    assert find_best_match(claim(), [volume("released", "1Gi", phase="Released")], False) is None
    other = volume("other", "1Gi", claimRef={"namespace": "ns", "name": "someone"})
    assert find_best_match(claim(), [other], False) is None
    labelled = [volume("fast", "3Gi", labels={"tier": "fast"}), volume("slow", "1Gi", labels={"tier": "slow"})]
    assert names(find_best_match(claim(selector={"matchLabels": {"tier": "fast"}}), labelled, False)) == "fast"
    gone = volume("gone", "1Gi")
    gone["metadata"]["deletionTimestamp"] = "2026-11-24T00:00:00Z"
    assert find_best_match(claim(), [gone], False) is None


def test_pre_bound_volume_wins_and_survives_delay() -> None:
    mine = volume("mine", "9Gi", phase="Pending", claimRef={"namespace": "ns", "name": "c"})
    vols = [volume("small", "1Gi"), mine]
    assert names(find_best_match(claim(), vols, False)) == "mine"
    assert names(find_best_match(claim(), vols, True)) == "mine"  # WaitForFirstConsumer: only the pre-bound one
    assert find_best_match(claim(), [volume("small", "1Gi")], True) is None
    stale = volume("stale", "1Gi", claimRef={"namespace": "ns", "name": "c", "uid": "old"})
    assert find_best_match(claim(), [stale], False) is None  # bound to an earlier claim of the same name


def test_node_affinity_with_the_selected_node() -> None:
    def pinned(name: str, size: str, node: str) -> Obj:
        return volume(name, size, nodeAffinity={"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}})

    vols = [pinned("on-b", "1Gi", "b"), pinned("on-a", "2Gi", "a"), volume("anywhere", "3Gi")]
    assert names(find_best_match(claim(), vols, False, ({"kubernetes.io/hostname": "a"}, "a"))) == "on-a"
    assert names(find_best_match(claim(), vols, False, ({"kubernetes.io/hostname": "c"}, "c"))) == "anywhere"
    assert names(find_best_match(claim(), vols, False)) == "on-b"  # no node chosen: affinity is not asked
    mine = pinned("mine", "1Gi", "b")
    mine["spec"]["claimRef"] = {"namespace": "ns", "name": "c"}
    assert find_best_match(claim(), [mine], False, ({"kubernetes.io/hostname": "a"}, "a")) is None


def test_registered_under_upstream_names_and_accounts() -> None:
    from controllers.manager import CONTROLLERS, enabled_controllers, parse_args

    assert CONTROLLERS["persistentvolume-binder"].service_account == "persistent-volume-binder"
    assert CONTROLLERS["pvc-protection"].service_account == "pvc-protection-controller"
    assert CONTROLLERS["pv-protection"].service_account == "pv-protection-controller"
    assert {"persistentvolume-binder", "pvc-protection", "pv-protection"} <= set(enabled_controllers(["*"]))
    assert enabled_controllers(["persistentvolume-binder-controller"]) == ["persistentvolume-binder"]
    assert parse_args(["--pvclaimbinder-sync-period", "30s"]).pvclaimbinder_sync_period == 30.0
