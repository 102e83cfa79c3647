"""The kubelet's QoS cgroups, pure parts (kubelet/cm): upstream's MilliCPUToShares, MilliCPUToQuota and
CpuSharesToCpuWeight, the QoS class, ResourceConfigForPod per class and the burstable tier's shares; and the
cgroupfs manager's layout and writes on a directory standing in for /sys/fs/cgroup (v1 and v2)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kubelet.cm.cgroup_manager import CgroupManager
from kubelet.cm.container_manager import ContainerManager
from kubelet.cm.helpers import (
    ResourceConfig,
    burstable_cpu_shares,
    cpu_shares_to_weight,
    milli_cpu_to_quota,
    milli_cpu_to_shares,
    qos_class,
    resource_config_for_pod,
)
from machinery.api.core_v1 import Pod
from tests.unit.kubelet_fakes import FakeKubelet, eventually, make_pod


def pod(*containers: dict[str, Any], uid: str = "u1", init: list[dict[str, Any]] | None = None,
        overhead: dict[str, str] | None = None) -> Pod:
    spec: dict[str, Any] = {"containers": [{"name": f"c{i}", "image": "x", "resources": r}
                                           for i, r in enumerate(containers)]}
    if init:
        spec["initContainers"] = [{"name": f"i{i}", "image": "x", **c} for i, c in enumerate(init)]
    if overhead:
        spec["overhead"] = overhead
    return Pod.model_validate({"metadata": {"name": "p", "uid": uid}, "spec": spec})


@pytest.mark.parametrize(("milli", "shares"), [(0, 2), (1, 2), (1, 2), (2, 2), (10, 10), (100, 102), (250, 256),
                                               (1000, 1024), (2000, 2048), (300_000, 262144)])
def test_milli_cpu_to_shares(milli: int, shares: int) -> None:
    assert milli_cpu_to_shares(milli) == shares


@pytest.mark.parametrize(("milli", "period", "quota"), [(0, 100_000, 0), (5, 100_000, 1000), (9, 100_000, 1000),
                                                        (10, 100_000, 1000), (200, 100_000, 20_000),
                                                        (500, 50_000, 25_000), (2500, 100_000, 250_000)])
def test_milli_cpu_to_quota(milli: int, period: int, quota: int) -> None:
    assert milli_cpu_to_quota(milli, period) == quota


def test_cpu_shares_to_weight() -> None:
    assert [cpu_shares_to_weight(s) for s in (2, 1024, 262144)] == [1, 39, 10000]


def test_qos_class_from_status_or_computed() -> None:
    guaranteed = {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}
    assert qos_class(pod(guaranteed)) == "Guaranteed"
    assert qos_class(pod(guaranteed, {})) == "Burstable"  # one container without limits
    assert qos_class(pod({"requests": {"cpu": "100m"}})) == "Burstable"
    assert qos_class(pod({}, {})) == "BestEffort"
    written = Pod.model_validate({**pod({}).model_dump(by_alias=True, exclude_none=True),
                                  "status": {"qosClass": "Burstable"}})
    assert qos_class(written) == "Burstable"  # what the apiserver wrote wins (upstream GetPodQOS)


def test_resource_config_per_qos_class() -> None:
    guaranteed = pod({"requests": {"cpu": "200m", "memory": "64Mi"}, "limits": {"cpu": "200m", "memory": "64Mi"}},
                     {"requests": {"cpu": "300m", "memory": "64Mi"}, "limits": {"cpu": "300m", "memory": "64Mi"}})
    assert resource_config_for_pod(guaranteed) == ResourceConfig(cpu_shares=512, cpu_quota=50_000,
                                                                 cpu_period=100_000, memory=128 << 20)
    # every container limits cpu, not memory: a quota, no memory limit
    burstable = pod({"requests": {"cpu": "250m"}, "limits": {"cpu": "500m"}})
    assert resource_config_for_pod(burstable) == ResourceConfig(cpu_shares=256, cpu_quota=50_000, cpu_period=100_000)
    # one container without a cpu limit: no quota for the pod
    partial = pod({"requests": {"cpu": "100m"}, "limits": {"cpu": "500m", "memory": "1Gi"}},
                  {"requests": {"cpu": "100m"}})
    assert resource_config_for_pod(partial) == ResourceConfig(cpu_shares=204)
    assert resource_config_for_pod(pod({})) == ResourceConfig(cpu_shares=2)


def test_pod_requests_take_the_larger_init_step_and_overhead() -> None:
    p = pod({"requests": {"cpu": "100m"}}, init=[{"resources": {"requests": {"cpu": "500m"}}}],
            overhead={"cpu": "50m"})
    assert resource_config_for_pod(p).cpu_shares == milli_cpu_to_shares(550)
    sidecar = pod({"requests": {"cpu": "100m"}}, init=[{"restartPolicy": "Always",
                                                         "resources": {"requests": {"cpu": "200m"}}}])
    assert resource_config_for_pod(sidecar).cpu_shares == milli_cpu_to_shares(300)


def test_burstable_tier_shares_sum_its_pods_requests() -> None:
    pods = [pod({"requests": {"cpu": "250m"}}), pod({"requests": {"cpu": "500m"}, "limits": {"cpu": "1"}}),
            pod({"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}), pod({})]
    assert burstable_cpu_shares(pods) == milli_cpu_to_shares(750)
    assert burstable_cpu_shares([]) == 2


def _v1_tree(root: Path) -> None:
    for controller in ("cpu", "cpuacct", "memory"):
        (root / controller).mkdir(parents=True)
        (root / controller / "cgroup.procs").write_text("")


def test_v1_layout_and_pod_cgroups(tmp_path: Path) -> None:
    _v1_tree(tmp_path)
    # a directory is no cgroupfs: the tiers' control files are laid out beforehand (a new cgroup's, the pod's,
    # have none here, so only its directory is checked)
    cgroups = CgroupManager(tmp_path)
    assert cgroups.version == 1
    burstable = pod({"requests": {"cpu": "250m"}, "limits": {"cpu": "500m"}}, uid="b1")
    manager = ContainerManager("/node-a", cgroups, active_pods=lambda: [burstable])
    for controller in ("cpu", "cpuacct", "memory"):
        (tmp_path / controller / "node-a" / "kubepods" / "burstable").mkdir(parents=True)
        (tmp_path / controller / "node-a" / "kubepods" / "besteffort").mkdir()
        for d in ("node-a/kubepods", "node-a/kubepods/burstable", "node-a/kubepods/besteffort"):
            for f in ("cpu.shares", "memory.limit_in_bytes"):
                (tmp_path / controller / d / f).write_text("0")
    manager.start(2000, 1 << 30)
    cpu = tmp_path / "cpu" / "node-a" / "kubepods"
    assert (cpu / "cpu.shares").read_text() == "2048"
    assert (cpu / "besteffort" / "cpu.shares").read_text() == "2"
    assert (cpu / "burstable" / "cpu.shares").read_text() == "256"
    assert (tmp_path / "memory" / "node-a" / "kubepods" / "memory.limit_in_bytes").read_text() == str(1 << 30)
    assert manager.pod_cgroup(burstable) == "/node-a/kubepods/burstable/podb1"
    assert manager.pod_cgroup(pod({})) == "/node-a/kubepods/besteffort/podu1"
    guaranteed = {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}
    assert manager.pod_cgroup(pod(guaranteed, uid="g")) == "/node-a/kubepods/podg"  # no tier of its own
    assert manager.ensure_pod(burstable) is True
    assert manager.pod_cgroups() == {"b1": ["/node-a/kubepods/burstable/podb1"]}
    assert manager.destroy_pod("b1") is True
    assert manager.pod_cgroups() == {} and not (cpu / "burstable" / "podb1").exists()
    assert manager.destroy_pod("b1") is False


def test_v2_enables_controllers_down_the_path_and_writes_weight_max(tmp_path: Path) -> None:
    (tmp_path / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (tmp_path / "cgroup.subtree_control").write_text("")
    cgroups = CgroupManager(tmp_path)
    assert cgroups.version == 2
    pod_dir = tmp_path / "kubepods" / "podx"
    for d in (tmp_path / "kubepods", pod_dir):
        d.mkdir(parents=True)
        (d / "cgroup.controllers").write_text("cpu memory pids\n")
        (d / "cgroup.subtree_control").write_text("")
        (d / "cpu.weight").write_text("100")
        (d / "cpu.max").write_text("max 100000")
        (d / "memory.max").write_text("max")
    cgroups.create("/kubepods/podx", ResourceConfig(cpu_shares=1024, cpu_quota=50_000, cpu_period=100_000,
                                                    memory=64 << 20))
    assert (tmp_path / "cgroup.subtree_control").read_text() == "+cpu +memory +pids"
    assert (tmp_path / "kubepods" / "cgroup.subtree_control").read_text() == "+cpu +memory +pids"
    assert (pod_dir / "cpu.weight").read_text() == "39"
    assert (pod_dir / "cpu.max").read_text() == "50000 100000"
    assert (pod_dir / "memory.max").read_text() == str(64 << 20)


async def test_the_syncer_makes_the_pod_cgroup_hands_it_to_the_sandbox_and_removes_it(tmp_path: Path) -> None:
    """Wired as the kubelet wires it (on the fake runtime, a directory for /sys/fs/cgroup): the pod's cgroup
    exists before its sandbox, is the sandbox's cgroup parent, and goes when the deleted pod's containers have."""
    cgroupfs = tmp_path / "cgroup"
    _v1_tree(cgroupfs)
    kubelet = FakeKubelet(tmp_path / "kubelet")
    cgroups = CgroupManager(cgroupfs)
    made_before_sandbox: list[bool] = []
    run_pod_sandbox = kubelet.fake.RunPodSandbox

    async def record(request: Any, context: Any = None, **kw: Any) -> Any:
        made_before_sandbox.append(cgroups.exists(request.config.linux.cgroup_parent))
        return await run_pod_sandbox(request, context, **kw)

    kubelet.fake.RunPodSandbox = record  # type: ignore[method-assign]
    manager = ContainerManager("/n1", cgroups, active_pods=lambda: list(kubelet.client.pods.values()))
    manager.start(2000, 2 << 30)
    kubelet.helper.container_manager = manager
    await kubelet.start()
    try:
        pod = make_pod(containers=[{"name": "c", "image": "minik8s/busybox:1.35",
                                    "resources": {"requests": {"cpu": "250m"}}}], terminationGracePeriodSeconds=1)
        kubelet.add(pod)
        await eventually(lambda: kubelet.fake.running_containers("c"), what="a running container")
        (config,) = kubelet.fake.sandbox_configs.values()
        assert config.linux.cgroup_parent == "/n1/kubepods/burstable/poduid-p"
        assert made_before_sandbox == [True]
        assert (cgroupfs / "memory" / "n1" / "kubepods" / "burstable" / "poduid-p").is_dir()
        data = kubelet.api_pod().to_dict()
        data["metadata"]["deletionTimestamp"] = "2026-11-22T10:00:00Z"
        data["metadata"]["deletionGracePeriodSeconds"] = 1
        data["metadata"]["resourceVersion"] = "100"
        kubelet.add(Pod.model_validate(data))
        await eventually(lambda: kubelet.client.deleted == ["p"], what="the deletion confirmed")
        assert manager.pod_cgroups() == {}
        assert not (cgroupfs / "cpu" / "n1" / "kubepods" / "burstable" / "poduid-p").exists()
    finally:
        await kubelet.stop()


def test_destroy_pod_finds_a_cgroup_left_in_one_hierarchy_only(tmp_path: Path) -> None:
    """The pod's cgroup is looked up by name under each tier: one that a removal cut short left in a single
    hierarchy (and in no other) is found and removed, and another pod's cgroup beside it stays."""
    _v1_tree(tmp_path)
    manager = ContainerManager("/n", CgroupManager(tmp_path))
    left = tmp_path / "memory" / "n" / "kubepods" / "besteffort" / "podgone"
    other = tmp_path / "cpu" / "n" / "kubepods" / "besteffort" / "podother"
    left.mkdir(parents=True)
    other.mkdir(parents=True)
    assert manager.destroy_pod("gone") is True
    assert not left.exists() and other.is_dir()
    assert manager.pod_cgroups() == {"other": ["/n/kubepods/besteffort/podother"]}
    assert manager.destroy_pod("gone") is False


