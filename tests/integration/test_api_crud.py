"""CRUD through a real apiserver process on a real etcd."""

from __future__ import annotations

import concurrent.futures

import httpx
import pytest

from tests.cluster import wait_for
from tests.conftest import etcd_keys
from tests.manifests import deployment, node, pod


def test_pod_round_trip_has_system_metadata_and_defaults(api: httpx.Client, namespace: str) -> None:
    r = api.post(f"/api/v1/namespaces/{namespace}/pods", json=pod("web"))
    assert r.status_code == 201, r.text
    created = r.json()
    meta = created["metadata"]
    assert meta["namespace"] == namespace and meta["uid"] and meta["creationTimestamp"].endswith("Z")
    assert int(meta["resourceVersion"]) > 0
    assert created["spec"]["restartPolicy"] == "Always"
    assert created["spec"]["terminationGracePeriodSeconds"] == 30
    assert created["spec"]["containers"][0]["imagePullPolicy"] == "IfNotPresent"
    assert created["spec"]["schedulerName"] == "default-scheduler"
    assert created["status"]["phase"] == "Pending"

    got = api.get(f"/api/v1/namespaces/{namespace}/pods/web").json()
    assert got == created

    listed = api.get(f"/api/v1/namespaces/{namespace}/pods").json()
    assert listed["kind"] == "PodList" and [p["metadata"]["name"] for p in listed["items"]] == ["web"]
    assert int(listed["metadata"]["resourceVersion"]) >= int(meta["resourceVersion"])

    r = api.delete(f"/api/v1/namespaces/{namespace}/pods/web")
    assert r.status_code == 200, r.text
    assert api.get(f"/api/v1/namespaces/{namespace}/pods/web").status_code == 404


def test_resource_version_is_the_etcd_revision(api: httpx.Client, namespace: str, etcd) -> None:
    created = api.post(f"/api/v1/namespaces/{namespace}/pods", json=pod("rv")).json()
    stored = etcd_keys(etcd, f"/registry/pods/{namespace}/")
    assert list(stored) == [f"/registry/pods/{namespace}/rv"]
    assert b"resourceVersion" not in stored[f"/registry/pods/{namespace}/rv"]
    assert created["metadata"]["resourceVersion"].isdigit()


def test_latest_tag_pulls_always(api: httpx.Client, namespace: str) -> None:
    created = api.post(f"/api/v1/namespaces/{namespace}/pods", json=pod("latest", image="nginx")).json()
    assert created["spec"]["containers"][0]["imagePullPolicy"] == "Always"


