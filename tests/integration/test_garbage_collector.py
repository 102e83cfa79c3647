"""The garbage collector as a real process against the real apiserver: ownerReferences, background,
foreground and orphan propagation. Owner chains (Deployment -> ReplicaSet -> Pods) are written by
hand with ownerReferences, so no deployment or replicaset controller is needed."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.cluster import ApiServer, wait_for
from tests.controller_process import ControllerProcess
from tests.manifests import deployment, pod

HOLD = "example.com/hold"  # a finalizer nobody removes but the test


@pytest.fixture(scope="module")
def gc(workdir: Any, apiserver: ApiServer) -> Iterator[ControllerProcess]:
    process = ControllerProcess(workdir, apiserver.url, ["garbagecollector"])
    try:
        process.start()
        yield process
    finally:
        process.stop()


# -- helpers ----------------------------------------------------------------------------------


def ref(obj: dict[str, Any], controller: bool = True, block: bool = True) -> dict[str, Any]:
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": obj["metadata"]["name"],
            "uid": obj["metadata"]["uid"], "controller": controller, "blockOwnerDeletion": block}


def replicaset(name: str, app: str, owner: dict[str, Any] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {"app": app}}
    if owner is not None:
        meta["ownerReferences"] = [ref(owner)]
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": meta,
            "spec": {"replicas": 0, "selector": {"matchLabels": {"app": app}},
                     "template": {"metadata": {"labels": {"app": app}},
                                  "spec": {"containers": [{"name": "web", "image": "nginx:1.25"}]}}}}


def create(api: httpx.Client, path: str, body: dict[str, Any]) -> dict[str, Any]:
    r = api.post(path, json=body)
    assert r.status_code == 201, r.text
    return r.json()


def make_pod(api: httpx.Client, ns: str, name: str, owners: list[dict[str, Any]],
             finalizers: list[str] | None = None) -> dict[str, Any]:
    body = pod(name, labels={"app": "web"})
    body["metadata"]["ownerReferences"] = owners
    if finalizers:
        body["metadata"]["finalizers"] = finalizers
    return create(api, f"/api/v1/namespaces/{ns}/pods", body)


def chain(api: httpx.Client, ns: str, pods: int = 3) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
    """Deployment web -> ReplicaSet web-abc -> pods web-abc-N, linked by controller ownerReferences."""
    d = create(api, f"/apis/apps/v1/namespaces/{ns}/deployments", deployment("web", replicas=pods, app="web"))
    rs = create(api, f"/apis/apps/v1/namespaces/{ns}/replicasets", replicaset("web-abc", "web", d))
    ps = [make_pod(api, ns, f"web-abc-{i}", [ref(rs)]) for i in range(pods)]
    return d, rs, ps


def exists(api: httpx.Client, path: str) -> bool:
    r = api.get(path)
    assert r.status_code in (200, 404), r.text
    return r.status_code == 200


def pod_names(api: httpx.Client, ns: str) -> set[str]:
    return {p["metadata"]["name"] for p in api.get(f"/api/v1/namespaces/{ns}/pods").json()["items"]}


def delete(api: httpx.Client, path: str, policy: str | None = None) -> httpx.Response:
    body = {"apiVersion": "v1", "kind": "DeleteOptions"}
    if policy:
        body["propagationPolicy"] = policy
    r = api.request("DELETE", path, json=body)
    assert r.status_code in (200, 202), r.text
    return r


def drop_finalizer(api: httpx.Client, path: str, finalizer: str) -> None:
    obj = api.get(path).json()
    obj["metadata"]["finalizers"] = [f for f in obj["metadata"].get("finalizers") or [] if f != finalizer]
    r = api.put(path, json=obj)
    assert r.status_code == 200, r.text


# -- propagation ------------------------------------------------------------------------------


def test_background_delete_of_the_top_removes_the_whole_chain(api: httpx.Client, namespace: str,
                                                              gc: ControllerProcess) -> None:
    chain(api, namespace)
    delete(api, f"/apis/apps/v1/namespaces/{namespace}/deployments/web")  # Background is the default
    assert not exists(api, f"/apis/apps/v1/namespaces/{namespace}/deployments/web")  # gone at once
    wait_for(lambda: not exists(api, f"/apis/apps/v1/namespaces/{namespace}/replicasets/web-abc"), 20,
             what=f"the ReplicaSet to be collected\n{gc.log_tail()}")
    wait_for(lambda: not pod_names(api, namespace), 20, what=f"the pods to be collected\n{gc.log_tail()}")


def test_foreground_keeps_the_owner_until_its_dependents_are_gone(api: httpx.Client, namespace: str,
                                                                  gc: ControllerProcess) -> None:
    d, rs, _ = chain(api, namespace, pods=2)
    held = make_pod(api, namespace, "web-abc-held", [ref(rs)], finalizers=[HOLD])
    d_path = f"/apis/apps/v1/namespaces/{namespace}/deployments/web"
    rs_path = f"/apis/apps/v1/namespaces/{namespace}/replicasets/web-abc"
    held_path = f"/api/v1/namespaces/{namespace}/pods/web-abc-held"

    answer = delete(api, d_path, "Foreground").json()
    assert answer["metadata"]["deletionTimestamp"] and "foregroundDeletion" in answer["metadata"]["finalizers"]

    # the collector walks down: the ReplicaSet is deleted in the foreground too, its free pods go,
    # and the pod held by a finalizer is only marked
    wait_for(lambda: pod_names(api, namespace) == {"web-abc-held"}, 20, what=f"free pods gone\n{gc.log_tail()}")
    wait_for(lambda: api.get(held_path).json()["metadata"].get("deletionTimestamp"), 20, what="held pod marked")
    wait_for(lambda: "foregroundDeletion" in (api.get(rs_path).json()["metadata"].get("finalizers") or []), 20,
             what="the ReplicaSet deleted in the foreground")
    # while a blocking dependent exists, its owners stay, marked
    assert api.get(rs_path).json()["metadata"]["deletionTimestamp"]
    top = api.get(d_path).json()["metadata"]
    assert top["deletionTimestamp"] and top["finalizers"] == ["foregroundDeletion"] and top["uid"] == d["metadata"][
        "uid"]

    drop_finalizer(api, held_path, HOLD)
    assert held["metadata"]["uid"]
    wait_for(lambda: not exists(api, held_path), 20, what="held pod gone")
    wait_for(lambda: not exists(api, rs_path), 20, what=f"ReplicaSet gone\n{gc.log_tail()}")
    wait_for(lambda: not exists(api, d_path), 20, what=f"Deployment gone\n{gc.log_tail()}")


def test_foreground_does_not_wait_for_dependents_that_do_not_block(api: httpx.Client, namespace: str,
                                                                   gc: ControllerProcess) -> None:
    rs = create(api, f"/apis/apps/v1/namespaces/{namespace}/replicasets", replicaset("loose", "loose"))
    make_pod(api, namespace, "loose-held", [ref(rs, block=False)], finalizers=[HOLD])
    rs_path = f"/apis/apps/v1/namespaces/{namespace}/replicasets/loose"
    delete(api, rs_path, "Foreground")
    wait_for(lambda: not exists(api, rs_path), 20, what=f"owner gone\n{gc.log_tail()}")
    pod_path = f"/api/v1/namespaces/{namespace}/pods/loose-held"
    wait_for(lambda: api.get(pod_path).json()["metadata"].get("deletionTimestamp"), 20, what="dependent deleted")
    drop_finalizer(api, pod_path, HOLD)
    wait_for(lambda: not exists(api, pod_path), 20, what="dependent gone")


def test_foreground_delete_of_an_owner_without_dependents_finishes(api: httpx.Client, namespace: str,
                                                                   gc: ControllerProcess) -> None:
    create(api, f"/apis/apps/v1/namespaces/{namespace}/deployments", deployment("lonely"))
    path = f"/apis/apps/v1/namespaces/{namespace}/deployments/lonely"
    delete(api, path, "Foreground")
    wait_for(lambda: not exists(api, path), 20, what=f"the foregroundDeletion finalizer removed\n{gc.log_tail()}")


def test_orphan_leaves_dependents_without_the_reference(api: httpx.Client, namespace: str,
                                                        gc: ControllerProcess) -> None:
    d, rs, _ = chain(api, namespace, pods=2)
    d_path = f"/apis/apps/v1/namespaces/{namespace}/deployments/web"
    rs_path = f"/apis/apps/v1/namespaces/{namespace}/replicasets/web-abc"
    delete(api, d_path, "Orphan")
    wait_for(lambda: not exists(api, d_path), 20, what=f"the orphan finalizer removed\n{gc.log_tail()}")
    got = api.get(rs_path).json()
    assert not got["metadata"].get("ownerReferences"), got["metadata"]
    # the ReplicaSet's own dependents keep their reference to it and stay
    assert pod_names(api, namespace) == {"web-abc-0", "web-abc-1"}
    for p in api.get(f"/api/v1/namespaces/{namespace}/pods").json()["items"]:
        assert [r["uid"] for r in p["metadata"]["ownerReferences"]] == [rs["metadata"]["uid"]]
    assert d["metadata"]["uid"] not in str(api.get(f"/apis/apps/v1/namespaces/{namespace}/replicasets").json())


def test_a_dependent_with_another_live_owner_stays_and_loses_the_dead_reference(
        api: httpx.Client, namespace: str, gc: ControllerProcess) -> None:
    a = create(api, f"/apis/apps/v1/namespaces/{namespace}/replicasets", replicaset("a", "a"))
    b = create(api, f"/apis/apps/v1/namespaces/{namespace}/replicasets", replicaset("b", "b"))
    make_pod(api, namespace, "shared", [ref(a), ref(b, controller=False)])
    delete(api, f"/apis/apps/v1/namespaces/{namespace}/replicasets/a")
    path = f"/api/v1/namespaces/{namespace}/pods/shared"
    wait_for(lambda: [r["name"] for r in api.get(path).json()["metadata"]["ownerReferences"]] == ["b"], 20,
             what=f"the reference to the deleted owner removed\n{gc.log_tail()}")
    delete(api, f"/apis/apps/v1/namespaces/{namespace}/replicasets/b")
    wait_for(lambda: not exists(api, path), 20, what="collected with its last owner")


# -- identity by uid --------------------------------------------------------------------------


def test_owner_that_never_existed_means_collection(api: httpx.Client, namespace: str,
                                                   gc: ControllerProcess) -> None:
    ghost = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "ghost", "uid": str(uuid.uuid4()),
             "controller": True}
    make_pod(api, namespace, "orphaned", [ghost])
    wait_for(lambda: "orphaned" not in pod_names(api, namespace), 20,
             what=f"a dependent of a missing owner collected\n{gc.log_tail()}")


def test_owners_are_matched_by_uid_not_by_name(api: httpx.Client, namespace: str, gc: ControllerProcess) -> None:
    """Owner `r` is deleted and created again under the same name. The dependents of the first
    `r` are collected (a name match with another uid is not their owner); the dependents of the
    second are not touched by the first one's deletion."""
    rs_base = f"/apis/apps/v1/namespaces/{namespace}/replicasets"
    first = create(api, rs_base, replicaset("r", "r"))
    make_pod(api, namespace, "of-first", [ref(first)])
    delete(api, f"{rs_base}/r")
    second = create(api, rs_base, replicaset("r", "r"))
    assert second["metadata"]["uid"] != first["metadata"]["uid"]
    make_pod(api, namespace, "of-second", [ref(second)])
    wait_for(lambda: "of-first" not in pod_names(api, namespace), 20, what=f"of-first collected\n{gc.log_tail()}")

    # a dependent written now with the first uid names an object that exists by name, not by uid
    make_pod(api, namespace, "late-of-first", [ref(first)])
    wait_for(lambda: "late-of-first" not in pod_names(api, namespace), 20,
             what=f"late-of-first collected\n{gc.log_tail()}")
    assert "of-second" in pod_names(api, namespace)
    assert exists(api, f"{rs_base}/r")


