"""The DaemonSet controller's pure parts: node eligibility (nodeSelector, affinity, taints against the
template's and the daemon tolerations), the tolerations and node affinity every daemon pod gets, which
pods are up to date, the rolling update's picks, and the revision history."""

from __future__ import annotations

from typing import Any

from controllers.daemon.history import matches, new_revision, revision_hash, revision_patch, revisions_to_prune
from controllers.daemon.util import (
    FailedPodsBackoff,
    add_daemon_tolerations,
    add_or_update_tolerations,
    node_name_affinity,
    node_should_run_daemon_pod,
    rolling_update_with_surge,
    rolling_update_without_surge,
    surge_and_unavailable,
    target_node_name,
)
from machinery.api.apps_v1 import ControllerRevision, DaemonSet
from machinery.api.core_v1 import Affinity, Node, Pod, PodSpec, Toleration
from machinery.nodeaffinity import RequiredNodeAffinity

HASH = "new"


def ds(template_spec: dict[str, Any] | None = None, strategy: dict[str, Any] | None = None,
       annotations: dict[str, str] | None = None) -> DaemonSet:
    labels = {"app": "agent"}
    return DaemonSet.model_validate({
        "metadata": {"name": "agent", "namespace": "default", "uid": "ds-uid",
                     "annotations": annotations or {"deprecated.daemonset.template.generation": "2"}},
        "spec": {"selector": {"matchLabels": labels},
                 "updateStrategy": strategy or {"type": "RollingUpdate",
                                                "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}},
                 "template": {"metadata": {"labels": labels},
                              "spec": {"containers": [{"name": "c", "image": "busybox"}], **(template_spec or {})}}},
    })


def node(name: str, labels: dict[str, str] | None = None, taints: list[dict[str, str]] | None = None) -> Node:
    return Node.model_validate({"metadata": {"name": name, "labels": labels or {}},
                                "spec": {"taints": taints} if taints else {}})


def pod(name: str, node_name: str, hash_: str, ready: bool = True, generation: str = "1") -> Pod:
    return Pod.model_validate({
        "metadata": {"name": name, "labels": {"controller-revision-hash": hash_, "pod-template-generation": generation},
                     "creationTimestamp": f"2026-11-24T00:00:0{len(name) % 10}Z"},
        "spec": {"nodeName": node_name, "containers": [{"name": "c", "image": "busybox"}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    })


def ready(p: Pod) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in (p.status.conditions if p.status else None) or [])


# -- eligibility ------------------------------------------------------------------------------


def test_every_untainted_node_runs_one() -> None:
    assert node_should_run_daemon_pod(node("a"), ds()) == (True, True)


def test_node_selector_and_required_affinity_rule_nodes_out() -> None:
    selective = ds({"nodeSelector": {"disk": "ssd"}})
    assert node_should_run_daemon_pod(node("a", {"disk": "ssd"}), selective) == (True, True)
    assert node_should_run_daemon_pod(node("b", {"disk": "hdd"}), selective) == (False, False)
    affinity = ds({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]}]}}}})
    assert node_should_run_daemon_pod(node("a", {"zone": "z1"}), affinity) == (True, True)
    assert node_should_run_daemon_pod(node("b", {"zone": "z2"}), affinity) == (False, False)


