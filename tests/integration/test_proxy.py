"""kube-proxy on the host's real packet filter: a real apiserver and etcd, `python -m proxy` with a chain
prefix of its own, and real backends (minik8s/httpd:1 containers on a Docker network of the module's own,
whose subnet is the proxy's cluster CIDR). Services and EndpointSlices are written by hand, as for a
selector-less Service. Every rule the module made goes at its end (`python -m proxy --cleanup`), even when
a test fails."""

from __future__ import annotations

import shutil
import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.cluster import ApiServer, make_workdir, wait_for
from tests.proxy_process import (
    BUSYBOX,
    TEST_LABEL,
    Backends,
    ProxyProcess,
    cleanup_prefix,
    free_node_port,
    http_get,
    iptables_save,
    own_lines,
    service_ip_block,
)

pytestmark = pytest.mark.skipif(not shutil.which("iptables-restore"), reason="no iptables-restore on this host")

NODE = "proxy-node-a"


@pytest.fixture(scope="module")
def backends() -> Iterator[Backends]:
    try:
        import docker

        docker.from_env().ping()
    except Exception as e:
        pytest.skip(f"no Docker engine for the backends: {e}")
    b = Backends()
    try:
        b.start(3)
        yield b
    finally:
        b.remove()


@pytest.fixture(scope="module")
def proxy(apiserver: ApiServer, backends: Backends) -> Iterator[ProxyProcess]:
    p = ProxyProcess(make_workdir("minik8s-proxy-"), apiserver.url, backends.subnet, nodes=NODE)
    try:
        p.start()
        yield p
    finally:
        p.cleanup()
        shutil.rmtree(p.workdir, ignore_errors=True)
        assert own_lines(p.prefix) == [], "--cleanup left rules behind"


@pytest.fixture(scope="module")
def ip_block() -> str:
    return service_ip_block()


_next = iter(range(1, 250))


def cluster_ip(block: str) -> str:
    return f"{block}.{next(_next)}"


def make_service(api: httpx.Client, ns: str, name: str, ip: str, *, port: int = 80, type_: str = "ClusterIP",
                 node_port: int | None = None, **spec: Any) -> dict[str, Any]:
    svc_port: dict[str, Any] = {"port": port, "protocol": "TCP", "targetPort": 80}
    if node_port:
        svc_port["nodePort"] = node_port
    body = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns},
            "spec": {"type": type_, "clusterIP": ip, "clusterIPs": [ip], "ports": [svc_port], **spec}}
    r = api.post(f"/api/v1/namespaces/{ns}/services", json=body)
    assert r.status_code == 201, r.text
    return dict(r.json())


def slice_body(ns: str, service: str, ips: list[str], *, ready: dict[str, bool] | None = None,
               node: str = NODE, name: str | None = None) -> dict[str, Any]:
    ready = ready or {}
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": name or f"{service}-abc", "namespace": ns,
                         "labels": {"kubernetes.io/service-name": service}},
            "addressType": "IPv4", "ports": [{"name": "", "port": 80, "protocol": "TCP"}],
            "endpoints": [{"addresses": [ip], "nodeName": node,
                           "conditions": {"ready": ready.get(ip, True), "serving": ready.get(ip, True)}}
                          for ip in ips]}


def write_slice(api: httpx.Client, ns: str, body: dict[str, Any]) -> None:
    path = f"/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices"
    current = api.get(f"{path}/{body['metadata']['name']}")
    if current.status_code == 200:
        body["metadata"]["resourceVersion"] = current.json()["metadata"]["resourceVersion"]
        r = api.put(f"{path}/{body['metadata']['name']}", json=body)
    else:
        r = api.post(path, json=body)
    assert r.status_code in (200, 201), r.text


def answers(ip: str, port: int) -> str | None:
    try:
        return http_get(ip, port, timeout=1)
    except OSError:
        return None


