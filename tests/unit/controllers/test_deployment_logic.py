"""The pure parts of the Deployment and ReplicaSet controllers, on plain objects: surge and
unavailability arithmetic, proportional scaling, new/old ReplicaSets, revisions, conditions,
which pods go first, expectations and slow start. Cases follow upstream's unit tests where they
exist (deployment_controller_test.go TestScale, rolling_test.go, replica_set_test.go)."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import pytest

from controllers.controller_ref_manager import new_controller_ref
from controllers.controller_utils import (
    ControllerExpectations,
    UIDTrackingControllerExpectations,
    is_pod_available,
    pod_from_template,
    rank_pods_for_deletion,
    slow_start_batch,
)
from controllers.deployment import progress, recreate, rollback, rolling, sync, util
from controllers.hashing import POD_TEMPLATE_HASH_LABEL
from controllers.replicaset import calculate_status, pods_to_delete
from machinery.api.apps_v1 import Deployment, DeploymentStatus, ReplicaSet, ReplicaSetCondition
from machinery.api.core_v1 import Pod
from machinery.timeutil import format_rfc3339 as rfc3339

NOW = dt.datetime(2026, 11, 21, 12, 0, 0, tzinfo=dt.UTC)


def ts(seconds_ago: float) -> str:
    return rfc3339(NOW - dt.timedelta(seconds=seconds_ago))


def template(image: str = "nginx:1.25", extra_labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"labels": {"app": "web", **(extra_labels or {})}},
            "spec": {"containers": [{"name": "web", "image": image}], "restartPolicy": "Always"}}


def deployment(replicas: int = 10, surge: int | str | None = 0, unavailable: int | str | None = 1,
               strategy: str = "RollingUpdate", image: str = "nginx:1.25", generation: int = 1,
               status: dict[str, Any] | None = None, deadline: int | None = 600,
               annotations: dict[str, str] | None = None) -> Deployment:
    strat: dict[str, Any] = {"type": strategy}
    if strategy == "RollingUpdate":
        strat["rollingUpdate"] = {k: v for k, v in (("maxSurge", surge), ("maxUnavailable", unavailable))
                                  if v is not None}
    spec: dict[str, Any] = {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                            "template": template(image), "strategy": strat}
    if deadline is not None:
        spec["progressDeadlineSeconds"] = deadline
    return Deployment.from_dict({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "ns", "uid": "d-uid", "generation": generation,
                     **({"annotations": annotations} if annotations else {})},
        "spec": spec, "status": status or {},
    })


def rs(name: str, replicas: int, *, available: int | None = None, status_replicas: int | None = None,
       created: float = 100.0, image: str = "nginx:1.25", annotations: dict[str, str] | None = None,
       generation: int = 1, observed: int = 1, ready: int | None = None) -> ReplicaSet:
    available = replicas if available is None else available
    return ReplicaSet.from_dict({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": name, "namespace": "ns", "uid": f"{name}-uid", "creationTimestamp": ts(created),
                     "generation": generation, **({"annotations": annotations} if annotations else {})},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web", POD_TEMPLATE_HASH_LABEL: name}},
                 "template": template(image, {POD_TEMPLATE_HASH_LABEL: name})},
        "status": {"replicas": replicas if status_replicas is None else status_replicas,
                   "readyReplicas": available if ready is None else ready, "availableReplicas": available,
                   "observedGeneration": observed},
    })


def sizes(plan: list[tuple[ReplicaSet, int]]) -> dict[str, int]:
    return {r.metadata.name or "": n for r, n in plan}


# -- surge and unavailability ------------------------------------------------------------------


@pytest.mark.parametrize(("value", "total", "up", "expected"), [
    (3, 10, True, 3), ("25%", 10, True, 3), ("25%", 10, False, 2), ("25%", 4, True, 1), ("25%", 4, False, 1),
    ("25%", 3, False, 0), ("25%", 3, True, 1), ("100%", 7, False, 7), ("0%", 7, True, 0), (None, 5, True, 0),
])
def test_int_or_percent_rounds_surge_up_and_unavailability_down(value: int | str | None, total: int, up: bool,
                                                                expected: int) -> None:
    assert util.int_or_percent(value, total, up) == expected


def test_fenceposts_never_both_zero() -> None:
    assert util.resolve_fenceposts("25%", "25%", 3) == (1, 0)
    assert util.resolve_fenceposts(0, "10%", 3) == (0, 1)  # both rounded to zero: one may be unavailable
    assert util.resolve_fenceposts(2, 0, 10) == (2, 0)


def test_max_surge_and_unavailable_of_a_deployment() -> None:
    d = deployment(replicas=10, surge="25%", unavailable="25%")
    assert (util.max_surge(d), util.max_unavailable(d)) == (3, 2)
    assert util.max_unavailable(deployment(replicas=2, surge=0, unavailable=5)) == 2  # never above replicas
    assert util.max_unavailable(deployment(replicas=0, surge=1, unavailable=1)) == 0
    recreate = deployment(strategy="Recreate")
    assert (util.max_surge(recreate), util.max_unavailable(recreate)) == (0, 0)


# -- rolling update steps ----------------------------------------------------------------------


def test_new_replicaset_grows_within_replicas_plus_surge() -> None:
    d = deployment(replicas=4, surge=1, unavailable=1)
    old, new = rs("old", 4), rs("new", 0, created=10)
    assert util.new_rs_new_replicas(d, [old, new], new) == 1
    old3 = rs("old", 3)
    assert util.new_rs_new_replicas(d, [old3, new], new) == 2
    assert util.new_rs_new_replicas(d, [rs("old", 4), rs("new", 1, created=10)], rs("new", 1, created=10)) == 1


def test_new_replicaset_waits_for_old_pods_to_be_seen_gone() -> None:
    """An old ReplicaSet scaled 4 -> 3 whose status still says 4 pods still counts 4 (deviation: upstream
    counts spec only and may briefly exceed replicas + maxSurge pods)."""
    d = deployment(replicas=4, surge=1, unavailable=1)
    old = rs("old", 3, status_replicas=4)
    new = rs("new", 1, created=10)
    assert util.new_rs_new_replicas(d, [old, new], new) == 1


def test_new_replicaset_of_recreate_takes_everything() -> None:
    d = deployment(replicas=5, strategy="Recreate")
    assert util.new_rs_new_replicas(d, [rs("new", 0)], rs("new", 0)) == 5


def test_old_replicasets_scale_down_keeps_minimum_available() -> None:
    d = deployment(replicas=4, surge=1, unavailable=1)
    old, new = rs("old", 4), rs("new", 1, available=0, created=10)
    # 5 pods, min available 3, the new one's pod is not available: 5 - 3 - 1 = 1 may go
    assert rolling.old_replicas_max_scaled_down(d, [old, new], new) == 1
    assert sizes(rolling.scale_down_old_plan(d, [old, new], [old])) == {"old": 3}
    # once the new pod is available, one more
    new_ok = rs("new", 1, created=10)
    assert rolling.old_replicas_max_scaled_down(d, [rs("old", 3), new_ok], new_ok) == 1


def test_scale_down_counts_no_more_available_than_spec() -> None:
    """An old ReplicaSet just scaled 4 -> 3 still reports 4 available: only 3 are counted on."""
    d = deployment(replicas=4, surge=1, unavailable=1)
    old, new = rs("old", 3, available=4, status_replicas=4), rs("new", 1, available=0, created=10)
    assert rolling.scale_down_old_plan(d, [old, new], [old]) == []
    assert rolling.cleanup_unhealthy_plan([old], 5) == []  # and nothing looks unhealthy


def test_cleanup_unhealthy_takes_unavailable_pods_oldest_first() -> None:
    older = rs("older", 3, available=1, created=300)
    old = rs("old", 2, available=0, created=200)
    assert sizes(rolling.cleanup_unhealthy_plan([old, older], 3)) == {"older": 1, "old": 1}
    assert sizes(rolling.cleanup_unhealthy_plan([old, older], 10)) == {"older": 1, "old": 0}


def test_scale_down_old_takes_oldest_first() -> None:
    d = deployment(replicas=6, surge=0, unavailable=2)
    older, old, new = rs("older", 3, created=300), rs("old", 3, created=200), rs("new", 0, created=10)
    assert sizes(rolling.scale_down_old_plan(d, [older, old, new], [old, older])) == {"older": 1}
    d2 = deployment(replicas=6, surge=0, unavailable=4)
    assert sizes(rolling.scale_down_old_plan(d2, [older, old, new], [old, older])) == {"older": 0, "old": 2}


# -- proportional scaling (upstream TestScale) ----------------------------------------------------


def annotated(name: str, replicas: int, desired: int, max_replicas: int, created: float) -> ReplicaSet:
    return rs(name, replicas, created=created, annotations={util.DESIRED_REPLICAS_ANNOTATION: str(desired),
                                                           util.MAX_REPLICAS_ANNOTATION: str(max_replicas)})


@pytest.mark.parametrize(("replicas", "before", "rss", "expected"), [
    (10, 5, [("new", 2, 10), ("old", 3, 100)], {"new": 4, "old": 6}),
    (3, 5, [("new", 2, 10), ("old", 3, 100)], {"new": 1, "old": 2}),
    (4, 9, [("new", 8, 10), ("old", 1, 100)], {"new": 4, "old": 0}),
    (10, 7, [("new", 2, 10), ("old", 3, 100), ("older", 2, 200)], {"new": 3, "old": 4, "older": 3}),
    (8, 13, [("new", 2, 10), ("old", 8, 100), ("older", 3, 200)], {"new": 1, "old": 5, "older": 2}),
    (4, 3, [("new", 1, 10), ("old", 1, 100), ("older", 1, 200)], {"new": 2, "old": 1, "older": 1}),
    (10, 4, [("new", 2, 10), ("old", 2, 100)], {"new": 5, "old": 5}),
    (0, 3, [("new", 1, 10), ("old", 2, 100)], {"new": 0, "old": 0}),
])
def test_proportional_scaling(replicas: int, before: int, rss: list[tuple[str, int, float]],
                              expected: dict[str, int]) -> None:
    d = deployment(replicas=replicas, surge=0, unavailable=1)
    plan, _ = sync.proportional_scale(d, [annotated(n, r, before, before, c) for n, r, c in rss])
    assert sizes(plan) == expected
    assert sum(expected.values()) == replicas


def test_proportional_scaling_direction() -> None:
    d = deployment(replicas=10, surge=0, unavailable=1)
    assert sync.proportional_scale(d, [annotated("a", 2, 5, 5, 10), annotated("b", 3, 5, 5, 20)])[1] == "up"
    d = deployment(replicas=2, surge=0, unavailable=1)
    assert sync.proportional_scale(d, [annotated("a", 2, 5, 5, 10), annotated("b", 3, 5, 5, 20)])[1] == "down"


def test_active_or_latest_and_saturation() -> None:
    new, old = rs("new", 0, created=10), rs("old", 3, created=100)
    assert util.find_active_or_latest(new, [old]) is old
    assert util.find_active_or_latest(rs("new", 0, created=10), [rs("old", 0, created=100)]).metadata.name == "new"
    assert util.find_active_or_latest(rs("new", 1, created=10), [old]) is None
    d = deployment(replicas=3)
    assert util.is_saturated(d, annotated("new", 3, 3, 3, 10))
    assert not util.is_saturated(d, annotated("new", 3, 2, 3, 10))
    assert not util.is_saturated(d, rs("new", 3))  # no desired-replicas annotation


# -- new and old ReplicaSets, revisions ---------------------------------------------------------


def test_new_replicaset_is_the_one_with_the_same_template_ignoring_the_hash() -> None:
    d = deployment(image="nginx:1.26")
    old, new = rs("old", 3, image="nginx:1.25", created=100), rs("new", 1, image="nginx:1.26", created=10)
    assert util.find_new_replicaset(d, [old, new]) is new
    required, everything = util.find_old_replicasets(d, [old, new, rs("older", 0, created=300)])
    assert [r.metadata.name for r in required] == ["old"]
    assert sorted(r.metadata.name or "" for r in everything) == ["old", "older"]
    assert util.find_new_replicaset(deployment(image="other"), [old, new]) is None


def test_new_replicaset_template_and_selector_carry_the_hash() -> None:
    d = deployment()
    assert d.spec is not None
    t = util.new_replicaset_template(d, "abc")
    assert t.metadata is not None and t.metadata.labels == {"app": "web", POD_TEMPLATE_HASH_LABEL: "abc"}
    assert d.spec.template.metadata is not None
    assert POD_TEMPLATE_HASH_LABEL not in (d.spec.template.metadata.labels or {})
    assert util.selector_with_hash(d.spec.selector, "abc").match_labels == {"app": "web",
                                                                           POD_TEMPLATE_HASH_LABEL: "abc"}
    assert util.equal_ignore_hash(t, d.spec.template)


def test_revision_annotations_on_create_and_on_rollback() -> None:
    d = deployment(replicas=3, surge=1, unavailable=1,
                   annotations={"team": "a", rollback.LAST_APPLIED_ANNOTATION: "{}"})
    new = rs("new", 0)
    assert rollback.set_new_replicaset_annotations(d, new, "1", exists=False)
    assert new.metadata.annotations == {"team": "a", util.REVISION_ANNOTATION: "1",
                                        util.DESIRED_REPLICAS_ANNOTATION: "3", util.MAX_REPLICAS_ANNOTATION: "4"}
    # rolling back to it later: its revision jumps to the newest, the old number is history
    assert rollback.set_new_replicaset_annotations(d, new, "3", exists=True)
    assert new.metadata.annotations is not None
    assert new.metadata.annotations[util.REVISION_ANNOTATION] == "3"
    assert new.metadata.annotations[rollback.REVISION_HISTORY_ANNOTATION] == "1"
    assert rollback.set_new_replicaset_annotations(d, new, "5", exists=True)
    assert new.metadata.annotations[rollback.REVISION_HISTORY_ANNOTATION] == "1,3"
    assert not rollback.set_new_replicaset_annotations(d, new, "4", exists=True)  # never lowered


def test_revision_ordering_and_max() -> None:
    a = rs("a", 0, annotations={util.REVISION_ANNOTATION: "3"}, created=10)
    b = rs("b", 0, annotations={util.REVISION_ANNOTATION: "1"}, created=5)
    c = rs("c", 0, annotations={util.REVISION_ANNOTATION: "x"}, created=50)
    assert util.max_revision([a, b, c]) == 3
    assert [r.metadata.name for r in util.by_revision([a, b])] == ["b", "a"]


# -- status and conditions ---------------------------------------------------------------------


def test_calculate_status_counts_and_available_condition() -> None:
    d = deployment(replicas=4, surge=1, unavailable=1)
    old, new = rs("old", 2, available=2), rs("new", 3, available=1, status_replicas=2, ready=2)
    s = sync.calculate_status([old, new], new, d, NOW)
    assert (s.replicas, s.updated_replicas, s.ready_replicas, s.available_replicas, s.unavailable_replicas) == \
        (4, 2, 4, 3, 2)
    assert s.observed_generation == 1
    cond = util.get_condition(s, util.AVAILABLE)
    assert cond is not None and (cond.status, cond.reason) == ("True", util.MINIMUM_REPLICAS_AVAILABLE)
    s = sync.calculate_status([rs("new", 4, available=2)], None, d, NOW)
    cond = util.get_condition(s, util.AVAILABLE)
    assert cond is not None and (cond.status, cond.reason) == ("False", util.MINIMUM_REPLICAS_UNAVAILABLE)


def test_set_condition_keeps_transition_time_when_status_stays() -> None:
    s = DeploymentStatus()
    util.set_condition(s, util.new_condition(util.PROGRESSING, "True", util.NEW_REPLICASET_CREATED, "a", NOW))
    later = NOW + dt.timedelta(seconds=30)
    util.set_condition(s, util.new_condition(util.PROGRESSING, "True", util.REPLICASET_UPDATED, "b", later))
    c = util.get_condition(s, util.PROGRESSING)
    assert c is not None and c.reason == util.REPLICASET_UPDATED
    assert c.last_transition_time == rfc3339(NOW) and c.last_update_time == rfc3339(later)
    util.set_condition(s, util.new_condition(util.PROGRESSING, "True", util.REPLICASET_UPDATED, "c", later))
    assert util.get_condition(s, util.PROGRESSING).message == "b"  # type: ignore[union-attr]  # same reason: no-op


def progressing(reason: str, status: str, updated_seconds_ago: float) -> dict[str, Any]:
    return {"type": "Progressing", "status": status, "reason": reason, "message": "",
            "lastUpdateTime": ts(updated_seconds_ago), "lastTransitionTime": ts(updated_seconds_ago)}


def test_rollout_status_progress_complete_and_timeout() -> None:
    base = {"observedGeneration": 1, "replicas": 2, "updatedReplicas": 1, "readyReplicas": 2, "availableReplicas": 2}
    # progress: one more updated pod → ReplicaSetUpdated, lastUpdateTime now
    d = deployment(replicas=2, surge=1, unavailable=0, deadline=10,
                   status={**base, "conditions": [progressing(util.NEW_REPLICASET_CREATED, "True", 5)]})
    old, new = rs("old", 1, available=1), rs("new", 1, available=0, status_replicas=2, ready=0)
    s = progress.rollout_status(d, [old, new], new, NOW)
    c = util.get_condition(s, util.PROGRESSING)
    assert c is not None and (c.reason, c.last_update_time) == (util.REPLICASET_UPDATED, rfc3339(NOW))
    assert c.message == 'ReplicaSet "new" is progressing.'
    # no progress for longer than the deadline → ProgressDeadlineExceeded
    d = deployment(replicas=2, surge=1, unavailable=0, deadline=10,
                   status={**base, "conditions": [progressing(util.REPLICASET_UPDATED, "True", 11)]})
    same = rs("new", 1, available=1, status_replicas=1)
    s = progress.rollout_status(d, [rs("old", 1), same], same, NOW)
    c = util.get_condition(s, util.PROGRESSING)
    assert c is not None and (c.status, c.reason) == ("False", util.TIMED_OUT)
    assert c.message == 'ReplicaSet "new" has timed out progressing.'
    # not yet past the deadline → unchanged, and a requeue for when it would be
    d = deployment(replicas=2, surge=1, unavailable=0, deadline=10,
                   status={**base, "conditions": [progressing(util.REPLICASET_UPDATED, "True", 4)]})
    s = progress.rollout_status(d, [rs("old", 1), same], same, NOW)
    assert util.get_condition(s, util.PROGRESSING).reason == util.REPLICASET_UPDATED  # type: ignore[union-attr]
    assert progress.requeue_after(d, s, NOW) == pytest.approx(7.0)
    # complete → NewReplicaSetAvailable
    done = rs("new", 2, available=2)
    s = progress.rollout_status(d, [done], done, NOW)
    c = util.get_condition(s, util.PROGRESSING)
    assert c is not None and (c.status, c.reason) == ("True", util.NEW_RS_AVAILABLE)
    assert util.deployment_complete(d, s)


def test_rollout_status_promotes_replica_failure() -> None:
    d = deployment(replicas=1)
    new = rs("new", 1, available=0, status_replicas=0)
    assert new.status is not None
    new.status.conditions = [ReplicaSetCondition(type="ReplicaFailure", status="True", reason="FailedCreate",
                                                     message="quota", last_transition_time=ts(1))]
    s = progress.rollout_status(d, [new], new, NOW)
    c = util.get_condition(s, util.REPLICA_FAILURE)
    assert c is not None and (c.reason, c.message) == ("FailedCreate", "quota")


def test_recreate_waits_for_old_pods() -> None:
    old, new = rs("old", 0, status_replicas=0), rs("new", 0)
    running = Pod.from_dict({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]},
                             "status": {"phase": "Running"}})
    done = running.model_copy(update={"status": running.status.model_copy(update={"phase": "Succeeded"})})  # type: ignore[union-attr]
    assert not recreate.old_pods_running(new, [old], {"old-uid": [done], "new-uid": [running]})
    assert recreate.old_pods_running(new, [old], {"old-uid": [running]})
    assert recreate.old_pods_running(new, [rs("old", 0, status_replicas=1)], {})


# -- the ReplicaSet controller's pure parts ---------------------------------------------------


def pod(name: str, *, node: str | None = None, phase: str | None = "Running", ready_since: float | None = 60,
        restarts: int = 0, created: float = 100, cost: int | None = None) -> Pod:
    status: dict[str, Any] = {}
    if phase:
        status["phase"] = phase
    if ready_since is not None:
        status["conditions"] = [{"type": "Ready", "status": "True", "lastTransitionTime": ts(ready_since)}]
    status["containerStatuses"] = [{"name": "c", "ready": ready_since is not None, "restartCount": restarts,
                                    "image": "i", "imageID": ""}]
    meta: dict[str, Any] = {"name": name, "uid": f"uid-{name}", "creationTimestamp": ts(created),
                            "labels": {"app": "web"}}
    if cost is not None:
        meta["annotations"] = {"controller.kubernetes.io/pod-deletion-cost": str(cost)}
    spec: dict[str, Any] = {"containers": [{"name": "c"}], **({"nodeName": node} if node else {})}
    return Pod.from_dict({"metadata": meta, "spec": spec, "status": status})


def names(pods: list[Pod]) -> list[str]:
    return [p.metadata.name or "" for p in pods]


def test_deletion_order_least_useful_first() -> None:
    pods = [
        pod("ready-old", node="n1", ready_since=10_000, created=20_000),
        pod("unscheduled", node=None, phase="Pending", ready_since=None),
        pod("pending", node="n1", phase="Pending", ready_since=None),
        pod("unknown", node="n1", phase="Unknown", ready_since=None),
        pod("running-not-ready", node="n1", ready_since=None),
        pod("ready-new", node="n1", ready_since=5, created=10),
    ]
    order = names(rank_pods_for_deletion(pods, [], NOW))
    assert order == ["unscheduled", "pending", "unknown", "running-not-ready", "ready-new", "ready-old"]


def test_deletion_order_restarts_cost_and_doubling_up() -> None:
    a, b = pod("calm", node="n1", restarts=0), pod("crashy", node="n1", restarts=5)
    assert names(rank_pods_for_deletion([a, b], [], NOW)) == ["crashy", "calm"]
    cheap, dear = pod("cheap", node="n1", cost=-10), pod("dear", node="n1", cost=100)
    assert names(rank_pods_for_deletion([dear, cheap], [], NOW)) == ["cheap", "dear"]
    crowded, alone = pod("crowded", node="n1"), pod("alone", node="n2")
    related = [crowded, alone, pod("sibling1", node="n1"), pod("sibling2", node="n1")]
    assert names(rank_pods_for_deletion([alone, crowded], related, NOW)) == ["crowded", "alone"]


def test_pods_to_delete_takes_the_first_of_the_order() -> None:
    pods = [pod("ready", node="n1"), pod("unready", node="n1", ready_since=None), pod("pending", phase="Pending",
                                                                                       ready_since=None)]
    assert names(pods_to_delete(pods, [], 2, NOW)) == ["pending", "unready"]
    assert len(pods_to_delete(pods, [], 3, NOW)) == 3


def test_availability_honours_min_ready_seconds() -> None:
    p = pod("p", ready_since=5)
    assert is_pod_available(p, 0, NOW)
    assert is_pod_available(p, 4, NOW)
    assert not is_pod_available(p, 10, NOW)
    assert not is_pod_available(pod("q", ready_since=None), 0, NOW)


def test_replicaset_status_counts() -> None:
    r = rs("web-abc", 3)
    assert r.spec is not None and r.spec.template is not None
    r.spec.min_ready_seconds = 30
    labelled = pod("full", ready_since=60)
    assert labelled.metadata.labels is not None
    labelled.metadata.labels[POD_TEMPLATE_HASH_LABEL] = "web-abc"
    status = calculate_status(r, [labelled, pod("fresh", ready_since=5), pod("unready", ready_since=None)], None, NOW)
    assert (status.replicas, status.fully_labeled_replicas, status.ready_replicas, status.available_replicas) == \
        (3, 1, 2, 1)
    failed = calculate_status(r, [], RuntimeError("boom"), NOW)
    assert failed.conditions is not None and failed.conditions[0].reason == "FailedCreate"


def test_pod_from_template() -> None:
    r = rs("web-abc", 1)
    assert r.spec is not None and r.spec.template is not None
    p = pod_from_template(r.spec.template, r, new_controller_ref(r, "apps/v1", "ReplicaSet"))
    assert p.metadata.generate_name == "web-abc-" and p.metadata.name is None
    assert p.metadata.labels == {"app": "web", POD_TEMPLATE_HASH_LABEL: "web-abc"}
    ref = (p.metadata.owner_references or [])[0]
    assert (ref.kind, ref.name, ref.uid, ref.controller, ref.block_owner_deletion) == \
        ("ReplicaSet", "web-abc", "web-abc-uid", True, True)


def test_expectations_lifecycle() -> None:
    clock = [0.0]
    e = ControllerExpectations(ttl=300, clock=lambda: clock[0])
    assert e.satisfied("k")  # no record: a fresh controller may act
    e.expect_creations("k", 2)
    assert not e.satisfied("k")
    e.creation_observed("k")
    assert not e.satisfied("k")
    e.creation_observed("k")
    assert e.satisfied("k")
    e.expect_creations("k", 5)
    clock[0] = 301  # informer events lost: give up waiting after the TTL
    assert e.satisfied("k")


def test_uid_tracking_expectations_count_each_pod_once() -> None:
    e = UIDTrackingControllerExpectations()
    e.expect_deletions_of("k", ["ns/a", "ns/b"])
    e.deletion_observed_of("k", "ns/a")
    e.deletion_observed_of("k", "ns/a")  # deletionTimestamp, then the DELETED event
    e.deletion_observed_of("k", "ns/other")
    assert not e.satisfied("k")
    e.deletion_observed_of("k", "ns/b")
    assert e.satisfied("k")
    e.delete_expectations("k")
    assert e.get("k") is None


def test_slow_start_batches_double_and_stop_at_the_first_failing_batch() -> None:
    batches: list[int] = []
    inflight = [0]

    async def ok() -> None:
        inflight[0] += 1
        await asyncio.sleep(0)
        batches.append(inflight[0])
        inflight[0] -= 1

    successes, err = asyncio.run(slow_start_batch(10, 1, ok))
    assert (successes, err) == (10, None)
    assert batches == [1, 2, 1, 4, 3, 2, 1, 3, 2, 1]  # batches of 1, 2, 4, then the 3 left, each concurrent
    calls = [0]

    async def fails_from_the_fourth() -> None:
        calls[0] += 1
        if calls[0] >= 4:
            raise RuntimeError("quota")

    successes, err = asyncio.run(slow_start_batch(100, 1, fails_from_the_fourth))
    assert calls[0] == 7  # batches 1, 2, 4: the third batch fails and no more are tried
    assert successes == 3 and isinstance(err, RuntimeError)


# -- the controller-manager's flags -------------------------------------------------------------


def test_controllers_flag_follows_upstream() -> None:
    from controllers.manager import CONTROLLERS, enabled_controllers

    assert enabled_controllers(["*"]) == list(CONTROLLERS)
    assert enabled_controllers(["*", "-garbagecollector"]) == [n for n in CONTROLLERS if n != "garbagecollector"]
    assert enabled_controllers(["replicaset", "deployment-controller"]) == ["deployment", "replicaset"]
    assert enabled_controllers(["-deployment"]) == []
    with pytest.raises(ValueError, match="not in the list of known controllers"):
        enabled_controllers(["nosuch"])


def test_durations_and_identity() -> None:
    from controllers.manager import parse_args, parse_duration, user_agent

    assert parse_duration("40s") == 40 and parse_duration("5m0s") == 300 and parse_duration("1h30m") == 5400
    assert parse_duration("250ms") == pytest.approx(0.25) and parse_duration("12") == 12
    args = parse_args(["--master", "http://127.0.0.1:1", "--controllers", "deployment,replicaset",
                       "--node-monitor-grace-period", "20s", "--pod-eviction-timeout", "1m", "--leader-elect=false",
                       "--concurrent-deployment-syncs", "3"])
    assert args.enabled == ["deployment", "replicaset"]
    assert (args.node_monitor_grace_period, args.pod_eviction_timeout, args.leader_elect) == (20, 60, False)
    assert args.concurrent_deployment_syncs == 3
    ua = user_agent("system:serviceaccount:kube-system:deployment-controller")
    assert ua.startswith("kube-controller-manager/v1.30.0 (")
    assert ua.endswith(") minik8s/system:serviceaccount:kube-system:deployment-controller")
