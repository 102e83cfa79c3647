"""Policy objects against a real apiserver (and a second one on the same etcd) with the resource-quota and
replication controllers as a real controller-manager: PriorityClasses and the Priority admission plugin,
ResourceQuotas (admission refusing with upstream's messages, status.used kept by admission and converging
after deletes, no over-admission when two apiservers race for the last unit, scopes), LimitRanges (defaults
and bounds) and ReplicationControllers (pods through the ReplicaSet logic, scale)."""

from __future__ import annotations

import concurrent.futures
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.cluster import ApiServer, Etcd, wait_for
from tests.controller_process import ControllerProcess
from tests.manifests import pod

SCHED = "/apis/scheduling.k8s.io/v1/priorityclasses"
QUANTITY_RE = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"


@pytest.fixture(scope="module")
def second_apiserver(workdir: Path, etcd: Etcd) -> Iterator[ApiServer]:
    server = ApiServer(workdir, etcd, "--etcd-compaction-interval", "0")
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def controllers(workdir: Path, apiserver: ApiServer) -> Iterator[ControllerProcess]:
    process = ControllerProcess(workdir, apiserver.url, ["resourcequota", "replicationcontroller"])
    process.start()
    yield process
    process.stop()


def pods(ns: str, name: str = "") -> str:
    return f"/api/v1/namespaces/{ns}/pods" + (f"/{name}" if name else "")


def quotas(ns: str, name: str = "") -> str:
    return f"/api/v1/namespaces/{ns}/resourcequotas" + (f"/{name}" if name else "")


def status_of(r: httpx.Response, code: int) -> dict[str, Any]:
    assert r.status_code == code, r.text
    body = r.json()
    assert body["kind"] == "Status" and body["code"] == code
    return body


def with_resources(name: str, **resources: dict[str, str]) -> dict[str, Any]:
    manifest = pod(name)
    manifest["spec"]["containers"][0]["resources"] = resources
    return manifest


def create_quota(api: httpx.Client, ns: str, name: str, hard: dict[str, str], **spec: Any) -> dict[str, Any]:
    r = api.post(quotas(ns), json={"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name},
                                   "spec": {"hard": hard, **spec}})
    assert r.status_code == 201, r.text
    return wait_used(api, ns, name, lambda used: set(used) == set(hard))


def wait_used(api: httpx.Client, ns: str, name: str, check: Any, timeout: float = 30) -> dict[str, Any]:
    """The quota once check(status.used) holds (the controller, or admission, wrote it), seen by the watch
    cache too (admission looks there first)."""
    def ready() -> dict[str, Any] | None:
        quota = api.get(quotas(ns, name)).json()
        used = (quota.get("status") or {}).get("used")
        cached = api.get(quotas(ns), params={"resourceVersion": "0"}).json()["items"]
        seen = any(q["metadata"]["name"] == name and (q.get("status") or {}).get("used") == used for q in cached)
        return quota if used is not None and check(used) and seen else None

    return wait_for(ready, timeout, what=f"status.used of quota {ns}/{name}")  # type: ignore[return-value]


# -- PriorityClass ---------------------------------------------------------------------------------------


def test_system_priority_classes_exist(api: httpx.Client) -> None:
    for name, value in (("system-cluster-critical", 2000000000), ("system-node-critical", 2000001000)):
        pc = api.get(f"{SCHED}/{name}").json()
        assert pc["value"] == value and pc["preemptionPolicy"] == "PreemptLowerPriority"
        assert not pc.get("globalDefault") and pc["description"]
    table = api.get(SCHED, headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}).json()
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Value", "Global-Default", "Age",
                                                               "PreemptionPolicy"]


