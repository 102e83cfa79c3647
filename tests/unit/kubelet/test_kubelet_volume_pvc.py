"""The kubelet's claim volumes without a server: a bound claim resolves to its volume's path, and a claim that
cannot mount yet says so in upstream's words, for every such volume of the pod."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from kubelet import volume_pvc
from kubelet.volume_pvc import ClaimsNotReady, ClaimState, resolve
from machinery.api.core_v1 import Pod


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
