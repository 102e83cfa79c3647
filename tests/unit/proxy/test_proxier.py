"""The iptables proxier's rules (proxy/iptables/proxier.py) and endpoint choice (proxy/serviceport.py),
pure: Services and EndpointSlices in, iptables-restore text out. Chain names are upstream's (the same
hashes as pkg/proxy/iptables/proxier_test.go)."""

from __future__ import annotations

from typing import Any

import pytest

from machinery.api.core_v1 import Service
from machinery.api.discovery_v1 import EndpointSlice
from proxy.iptables.proxier import (
    Chains,
    ProxierConfig,
    build_rules,
    cleanup_batch,
    restore_batch,
)
from proxy.serviceport import EndpointInfo, ServicePortName, service_ports, slice_endpoints


def service(name: str = "web", ns: str = "default", ip: str = "10.96.0.10", **spec: Any) -> Service:
    ports = spec.pop("ports", [{"port": 80, "protocol": "TCP", "targetPort": 8080}])
    status = spec.pop("status", None)
    return Service.model_validate({"metadata": {"name": name, "namespace": ns},
                                   "spec": {"clusterIP": ip, "ports": ports, "type": "ClusterIP", **spec},
                                   "status": status})


def endpoint_slice(service_name: str, endpoints: list[dict[str, Any]], ns: str = "default", port: int = 8080,
                   port_name: str = "") -> EndpointSlice:
    return EndpointSlice.model_validate({
        "metadata": {"name": f"{service_name}-x", "namespace": ns,
                     "labels": {"kubernetes.io/service-name": service_name}},
        "addressType": "IPv4", "ports": [{"name": port_name, "port": port, "protocol": "TCP"}],
        "endpoints": endpoints})


def ep(ip: str, node: str = "node-1", **conditions: bool) -> dict[str, Any]:
    return {"addresses": [ip], "nodeName": node, "conditions": conditions or {"ready": True}}


def rules_for(services: list[Service], slices: list[EndpointSlice], **config: Any) -> str:
    cfg = ProxierConfig(**config)
    ports = {p.name: p for s in services for p in service_ports(s)}
    return restore_batch(build_rules(cfg, ports, slice_endpoints(slices)), None, set()).text


def test_chain_names_are_upstreams_hashes() -> None:
    name = ServicePortName("ns1", "svc1", "p80", "TCP")
    assert Chains().svc(name) == "KUBE-SVC-XPGD46QRK7WJZT7O"
    assert Chains().sep(name, EndpointInfo("10.180.0.1", 80)) == "KUBE-SEP-SXIVWICOYRO3J4NJ"
    assert Chains("KT01").svc(name) == "KT01-SVC-XPGD46QRK7WJZT7O"


@pytest.mark.parametrize("prefix", ["kube", "KUBE-X", "TOOLONGX", ""])
def test_bad_chain_prefix(prefix: str) -> None:
    with pytest.raises(ValueError, match="chain prefix"):
        Chains(prefix)


def test_cluster_ip_balances_over_ready_endpoints() -> None:
    text = rules_for([service()], [endpoint_slice("web", [ep("10.244.1.2"), ep("10.244.1.3"), ep("10.244.1.4"),
                                                          ep("10.244.1.5", ready=False)])])
    name = ServicePortName("default", "web", "", "TCP")
    svc = Chains().svc(name)
    assert (f'-A KUBE-SERVICES -d 10.96.0.10/32 -m comment --comment "default/web cluster IP" -p tcp -m tcp '
            f"--dport 80 -j {svc}") in text
    probabilities = [line.split("--probability ")[1].split()[0] for line in text.splitlines()
                     if line.startswith(f"-A {svc}") and "--probability" in line]
    assert probabilities == ["0.3333333333", "0.5000000000"]  # and the last endpoint takes the rest
    assert "DNAT --to-destination 10.244.1.4:8080" in text
    assert "10.244.1.5" not in text  # not ready
    # off-cluster sources to the cluster IP are masqueraded
    assert f"-A {svc} -m comment --comment \"default/web cluster IP\" ! -s 10.244.0.0/16 -d 10.96.0.10/32" in text


def test_masquerade_all_marks_every_source() -> None:
    text = rules_for([service()], [endpoint_slice("web", [ep("10.244.1.2")])], masquerade_all=True)
    assert "! -s 10.244.0.0/16" not in text and "-d 10.96.0.10/32 -p tcp -m tcp --dport 80 -j KUBE-MARK-MASQ" in text


def test_no_endpoints_is_rejected_in_filter_and_not_in_nat() -> None:
    text = rules_for([service(type="NodePort", ports=[{"port": 80, "nodePort": 30080, "protocol": "TCP"}])], [])
    assert ('-A KUBE-SERVICES -d 10.96.0.10/32 -m comment --comment "default/web has no endpoints" -p tcp -m tcp '
            "--dport 80 -j REJECT") in text
    assert ('-A KUBE-EXTERNAL-SERVICES -m comment --comment "default/web has no endpoints" -m addrtype '
            "--dst-type LOCAL -p tcp -m tcp --dport 30080 -j REJECT") in text
    assert "-SVC-" not in text and "KUBE-NODEPORTS -m comment" not in text


