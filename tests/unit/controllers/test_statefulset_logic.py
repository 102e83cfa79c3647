"""The StatefulSet controller's pure parts (stateful_set_utils.go): ordinals, a pod's identity and storage, the
claims' owner references per retention policy, which revision a new pod gets under a partition, the replica
counts, history truncation; the shared ControllerRevision helpers; kubectl's StatefulSetStatusViewer; and the
controller's registration."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from controllers import history
from controllers.statefulset.utils import (
    POD_INDEX_LABEL,
    STATEFULSET_POD_NAME_LABEL,
    apply_revision,
    claim_owner_refs,
    compute_replica_status,
    has_stale_owner_ref,
    identity_matches,
    is_member_of,
    max_unavailable_of,
    new_revision,
    new_stateful_set_pod,
    new_versioned_stateful_set_pod,
    parent_name_and_ordinal,
    persistent_volume_claims,
    pod_revision,
    revisions_to_truncate,
    storage_matches,
)
from kubectl.errors import CommandError
from kubectl.rollout import stateful_set_status
from machinery.api.apps_v1 import ControllerRevision, StatefulSet
from machinery.api.core_v1 import PersistentVolumeClaim, Pod
from machinery.api.meta import ObjectMeta, OwnerReference

NOW = dt.datetime(2026, 11, 24, 7, 0, tzinfo=dt.UTC)


def sts(**spec: Any) -> StatefulSet:
    labels = {"app": "web"}
    body: dict[str, Any] = {
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "web", "namespace": "ns", "uid": "set-uid"},
        "spec": {"replicas": 3, "serviceName": "nginx", "selector": {"matchLabels": labels},
                 "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
                 "template": {"metadata": {"labels": labels},
                              "spec": {"containers": [{"name": "c", "image": "busybox"}],
                                       "volumes": [{"name": "cache", "emptyDir": {}}]}},
                 **spec}}
    return StatefulSet.from_dict(body)


def with_claims(**spec: Any) -> StatefulSet:
    return sts(volumeClaimTemplates=[{"metadata": {"name": "data", "labels": {"tier": "db"}},
                                      "spec": {"accessModes": ["ReadWriteOnce"]}}], **spec)


def pod(name: str, *, phase: str | None = "Running", ready: bool = True, revision: str = "web-1",
        uid: str | None = None, deleting: bool = False) -> Pod:
    body: dict[str, Any] = {"metadata": {"name": name, "namespace": "ns", "uid": uid or f"{name}-uid",
                                         "labels": {"app": "web", "controller-revision-hash": revision}},
                            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    if deleting:
        body["metadata"]["deletionTimestamp"] = "2026-11-24T06:59:00Z"
    if phase is not None:
        body["status"] = {"phase": phase, "conditions": [
            {"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": "2026-11-24T06:00:00Z"}]}
    return Pod.model_validate(body)


def test_ordinals_and_membership() -> None:
    assert parent_name_and_ordinal(pod("web-12")) == ("web", 12)
    assert parent_name_and_ordinal(pod("my-web-0")) == ("my-web", 0)
    assert parent_name_and_ordinal(pod("web")) == ("", -1)
    assert parent_name_and_ordinal(pod("web-x")) == ("", -1)
    assert is_member_of(sts(), pod("web-3")) and not is_member_of(sts(), pod("webby-3"))


def test_a_new_pod_has_its_identity_and_storage() -> None:
    s = with_claims()
    p = new_stateful_set_pod(s, 2)
    assert p.metadata.name == "web-2" and p.metadata.generate_name is None and p.metadata.namespace == "ns"
    assert p.metadata.labels == {"app": "web", STATEFULSET_POD_NAME_LABEL: "web-2", POD_INDEX_LABEL: "2"}
    assert p.spec is not None and (p.spec.hostname, p.spec.subdomain) == ("web-2", "nginx")
    assert [v.to_dict() for v in p.spec.volumes or []] == [
        {"name": "data", "persistentVolumeClaim": {"claimName": "data-web-2", "readOnly": False}},
        {"name": "cache", "emptyDir": {}}]
    ref = (p.metadata.owner_references or [])[0]
    assert (ref.kind, ref.name, ref.uid, ref.controller, ref.block_owner_deletion) == (
        "StatefulSet", "web", "set-uid", True, True)
    assert identity_matches(s, p) and storage_matches(s, p)
    drifted = p.model_copy(deep=True)
    drifted.metadata.labels = {"app": "web"}
    assert not identity_matches(s, drifted)
    assert not storage_matches(s, pod("web-2"))
    # no service name: no subdomain
    assert new_stateful_set_pod(sts(serviceName=None), 0).spec.subdomain is None  # type: ignore[union-attr]


def test_claims_are_named_per_ordinal_and_carry_the_selector_labels() -> None:
    [(name, claim)] = persistent_volume_claims(with_claims(), 4)
    assert name == "data"
    assert (claim.metadata.name, claim.metadata.namespace) == ("data-web-4", "ns")
    assert claim.metadata.labels == {"tier": "db", "app": "web"}
    assert claim.to_dict()["kind"] == "PersistentVolumeClaim" and claim.status is None


def claim(*refs: OwnerReference) -> PersistentVolumeClaim:
    return PersistentVolumeClaim(metadata=ObjectMeta(name="data-web-1", namespace="ns",
                                                     owner_references=list(refs) or None))


SET_REF = OwnerReference(api_version="apps/v1", kind="StatefulSet", name="web", uid="set-uid")
POD_REF = OwnerReference(api_version="v1", kind="Pod", name="web-1", uid="web-1-uid")


@pytest.mark.parametrize(("when_deleted", "when_scaled", "replicas", "expected"), [
    ("Retain", "Retain", 3, []),
    ("Delete", "Retain", 3, ["set-uid"]),
    ("Delete", "Retain", 1, ["set-uid"]),
    ("Retain", "Delete", 3, []),
    ("Retain", "Delete", 1, ["web-1-uid"]),  # web-1 is scaled down: it owns its claim
    ("Delete", "Delete", 3, ["set-uid"]),
    ("Delete", "Delete", 1, ["web-1-uid"]),
])
def test_claim_owner_references_follow_the_retention_policy(when_deleted: str, when_scaled: str, replicas: int,
                                                           expected: list[str]) -> None:
    s = sts(replicas=replicas, persistentVolumeClaimRetentionPolicy={"whenDeleted": when_deleted,
                                                                     "whenScaled": when_scaled})
    p = pod("web-1")
    for start in ([], [SET_REF], [POD_REF], [SET_REF, POD_REF]):
        c = claim(*start)
        refs = claim_owner_refs(c, s, p)
        final = [r.uid for r in (refs if refs is not None else start)]
        assert sorted(final) == sorted(expected), (start, final)
        if refs is None:
            assert sorted(r.uid for r in start) == sorted(expected)  # None only when nothing changes
    added = claim_owner_refs(claim(), s, p) or []
    assert all(r.controller is None and r.block_owner_deletion is None for r in added)


def test_stale_claims_name_an_earlier_pod() -> None:
    p = pod("web-1", uid="new-uid")
    assert has_stale_owner_ref(claim(POD_REF), p)
    assert not has_stale_owner_ref(claim(POD_REF), pod("web-1"))
    assert not has_stale_owner_ref(claim(SET_REF), p)


def test_a_new_pod_below_the_partition_gets_the_current_revision() -> None:
    current, update = sts(), sts(updateStrategy={"type": "RollingUpdate", "rollingUpdate": {"partition": 2}})
    revisions = [pod_revision(new_versioned_stateful_set_pod(update, update, "web-a", "web-b", i, 0)) for i in range(4)]
    assert revisions == ["web-a", "web-a", "web-b", "web-b"]
    # without a rollingUpdate, below the current replicas
    bare = sts(updateStrategy={"type": "RollingUpdate"})
    assert [pod_revision(new_versioned_stateful_set_pod(bare, bare, "web-a", "web-b", i, 1)) for i in range(3)] == [
        "web-a", "web-b", "web-b"]
    on_delete = sts(updateStrategy={"type": "OnDelete"})
    assert pod_revision(new_versioned_stateful_set_pod(on_delete, current, "web-a", "web-b", 0, 3)) == "web-b"


def test_max_unavailable_counts_and_percents() -> None:
    assert [max_unavailable_of(v, 10) for v in (None, 0, 3, "25%", "5%", "100%")] == [1, 1, 3, 2, 1, 10]


def test_replica_counts() -> None:
    pods = [pod("web-0"), pod("web-1", ready=False), pod("web-2", revision="web-2"),
            pod("web-3", deleting=True), pod("web-4", phase=None)]
    status = compute_replica_status(pods, 0, "web-1", "web-2", NOW)
    assert (status.replicas, status.ready_replicas, status.available_replicas) == (4, 3, 3)
    assert (status.current_replicas, status.updated_replicas) == (2, 1)
    # minReadySeconds: ready since 06:00, an hour is not yet available
    assert compute_replica_status([pod("web-0")], 3600, "web-1", "web-1", NOW).available_replicas == 0


def revision(name: str, number: int) -> ControllerRevision:
    return ControllerRevision(metadata=ObjectMeta(name=name, namespace="ns"), data={"n": number}, revision=number)


def test_history_keeps_the_limit_and_what_pods_run() -> None:
    s = sts(revisionHistoryLimit=1)
    revisions = [revision(f"web-{i}", i) for i in range(1, 6)]
    doomed = revisions_to_truncate(s, [pod("web-0", revision="web-2")], revisions, revisions[3], revisions[4])
    assert [r.metadata.name for r in doomed] == ["web-1"]  # 2 runs, 4 and 5 are current/update, 3 is kept
    assert revisions_to_truncate(sts(), [], revisions, None, None) == []


def test_revisions_hash_their_data_and_apply_back() -> None:
    s = sts()
    r1 = new_revision(s, 1, None)
    assert r1.metadata.name == f"web-{history.hash_controller_revision(r1.data)}"
    assert (r1.metadata.labels or {})["controller-revision-hash"] == r1.metadata.name.removeprefix("web-")  # type: ignore[union-attr]
    assert r1.data == {"spec": {"template": {**s.spec.template.to_dict(), "$patch": "replace"}}}  # type: ignore[union-attr]
    assert new_revision(s, 1, 1).metadata.name != r1.metadata.name  # a collision hashes differently
    assert new_revision(s, 7, None).metadata.name == r1.metadata.name  # the number is not hashed
    changed = sts(template={"metadata": {"labels": {"app": "web"}},
                            "spec": {"containers": [{"name": "c", "image": "busybox:2"}]}})
    r2 = new_revision(changed, 2, None)
    assert not history.equal_revision(r1, r2)
    assert history.find_equal_revisions([r1, r2], new_revision(s, 3, None)) == [r1]
    assert history.next_revision([r1, r2]) == 3 and history.next_revision([]) == 1
    back = apply_revision(changed, r1)
    assert back.spec is not None and back.spec.template == s.spec.template  # type: ignore[union-attr]
    ref = (r1.metadata.owner_references or [])[0]
    assert (ref.kind, ref.uid, ref.controller) == ("StatefulSet", "set-uid", True)
    assert history.revision_name("x" * 300, "abc") == "x" * 223 + "-abc"


def sts_obj(status: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "web", "generation": 2},
            "spec": {"replicas": 3, "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
                     **spec}, "status": status}


def test_kubectl_status_viewer_lines() -> None:
    assert stateful_set_status(sts_obj({"observedGeneration": 1})) == (
        "Waiting for statefulset spec update to be observed...", False)
    assert stateful_set_status(sts_obj({"observedGeneration": 2, "readyReplicas": 1})) == (
        "Waiting for 2 pods to be ready...", False)
    partitioned = {"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 1}}}
    assert stateful_set_status(sts_obj({"observedGeneration": 2, "readyReplicas": 3, "updatedReplicas": 1},
                                       **partitioned)) == (
        "Waiting for partitioned roll out to finish: 1 out of 2 new pods have been updated...", False)
    assert stateful_set_status(sts_obj({"observedGeneration": 2, "readyReplicas": 3, "updatedReplicas": 3})) == (
        "partitioned roll out complete: 3 new pods have been updated...", True)
    bare = {"updateStrategy": {"type": "RollingUpdate"}}
    assert stateful_set_status(sts_obj({"observedGeneration": 2, "readyReplicas": 3, "currentReplicas": 3,
                                        "currentRevision": "web-a", "updateRevision": "web-a"}, **bare)) == (
        "statefulset rolling update complete 3 pods at revision web-a...", True)
    with pytest.raises(CommandError, match="only available for RollingUpdate strategy type"):
        stateful_set_status(sts_obj({}, updateStrategy={"type": "OnDelete"}))


def test_registered_under_upstream_name_and_account() -> None:
    from controllers.manager import CONTROLLERS, enabled_controllers, parse_args

    assert CONTROLLERS["statefulset"].service_account == "statefulset-controller"
    assert enabled_controllers(["statefulset-controller"]) == ["statefulset"]
    assert "statefulset" in enabled_controllers(["*"])
    assert parse_args(["--concurrent-statefulset-syncs", "3"]).concurrent_statefulset_syncs == 3
