"""The namespace controller as a real process (with the garbage collector, as in the
controller-manager) against the real apiserver: deleting a namespace empties it, then removes it.

Relies on the apiserver's namespace lifecycle: DELETE of a namespace with spec.finalizers sets
deletionTimestamp and status.phase Terminating instead of deleting it, PUT namespaces/{name}/finalize
writes spec.finalizers, and the namespace goes once spec.finalizers and metadata.finalizers are
both empty. Against an apiserver that still deletes namespaces at once these tests skip."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from machinery.api.resources import RESOURCES
from tests.cluster import ApiServer, wait_for
from tests.conftest import etcd_keys
from tests.controller_process import ControllerProcess
from tests.manifests import deployment, pod

HOLD = "example.com/hold"


@pytest.fixture(scope="module")
def controllers(workdir: Any, apiserver: ApiServer) -> Iterator[ControllerProcess]:
    process = ControllerProcess(workdir, apiserver.url, ["namespace", "garbagecollector"])
    try:
        process.start()
        yield process
    finally:
        process.stop()


def new_namespace(api: httpx.Client) -> str:
    name = f"ns-{uuid.uuid4().hex[:10]}"
    r = api.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    assert r.status_code == 201, r.text
    assert r.json()["spec"]["finalizers"] == ["kubernetes"]
    return name


def delete_namespace(api: httpx.Client, name: str) -> dict[str, Any]:
    r = api.delete(f"/api/v1/namespaces/{name}")
    assert r.status_code in (200, 202), r.text
    body = r.json()
    if body.get("kind") == "Status" or api.get(f"/api/v1/namespaces/{name}").status_code == 404:
        pytest.skip("the apiserver deletes namespaces at once: the Terminating phase and the finalize "
                    "subresource (the namespace controller's contract) are not there yet")
    return body


def create(api: httpx.Client, path: str, body: dict[str, Any]) -> dict[str, Any]:
    r = api.post(path, json=body)
    assert r.status_code == 201, r.text
    return r.json()


def fill(api: httpx.Client, ns: str) -> None:
    """Something of every kind: a Deployment -> ReplicaSet -> Pod chain, a lone pod, a Lease, an Event."""
    d = create(api, f"/apis/apps/v1/namespaces/{ns}/deployments", deployment("web", app="web"))
    rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
          "metadata": {"name": "web-1", "labels": {"app": "web"}, "ownerReferences": [
              {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": d["metadata"]["uid"],
               "controller": True, "blockOwnerDeletion": True}]},
          "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                   "template": {"metadata": {"labels": {"app": "web"}},
                                "spec": {"containers": [{"name": "web", "image": "nginx:1.25"}]}}}}
    rs = create(api, f"/apis/apps/v1/namespaces/{ns}/replicasets", rs)
    owned = pod("web-1-abcde", labels={"app": "web"})
    owned["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1",
                                             "uid": rs["metadata"]["uid"], "controller": True}]
    create(api, f"/api/v1/namespaces/{ns}/pods", owned)
    create(api, f"/api/v1/namespaces/{ns}/pods", pod("lone"))
    create(api, f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases",
           {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "lock"},
            "spec": {"holderIdentity": "me"}})
    create(api, f"/api/v1/namespaces/{ns}/events",
           {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "lone.1"},
            "involvedObject": {"kind": "Pod", "name": "lone", "namespace": ns}, "reason": "Test", "message": "hi",
            "type": "Normal"})


def contents(api: httpx.Client, ns: str) -> dict[str, int]:
    out = {}
    for info in RESOURCES:
        if info.namespaced:
            items = api.get(info.collection_path(ns)).json().get("items") or []
            if items:
                out[info.group_resource] = len(items)
    return out


def conditions(api: httpx.Client, ns: str) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in api.get(f"/api/v1/namespaces/{ns}").json()["status"].get("conditions") or []}


def test_a_deleted_namespace_is_emptied_then_removed(api: httpx.Client, etcd: Any,
                                                    controllers: ControllerProcess) -> None:
    ns = new_namespace(api)
    fill(api, ns)
    assert contents(api, ns) == {"deployments.apps": 1, "replicasets.apps": 1, "pods": 2,
                                 "leases.coordination.k8s.io": 1, "events": 1}
    answer = delete_namespace(api, ns)
    assert answer["metadata"]["deletionTimestamp"] and answer["status"]["phase"] == "Terminating"
    wait_for(lambda: api.get(f"/api/v1/namespaces/{ns}").status_code == 404, 30,
             what=f"namespace {ns} gone\n{controllers.log_tail()}")
    assert contents(api, ns) == {}
    assert not [k for k in etcd_keys(etcd, "/registry/") if f"/{ns}/" in k or k.endswith(f"/{ns}")]


def test_content_held_by_a_finalizer_keeps_the_namespace_terminating(api: httpx.Client,
                                                                      controllers: ControllerProcess) -> None:
    ns = new_namespace(api)
    held = pod("held")
    held["metadata"]["finalizers"] = [HOLD]
    create(api, f"/api/v1/namespaces/{ns}/pods", held)
    create(api, f"/api/v1/namespaces/{ns}/pods", pod("free"))
    delete_namespace(api, ns)

    def stuck() -> bool:
        c = conditions(api, ns)
        return c.get("NamespaceFinalizersRemaining", {}).get("status") == "True"

    wait_for(stuck, 20, what=f"the NamespaceFinalizersRemaining condition\n{controllers.log_tail()}")
    c = conditions(api, ns)
    assert c["NamespaceFinalizersRemaining"]["reason"] == "SomeFinalizersRemain"
    assert c["NamespaceFinalizersRemaining"]["message"] == \
        f"Some content in the namespace has finalizers remaining: {HOLD} in 1 resource instances"
    assert c["NamespaceContentRemaining"]["status"] == "True"
    assert c["NamespaceContentRemaining"]["message"] == "Some resources are remaining: pods has 1 resource instances"
    assert c["NamespaceDeletionDiscoveryFailure"]["status"] == "False"
    ns_obj = api.get(f"/api/v1/namespaces/{ns}").json()
    assert ns_obj["status"]["phase"] == "Terminating" and ns_obj["spec"]["finalizers"] == ["kubernetes"]
    assert contents(api, ns) == {"pods": 1}

    held_path = f"/api/v1/namespaces/{ns}/pods/held"
    obj = api.get(held_path).json()
    obj["metadata"]["finalizers"] = []
    assert api.put(held_path, json=obj).status_code == 200
    wait_for(lambda: api.get(f"/api/v1/namespaces/{ns}").status_code == 404, 30,
             what=f"namespace {ns} gone once its content is\n{controllers.log_tail()}")


def test_active_namespaces_are_left_alone(api: httpx.Client, namespace: str,
                                          controllers: ControllerProcess) -> None:
    """The namespace fixture's namespace is Active: with both controllers running, its content stays
    (checked after a namespace deleted later has been fully processed, so the controllers were working)."""
    create(api, f"/api/v1/namespaces/{namespace}/pods", pod("stays"))
    other = new_namespace(api)
    create(api, f"/api/v1/namespaces/{other}/pods", pod("goes"))
    delete_namespace(api, other)
    wait_for(lambda: api.get(f"/api/v1/namespaces/{other}").status_code == 404, 30,
             what=f"namespace {other} gone\n{controllers.log_tail()}")
    assert contents(api, namespace) == {"pods": 1}
    assert api.get(f"/api/v1/namespaces/{namespace}").json()["status"]["phase"] == "Active"