def test_cluster_scoped_owner_of_a_namespaced_dependent(api: httpx.Client, namespace: str,
                                                        gc: ControllerProcess) -> None:
    """As a kubelet's Lease is owned by its Node."""
    name = f"gc-node-{uuid.uuid4().hex[:6]}"
    node = create(api, "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
             "metadata": {"name": name, "ownerReferences": [ref(node, controller=False, block=False)]},
             "spec": {"holderIdentity": name, "leaseDurationSeconds": 40}}
    lease_path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"
    create(api, f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases", lease)
    try:
        delete(api, f"/api/v1/nodes/{name}")
        wait_for(lambda: not exists(api, lease_path), 20, what=f"the node's lease collected\n{gc.log_tail()}")
    finally:
        api.delete(f"/api/v1/nodes/{name}")


# -- restarts ---------------------------------------------------------------------------------


def test_owner_deleted_while_the_collector_is_down_is_noticed_after_restart(
        api: httpx.Client, namespace: str, gc: ControllerProcess) -> None:
    chain(api, namespace, pods=2)
    wait_for(lambda: len(pod_names(api, namespace)) == 2, 10, what="pods")
    gc.kill()
    try:
        delete(api, f"/apis/apps/v1/namespaces/{namespace}/deployments/web")
        assert exists(api, f"/apis/apps/v1/namespaces/{namespace}/replicasets/web-abc")  # nobody collects
    finally:
        gc.start()
    wait_for(lambda: not exists(api, f"/apis/apps/v1/namespaces/{namespace}/replicasets/web-abc"), 20,
             what=f"the ReplicaSet collected after restart\n{gc.log_tail()}")
    wait_for(lambda: not pod_names(api, namespace), 20, what=f"pods collected after restart\n{gc.log_tail()}")


def test_the_infrastructure_controllers_write_under_upstream_identities() -> None:
    """Until the apiserver keeps an audit log to read it back from: the controller-manager builds each
    controller's client for the service account its module names, and the User-Agent says so."""
    from controllers import garbage_collector, manager, namespace, node_ipam, node_lifecycle

    for name, module in (("garbagecollector", garbage_collector), ("namespace", namespace),
                         ("nodeipam", node_ipam), ("nodelifecycle", node_lifecycle)):
        account = manager.CONTROLLERS[name].service_account
        assert manager.SERVICE_ACCOUNT_PREFIX + account == module.IDENTITY
        assert manager.user_agent(module.IDENTITY).endswith(f" minik8s/{module.IDENTITY}")
    assert garbage_collector.USER_AGENT == ("kube-controller-manager/v1.30.0 (linux/amd64) "
                                            "minik8s/system:serviceaccount:kube-system:generic-garbage-collector")
