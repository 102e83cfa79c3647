"""Services, Endpoints and EndpointSlices without a cluster: the strategies' defaults and validation
(apiserver/registry/service.py, endpoints.py, endpointslice.py), the allocation bitmap and ranges
(allocator.py, pure parts), the Service name rule, and the Table columns (printers.py)."""

from __future__ import annotations

import copy
import random
from datetime import UTC, datetime
from typing import Any

import pytest

from apiserver.printers import column_definitions, table_for
from apiserver.registry.allocator import Bitmap, parse_port_range, range_offset
from apiserver.registry.endpoints import EndpointsStrategy
from apiserver.registry.endpointslice import EndpointSliceStrategy
from apiserver.registry.meta import validate_object_meta
from apiserver.registry.service import ServiceStrategy
from apiserver.validation import FieldError
from machinery.types import Obj

STRATEGY = ServiceStrategy()
NOW = datetime(2026, 11, 24, 12, 0, 0, tzinfo=UTC)


def full(errs: list[FieldError]) -> list[str]:
    return [e.full() for e in errs]


def service(**spec: Any) -> Obj:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "default"},
            "spec": spec}


def created(**spec: Any) -> Obj:
    obj = service(**spec)
    STRATEGY.prepare_for_create(obj)
    return obj


def errors_of(**spec: Any) -> list[str]:
    return full(STRATEGY.validate(created(**spec)))


# -- defaults ---------------------------------------------------------------------------------------


def test_defaults_as_upstream_set_defaults_service() -> None:
    obj = created(ports=[{"port": 80}], selector={"app": "web"})
    spec = obj["spec"]
    assert spec["type"] == "ClusterIP"
    assert spec["sessionAffinity"] == "None"
    assert spec["internalTrafficPolicy"] == "Cluster"
    assert "externalTrafficPolicy" not in spec  # only externally reachable services have one
    assert spec["ports"] == [{"port": 80, "protocol": "TCP", "targetPort": 80}]
    assert obj["status"] == {"loadBalancer": {}}
    assert STRATEGY.validate(obj) == []


def test_node_port_and_load_balancer_defaults() -> None:
    assert created(type="NodePort", ports=[{"port": 80}])["spec"]["externalTrafficPolicy"] == "Cluster"
    lb = created(type="LoadBalancer", ports=[{"port": 80}])["spec"]
    assert lb["externalTrafficPolicy"] == "Cluster" and lb["allocateLoadBalancerNodePorts"] is True


def test_client_ip_affinity_gets_the_three_hour_timeout() -> None:
    spec = created(sessionAffinity="ClientIP", ports=[{"port": 80}])["spec"]
    assert spec["sessionAffinityConfig"] == {"clientIP": {"timeoutSeconds": 10800}}
    assert created(sessionAffinity="None", sessionAffinityConfig={"clientIP": {"timeoutSeconds": 5}},
                   ports=[{"port": 80}])["spec"].get("sessionAffinityConfig") is None


def test_named_target_port_is_kept_and_cluster_ip_fills_cluster_ips() -> None:
    spec = created(ports=[{"port": 80, "targetPort": "http"}], clusterIP="10.96.0.20")["spec"]
    assert spec["ports"][0]["targetPort"] == "http"
    assert spec["clusterIPs"] == ["10.96.0.20"]


# -- validation -------------------------------------------------------------------------------------


def test_ports_rules() -> None:
    assert errors_of(ports=[]) == ["spec.ports: Required value"]
    assert errors_of(ports=[{"port": 80}, {"port": 81}]) == ["spec.ports[0].name: Required value",
                                                             "spec.ports[1].name: Required value"]
    assert errors_of(ports=[{"name": "a", "port": 80}, {"name": "a", "port": 81}]) == [
        'spec.ports[1].name: Duplicate value: "a"']
    dup = errors_of(ports=[{"name": "a", "port": 80}, {"name": "b", "port": 80}])
    assert dup == ['spec.ports[1]: Duplicate value: core.ServicePort{Name:"", Protocol:"TCP", '
                   'AppProtocol:(*string)(nil), Port:80, TargetPort:intstr.IntOrString{Type:0, IntVal:0, '
                   'StrVal:""}, NodePort:0}']
    assert errors_of(ports=[{"name": "a", "port": 80, "protocol": "TCP"},
                            {"name": "b", "port": 80, "protocol": "UDP"}]) == []  # DNS's 53 twice
    assert errors_of(ports=[{"port": 70000}]) == [  # targetPort defaults to it, and is judged too
        "spec.ports[0].port: Invalid value: 70000: must be between 1 and 65535, inclusive",
        "spec.ports[0].targetPort: Invalid value: 70000: must be between 1 and 65535, inclusive"]
    assert errors_of(ports=[{"port": 80, "protocol": "HTTP"}]) == [
        'spec.ports[0].protocol: Unsupported value: "HTTP": supported values: "SCTP", "TCP", "UDP"']
    assert errors_of(ports=[{"port": 80, "targetPort": "Not_A_Name"}])[0].startswith(
        'spec.ports[0].targetPort: Invalid value: "Not_A_Name"')