def declared_chains() -> set[str]:
    return {line[1:].split()[0] for line in iptables_save().splitlines() if line.startswith(":")}


def service_chains(prefix: str, service: str) -> set[str]:
    """The per-Service chains (SVC, SEP, ...) whose rules name this Service in their comments."""
    return {line.split()[1] for line in own_lines(prefix)
            if line.startswith((f"-A {prefix}-SVC-", f"-A {prefix}-SEP-")) and f"/{service} " in line.replace('"', " ")}


def backends_seen(ip: str, port: int, requests: int) -> list[str]:
    return [http_get(ip, port) for _ in range(requests)]


def test_cluster_ip_reaches_every_ready_backend(api: httpx.Client, namespace: str, proxy: ProxyProcess,
                                                backends: Backends, ip_block: str) -> None:
    ip = cluster_ip(ip_block)
    make_service(api, namespace, "web", ip)
    write_slice(api, namespace, slice_body(namespace, "web", backends.ips()))
    wait_for(lambda: answers(ip, 80), 10, what="the ClusterIP answering")
    seen = set(backends_seen(ip, 80, 60))
    assert seen == {c.name for c in backends.containers}


def test_a_pod_on_the_bridge_reaches_the_service(api: httpx.Client, namespace: str, proxy: ProxyProcess,
                                                 backends: Backends, ip_block: str) -> None:
    """From a container on the backends' bridge (a pod's view): DNAT in PREROUTING, and the replies, which
    the backend sends straight over the bridge, un-NATed by br_netfilter; no masquerade (in the cluster CIDR)."""
    ip = cluster_ip(ip_block)
    make_service(api, namespace, "frompod", ip)
    write_slice(api, namespace, slice_body(namespace, "frompod", backends.ips()))
    wait_for(lambda: answers(ip, 80), 10, what="the ClusterIP answering")
    client = backends.client.containers.run(
        BUSYBOX, ["sleep", "300"], name=f"{backends.tag}-client", detach=True, network=backends.tag,
        labels={TEST_LABEL: backends.tag})
    try:
        seen = set()
        for _ in range(30):
            # nc, not wget: this busybox's wget dies of SIGSEGV on a failed connection, hiding the error
            code, out = client.exec_run(["sh", "-c", f"printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 3 {ip} 80"])
            assert code == 0 and b"200 OK" in out, out
            seen.add(out.decode().split("\r\n\r\n", 1)[1].strip())
        assert seen == {c.name for c in backends.containers}
    finally:
        client.remove(force=True)


def test_service_without_endpoints_is_refused_fast(api: httpx.Client, namespace: str, proxy: ProxyProcess,
                                                   ip_block: str) -> None:
    ip = cluster_ip(ip_block)
    make_service(api, namespace, "empty", ip)
    wait_for(lambda: f"-d {ip}/32" in iptables_save(), 10, what="the REJECT rule")
    start = time.monotonic()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((ip, 80), timeout=5).close()
    assert time.monotonic() - start < 1.0, "refused, but not fast"


def test_removed_and_unready_endpoints_get_no_new_connections(api: httpx.Client, namespace: str,
                                                              proxy: ProxyProcess, backends: Backends,
                                                              ip_block: str) -> None:
    ip = cluster_ip(ip_block)
    ips = backends.ips()
    names = [c.name for c in backends.containers]
    make_service(api, namespace, "shrink", ip)
    write_slice(api, namespace, slice_body(namespace, "shrink", ips))
    wait_for(lambda: answers(ip, 80), 10, what="the ClusterIP answering")
    # one endpoint leaves the slice, another turns unready: only the third gets connections
    write_slice(api, namespace, slice_body(namespace, "shrink", ips[1:], ready={ips[1]: False}))
    wait_for(lambda: set(backends_seen(ip, 80, 20)) == {names[2]}, 10, what="only the ready endpoint answering")
    assert set(backends_seen(ip, 80, 40)) == {names[2]}


