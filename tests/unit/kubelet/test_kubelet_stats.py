"""The kubelet's stats (kubelet/stats/): pods from the runtime's CRI stats, usageNanoCores from two cumulative
readings, the node from /proc, the Summary and the resource-metrics text; and the Docker shim's translation of
Docker's one-shot stats (dockershim/stats.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc

from dockershim import stats as shim_stats
from kubelet.stats.cri_stats_provider import CpuUsageCache, CRIStatsProvider
from kubelet.stats.summary import SummaryProvider, resource_metrics
from machinery.cri import api_pb2 as pb
from machinery.cri.errors import CriError

S = 1_000_000_000


def container(cid: str, name: str, at: int, cpu: int, memory: int, uid: str = "u1") -> pb.ContainerStats:
    out = pb.ContainerStats(attributes=pb.ContainerAttributes(
        id=cid, metadata=pb.ContainerMetadata(name=name), labels={"io.kubernetes.pod.uid": uid}))
    out.cpu.timestamp = at
    out.cpu.usage_core_nano_seconds.value = cpu
    out.memory.timestamp = at
    out.memory.working_set_bytes.value = memory
    out.memory.usage_bytes.value = memory + 10
    return out


class FakeRuntime:
    def __init__(self, sandbox_stats: bool = True) -> None:
        self.sandbox_stats = sandbox_stats
        self.at = 100 * S
        self.cpu = 0

    def _containers(self) -> list[pb.ContainerStats]:
        return [container("c1", "main", self.at, self.cpu, 1000), container("c2", "side", self.at, 0, 500)]

    async def list_pod_sandbox_stats(self) -> list[pb.PodSandboxStats]:
        if not self.sandbox_stats:
            raise CriError("unknown method ListPodSandboxStats", grpc.StatusCode.UNIMPLEMENTED)
        stats = pb.PodSandboxStats(attributes=pb.PodSandboxAttributes(
            id="s1", metadata=pb.PodSandboxMetadata(name="web", namespace="ns", uid="u1")))
        stats.linux.containers.extend(self._containers())
        return [stats]

    async def list_container_stats(self, sandbox_id: str = "") -> list[pb.ContainerStats]:
        return self._containers()

    async def list_pod_sandbox(self, labels: dict[str, str] | None = None) -> list[pb.PodSandbox]:
        return [pb.PodSandbox(id="s1", metadata=pb.PodSandboxMetadata(name="web", namespace="ns", uid="u1"),
                              state=pb.SANDBOX_READY)]

    async def list_containers(self, labels: dict[str, str] | None = None, sandbox_id: str = "") -> list[pb.Container]:
        # c2 has no creation time: its stats carry no startTime
        return [pb.Container(id="c1", created_at=90 * S + 250_000_000), pb.Container(id="c2")]


def fake_proc(tmp_path: Path) -> Path:
    (tmp_path / "stat").write_text("cpu  100 0 50 1000 0 0 0 0 0 0\nbtime 1700000000\n")
    (tmp_path / "meminfo").write_text("MemTotal: 1000 kB\nMemFree: 400 kB\nMemAvailable: 700 kB\n"
                                      "Inactive(file): 100 kB\n")
    return tmp_path


def test_nano_cores_from_two_readings() -> None:
    cache = CpuUsageCache()
    assert cache.nano_cores("c", 10 * S, 1 * S) is None
    assert cache.nano_cores("c", 12 * S, 2 * S) == 500_000_000
    assert cache.nano_cores("c", 12 * S, 2 * S) == 500_000_000  # the same reading: the same rate
    assert cache.nano_cores("c", 13 * S, 0) is None  # restarted
    cache.keep(set())
    assert cache.samples == {}


def summarize(runtime: FakeRuntime, tmp_path: Path) -> dict:  # type: ignore[type-arg]
    provider = SummaryProvider("n1", CRIStatsProvider(runtime, proc=str(fake_proc(tmp_path))),
                               lambda ns, name: "2026-11-24T00:00:00Z")
    return asyncio.run(_twice(provider, runtime))


async def _twice(provider: SummaryProvider, runtime: FakeRuntime) -> dict:  # type: ignore[type-arg]
    await provider.get(update=True)
    runtime.at += 2 * S
    runtime.cpu += S  # half a core over 2 s
    await provider.get(update=True)  # the kubelet's periodic refresh
    runtime.at += S
    runtime.cpu += S  # a reader's request moves no rate
    return await provider.get()


def test_summary_from_sandbox_stats(tmp_path: Path) -> None:
    summary = summarize(FakeRuntime(), tmp_path)
    node = summary["node"]
    assert node["nodeName"] == "n1" and node["startTime"] == "2023-11-14T22:13:20Z"
    assert node["cpu"]["usageCoreNanoSeconds"] == 150 * S // 100
    assert node["memory"] == {**node["memory"], "usageBytes": 600 * 1024, "workingSetBytes": 500 * 1024,
                              "availableBytes": 700 * 1024}
    (pod,) = summary["pods"]
    assert pod["podRef"] == {"name": "web", "namespace": "ns", "uid": "u1"}
    assert pod["startTime"] == "2026-11-24T00:00:00Z"
    main = pod["containers"][0]
    assert main["name"] == "main" and main["cpu"]["usageCoreNanoSeconds"] == 2 * S
    assert main["startTime"] == "1970-01-01T00:01:30.250000Z"  # the container's creation (upstream's StartTime)
    assert "startTime" not in pod["containers"][1]
    assert main["cpu"]["usageNanoCores"] == 500_000_000
    assert main["memory"]["workingSetBytes"] == 1000 and main["memory"]["usageBytes"] == 1010
    assert pod["cpu"]["usageCoreNanoSeconds"] == 2 * S and pod["cpu"]["usageNanoCores"] == 500_000_000
    assert pod["memory"]["workingSetBytes"] == 1500


def test_summary_without_sandbox_stats_sums_the_containers(tmp_path: Path) -> None:
    summary = summarize(FakeRuntime(sandbox_stats=False), tmp_path)
    (pod,) = summary["pods"]
    assert [c["name"] for c in pod["containers"]] == ["main", "side"]
    assert pod["memory"]["workingSetBytes"] == 1500 and pod["cpu"]["usageNanoCores"] == 500_000_000


def test_resource_metrics_text(tmp_path: Path) -> None:
    text = resource_metrics(summarize(FakeRuntime(), tmp_path))
    assert '# TYPE container_cpu_usage_seconds_total counter' in text
    assert 'container_cpu_usage_seconds_total{container="main",namespace="ns",pod="web"} 2.0 ' in text
    assert 'pod_memory_working_set_bytes{namespace="ns",pod="web"} 1500 ' in text
    assert 'container_start_time_seconds{container="main",namespace="ns",pod="web"} 90.25 90250\n' in text
    assert 'container_start_time_seconds{container="side"' not in text
    assert "scrape_error 0" in text
    assert resource_metrics(None).endswith("scrape_error 1\n")


def test_docker_one_shot_stats_to_cri() -> None:
    item = {"Id": "abc", "Names": ["/k8s_main_web_ns_u1_0"], "Labels": {"io.kubernetes.pod.uid": "u1"}}
    docker = {"cpu_stats": {"cpu_usage": {"total_usage": 123456789}},
              "memory_stats": {"usage": 5000, "limit": 100000, "stats": {"total_inactive_file": 1000,
                                                                          "total_rss": 3000}}}
    stats = shim_stats.container_stats(item, docker, now_ns=42)
    assert stats.attributes.metadata.name == "main" and stats.attributes.labels["io.kubernetes.pod.uid"] == "u1"
    assert (stats.cpu.timestamp, stats.cpu.usage_core_nano_seconds.value) == (42, 123456789)
    assert not stats.cpu.HasField("usage_nano_cores")  # one shot: no second sample
    assert stats.memory.working_set_bytes.value == 4000 and stats.memory.usage_bytes.value == 5000
    assert stats.memory.rss_bytes.value == 3000 and stats.memory.available_bytes.value == 96000
    assert shim_stats.working_set({"usage": 10, "stats": {"inactive_file": 20}}) == 0  # cgroup v2 name, floored
    sandbox = shim_stats.sandbox_stats({"Id": "s", "Names": ["/k8s_POD_web_ns_u1_0"], "Labels": {}}, [stats, stats])
    assert sandbox.attributes.metadata.name == "web" and sandbox.linux.cpu.usage_core_nano_seconds.value == 246913578