def test_node_ports() -> None:
    assert errors_of(ports=[{"port": 80, "nodePort": 30080}]) == [
        "spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'"]
    assert errors_of(type="NodePort", ports=[{"name": "a", "port": 80, "nodePort": 30080},
                                             {"name": "b", "port": 81, "nodePort": 30080}]) == [
        "spec.ports[1].nodePort: Duplicate value: 30080"]


def test_types_and_headless() -> None:
    assert errors_of(type="Magic", ports=[{"port": 80}]) == [
        'spec.type: Unsupported value: "Magic": supported values: "ClusterIP", "ExternalName", "LoadBalancer", '
        '"NodePort"']
    assert errors_of(clusterIP="None") == []  # headless needs no ports
    assert errors_of(type="NodePort", clusterIP="None", ports=[{"port": 80}])[0] == (
        "spec.clusterIPs[0]: Invalid value: \"None\": may not be set to 'None' for NodePort services")
    assert errors_of(clusterIP="10.96.0.300", ports=[{"port": 80}])[0].startswith(
        'spec.clusterIPs[0]: Invalid value: "10.96.0.300": must be a valid IP address')


def test_external_name_rules() -> None:
    assert errors_of(type="ExternalName", externalName="db.example.com.") == []
    assert errors_of(type="ExternalName") == ["spec.externalName: Required value"]
    assert errors_of(type="ExternalName", externalName="Not Valid")[0].startswith(
        'spec.externalName: Invalid value: "Not Valid": a lowercase RFC 1123 subdomain')
    assert errors_of(type="ExternalName", externalName="db.example.com", clusterIP="10.96.0.5") == [
        "spec.clusterIPs: Forbidden: may not be set for ExternalName services"]


def test_session_affinity_and_traffic_policies() -> None:
    assert errors_of(sessionAffinity="Sticky", ports=[{"port": 80}]) == [
        'spec.sessionAffinity: Unsupported value: "Sticky": supported values: "ClientIP", "None"']
    assert errors_of(sessionAffinity="ClientIP", sessionAffinityConfig={"clientIP": {"timeoutSeconds": 0}},
                     ports=[{"port": 80}]) == [
        "spec.sessionAffinityConfig.clientIP.timeoutSeconds: Invalid value: 0: must be greater than 0 and less "
        "than 86400"]
    assert errors_of(externalTrafficPolicy="Local", ports=[{"port": 80}]) == [
        'spec.externalTrafficPolicy: Invalid value: "Local": may only be set for externally-accessible services']
    assert errors_of(internalTrafficPolicy="Nearby", ports=[{"port": 80}]) == [
        'spec.internalTrafficPolicy: Unsupported value: "Nearby": supported values: "Cluster", "Local"']
    assert errors_of(externalIPs=["127.0.0.1"], externalTrafficPolicy="Cluster", ports=[{"port": 80}]) == [
        'spec.externalIPs[0]: Invalid value: "127.0.0.1": may not be in the loopback range (127.0.0.0/8, ::1/128)']
    assert errors_of(externalIPs=["198.51.100.1"], ports=[{"port": 80}]) == []  # defaulted Cluster policy
    assert errors_of(selector={"bad key!": "x"}, ports=[{"port": 80}])[0].startswith(
        'spec.selector: Invalid value: "bad key!"')


def test_service_names_are_dns_1035_labels() -> None:
    assert validate_object_meta({"name": "web-1", "namespace": "default"}, True, "Service") == []
    (err,) = validate_object_meta({"name": "1web", "namespace": "default"}, True, "Service")
    assert err.full().startswith('metadata.name: Invalid value: "1web": a DNS-1035 label must consist of lower '
                                 "case alphanumeric characters or '-', start with an alphabetic character")


# -- updates ----------------------------------------------------------------------------------------


def allocated(**spec: Any) -> Obj:
    obj = created(**spec)
    obj["spec"].setdefault("clusterIP", "10.96.0.50")
    obj["spec"]["clusterIPs"] = [obj["spec"]["clusterIP"]]
    return obj


