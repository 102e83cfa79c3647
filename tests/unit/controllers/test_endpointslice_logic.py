"""The pure parts of the Service endpoint controllers: pod → endpoint (conditions, hostname, zone),
named ports per pod, slice packing with little churn, the placeholder, the stale-cache tracker,
Endpoints subsets (repack, truncation) and mirroring, the load balancer's node choice."""

from __future__ import annotations

from typing import Any

import pytest

from controllers.endpoint import MAX_CAPACITY, desired_subsets, truncate_endpoints
from controllers.endpointslice.reconciler import DesiredPortSet, SlicePlan, plan_slices
from controllers.endpointslice.tracker import EndpointSliceTracker
from controllers.endpointslice.utils import (
    LABEL_HEADLESS,
    LABEL_MANAGED_BY,
    LABEL_SERVICE_NAME,
    PortKey,
    TriggerTimeTracker,
    endpoint_ports,
    pod_to_endpoint,
    port_key,
    service_labels,
    should_pod_be_in_endpoints,
)
from controllers.endpointslicemirroring import desired_from_endpoints, should_mirror
from controllers.servicelb import load_balancer_ingress
from machinery.api.core_v1 import (
    EndpointAddress,
    Endpoints,
    EndpointSubset,
    Node,
    Pod,
    Service,
)
from machinery.api.discovery_v1 import EndpointPort, EndpointSlice
from machinery.api.meta import ObjectMeta, OwnerReference

MANAGER = "endpointslice-controller.k8s.io"


def pod(name: str, ip: str | None = "10.244.0.5", *, ready: bool = True, node: str = "n1", deleting: bool = False,
        ports: list[dict[str, Any]] | None = None, phase: str = "Running", hostname: str | None = None,
        subdomain: str | None = None, labels: dict[str, str] | None = None) -> Pod:
    meta: dict[str, Any] = {"name": name, "namespace": "default", "uid": f"uid-{name}",
                            "labels": labels or {"app": "web"}}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-24T00:00:00Z"
    spec: dict[str, Any] = {"nodeName": node, "containers": [{"name": "c", "image": "i", "ports": ports or []}]}
    if hostname:
        spec["hostname"] = hostname
    if subdomain:
        spec["subdomain"] = subdomain
    status: dict[str, Any] = {"phase": phase, "conditions": [
        {"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": "2026-11-24T01:00:00Z"}]}
    if ip:
        status["podIP"] = ip
        status["podIPs"] = [{"ip": ip}]
    return Pod.from_dict({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status})