def test_pod_priority_from_its_class(api: httpx.Client, namespace: str) -> None:
    name = f"high-{uuid.uuid4().hex[:6]}"
    try:
        r = api.post(SCHED, json={"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                  "metadata": {"name": name}, "value": 1000, "preemptionPolicy": "Never"})
        assert r.status_code == 201, r.text
        created = api.post(pods(namespace), json=pod("p", priorityClassName=name)).json()
        assert created["spec"]["priority"] == 1000 and created["spec"]["preemptionPolicy"] == "Never"
        plain = api.post(pods(namespace), json=pod("plain")).json()
        assert plain["spec"]["priority"] == 0 and plain["spec"]["preemptionPolicy"] == "PreemptLowerPriority"
        critical = api.post(pods(namespace), json=pod("crit", priorityClassName="system-node-critical")).json()
        assert critical["spec"]["priority"] == 2000001000
        body = status_of(api.post(pods(namespace), json=pod("lost", priorityClassName="nope")), 403)
        assert body["message"] == 'pods "lost" is forbidden: no PriorityClass with name nope was found'
        body = status_of(api.post(pods(namespace), json=pod("liar", priorityClassName=name, priority=5)), 403)
        assert body["message"] == ('pods "liar" is forbidden: the integer value of priority (5) must not be provided '
                                   'in pod spec; priority admission controller computed 1000 from the given '
                                   'PriorityClass name')
        # the value never changes
        r = api.patch(f"{SCHED}/{name}", json={"value": 7}, headers={"content-type": "application/merge-patch+json"})
        assert status_of(r, 422)["message"] == (f'PriorityClass.scheduling.k8s.io "{name}" is invalid: value: '
                                                f'Forbidden: may not be changed in an update.')
    finally:
        api.delete(f"{SCHED}/{name}")


def test_global_default_is_unique_and_applies(api: httpx.Client, namespace: str) -> None:
    first, second = f"default-{uuid.uuid4().hex[:6]}", f"other-{uuid.uuid4().hex[:6]}"
    try:
        body = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "value": 50, "globalDefault": True}
        assert api.post(SCHED, json={**body, "metadata": {"name": first}}).status_code == 201
        wait_for(lambda: any(i["metadata"]["name"] == first for i in
                             api.get(SCHED, params={"resourceVersion": "0"}).json()["items"]), 10, what="cache")
        r = api.post(SCHED, json={**body, "metadata": {"name": second}})
        assert status_of(r, 403)["message"] == (f'priorityclasses.scheduling.k8s.io "{second}" is forbidden: '
                                                f'PriorityClass {first} is already marked as default. Only one '
                                                f'default can exist')
        created = api.post(pods(namespace), json=pod("defaulted")).json()
        assert created["spec"]["priorityClassName"] == first and created["spec"]["priority"] == 50
    finally:
        api.delete(f"{SCHED}/{first}")
        api.delete(f"{SCHED}/{second}")


@pytest.mark.parametrize(("body", "message"), [
    ({"metadata": {"name": "system-mine"}, "value": 10},
     "metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use only. "
     "error: system-mine is not a known system priority class"),
    ({"metadata": {"name": "too-high"}, "value": 1000000001},
     "value: Forbidden: maximum allowed value of a user defined priority is 1000000000"),
    ({"metadata": {"name": "bad-policy"}, "value": 1, "preemptionPolicy": "Sometimes"},
     'preemptionPolicy: Unsupported value: "Sometimes": supported values: "PreemptLowerPriority", "Never"'),
])
def test_bad_priority_classes(api: httpx.Client, body: dict[str, Any], message: str) -> None:
    r = api.post(SCHED, json={"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", **body})
    name = body["metadata"]["name"]
    assert status_of(r, 422)["message"] == f'PriorityClass.scheduling.k8s.io "{name}" is invalid: {message}'
    assert api.get(f"{SCHED}/{name}").status_code == 404


# -- ResourceQuota ---------------------------------------------------------------------------------------


def test_quota_refuses_past_hard_and_converges_after_deletes(api: httpx.Client, namespace: str,
                                                             controllers: ControllerProcess) -> None:
    create_quota(api, namespace, "q", {"pods": "2", "count/configmaps": "1"})
    for name in ("a", "b"):
        assert api.post(pods(namespace), json=pod(name)).status_code == 201
    body = status_of(api.post(pods(namespace), json=pod("c")), 403)
    assert body["message"] == ('pods "c" is forbidden: exceeded quota: q, requested: pods=1, used: pods=2, '
                               'limited: pods=2')
    assert body["reason"] == "Forbidden" and body["details"] == {"name": "c", "kind": "pods"}
    assert api.get(pods(namespace, "c")).status_code == 404
    # admission charged the quota as it admitted the pods
    assert api.get(quotas(namespace, "q")).json()["status"]["used"]["pods"] == "2"
    # a configmap counts under count/configmaps only
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "one"}}
    assert api.post(f"/api/v1/namespaces/{namespace}/configmaps", json=cm).status_code == 201
    cm["metadata"]["name"] = "two"
    body = status_of(api.post(f"/api/v1/namespaces/{namespace}/configmaps", json=cm), 403)
    assert body["message"] == ('configmaps "two" is forbidden: exceeded quota: q, requested: count/configmaps=1, '
                               'used: count/configmaps=1, limited: count/configmaps=1')
    # deletes give the usage back (the controller recomputes it), and the pod fits again
    assert api.delete(pods(namespace, "a"), params={"gracePeriodSeconds": "0"}).status_code == 200
    wait_used(api, namespace, "q", lambda used: used["pods"] == "1")
    assert api.post(pods(namespace), json=pod("c")).status_code == 201
    # a pod that finished no longer counts under pods
    status = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "b"}, "status": {"phase": "Succeeded"}}
    r = api.patch(f"{pods(namespace, 'b')}/status", json=status,
                  headers={"content-type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text
    wait_used(api, namespace, "q", lambda used: used["pods"] == "1")
    assert api.post(pods(namespace), json=pod("d")).status_code == 201


def test_compute_quota_needs_every_container_to_state_it(api: httpx.Client, namespace: str,
                                                         controllers: ControllerProcess) -> None:
    create_quota(api, namespace, "compute", {"requests.cpu": "1", "limits.memory": "1Gi"})
    body = status_of(api.post(pods(namespace), json=pod("bare")), 403)
    assert body["message"] == ('pods "bare" is forbidden: failed quota: compute: must specify limits.memory for: '
                               'main; requests.cpu for: main')
    ok = with_resources("ok", requests={"cpu": "600m"}, limits={"memory": "512Mi"})
    assert api.post(pods(namespace), json=ok).status_code == 201
    more = with_resources("more", requests={"cpu": "600m"}, limits={"memory": "256Mi"})
    body = status_of(api.post(pods(namespace), json=more), 403)
    assert body["message"] == ('pods "more" is forbidden: exceeded quota: compute, requested: requests.cpu=600m, '
                               'used: requests.cpu=600m, limited: requests.cpu=1')
    used = api.get(quotas(namespace, "compute")).json()["status"]["used"]
    assert used == {"limits.memory": "512Mi", "requests.cpu": "600m"}


def test_scoped_quotas(api: httpx.Client, namespace: str, controllers: ControllerProcess) -> None:
    create_quota(api, namespace, "best-effort", {"pods": "1"}, scopes=["BestEffort"])
    create_quota(api, namespace, "critical", {"pods": "1"}, scopeSelector={"matchExpressions": [
        {"scopeName": "PriorityClass", "operator": "In", "values": ["system-cluster-critical"]}]})
    assert api.post(pods(namespace), json=pod("be-1")).status_code == 201
    body = status_of(api.post(pods(namespace), json=pod("be-2")), 403)
    assert "exceeded quota: best-effort, requested: pods=1, used: pods=1, limited: pods=1" in body["message"]
    burstable = with_resources("burstable", requests={"cpu": "10m"})
    assert api.post(pods(namespace), json=burstable).status_code == 201  # not BestEffort: not counted there
    crit = with_resources("crit-1", requests={"cpu": "10m"})
    crit["spec"]["priorityClassName"] = "system-cluster-critical"
    assert api.post(pods(namespace), json=crit).status_code == 201
    crit["metadata"]["name"] = "crit-2"
    body = status_of(api.post(pods(namespace), json=crit), 403)
    assert "exceeded quota: critical, requested: pods=1, used: pods=1, limited: pods=1" in body["message"]


def test_no_over_admission_across_two_apiservers(api: httpx.Client, namespace: str, second_apiserver: ApiServer,
                                                 controllers: ControllerProcess) -> None:
    create_quota(api, namespace, "five", {"pods": "5"})
    with httpx.Client(base_url=second_apiserver.url, timeout=30) as other:
        wait_for(lambda: any(q["metadata"]["name"] == "five" and (q.get("status") or {}).get("used")
                             for q in other.get(quotas(namespace), params={"resourceVersion": "0"}).json()["items"]),
                 30, what="the second apiserver's cache to hold the quota")

    def create(i: int) -> int:
        base = api.base_url if i % 2 else second_apiserver.url
        with httpx.Client(base_url=base, timeout=60) as client:
            return client.post(pods(namespace), json=pod(f"race-{i}")).status_code

    with concurrent.futures.ThreadPoolExecutor(max_workers=12) as pool:
        codes = list(pool.map(create, range(24)))
    assert sorted(codes).count(201) == 5, codes
    assert set(codes) <= {201, 403}, codes
    assert len(api.get(pods(namespace)).json()["items"]) == 5
    assert api.get(quotas(namespace, "five")).json()["status"]["used"]["pods"] == "5"


def test_bad_quota_spec(api: httpx.Client, namespace: str) -> None:
    r = api.post(quotas(namespace), json={"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "bad"},
                                          "spec": {"hard": {"pods": "lots"}}})
    body = status_of(r, 422)
    assert body["message"] == f'ResourceQuota "bad" is invalid: spec.hard[pods]: Invalid value: "lots": {QUANTITY_RE}'
    assert body["details"]["causes"] == [{"reason": "FieldValueInvalid", "message": f'Invalid value: "lots": '
                                          f"{QUANTITY_RE}", "field": "spec.hard[pods]"}]
    r = api.post(quotas(namespace), json={"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "bad"},
                                          "spec": {"hard": {"pods": "-1"}}})
    assert status_of(r, 422)["message"] == ('ResourceQuota "bad" is invalid: spec.hard[pods]: Invalid value: "-1": '
                                            'must be greater than or equal to 0')
    assert api.get(quotas(namespace, "bad")).status_code == 404


def test_quota_table(api: httpx.Client, namespace: str, controllers: ControllerProcess) -> None:
    create_quota(api, namespace, "mixed", {"pods": "3", "requests.cpu": "2", "limits.cpu": "4"})
    table = api.get(quotas(namespace), headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}).json()
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Age", "Request", "Limit"]
    [row] = table["rows"]
    assert row["cells"][0] == "mixed"
    assert row["cells"][2:] == ["pods: 0/3, requests.cpu: 0/2", "limits.cpu: 0/4"]


# -- LimitRange --------------------------------------------------------------------------------------------


def test_limit_range_defaults_and_bounds(api: httpx.Client, namespace: str) -> None:
    lr = {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "limits"},
          "spec": {"limits": [{"type": "Container", "max": {"cpu": "1"}, "min": {"cpu": "50m"},
                               "default": {"cpu": "500m", "memory": "256Mi"}, "defaultRequest": {"cpu": "100m"}},
                              {"type": "Pod", "max": {"memory": "1Gi"}}]}}
    created = api.post(f"/api/v1/namespaces/{namespace}/limitranges", json=lr)
    assert created.status_code == 201, created.text
    # defaulting: the default request of memory comes from its default limit
    assert created.json()["spec"]["limits"][0]["defaultRequest"] == {"cpu": "100m", "memory": "256Mi"}
    wait_for(lambda: api.get(f"/api/v1/namespaces/{namespace}/limitranges", params={"resourceVersion": "0"})
             .json()["items"], 10, what="the LimitRange in the watch cache")
    p = api.post(pods(namespace), json=pod("defaulted")).json()
    assert p["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "100m", "memory": "256Mi"},
                                                       "limits": {"cpu": "500m", "memory": "256Mi"}}
    assert p["metadata"]["annotations"]["kubernetes.io/limit-ranger"] == (
        "LimitRanger plugin set: cpu, memory request for container main; cpu, memory limit for container main")
    assert p["status"]["qosClass"] == "Burstable"
    r = api.post(pods(namespace), json=with_resources("big", limits={"cpu": "2"}))
    assert status_of(r, 403)["message"] == ('pods "big" is forbidden: maximum cpu usage per Container is 1, '
                                            'but limit is 2')
    big = with_resources("bigger", limits={"cpu": "2"}, requests={"cpu": "10m"})  # two bounds broken: both said
    assert status_of(api.post(pods(namespace), json=big), 403)["message"] == (
        'pods "bigger" is forbidden: [minimum cpu usage per Container is 50m, but request is 10m, '
        'maximum cpu usage per Container is 1, but limit is 2]')
    r = api.post(pods(namespace), json=with_resources("small", requests={"cpu": "10m"}))
    assert status_of(r, 403)["message"] == ('pods "small" is forbidden: minimum cpu usage per Container is 50m, '
                                            'but request is 10m')
    two = pod("two")
    two["spec"]["containers"] = [{"name": n, "image": "busybox:1.36", "resources": {"limits": {"memory": "600Mi"}}}
                                 for n in ("a", "b")]
    r = api.post(pods(namespace), json=two)
    assert status_of(r, 403)["message"] == ('pods "two" is forbidden: maximum memory usage per Pod is 1Gi, but '
                                            'limit is 1200Mi')


