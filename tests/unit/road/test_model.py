"""road/model.py: spans and Events joined into roads — which object a span is about (its own attributes, else
its nearest ancestor's, even when the child comes first), reads left out, watch deliveries joined to their
write with their delay, SLO marks, the Deployment → ReplicaSet → Pod tree, causal order and the bounds."""

from __future__ import annotations

from typing import Any

from machinery.api.road_v1alpha1 import flatten
from road.model import Span, Store, settled

T0 = 1_700_000_000.0
DEPLOY = {"k8s.object.uid": "d1", "k8s.object.kind": "Deployment", "k8s.object.api_version": "apps/v1",
          "k8s.object.namespace": "default", "k8s.object.name": "web"}
RS = {"k8s.object.uid": "r1", "k8s.object.kind": "ReplicaSet", "k8s.object.api_version": "apps/v1",
      "k8s.object.namespace": "default", "k8s.object.name": "web-abc",
      "k8s.owner.uid": "d1", "k8s.owner.kind": "Deployment", "k8s.owner.name": "web"}
POD = {"k8s.object.uid": "p1", "k8s.object.kind": "Pod", "k8s.object.api_version": "v1",
       "k8s.object.namespace": "default", "k8s.object.name": "web-abc-x",
       "k8s.owner.uid": "r1", "k8s.owner.kind": "ReplicaSet", "k8s.owner.name": "web-abc"}
APISERVER = {"service.name": "kube-apiserver"}
_ids = iter(range(1, 10_000))


def span(name: str, start: float, end: float, attrs: dict[str, Any] | None = None, parent: str = "",
         service: str = "kube-apiserver", span_id: str | None = None, **resource: Any) -> Span:
    return Span("t" * 32, span_id or f"{next(_ids):016x}", parent, name, "INTERNAL", T0 + start, T0 + end,
                dict(attrs or {}), {"service.name": service, **resource})


def request(verb: str, start: float, end: float, obj: dict[str, Any], user: str, revision: int | None = None,
            resource: str = "deployments", **kw: Any) -> Span:
    attrs = {**obj, "k8s.verb": verb, "k8s.resource": resource, "enduser.id": user,
             "http.response.status_code": 201 if verb == "create" else 200}
    if revision is not None:
        attrs["k8s.etcd.revision"] = revision
        attrs["k8s.object.resource_version"] = str(revision)
    return span("apiserver.request", start, end, attrs, **kw)


def clock() -> float:
    return T0 + 100


def test_a_child_that_comes_before_its_parent_joins_the_parents_object() -> None:
    store = Store(clock=clock)
    parent = span("kubelet.sync_pod", 1.0, 2.0, POD, service="kubelet", **{"k8s.node.name": "node-1"})
    child = span("kubelet.run_pod_sandbox", 1.1, 1.5, {"k8s.pod.ip": "10.244.1.5"}, parent=parent.span_id,
                 service="kubelet", **{"k8s.node.name": "node-1"})
    grandchild = span("cri.RunPodSandbox", 1.2, 1.4, {}, parent=child.span_id, service="dockershim")
    assert store.add_spans([grandchild, child]) == set()
    assert store.pending_count() == 2
    assert store.add_spans([parent]) == {"p1"}
    assert store.pending_count() == 0
    steps = store.road("p1")["steps"]
    assert [s["step"] for s in steps] == ["sync pod (?)", "run sandbox (IP 10.244.1.5)", "CRI RunPodSandbox"]
    assert [s["level"] for s in steps] == [0, 1, 2]
    assert steps[0]["lane"] == "kubelet/node-1" and steps[2]["lane"] == "dockershim"


def test_reads_are_no_steps_nor_their_children() -> None:
    store = Store(clock=clock)
    get = request("get", 0.0, 0.1, DEPLOY, "kubernetes-admin")
    etcd = span("apiserver.etcd", 0.01, 0.02, {"k8s.etcd.op": "range"}, parent=get.span_id)
    create = request("create", 1.0, 1.2, DEPLOY, "kubernetes-admin", revision=7)
    store.add_spans([etcd, get, create])
    steps = store.road("d1")["steps"]
    assert [s["id"] for s in steps] == [create.span_id]
    assert store.pending_count() == 0


