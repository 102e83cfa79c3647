"""The Deployment controller (with the ReplicaSet controller) as a real `python -m controllers`
process against the session's apiserver: the ReplicaSet named `{deployment}-{pod-template-hash}`,
scaling, rolling updates within maxSurge/maxUnavailable at every sample, Recreate, rollback as
`kubectl rollout undo` does it, paused, revisionHistoryLimit, ProgressDeadlineExceeded, events,
and a controller-manager killed mid-rollout.

No kubelet runs here: the test plays the node, writing pod status (phase Running, Ready True,
containerStatuses) through the status subresource whenever a rollout needs pods to become
available (`kubelet_pass`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from controllers.hashing import compute_hash
from machinery.api.core_v1 import PodTemplateSpec
from machinery.events import COMBINED_PREFIX
from tests.cluster import ApiServer, wait_for
from tests.controller_process import ControllerProcess
from tests.integration.test_replicaset_controller import (
    active_pods,
    controller_manager,
    events,
    is_ready,
    kubelet_pass,
    merge_patch,
    ok,
    owner_uids,
    rs_path,
    sampler,
)

REVISION = "deployment.kubernetes.io/revision"


@pytest.fixture
def cm(workdir: Any, apiserver: ApiServer) -> Iterator[ControllerProcess]:
    yield from controller_manager(workdir, apiserver)


def d_path(ns: str, name: str = "") -> str:
    return f"/apis/apps/v1/namespaces/{ns}/deployments" + (f"/{name}" if name else "")


def deployment(name: str, replicas: int = 3, image: str = "nginx:1.25", *, strategy: dict[str, Any] | None = None,
               **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "labels": {"app": name}},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "web", "image": image}]}}, **spec},
    }
    if strategy is not None:
        body["spec"]["strategy"] = strategy
    return body


def rolling(surge: int | str, unavailable: int | str) -> dict[str, Any]:
    return {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable}}


def get_d(api: httpx.Client, ns: str, name: str) -> dict[str, Any]:
    return ok(api.get(d_path(ns, name)))


def replicasets(api: httpx.Client, ns: str) -> list[dict[str, Any]]:
    items = ok(api.get(rs_path(ns)))["items"]
    return sorted(items, key=lambda r: int((r["metadata"].get("annotations") or {}).get(REVISION, "0")))


def set_image(api: httpx.Client, ns: str, name: str, image: str) -> None:
    """`kubectl set image`: a strategic merge patch of the template's container."""
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "web", "image": image}]}}}}
    ok(api.patch(d_path(ns, name), json=patch, headers={"content-type": "application/strategic-merge-patch+json"}))


def rollout_complete(api: httpx.Client, ns: str, name: str) -> bool:
    """What `kubectl rollout status` waits for."""
    d = get_d(api, ns, name)
    s = d.get("status") or {}
    want = d["spec"]["replicas"]
    return (s.get("observedGeneration", 0) >= d["metadata"]["generation"]
            and s.get("updatedReplicas", 0) == want and s.get("replicas", 0) == want
            and s.get("availableReplicas", 0) == want)


def drive(api: httpx.Client, ns: str, name: str, check: Callable[[], str | None] | None = None,
          timeout: float = 60.0) -> list[str]:
    """Play the kubelet (mark new pods ready) until the rollout completes; sample `check` on every
    round and return what it reported."""
    violations: list[str] = []

    def done() -> bool:
        kubelet_pass(api, ns, f"app={name}")
        return rollout_complete(api, ns, name)

    wait_for(sampler(done, violations, check or (lambda: None)), timeout, interval=0.02,
             what=f"deployment {name} to complete")
    return violations


def condition(d: dict[str, Any], type_: str) -> dict[str, Any] | None:
    return next((c for c in (d.get("status") or {}).get("conditions") or [] if c["type"] == type_), None)


def images(pods: list[dict[str, Any]]) -> set[str]:
    return {p["spec"]["containers"][0]["image"] for p in pods}


# -- tests --------------------------------------------------------------------------------------


