"""The ReplicaSet controller as a real `python -m controllers` process against the session's
apiserver: pods made with generateName and controller references, replaced when deleted, the
least useful deleted first, orphans adopted and released, no over-creation however fast spec
.replicas changes, status with minReadySeconds.

No kubelet runs here: where readiness matters the test plays the node and writes pod status
through the status subresource (phase Running, Ready condition True, containerStatuses).

The helpers at the top are shared with test_deployment_controller.py.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from controllers.manager import user_agent
from tests.cluster import ApiServer, ok, wait_for
from tests.controller_process import ControllerProcess
from tests.manifests import pod

# -- shared helpers -----------------------------------------------------------------------------


def controller_manager(workdir: Any, apiserver: ApiServer) -> Iterator[ControllerProcess]:
    """The controller-manager with the deployment and replicaset controllers, stopped even on failure."""
    process = ControllerProcess(workdir, apiserver.url, ["deployment", "replicaset"])
    try:
        process.start()
        yield process
    finally:
        process.stop()


@pytest.fixture
def cm(workdir: Any, apiserver: ApiServer) -> Iterator[ControllerProcess]:
    yield from controller_manager(workdir, apiserver)


def now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def merge_patch(api: httpx.Client, path: str, body: dict[str, Any]) -> dict[str, Any]:
    return ok(api.patch(path, json=body, headers={"content-type": "application/merge-patch+json"}))


def rs_path(ns: str, name: str = "") -> str:
    return f"/apis/apps/v1/namespaces/{ns}/replicasets" + (f"/{name}" if name else "")


def pods_path(ns: str, name: str = "") -> str:
    return f"/api/v1/namespaces/{ns}/pods" + (f"/{name}" if name else "")


def replicaset(name: str, replicas: int, app: str | None = None, image: str = "nginx:1.25",
               min_ready_seconds: int | None = None) -> dict[str, Any]:
    app = app or name
    spec: dict[str, Any] = {
        "replicas": replicas, "selector": {"matchLabels": {"app": app}},
        "template": {"metadata": {"labels": {"app": app, "tier": "web"}},
                     "spec": {"containers": [{"name": "web", "image": image}]}},
    }
    if min_ready_seconds is not None:
        spec["minReadySeconds"] = min_ready_seconds
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name}, "spec": spec}


def active_pods(api: httpx.Client, ns: str, selector: str | None = None) -> list[dict[str, Any]]:
    """Pods not being deleted, oldest first."""
    params = {"labelSelector": selector} if selector else None
    items = ok(api.get(pods_path(ns), params=params))["items"]
    live = [p for p in items if not p["metadata"].get("deletionTimestamp")]
    return sorted(live, key=lambda p: (p["metadata"]["creationTimestamp"], p["metadata"]["name"]))


def is_ready(p: dict[str, Any]) -> bool:
    conditions = (p.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def pod_status(p: dict[str, Any], ready: bool = True, phase: str = "Running") -> dict[str, Any]:
    """What a kubelet reports for a started pod."""
    t = now()
    flag = "True" if ready else "False"
    return {"status": {
        "phase": phase, "startTime": t,
        "conditions": [{"type": "Initialized", "status": "True", "lastTransitionTime": t},
                       {"type": "Ready", "status": flag, "lastTransitionTime": t},
                       {"type": "ContainersReady", "status": flag, "lastTransitionTime": t},
                       {"type": "PodScheduled", "status": "True", "lastTransitionTime": t}],
        "containerStatuses": [{"name": c["name"], "image": c["image"], "imageID": "", "ready": ready,
                               "restartCount": 0, "started": True, "state": {"running": {"startedAt": t}}}
                              for c in p["spec"]["containers"]],
    }}


def set_pod_status(api: httpx.Client, p: dict[str, Any], ready: bool = True, phase: str = "Running") -> None:
    """Act as the node: write the pod's status through pods/{name}/status."""
    meta = p["metadata"]
    r = api.patch(pods_path(meta["namespace"], meta["name"]) + "/status", json=pod_status(p, ready, phase),
                  headers={"content-type": "application/merge-patch+json"})
    assert r.is_success or r.status_code == 404, r.text  # a pod deleted meanwhile is fine