def test_untolerated_no_schedule_keeps_new_pods_off_but_running_ones_stay() -> None:
    tainted = node("a", taints=[{"key": "dedicated", "value": "db", "effect": "NoSchedule"}])
    assert node_should_run_daemon_pod(tainted, ds()) == (False, True)
    tolerant = ds({"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "db", "effect": "NoSchedule"}]})
    assert node_should_run_daemon_pod(tainted, tolerant) == (True, True)


def test_untolerated_no_execute_evicts() -> None:
    tainted = node("a", taints=[{"key": "dedicated", "effect": "NoExecute"}])
    assert node_should_run_daemon_pod(tainted, ds()) == (False, False)


def test_daemon_tolerations_cover_cordoned_not_ready_and_pressure() -> None:
    for key, effect in [("node.kubernetes.io/unschedulable", "NoSchedule"),
                        ("node.kubernetes.io/not-ready", "NoExecute"),
                        ("node.kubernetes.io/unreachable", "NoExecute"),
                        ("node.kubernetes.io/disk-pressure", "NoSchedule"),
                        ("node.kubernetes.io/memory-pressure", "NoSchedule"),
                        ("node.kubernetes.io/pid-pressure", "NoSchedule")]:
        assert node_should_run_daemon_pod(node("a", taints=[{"key": key, "effect": effect}]), ds()) == (True, True)
    unavailable = node("a", taints=[{"key": "node.kubernetes.io/network-unavailable", "effect": "NoSchedule"}])
    assert node_should_run_daemon_pod(unavailable, ds()) == (False, True)
    assert node_should_run_daemon_pod(unavailable, ds({"hostNetwork": True})) == (True, True)


def test_tolerations_added_once_and_replacing_matching_ones() -> None:
    spec = PodSpec.model_validate({"containers": [{"name": "c", "image": "x"}], "tolerations": [
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 5},
        {"key": "mine", "operator": "Exists"}]})
    out = add_daemon_tolerations(spec).tolerations or []
    keys = [(t.key, t.effect) for t in out]
    assert keys == [("node.kubernetes.io/not-ready", "NoExecute"), ("mine", None),
                    ("node.kubernetes.io/unreachable", "NoExecute"), ("node.kubernetes.io/disk-pressure", "NoSchedule"),
                    ("node.kubernetes.io/memory-pressure", "NoSchedule"), ("node.kubernetes.io/pid-pressure",
                                                                           "NoSchedule"),
                    ("node.kubernetes.io/unschedulable", "NoSchedule")]
    assert out[0].toleration_seconds is None  # the daemon's own wins: never evicted for not-ready
    twice = add_or_update_tolerations(out, [Toleration(key="mine", operator="Exists")])
    assert len(twice) == len(out)


def test_pods_are_pinned_by_node_affinity_not_node_name() -> None:
    preferred = {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "preference": {"matchExpressions": [{"key": "k", "operator": "Exists"}]}}]}
    template = Affinity.model_validate({"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]}]}, **preferred}})
    affinity = node_name_affinity(template, "node-1")
    assert affinity.to_dict()["nodeAffinity"] == {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}]}, **preferred}
    pinned = Pod.model_validate({"spec": {"containers": [{"name": "c", "image": "x"}],
                                          "affinity": affinity.to_dict()}})
    assert target_node_name(pinned) == "node-1"
    required = RequiredNodeAffinity(pinned)
    assert required.matches({}, "node-1") and not required.matches({"zone": "z1"}, "node-2")


# -- rolling update ---------------------------------------------------------------------------


def test_max_unavailable_one_replaces_one_node_at_a_time() -> None:
    nodes = {"a": [pod("pa", "a", "old")], "b": [pod("pb", "b", "old")], "c": [pod("pc", "c", "old")]}
    doomed = rolling_update_without_surge(ds(), nodes, HASH, 1, ready)
    assert [p.metadata.name for p in doomed] == ["pa"]
    # a is replaced but not ready yet: nothing more may go
    nodes["a"] = [pod("pa2", "a", HASH, ready=False)]
    assert rolling_update_without_surge(ds(), nodes, HASH, 1, ready) == []
    nodes["a"] = [pod("pa2", "a", HASH)]
    assert [p.metadata.name for p in rolling_update_without_surge(ds(), nodes, HASH, 1, ready)] == ["pb"]


def test_a_node_without_a_pod_counts_as_unavailable() -> None:
    nodes: dict[str, list[Pod]] = {"a": [], "b": [pod("pb", "b", "old")]}
    assert rolling_update_without_surge(ds(), nodes, HASH, 1, ready) == []


def test_unavailable_old_pods_are_always_replaced() -> None:
    nodes = {"a": [pod("pa", "a", "old", ready=False)], "b": [pod("pb", "b", "old", ready=False)],
             "c": [pod("pc", "c", "old")]}
    assert [p.metadata.name for p in rolling_update_without_surge(ds(), nodes, HASH, 1, ready)] == ["pa", "pb"]


def test_template_generation_counts_as_updated() -> None:
    nodes = {"a": [pod("pa", "a", "other-hash", generation="2")]}
    assert rolling_update_without_surge(ds(), nodes, HASH, 1, ready) == []