def updated(old: Obj, change: Any) -> tuple[Obj, list[str]]:
    new = copy.deepcopy(old)
    change(new["spec"])
    STRATEGY.prepare_for_update(new, old)
    return new, full(STRATEGY.validate(new) + STRATEGY.validate_update(new, old))


def test_cluster_ip_is_immutable_and_kept_when_left_out() -> None:
    old = allocated(ports=[{"port": 80}])
    _, errs = updated(old, lambda s: s.update(clusterIP="10.96.0.51", clusterIPs=["10.96.0.51"]))
    assert errs == ['spec.clusterIP: Invalid value: "10.96.0.51": field is immutable']
    new, errs = updated(old, lambda s: [s.pop("clusterIP"), s.pop("clusterIPs")])  # kubectl apply's manifest
    assert errs == [] and new["spec"]["clusterIP"] == "10.96.0.50"


def test_node_port_kept_when_left_out_and_dropped_on_type_change() -> None:
    old = allocated(type="NodePort", ports=[{"port": 80, "nodePort": 30080}])
    new, errs = updated(old, lambda s: s["ports"][0].pop("nodePort"))
    assert errs == [] and new["spec"]["ports"][0]["nodePort"] == 30080
    new, errs = updated(old, lambda s: s.update(type="ClusterIP"))
    assert errs == [] and "nodePort" not in new["spec"]["ports"][0]
    assert "externalTrafficPolicy" not in new["spec"]


def test_type_change_to_external_name_lets_the_cluster_ip_go() -> None:
    old = allocated(ports=[{"port": 80}])
    new, errs = updated(old, lambda s: s.update(type="ExternalName", externalName="db.example.com"))
    assert errs == []
    assert "clusterIP" not in new["spec"] and "clusterIPs" not in new["spec"]


def test_status_is_kept_from_the_main_resource_and_validated_through_status() -> None:
    old = allocated(type="LoadBalancer", ports=[{"port": 80}])
    new = copy.deepcopy(old)
    new["status"] = {"loadBalancer": {"ingress": [{"ip": "192.0.2.7"}]}}
    STRATEGY.prepare_for_update(new, old)
    assert new["status"] == {"loadBalancer": {}}
    status = copy.deepcopy(old)
    status["status"] = {"loadBalancer": {"ingress": [{"ip": "not-an-ip"}, {"hostname": "192.0.2.8"}]}}
    STRATEGY.prepare_for_status_update(status, old)
    assert full(STRATEGY.validate_update(status, old)) == [
        'status.loadBalancer.ingress[0].ip: Invalid value: "not-an-ip": must be a valid IP address, (e.g. 10.9.8.7 '
        "or 2001:db8::ffff)",
        'status.loadBalancer.ingress[1].hostname: Invalid value: "192.0.2.8": must be a DNS name, not an IP address']


# -- Endpoints and EndpointSlices ----------------------------------------------------------------


def test_endpoints_validation_and_defaults() -> None:
    strategy = EndpointsStrategy()
    ok = {"subsets": [{"addresses": [{"ip": "10.244.1.5"}], "ports": [{"port": 80}]}]}
    strategy.prepare_for_create(ok)
    assert ok["subsets"][0]["ports"][0]["protocol"] == "TCP" and strategy.validate(ok) == []
    bad = {"subsets": [{"ports": [{"port": 80}]},
                       {"addresses": [{"ip": "127.0.0.1"}, {"ip": "10.0.0.1", "hostname": "A"}],
                        "ports": [{"port": 80, "protocol": "TCP"}, {"port": 81, "protocol": "TCP"}]}]}
    assert full(strategy.validate(bad)) == [
        "subsets[0]: Required value: must specify `addresses` or `notReadyAddresses`",
        "subsets[0].ports[0].protocol: Required value",
        'subsets[1].addresses[0].ip: Invalid value: "127.0.0.1": may not be in the loopback range (127.0.0.0/8, '
        "::1/128)",
        'subsets[1].addresses[1].hostname: Invalid value: "A": a lowercase RFC 1123 label must consist of lower '
        "case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. "
        "'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
        "subsets[1].ports[0].name: Required value",
        "subsets[1].ports[1].name: Required value",
    ]