def kubelet_pass(api: httpx.Client, ns: str, selector: str | None = None) -> int:
    """Mark every live pod that is not ready yet Running and Ready; how many were marked."""
    marked = 0
    for p in active_pods(api, ns, selector):
        if not is_ready(p):
            set_pod_status(api, p)
            marked += 1
    return marked


def events(api: httpx.Client, ns: str, reason: str | None = None, name: str | None = None) -> list[dict[str, Any]]:
    items = ok(api.get(f"/api/v1/namespaces/{ns}/events"))["items"]
    return [e for e in items if (reason is None or e["reason"] == reason)
            and (name is None or e["involvedObject"]["name"] == name)]


def owner_uids(p: dict[str, Any]) -> list[str]:
    return [r["uid"] for r in p["metadata"].get("ownerReferences") or [] if r.get("controller")]


def sampler(fn: Callable[[], bool], violations: list[str], check: Callable[[], str | None]) -> Callable[[], bool]:
    """A wait_for condition that also samples an invariant each time it is polled; violations are
    collected (wait_for would swallow an AssertionError) and asserted by the caller."""
    def condition() -> bool:
        problem = check()
        if problem:
            violations.append(problem)
        return fn()

    return condition


# -- tests --------------------------------------------------------------------------------------


def test_creates_pods_with_generate_name_owner_references_and_status(api: httpx.Client, namespace: str,
                                                                     cm: ControllerProcess) -> None:
    rs = ok(api.post(rs_path(namespace), json=replicaset("web", 3)))
    uid = rs["metadata"]["uid"]
    pods = wait_for(lambda: (lambda ps: ps if len(ps) == 3 else None)(active_pods(api, namespace)), 15,
                    what="3 pods")
    assert isinstance(pods, list)
    for p in pods:
        meta = p["metadata"]
        assert re.fullmatch(r"web-[a-z0-9]{5}", meta["name"]), meta["name"]
        assert meta["generateName"] == "web-"
        assert meta["labels"] == {"app": "web", "tier": "web"}
        assert meta["ownerReferences"] == [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": uid,
                                            "controller": True, "blockOwnerDeletion": True}]
        assert p["spec"]["containers"][0]["image"] == "nginx:1.25"

    def status() -> dict[str, Any]:
        return ok(api.get(rs_path(namespace, "web")))["status"]

    wait_for(lambda: status().get("replicas") == 3 and status().get("fullyLabeledReplicas") == 3
             and status().get("observedGeneration") == rs["metadata"]["generation"], 10, what="RS status")
    assert status().get("readyReplicas", 0) == 0
    for p in pods:
        set_pod_status(api, p)
    wait_for(lambda: status().get("readyReplicas") == 3 and status().get("availableReplicas") == 3, 10,
             what="ready and available")

    wait_for(lambda: len(events(api, namespace, "SuccessfulCreate", "web")) == 3, 10, what="3 SuccessfulCreate")
    created = events(api, namespace, "SuccessfulCreate", "web")
    assert sorted(e["message"] for e in created) == sorted(f"Created pod: {p['metadata']['name']}" for p in pods)
    for e in created:
        assert e["type"] == "Normal"
        assert e["involvedObject"]["kind"] == "ReplicaSet" and e["involvedObject"]["uid"] == uid
        assert e["source"]["component"] == "replicaset-controller"
        assert e["reportingComponent"] == "replicaset-controller"
    assert user_agent("system:serviceaccount:kube-system:replicaset-controller").startswith(
        "kube-controller-manager/v1.30.0 (")
    assert user_agent("system:serviceaccount:kube-system:replicaset-controller").endswith(
        ") minik8s/system:serviceaccount:kube-system:replicaset-controller")