class _FailingCgroups(ContainerManager):
    """A container manager whose pod cgroups cannot be made (cgroupfs refuses)."""

    def ensure_pod(self, pod: Pod) -> bool:
        self.tried = getattr(self, "tried", 0) + 1
        raise OSError(28, "No space left on device")


async def test_a_pod_cgroup_that_cannot_be_made_fails_the_sync_beside_its_volumes(tmp_path: Path) -> None:
    """The pod's cgroup is made while its volumes are set up: when it cannot be, the pod gets
    FailedCreatePodContainer and no sandbox; when its volumes fail too, the sync reports FailedMount and waits
    for its retry as before (the cgroup's failure, with its event, does not replace it)."""
    kubelet = FakeKubelet(tmp_path / "kubelet")
    manager = _FailingCgroups("/n1", CgroupManager(tmp_path / "cgroup"))
    kubelet.helper.container_manager = manager
    await kubelet.start()
    try:
        missing = tmp_path / "absent"
        kubelet.add(make_pod(name="vol", volumes=[{"name": "data", "hostPath": {"path": str(missing),
                                                                                  "type": "Directory"}}]))
        await eventually(lambda: {r for _, r, _m in kubelet.events} >= {"FailedMount", "FailedCreatePodContainer"},
                         what="both failures reported")
        worker = kubelet.workers.get("uid-vol")
        assert worker is not None and worker.failures == 0  # the volume's retry, not a failed sync
        kubelet.add(make_pod(name="plain"))
        await eventually(lambda: (w := kubelet.workers.get("uid-plain")) is not None and w.failures > 0,
                         what="the plain pod's sync failed")
        assert "RunPodSandbox" not in kubelet.fake.calls
        assert sum(r == "FailedCreatePodContainer" for _, r, _m in kubelet.events) >= 2
    finally:
        await kubelet.stop()