def test_watch_delivery_joined_to_its_write_with_the_delay_from_the_etcd_commit() -> None:
    store = Store(clock=clock)
    create = request("create", 1.0, 1.30, DEPLOY, "kubernetes-admin", revision=42)
    commit = span("apiserver.etcd", 1.10, 1.20, {"k8s.etcd.op": "txn", "k8s.etcd.revision": 42},
                  parent=create.span_id)
    delivered = span("informer.event", 1.25, 1.26, {**DEPLOY, "k8s.watch.event_type": "ADDED",
                                                    "k8s.resource": "deployments",
                                                    "k8s.object.resource_version": "42"},
                     service="kube-controller-manager")
    other = span("informer.event", 1.27, 1.28, {**DEPLOY, "k8s.watch.event_type": "MODIFIED",
                                                "k8s.object.resource_version": "43"}, service="kube-scheduler")
    store.add_spans([delivered, other, commit, create])  # the delivery may arrive before the write
    steps = {s["id"]: s for s in store.road("d1")["steps"]}
    watch = steps[delivered.span_id]
    assert watch["cause"] == create.span_id
    assert abs(watch["delay"] - 0.05) < 1e-6  # from the commit (1.20), not the request's end (1.30)
    assert watch["lane"] == "kube-controller-manager" and watch["step"] == "watch ADDED deployments"
    assert "delay" not in steps[other.span_id]  # revision 43 was never written here
    assert steps[commit.span_id]["parent"] == create.span_id


def test_slo_marks_mutating_calls_and_pod_startup() -> None:
    store = Store(clock=clock)
    slow = request("patch", 0.0, 1.5, DEPLOY, "kubernetes-admin", revision=3)
    fast = request("update", 2.0, 2.1, DEPLOY, "kubernetes-admin", revision=4)
    created = request("create", 10.0, 10.1, POD, "system:serviceaccount:kube-system:replicaset-controller",
                      revision=5, resource="pods")
    pending = span("kubelet.status", 11.0, 11.1, {**POD, "k8s.pod.phase": "Pending"}, service="kubelet")
    running = span("kubelet.status", 13.0, 13.2, {**POD, "k8s.pod.phase": "Running", "k8s.pod.ready": True},
                   service="kubelet")
    late = span("kubelet.status", 20.0, 20.1, {**POD, "k8s.pod.phase": "Running"}, service="kubelet")
    store.add_spans([slow, fast, created, pending, running, late])
    d = {s["id"]: s for s in store.road("d1")["steps"]}
    assert d[slow.span_id]["slo"]["met"] is False and d[fast.span_id]["slo"]["met"] is True
    assert d[slow.span_id]["slo"]["name"] == "mutating-api-call-latency"
    p = {s["id"]: s for s in store.road("p1")["steps"]}
    assert abs(p[running.span_id]["slo"]["seconds"] - 3.2) < 1e-6 and p[running.span_id]["slo"]["met"] is True
    assert "slo" not in p[pending.span_id] and "slo" not in p[late.span_id]  # only the first Running
    assert p[running.span_id]["step"] == "status Running, Ready"


def test_the_tree_of_roads_in_causal_order_with_offsets_from_the_first_step() -> None:
    store = Store(clock=clock)
    spans = [
        request("create", 0.0, 0.1, DEPLOY, "kubernetes-admin", revision=1),
        span("controller.sync", 0.2, 0.5, {**DEPLOY, "k8s.controller": "deployment", "k8s.sync.result": "ok"},
             service="kube-controller-manager", span_id="s-deploy"),
        request("create", 0.3, 0.35, RS, "system:serviceaccount:kube-system:deployment-controller", revision=2,
                resource="replicasets", parent="s-deploy"),
        span("controller.sync", 0.6, 0.9, {**RS, "k8s.controller": "replicaset", "k8s.sync.result": "ok"},
             service="kube-controller-manager", span_id="s-rs"),
        request("create", 0.7, 0.75, POD, "system:serviceaccount:kube-system:replicaset-controller", revision=3,
                resource="pods", parent="s-rs"),
        span("scheduler.schedule_pod", 1.0, 1.2, {**POD, "k8s.scheduler.result": "scheduled",
                                                  "k8s.scheduler.selected_node": "node-2"},
             service="kube-scheduler"),
    ]
    store.add_spans(reversed(spans))
    road = store.road("d1")
    assert road["object"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": "d1",
                              "namespace": "default"}
    assert [r["object"]["name"] for r in road["roads"]] == ["web-abc"]
    assert [r["object"]["name"] for r in road["roads"][0]["roads"]] == ["web-abc-x"]
    flat = flatten(road)
    assert [(s["object"]["kind"], s["step"]) for s in flat] == [
        ("Deployment", "create deployments → 201"), ("Deployment", "sync deployment: ok"),
        ("ReplicaSet", "create replicasets → 201"), ("ReplicaSet", "sync replicaset: ok"),
        ("Pod", "create pods → 201"), ("Pod", "schedule: scheduled → node-2")]
    assert [s["depth"] for s in flat] == [0, 0, 1, 1, 2, 2]
    assert flat[0]["offset"] == 0.0 and abs(flat[-1]["offset"] - 1.0) < 1e-6
    assert flat[2]["lane"] == "system:serviceaccount:kube-system:deployment-controller"
    assert road["status"]["objects"] == 3 and road["status"]["steps"] == 6


