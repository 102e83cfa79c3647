"""The kubelet's stats (kubelet/stats/): pods from the runtime's CRI stats, usageNanoCores from two cumulative
readings, the node from /proc, the Summary and the resource-metrics text; and the Docker shim's translation of
Docker's one-shot stats (dockershim/stats.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc

from dockershim import stats as shim_stats
from kubelet.cm.cgroup_manager import CgroupManager
from kubelet.cm.container_manager import ContainerManager
from kubelet.stats import cgroup_stats
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


POD_CG = "/root/kubepods/burstable/podu1"


def cgroup_tree(tmp_path: Path, unified: bool) -> CgroupManager:
    """A fake cgroup mount: the pod's cgroup and its running container c1's (v1: cpu,cpuacct and memory)."""
    mount = tmp_path / "cgroup"
    if unified:
        mount.mkdir(parents=True)
        (mount / "cgroup.controllers").write_text("cpu memory pids\n")
        for name, usec, current in ((POD_CG, 3_000_000, 5000), (f"{POD_CG}/c1", 2_500_000, 4000)):
            d = mount / name.strip("/")
            d.mkdir(parents=True)
            (d / "cpu.stat").write_text(f"usage_usec {usec}\nuser_usec 1\nsystem_usec 2\n")
            (d / "memory.current").write_text(f"{current}\n")
            (d / "memory.stat").write_text("anon 1500\nfile 2000\ninactive_file 1000\n")
            (d / "memory.max").write_text("max\n" if name == POD_CG else "8000\n")
    else:
        for name, ns, usage in ((POD_CG, 3 * S, 5000), (f"{POD_CG}/c1", 2_500_000_000, 4000)):
            cpu = mount / "cpu,cpuacct" / name.strip("/")
            cpu.mkdir(parents=True)
            (cpu / "cpuacct.usage").write_text(f"{ns}\n")
            memory = mount / "memory" / name.strip("/")
            memory.mkdir(parents=True)
            (memory / "memory.usage_in_bytes").write_text(f"{usage}\n")
            (memory / "memory.stat").write_text("cache 2000\nrss 1\ntotal_rss 1500\ntotal_inactive_file 1000\n")
            (memory / "memory.limit_in_bytes").write_text("9223372036854771712\n" if name == POD_CG else "8000\n")
        for root in ("cpu,cpuacct", "memory"):
            (mount / root / "cgroup.procs").write_text("")
        (mount / "cpu").symlink_to(mount / "cpu,cpuacct")
        (mount / "cpuacct").symlink_to(mount / "cpu,cpuacct")
    return CgroupManager(mount)


def listed(state: int = pb.CONTAINER_RUNNING) -> tuple[list[pb.PodSandbox], list[pb.Container]]:
    sandboxes = [pb.PodSandbox(id="s1", metadata=pb.PodSandboxMetadata(name="web", namespace="ns", uid="u1"),
                               state=pb.SANDBOX_READY),
                 pb.PodSandbox(id="s0", metadata=pb.PodSandboxMetadata(name="old", namespace="ns", uid="u0"),
                               state=pb.SANDBOX_NOTREADY)]
    containers = [pb.Container(id="c1", pod_sandbox_id="s1", metadata=pb.ContainerMetadata(name="main"), state=state),
                  pb.Container(id="c9", pod_sandbox_id="s1", metadata=pb.ContainerMetadata(name="done"),
                               state=pb.CONTAINER_EXITED)]
    return sandboxes, containers


def test_stats_from_cgroups_v1_and_v2(tmp_path: Path) -> None:
    for unified in (False, True):
        cgroups = cgroup_tree(tmp_path / str(unified), unified)
        (stats,) = cgroup_stats.sandbox_stats_from_cgroups(cgroups, {"u1": [POD_CG]}, *listed()) or []
        assert stats.attributes.metadata.name == "web"
        (c,) = stats.linux.containers  # the exited one has no stats
        assert c.attributes.metadata.name == "main" and c.cpu.usage_core_nano_seconds.value == 2_500_000_000
        assert c.cpu.timestamp > 0 and c.memory.timestamp == c.cpu.timestamp
        assert (c.memory.usage_bytes.value, c.memory.working_set_bytes.value, c.memory.rss_bytes.value) == \
            (4000, 3000, 1500)
        assert c.memory.available_bytes.value == 5000  # limit 8000 less the working set
        assert stats.linux.cpu.usage_core_nano_seconds.value == 3 * S  # the pod's own cgroup
        assert stats.linux.memory.working_set_bytes.value == 4000
        assert not stats.linux.memory.HasField("available_bytes")  # no limit: none (cAdvisor's rule)


def test_stats_from_cgroups_fall_back_when_the_layout_differs(tmp_path: Path) -> None:
    cgroups = cgroup_tree(tmp_path, False)
    assert cgroup_stats.sandbox_stats_from_cgroups(cgroups, {}, *listed()) is None  # no pod cgroup
    sandboxes, containers = listed()
    containers[0].id = "elsewhere"  # a running container not under its pod's cgroup
    assert cgroup_stats.sandbox_stats_from_cgroups(cgroups, {"u1": [POD_CG]}, sandboxes, containers) is None


def test_summary_reads_the_cgroups_of_the_kubelet_pods(tmp_path: Path) -> None:
    """With the QoS cgroups, the Summary's cpu and memory are the cgroups' and the runtime's stats are not asked;
    without the container's cgroup, they are."""

    class Runtime(FakeRuntime):
        asked = 0

        async def list_pod_sandbox_stats(self) -> list[pb.PodSandboxStats]:
            self.asked += 1
            return await super().list_pod_sandbox_stats()

        async def list_pod_sandbox(self, labels: dict[str, str] | None = None) -> list[pb.PodSandbox]:
            return listed()[0]

        async def list_containers(self, labels: dict[str, str] | None = None,
                                  sandbox_id: str = "") -> list[pb.Container]:
            return listed()[1]

    runtime = Runtime()
    provider = CRIStatsProvider(runtime, proc=str(fake_proc(tmp_path)))
    manager = ContainerManager("/root", cgroup_tree(tmp_path, False))
    provider.container_manager = manager
    (pod,) = asyncio.run(provider.list_pod_stats())
    assert runtime.asked == 0
    assert pod["containers"][0]["cpu"]["usageCoreNanoSeconds"] == 2_500_000_000
    assert pod["cpu"]["usageCoreNanoSeconds"] == 3 * S
    for child in ("cpu,cpuacct", "memory"):
        (tmp_path / "cgroup" / child / POD_CG.strip("/") / "c1").rename(tmp_path / "cgroup" / child / "moved")
    (pod,) = asyncio.run(provider.list_pod_stats())
    assert runtime.asked == 1 and pod["containers"][0]["cpu"]["usageCoreNanoSeconds"] == 0  # the runtime's figure