def test_bad_limit_range(api: httpx.Client, namespace: str) -> None:
    lr = {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "bad"},
          "spec": {"limits": [{"type": "Container", "max": {"cpu": "100m"}, "min": {"cpu": "1"}}]}}
    r = api.post(f"/api/v1/namespaces/{namespace}/limitranges", json=lr)
    message = status_of(r, 422)["message"]
    assert message.startswith('LimitRange "bad" is invalid: [')
    assert 'spec.limits[0].min[cpu]: Invalid value: "1": min value 1 is greater than max value 100m' in message


# -- ReplicationController ---------------------------------------------------------------------------------


def test_replication_controller_keeps_its_pods(api: httpx.Client, namespace: str,
                                               controllers: ControllerProcess) -> None:
    rc = {"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "web"},
          "spec": {"replicas": 3, "template": {"metadata": {"labels": {"app": "web"}},
                                               "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}}}}
    created = api.post(f"/api/v1/namespaces/{namespace}/replicationcontrollers", json=rc)
    assert created.status_code == 201, created.text
    assert created.json()["spec"]["selector"] == {"app": "web"}
    assert created.json()["metadata"]["labels"] == {"app": "web"}

    def owned() -> list[dict[str, Any]]:
        return [p for p in api.get(pods(namespace)).json()["items"] if not p["metadata"].get("deletionTimestamp")]

    wait_for(lambda: len(owned()) == 3, 30, what="3 pods")
    for p in owned():
        [ref] = p["metadata"]["ownerReferences"]
        assert ref["kind"] == "ReplicationController" and ref["apiVersion"] == "v1" and ref["controller"]
        assert p["metadata"]["generateName"] == "web-"
    wait_for(lambda: api.get(f"/api/v1/namespaces/{namespace}/replicationcontrollers/web").json()
             ["status"].get("replicas") == 3, 30, what="status.replicas 3")
    scale = api.get(f"/api/v1/namespaces/{namespace}/replicationcontrollers/web/scale").json()
    assert scale["spec"]["replicas"] == 3 and scale["status"]["selector"] == "app=web"
    r = api.patch(f"/api/v1/namespaces/{namespace}/replicationcontrollers/web/scale", json={"spec": {"replicas": 1}},
                  headers={"content-type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text
    wait_for(lambda: len(owned()) == 1, 30, what="1 pod")
    events = api.get(f"/api/v1/namespaces/{namespace}/events").json()["items"]
    assert any(e["reason"] == "SuccessfulCreate" and e["source"].get("component") == "replication-controller"
               for e in events)


def test_bad_replication_controller(api: httpx.Client, namespace: str) -> None:
    rc = {"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "bad"},
          "spec": {"selector": {"app": "other"}, "template": {"metadata": {"labels": {"app": "web"}},
                   "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}}}}
    r = api.post(f"/api/v1/namespaces/{namespace}/replicationcontrollers", json=rc)
    assert "spec.template.metadata.labels: Invalid value" in status_of(r, 422)["message"]


def test_an_update_that_grows_usage_is_charged(api: httpx.Client, namespace: str,
                                               controllers: ControllerProcess) -> None:
    create_quota(api, namespace, "ports", {"services.nodeports": "1", "services": "5"})
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
           "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}, {"port": 81, "name": "b"}]}}
    svc["spec"]["ports"][0]["name"] = "a"
    assert api.post(f"/api/v1/namespaces/{namespace}/services", json=svc).status_code == 201
    r = api.patch(f"/api/v1/namespaces/{namespace}/services/web", json={"spec": {"type": "NodePort"}},
                  headers={"content-type": "application/merge-patch+json"})
    assert status_of(r, 403)["message"] == ('services "web" is forbidden: exceeded quota: ports, requested: '
                                            'services.nodeports=2, used: services.nodeports=0, '
                                            'limited: services.nodeports=1')
    assert api.get(f"/api/v1/namespaces/{namespace}/services/web").json()["spec"]["type"] == "ClusterIP"
    # an update that adds nothing is not charged (labels)
    r = api.patch(f"/api/v1/namespaces/{namespace}/services/web", json={"metadata": {"labels": {"a": "b"}}},
                  headers={"content-type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text
    assert api.get(quotas(namespace, "ports")).json()["status"]["used"] == {"services": "1",
                                                                           "services.nodeports": "0"}
