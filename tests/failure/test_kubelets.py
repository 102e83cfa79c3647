"""Kubelets that die: one killed with -9 in the middle of a rolling update and restarted (it adopts the pods it
left running, finishes the deletions decided while it was away, starts what was bound to it), and one stopped
for good (its node goes NotReady, its pods are evicted and run on the other node)."""

from __future__ import annotations

from collections.abc import Callable

import httpx

from tests.failure.checks import (
    InformerThread,
    LeaseWriter,
    active,
    assert_nothing_lost_or_leaked,
    create_deployment,
    max_pods_since,
    object_uids,
    ok,
    pod_list,
    pods,
    rollout_complete,
    set_version,
    wait,
)
from tests.failure.conftest import FAST_NODE_LIFECYCLE, FailureCluster

REPLICAS, SURGE = 6, 2


def started(api: httpx.Client) -> bool:
    return any(p["metadata"]["annotations"].get("failure-test/version") == "2" for p in active(pods(api)))


def node_ready(api: httpx.Client, node: str) -> str:
    conditions = ok(api.get(f"/api/v1/nodes/{node}")).get("status", {}).get("conditions") or []
    return next((c["status"] for c in conditions if c["type"] == "Ready"), "")


def test_kubelet_kill_9_mid_rollout_and_restart(make_cluster: Callable[..., FailureCluster]) -> None:
    cluster = make_cluster().start()
    victim = cluster.kubelets[1]
    with cluster.client() as api:
        create_deployment(api, REPLICAS, SURGE, 0)
        wait(cluster, lambda: rollout_complete(api, REPLICAS, "1"), 60, "version 1 to run")
        informer = InformerThread(cluster.url)
        writer = LeaseWriter(cluster.url)
        try:
            before = object_uids(api)
            since = pod_list(api)
            set_version(api, "2")
            wait(cluster, lambda: started(api), 20, "the rollout to start")
            victim.kill()

            def needs_victim() -> bool:
                """The rollout has decided something about the dead node: a pod bound to it to start, or one
                of its pods to delete (only its kubelet can do either)."""
                on_node = [p for p in pods(api) if p["spec"].get("nodeName") == victim.node]
                return any(p["metadata"].get("deletionTimestamp") or p["status"].get("phase") != "Running"
                           for p in on_node)

            wait(cluster, needs_victim, 30, f"the rollout to need {victim.node}")
            victim.start(api)  # same node, port and root dir: it finds its containers and carries on

            wait(cluster, lambda: rollout_complete(api, REPLICAS, "2"), 90, "version 2 to roll out")
            peak = max_pods_since(api, since)
            assert REPLICAS < peak <= REPLICAS + SURGE, f"{peak} pods at once"
            assert_nothing_lost_or_leaked(cluster, api, before, informer, writer)
        finally:
            writer.stop()
            informer.close()


def test_kubelet_gone_for_good_node_not_ready_pods_evicted_and_run_elsewhere(
        make_cluster: Callable[..., FailureCluster]) -> None:
    cluster = make_cluster(controller_args=FAST_NODE_LIFECYCLE).start()
    survivor, victim = cluster.kubelets
    with cluster.client() as api:
        create_deployment(api, REPLICAS, SURGE, 0)
        wait(cluster, lambda: rollout_complete(api, REPLICAS, "1"), 60, "version 1 to run")
        assert {p["spec"]["nodeName"] for p in pods(api)} == {survivor.node, victim.node}  # spread over both
        informer = InformerThread(cluster.url)
        try:
            before = object_uids(api)
            since = pod_list(api)
            set_version(api, "2")
            wait(cluster, lambda: started(api), 20, "the rollout to start")
            victim.stop()  # for good; its containers keep running, as upstream when a kubelet goes away

            wait(cluster, lambda: node_ready(api, victim.node) == "Unknown", 30, f"{victim.node} NotReady")
            wait(cluster, lambda: rollout_complete(api, REPLICAS, "2"), 90, "version 2 to roll out")
            everything = pods(api)
            assert {p["spec"]["nodeName"] for p in active(everything)} == {survivor.node}
            stranded = [p for p in everything if p["spec"]["nodeName"] == victim.node]
            assert stranded and all(p["metadata"].get("deletionTimestamp") for p in stranded)  # evicted
            taints = {t["key"] for t in ok(api.get(f"/api/v1/nodes/{victim.node}"))["spec"].get("taints") or []}
            assert "node.kubernetes.io/unreachable" in taints
            assert node_ready(api, survivor.node) == "True"

            peak = max_pods_since(api, since)
            assert REPLICAS < peak <= REPLICAS + SURGE, f"{peak} pods at once"
            # the dead node still runs the evicted pods' containers: they belong to pods the API still has
            # (Terminating until a kubelet confirms), so they are accounted for, not leaked
            assert_nothing_lost_or_leaked(cluster, api, before, informer, watching=[survivor])
        finally:
            informer.close()