def test_a_pod_deleted_by_hand_is_replaced(api: httpx.Client, namespace: str, cm: ControllerProcess) -> None:
    ok(api.post(rs_path(namespace), json=replicaset("web", 2)))
    wait_for(lambda: len(active_pods(api, namespace)) == 2, 15, what="2 pods")
    victim = active_pods(api, namespace)[0]["metadata"]["name"]
    ok(api.delete(pods_path(namespace, victim)))

    def replaced() -> bool:
        names = {p["metadata"]["name"] for p in active_pods(api, namespace)}
        return len(names) == 2 and victim not in names

    wait_for(replaced, 15, what="a replacement pod")
    wait_for(lambda: len(events(api, namespace, "SuccessfulCreate", "web")) == 3, 10, what="3 creates in all")


def test_scale_down_deletes_the_least_useful_pods(api: httpx.Client, namespace: str, cm: ControllerProcess) -> None:
    ok(api.post(rs_path(namespace), json=replicaset("web", 4)))
    wait_for(lambda: len(active_pods(api, namespace)) == 4, 15, what="4 pods")
    pods = active_pods(api, namespace)
    ready_a, ready_b, running_unready, pending = pods
    set_pod_status(api, ready_a)
    set_pod_status(api, ready_b)
    set_pod_status(api, running_unready, ready=False)
    set_pod_status(api, pending, ready=False, phase="Pending")
    wait_for(lambda: ok(api.get(rs_path(namespace, "web")))["status"].get("readyReplicas") == 2, 10,
             what="the controller to see the statuses")

    merge_patch(api, rs_path(namespace, "web"), {"spec": {"replicas": 3}})
    wait_for(lambda: len(active_pods(api, namespace)) == 3, 15, what="3 pods")
    left = {p["metadata"]["name"] for p in active_pods(api, namespace)}
    assert pending["metadata"]["name"] not in left  # Pending goes before Running

    merge_patch(api, rs_path(namespace, "web"), {"spec": {"replicas": 2}})
    wait_for(lambda: len(active_pods(api, namespace)) == 2, 15, what="2 pods")
    left = {p["metadata"]["name"] for p in active_pods(api, namespace)}
    assert left == {ready_a["metadata"]["name"], ready_b["metadata"]["name"]}  # not ready goes before ready

    wait_for(lambda: len(events(api, namespace, "SuccessfulDelete", "web")) == 2, 10, what="2 SuccessfulDelete")
    deleted = sorted(e["message"] for e in events(api, namespace, "SuccessfulDelete", "web"))
    assert deleted == sorted(f"Deleted pod: {p['metadata']['name']}" for p in (pending, running_unready))
    assert all(e["source"]["component"] == "replicaset-controller"
               for e in events(api, namespace, "SuccessfulDelete", "web"))


def test_orphans_are_adopted_and_pods_that_stop_matching_are_released(api: httpx.Client, namespace: str,
                                                                      cm: ControllerProcess) -> None:
    orphan = ok(api.post(pods_path(namespace), json=pod("orphan", labels={"app": "web", "tier": "web"})))
    rs = ok(api.post(rs_path(namespace), json=replicaset("web", 2)))
    uid = rs["metadata"]["uid"]

    def owned() -> list[dict[str, Any]]:
        return [p for p in active_pods(api, namespace) if uid in owner_uids(p)]

    wait_for(lambda: len(owned()) == 2, 15, what="2 owned pods")
    adopted = ok(api.get(pods_path(namespace, "orphan")))
    refs = adopted["metadata"]["ownerReferences"]
    assert refs == [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": uid, "controller": True,
                     "blockOwnerDeletion": True}]
    assert adopted["metadata"]["uid"] == orphan["metadata"]["uid"]
    assert len(active_pods(api, namespace)) == 2  # the orphan counted: only one pod was made

    merge_patch(api, pods_path(namespace, "orphan"), {"metadata": {"labels": {"app": "elsewhere"}}})
    wait_for(lambda: not ok(api.get(pods_path(namespace, "orphan")))["metadata"].get("ownerReferences"), 15,
             what="the pod to be released")
    wait_for(lambda: len(owned()) == 2 and "orphan" not in {p["metadata"]["name"] for p in owned()}, 15,
             what="a replacement for the released pod")
    assert len(active_pods(api, namespace)) == 3


