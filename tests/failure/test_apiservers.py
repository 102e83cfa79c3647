"""The apiserver: two of them on one (three-member) etcd both serve reads, writes and watches, each watch cache
following etcd rather than the other apiserver; and an apiserver killed with -9 in the middle of a rolling
update and restarted on the same port, with the controllers, the scheduler, the kubelets and an informer of
the test riding it out."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import docker
import httpx
import orjson

from apiserver.storage.etcd import EtcdStorage
from kubelet.types.labels import POD_UID as LABEL_POD_UID
from machinery.api.coordination_v1 import Lease
from tests.failure.checks import (
    LEASES,
    NS,
    SLOW_TO_STOP,
    InformerThread,
    LeaseWriter,
    assert_nothing_lost_or_leaked,
    create_deployment,
    fresh,
    max_pods_since,
    object_uids,
    ok,
    pod_list,
    pods,
    rollout_complete,
    set_version,
    wait,
)
from tests.failure.conftest import FailureCluster
from tests.watching import WatchStream


def lease(name: str, holder: str) -> dict[str, object]:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name},
            "spec": {"holderIdentity": holder}}


def seen(events: list[dict[str, object]]) -> list[tuple[object, ...]]:
    return [(e["type"], e["object"]["metadata"]["name"], e["object"]["metadata"]["resourceVersion"])  # type: ignore[index]
            for e in events]


def test_two_apiservers_on_one_etcd_serve_reads_writes_and_watches(
        make_cluster: Callable[..., FailureCluster]) -> None:
    cluster = make_cluster(etcd_members=3).start_control_plane_only()
    a = cluster.apiserver
    b = cluster.second_apiserver()
    with httpx.Client(base_url=a.url, timeout=10) as api_a, httpx.Client(base_url=b.url, timeout=10) as api_b:
        start = ok(api_a.get(LEASES))["metadata"]["resourceVersion"]
        watch_a = WatchStream(a.url, LEASES, resourceVersion=start, allowWatchBookmarks="true")
        watch_b = WatchStream(b.url, LEASES, resourceVersion=start, allowWatchBookmarks="true")
        informer_b = InformerThread(b.url, Lease)
        try:
            one = ok(api_a.post(LEASES, json=lease("one", "a")))
            # a read through the other apiserver right after the write sees it (lists and gets go to etcd)
            assert ok(api_b.get(f"{LEASES}/one"))["metadata"]["resourceVersion"] == one["metadata"]["resourceVersion"]
            assert "one" in {c["metadata"]["name"] for c in ok(api_b.get(LEASES))["items"]}
            one["spec"]["holderIdentity"] = "b"
            updated = ok(api_b.put(f"{LEASES}/one", json=one))  # B writes over A's object, CAS on etcd's revision
            two = ok(api_b.post(LEASES, json=lease("two", "b")))
            stale = {**one, "spec": {"holderIdentity": "stale"}}  # A's old resourceVersion: B wrote since
            assert api_a.put(f"{LEASES}/one", json=stale).status_code == 409

            # a write neither apiserver made, straight into etcd: both watch caches follow etcd itself
            async def direct() -> int:
                storage = EtcdStorage(cluster.etcd.endpoint.split(","))
                try:
                    obj = {**lease("direct", "etcd"), "metadata": {"name": "direct", "namespace": NS,
                                                                        "uid": "00000000-0000-0000-0000-0000000000d1",
                                                                        "creationTimestamp": "2024-01-01T00:00:00Z"}}
                    return await storage.create(f"/registry/leases/{NS}/direct", orjson.dumps(obj))
                finally:
                    await storage.close()

            direct_rv = asyncio.run(direct())
            ok(api_a.delete(f"{LEASES}/two"))
            expected = [("ADDED", "one", one["metadata"]["resourceVersion"]),
                        ("MODIFIED", "one", updated["metadata"]["resourceVersion"]),
                        ("ADDED", "two", two["metadata"]["resourceVersion"]),
                        ("ADDED", "direct", str(direct_rv)),
                        ("DELETED", "two", None)]
            for stream in (watch_a, watch_b):
                got = seen(stream.take(5))
                assert got[:4] == expected[:4] and got[4][:2] == ("DELETED", "two"), got
                assert int(got[4][2]) > direct_rv  # type: ignore[arg-type]

            # B's window holds A's writes: a watch through B from A's first write replays exactly what followed
            later = WatchStream(b.url, LEASES, resourceVersion=one["metadata"]["resourceVersion"])
            try:
                assert [t[:2] for t in seen(later.take(4))] == [e[:2] for e in expected[1:]]
            finally:
                later.close()
            # the informer on B ends with what a list through A says
            wait(cluster, lambda: informer_b.cache() == fresh(api_a, LEASES), 20, "B's informer to equal A's list")
        finally:
            informer_b.close()
            watch_a.close()
            watch_b.close()


def containers_of(uid: str) -> list[object]:
    client = docker.from_env()
    try:
        return client.containers.list(all=True, filters={"label": f"{LABEL_POD_UID}={uid}"})
    finally:
        client.close()


def test_apiserver_kill_9_mid_rollout(make_cluster: Callable[..., FailureCluster]) -> None:
    cluster = make_cluster().start()
    replicas, surge = 6, 2
    with cluster.client() as api:
        # pods that take their 2 s grace to stop: the apiserver dies while a kubelet is stopping one
        create_deployment(api, replicas, surge, 0, container=SLOW_TO_STOP, grace=2)
        wait(cluster, lambda: rollout_complete(api, replicas, "1"), 60, "version 1 to run")
        informer = InformerThread(cluster.url)
        writer = LeaseWriter(cluster.url)
        try:
            wait(cluster, lambda: writer.acked, 10, "a first acknowledged write")
            before = object_uids(api)
            since = pod_list(api)
            set_version(api, "2")

            def stopping() -> str:
                return next((p["metadata"]["uid"] for p in pods(api) if p["metadata"].get("deletionTimestamp")), "")

            uid = wait(cluster, stopping, 30, "an old pod to be stopping")
            cluster.apiserver.process.kill()
            down_at = time.monotonic()
            # the kubelet stops the pod with the apiserver away; its deletion can only be confirmed later
            wait(cluster, lambda: not containers_of(str(uid)), 20, "the stopping pod's containers removed")
            cluster.apiserver.start()  # same port, same etcd
            wait(cluster, lambda: writer.acked_since(down_at) >= 3, 20, "writes through the restarted apiserver")

            wait(cluster, lambda: rollout_complete(api, replicas, "2"), 90, "version 2 to roll out")
            peak = max_pods_since(api, since)
            assert replicas < peak <= replicas + surge, f"{peak} pods at once"
            assert_nothing_lost_or_leaked(cluster, api, before, informer, writer)
        finally:
            writer.stop()
            informer.close()