def test_deployment_defaults_update_and_generation(api: httpx.Client, namespace: str) -> None:
    base = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    created = api.post(base, json=deployment("nginx")).json()
    assert created["spec"]["strategy"] == {"type": "RollingUpdate",
                                           "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}
    assert created["spec"]["revisionHistoryLimit"] == 10
    assert created["spec"]["progressDeadlineSeconds"] == 600
    assert created["metadata"]["generation"] == 1

    created["spec"]["replicas"] = 5
    updated = api.put(f"{base}/nginx", json=created)
    assert updated.status_code == 200, updated.text
    assert updated.json()["metadata"]["generation"] == 2
    assert int(updated.json()["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])

    # a status write does not bump generation, and a main-resource write cannot change status
    status = updated.json()
    status["status"] = {"replicas": 5, "observedGeneration": 2}
    r = api.put(f"{base}/nginx/status", json=status)
    assert r.status_code == 200, r.text
    assert r.json()["metadata"]["generation"] == 2 and r.json()["status"]["replicas"] == 5
    main = r.json()
    main["status"] = {"replicas": 99}
    assert api.put(f"{base}/nginx", json=main).json()["status"]["replicas"] == 5


def test_stale_resource_version_is_a_conflict(api: httpx.Client, namespace: str) -> None:
    base = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    created = api.post(base, json=deployment("cas")).json()
    first = dict(created, spec={**created["spec"], "replicas": 3})
    assert api.put(f"{base}/cas", json=first).status_code == 200
    stale = dict(created, spec={**created["spec"], "replicas": 4})
    r = api.put(f"{base}/cas", json=stale)
    assert r.status_code == 409
    body = r.json()
    assert body["kind"] == "Status" and body["reason"] == "Conflict"
    assert body["message"] == ('Operation cannot be fulfilled on deployments.apps "cas": the object has been '
                               'modified; please apply your changes to the latest version and try again')
    assert api.get(f"{base}/cas").json()["spec"]["replicas"] == 3


def test_create_existing_name_is_already_exists(api: httpx.Client, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/pods"
    assert api.post(base, json=pod("twice")).status_code == 201
    r = api.post(base, json=pod("twice"))
    assert r.status_code == 409
    assert r.json()["reason"] == "AlreadyExists"
    assert r.json()["message"] == 'pods "twice" already exists'


def test_missing_object_is_not_found(api: httpx.Client, namespace: str) -> None:
    r = api.get(f"/apis/apps/v1/namespaces/{namespace}/deployments/nope")
    assert r.status_code == 404
    assert r.json() == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                        "message": 'deployments.apps "nope" not found', "reason": "NotFound",
                        "details": {"name": "nope", "group": "apps", "kind": "deployments"}, "code": 404}


def test_generate_name(api: httpx.Client, namespace: str) -> None:
    body = pod("x")
    del body["metadata"]["name"]
    body["metadata"]["generateName"] = "nginx-5cfbf748d-"
    names = set()
    for _ in range(5):
        r = api.post(f"/api/v1/namespaces/{namespace}/pods", json=body)
        assert r.status_code == 201, r.text
        name = r.json()["metadata"]["name"]
        assert name.startswith("nginx-5cfbf748d-") and len(name) == len("nginx-5cfbf748d-") + 5
        names.add(name)
    assert len(names) == 5


def test_concurrent_read_modify_write_loses_no_update(apiserver, namespace: str) -> None:
    """100 writers each add one annotation with GET + PUT, retrying on 409: all 100 land."""
    with httpx.Client(base_url=apiserver.url, timeout=30) as api:
        api.post(f"/api/v1/namespaces/{namespace}/pods", json=pod("counter"))
    url = f"/api/v1/namespaces/{namespace}/pods/counter"

    def writer(i: int) -> int:
        conflicts = 0
        with httpx.Client(base_url=apiserver.url, timeout=30) as client:
            while True:
                obj = client.get(url).json()
                obj["metadata"].setdefault("annotations", {})[f"writer-{i}"] = "done"
                r = client.put(url, json=obj)
                if r.status_code == 200:
                    return conflicts
                assert r.status_code == 409, r.text
                conflicts += 1

    with concurrent.futures.ThreadPoolExecutor(max_workers=32) as pool:
        conflicts = sum(pool.map(writer, range(100)))
    with httpx.Client(base_url=apiserver.url, timeout=30) as api:
        annotations = api.get(url).json()["metadata"]["annotations"]
    assert sorted(annotations) == sorted(f"writer-{i}" for i in range(100))
    assert conflicts > 0  # the writers really did race


def test_cluster_scoped_nodes(api: httpx.Client) -> None:
    r = api.post("/api/v1/nodes", json=node("crud-node"))
    assert r.status_code == 201, r.text
    assert "namespace" not in r.json()["metadata"]
    assert api.get("/api/v1/nodes/crud-node").status_code == 200
    assert api.delete("/api/v1/nodes/crud-node").status_code == 200
    assert api.get("/api/v1/nodes/crud-node").status_code == 404


def test_system_namespaces_exist(api: httpx.Client) -> None:
    names = {ns["metadata"]["name"] for ns in api.get("/api/v1/namespaces").json()["items"]}
    assert {"default", "kube-system", "kube-public", "kube-node-lease"} <= names


def test_label_and_field_selectors(api: httpx.Client, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/pods"
    api.post(base, json=pod("a", labels={"app": "web", "tier": "front"}))
    api.post(base, json=pod("b", labels={"app": "web", "tier": "back"}))
    api.post(base, json=pod("c", labels={"app": "db"}))

    def names(**params: str) -> list[str]:
        r = api.get(base, params=params)
        assert r.status_code == 200, r.text
        return sorted(p["metadata"]["name"] for p in r.json()["items"])

    assert names(labelSelector="app=web") == ["a", "b"]
    assert names(labelSelector="app=web,tier!=front") == ["b"]
    assert names(labelSelector="tier in (front, back)") == ["a", "b"]
    assert names(labelSelector="!tier") == ["c"]
    assert names(fieldSelector="metadata.name=c") == ["c"]
    assert names(fieldSelector="status.phase=Pending,metadata.name!=a") == ["b", "c"]
    assert names(fieldSelector="spec.nodeName=") == ["a", "b", "c"]
    r = api.get(base, params={"labelSelector": "app in (web"})
    assert r.status_code == 400 and r.json()["kind"] == "Status"
    r = api.get(base, params={"fieldSelector": "spec.unknown=x"})
    assert r.status_code == 400 and "field label not supported" in r.json()["message"]


def test_list_across_namespaces(api: httpx.Client, namespace: str) -> None:
    api.post(f"/api/v1/namespaces/{namespace}/pods", json=pod("everywhere"))
    items = api.get("/api/v1/pods", params={"fieldSelector": f"metadata.namespace={namespace}"}).json()["items"]
    assert [p["metadata"]["name"] for p in items] == ["everywhere"]


def test_pagination_with_limit_and_continue(api: httpx.Client, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/pods"
    for i in range(7):
        api.post(base, json=pod(f"p{i}"))
    seen, token, pages, rvs = [], "", 0, set()
    while True:
        params = {"limit": "3"} | ({"continue": token} if token else {})
        page = api.get(base, params=params).json()
        pages += 1
        seen += [p["metadata"]["name"] for p in page["items"]]
        rvs.add(page["metadata"]["resourceVersion"])
        token = page["metadata"].get("continue", "")
        if not token:
            break
        api.post(base, json=pod(f"late{pages}"))  # written between pages: not in this consistent list
    assert seen == [f"p{i}" for i in range(7)]
    assert pages == 3 and len(rvs) == 1
    r = api.get(base, params={"limit": "3", "continue": "not-a-token"})
    assert r.status_code == 400 and r.json()["reason"] == "BadRequest"


def test_patch_types(api: httpx.Client, namespace: str) -> None:
    base = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    api.post(base, json=deployment("patched"))
    merge = api.patch(f"{base}/patched", content=b'{"spec":{"replicas":4}}',
                      headers={"content-type": "application/merge-patch+json"})
    assert merge.status_code == 200 and merge.json()["spec"]["replicas"] == 4
    smp = api.patch(f"{base}/patched", headers={"content-type": "application/strategic-merge-patch+json"},
                    content=b'{"spec":{"template":{"spec":{"containers":[{"name":"sidecar","image":"busybox:1"}]}}}}')
    assert smp.status_code == 200, smp.text
    # upstream's strategic merge puts list items new to the object first
    assert [c["name"] for c in smp.json()["spec"]["template"]["spec"]["containers"]] == ["sidecar", "web"]
    jp = api.patch(f"{base}/patched", headers={"content-type": "application/json-patch+json"},
                   content=b'[{"op":"replace","path":"/spec/replicas","value":1}]')
    assert jp.status_code == 200 and jp.json()["spec"]["replicas"] == 1
    assert jp.json()["metadata"]["generation"] == 4


def test_server_side_apply_creates_then_updates(api: httpx.Client, namespace: str) -> None:
    url = f"/apis/apps/v1/namespaces/{namespace}/deployments/applied"
    headers = {"content-type": "application/apply-patch+yaml"}
    manifest = deployment("applied", replicas=2)
    r = api.patch(url, params={"fieldManager": "kubectl", "force": "false"}, json=manifest, headers=headers)
    assert r.status_code == 201, r.text
    manifest["spec"]["replicas"] = 3
    r = api.patch(url, params={"fieldManager": "kubectl"}, json=manifest, headers=headers)
    assert r.status_code == 200 and r.json()["spec"]["replicas"] == 3
    r = api.patch(url, json=manifest, headers=headers)
    assert r.status_code == 422 and "fieldManager" in r.json()["message"]


def test_scale_subresource(api: httpx.Client, namespace: str) -> None:
    base = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    api.post(base, json=deployment("scaled", replicas=2))
    scale = api.get(f"{base}/scaled/scale").json()
    assert scale["kind"] == "Scale" and scale["apiVersion"] == "autoscaling/v1"
    assert scale["spec"]["replicas"] == 2 and scale["status"]["selector"] == "app=scaled"
    r = api.patch(f"{base}/scaled/scale", content=b'{"spec":{"replicas":5}}',
                  headers={"content-type": "application/merge-patch+json"})
    assert r.status_code == 200 and r.json()["spec"]["replicas"] == 5
    assert api.get(f"{base}/scaled").json()["spec"]["replicas"] == 5
    r = api.patch(f"{base}/scaled/scale", content=b'{"spec":{"replicas":-1}}',
                  headers={"content-type": "application/merge-patch+json"})
    assert r.status_code == 422 and r.json()["reason"] == "Invalid"
    assert api.get(f"{base}/scaled").json()["spec"]["replicas"] == 5


def test_binding_sets_node_once(api: httpx.Client, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/pods"
    api.post(base, json=pod("bound"))
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "bound"},
               "target": {"apiVersion": "v1", "kind": "Node", "name": "node-1"}}
    r = api.post(f"{base}/bound/binding", json=binding)
    assert r.status_code == 201, r.text
    got = api.get(f"{base}/bound").json()
    assert got["spec"]["nodeName"] == "node-1"
    assert {"type": "PodScheduled", "status": "True"}.items() <= got["status"]["conditions"][0].items()
    r = api.post(f"{base}/bound/binding", json={**binding, "target": {"kind": "Node", "name": "node-2"}})
    assert r.status_code == 409
    assert api.get(f"{base}/bound").json()["spec"]["nodeName"] == "node-1"
    # nodeName may not change through an update of the pod
    got["spec"]["nodeName"] = "node-3"
    assert api.put(f"{base}/bound", json=got).status_code == 422


def test_graceful_pod_deletion_and_finalizers(api: httpx.Client, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/pods"
    api.post(base, json=pod("graceful", nodeName="node-1"))
    r = api.delete(f"{base}/graceful")
    assert r.status_code == 200
    held = api.get(f"{base}/graceful").json()
    assert held["metadata"]["deletionTimestamp"] and held["metadata"]["deletionGracePeriodSeconds"] == 30
    assert api.delete(f"{base}/graceful", params={"gracePeriodSeconds": "0"}).status_code == 200
    assert api.get(f"{base}/graceful").status_code == 404

    unscheduled = pod("immediate")
    api.post(base, json=unscheduled)
    api.delete(f"{base}/immediate")
    assert api.get(f"{base}/immediate").status_code == 404

    held = pod("finalized")
    held["metadata"]["finalizers"] = ["example.com/hold"]
    api.post(base, json=held)
    api.request("DELETE", f"{base}/finalized", json={"propagationPolicy": "Foreground"})
    got = api.get(f"{base}/finalized").json()
    assert got["metadata"]["deletionTimestamp"]
    assert got["metadata"]["finalizers"] == ["example.com/hold", "foregroundDeletion"]
    r = api.patch(f"{base}/finalized", content=b'{"metadata":{"finalizers":null}}',
                  headers={"content-type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text
    assert api.get(f"{base}/finalized").status_code == 404


def test_delete_collection(api: httpx.Client, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/pods"
    for name, app in (("d1", "gone"), ("d2", "gone"), ("d3", "kept")):
        api.post(base, json=pod(name, labels={"app": app}))
    r = api.delete(base, params={"labelSelector": "app=gone"})
    assert r.status_code == 200 and len(r.json()["items"]) == 2
    assert [p["metadata"]["name"] for p in api.get(base).json()["items"]] == ["d3"]


def test_dry_run_writes_nothing(api: httpx.Client, namespace: str, etcd) -> None:
    r = api.post(f"/api/v1/namespaces/{namespace}/pods", params={"dryRun": "All"}, json=pod("dry"))
    assert r.status_code == 201 and r.json()["metadata"]["name"] == "dry"
    assert etcd_keys(etcd, f"/registry/pods/{namespace}/") == {}


def test_namespace_deletion_waits_for_finalize(api: httpx.Client) -> None:
    """DELETE leaves the namespace Terminating until its spec.finalizers are emptied via /finalize
    (the namespace controller's job), and new content is refused meanwhile."""
    api.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "doomed"}})
    r = api.delete("/api/v1/namespaces/doomed")
    assert r.status_code == 200, r.text
    ns = api.get("/api/v1/namespaces/doomed").json()
    assert ns["status"]["phase"] == "Terminating" and ns["metadata"]["deletionTimestamp"]
    assert ns["spec"]["finalizers"] == ["kubernetes"]
    r = api.post("/api/v1/namespaces/doomed/pods", json=pod("late"))
    assert r.status_code == 403 and "being terminated" in r.json()["message"]
    # an ordinary update may not drop spec.finalizers
    ns["spec"]["finalizers"] = []
    assert api.put("/api/v1/namespaces/doomed", json=ns).json()["spec"]["finalizers"] == ["kubernetes"]
    r = api.put("/api/v1/namespaces/doomed/finalize", json=ns)
    assert r.status_code == 200, r.text
    assert api.get("/api/v1/namespaces/doomed").status_code == 404


def test_patch_naming_a_stale_resource_version_is_a_conflict(api: httpx.Client, namespace: str) -> None:
    base = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    stale = api.post(base, json=deployment("pinned")).json()["metadata"]["resourceVersion"]
    merge = {"content-type": "application/merge-patch+json"}
    api.patch(f"{base}/pinned", content=b'{"spec":{"replicas":3}}', headers=merge)
    patch = b'{"metadata":{"resourceVersion":"%s"},"spec":{"replicas":4}}' % stale.encode()
    r = api.patch(f"{base}/pinned", content=patch, headers=merge)
    assert r.status_code == 409 and r.json()["reason"] == "Conflict"
    assert api.get(f"{base}/pinned").json()["spec"]["replicas"] == 3


def test_uid_is_immutable(api: httpx.Client, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/pods"
    created = api.post(base, json=pod("uid")).json()
    created["metadata"]["uid"] = "00000000-0000-0000-0000-000000000000"
    r = api.put(f"{base}/uid", json=created)
    assert r.status_code == 422 and "metadata.uid" in r.json()["message"]
    r = api.patch(f"{base}/uid", content=b'{"metadata":{"uid":"x"}}',
                  headers={"content-type": "application/merge-patch+json"})
    assert r.status_code == 422 and "field is immutable" in r.json()["message"]
    del created["metadata"]["uid"]
    assert api.put(f"{base}/uid", json=created).status_code == 200  # a missing uid means "unchanged"


def test_list_from_the_watch_cache_matches_etcd(api: httpx.Client, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/pods"
    created = [api.post(base, json=pod(f"c{i}", labels={"app": "web" if i % 2 else "db"})).json() for i in range(4)]
    last_rv = created[-1]["metadata"]["resourceVersion"]
    consistent = api.get(base).json()

    def cached() -> dict:
        r = api.get(base, params={"resourceVersion": "0"})
        assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
        return r.json()

    wait_for(lambda: int(cached()["metadata"]["resourceVersion"]) >= int(last_rv), what="watch cache catching up")
    listed = cached()
    assert listed["kind"] == "PodList" and listed["items"] == consistent["items"]
    selected = api.get(base, params={"resourceVersion": "0", "labelSelector": "app=web"}).json()
    assert [p["metadata"]["name"] for p in selected["items"]] == ["c1", "c3"]


@pytest.mark.parametrize("path", ["/api", "/api/", "/apis", "/apis/", "/apis/apps", "/apis/apps/",
                                  "/api/v1", "/api/v1/", "/apis/apps/v1", "/apis/apps/v1/"])
def test_discovery_with_and_without_trailing_slash_answers_directly(api: httpx.Client, path: str) -> None:
    """The official clients ask for /api/ and /apis/apps/v1/; upstream answers 200 there, never a redirect."""
    r = api.get(path, follow_redirects=False)
    assert r.status_code == 200, (path, r.status_code, r.text[:200])
    assert r.json()["kind"] in {"APIVersions", "APIGroupList", "APIGroup", "APIResourceList"}
