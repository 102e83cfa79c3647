"""The official Python client (`kubernetes` on PyPI) against the process-based cluster, configured the way
its users configure it (`config.new_client_from_config` on a kubeconfig naming the plain-HTTP apiserver):
create a Deployment with AppsV1Api, list its pods by label selector with CoreV1Api, watch them until
Running with `kubernetes.watch.Watch`, patch the replicas (strategic merge patch, and the scale
subresource), delete with a propagation policy and see the pods go. Errors arrive as ApiException with
the apiserver's Status. Every wait has a deadline (the watch's server-side timeout and a client-side one)."""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException

from tests.cluster import wait_for
from tests.e2e.local_cluster import CLUSTER_CIDR, LocalCluster
from tests.kubectl import write_kubeconfig
from tests.node_process import HTTPD

APP = "pyweb"
SELECTOR = f"app={APP}"


@pytest.fixture
def k8s(local_cluster: LocalCluster, tmp_path: Path) -> Iterator[client.ApiClient]:
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", local_cluster.url)
    api_client = config.new_client_from_config(config_file=str(kubeconfig))
    try:
        yield api_client
    finally:
        api_client.close()


def web_deployment(replicas: int) -> client.V1Deployment:
    labels = {"app": APP}
    container = client.V1Container(
        name="httpd", image=HTTPD, ports=[client.V1ContainerPort(container_port=80)],
        readiness_probe=client.V1Probe(http_get=client.V1HTTPGetAction(path="/", port=80), period_seconds=1))
    return client.V1Deployment(
        api_version="apps/v1", kind="Deployment",
        metadata=client.V1ObjectMeta(name=APP, labels=labels),
        spec=client.V1DeploymentSpec(
            replicas=replicas, selector=client.V1LabelSelector(match_labels=labels),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels=labels),
                spec=client.V1PodSpec(containers=[container], termination_grace_period_seconds=1))))


def is_running(pod: client.V1Pod) -> bool:
    statuses = pod.status.container_statuses or [] if pod.status else []
    return (pod.status is not None and pod.status.phase == "Running" and pod.metadata.deletion_timestamp is None
            and bool(statuses) and all(cs.state.running is not None for cs in statuses))


def watch_pods(core: client.CoreV1Api, namespace: str, resource_version: str,
               done: Callable[[dict[str, client.V1Pod], list[tuple[str, str]]], bool], timeout: int = 60
               ) -> tuple[dict[str, client.V1Pod], list[tuple[str, str]]]:
    """Watch the app's pods from resource_version until done(pods by name, (type, name) events) holds."""
    pods: dict[str, client.V1Pod] = {}
    seen: list[tuple[str, str]] = []
    w = watch.Watch()
    deadline = time.monotonic() + timeout
    try:
        for event in w.stream(core.list_namespaced_pod, namespace, label_selector=SELECTOR,
                              resource_version=resource_version, timeout_seconds=timeout,
                              _request_timeout=timeout + 10):
            pod: client.V1Pod = event["object"]
            assert isinstance(pod, client.V1Pod), event
            if event["type"] == "BOOKMARK":
                continue
            seen.append((event["type"], pod.metadata.name))
            if event["type"] == "DELETED":
                pods.pop(pod.metadata.name, None)
            else:
                pods[pod.metadata.name] = pod
            if done(pods, seen):
                return pods, seen
            if time.monotonic() > deadline:
                break
    finally:
        w.stop()
    raise AssertionError(f"the watch ended before the condition held; events {seen}, "
                         f"pods {[(n, p.status.phase if p.status else None) for n, p in pods.items()]}")


