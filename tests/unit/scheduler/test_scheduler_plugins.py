"""Scheduler plugins as pure functions on plain Pod/Node objects, and the framework that runs them."""

from __future__ import annotations

import random
from typing import Any

import pytest

from machinery.api.core_v1 import Node, Pod
from scheduler import framework
from scheduler.cache import Cache
from scheduler.framework import (
    DEFAULT_MEMORY_REQUEST,
    DEFAULT_MILLI_CPU_REQUEST,
    Code,
    FitError,
    HostPortInfo,
    NodeInfo,
    PodInfo,
    Snapshot,
    Status,
    default_normalize_score,
    num_feasible_nodes_to_find,
    pod_requests,
)
from scheduler.plugins import default_framework
from scheduler.plugins.node_affinity import node_affinity, node_affinity_normalize, node_affinity_score
from scheduler.plugins.node_name import node_name
from scheduler.plugins.node_ports import node_ports
from scheduler.plugins.node_ready import node_ready
from scheduler.plugins.node_resources import (
    balanced_allocation_score,
    least_allocated_score,
    node_resources_fit,
)
from scheduler.plugins.node_unschedulable import node_unschedulable
from scheduler.plugins.selector_spread import selector_spread_normalize, selector_spread_score
from scheduler.plugins.taint_toleration import taint_toleration, taint_toleration_normalize, taint_toleration_score

# -- builders -----------------------------------------------------------------------------------

_seq = iter(range(1, 1_000_000))


def make_node(name: str = "node-1", *, cpu: str = "4", memory: str = "8Gi", pods: str = "110",
              labels: dict[str, str] | None = None, taints: list[dict[str, Any]] | None = None,
              unschedulable: bool = False, ready: str | None = "True",
              extra: dict[str, str] | None = None) -> Node:
    allocatable = {"cpu": cpu, "memory": memory, "pods": pods, **(extra or {})}
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    status: dict[str, Any] = {"allocatable": allocatable, "capacity": allocatable}
    if ready is not None:
        status["conditions"] = [{"type": "Ready", "status": ready}]
    return Node.from_dict({"apiVersion": "v1", "kind": "Node",
                           "metadata": {"name": name, "labels": labels or {}}, "spec": spec, "status": status})


def container(name: str = "c", *, cpu: str | None = None, memory: str | None = None,
              host_port: int | None = None, host_ip: str | None = None, protocol: str | None = None,
              restart_policy: str | None = None) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "image": "nginx"}
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    if requests:
        c["resources"] = {"requests": requests}
    if host_port is not None:
        port: dict[str, Any] = {"containerPort": 80, "hostPort": host_port}
        if host_ip:
            port["hostIP"] = host_ip
        if protocol:
            port["protocol"] = protocol
        c["ports"] = [port]
    if restart_policy:
        c["restartPolicy"] = restart_policy
    return c


def make_pod(name: str = "p", *, cpu: str | None = None, memory: str | None = None,
             containers: list[dict[str, Any]] | None = None, init_containers: list[dict[str, Any]] | None = None,
             node_selector: dict[str, str] | None = None, affinity: dict[str, Any] | None = None,
             tolerations: list[dict[str, Any]] | None = None, node_name: str | None = None,
             owner: str | None = None, priority: int | None = None, namespace: str = "default",
             overhead: dict[str, str] | None = None, **extra_spec: Any) -> PodInfo:
    spec: dict[str, Any] = {"containers": containers or [container(cpu=cpu, memory=memory)]}
    if init_containers:
        spec["initContainers"] = init_containers
    if node_selector:
        spec["nodeSelector"] = node_selector
    if affinity:
        spec["affinity"] = affinity
    if tolerations:
        spec["tolerations"] = tolerations
    if node_name:
        spec["nodeName"] = node_name
    if priority is not None:
        spec["priority"] = priority
    if overhead:
        spec["overhead"] = overhead
    spec.update(extra_spec)
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"uid-{name}-{next(_seq)}"}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner,
                                    "uid": f"rs-{owner}", "controller": True}]
    return PodInfo(Pod.from_dict({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}))