def test_terminating_serving_endpoints_when_none_is_ready() -> None:
    text = rules_for([service()], [endpoint_slice("web", [
        ep("10.244.1.2", ready=False, serving=True, terminating=True),
        ep("10.244.1.3", ready=False, serving=False, terminating=True)])])
    assert "DNAT --to-destination 10.244.1.2:8080" in text and "10.244.1.3" not in text
    # one ready endpoint wins over terminating ones
    text = rules_for([service()], [endpoint_slice("web", [
        ep("10.244.1.2", ready=False, serving=True, terminating=True), ep("10.244.1.4")])])
    assert "10.244.1.2:8080" not in text and "10.244.1.4:8080" in text


def test_client_ip_affinity_uses_recent() -> None:
    text = rules_for([service(sessionAffinity="ClientIP", sessionAffinityConfig={"clientIP": {"timeoutSeconds": 60}})],
                     [endpoint_slice("web", [ep("10.244.1.2"), ep("10.244.1.3")])])
    name = ServicePortName("default", "web", "", "TCP")
    sep = Chains().sep(name, EndpointInfo("10.244.1.2", 8080))
    assert f"-m recent --name {sep} --rcheck --seconds 60 --reap -j {sep}" in text
    assert f"-A {sep} -m comment --comment \"default/web\" -p tcp -m recent --name {sep} --set -m tcp -j DNAT" in text


def test_node_port_and_load_balancer_ip_go_through_ext() -> None:
    svc = service(type="LoadBalancer", ports=[{"port": 80, "nodePort": 30080, "protocol": "TCP"}],
                  status={"loadBalancer": {"ingress": [{"ip": "192.0.2.2"}]}})
    text = rules_for([svc], [endpoint_slice("web", [ep("10.244.1.2")])])
    name = ServicePortName("default", "web", "", "TCP")
    ext, svc_chain = Chains().ext(name), Chains().svc(name)
    assert f"-A KUBE-NODEPORTS -m comment --comment \"default/web\" -p tcp -m tcp --dport 30080 -j {ext}" in text
    assert f"-d 192.0.2.2/32 -m comment --comment \"default/web external IP\" -p tcp -m tcp --dport 80 -j {ext}" in text
    assert f"-A {ext} -j {svc_chain}" in text and f"-A {ext} -m comment" in text and "-j KUBE-MARK-MASQ" in text
    # the node-port jump is the last rule of KUBE-SERVICES
    services = [line for line in text.splitlines() if line.startswith("-A KUBE-SERVICES")]
    assert services[-1].endswith("! -d 127.0.0.0/8 -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS")


def test_traffic_policy_local_keeps_this_hosts_endpoints() -> None:
    svc = service(type="NodePort", ports=[{"port": 80, "nodePort": 30080, "protocol": "TCP"}],
                  externalTrafficPolicy="Local")
    slices = [endpoint_slice("web", [ep("10.244.1.2", "node-1"), ep("10.244.2.2", "node-2"),
                                     ep("10.244.3.2", "elsewhere")])]
    text = rules_for([svc], slices, local_nodes={"node-1", "node-2"})
    name = ServicePortName("default", "web", "", "TCP")
    svl = Chains().svl(name)
    svl_rules = [line for line in text.splitlines() if line.startswith(f"-A {svl}")]
    assert len(svl_rules) == 2 and not any("10.244.3.2" in r for r in svl_rules)
    assert f"-A {Chains().ext(name)} -j {svl}" in text
    # none local: external traffic is dropped (there are endpoints elsewhere), cluster traffic still flows
    text = rules_for([svc], slices, local_nodes={"node-9"})
    assert '"default/web has no local endpoints" -m addrtype --dst-type LOCAL' in text and "-j DROP" in text
    assert f"-j {Chains().svc(name)}" in text


def test_internal_traffic_policy_local_without_local_endpoints_drops() -> None:
    svc = service(internalTrafficPolicy="Local")
    text = rules_for([svc], [endpoint_slice("web", [ep("10.244.3.2", "elsewhere")])], local_nodes={"node-1"})
    assert '-A KUBE-SERVICES -d 10.96.0.10/32 -m comment --comment "default/web has no local endpoints"' in text


def test_named_ports_and_protocols_match_slices() -> None:
    svc = service(ports=[{"name": "http", "port": 80, "protocol": "TCP"}, {"name": "dns", "port": 53,
                                                                           "protocol": "UDP"}])
    slices = [endpoint_slice("web", [ep("10.244.1.2")], port=8080, port_name="http")]
    text = rules_for([svc], slices)
    assert "DNAT --to-destination 10.244.1.2:8080" in text
    assert '"default/web:dns has no endpoints" -p udp -m udp --dport 53 -j REJECT' in text