def service(name: str = "web", *, ports: list[dict[str, Any]] | None = None, publish: bool = False,
            cluster_ip: str = "10.96.0.20", labels: dict[str, str] | None = None, **spec: Any) -> Service:
    body: dict[str, Any] = {"selector": {"app": "web"}, "clusterIP": cluster_ip,
                            "ports": ports if ports is not None else [
                                {"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080}]}
    if publish:
        body["publishNotReadyAddresses"] = True
    body.update(spec)
    return Service.from_dict({"apiVersion": "v1", "kind": "Service", "metadata": {
        "name": name, "namespace": "default", "uid": "svc-uid", "labels": labels or {},
        "creationTimestamp": "2026-11-24T00:30:00Z"}, "spec": body})


def node(name: str, ip: str, *, ready: bool = True, zone: str | None = None) -> Node:
    return Node.from_dict({"apiVersion": "v1", "kind": "Node",
                           "metadata": {"name": name, "labels": {"topology.kubernetes.io/zone": zone} if zone else {}},
                           "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
                                      "addresses": [{"type": "InternalIP", "address": ip}]}})


# -- pod → endpoint ---------------------------------------------------------------------------------


def test_conditions_follow_readiness_and_deletion() -> None:
    svc = service()
    ready = pod_to_endpoint(pod("a"), None, svc).conditions
    assert ready is not None and (ready.ready, ready.serving, ready.terminating) == (True, True, False)
    unready = pod_to_endpoint(pod("b", ready=False), None, svc).conditions
    assert unready is not None and (unready.ready, unready.serving, unready.terminating) == (False, False, False)
    going = pod_to_endpoint(pod("c", deleting=True), None, svc).conditions
    assert going is not None and (going.ready, going.serving, going.terminating) == (False, True, True)
    published = pod_to_endpoint(pod("d", ready=False, deleting=True), None, service(publish=True)).conditions
    assert published is not None and (published.ready, published.serving, published.terminating) == (True, False, True)


def test_which_pods_count() -> None:
    assert should_pod_be_in_endpoints(pod("a"), include_terminating=True)
    assert not should_pod_be_in_endpoints(pod("a", ip=None), include_terminating=True)
    assert not should_pod_be_in_endpoints(pod("a", phase="Succeeded"), include_terminating=True)
    assert should_pod_be_in_endpoints(pod("a", deleting=True), include_terminating=True)
    assert not should_pod_be_in_endpoints(pod("a", deleting=True), include_terminating=False)


def test_endpoint_fields_hostname_zone_node_target() -> None:
    svc = service()
    ep = pod_to_endpoint(pod("a", hostname="h0", subdomain="web"), node("n1", "192.0.2.1", zone="z1"), svc)
    assert ep.addresses == ["10.244.0.5"] and ep.hostname == "h0" and ep.zone == "z1" and ep.node_name == "n1"
    ref = ep.target_ref
    assert ref is not None and (ref.kind, ref.name, ref.uid) == ("Pod", "a", "uid-a")
    assert pod_to_endpoint(pod("b", hostname="h0", subdomain="other"), None, svc).hostname is None


def test_named_target_ports_resolve_per_pod() -> None:
    svc = service(ports=[{"name": "http", "port": 80, "protocol": "TCP", "targetPort": "web"},
                         {"name": "metrics", "port": 9000, "protocol": "TCP", "targetPort": 9100}])
    a = endpoint_ports(svc, pod("a", ports=[{"name": "web", "containerPort": 8080}]))
    b = endpoint_ports(svc, pod("b", ports=[{"name": "web", "containerPort": 9090}]))
    none = endpoint_ports(svc, pod("c"))
    assert [(p.name, p.port) for p in a] == [("http", 8080), ("metrics", 9100)]
    assert [(p.name, p.port) for p in b] == [("http", 9090), ("metrics", 9100)]
    assert [(p.name, p.port) for p in none] == [("metrics", 9100)]  # the named port it lacks is left out
    assert port_key(a) != port_key(b)
    udp = service(ports=[{"name": "dns", "port": 53, "protocol": "UDP", "targetPort": "dns"}])
    assert endpoint_ports(udp, pod("d", ports=[{"name": "dns", "containerPort": 5353, "protocol": "TCP"}])) == []


def test_labels_keep_the_services_and_mark_headless() -> None:
    labels = service_labels(service(labels={"team": "a", LABEL_MANAGED_BY: "me"}, cluster_ip="None"), MANAGER)
    assert labels == {"team": "a", LABEL_SERVICE_NAME: "web", LABEL_MANAGED_BY: MANAGER, LABEL_HEADLESS: ""}


# -- packing ------------------------------------------------------------------------------------------


PORTS = [EndpointPort(name="http", protocol="TCP", port=8080)]
LABELS = {LABEL_SERVICE_NAME: "web", LABEL_MANAGED_BY: MANAGER}
_names = iter(range(10_000))


def new_slice(ports: list[EndpointPort]) -> EndpointSlice:
    return EndpointSlice(metadata=ObjectMeta(generate_name="web-", namespace="default", labels=dict(LABELS),
                                             owner_references=[OwnerReference(api_version="v1", kind="Service",
                                                                              name="web", uid="svc-uid",
                                                                              controller=True)]),
                         address_type="IPv4", endpoints=[], ports=ports)


def saved(slice_: EndpointSlice) -> EndpointSlice:
    """As the apiserver would store it: a name and a resourceVersion."""
    n = next(_names)
    return slice_.model_copy(update={"metadata": slice_.metadata.model_copy(
        update={"name": f"web-{n:05d}", "resource_version": str(n), "uid": f"slice-{n}"})})


def desired(count: int, start: int = 0, ports: list[EndpointPort] = PORTS, **kw: Any) -> dict[PortKey, DesiredPortSet]:
    out = DesiredPortSet(list(ports))
    svc = service()
    for i in range(start, start + count):
        out.add(pod_to_endpoint(pod(f"p{i}", ip=f"10.244.{i // 250}.{i % 250 + 1}", **kw), None, svc))
    return {port_key(ports): out}


def plan(want: dict[PortKey, DesiredPortSet], existing: list[EndpointSlice], **kw: Any) -> SlicePlan:
    return plan_slices(want, existing, owner_uid="svc-uid", labels=dict(LABELS), new_slice=new_slice, **kw)


def apply(result: SlicePlan, existing: list[EndpointSlice]) -> list[EndpointSlice]:
    gone = {s.metadata.name for s in result.to_delete} | {s.metadata.name for s in result.to_update}
    return [*(s for s in existing if s.metadata.name not in gone), *result.to_update,
            *(saved(s) for s in result.to_create)]


def count(slices: list[EndpointSlice]) -> int:
    return sum(len(s.endpoints or []) for s in slices)


def test_at_most_100_per_slice_then_a_second_slice() -> None:
    result = plan(desired(150), [])
    assert [len(s.endpoints or []) for s in result.to_create] == [100, 50]
    assert not result.to_update and not result.to_delete


def test_max_endpoints_per_slice_is_honoured() -> None:
    result = plan(desired(25), [], max_per_slice=10)
    assert [len(s.endpoints or []) for s in result.to_create] == [10, 10, 5]


def test_nothing_changes_nothing_is_written() -> None:
    slices = apply(plan(desired(150), []), [])
    assert plan(desired(150), slices).empty


def test_one_endpoint_more_touches_one_slice_only() -> None:
    slices = apply(plan(desired(150), []), [])
    result = plan(desired(151), slices)
    assert not result.to_create and not result.to_delete and len(result.to_update) == 1
    assert count(apply(result, slices)) == 151


def test_a_readiness_flip_updates_in_place() -> None:
    slices = apply(plan(desired(3), []), [])
    want = desired(3)
    (only,) = want.values()
    key = next(iter(only.endpoints))
    flipped = pod_to_endpoint(pod("p0", ip="10.244.0.1", ready=False), None, service())
    only.endpoints[key] = flipped
    result = plan(want, slices)
    assert not result.to_create and not result.to_delete and len(result.to_update) == 1
    conditions = [e.conditions.ready for e in result.to_update[0].endpoints or [] if e.conditions]
    assert conditions.count(False) == 1


def test_scale_down_drops_endpoints_and_deletes_emptied_slices() -> None:
    slices = apply(plan(desired(150), []), [])
    result = plan(desired(40), slices)
    after = apply(result, slices)
    assert count(after) == 40 and len(after) == 1 and len(result.to_delete) == 1


def test_scale_to_zero_leaves_one_placeholder_and_keeps_it() -> None:
    slices = apply(plan(desired(3), []), [])
    result = plan({}, slices)
    # the delete and the placeholder's create become one update of the old slice
    assert not result.to_create and not result.to_delete and len(result.to_update) == 1
    placeholder = result.to_update[0]
    assert placeholder.endpoints == [] and placeholder.ports == []
    assert placeholder.metadata.name == slices[0].metadata.name
    assert plan({}, [placeholder]).empty
    fresh = plan({}, [])
    assert len(fresh.to_create) == 1 and fresh.to_create[0].endpoints == []


def test_pods_with_different_ports_go_to_different_slices() -> None:
    other = [EndpointPort(name="http", protocol="TCP", port=9090)]
    want = {**desired(2), **desired(3, start=10, ports=other)}
    result = plan(want, [])
    assert sorted((len(s.endpoints or []), s.ports[0].port if s.ports else 0) for s in result.to_create) == [
        (2, 8080), (3, 9090)]


def test_a_port_change_rewrites_the_slice_instead_of_delete_and_create() -> None:
    slices = apply(plan(desired(3), []), [])
    other = [EndpointPort(name="http", protocol="TCP", port=9090)]
    result = plan(desired(3, ports=other), slices)
    assert not result.to_create and not result.to_delete and len(result.to_update) == 1
    assert result.to_update[0].ports == other and result.to_update[0].metadata.name == slices[0].metadata.name


def test_slices_of_an_older_service_with_the_same_name_go() -> None:
    slices = apply(plan(desired(2), []), [])
    result = plan_slices(desired(2), slices, owner_uid="new-uid", labels=dict(LABELS), new_slice=new_slice)
    assert result.to_delete == slices and len(result.to_create) == 1


def test_a_duplicated_endpoint_is_kept_once() -> None:
    slices = apply(plan(desired(2), []), [])
    twin = slices[0].model_copy(update={"metadata": slices[0].metadata.model_copy(
        update={"name": "web-twin", "uid": "twin"})})
    after = apply(plan(desired(2), [*slices, twin]), [*slices, twin])
    assert count(after) == 2


def test_trigger_time_set_on_written_slices() -> None:
    result = plan(desired(1), [], trigger_time="2026-11-24T01:00:00Z")
    annotations = result.to_create[0].metadata.annotations or {}
    assert annotations["endpoints.kubernetes.io/last-change-trigger-time"] == "2026-11-24T01:00:00Z"


def test_trigger_time_tracker_reports_the_earliest_unsynced_change() -> None:
    tracker = TriggerTimeTracker()
    svc = service()
    assert tracker.compute("default/web", svc, [pod("a")]) == "2026-11-24T00:30:00Z"  # the Service's creation
    assert tracker.compute("default/web", svc, [pod("a")]) is None  # nothing new
    later = pod("b")
    assert later.status is not None and later.status.conditions is not None
    later.status.conditions[0].last_transition_time = "2026-11-24T02:00:00Z"
    assert tracker.compute("default/web", svc, [pod("a"), later]) == "2026-11-24T02:00:00Z"


# -- the stale-cache tracker ----------------------------------------------------------------------


def test_tracker_waits_for_own_writes() -> None:
    now = [0.0]
    tracker = EndpointSliceTracker(clock=lambda: now[0])
    written = saved(new_slice(PORTS))
    tracker.written("default/web", written)
    assert tracker.stale("default/web")
    older = written.model_copy(update={"metadata": written.metadata.model_copy(update={"resource_version": "old"})})
    assert not tracker.observed("default/web", older)  # not ours: worth a sync
    assert tracker.stale("default/web")
    assert tracker.observed("default/web", written)  # our own write: no sync needed
    assert not tracker.stale("default/web")
    assert not tracker.observed("default/web", written)  # seen already: a resync or someone else's
    tracker.deleted("default/web", written)
    assert tracker.stale("default/web")
    assert tracker.observed("default/web", written, gone=True)
    assert not tracker.stale("default/web")
    tracker.written("default/web", written)
    assert not tracker.observed("default/web", written, gone=True)  # someone else deleted it
    assert not tracker.stale("default/web")
    tracker.written("default/web", written)
    now[0] = 60.0  # a lost event does not freeze the Service forever
    assert not tracker.stale("default/web")


# -- Endpoints ------------------------------------------------------------------------------------


def test_endpoints_subsets_ready_not_ready_and_terminating() -> None:
    svc = service()
    subsets = desired_subsets(svc, [pod("a", ip="10.244.0.9"), pod("b", ip="10.244.0.3", ready=False),
                                    pod("c", ip="10.244.0.4", deleting=True)])
    assert len(subsets) == 1
    (subset,) = subsets
    assert [a.ip for a in subset.addresses or []] == ["10.244.0.9"]
    assert [a.ip for a in subset.not_ready_addresses or []] == ["10.244.0.3"]  # the terminating pod left out
    assert [(p.name, p.port, p.protocol) for p in subset.ports or []] == [("http", 8080, "TCP")]
    published = desired_subsets(service(publish=True), [pod("b", ip="10.244.0.3", ready=False),
                                                        pod("c", ip="10.244.0.4", deleting=True)])
    assert [a.ip for a in published[0].addresses or []] == ["10.244.0.3", "10.244.0.4"]


def test_endpoints_repack_by_port_set() -> None:
    svc = service(ports=[{"name": "http", "port": 80, "protocol": "TCP", "targetPort": "web"}])
    subsets = desired_subsets(svc, [pod("a", ip="10.244.0.2", ports=[{"name": "web", "containerPort": 8080}]),
                                    pod("b", ip="10.244.0.3", ports=[{"name": "web", "containerPort": 8080}]),
                                    pod("c", ip="10.244.0.4", ports=[{"name": "web", "containerPort": 9090}])])
    shapes = sorted(([a.ip for a in s.addresses or []], [p.port for p in s.ports or []]) for s in subsets)
    assert shapes == [(["10.244.0.2", "10.244.0.3"], [8080]), (["10.244.0.4"], [9090])]


def test_endpoints_truncated_at_capacity_ready_first() -> None:
    ready = [EndpointAddress(ip=f"10.0.{i // 250}.{i % 250}") for i in range(900)]
    not_ready = [EndpointAddress(ip=f"10.1.{i // 250}.{i % 250}") for i in range(300)]
    subsets = [EndpointSubset(addresses=ready, not_ready_addresses=not_ready)]
    assert truncate_endpoints(subsets)
    assert len(subsets[0].addresses or []) == 900 and len(subsets[0].not_ready_addresses or []) == 100
    many = [EndpointSubset(addresses=[EndpointAddress(ip=f"10.2.{i // 250}.{i % 250}") for i in range(1200)],
                           not_ready_addresses=not_ready)]
    assert truncate_endpoints(many)
    assert len(many[0].addresses or []) == MAX_CAPACITY and not many[0].not_ready_addresses
    small = [EndpointSubset(addresses=ready[:5])]
    assert not truncate_endpoints(small)


# -- mirroring ------------------------------------------------------------------------------------


def test_mirroring_turns_subsets_into_endpoints_per_port_set() -> None:
    endpoints = Endpoints.from_dict({"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "ext"}, "subsets": [
        {"addresses": [{"ip": "192.0.2.10"}, {"ip": "fd00::1"}], "notReadyAddresses": [{"ip": "192.0.2.11"}],
         "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]},
        {"addresses": [{"ip": "192.0.2.12"}], "ports": [{"port": 9090}]}]})
    mirror = desired_from_endpoints(endpoints)
    assert (mirror.invalid, mirror.skipped) == (0, 0) and len(mirror.desired) == 2
    first = mirror.desired[port_key([EndpointPort(name="http", protocol="TCP", port=8080)])]
    readiness = sorted((e.addresses[0], e.conditions.ready if e.conditions else None) for e in first.endpoints.values())
    assert readiness == [("192.0.2.10", True), ("192.0.2.11", False)]  # the IPv6 address is not mirrored to IPv4
    cut = desired_from_endpoints(endpoints, max_per_subset=1)  # ready ones first
    assert cut.skipped == 2 and sum(len(s.endpoints) for s in cut.desired.values()) == 2
    bad = Endpoints.from_dict({"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "ext"}, "subsets": [
        {"addresses": [{"ip": "not-an-ip"}, {"ip": "192.0.2.10"}]}]})
    mirrored = desired_from_endpoints(bad)
    assert (mirrored.invalid, mirrored.skipped) == (1, 1)
    assert [list(s.endpoints) for s in mirrored.desired.values()] == [[(("192.0.2.10",), "", "")]]


def test_mirroring_skips_labelled_endpoints() -> None:
    skip = Endpoints(metadata=ObjectMeta(name="x", labels={"endpointslice.kubernetes.io/skip-mirror": "true"}))
    assert not should_mirror(skip) and not should_mirror(None)
    assert should_mirror(Endpoints(metadata=ObjectMeta(name="y")))


# -- the load balancer ----------------------------------------------------------------------------


def test_load_balancer_gets_ready_nodes_internal_ips() -> None:
    svc = service(type="LoadBalancer")
    nodes = [node("n2", "192.0.2.20"), node("n1", "192.0.2.3"), node("n3", "192.0.2.30", ready=False)]
    ingress = load_balancer_ingress(svc, nodes, [])
    assert [(i.ip, i.ip_mode) for i in ingress] == [("192.0.2.3", "VIP"), ("192.0.2.20", "VIP")]


@pytest.mark.parametrize("ready", [True, False])
def test_local_traffic_policy_uses_nodes_with_ready_endpoints(ready: bool) -> None:
    svc = service(type="LoadBalancer", externalTrafficPolicy="Local")
    slice_ = new_slice(PORTS)
    slice_.endpoints = [pod_to_endpoint(pod("a", node="n2", ready=ready), None, svc)]
    ingress = load_balancer_ingress(svc, [node("n1", "192.0.2.3"), node("n2", "192.0.2.20")], [slice_])
    assert [i.ip for i in ingress] == (["192.0.2.20"] if ready else [])


# -- the controller-manager's flags ---------------------------------------------------------------


def test_controllers_registered_under_upstream_names_and_accounts() -> None:
    from controllers.manager import CONTROLLERS, enabled_controllers, parse_args

    accounts = {name: CONTROLLERS[name].service_account
                for name in ("endpointslice", "endpoint", "endpointslicemirroring", "servicelb")}
    assert accounts == {"endpointslice": "endpointslice-controller", "endpoint": "endpoint-controller",
                        "endpointslicemirroring": "endpointslicemirroring-controller",
                        "servicelb": "service-controller"}
    assert enabled_controllers(["endpointslice-controller", "endpoints-controller"]) == ["endpoint", "endpointslice"]
    assert parse_args(["--max-endpoints-per-slice", "7"]).max_endpoints_per_slice == 7
    assert parse_args([]).max_endpoints_per_slice == 100


@pytest.mark.parametrize("value", ["0", "1001", "many"])
def test_max_endpoints_per_slice_out_of_range_is_refused(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    from controllers.manager import parse_args

    with pytest.raises(SystemExit) as exit_:
        parse_args(["--max-endpoints-per-slice", value])
    assert exit_.value.code == 2
    assert "--max-endpoints-per-slice" in capsys.readouterr().err