def node_info(node: Node | None = None, *pods: PodInfo) -> NodeInfo:
    return NodeInfo.build(node or make_node(), pods)


def required_affinity(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}


# -- requests -----------------------------------------------------------------------------------


def test_pod_requests_sum_containers_and_take_init_max() -> None:
    pod = make_pod(containers=[container("a", cpu="100m", memory="100Mi"), container("b", cpu="200m")],
                   init_containers=[container("i1", cpu="500m", memory="50Mi"), container("i2", memory="1Gi")])
    r = pod_requests(pod.pod)
    assert r.milli_cpu == 500  # max(100+200, 500)
    assert r.memory == 1024 ** 3  # max(100Mi, 50Mi, 1Gi)


def test_pod_requests_sidecars_add_to_containers_and_to_later_init_steps() -> None:
    pod = make_pod(containers=[container("a", cpu="100m")],
                   init_containers=[container("side", cpu="200m", restart_policy="Always"),
                                    container("init", cpu="250m")])
    # containers + sidecar = 300m; init step after the sidecar started = 250m + 200m = 450m
    assert pod_requests(pod.pod).milli_cpu == 450


def test_pod_requests_overhead_and_quantity_forms() -> None:
    pod = make_pod(cpu="1.5", memory="1G", overhead={"cpu": "250m", "memory": "10Mi"})
    r = pod_requests(pod.pod)
    assert r.milli_cpu == 1750
    assert r.memory == 10 ** 9 + 10 * 1024 ** 2


def test_non_zero_requests_default_only_missing_values() -> None:
    assert pod_requests(make_pod().pod, non_missing=True).milli_cpu == DEFAULT_MILLI_CPU_REQUEST
    assert pod_requests(make_pod().pod, non_missing=True).memory == DEFAULT_MEMORY_REQUEST
    explicit = make_pod(cpu="0", memory="1Mi")
    assert pod_requests(explicit.pod, non_missing=True).milli_cpu == 0
    assert pod_requests(explicit.pod, non_missing=True).memory == 1024 ** 2


def test_node_info_tracks_requests_ports_and_owners() -> None:
    a = make_pod("a", cpu="1", memory="1Gi", owner="rs")
    b = make_pod("b", containers=[container(host_port=80)], owner="rs")
    info = node_info(make_node(), a, b)
    assert info.requested.milli_cpu == 1000
    assert info.non_zero_requested.milli_cpu == 1000 + DEFAULT_MILLI_CPU_REQUEST
    assert info.owner_counts[("default", "rs-rs")] == 2
    assert info.used_ports.conflicts("0.0.0.0", "TCP", 80)
    info.remove_pod(b)
    assert info.owner_counts[("default", "rs-rs")] == 1
    assert not info.used_ports.conflicts("0.0.0.0", "TCP", 80)
    info.remove_pod(a)
    assert info.requested.milli_cpu == 0 and not info.pods and not info.owner_counts


