"""etcd failures under a working cluster: one member of three killed with -9 while a Deployment scales up
(writes go on through the other two, the member comes back and catches up), and the whole single-member etcd
killed and restarted (every watch resumes: a change made afterwards is carried out by the controllers, the
scheduler and the kubelets)."""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx

from tests.etcd_cluster import EtcdCluster
from tests.failure.checks import (
    InformerThread,
    LeaseWriter,
    active,
    assert_nothing_lost_or_leaked,
    create_deployment,
    max_pods_since,
    object_uids,
    pod_list,
    pods,
    rollout_complete,
    scale,
    set_version,
    wait,
)
from tests.failure.conftest import FailureCluster

SURGE = 2


def scaling(api: httpx.Client, start: int) -> bool:
    return len(active(pods(api))) > start


def test_one_etcd_member_of_three_killed_writes_go_on_and_it_catches_up(
        make_cluster: Callable[..., FailureCluster]) -> None:
    cluster = make_cluster(etcd_members=3).start()
    etcd = cluster.etcd
    assert isinstance(etcd, EtcdCluster)
    victim = etcd.members[0]  # the first of --etcd-servers: the apiserver's connection fails over
    with cluster.client() as api:
        create_deployment(api, 3, SURGE, 0)
        wait(cluster, lambda: rollout_complete(api, 3, "1"), 60, "3 replicas")
        informer = InformerThread(cluster.url)
        writer = LeaseWriter(cluster.url)
        try:
            before = object_uids(api)
            since = pod_list(api)
            scale(api, 10)
            wait(cluster, lambda: scaling(api, 3), 20, "the scale-up to start")
            victim.kill()
            down_at = time.monotonic()
            wait(cluster, lambda: writer.acked_since(down_at) >= 5, 30, "writes with a member down")
            wait(cluster, lambda: rollout_complete(api, 10, "1"), 90, "10 replicas with a member down")

            etcd.restart_member(0)
            _, revision = etcd.members[1].read("/registry/")
            wait(cluster, lambda: victim.read("/registry/")[1] >= revision, 30, f"{victim.name} to catch up")
            views = [m.read("/registry/", revision)[0] for m in etcd.members]
            assert views[0] == views[1] == views[2]  # keys, values and revisions alike
            assert any(key.startswith("/registry/pods/") for key in views[0])

            assert max_pods_since(api, since) == 10
            assert_nothing_lost_or_leaked(cluster, api, before, informer, writer)
        finally:
            writer.stop()
            informer.close()


def test_whole_etcd_restarted_watches_resume(make_cluster: Callable[..., FailureCluster]) -> None:
    cluster = make_cluster().start()
    with cluster.client() as api:
        create_deployment(api, 3, SURGE, 0)
        wait(cluster, lambda: rollout_complete(api, 3, "1"), 60, "3 replicas")
        informer = InformerThread(cluster.url)
        writer = LeaseWriter(cluster.url)
        try:
            before = object_uids(api)
            since = pod_list(api)
            scale(api, 8)
            wait(cluster, lambda: scaling(api, 3), 20, "the scale-up to start")
            cluster.etcd.process.kill()
            down_at = time.monotonic()
            wait(cluster, lambda: writer.failures > 0, 20, "the apiserver to refuse writes without etcd")
            cluster.etcd.start()  # same data dir and ports
            wait(cluster, lambda: writer.acked_since(down_at) >= 3, 30, "writes after etcd is back")
            wait(cluster, lambda: rollout_complete(api, 8, "1"), 90, "8 replicas")

            # a change made after the restart is seen (through watches) and carried out by every component
            set_version(api, "2")
            wait(cluster, lambda: rollout_complete(api, 8, "2"), 90, "version 2 to roll out")
            peak = max_pods_since(api, since)
            assert 8 < peak <= 8 + SURGE, f"{peak} pods at once"
            assert_nothing_lost_or_leaked(cluster, api, before, informer, writer)
        finally:
            writer.stop()
            informer.close()
