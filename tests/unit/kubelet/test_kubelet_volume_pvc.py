"""The kubelet's claim volumes without a server: a bound claim resolves to its volume's path, and a claim that
cannot mount yet says so in upstream's words, for every such volume of the pod."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

import pytest

from kubelet import volume_pvc
from kubelet.volume_pvc import ClaimsNotReady, ClaimState, resolve
from machinery.api.core_v1 import Pod
from machinery.api.meta import Status
from machinery.client import ApiError


def pod(*claims: tuple[str, str, bool]) -> Pod:
    return Pod.from_dict({"metadata": {"name": "p", "namespace": "ns"}, "spec": {
        "containers": [{"name": "c", "image": "i"}],
        "volumes": [{"name": v, "persistentVolumeClaim": {"claimName": c, "readOnly": ro}} for v, c, ro in claims]}})


def bound(name: str, uid: str, source: dict[str, object]) -> ClaimState:
    claim = {"metadata": {"name": name, "uid": uid}, "spec": {"volumeName": f"pv-{name}"},
             "status": {"phase": "Bound"}}
    volume = {"metadata": {"name": f"pv-{name}"}, "spec": {"claimRef": {"uid": uid}, **source}}
    return ClaimState(claim, volume)


def test_bound_claims_resolve_to_their_volume_paths() -> None:
    states = {"a": bound("a", "u1", {"hostPath": {"path": "/h", "type": "DirectoryOrCreate"}}),
              "b": bound("b", "u2", {"local": {"path": "/l"}})}
    out = resolve(pod(("data", "a", False), ("logs", "b", True)), states)
    assert out["data"] == volume_pvc.ClaimSource("/h", "DirectoryOrCreate", False)
    assert out["logs"] == volume_pvc.ClaimSource("/l", None, True)


def test_unready_claims_are_named_in_upstream_s_message() -> None:
    states = {"a": ClaimState(error='error processing PVC ns/a: PVC ns/a has non-bound phase ("Pending") or empty '
                                    'pvc.Spec.VolumeName ("")'),
              "b": bound("b", "u2", {"hostPath": {"path": "/h"}})}
    with pytest.raises(ClaimsNotReady) as e:
        resolve(pod(("data", "a", False), ("ok", "b", False)), states)
    assert str(e.value) == ('unmounted volumes=[data], unattached volumes=[], failed to process volumes=[data]: '
                            'error processing PVC ns/a: PVC ns/a has non-bound phase ("Pending") or empty '
                            'pvc.Spec.VolumeName ("")')
    assert e.value.volumes == ["data"]


def test_a_volume_with_no_mountable_source_is_refused() -> None:
    with pytest.raises(ClaimsNotReady, match=r"has no source minik8s can mount \(hostPath or local\): nfs"):
        resolve(pod(("data", "a", False)), {"a": bound("a", "u", {"nfs": {"server": "x", "path": "/"}})})


def test_local_path_must_exist(tmp_path: Path) -> None:
    assert volume_pvc.local_path("v", str(tmp_path)) == tmp_path
    with pytest.raises(ClaimsNotReady, match='path "/nonexistent/x" does not exist'):
        volume_pvc.local_path("v", "/nonexistent/x")


def test_polled_every_300ms_then_slower_and_reported_after_10s_then_per_timeout() -> None:
    assert volume_pvc.retry_after(1) == 0.3 and volume_pvc.retry_after(volume_pvc.FAST_TRIES) == 0.3
    assert volume_pvc.retry_after(volume_pvc.FAST_TRIES + 1) == 5.0
    reported = [round(volume_pvc.waited(n), 1) for n in range(1, 2000) if volume_pvc.report_now(n)]
    assert reported[0] == 10.2  # the first try past 10 s of waiting: none for a claim bound within seconds
    assert len(reported) >= 3
    gaps = [b - a for a, b in itertools.pairwise(reported)]
    assert all(123 - 5 <= gap <= 123 + 5 for gap in gaps), reported  # the mount timeout, to a slow try


class FakeClient:
    """get_raw over a dict of (kind, namespace, name) → object; a miss is the apiserver's 404."""

    def __init__(self, objects: dict[tuple[str, str | None, str], dict[str, object]]) -> None:
        self.objects = objects

    async def get_raw(self, model: type, name: str, namespace: str | None = None) -> dict[str, object]:
        found = self.objects.get((model.__name__, namespace, name))
        if found is None:
            resource = "persistentvolumeclaims" if model.__name__ == "PersistentVolumeClaim" else "persistentvolumes"
            raise ApiError(Status(reason="NotFound", code=404, message=f'{resource} "{name}" not found'), 404)
        return found


def fetch(objects: dict[tuple[str, str | None, str], dict[str, object]], claim: str = "c") -> ClaimState:
    states = asyncio.run(volume_pvc.fetch(FakeClient(objects), pod(("data", claim, False))))  # type: ignore[arg-type]
    return states[claim]


def test_what_the_kubelet_reads_and_says_for_each_claim_state() -> None:
    assert fetch({}).error == ('error processing PVC ns/c: failed to fetch PVC from API server: '
                               'persistentvolumeclaims "c" not found')
    claim = {"metadata": {"name": "c", "uid": "u1"}, "spec": {"volumeName": "v"}, "status": {"phase": "Bound"}}
    assert fetch({("PersistentVolumeClaim", "ns", "c"): claim}).error == (
        'error processing PVC ns/c: failed to fetch PV v from API server: persistentvolumes "v" not found')
    deleting = {**claim, "metadata": {"name": "c", "uid": "u1", "deletionTimestamp": "2026-01-01T00:00:00Z"}}
    assert fetch({("PersistentVolumeClaim", "ns", "c"): deleting}).error == (
        "error processing PVC ns/c: can't start pod because PVC ns/c is being deleted")
    other = {"metadata": {"name": "v"}, "spec": {"claimRef": {"uid": "u2"}, "hostPath": {"path": "/h"}}}
    assert fetch({("PersistentVolumeClaim", "ns", "c"): claim, ("PersistentVolume", None, "v"): other}).error == (
        "error processing PVC ns/c: found PV object v but its pv.Spec.ClaimRef.UID (u2) does not point to "
        "claim.UID (u1)")
    mine = {"metadata": {"name": "v"}, "spec": {"claimRef": {"uid": "u1"}, "hostPath": {"path": "/h"}}}
    state = fetch({("PersistentVolumeClaim", "ns", "c"): claim, ("PersistentVolume", None, "v"): mine})
    assert state.error == "" and state.volume == mine