def test_endpoint_slice_validation_and_defaults() -> None:
    strategy = EndpointSliceStrategy()
    ok = {"addressType": "IPv4", "endpoints": [{"addresses": ["10.244.1.5"], "conditions": {"ready": True}}],
          "ports": [{"port": 80}]}
    strategy.prepare_for_create(ok)
    assert ok["ports"] == [{"port": 80, "name": "", "protocol": "TCP"}] and strategy.validate(ok) == []
    assert full(strategy.validate({"addressType": "IPv5"})) == [
        'addressType: Unsupported value: "IPv5": supported values: "FQDN", "IPv4", "IPv6"']
    bad = {"addressType": "IPv4", "endpoints": [{"addresses": []}, {"addresses": ["fe80::1"]}],
           "ports": [{"name": "a", "protocol": "TCP"}, {"name": "a", "protocol": "TCP"}]}
    assert full(strategy.validate(bad)) == [
        "endpoints[0].addresses: Required value: must contain at least 1 address",
        'endpoints[1].addresses[0]: Invalid value: "fe80::1": must be a valid IPv4 address',
        'ports[1].name: Duplicate value: "a"']
    assert full(strategy.validate({"addressType": "IPv4", "endpoints": [{"addresses": ["10.0.0.1"] * 101}]})) == [
        "endpoints[0].addresses: Too many: 101: must have at most 100 items"]
    assert full(strategy.validate_update({"addressType": "IPv6"}, {"addressType": "IPv4"})) == [
        'addressType: Invalid value: "IPv6": field is immutable']


# -- the allocation bitmap --------------------------------------------------------------------------


def test_bitmap_allocates_each_item_once_upper_band_first() -> None:
    bitmap = Bitmap(64, offset=16)
    rng = random.Random(1)
    picked = [bitmap.allocate_next(rng) for _ in range(48)]
    assert sorted(picked) == list(range(16, 64))  # dynamic picks leave the static band alone while they can
    rest = [bitmap.allocate_next(rng) for _ in range(16)]
    assert sorted(rest) == list(range(16)) and bitmap.allocate_next(rng) is None and bitmap.free() == 0
    bitmap.release(5)
    assert bitmap.allocate(5) and not bitmap.allocate(5)


def test_bitmap_snapshot_is_big_endian_big_int() -> None:
    bitmap = Bitmap(1 << 20)
    bitmap.allocate(0)
    bitmap.allocate(9)
    assert bitmap.snapshot() == (1 | 1 << 9).to_bytes(2, "big")
    assert bitmap.items() == [0, 9]


def test_range_offsets_and_port_ranges() -> None:
    assert range_offset((1 << 20) - 2, 16, 256) == 256  # 10.96.0.0/12
    assert range_offset(2768, 32, 128) == 86  # 30000-32767
    assert range_offset(8, 16, 256) == 0
    assert parse_port_range("30000-32767") == (30000, 32767)
    assert parse_port_range("30000+10") == (30000, 30010)
    with pytest.raises(ValueError, match="invalid port range"):
        parse_port_range("32767-30000")


# -- Table columns ----------------------------------------------------------------------------------


def cells(resource: str, obj: Obj) -> list[Any]:
    meta = obj.setdefault("metadata", {})
    meta.update(name=meta.get("name", "x"), creationTimestamp="2026-11-24T11:00:00Z")
    table = table_for(resource, [obj], now=NOW)
    (row,) = table["rows"]
    assert len(row["cells"]) == len(table["columnDefinitions"])
    return list(row["cells"])