def test_deployment_makes_a_replicaset_named_by_template_hash_and_completes(api: httpx.Client, namespace: str,
                                                                            cm: ControllerProcess) -> None:
    created = ok(api.post(d_path(namespace), json=deployment("nginx", 3)))
    template_hash = compute_hash(PodTemplateSpec.model_validate(created["spec"]["template"]))
    rs_name = f"nginx-{template_hash}"
    rs = wait_for(lambda: next(iter(replicasets(api, namespace)), None), 15, what="a ReplicaSet")
    assert isinstance(rs, dict)
    meta, spec = rs["metadata"], rs["spec"]
    assert meta["name"] == rs_name
    assert meta["labels"] == {"app": "nginx", "pod-template-hash": template_hash}
    assert spec["selector"] == {"matchLabels": {"app": "nginx", "pod-template-hash": template_hash}}
    assert spec["template"]["metadata"]["labels"] == {"app": "nginx", "pod-template-hash": template_hash}
    assert meta["ownerReferences"] == [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "nginx",
                                        "uid": created["metadata"]["uid"], "controller": True,
                                        "blockOwnerDeletion": True}]
    assert meta["annotations"] == {REVISION: "1", "deployment.kubernetes.io/desired-replicas": "3",
                                   "deployment.kubernetes.io/max-replicas": "4"}

    wait_for(lambda: len(active_pods(api, namespace)) == 3, 15, what="3 pods")
    for p in active_pods(api, namespace):
        assert p["metadata"]["name"].startswith(f"{rs_name}-") and len(p["metadata"]["name"]) == len(rs_name) + 6
        assert owner_uids(p) == [meta["uid"]]
    assert not rollout_complete(api, namespace, "nginx")
    assert drive(api, namespace, "nginx") == []

    d = get_d(api, namespace, "nginx")
    assert d["metadata"]["annotations"][REVISION] == "1"
    assert d["metadata"]["generation"] == created["metadata"]["generation"]  # annotations do not bump it
    s = d["status"]
    assert (s["replicas"], s["updatedReplicas"], s["readyReplicas"], s["availableReplicas"]) == (3, 3, 3, 3)
    assert s.get("unavailableReplicas", 0) == 0
    available, progressing = condition(d, "Available"), condition(d, "Progressing")
    assert available is not None and (available["status"], available["reason"]) == ("True", "MinimumReplicasAvailable")
    wait_for(lambda: (condition(get_d(api, namespace, "nginx"), "Progressing") or {}).get("reason")
             == "NewReplicaSetAvailable", 10, what="Progressing NewReplicaSetAvailable")
    progressing = condition(get_d(api, namespace, "nginx"), "Progressing")
    assert progressing is not None and progressing["status"] == "True"
    assert progressing["message"] == f'ReplicaSet "{rs_name}" has successfully progressed.'

    wait_for(lambda: events(api, namespace, "ScalingReplicaSet", "nginx"), 10, what="ScalingReplicaSet")
    scaling = events(api, namespace, "ScalingReplicaSet", "nginx")
    assert [e["message"] for e in scaling] == [f"Scaled up replica set {rs_name} to 3"]
    assert scaling[0]["source"]["component"] == "deployment-controller"
    assert scaling[0]["reportingComponent"] == "deployment-controller"
    creates = events(api, namespace, "SuccessfulCreate", rs_name)
    assert len(creates) == 3
    assert {e["source"]["component"] for e in creates} == {"replicaset-controller"}
    assert {e["reportingComponent"] for e in creates} == {"replicaset-controller"}


def test_scaling_up_and_down(api: httpx.Client, namespace: str, cm: ControllerProcess) -> None:
    ok(api.post(d_path(namespace), json=deployment("web", 2)))
    assert drive(api, namespace, "web") == []
    rs_name = replicasets(api, namespace)[0]["metadata"]["name"]
    merge_patch(api, d_path(namespace, "web"), {"spec": {"replicas": 5}})
    assert drive(api, namespace, "web") == []
    assert len(active_pods(api, namespace)) == 5
    ok(api.put(d_path(namespace, "web") + "/scale", json={
        "apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "web", "namespace": namespace},
        "spec": {"replicas": 1}}))
    assert drive(api, namespace, "web") == []
    wait_for(lambda: len(active_pods(api, namespace)) == 1, 10, what="1 pod")
    wait_for(lambda: len(events(api, namespace, "ScalingReplicaSet", "web")) == 3, 10, what="3 scaling events")
    messages = {e["message"] for e in events(api, namespace, "ScalingReplicaSet", "web")}
    assert messages == {f"Scaled up replica set {rs_name} to 2", f"Scaled up replica set {rs_name} to 5 from 2",
                        f"Scaled down replica set {rs_name} to 1 from 5"}
    assert len(replicasets(api, namespace)) == 1