def test_headless_external_name_and_unlabelled_slices_are_ignored() -> None:
    headless = service(name="h", ip="None")
    external = service(name="e", ip="", type="ExternalName", externalName="example.org")
    assert service_ports(headless) == [] and service_ports(external) == []
    orphan = endpoint_slice("web", [ep("10.244.1.2")])
    orphan.metadata.labels = {}
    assert slice_endpoints([orphan]) == {}


def test_partial_sync_rewrites_only_changed_chains_and_deletes_stale_ones() -> None:
    cfg = ProxierConfig()
    a, b = service("a", ip="10.96.0.1"), service("b", ip="10.96.0.2")
    slices = [endpoint_slice("a", [ep("10.244.1.2")]), endpoint_slice("b", [ep("10.244.1.3")])]

    def rules(services: list[Service], eps: list[EndpointSlice]) -> Any:
        return build_rules(cfg, {p.name: p for s in services for p in service_ports(s)}, slice_endpoints(eps))

    first = rules([a, b], slices)
    full = restore_batch(first, None, set())
    assert len(full.written) == 4 and full.deleted == []
    # b's endpoint changes: only b's SVC and its new SEP are written, b's old SEP goes
    second = rules([a, b], [slices[0], endpoint_slice("b", [ep("10.244.1.9")])])
    partial = restore_batch(second, first.nat_chains, set(first.nat_chains))
    name_b = ServicePortName("default", "b", "", "TCP")
    assert set(partial.written) == {Chains().svc(name_b), Chains().sep(name_b, EndpointInfo("10.244.1.9", 8080))}
    assert partial.deleted == [Chains().sep(name_b, EndpointInfo("10.244.1.3", 8080))]
    assert f"-X {partial.deleted[0]}" in partial.text
    # nat is committed before filter (a Service's DNAT is in place before its REJECT goes)
    assert partial.text.index("*nat") < partial.text.index("*filter")
    # the top chains are rewritten every time
    assert ":KUBE-SERVICES - [0:0]" in partial.text and "-A KUBE-SERVICES -d 10.96.0.1/32" in partial.text
    # a is deleted: all of its chains go
    third = rules([b], [endpoint_slice("b", [ep("10.244.1.9")])])
    gone = restore_batch(third, second.nat_chains, set(second.nat_chains))
    assert gone.written == [] and len(gone.deleted) == 2


def test_a_restarted_proxy_deletes_chains_it_finds_but_no_longer_wants() -> None:
    in_kernel = ["PREROUTING", "KUBE-SERVICES", "KUBE-SVC-AAAAAAAAAAAAAAAA", "KUBE-SEP-BBBBBBBBBBBBBBBB",
                 "KUBE1-SVC-CCCCCCCCCCCCCCCC", "KUBE-SVC-SHORT", "DOCKER", "MINIK8S-FORWARD"]
    found = {chain for chain in in_kernel if Chains().is_own(chain)}
    assert found == {"KUBE-SERVICES", "KUBE-SVC-AAAAAAAAAAAAAAAA", "KUBE-SEP-BBBBBBBBBBBBBBBB"}
    batch = restore_batch(build_rules(ProxierConfig(), {}, {}), None, found - set(Chains().nat_top()))
    assert "-X KUBE-SVC-AAAAAAAAAAAAAAAA" in batch.text and "-X KUBE-SEP-BBBBBBBBBBBBBBBB" in batch.text
    assert "KUBE1-" not in batch.text


def test_cleanup_removes_only_its_own_jumps_and_chains() -> None:
    saved = """*filter
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:KT01-SERVICES - [0:0]
:KT02-SERVICES - [0:0]
-A INPUT -m conntrack --ctstate NEW -j KT01-SERVICES
-A OUTPUT -m conntrack --ctstate NEW -j KT02-SERVICES
-A KT01-SERVICES -d 10.96.0.1/32 -j REJECT
COMMIT
*nat
:PREROUTING ACCEPT [0:0]
:KT01-SERVICES - [0:0]
:KT01-SVC-AAAAAAAAAAAAAAAA - [0:0]
:DOCKER - [0:0]
-A PREROUTING -m comment --comment "kubernetes service portals" -j KT01-SERVICES
-A PREROUTING -j DOCKER
-A KT01-SERVICES -d 10.96.0.1/32 -j KT01-SVC-AAAAAAAAAAAAAAAA
COMMIT
"""
    batch = cleanup_batch(saved, Chains("KT01"))
    assert "-D INPUT -m conntrack --ctstate NEW -j KT01-SERVICES" in batch
    assert '-D PREROUTING -m comment --comment "kubernetes service portals" -j KT01-SERVICES' in batch
    assert "-X KT01-SERVICES" in batch and "-X KT01-SVC-AAAAAAAAAAAAAAAA" in batch
    assert "KT02" not in batch and "DOCKER" not in batch
    assert cleanup_batch(saved, Chains("KT03")) == ""