def test_terminating_serving_endpoints_are_the_fallback(api: httpx.Client, namespace: str, proxy: ProxyProcess,
                                                        backends: Backends, ip_block: str) -> None:
    ip = cluster_ip(ip_block)
    first = backends.ips()[0]
    make_service(api, namespace, "draining", ip)
    body = slice_body(namespace, "draining", [first])
    body["endpoints"][0]["conditions"] = {"ready": False, "serving": True, "terminating": True}
    write_slice(api, namespace, body)
    assert wait_for(lambda: answers(ip, 80), 10, what="the terminating endpoint answering") == \
        backends.containers[0].name


def test_client_ip_affinity_sticks(api: httpx.Client, namespace: str, proxy: ProxyProcess, backends: Backends,
                                   ip_block: str) -> None:
    ip = cluster_ip(ip_block)
    make_service(api, namespace, "sticky", ip, sessionAffinity="ClientIP",
                 sessionAffinityConfig={"clientIP": {"timeoutSeconds": 60}})
    write_slice(api, namespace, slice_body(namespace, "sticky", backends.ips()))
    first = wait_for(lambda: answers(ip, 80), 10, what="the ClusterIP answering")
    assert set(backends_seen(ip, 80, 30)) == {first}


def test_node_port_answers_on_the_host(api: httpx.Client, namespace: str, proxy: ProxyProcess,
                                       backends: Backends, ip_block: str) -> None:
    node_port = free_node_port()
    make_service(api, namespace, "np", cluster_ip(ip_block), type_="NodePort", node_port=node_port)
    write_slice(api, namespace, slice_body(namespace, "np", backends.ips()))
    host = backends.gateway  # one of the host's own addresses
    wait_for(lambda: answers(host, node_port), 10, what="the NodePort answering on the host")
    assert set(backends_seen(host, node_port, 60)) == {c.name for c in backends.containers}


def test_external_traffic_policy_local_keeps_this_hosts_endpoints(api: httpx.Client, namespace: str,
                                                                  proxy: ProxyProcess, backends: Backends,
                                                                  ip_block: str) -> None:
    node_port = free_node_port()
    make_service(api, namespace, "local", cluster_ip(ip_block), type_="NodePort", node_port=node_port,
                 externalTrafficPolicy="Local")
    ips = backends.ips()
    body = slice_body(namespace, "local", ips)
    body["endpoints"][1]["nodeName"] = body["endpoints"][2]["nodeName"] = "another-hosts-node"
    write_slice(api, namespace, body)
    host = backends.gateway
    wait_for(lambda: answers(host, node_port), 10, what="the NodePort answering")
    # the host's own traffic to a NodePort goes to the whole Service (upstream); from a pod only local ones would
    chains = "\n".join(own_lines(proxy.prefix))
    assert f"-A {proxy.prefix}-SVL-" in chains and chains.count(f"-A {proxy.prefix}-SVL-") == 1


def test_load_balancer_ingress_ip_answers(api: httpx.Client, namespace: str, proxy: ProxyProcess,
                                          backends: Backends, ip_block: str) -> None:
    port = free_node_port()  # a port no rule of this host uses, on the host's own address
    svc = make_service(api, namespace, "lb", cluster_ip(ip_block), port=port, type_="LoadBalancer",
                       node_port=free_node_port())
    svc["status"] = {"loadBalancer": {"ingress": [{"ip": backends.gateway, "ipMode": "VIP"}]}}
    r = api.put(f"/api/v1/namespaces/{namespace}/services/lb/status", json=svc)
    assert r.status_code == 200, r.text
    write_slice(api, namespace, slice_body(namespace, "lb", backends.ips()))
    assert wait_for(lambda: answers(backends.gateway, port), 10, what="the load-balancer IP answering") in \
        {c.name for c in backends.containers}


