"""The leader of a replicated control-plane component killed with -9 in the middle of a rolling update: the
controller-manager's, then the scheduler's. The standby, which did nothing while the leader lived, takes
the Lease (kube-system/kube-controller-manager, kube-scheduler) over and the rollout completes within its
bounds (short election timings: lease 4 s, renew deadline 3 s, retry 0.5 s)."""

from __future__ import annotations

from collections.abc import Callable

from tests.controller_process import ControllerProcess
from tests.e2e.local_cluster import CONTROLLERS
from tests.failure.checks import (
    InformerThread,
    active,
    assert_nothing_lost_or_leaked,
    create_deployment,
    max_pods_since,
    object_uids,
    pod_list,
    pods,
    rollout_complete,
    set_version,
    wait,
)
from tests.failure.conftest import FailureCluster
from tests.integration.test_leader_election import TIMINGS, held_by
from tests.scheduler_process import SchedulerProcess

REPLICAS, SURGE = 6, 2


def run_rollout_killing(cluster: FailureCluster, lease: str, leader: ControllerProcess | SchedulerProcess,
                        standby: ControllerProcess | SchedulerProcess) -> None:
    with cluster.client() as api:
        wait(cluster, lambda: held_by(api, lease, leader.identity()), 30, f"{lease} held by the first replica")
        create_deployment(api, REPLICAS, SURGE, 0)
        wait(cluster, lambda: rollout_complete(api, REPLICAS, "1"), 60, "version 1 to run")
        informer = InformerThread(cluster.url)
        try:
            before = object_uids(api)
            since = pod_list(api)
            set_version(api, "2")
            wait(cluster, lambda: any(p["metadata"]["annotations"].get("failure-test/version") == "2"
                                      for p in active(pods(api))), 20, "the rollout to start")
            leader.kill()
            wait(cluster, lambda: held_by(api, lease, standby.identity()), 30, "the standby to take the Lease")
            wait(cluster, lambda: rollout_complete(api, REPLICAS, "2"), 90, "version 2 to roll out")
            peak = max_pods_since(api, since)
            assert REPLICAS < peak <= REPLICAS + SURGE, f"{peak} pods at once"
            assert_nothing_lost_or_leaked(cluster, api, before, informer)
        finally:
            informer.close()


def test_controller_manager_leader_kill_9_mid_rollout_standby_takes_over(
        make_cluster: Callable[..., FailureCluster]) -> None:
    cluster = make_cluster(controller_args=TIMINGS).start()
    leader = cluster.controllers
    assert leader is not None  # it synced its caches, which only a leader does
    standby = ControllerProcess(cluster.workdir, cluster.url, CONTROLLERS, "--cluster-cidr", cluster.ipam_cidr,
                                "--node-cidr-mask-size", "24", *TIMINGS)
    cluster.extra_processes.append(standby)
    standby.start(wait_synced=False)
    run_rollout_killing(cluster, "kube-controller-manager", leader, standby)
    assert "caches synced" not in standby.log_text().split("successfully acquired lease")[0]  # idle until leader


def test_scheduler_leader_kill_9_mid_rollout_standby_takes_over(
        make_cluster: Callable[..., FailureCluster]) -> None:
    cluster = make_cluster().start()
    assert cluster.scheduler is not None
    cluster.scheduler.stop()  # the cluster's own, without election: replaced by two replicas that elect
    leader = cluster.scheduler = SchedulerProcess(cluster.workdir, cluster.url, None, *TIMINGS)
    leader.start()
    with cluster.client() as api:
        wait(cluster, lambda: held_by(api, "kube-scheduler", leader.identity()), 30, "the first scheduler to lead")
    standby = SchedulerProcess(cluster.workdir, cluster.url, None, *TIMINGS)
    cluster.extra_processes.append(standby)
    standby.start()
    run_rollout_killing(cluster, "kube-scheduler", leader, standby)
