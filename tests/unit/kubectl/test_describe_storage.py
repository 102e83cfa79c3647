"""mkubectl describe pv / pvc / sc, as upstream's PersistentVolumeDescriber,
PersistentVolumeClaimDescriber and StorageClassDescriber lay them out."""

from __future__ import annotations

from kubectl.describe import (
    persistent_volume_claim_description,
    persistent_volume_description,
    storage_class_description,
)


def lines(text: str) -> list[str]:
    return [" ".join(line.split()) for line in text.splitlines()]


def test_describe_persistent_volume() -> None:
    pv = {"metadata": {"name": "v", "finalizers": ["kubernetes.io/pv-protection"]},
          "spec": {"capacity": {"storage": "1024Mi"}, "accessModes": ["ReadWriteOnce", "ReadOnlyMany"],
                   "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "std",
                   "claimRef": {"namespace": "ns", "name": "c"}, "volumeMode": "Filesystem",
                   "hostPath": {"path": "/data", "type": "DirectoryOrCreate"}},
          "status": {"phase": "Bound"}}
    assert lines(persistent_volume_description(pv, [])) == [
        "Name: v", "Labels: <none>", "Annotations: <none>", "Finalizers: [kubernetes.io/pv-protection]",
        "StorageClass: std", "Status: Bound", "Claim: ns/c", "Reclaim Policy: Retain", "Access Modes: RWO,ROX",
        "VolumeMode: Filesystem", "Capacity: 1Gi", "Node Affinity: <none>", "Message:", "Source:",
        "Type: HostPath (bare host directory volume)", "Path: /data", "HostPathType: DirectoryOrCreate",
        "Events: <none>"]


def test_describe_claim_pending_and_terminating() -> None:
    pvc = {"metadata": {"name": "c", "namespace": "ns", "deletionTimestamp": "2020-01-01T00:00:00Z"},
           "spec": {"storageClassName": "std", "resources": {"requests": {"storage": "1Gi"}}},
           "status": {"phase": "Pending"}}
    out = lines(persistent_volume_claim_description(pvc, [{"metadata": {"name": "web"}}], None))
    assert out[3].startswith("Status: Terminating (lasts ")
    assert out[4:] == ["Volume:", "Labels: <none>", "Annotations: <none>", "Finalizers: []", "Capacity:",
                       "Access Modes:", "Used By: web"]


def test_describe_storage_class() -> None:
    sc = {"metadata": {"name": "std", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
          "provisioner": "rancher.io/local-path", "parameters": {"a": "b"}, "allowVolumeExpansion": True,
          "reclaimPolicy": "Delete", "volumeBindingMode": "WaitForFirstConsumer"}
    assert lines(storage_class_description(sc, None)) == [
        "Name: std", "IsDefaultClass: Yes", "Annotations: storageclass.kubernetes.io/is-default-class=true",
        "Provisioner: rancher.io/local-path", "Parameters: a=b", "AllowVolumeExpansion: True",
        "MountOptions: <none>", "ReclaimPolicy: Delete", "VolumeBindingMode: WaitForFirstConsumer"]