def test_official_python_client_drives_a_deployment(local_cluster: LocalCluster, namespace: str,
                                                    k8s: client.ApiClient) -> None:
    apps, core = client.AppsV1Api(k8s), client.CoreV1Api(k8s)

    nodes = core.list_node()
    assert {n.metadata.name for n in nodes.items} >= set(local_cluster.node_names)
    for n in nodes.items:
        if n.metadata.name in local_cluster.node_names:
            assert any(c.type == "Ready" and c.status == "True" for c in n.status.conditions)

    # create, with the client's own models; the answer comes back defaulted
    before = core.list_namespaced_pod(namespace, label_selector=SELECTOR)
    assert before.items == []
    created = apps.create_namespaced_deployment(namespace, web_deployment(2))
    assert created.metadata.uid and created.metadata.resource_version
    assert created.spec.strategy.type == "RollingUpdate" and created.spec.revision_history_limit == 10
    assert created.spec.template.spec.containers[0].image_pull_policy == "IfNotPresent"
    with pytest.raises(ApiException) as conflict:
        apps.create_namespaced_deployment(namespace, web_deployment(2))
    assert conflict.value.status == 409 and '"reason":"AlreadyExists"' in conflict.value.body.replace(" ", "")

    # watch the pods (from the empty list's resourceVersion) until both run
    pods, seen = watch_pods(core, namespace, before.metadata.resource_version,
                            lambda ps, _: len(ps) == 2 and all(is_running(p) for p in ps.values()))
    assert {t for t, _ in seen} >= {"ADDED", "MODIFIED"}
    assert all(p.spec.node_name in local_cluster.node_names for p in pods.values())

    # list with a label selector: exactly those two, with cluster IPs; another selector finds nothing
    listed = core.list_namespaced_pod(namespace, label_selector=SELECTOR)
    assert sorted(p.metadata.name for p in listed.items) == sorted(pods)
    for p in listed.items:
        assert ipaddress.ip_address(p.status.pod_ip) in ipaddress.ip_network(CLUSTER_CIDR)
        owner = p.metadata.owner_references[0]
        assert owner.kind == "ReplicaSet" and owner.controller is True
    assert core.list_namespaced_pod(namespace, label_selector=f"app={APP},tier=none").items == []
    assert len(core.list_namespaced_pod(namespace, label_selector=f"app in ({APP}, other)").items) == 2

    # patch the replicas: a strategic merge patch of the Deployment, then the scale subresource
    patched = apps.patch_namespaced_deployment(APP, namespace, {"spec": {"replicas": 3}})
    assert patched.spec.replicas == 3 and patched.metadata.generation == 2
    wait_for(lambda: len([p for p in core.list_namespaced_pod(namespace, label_selector=SELECTOR).items
                          if is_running(p)]) == 3, 60, 0.2, what="3 running pods after the patch")
    wait_for(lambda: apps.read_namespaced_deployment_status(APP, namespace).status.ready_replicas == 3, 30, 0.2,
             what="deployment status: 3 ready")
    scale = apps.patch_namespaced_deployment_scale(APP, namespace, {"spec": {"replicas": 1}})
    assert scale.spec.replicas == 1
    wait_for(lambda: len(core.list_namespaced_pod(namespace, label_selector=SELECTOR).items) == 1, 60, 0.2,
             what="1 pod after scaling down")
    assert apps.read_namespaced_deployment_scale(APP, namespace).spec.replicas == 1

    # delete with foreground propagation: the pods go first, then the ReplicaSet, then the Deployment
    remaining = core.list_namespaced_pod(namespace, label_selector=SELECTOR)
    names = {p.metadata.name for p in remaining.items}
    apps.delete_namespaced_deployment(APP, namespace, propagation_policy="Foreground", grace_period_seconds=1)
    _, seen = watch_pods(core, namespace, remaining.metadata.resource_version,
                         lambda ps, events: {n for t, n in events if t == "DELETED"} >= names)

    def deployment_gone() -> bool:
        try:
            apps.read_namespaced_deployment(APP, namespace)
            return False
        except ApiException as e:
            assert e.status == 404, e
            return True

    wait_for(deployment_gone, 30, 0.2, what="the Deployment gone")
    assert core.list_namespaced_pod(namespace, label_selector=SELECTOR).items == []
    assert apps.list_namespaced_replica_set(namespace).items == []
    with pytest.raises(ApiException) as missing:
        apps.read_namespaced_deployment(APP, namespace)
    assert missing.value.status == 404 and "NotFound" in missing.value.body


def test_delete_answers_like_upstream(namespace: str, k8s: client.ApiClient) -> None:
    """Gone at once: a Success Status naming it (a pod: the pod itself); held by a finalizer: the object."""
    apps, core = client.AppsV1Api(k8s), client.CoreV1Api(k8s)
    created = apps.create_namespaced_deployment(namespace, web_deployment(0))
    # this client types a Deployment's DELETE answer as `object` (a Status or the Deployment): a plain dict
    answer = apps.delete_namespaced_deployment(APP, namespace, propagation_policy="Background")
    assert isinstance(answer, dict), type(answer)
    assert (answer["kind"], answer["apiVersion"], answer["status"]) == ("Status", "v1", "Success"), answer
    assert answer["details"] == {"name": APP, "group": "apps", "kind": "deployments", "uid": created.metadata.uid}

    held = web_deployment(0)
    held.metadata.finalizers = ["example.com/hold"]
    apps.create_namespaced_deployment(namespace, held)
    answer = apps.delete_namespaced_deployment(APP, namespace)
    assert isinstance(answer, dict) and answer["kind"] == "Deployment", answer
    assert answer["metadata"]["deletionTimestamp"] and answer["metadata"]["finalizers"] == ["example.com/hold"]
    apps.patch_namespaced_deployment(APP, namespace, {"metadata": {"finalizers": None}})
    with pytest.raises(ApiException) as gone:
        apps.read_namespaced_deployment(APP, namespace)
    assert gone.value.status == 404

    # pods answer with the pod (upstream's ReturnDeletedObject); one no scheduler takes goes at once
    core.create_namespaced_pod(namespace, client.V1Pod(
        metadata=client.V1ObjectMeta(name="unscheduled"),
        spec=client.V1PodSpec(scheduler_name="nobody", containers=[client.V1Container(name="c", image=HTTPD)])))
    answer = core.delete_namespaced_pod("unscheduled", namespace)
    assert isinstance(answer, client.V1Pod) and answer.metadata.name == "unscheduled", type(answer)
    with pytest.raises(ApiException) as gone:
        core.read_namespaced_pod("unscheduled", namespace)
    assert gone.value.status == 404


def test_resource_discovery_through_the_client(k8s: client.ApiClient) -> None:
    core = client.CoreV1Api(k8s).get_api_resources()
    assert "pods" in {r.name for r in core.resources}
    apps = client.AppsV1Api(k8s).get_api_resources()
    assert "deployments/scale" in {r.name for r in apps.resources}
    # /api/, /apis/ and /apis/apps/: the trailing slash the client sends, answered directly
    assert client.CoreApi(k8s).get_api_versions().versions == ["v1"]
    assert "apps" in {g.name for g in client.ApisApi(k8s).get_api_versions().groups}
    assert client.AppsApi(k8s).get_api_group().preferred_version.group_version == "apps/v1"