def pod_history(api: httpx.Client, ns: str, selector: str, since: dict[str, Any]) -> list[tuple[int, int]]:
    """(active pods, ready pods) after every change since the list `since`, replayed from a watch at
    its resourceVersion: every intermediate state, not only the ones a poll happens to see."""
    live = {p["metadata"]["name"]: p for p in since["items"] if not p["metadata"].get("deletionTimestamp")}
    history = [(len(live), sum(map(is_ready, live.values())))]
    params = {"watch": "true", "labelSelector": selector, "timeoutSeconds": "1",
              "resourceVersion": since["metadata"]["resourceVersion"]}
    with api.stream("GET", f"/api/v1/namespaces/{ns}/pods", params=params) as r:
        assert r.status_code == 200, r.read()
        for line in r.iter_lines():
            if not line.strip():
                continue
            event = json.loads(line)
            assert event["type"] != "ERROR", event
            pod = event["object"]
            if event["type"] == "DELETED" or pod["metadata"].get("deletionTimestamp"):
                live.pop(pod["metadata"]["name"], None)
            elif event["type"] in ("ADDED", "MODIFIED"):
                live[pod["metadata"]["name"]] = pod
            history.append((len(live), sum(map(is_ready, live.values()))))
    return history


def rolling_update_within_bounds(api: httpx.Client, ns: str, replicas: int, surge: int | str,
                                 unavailable: int | str, max_pods: int, min_available: int) -> None:
    ok(api.post(d_path(ns), json=deployment("web", replicas, "nginx:1.25", strategy=rolling(surge, unavailable))))
    assert drive(api, ns, "web") == []
    before = ok(api.get(f"/api/v1/namespaces/{ns}/pods", params={"labelSelector": "app=web"}))
    set_image(api, ns, "web", "nginx:1.26")
    assert drive(api, ns, "web") == []

    pods = active_pods(api, ns, "app=web")
    assert len(pods) == replicas and images(pods) == {"nginx:1.26"}
    history = pod_history(api, ns, "app=web", before)
    assert [h for h in history if h[0] > max_pods] == [], f"more than {max_pods} pods"
    assert [h for h in history if h[1] < min_available] == [], f"fewer than {min_available} available"
    assert max(total for total, _ in history) > replicas  # it did surge
    old, new = replicasets(api, ns)
    assert (old["metadata"]["annotations"][REVISION], new["metadata"]["annotations"][REVISION]) == ("1", "2")
    assert (old["spec"]["replicas"], new["spec"]["replicas"]) == (0, replicas)
    assert new["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.26"
    assert get_d(api, ns, "web")["metadata"]["annotations"][REVISION] == "2"
    # a rollout of several steps may write 10 or more ScalingReplicaSet events about the Deployment: from the 10th,
    # client-go's correlator (machinery/events.py) writes them as one "(combined from similar events): ..." Event
    last_down = f"Scaled down replica set {old['metadata']['name']} to 0"
    wait_for(lambda: any(e["message"].removeprefix(COMBINED_PREFIX).startswith(last_down)
                         for e in events(api, ns, "ScalingReplicaSet", "web")), 10, what="the last scale-down event")
def test_rolling_update_respects_max_surge_and_max_unavailable(api: httpx.Client, namespace: str,
                                                               cm: ControllerProcess) -> None:
    rolling_update_within_bounds(api, namespace, 4, 1, 1, max_pods=5, min_available=3)


def test_rolling_update_with_percentages_surge_rounds_up_unavailable_down(api: httpx.Client, namespace: str,
                                                                          cm: ControllerProcess) -> None:
    # 5 replicas: maxSurge 30% -> 2 (1.5 rounded up), maxUnavailable 30% -> 1 (1.5 rounded down)
    rolling_update_within_bounds(api, namespace, 5, "30%", "30%", max_pods=7, min_available=4)


def test_rollback_brings_back_the_old_replicaset_with_a_new_revision(api: httpx.Client, namespace: str,
                                                                     cm: ControllerProcess) -> None:
    ok(api.post(d_path(namespace), json=deployment("web", 2, "nginx:1.25", strategy=rolling(1, 0))))
    assert drive(api, namespace, "web") == []
    set_image(api, namespace, "web", "nginx:1.26")
    assert drive(api, namespace, "web") == []
    first, second = replicasets(api, namespace)
    assert first["metadata"]["annotations"][REVISION] == "1"

    # kubectl rollout undo: the previous revision's template, without its hash label, into the Deployment
    template = first["spec"]["template"]
    del template["metadata"]["labels"]["pod-template-hash"]
    d = get_d(api, namespace, "web")
    d["spec"]["template"] = template
    ok(api.put(d_path(namespace, "web"), json=d))
    assert drive(api, namespace, "web") == []

    rss = {r["metadata"]["name"]: r for r in replicasets(api, namespace)}
    assert set(rss) == {first["metadata"]["name"], second["metadata"]["name"]}  # no third ReplicaSet
    back = rss[first["metadata"]["name"]]
    assert back["metadata"]["annotations"][REVISION] == "3"
    assert back["metadata"]["annotations"]["deployment.kubernetes.io/revision-history"] == "1"
    assert back["spec"]["replicas"] == 2 and rss[second["metadata"]["name"]]["spec"]["replicas"] == 0
    assert get_d(api, namespace, "web")["metadata"]["annotations"][REVISION] == "3"
    assert images(active_pods(api, namespace)) == {"nginx:1.25"}


def test_recreate_removes_every_old_pod_before_making_new_ones(api: httpx.Client, namespace: str,
                                                               cm: ControllerProcess) -> None:
    ok(api.post(d_path(namespace), json=deployment("web", 3, strategy={"type": "Recreate"})))
    assert drive(api, namespace, "web") == []
    set_image(api, namespace, "web", "nginx:1.26")

    def never_mixed() -> str | None:
        found = images(active_pods(api, namespace))
        return f"old and new pods together: {found}" if len(found) > 1 else None

    assert drive(api, namespace, "web", never_mixed) == []
    assert images(active_pods(api, namespace)) == {"nginx:1.26"}
    old, new = replicasets(api, namespace)
    wait_for(lambda: len(events(api, namespace, "ScalingReplicaSet", "web")) == 3, 10, what="3 scaling events")
    messages = [e["message"] for e in events(api, namespace, "ScalingReplicaSet", "web")]
    assert f"Scaled down replica set {old['metadata']['name']} to 0 from 3" in messages
    assert f"Scaled up replica set {new['metadata']['name']} to 3" in messages


def test_paused_deployment_scales_but_does_not_roll_out(api: httpx.Client, namespace: str,
                                                       cm: ControllerProcess) -> None:
    ok(api.post(d_path(namespace), json=deployment("web", 2)))
    assert drive(api, namespace, "web") == []
    merge_patch(api, d_path(namespace, "web"), {"spec": {"paused": True}})
    set_image(api, namespace, "web", "nginx:1.26")
    merge_patch(api, d_path(namespace, "web"), {"spec": {"replicas": 3}})

    def observed() -> bool:
        d = get_d(api, namespace, "web")
        return (d.get("status") or {}).get("observedGeneration") == d["metadata"]["generation"]

    wait_for(observed, 10, what="the paused Deployment to be observed")
    wait_for(lambda: replicasets(api, namespace)[0]["spec"]["replicas"] == 3, 10, what="old RS scaled to 3")
    assert len(replicasets(api, namespace)) == 1  # no rollout while paused
    progressing = condition(get_d(api, namespace, "web"), "Progressing")
    assert progressing is not None and (progressing["status"], progressing["reason"]) == ("Unknown",
                                                                                         "DeploymentPaused")
    merge_patch(api, d_path(namespace, "web"), {"spec": {"paused": False}})
    assert drive(api, namespace, "web") == []
    assert len(replicasets(api, namespace)) == 2
    pods = active_pods(api, namespace)
    assert len(pods) == 3 and images(pods) == {"nginx:1.26"}


def test_proportional_scaling_in_the_middle_of_a_rollout(api: httpx.Client, namespace: str,
                                                         cm: ControllerProcess) -> None:
    ok(api.post(d_path(namespace), json=deployment("web", 4, strategy=rolling(1, 1))))
    assert drive(api, namespace, "web") == []
    set_image(api, namespace, "web", "nginx:1.26")  # and no kubelet: the new pods never become ready

    def sizes() -> tuple[int, ...]:
        return tuple(r["spec"]["replicas"] for r in replicasets(api, namespace))

    wait_for(lambda: sizes() == (3, 2), 15, what="the rollout to stall at old 3, new 2")
    merge_patch(api, d_path(namespace, "web"), {"spec": {"replicas": 8}})
    # 8 replicas allow 9 pods (maxSurge 1): each ReplicaSet grows by 9/5 of its size (max-replicas was 5),
    # 3 -> 5.4 -> 5 and 2 -> 3.6 -> 4
    wait_for(lambda: sizes() == (5, 4), 15, what="old 5, new 4")
    assert drive(api, namespace, "web") == []
    assert sizes() == (0, 8)


def test_revision_history_limit_cleans_up_old_replicasets(api: httpx.Client, namespace: str,
                                                          cm: ControllerProcess) -> None:
    ok(api.post(d_path(namespace), json=deployment("web", 1, "nginx:1", revisionHistoryLimit=1)))
    assert drive(api, namespace, "web") == []
    for image in ("nginx:2", "nginx:3"):
        set_image(api, namespace, "web", image)
        assert drive(api, namespace, "web") == []
    wait_for(lambda: len(replicasets(api, namespace)) == 2, 15, what="the oldest ReplicaSet to be deleted")
    kept = replicasets(api, namespace)
    assert [r["metadata"]["annotations"][REVISION] for r in kept] == ["2", "3"]
    assert [r["spec"]["template"]["spec"]["containers"][0]["image"] for r in kept] == ["nginx:2", "nginx:3"]


def test_progress_deadline_exceeded(api: httpx.Client, namespace: str, cm: ControllerProcess) -> None:
    ok(api.post(d_path(namespace), json=deployment("stuck", 1, progressDeadlineSeconds=2)))
    # no kubelet: the pod never becomes ready

    def timed_out() -> dict[str, Any] | None:
        c = condition(get_d(api, namespace, "stuck"), "Progressing")
        return c if c is not None and c["reason"] == "ProgressDeadlineExceeded" else None

    c = wait_for(timed_out, 15, what="ProgressDeadlineExceeded")
    assert isinstance(c, dict) and c["status"] == "False"
    rs_name = replicasets(api, namespace)[0]["metadata"]["name"]
    assert c["message"] == f'ReplicaSet "{rs_name}" has timed out progressing.'
    available = condition(get_d(api, namespace, "stuck"), "Available")
    assert available is not None and (available["status"], available["reason"]) == ("False",
                                                                                     "MinimumReplicasUnavailable")
    # progress afterwards still completes the rollout
    assert drive(api, namespace, "stuck") == []


def test_killed_controller_manager_resumes_without_extra_pods(api: httpx.Client, namespace: str,
                                                               cm: ControllerProcess) -> None:
    ok(api.post(d_path(namespace), json=deployment("big", 30)))
    wait_for(lambda: len(active_pods(api, namespace)) >= 3, 15, what="some pods")
    cm.kill()
    cm.start()
    assert drive(api, namespace, "big") == []
    assert len(active_pods(api, namespace)) == 30
    assert len(replicasets(api, namespace)) == 1
    rs_name = replicasets(api, namespace)[0]["metadata"]["name"]
    assert events(api, namespace, "SuccessfulDelete", rs_name) == []  # nothing made too many was taken back
