"""The proxier's sync (proxy/iptables/syncer.py) over a recording runner: partial after full, a failed
batch makes the next one full, the jump rules ensured once, cleanup. The batches themselves are
tested in test_proxier.py, the real binaries in tests/integration/test_proxy.py."""

from __future__ import annotations

import pytest

from machinery.api.core_v1 import Service
from machinery.api.discovery_v1 import EndpointSlice
from proxy.iptables.proxier import Chains, ProxierConfig
from proxy.iptables.runner import IptablesError, Runner
from proxy.iptables.syncer import Proxier


class RecordingRunner(Runner):
    def __init__(self, in_kernel: list[str] | None = None) -> None:
        super().__init__()
        self.batches: list[str] = []
        self.ensured: list[tuple[str, str, list[str]]] = []
        self.in_kernel = in_kernel or []
        self.fail_next = False

    async def restore(self, text: str) -> None:
        if self.fail_next:
            self.fail_next = False
            raise IptablesError("iptables-restore --noflush failed (exit 1): line 7 failed")
        self.batches.append(text)

    async def chains(self, table: str) -> list[str]:
        return list(self.in_kernel)

    async def ensure_rule(self, table: str, chain: str, rule: list[str]) -> bool:
        self.ensured.append((table, chain, rule))
        return True

    async def save(self, *tables: str) -> str:
        return "*nat\n:KT01-SERVICES - [0:0]\n-A OUTPUT -j KT01-SERVICES\nCOMMIT\n"


def service(name: str, ip: str) -> Service:
    return Service.model_validate({"metadata": {"name": name, "namespace": "default"},
                                   "spec": {"clusterIP": ip, "ports": [{"port": 80, "protocol": "TCP"}]}})


def endpoint_slice(service_name: str, ip: str, rv: str) -> EndpointSlice:
    return EndpointSlice.model_validate({
        "metadata": {"name": f"{service_name}-x", "namespace": "default", "resourceVersion": rv,
                     "labels": {"kubernetes.io/service-name": service_name}},
        "addressType": "IPv4", "ports": [{"name": "", "port": 80, "protocol": "TCP"}],
        "endpoints": [{"addresses": [ip]}]})


async def test_partial_after_full_and_full_again_after_a_failed_batch() -> None:
    runner = RecordingRunner()
    proxier = Proxier(ProxierConfig(chains=Chains("KT01")), runner)
    services = [service("a", "10.96.0.1"), service("b", "10.96.0.2")]
    slices = [endpoint_slice("a", "10.244.1.2", "1"), endpoint_slice("b", "10.244.1.3", "1")]
    first = await proxier.sync(services, slices)
    assert first.full and first.written == 4 and len(runner.ensured) == len(Chains("KT01").jump_rules())
    second = await proxier.sync(services, [slices[0], endpoint_slice("b", "10.244.1.9", "2")])
    assert not second.full and second.written == 2 and second.deleted == 1
    assert len(runner.ensured) == len(Chains("KT01").jump_rules())  # not again on a partial sync
    runner.fail_next = True
    with pytest.raises(IptablesError):
        await proxier.sync(services, slices)
    third = await proxier.sync(services, slices)
    assert third.full and third.written == 4


async def test_a_restarted_proxy_deletes_the_chains_it_no_longer_wants() -> None:
    runner = RecordingRunner(["KT01-SERVICES", "KT01-SVC-AAAAAAAAAAAAAAAA", "KUBE-SVC-BBBBBBBBBBBBBBBB"])
    proxier = Proxier(ProxierConfig(chains=Chains("KT01")), runner)
    await proxier.read_kernel()
    result = await proxier.sync([], [])
    assert result.deleted == 1 and "-X KT01-SVC-AAAAAAAAAAAAAAAA" in runner.batches[-1]
    assert "KUBE-SVC-" not in runner.batches[-1]  # another cluster's chain


async def test_cleanup_forgets_what_was_written() -> None:
    runner = RecordingRunner()
    proxier = Proxier(ProxierConfig(chains=Chains("KT01")), runner)
    await proxier.sync([service("a", "10.96.0.1")], [endpoint_slice("a", "10.244.1.2", "1")])
    assert await proxier.cleanup()
    assert "-D OUTPUT -j KT01-SERVICES" in runner.batches[-1] and "-X KT01-SERVICES" in runner.batches[-1]
    again = await proxier.sync([service("a", "10.96.0.1")], [endpoint_slice("a", "10.244.1.2", "1")])
    assert again.full


async def test_healthz_is_unhealthy_until_a_sync_and_failures_are_counted() -> None:
    import prometheus_client

    from machinery.client import ApiClient
    from machinery.kubeconfig import ClientConfig
    from proxy.server import ProxyServer

    runner = RecordingRunner()
    client = ApiClient(ClientConfig(server="http://127.0.0.1:9"))  # never called: the caches stay empty
    server = ProxyServer(client, Proxier(ProxierConfig(chains=Chains("KT01")), runner), node_name="n1",
                         sync_period=30, min_sync_period=0)
    try:
        assert not server.healthy()
        runner.fail_next = True
        with pytest.raises(IptablesError):
            await server.sync_once()
        assert not server.healthy()
        await server.sync_once()
        assert server.healthy()
        text = prometheus_client.generate_latest(server.metrics.registry).decode()
        assert "kubeproxy_sync_proxy_rules_iptables_restore_failures_total 1.0" in text
        assert "kubeproxy_sync_full_proxy_rules_duration_seconds_count 1.0" in text
    finally:
        await client.close()