def test_surge_creates_first_and_deletes_old_once_new_is_available() -> None:
    surge = ds(strategy={"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}})
    nodes = {"a": [pod("pa", "a", "old")], "b": [pod("pb", "b", "old")]}
    assert rolling_update_with_surge(surge, nodes, HASH, 1, ready, lambda n: True) == ([], ["a"])
    nodes["a"].append(pod("pa2", "a", HASH, ready=False))
    assert rolling_update_with_surge(surge, nodes, HASH, 1, ready, lambda n: True) == ([], [])
    nodes["a"][1] = pod("pa2", "a", HASH)
    old, create = rolling_update_with_surge(surge, nodes, HASH, 1, ready, lambda n: True)
    assert [p.metadata.name for p in old] == ["pa"] and create == ["b"]  # a's new pod no longer surges


def test_surge_and_unavailable_scale_with_desired() -> None:
    percent = ds(strategy={"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "30%", "maxSurge": 0}})
    assert surge_and_unavailable(percent, 10) == (0, 3)
    assert surge_and_unavailable(percent, 2) == (0, 1)  # 0 of each would stall: one may go
    surge = ds(strategy={"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": "10%"}})
    assert surge_and_unavailable(surge, 15) == (2, 0)


# -- history ----------------------------------------------------------------------------------


def test_revision_holds_the_replace_patch_and_hash_label() -> None:
    d = ds()
    hash_ = revision_hash(d)
    revision = new_revision(d, hash_, 3)
    assert revision.metadata.name == f"agent-{hash_}"
    assert revision.revision == 3
    assert revision.metadata.labels == {"app": "agent", "controller-revision-hash": hash_}
    assert revision.data == {"spec": {"template": {**d.spec.template.to_dict(), "$patch": "replace"}}}  # type: ignore[union-attr]
    assert matches(d, revision)
    changed = ds({"hostNetwork": True})
    assert not matches(changed, revision) and revision_hash(changed) != hash_
    assert revision_patch(d) == revision.data


def test_pruning_keeps_the_limit_and_revisions_pods_still_run() -> None:
    d = ds()
    d.spec.revision_history_limit = 1  # type: ignore[union-attr]
    old = [ControllerRevision.model_validate({"metadata": {"name": f"r{i}", "labels": {"controller-revision-hash":
                                                                                       f"h{i}"}}, "revision": i})
           for i in (1, 2, 3)]
    live = [pod("p", "a", "h1")]
    assert [r.metadata.name for r in revisions_to_prune(d, old, live)] == ["r2", "r3"]
    assert [r.metadata.name for r in revisions_to_prune(d, old, [])] == ["r1", "r2"]


def test_registered_under_upstream_name_and_account() -> None:
    from controllers.manager import CONTROLLERS, enabled_controllers, parse_args

    assert CONTROLLERS["daemonset"].service_account == "daemon-set-controller"
    assert enabled_controllers(["daemonset-controller"]) == ["daemonset"]
    assert "daemonset" in enabled_controllers(["*"])
    assert parse_args(["--concurrent-daemonset-syncs", "3"]).concurrent_daemonset_syncs == 3


def test_a_failed_daemon_pod_is_replaced_at_once_then_after_a_doubling_window_per_node_and_generation() -> None:
    now = [1000.0]
    backoff = FailedPodsBackoff(clock=lambda: now[0])
    daemon = ds()
    assert backoff.admit(daemon, "n1") is None  # the first failure: delete (and re-create) now
    assert backoff.admit(daemon, "n1") == 1.0  # failed again at once: wait out 1 s
    assert backoff.admit(daemon, "n2") is None  # another node has its own window
    now[0] += 1.0
    assert backoff.admit(daemon, "n1") is None  # window passed: delete, and the window doubles
    now[0] += 1.5
    assert backoff.admit(daemon, "n1") == 0.5
    next_generation = DaemonSet.model_validate({**daemon.model_dump(by_alias=True, exclude_none=True),
                                                "status": {"observedGeneration": 3, "currentNumberScheduled": 0,
                                                           "numberMisscheduled": 0, "desiredNumberScheduled": 0,
                                                           "numberReady": 0}})
    assert backoff.admit(next_generation, "n1") is None  # a new generation starts over
    for _ in range(15):  # failing again each time the window has passed: it doubles up to 15 min
        now[0] += 1000
        assert backoff.admit(daemon, "n1") is None
    assert backoff.admit(daemon, "n1") == FailedPodsBackoff.CAP
    now[0] += 2 * FailedPodsBackoff.CAP + 1  # quiet for twice the cap: forgotten
    assert backoff.admit(daemon, "n1") is None
    assert backoff.admit(daemon, "n1") == FailedPodsBackoff.BASE