def test_service_columns() -> None:
    assert [(c["name"], c["priority"]) for c in column_definitions("services")] == [
        ("Name", 0), ("Type", 0), ("Cluster-IP", 0), ("External-IP", 0), ("Port(s)", 0), ("Age", 0), ("Selector", 1)]
    node_port = {"metadata": {"name": "web"}, "spec": {
        "type": "NodePort", "clusterIPs": ["10.96.3.4"], "selector": {"b": "2", "a": "1"},
        "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}]}}
    assert cells("services", node_port) == ["web", "NodePort", "10.96.3.4", "<none>", "80:30080/TCP,53/UDP", "60m",
                                            "a=1,b=2"]
    pending = {"spec": {"type": "LoadBalancer", "clusterIPs": ["10.96.3.5"],
                        "ports": [{"port": 443, "protocol": "TCP"}]}}
    assert cells("services", pending)[3] == "<pending>"
    pending["status"] = {"loadBalancer": {"ingress": [{"ip": "192.0.2.9"}, {"hostname": "lb.example.com"}]}}
    pending["spec"]["externalIPs"] = ["198.51.100.1"]
    assert cells("services", pending)[3] == "192.0.2.9,lb.example.com,198.51.100.1"
    external = {"spec": {"type": "ExternalName", "externalName": "db.example.com"}}
    assert cells("services", external)[2:5] == ["<none>", "db.example.com", "<none>"]
    assert cells("services", external)[6] == "<none>"


def test_endpoints_and_endpoint_slice_columns() -> None:
    subsets = [{"addresses": [{"ip": f"10.244.1.{i}"} for i in range(1, 4)], "ports": [{"port": 80}, {"port": 443}]}]
    assert cells("endpoints", {"subsets": subsets})[1] == "10.244.1.1:80,10.244.1.2:80,10.244.1.3:80 + 3 more..."
    assert cells("endpoints", {"subsets": [{"addresses": [{"ip": "10.244.1.1"}]}]})[1] == "10.244.1.1"
    assert cells("endpoints", {})[1] == "<none>"
    assert [c["name"] for c in column_definitions("endpointslices")] == [
        "Name", "AddressType", "Ports", "Endpoints", "Age"]
    slice_ = {"addressType": "IPv4", "ports": [{"port": 80}, {"name": "http"}],
              "endpoints": [{"addresses": [f"10.244.2.{i}"]} for i in range(5)]}
    assert cells("endpointslices", slice_)[1:4] == ["IPv4", "80,http", "10.244.2.0,10.244.2.1,10.244.2.2 + 2 more..."]
    assert cells("endpointslices", {"addressType": "IPv4"})[2:4] == ["<unset>", "<unset>"]


# -- the kubernetes Service's pieces (apiserver/controlplane.py) ----------------------------------------


def test_kubernetes_endpoints_address_and_objects() -> None:
    from apiserver.controlplane import advertised_port, endpoint_ip, kubernetes_endpoint_slice, kubernetes_endpoints

    assert endpoint_ip("198.51.100.7:6443") == "198.51.100.7" and advertised_port("198.51.100.7:6443") == 6443
    assert endpoint_ip("[2001:db8::7]:6443") == "2001:db8::7"
    chosen = endpoint_ip("127.0.0.1:6443")  # loopback: the host's default-route address, or none
    assert chosen is None or not chosen.startswith("127.")
    assert kubernetes_endpoints([], 6443)["subsets"] == []
    endpoints = kubernetes_endpoints(["198.51.100.7", "198.51.100.8"], 6443)
    assert EndpointsStrategy().validate(endpoints) == []
    assert endpoints["subsets"][0]["ports"] == [{"name": "https", "port": 6443, "protocol": "TCP"}]
    slice_ = kubernetes_endpoint_slice(["198.51.100.7"], 6443)
    assert EndpointSliceStrategy().validate(slice_) == []
    assert slice_["metadata"]["labels"] == {"kubernetes.io/service-name": "kubernetes"}


# -- group commit of the etcd-kept range (an in-memory stand-in for etcd's compare-and-swap) -------------


class CasStore:
    """get / create / update with etcd's compare-and-swap semantics, counting the writes."""

    def __init__(self) -> None:
        self.kvs: dict[str, Any] = {}
        self.revision = 0
        self.writes = 0

    async def get(self, key: str) -> Any:
        import asyncio

        await asyncio.sleep(0)  # a round trip: others run meanwhile, as they do while etcd answers
        return self.kvs.get(key)

    async def create(self, key: str, value: bytes) -> int:
        from apiserver.storage.etcd import KV, KeyExists

        if key in self.kvs:
            raise KeyExists(key)
        return self._put(KV, key, value)

    async def update(self, key: str, value: bytes, mod_revision: int) -> int:
        from apiserver.storage.etcd import KV, RevisionConflict

        if self.kvs[key].mod_revision != mod_revision:
            raise RevisionConflict(self.kvs[key])
        return self._put(KV, key, value)

    def _put(self, kv: Any, key: str, value: bytes) -> int:
        self.revision += 1
        self.writes += 1
        self.kvs[key] = kv(key, value, self.revision, self.revision)
        return self.revision


def test_concurrent_allocations_share_one_write_and_refusals_stay_apart() -> None:
    import asyncio

    from apiserver.registry.allocator import AlreadyAllocated, NodePortAllocator

    async def scenario() -> tuple[list[Any], int, list[int]]:
        store = CasStore()
        ports = NodePortAllocator(store, "30000-30099")  # type: ignore[arg-type]  # the CAS stand-in
        await ports.allocate(30010)
        writes = store.writes
        results = await asyncio.gather(*(ports.allocate_next() for _ in range(20)), ports.allocate(30010),
                                       return_exceptions=True)
        return results, store.writes - writes, await ports.allocated()

    results, writes, taken = asyncio.run(scenario())
    picked = [r for r in results if isinstance(r, int)]
    assert len(set(picked)) == 20 and 30010 not in picked
    assert isinstance(results[-1], AlreadyAllocated)  # refused alone; the 20 others went through
    assert writes <= 2  # the first caller's write, then one for everyone who queued behind it
    assert sorted(taken) == sorted([30010, *picked])