def test_pods_that_request_the_same_share_one_requests_object(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(framework, "_SHARED_RESOURCES", {})
    a, b = make_pod("a", cpu="100m", memory="10Mi"), make_pod("b", cpu="100m", memory="10Mi")
    other = make_pod("c", cpu="200m", memory="10Mi")
    assert a.requests is b.requests and a.non_zero_requests is b.non_zero_requests  # issue 19: one per shape
    assert other.requests is not a.requests and other.requests.milli_cpu == 200
    info = node_info(make_node(), a, b, other)  # the node adds them into its own sums
    assert info.requested.milli_cpu == 400 and a.requests.milli_cpu == 100 and a.requests.memory == 10 * 1024 ** 2
    info.remove_pod(a)
    assert b.requests.milli_cpu == 100 and info.requested.milli_cpu == 300
    monkeypatch.setattr(framework, "_SHARED_RESOURCES_MAX", 2)  # bounded: past it the table starts again
    for cpu in ("1", "2", "3"):
        assert make_pod(cpu=cpu).requests.milli_cpu == int(cpu) * 1000
    assert len(framework._SHARED_RESOURCES) <= 2


# -- filters ------------------------------------------------------------------------------------


def test_fit_insufficient_cpu_and_memory() -> None:
    info = node_info(make_node(cpu="2", memory="2Gi"), make_pod("x", cpu="1500m", memory="1Gi"))
    assert node_resources_fit(make_pod(cpu="500m", memory="1Gi"), info).is_success
    status = node_resources_fit(make_pod(cpu="600m", memory="2Gi"), info)
    assert status.code == Code.UNSCHEDULABLE
    assert status.reasons == ("Insufficient cpu", "Insufficient memory")


def test_fit_counts_pods_and_ignores_zero_requests() -> None:
    info = node_info(make_node(pods="1"), make_pod("x"))
    assert node_resources_fit(make_pod(), info).reasons == ("Too many pods",)
    # a best-effort pod fits a node whose cpu is all taken
    full = node_info(make_node(cpu="1"), make_pod("x", cpu="1"))
    assert node_resources_fit(make_pod(), full).is_success


def test_fit_uses_init_container_max_rule_and_scalar_resources() -> None:
    info = node_info(make_node(cpu="1", extra={"example.com/gpu": "1"}))
    big_init = make_pod(containers=[container(cpu="100m")], init_containers=[container("i", cpu="2")])
    assert node_resources_fit(big_init, info).reasons == ("Insufficient cpu",)
    gpu = make_pod(containers=[{"name": "c", "image": "x", "resources": {"requests": {"example.com/gpu": "2"}}}])
    assert node_resources_fit(gpu, info).reasons == ("Insufficient example.com/gpu",)


def test_node_name_filter() -> None:
    assert node_name(make_pod(), node_info()).is_success
    assert node_name(make_pod(node_name="node-1"), node_info()).is_success
    status = node_name(make_pod(node_name="other"), node_info())
    assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.reasons == ("node(s) didn't match the requested node name",)


def test_node_unschedulable_unless_tolerated() -> None:
    cordoned = node_info(make_node(unschedulable=True))
    assert node_unschedulable(make_pod(), cordoned).reasons == ("node(s) were unschedulable",)
    tolerant = make_pod(tolerations=[{"key": "node.kubernetes.io/unschedulable", "operator": "Exists",
                                      "effect": "NoSchedule"}])
    assert node_unschedulable(tolerant, cordoned).is_success
    assert node_unschedulable(make_pod(), node_info()).is_success


@pytest.mark.parametrize(("ready", "taint"), [("False", "node.kubernetes.io/not-ready"),
                                               (None, "node.kubernetes.io/not-ready"),
                                               ("Unknown", "node.kubernetes.io/unreachable")])
def test_node_ready_reads_condition_as_taint(ready: str | None, taint: str) -> None:
    info = node_info(make_node(ready=ready))
    status = node_ready(make_pod(), info)
    assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.reasons == (f"node(s) had untolerated taint {{{taint}: }}",)
    tolerant = make_pod(tolerations=[{"key": taint, "operator": "Exists"}])
    assert node_ready(tolerant, info).is_success
    assert node_ready(make_pod(), node_info(make_node(ready="True"))).is_success


def test_taint_toleration_filter() -> None:
    info = node_info(make_node(taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
                                       {"key": "soft", "effect": "PreferNoSchedule"}]))
    status = taint_toleration(make_pod(), info)
    assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.reasons == ("node(s) had untolerated taint {dedicated: gpu}",)
    equal = make_pod(tolerations=[{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}])
    assert taint_toleration(equal, info).is_success
    wrong_value = make_pod(tolerations=[{"key": "dedicated", "value": "cpu"}])
    assert not taint_toleration(wrong_value, info).is_success
    exists_any = make_pod(tolerations=[{"operator": "Exists"}])
    assert taint_toleration(exists_any, info).is_success
    wrong_effect = make_pod(tolerations=[{"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}])
    assert not taint_toleration(wrong_effect, info).is_success
    no_execute = node_info(make_node(taints=[{"key": "k", "effect": "NoExecute"}]))
    assert taint_toleration(make_pod(), no_execute).reasons == ("node(s) had untolerated taint {k: }",)


def test_node_affinity_node_selector() -> None:
    info = node_info(make_node(labels={"disk": "ssd", "zone": "a"}))
    assert node_affinity(make_pod(node_selector={"disk": "ssd"}), info).is_success
    status = node_affinity(make_pod(node_selector={"disk": "hdd"}), info)
    assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.reasons == ("node(s) didn't match Pod's node affinity/selector",)


def test_node_affinity_required_terms() -> None:
    info = node_info(make_node("n1", labels={"zone": "a", "cores": "8"}))
    def fits(*terms: dict[str, Any], selector: dict[str, str] | None = None) -> bool:
        return node_affinity(make_pod(affinity=required_affinity(*terms), node_selector=selector), info).is_success

    assert fits({"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]})
    assert not fits({"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["a"]}]})
    assert fits({"matchExpressions": [{"key": "zone", "operator": "Exists"},
                                      {"key": "gpu", "operator": "DoesNotExist"}]})
    assert fits({"matchExpressions": [{"key": "cores", "operator": "Gt", "values": ["4"]}]})
    assert not fits({"matchExpressions": [{"key": "cores", "operator": "Lt", "values": ["4"]}]})
    # terms are ORed, expressions within a term ANDed
    assert fits({"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]},
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]})
    assert fits({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]})
    assert not fits({"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}]})
    # an empty term matches nothing; an invalid requirement makes its term match nothing
    assert not fits({})
    assert not fits({"matchExpressions": [{"key": "cores", "operator": "Gt", "values": ["many"]}]})
    # nodeSelector and affinity must both hold
    assert not fits({"matchExpressions": [{"key": "zone", "operator": "Exists"}]}, selector={"zone": "b"})


def test_node_ports() -> None:
    used = make_pod("web", containers=[container(host_port=8080)])
    info = node_info(make_node(), used)
    assert node_ports(make_pod(containers=[container(host_port=8080)]), info).reasons == (
        "node(s) didn't have free ports for the requested pod ports",)
    assert node_ports(make_pod(containers=[container(host_port=8081)]), info).is_success
    assert node_ports(make_pod(containers=[container(host_port=8080, protocol="UDP")]), info).is_success
    assert node_ports(make_pod(containers=[container(host_port=8080, host_ip="10.0.0.1")]), info).code == \
        Code.UNSCHEDULABLE


def test_host_port_info_specific_ips() -> None:
    ports = HostPortInfo()
    ports.add("10.0.0.1", "TCP", 80)
    assert not ports.conflicts("10.0.0.2", "TCP", 80)
    assert ports.conflicts("10.0.0.1", "TCP", 80)
    assert ports.conflicts("0.0.0.0", "TCP", 80)
    assert not ports.conflicts("0.0.0.0", "TCP", 0)
    ports.remove("10.0.0.1", "TCP", 80)
    assert len(ports) == 0


# -- scores -------------------------------------------------------------------------------------


def test_least_allocated_prefers_emptier_node() -> None:
    pod = make_pod(cpu="1", memory="1Gi")
    empty = node_info(make_node("a", cpu="4", memory="4Gi"))
    half = node_info(make_node("b", cpu="4", memory="4Gi"), make_pod("x", cpu="2", memory="2Gi"))
    assert least_allocated_score(pod, empty) == 75
    assert least_allocated_score(pod, half) == 25
    overfull = node_info(make_node("c", cpu="1", memory="1Gi"), make_pod("y", cpu="1", memory="1Gi"))
    assert least_allocated_score(pod, overfull) == 0


def test_balanced_allocation() -> None:
    even = make_pod(cpu="1", memory="1Gi")
    node = node_info(make_node(cpu="4", memory="4Gi"))
    assert balanced_allocation_score(even, node) == 100
    skewed = make_pod(cpu="2", memory="0")
    assert balanced_allocation_score(skewed, node) == 75  # fractions 0.5 and 0: std 0.25


def test_taint_toleration_score_counts_prefer_no_schedule() -> None:
    pod = make_pod(tolerations=[{"key": "a", "operator": "Exists", "effect": "PreferNoSchedule"}])
    nodes = [node_info(make_node("n0")),
             node_info(make_node("n1", taints=[{"key": "a", "effect": "PreferNoSchedule"}])),
             node_info(make_node("n2", taints=[{"key": "b", "effect": "PreferNoSchedule"},
                                              {"key": "c", "effect": "PreferNoSchedule"}]))]
    scores = [taint_toleration_score(pod, n) for n in nodes]
    assert scores == [0, 0, 2]
    taint_toleration_normalize(pod, nodes, scores)
    assert scores == [100, 100, 0]


def test_node_affinity_preferred_score() -> None:
    pod = make_pod(affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 10, "preference": {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}},
        {"weight": 30, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}},
    ]}})
    nodes = [node_info(make_node("n0")), node_info(make_node("n1", labels={"disk": "ssd"})),
             node_info(make_node("n2", labels={"disk": "ssd", "zone": "a"}))]
    scores = [node_affinity_score(pod, n) for n in nodes]
    assert scores == [0, 10, 40]
    node_affinity_normalize(pod, nodes, scores)
    assert scores == [0, 25, 100]


def test_selector_spread_prefers_nodes_with_fewer_siblings() -> None:
    pod = make_pod("new", owner="web")
    nodes = [node_info(make_node("n0"), make_pod("a", owner="web"), make_pod("b", owner="web")),
             node_info(make_node("n1"), make_pod("c", owner="web"), make_pod("d", owner="other")),
             node_info(make_node("n2"), make_pod("e", owner="web", namespace="elsewhere"))]
    scores = [selector_spread_score(pod, n) for n in nodes]
    assert scores == [2, 1, 0]
    selector_spread_normalize(pod, nodes, scores)
    assert scores == [0, 50, 100]
    assert selector_spread_score(make_pod("lonely"), nodes[0]) == 0


def test_selector_spread_blends_zones() -> None:
    pod = make_pod("new", owner="web")
    zone = "topology.kubernetes.io/zone"
    nodes = [node_info(make_node("a1", labels={zone: "a"}), make_pod("x", owner="web")),
             node_info(make_node("a2", labels={zone: "a"})),
             node_info(make_node("b1", labels={zone: "b"}))]
    scores = [selector_spread_score(pod, n) for n in nodes]
    selector_spread_normalize(pod, nodes, scores)
    # a2 is empty but its zone has a sibling; b1 is empty in an empty zone
    assert scores == [0, 33, 100]


def test_default_normalize_score() -> None:
    scores = [0, 5, 10]
    default_normalize_score(scores)
    assert scores == [0, 50, 100]
    scores = [0, 0]
    default_normalize_score(scores, reverse=True)
    assert scores == [100, 100]


# -- the framework --------------------------------------------------------------------------------


def test_framework_picks_the_fitting_node_and_breaks_ties_at_random() -> None:
    fw = default_framework()
    nodes = Snapshot([node_info(make_node("small", cpu="1")), node_info(make_node("big", cpu="8"))])
    assert fw.schedule(make_pod(cpu="2"), nodes).node == "big"
    twins = Snapshot([node_info(make_node(f"n{i}")) for i in range(4)])
    picked = {fw.schedule(make_pod(), twins, rng=random.Random(seed)).node for seed in range(40)}
    assert picked == {"n0", "n1", "n2", "n3"}


def test_fit_error_message_is_upstreams() -> None:
    fw = default_framework()
    nodes = Snapshot([node_info(make_node("n1", cpu="1", labels={"disk": "ssd"})),
                      node_info(make_node("n2", labels={"disk": "hdd"})),
                      node_info(make_node("n3", labels={"disk": "hdd"}))])
    with pytest.raises(FitError) as err:
        fw.schedule(make_pod(cpu="2", node_selector={"disk": "ssd"}), nodes)
    assert err.value.message() == (
        "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't match Pod's node affinity/selector. "
        "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.")
    assert err.value.node_to_status["n1"].plugin == "NodeResourcesFit"


def test_fit_error_message_with_taints_several_reasons_and_no_nodes() -> None:
    fw = default_framework()
    nodes = Snapshot([node_info(make_node("n1", cpu="1", memory="1Gi")),
                      node_info(make_node("n2", taints=[{"key": "dedicated", "value": "gpu",
                                                         "effect": "NoSchedule"}])),
                      node_info(make_node("n3", ready="False"))])
    with pytest.raises(FitError) as err:
        fw.schedule(make_pod(cpu="2", memory="2Gi"), nodes)
    assert err.value.message() == (
        "0/3 nodes are available: 1 Insufficient cpu, 1 Insufficient memory, "
        "1 node(s) had untolerated taint {dedicated: gpu}, 1 node(s) had untolerated taint "
        "{node.kubernetes.io/not-ready: }. preemption: 0/3 nodes are available: 3 Preemption is not helpful "
        "for scheduling.")
    with pytest.raises(FitError) as err:
        fw.schedule(make_pod(), Snapshot([]))
    assert err.value.message() == "no nodes available to schedule pods"
    never = make_pod(cpu="100", preemptionPolicy="Never")
    with pytest.raises(FitError) as err:
        fw.schedule(never, Snapshot([node_info(make_node("n1"))]))
    assert err.value.message() == ("0/1 nodes are available: 1 Insufficient cpu. "
                                   "preemption: not eligible due to preemptionPolicy=Never.")


def test_framework_spreads_an_owners_pods_through_the_cache() -> None:
    fw = default_framework()
    cache = Cache()
    for i in range(3):
        cache.add_node(make_node(f"n{i}"))
    rng = random.Random(1)
    for i in range(30):
        pod = make_pod(f"web-{i}", cpu="100m", memory="64Mi", owner="web")
        result = fw.schedule(pod, cache.snapshot(), rng=rng)
        cache.assume_pod(pod, result.node)
    counts = sorted(len(n.pods) for n in cache.snapshot().nodes)
    assert counts == [10, 10, 10]


def test_assumed_pods_prevent_overcommit_and_forget_releases() -> None:
    fw = default_framework()
    cache = Cache()
    cache.add_node(make_node("n1", cpu="1"))
    pods = [make_pod(f"p{i}", cpu="300m") for i in range(4)]
    for pod in pods[:3]:
        cache.assume_pod(pod, fw.schedule(pod, cache.snapshot()).node)
    with pytest.raises(FitError):
        fw.schedule(pods[3], cache.snapshot())
    assert cache.forget_pod(pods[0])
    assert fw.schedule(pods[3], cache.snapshot()).node == "n1"


def test_cache_confirms_assumed_pods_and_keeps_pods_of_deleted_nodes() -> None:
    cache = Cache()
    cache.add_node(make_node("n1"))
    pod = make_pod("p", cpu="1")
    cache.assume_pod(pod, "n1")
    assert cache.is_assumed(pod.key)
    bound = PodInfo(pod.pod.model_copy(update={"spec": pod.pod.spec.model_copy(update={"node_name": "n1"})}))
    cache.add_pod(bound)  # the informer saw the binding
    assert not cache.is_assumed(pod.key)
    assert not cache.forget_pod(pod)  # a late binding error must not drop a confirmed pod
    node = cache.get_node("n1")
    assert node is not None and node.requested.milli_cpu == 1000
    cache.remove_node("n1")
    assert len(cache.snapshot()) == 0 and cache.get_node("n1") is not None
    cache.remove_pod(pod.key)
    assert cache.get_node("n1") is None


def test_num_feasible_nodes_to_find() -> None:
    assert num_feasible_nodes_to_find(10) == 10
    assert num_feasible_nodes_to_find(100) == 100
    assert num_feasible_nodes_to_find(1000) == 420  # 50 - 1000/125 = 42%
    assert num_feasible_nodes_to_find(5000) == 500  # 10%


def test_status_helpers() -> None:
    assert Status().is_success
    assert Status.unschedulable("x").code == Code.UNSCHEDULABLE
    assert Status.unschedulable("x", unresolvable=True).is_rejected
