"""The pods' /etc/resolv.conf on real nodes, per dnsPolicy: a kubelet with --cluster-dns, --cluster-domain and a
--resolv-conf of the test's own, on each CRI runtime (the Docker shim rewrites the sandbox's file, which the app
containers share; containerd's CRI plugin writes it itself). Each pod prints its resolv.conf; the test reads it
through the apiserver's pods/log."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.cluster import ApiServer, make_workdir, wait_for
from tests.integration.test_kubelet import container, create, events_of, log_of, pod_manifest, sh
from tests.integration.test_kubelet_runtimes import _skip_without
from tests.node_process import RUNTIMES, KubeletProcess, cleanup, ensure_images, free_pod_cidrs

HOST_RESOLV = "nameserver 192.0.2.53\nsearch corp.example\noptions timeout:2\n"
PRINT = sh("cat /etc/resolv.conf; echo END; sleep 3600")


@pytest.fixture(scope="module", params=RUNTIMES)
def dns_node(request: pytest.FixtureRequest, apiserver: ApiServer) -> Iterator[KubeletProcess]:
    runtime: str = request.param
    _skip_without(runtime)
    ensure_images()
    workdir = make_workdir(f"minik8s-kubelet-dns-{runtime}-")
    resolv = workdir / "host-resolv.conf"
    resolv.write_text(HOST_RESOLV)
    node = KubeletProcess(workdir, apiserver, f"kdns-{uuid.uuid4().hex[:6]}", free_pod_cidrs(1)[0],
                          container_runtime=runtime,
                          extra_args=["--cluster-dns", "10.96.0.10", "--cluster-domain", "cluster.local",
                                      "--resolv-conf", str(resolv)])
    try:
        with httpx.Client(base_url=apiserver.url, timeout=10) as api:
            node.start(api)
        yield node
    finally:
        cleanup([node])
        with httpx.Client(base_url=apiserver.url, timeout=10) as api:
            api.delete(f"/api/v1/nodes/{node.node}")
        shutil.rmtree(workdir, ignore_errors=True)


def resolv_conf_of(api: httpx.Client, ns: str, pod: str, name: str = "c") -> list[str]:
    def printed() -> str:
        try:
            text = log_of(api, ns, pod, container=name)
        except AssertionError:  # not started yet
            return ""
        return text if "END" in text else ""

    text = wait_for(printed, 60, 0.2, what=f"{pod}/{name} to print its resolv.conf")
    assert isinstance(text, str)
    # sorted: containerd writes the search line first, the shim (as upstream's dockershim) the nameservers
    return sorted(line for line in text.split("END")[0].splitlines() if line.strip() and not line.startswith("#"))


def run(api: httpx.Client, ns: str, node: KubeletProcess, name: str, **spec: Any) -> None:
    create(api, ns, pod_manifest(name, node.node, [container("c", command=PRINT)], **spec))


def test_cluster_first_default_shared_by_every_container(dns_node: KubeletProcess, api: httpx.Client,
                                                         namespace: str) -> None:
    create(api, namespace, pod_manifest("first", dns_node.node, [container("c", command=PRINT),
                                                                 container("d", command=PRINT)]))
    wanted = sorted(["nameserver 10.96.0.10",
                     f"search {namespace}.svc.cluster.local svc.cluster.local cluster.local corp.example",
                     "options ndots:5"])
    assert resolv_conf_of(api, namespace, "first") == wanted
    assert resolv_conf_of(api, namespace, "first", "d") == wanted


def test_default_is_the_hosts_resolv_conf(dns_node: KubeletProcess, api: httpx.Client, namespace: str) -> None:
    run(api, namespace, dns_node, "host-dns", dnsPolicy="Default")
    assert resolv_conf_of(api, namespace, "host-dns") == sorted(HOST_RESOLV.splitlines())


def test_none_takes_only_the_dns_config(dns_node: KubeletProcess, api: httpx.Client, namespace: str) -> None:
    run(api, namespace, dns_node, "custom", dnsPolicy="None", dnsConfig={
        "nameservers": ["192.0.2.99"], "searches": ["only.example"],
        "options": [{"name": "ndots", "value": "2"}, {"name": "edns0"}]})
    assert resolv_conf_of(api, namespace, "custom") == ["nameserver 192.0.2.99", "options ndots:2 edns0",
                                                        "search only.example"]


def test_dns_config_merges_into_cluster_first_and_limits_warn(dns_node: KubeletProcess, api: httpx.Client,
                                                              namespace: str) -> None:
    run(api, namespace, dns_node, "merged", dnsConfig={
        "nameservers": ["192.0.2.1", "192.0.2.2", "192.0.2.3"], "options": [{"name": "ndots", "value": "1"}]})
    lines = resolv_conf_of(api, namespace, "merged")
    assert [line for line in lines if line.startswith("nameserver")] == [
        "nameserver 10.96.0.10", "nameserver 192.0.2.1", "nameserver 192.0.2.2"]  # libc's 3
    assert "options ndots:1" in lines
    wait_for(lambda: any(e["reason"] == "DNSConfigForming" for e in events_of(api, namespace, "merged")), 15,
             what="the DNSConfigForming event")


def test_host_network_cluster_first_with_host_net(dns_node: KubeletProcess, api: httpx.Client,
                                                  namespace: str) -> None:
    run(api, namespace, dns_node, "hostnet", hostNetwork=True, dnsPolicy="ClusterFirstWithHostNet")
    assert "nameserver 10.96.0.10" in resolv_conf_of(api, namespace, "hostnet")
    run(api, namespace, dns_node, "hostnet-default", hostNetwork=True)  # ClusterFirst on the host network: Default
    assert resolv_conf_of(api, namespace, "hostnet-default") == sorted(HOST_RESOLV.splitlines())
