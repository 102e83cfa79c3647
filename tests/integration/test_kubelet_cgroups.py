"""The kubelet's QoS cgroups on real nodes (--cgroups-per-qos, cgroupfs driver), on each CRI runtime: kubepods
and its tiers under the node's --cgroup-root, a Guaranteed, a Burstable and a BestEffort pod each in its cgroup
(<tier>/pod<UID>) with upstream's shares, CFS quota and memory limit, the pod's containers inside it (the runtime
took the sandbox's cgroup parent), and the pod cgroup removed once the pod is deleted; a leftover pod cgroup of a
pod that does not exist is removed by housekeeping. Read straight from /sys/fs/cgroup."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from kubelet.cm.helpers import milli_cpu_to_shares
from tests.cluster import ApiServer, make_workdir, wait_for
from tests.integration.test_kubelet import container, create, pod_manifest, running, sh, wait_pod
from tests.integration.test_kubelet_runtimes import _skip_without
from tests.node_process import RUNTIMES, KubeletProcess, cleanup, ensure_images, free_pod_cidrs

CGROUP = Path("/sys/fs/cgroup")
SLEEP = sh("sleep 3600")
UNLIMITED_MEMORY = 1 << 62  # the v1 kernel's "no limit" is 9223372036854771712


def _skip_without_cgroup_v1() -> None:
    if not (CGROUP / "cpu" / "cpu.shares").is_file() or not os.access(CGROUP / "cpu", os.W_OK):
        pytest.skip("no writable cgroup v1 cpu hierarchy on this host")


@pytest.fixture(scope="module", params=RUNTIMES)
def node(request: pytest.FixtureRequest, apiserver: ApiServer) -> Iterator[KubeletProcess]:
    runtime: str = request.param
    _skip_without(runtime)
    _skip_without_cgroup_v1()
    ensure_images()
    workdir = make_workdir(f"minik8s-kubelet-cgroups-{runtime}-")
    kubelet = KubeletProcess(workdir, apiserver, f"kcg-{uuid.uuid4().hex[:6]}", free_pod_cidrs(1)[0],
                             container_runtime=runtime)
    try:
        with httpx.Client(base_url=apiserver.url, timeout=10) as api:
            kubelet.start(api)
        yield kubelet
    finally:
        cleanup([kubelet])  # also the node's kubepods hierarchy
        with httpx.Client(base_url=apiserver.url, timeout=10) as api:
            api.delete(f"/api/v1/nodes/{kubelet.node}")
        shutil.rmtree(workdir, ignore_errors=True)
        assert not any((CGROUP / c / kubelet.cgroup_root.strip("/")).exists() for c in ("cpu", "memory"))


def cg(controller: str, *parts: str) -> Path:
    return CGROUP.joinpath(controller, *(p.strip("/") for p in parts))


def value(path: Path) -> int:
    return int(path.read_text().strip())


def test_qos_tiers_are_made_at_start(node: KubeletProcess) -> None:
    kubepods = cg("cpu", node.cgroup_root, "kubepods")
    assert value(kubepods / "cpu.shares") == milli_cpu_to_shares((os.cpu_count() or 1) * 1000)
    assert value(kubepods / "besteffort" / "cpu.shares") == 2
    assert (kubepods / "burstable" / "cpu.shares").is_file()
    assert value(cg("memory", node.cgroup_root, "kubepods", "memory.limit_in_bytes")) < UNLIMITED_MEMORY


def test_pods_in_their_qos_cgroups_and_removed_with_them(node: KubeletProcess, api: httpx.Client,
                                                         namespace: str) -> None:
    guaranteed = container("c", command=SLEEP, resources={"limits": {"cpu": "200m", "memory": "64Mi"}})
    burstable = container("c", command=SLEEP, resources={"requests": {"cpu": "250m"}, "limits": {"cpu": "500m"}})
    pods = {"guaranteed": guaranteed, "burstable": burstable, "besteffort": container("c", command=SLEEP)}
    uids = {}
    for name, spec in pods.items():
        uids[name] = create(api, namespace, pod_manifest(name, node.node, [spec], terminationGracePeriodSeconds=1)
                            )["metadata"]["uid"]
    ids = {}
    for name in pods:
        pod = wait_pod(api, namespace, name, running, 90, what=f"pod {name} running")
        assert pod["status"]["qosClass"] == {"guaranteed": "Guaranteed", "burstable": "Burstable",
                                             "besteffort": "BestEffort"}[name]
        ids[name] = pod["status"]["containerStatuses"][0]["containerID"].split("://", 1)[1]

    kubepods = (node.cgroup_root, "kubepods")
    where = {"guaranteed": (*kubepods, f"pod{uids['guaranteed']}"),
             "burstable": (*kubepods, "burstable", f"pod{uids['burstable']}"),
             "besteffort": (*kubepods, "besteffort", f"pod{uids['besteffort']}")}
    # upstream's ResourceConfigForPod: shares from the requests; quota and memory from limits where stated
    expected = {"guaranteed": (204, 20_000, 64 << 20), "burstable": (256, 50_000, None), "besteffort": (2, -1, None)}
    for name, (shares, quota, memory) in expected.items():
        cpu = cg("cpu", *where[name])
        assert value(cpu / "cpu.shares") == shares, name
        assert value(cpu / "cpu.cfs_quota_us") == quota, name
        assert value(cpu / "cpu.cfs_period_us") == 100_000, name
        limit = value(cg("memory", *where[name], "memory.limit_in_bytes"))
        assert limit == memory if memory is not None else limit >= UNLIMITED_MEMORY, name
        # the runtime put the app container (and its processes) under the pod's cgroup
        procs = cpu / ids[name] / "cgroup.procs"
        assert procs.is_file() and procs.read_text().split(), f"{name}: no processes in {procs}"
    # the kubelet's stats still find the pods' CPU (the runtime reads the containers, or the pod cgroup, where
    # they now are)
    def summary_cpu() -> bool:
        r = httpx.get(f"{node.address}/stats/summary", timeout=30)
        assert r.status_code == 200, r.text
        found = [p for p in r.json().get("pods") or [] if p["podRef"] == {"name": "burstable", "namespace": namespace,
                                                                          "uid": uids["burstable"]}]
        return bool(found) and found[0].get("cpu", {}).get("usageCoreNanoSeconds", 0) > 0 and \
            bool(found[0].get("containers"))

    wait_for(summary_cpu, 60, 0.5, what="the burstable pod's CPU in /stats/summary")
    # the burstable tier's shares are its pods' requests (this node's only burstable pod: 250m)
    wait_for(lambda: value(cg("cpu", *kubepods, "burstable", "cpu.shares")) == 256, 30, 0.2,
             what="burstable tier shares 256")

    for name in pods:
        assert api.delete(f"/api/v1/namespaces/{namespace}/pods/{name}").status_code == 200
    for name in pods:
        wait_for(lambda n=name: not any(cg(c, *where[n]).exists() for c in ("cpu", "cpuacct", "memory", "pids")),
                 90, 0.2, what=f"pod {name}'s cgroup removed")
    wait_for(lambda: value(cg("cpu", *kubepods, "burstable", "cpu.shares")) == 2, 30, 0.2,
             what="burstable tier back at 2 shares")


def test_leftover_pod_cgroup_is_removed(node: KubeletProcess) -> None:
    """A pod cgroup of no pod the node has (a previous run's) goes at housekeeping (cleanupOrphanedPodCgroups)."""
    leftover = [cg(c, node.cgroup_root, "kubepods", "besteffort", f"pod{uuid.uuid4()}") for c in ("cpu", "memory")]
    for path in leftover:
        path.mkdir()
    try:
        try:
            wait_for(lambda: not any(p.exists() for p in leftover), 60, 0.2, what="the leftover pod cgroup removed")
        except TimeoutError as e:
            raise TimeoutError(f"{e}\nkubelet log:\n{node.log_tail()}") from None
    finally:
        for path in leftover:
            if path.exists():
                path.rmdir()