def test_events_are_steps_and_update_in_place() -> None:
    store = Store(clock=clock)
    event = {"metadata": {"uid": "e1", "creationTimestamp": "2023-11-14T22:13:25Z"},
             "involvedObject": {"uid": "p1", "kind": "Pod", "name": "web-abc-x", "namespace": "default"},
             "reason": "Scheduled", "message": "Successfully assigned default/web-abc-x to node-1",
             "source": {"component": "default-scheduler"}, "type": "Normal", "count": 1,
             "eventTime": "2023-11-14T22:13:21.500000Z"}
    assert store.add_event(event) == "p1"
    assert store.add_event({**event, "count": 2}) == "p1"
    steps = store.road("p1")["steps"]
    assert len(steps) == 1
    assert steps[0]["step"] == "event Scheduled" and steps[0]["lane"] == "default-scheduler"
    assert steps[0]["details"]["count"] == "2" and steps[0]["source"] == "event"
    assert store.add_event({"metadata": {}, "involvedObject": {}}) is None


def test_bounds_evict_the_oldest_steps_and_the_road_updated_longest_ago() -> None:
    now = [T0]
    store = Store(max_objects=3, max_steps=4, max_pending=2, clock=lambda: now[0])
    for i in range(6):
        now[0] += 1
        store.add_spans([span("kubelet.probe", i, i + 0.1, {**POD, "k8s.probe.result": "success"},
                              span_id=f"probe{i}", service="kubelet")])
    assert store.step_count("p1") == 4 and store.evicted_steps == 2
    assert [s["id"] for s in store.road("p1")["steps"]] == ["probe2", "probe3", "probe4", "probe5"]
    for uid in ("a", "b", "c"):
        now[0] += 1
        store.add_spans([span("kubelet.sync_pod", 0, 1, {**POD, "k8s.object.uid": uid, "k8s.object.name": uid,
                                                         "k8s.owner.uid": ""})])
    assert len(store) == 3 and store.ref("p1") is None  # p1 and its owner r1 (unknown but recorded) went first
    assert store.uid_for("Pod", "default", "web-abc-x") is None and store.uid_for("Pod", "default", "c") == "c"
    orphans = [span("apiserver.etcd", 0, 1, {}, parent=f"missing{i}") for i in range(3)]
    store.add_spans(orphans)
    assert store.pending_count() == 2 and store.dropped_pending == 1


def test_status_done_when_settled_and_quiet_or_long_quiet() -> None:
    now = [T0]
    store = Store(clock=lambda: now[0])
    store.add_spans([span("kubelet.status", 0, 0.1, {**POD, "k8s.pod.phase": "Running"}, service="kubelet")])
    pod = {"kind": "Pod", "metadata": {"uid": "p1", "name": "web-abc-x", "namespace": "default"},
           "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}]}}
    store.observe(pod)
    assert store.road("p1", now=T0 + 1)["status"]["phase"] == "InProgress"
    pod["status"]["conditions"][0]["status"] = "True"
    assert store.road("p1", now=T0 + 0.1)["status"]["phase"] == "InProgress"  # a step came just now
    assert store.road("p1", now=T0 + 1)["status"]["phase"] == "Done"
    pod["status"]["conditions"][0]["status"] = "False"
    assert store.road("p1", now=T0 + 11)["status"]["phase"] == "Done"  # quiet for 10 s


def test_settled_by_kind() -> None:
    deploy = {"kind": "Deployment", "metadata": {"generation": 2}, "spec": {"replicas": 3},
              "status": {"observedGeneration": 2, "replicas": 3, "readyReplicas": 3, "availableReplicas": 3,
                         "updatedReplicas": 3}}
    assert settled(deploy) is True
    assert settled({**deploy, "status": {**deploy["status"], "updatedReplicas": 2}}) is False
    assert settled({**deploy, "metadata": {"generation": 3}}) is False
    assert settled({"kind": "Pod", "status": {"phase": "Succeeded"}}) is True
    assert settled({"kind": "Service"}) is None