def test_deleted_service_chains_go(api: httpx.Client, namespace: str, proxy: ProxyProcess, backends: Backends,
                                   ip_block: str) -> None:
    ip = cluster_ip(ip_block)
    make_service(api, namespace, "gone", ip)
    write_slice(api, namespace, slice_body(namespace, "gone", backends.ips()))
    wait_for(lambda: answers(ip, 80), 10, what="the ClusterIP answering")
    chains = service_chains(proxy.prefix, "gone")
    assert len(chains) == 4  # KUBE-SVC and one KUBE-SEP per endpoint
    assert api.delete(f"/api/v1/namespaces/{namespace}/services/gone").status_code == 200
    wait_for(lambda: f"{ip}/32" not in iptables_save(), 10, what="the Service's rules gone")
    assert chains.isdisjoint(declared_chains()), "a chain of the deleted Service stayed"


def test_killed_proxy_restarts_and_converges(api: httpx.Client, namespace: str, proxy: ProxyProcess,
                                             backends: Backends, ip_block: str) -> None:
    old_ip, new_ip = cluster_ip(ip_block), cluster_ip(ip_block)
    make_service(api, namespace, "old", old_ip)
    write_slice(api, namespace, slice_body(namespace, "old", backends.ips()))
    wait_for(lambda: answers(old_ip, 80), 10, what="the old Service answering")
    old_chains = service_chains(proxy.prefix, "old")
    assert len(old_chains) == 4  # KUBE-SVC and three KUBE-SEP
    proxy.kill()
    # while it is down: the old Service goes, a new one comes; the old rules still answer (as upstream)
    assert api.delete(f"/api/v1/namespaces/{namespace}/services/old").status_code == 200
    make_service(api, namespace, "new", new_ip)
    write_slice(api, namespace, slice_body(namespace, "new", backends.ips(), name="new-abc"))
    names = {c.name for c in backends.containers}
    assert answers(old_ip, 80) in names and answers(new_ip, 80) not in names
    proxy.start()
    wait_for(lambda: answers(new_ip, 80) in names, 10, what="the new Service answering after the restart")
    wait_for(lambda: answers(old_ip, 80) not in names, 10, what="the old Service's rules gone")
    assert old_chains.isdisjoint(declared_chains()), "a stale chain of the deleted Service stayed"


def test_cleanup_removes_only_its_own_chains(apiserver: ApiServer, api: httpx.Client, namespace: str,
                                             proxy: ProxyProcess, backends: Backends, ip_block: str) -> None:
    """A second proxy (another cluster on this host) and its --cleanup leave the first one's rules alone."""
    other = ProxyProcess(proxy.workdir, apiserver.url, backends.subnet, nodes=NODE)
    try:
        ip = cluster_ip(ip_block)
        make_service(api, namespace, "both", ip)
        write_slice(api, namespace, slice_body(namespace, "both", backends.ips()))
        other.start()
        wait_for(lambda: any(f"-d {ip}/32" in line for line in own_lines(other.prefix)), 10,
                 what="the second proxy's rules")
        before = own_lines(proxy.prefix)
        other.stop()
        done = cleanup_prefix(other.prefix)
        assert done.returncode == 0, done.stderr
        assert own_lines(other.prefix) == []
        assert own_lines(proxy.prefix) == before
        assert answers(ip, 80) is not None
    finally:
        other.cleanup()


def test_bad_chain_prefix_is_refused() -> None:
    done = cleanup_prefix("kube-lower")
    assert done.returncode == 2
    assert "--iptables-chain-prefix must match" in done.stderr


def test_healthz_and_metrics(proxy: ProxyProcess) -> None:
    r = httpx.get(f"http://127.0.0.1:{proxy.healthz_port}/healthz", timeout=5)
    assert r.status_code == 200 and r.json()["lastUpdated"] and r.json()["nodeName"] == NODE
    assert (proxy.metric("kubeproxy_sync_proxy_rules_last_timestamp_seconds") or 0) > time.time() - 60