def pod_changes_since(api: httpx.Client, ns: str, resource_version: str) -> tuple[int, int]:
    """(pods added, pods deleted) in the namespace since `resource_version`, replayed by a watch from it."""
    added = deleted = 0
    with api.stream("GET", pods_path(ns), params={"watch": "true", "resourceVersion": resource_version,
                                                   "timeoutSeconds": "1"}) as r:
        for line in r.iter_lines():
            if line.strip():
                kind = json.loads(line)["type"]
                added += kind == "ADDED"
                deleted += kind == "DELETED"
    return added, deleted


def test_no_over_creation_however_fast_replicas_change(api: httpx.Client, namespace: str,
                                                       cm: ControllerProcess) -> None:
    """Rapid scale-ups only ever create, rapid scale-downs only ever delete: any extra create (a
    lagging informer not seen through by expectations) would show in the pods' watch as a delete on the
    way up."""
    ok(api.post(rs_path(namespace), json=replicaset("web", 0)))
    violations: list[str] = []
    ceiling = [60]

    def over() -> str | None:
        n = len(active_pods(api, namespace))
        return f"{n} pods > {ceiling[0]}" if n > ceiling[0] else None

    start = ok(api.get(pods_path(namespace)))["metadata"]["resourceVersion"]
    for n in (10, 25, 40, 60):  # no waiting in between
        merge_patch(api, rs_path(namespace, "web"), {"spec": {"replicas": n}})
    wait_for(sampler(lambda: len(active_pods(api, namespace)) == 60, violations, over), 60, interval=0.1,
             what="60 pods")
    assert pod_changes_since(api, namespace, start) == (60, 0)

    # upstream's event correlation: 9 events, then one combined event counting the rest, until the
    # controller's 25 events about the ReplicaSet are spent
    def creates() -> list[dict[str, Any]]:
        return events(api, namespace, "SuccessfulCreate", "web")

    wait_for(lambda: any(e["count"] == 16 for e in creates()), 15, what="the combined event's count of 16")
    single = [e for e in creates() if e["count"] == 1]
    combined = [e for e in creates() if e["count"] > 1]
    assert len(single) == 9 and all(re.fullmatch(r"Created pod: web-\w+", e["message"]) for e in single)
    assert len(combined) == 1
    assert re.fullmatch(r"\(combined from similar events\): Created pod: web-\w+", combined[0]["message"])

    scaled = ok(api.get(pods_path(namespace)))["metadata"]["resourceVersion"]
    for n in (45, 30, 20):
        merge_patch(api, rs_path(namespace, "web"), {"spec": {"replicas": n}})
    ceiling[0] = 60
    wait_for(sampler(lambda: len(active_pods(api, namespace)) == 20, violations, over), 60, interval=0.1,
             what="20 pods")
    wait_for(lambda: ok(api.get(rs_path(namespace, "web")))["status"].get("replicas") == 20, 10, what="status 20")
    wait_for(lambda: pod_changes_since(api, namespace, scaled)[1] == 40, 15, what="40 pods deleted")
    assert pod_changes_since(api, namespace, scaled) == (0, 40)
    assert len(active_pods(api, namespace)) == 20
    assert violations == []
    # the burst of 25 is spent: the deletes write nothing about the ReplicaSet for five minutes
    assert events(api, namespace, "SuccessfulDelete", "web") == []


def test_available_replicas_honour_min_ready_seconds(api: httpx.Client, namespace: str,
                                                     cm: ControllerProcess) -> None:
    ok(api.post(rs_path(namespace), json=replicaset("web", 2, min_ready_seconds=2)))
    wait_for(lambda: len(active_pods(api, namespace)) == 2, 15, what="2 pods")
    marked_at = dt.datetime.now(dt.UTC)
    for p in active_pods(api, namespace):
        set_pod_status(api, p)

    def status() -> dict[str, Any]:
        return ok(api.get(rs_path(namespace, "web")))["status"]

    wait_for(lambda: status().get("readyReplicas") == 2, 10, what="2 ready")
    if dt.datetime.now(dt.UTC) - marked_at < dt.timedelta(seconds=1):
        assert status().get("availableReplicas", 0) == 0  # ready, but not for 2s yet
    wait_for(lambda: status().get("availableReplicas") == 2, 10, what="2 available after minReadySeconds")
