"""machinery.client.ApiClient against a real apiserver process on a real etcd: typed CRUD, patches,
subresources, errors, optimistic concurrency, lists, watches and an unreachable server."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from apiserver.storage.etcd import EtcdStorage
from machinery.api.apps_v1 import Deployment, ReplicaSet
from machinery.api.autoscaling_v1 import Scale, ScaleSpec
from machinery.api.coordination_v1 import Lease, LeaseSpec
from machinery.api.core_v1 import (
    Event,
    EventSource,
    Namespace,
    Node,
    NodeCondition,
    NodeStatus,
    ObjectReference,
    Pod,
    PodCondition,
    PodStatus,
)
from machinery.api.meta import ObjectMeta, Status
from machinery.api.resources import resource_for_model
from machinery.client import (
    ApiClient,
    ApiError,
    ApiUnavailable,
    WatchEvent,
    default_user_agent,
    format_selector,
    is_already_exists,
    is_conflict,
    is_gone,
    is_not_found,
    retry_on_conflict,
)
from machinery.kubeconfig import ClientConfig, write_kubeconfig
from tests import manifests
from tests.cluster import ApiServer, Etcd, free_port

TIMEOUT = 10.0


# -- fixtures and helpers -----------------------------------------------------------------------


@pytest.fixture
async def client(apiserver: ApiServer) -> AsyncIterator[ApiClient]:
    c = ApiClient(ClientConfig(server=apiserver.url), user_agent=default_user_agent("client-integration-test"))
    try:
        yield c
    finally:
        await c.close()


@pytest.fixture
def compacting_apiserver(workdir: Path, etcd: Etcd) -> Iterator[ApiServer]:
    """An apiserver of this test's own whose watch cache holds only 16 events."""
    server = ApiServer(workdir, etcd, "--etcd-compaction-interval", "0", "--watch-cache-window", "16")
    server.start()
    try:
        yield server
    finally:
        server.stop()


def new_pod(name: str, namespace: str, labels: dict[str, str] | None = None, **spec: Any) -> Pod:
    return Pod.model_validate(manifests.pod(name, namespace, labels, **spec))


def new_deployment(name: str, namespace: str, replicas: int = 2) -> Deployment:
    manifest = manifests.deployment(name, replicas)
    manifest["metadata"]["namespace"] = namespace
    return Deployment.model_validate(manifest)


async def next_event(events: AsyncIterator[WatchEvent[Any]], timeout: float = TIMEOUT,
                     skip_bookmarks: bool = True) -> WatchEvent[Any]:
    """The next watch event within `timeout` seconds (BOOKMARKs skipped unless asked for)."""
    async def take() -> WatchEvent[Any]:
        while True:
            event = await anext(events)
            if not (skip_bookmarks and event.type == "BOOKMARK"):
                return event

    return await asyncio.wait_for(take(), timeout)


async def compact_etcd(etcd: Etcd) -> None:
    storage = EtcdStorage([etcd.endpoint])
    try:
        await storage.compact(await storage.current_revision())
    finally:
        await storage.close()


# -- typed CRUD ---------------------------------------------------------------------------------


async def test_create_and_get_return_typed_objects_with_system_metadata(client: ApiClient, namespace: str) -> None:
    created = await client.create(new_pod("p1", namespace, {"app": "web"}))
    assert isinstance(created, Pod)
    meta = created.metadata
    assert meta.name == "p1" and meta.namespace == namespace
    assert meta.uid and meta.resource_version and meta.creation_timestamp
    assert created.spec is not None and created.spec.containers[0].image == "busybox:1.36"
    assert created.spec.restart_policy == "Always"  # defaulted by the server
    assert created.status is not None and created.status.phase == "Pending"

    fetched = await client.get(Pod, "p1", namespace)
    assert isinstance(fetched, Pod)
    assert fetched == created


async def test_create_takes_the_namespace_from_the_argument(client: ApiClient, namespace: str) -> None:
    body = Pod.model_validate(manifests.pod("no-ns"))
    with pytest.raises(ValueError, match="namespaced"):
        await client.create(body)
    created = await client.create(body, namespace=namespace)
    assert created.metadata.namespace == namespace


async def test_generate_name_and_dry_run(client: ApiClient, namespace: str) -> None:
    body = new_pod("ignored", namespace)
    body.metadata.name = None
    body.metadata.generate_name = "gen-"
    created = await client.create(body)
    assert created.metadata.name and created.metadata.name.startswith("gen-") and len(created.metadata.name) == 9

    dry = await client.create(new_pod("dry", namespace), dry_run=True)
    assert dry.metadata.name == "dry"
    with pytest.raises(ApiError) as err:
        await client.get(Pod, "dry", namespace)
    assert err.value.is_not_found


async def test_cluster_scoped_node_crud(client: ApiClient) -> None:
    name = f"node-{uuid.uuid4().hex[:8]}"
    node = Node.model_validate(manifests.node(name))
    created = await client.create(node, namespace="ignored-for-cluster-scoped")
    try:
        assert created.metadata.namespace is None and created.metadata.uid
        created.metadata.labels = {**(created.metadata.labels or {}), "zone": "a"}
        updated = await client.update(created)
        assert updated.metadata.labels is not None and updated.metadata.labels["zone"] == "a"
        assert int(updated.metadata.resource_version or 0) > int(created.metadata.resource_version or 0)
        listed = await client.list(Node, field_selector={"metadata.name": name})
        assert [n.metadata.name for n in listed.items] == [name]
    finally:
        await client.delete(Node, name)
    with pytest.raises(ApiError) as err:
        await client.get(Node, name)
    assert err.value.is_not_found


def _objects_of_every_kind(namespace: str, suffix: str) -> list[Any]:
    """One valid object of every kind the apiserver serves, as the components will write them."""
    rs = manifests.deployment(f"rs-{suffix}")
    rs.update(kind="ReplicaSet")
    rs["metadata"]["namespace"] = namespace
    rs["spec"].pop("strategy", None)
    return [
        Namespace(metadata=ObjectMeta(name=f"ns-{suffix}")),
        Node.model_validate(manifests.node(f"node-{suffix}")),
        new_pod(f"pod-{suffix}", namespace),
        Event(metadata=ObjectMeta(name=f"ev-{suffix}", namespace=namespace),
              involved_object=ObjectReference(kind="Pod", namespace=namespace, name=f"pod-{suffix}", api_version="v1"),
              reason="Scheduled", message="Successfully assigned", type="Normal", count=1,
              source=EventSource(component="default-scheduler"),
              first_timestamp="2026-11-21T00:00:00Z", last_timestamp="2026-11-21T00:00:00Z"),
        new_deployment(f"deploy-{suffix}", namespace),
        ReplicaSet.model_validate(rs),
        Lease(metadata=ObjectMeta(name=f"lease-{suffix}", namespace=namespace),
              spec=LeaseSpec(holder_identity="node-1", lease_duration_seconds=40,
                             renew_time="2026-11-21T00:00:00.000000Z")),
    ]


async def test_every_kind_round_trips_through_its_model(client: ApiClient, namespace: str) -> None:
    """The strict models (unknown fields refused) accept everything the apiserver answers for
    every kind: create, get, list, update and watch."""
    suffix = uuid.uuid4().hex[:6]
    created_names: list[tuple[type[Any], str, str | None]] = []
    try:
        for obj in _objects_of_every_kind(namespace, suffix):
            model = type(obj)
            info = resource_for_model(model)
            ns = namespace if info.namespaced else None
            start = (await client.list(model, ns)).resource_version
            async with contextlib.aclosing(client.watch(model, ns, resource_version=start)) as events:
                created = await client.create(obj)
                assert isinstance(created, model)
                name = created.metadata.name
                created_names.append((model, name, ns))
                assert created.metadata.uid and created.metadata.resource_version
                assert await client.get(model, name, ns) == created
                assert name in [o.metadata.name for o in (await client.list(model, ns)).items]
                created.metadata.annotations = {"touched": "yes"}
                updated = await client.update(created)
                assert updated.metadata.annotations == {"touched": "yes"}
                seen = [await next_event(events) for _ in range(2)]
                assert [(e.type, e.object.metadata.name) for e in seen] == [("ADDED", name), ("MODIFIED", name)]
                assert all(isinstance(e.object, model) for e in seen)
                assert seen[1].object == updated
    finally:
        for model, name, ns in reversed(created_names):
            with contextlib.suppress(ApiError):
                await client.delete(model, name, ns)


async def test_update_bumps_generation_only_on_spec_changes(client: ApiClient, namespace: str) -> None:
    deploy = await client.create(new_deployment("web", namespace, replicas=2))
    assert deploy.metadata.generation == 1
    assert deploy.spec is not None and deploy.spec.strategy is not None
    assert deploy.spec.strategy.type == "RollingUpdate"  # defaulted

    deploy.metadata.labels = {**(deploy.metadata.labels or {}), "tier": "front"}
    relabelled = await client.update(deploy)
    assert relabelled.metadata.generation == 1
    assert relabelled.metadata.labels is not None and relabelled.metadata.labels["tier"] == "front"

    assert relabelled.spec is not None
    relabelled.spec.replicas = 4
    rescaled = await client.update(relabelled, field_manager="client-test")
    assert rescaled.metadata.generation == 2
    assert rescaled.spec is not None and rescaled.spec.replicas == 4
    assert int(rescaled.metadata.resource_version or 0) > int(relabelled.metadata.resource_version or 0)


async def test_update_status_writes_only_the_status(client: ApiClient, namespace: str) -> None:
    pod = await client.create(new_pod("st", namespace))
    changed = pod.model_copy(deep=True)
    assert changed.spec is not None
    changed.spec.active_deadline_seconds = 60  # ignored by the status subresource
    changed.status = PodStatus(phase="Running", pod_ip="10.244.1.7",
                               conditions=[PodCondition(type="Ready", status="True")])
    written = await client.update_status(changed)
    assert written.status is not None and written.status.phase == "Running"
    assert written.status.pod_ip == "10.244.1.7"
    assert written.spec is not None and written.spec.active_deadline_seconds is None
    assert (await client.get(Pod, "st", namespace)) == written

    deploy = await client.create(new_deployment("d", namespace))
    deploy_status = deploy.model_copy(deep=True)
    assert deploy_status.spec is not None
    deploy_status.spec.replicas = 9  # ignored
    deploy_status.status = Deployment.model_validate(
        {"status": {"replicas": 2, "readyReplicas": 1, "observedGeneration": 1}}).status
    after = await client.update_status(deploy_status)
    assert after.status is not None and after.status.ready_replicas == 1
    assert after.spec is not None and after.spec.replicas == 2
    assert after.metadata.generation == deploy.metadata.generation


async def test_node_status_heartbeat_by_strategic_patch(client: ApiClient) -> None:
    """The kubelet's heartbeat: conditions merge by type, so one condition is updated in place."""
    name = f"node-{uuid.uuid4().hex[:8]}"
    await client.create(Node.model_validate(manifests.node(name)))
    try:
        node = await client.get(Node, name)
        node.status = NodeStatus(conditions=[
            NodeCondition(type="Ready", status="False", reason="KubeletNotReady"),
            NodeCondition(type="MemoryPressure", status="False"),
        ], capacity={"cpu": "2", "memory": "8Gi", "pods": 110})
        written = await client.update_status(node)
        assert written.status is not None and written.status.capacity == {"cpu": "2", "memory": "8Gi", "pods": 110}
        patched = await client.patch(Node, name, {"status": {"conditions": [
            {"type": "Ready", "status": "True", "reason": "KubeletReady"}]}}, "strategic", subresource="status")
        assert patched.status is not None
        conditions = {c.type: (c.status, c.reason) for c in patched.status.conditions or []}
        assert conditions == {"Ready": ("True", "KubeletReady"), "MemoryPressure": ("False", None)}
        assert patched.spec == written.spec
    finally:
        await client.delete(Node, name)


# -- patches ------------------------------------------------------------------------------------


async def test_merge_patch(client: ApiClient, namespace: str) -> None:
    await client.create(new_pod("m", namespace, {"app": "web", "drop": "me"}))
    patched = await client.patch(Pod, "m", {"metadata": {"labels": {"step": "2", "drop": None}}}, "merge", namespace)
    assert patched.metadata.labels == {"app": "web", "step": "2"}
    # a merge patch replaces lists wholesale
    replaced = await client.patch(
        Pod, "m", {"spec": {"containers": [{"name": "main", "image": "busybox:1.37"}]}}, "merge", namespace)
    assert replaced.spec is not None and replaced.spec.containers[0].image == "busybox:1.37"


async def test_strategic_merge_patch_merges_containers_by_name(client: ApiClient, namespace: str) -> None:
    body = new_pod("s", namespace)
    await client.create(body)
    patched = await client.patch(
        Pod, "s", {"spec": {"containers": [{"name": "main", "image": "busybox:1.37"}]},
                   "metadata": {"annotations": {"a": "1"}}}, "strategic", namespace)
    assert patched.spec is not None and len(patched.spec.containers) == 1
    main = patched.spec.containers[0]
    assert main.image == "busybox:1.37"
    assert main.termination_message_path == "/dev/termination-log"  # kept: merged, not replaced
    assert patched.metadata.annotations == {"a": "1"}


async def test_json_patch(client: ApiClient, namespace: str) -> None:
    await client.create(new_pod("j", namespace, {"app": "web"}))
    patched = await client.patch(Pod, "j", [
        {"op": "test", "path": "/metadata/labels/app", "value": "web"},
        {"op": "add", "path": "/metadata/labels/tier", "value": "db"},
        {"op": "replace", "path": "/spec/containers/0/image", "value": "busybox:1.37"},
    ], "json", namespace)
    assert patched.metadata.labels == {"app": "web", "tier": "db"}
    assert patched.spec is not None and patched.spec.containers[0].image == "busybox:1.37"
    with pytest.raises(ApiError) as err:
        await client.patch(Pod, "j", [{"op": "test", "path": "/metadata/labels/app", "value": "other"}],
                           "json", namespace)
    assert err.value.code in (409, 422)
    with pytest.raises(ValueError):
        await client.patch(Pod, "j", {"not": "a list"}, "json", namespace)


async def test_server_side_apply_creates_then_updates(client: ApiClient, namespace: str) -> None:
    manifest = manifests.deployment("applied", replicas=1)
    manifest["metadata"]["namespace"] = namespace
    with pytest.raises(ValueError, match="field_manager"):
        await client.patch(Deployment, "applied", manifest, "apply", namespace)
    created = await client.patch(Deployment, "applied", manifest, "apply", namespace, field_manager="test-apply")
    assert created.metadata.uid and created.spec is not None and created.spec.replicas == 1
    manifest["spec"]["replicas"] = 3
    updated = await client.patch(Deployment, "applied", manifest, "apply", namespace,
                                 field_manager="test-apply", force=True)
    assert updated.metadata.uid == created.metadata.uid
    assert updated.spec is not None and updated.spec.replicas == 3
    assert updated.metadata.generation == 2


async def test_patch_status_subresource(client: ApiClient, namespace: str) -> None:
    await client.create(new_pod("ps", namespace))
    patched = await client.patch(Pod, "ps", {"status": {"phase": "Running"}, "spec": {"activeDeadlineSeconds": 5}},
                                 "merge", namespace, subresource="status")
    assert patched.status is not None and patched.status.phase == "Running"
    assert patched.spec is not None and patched.spec.active_deadline_seconds is None
    with pytest.raises(ValueError):
        await client.patch(Pod, "ps", {}, "merge", namespace, subresource="binding")  # type: ignore[arg-type]


# -- delete ---------------------------------------------------------------------------------------


async def test_delete_unscheduled_pod_is_immediate(client: ApiClient, namespace: str) -> None:
    await client.create(new_pod("gone", namespace))
    result = await client.delete(Pod, "gone", namespace)
    assert isinstance(result, Pod | Status)
    with pytest.raises(ApiError) as err:
        await client.get(Pod, "gone", namespace)
    assert is_not_found(err.value)
    with pytest.raises(ApiError) as again:
        await client.delete(Pod, "gone", namespace)
    assert again.value.is_not_found


async def test_delete_bound_pod_is_graceful_then_forced(client: ApiClient, namespace: str) -> None:
    await client.create(new_pod("graceful", namespace, nodeName="node-1", terminationGracePeriodSeconds=30))
    pending = await client.delete(Pod, "graceful", namespace)
    assert isinstance(pending, Pod)
    assert pending.metadata.deletion_timestamp and pending.metadata.deletion_grace_period_seconds == 30
    assert (await client.get(Pod, "graceful", namespace)).metadata.deletion_timestamp
    await client.delete(Pod, "graceful", namespace, grace_period_seconds=0)
    with pytest.raises(ApiError) as err:
        await client.get(Pod, "graceful", namespace)
    assert err.value.is_not_found


async def test_delete_preconditions(client: ApiClient, namespace: str) -> None:
    pod = await client.create(new_pod("pre", namespace))
    with pytest.raises(ApiError) as err:
        await client.delete(Pod, "pre", namespace, preconditions={"uid": "not-the-uid"})
    assert err.value.is_conflict
    with pytest.raises(ApiError) as stale:
        await client.delete(Pod, "pre", namespace, preconditions={"resourceVersion": "1"})
    assert stale.value.is_conflict
    current = {"uid": pod.metadata.uid or "", "resourceVersion": pod.metadata.resource_version or ""}
    await client.delete(Pod, "pre", namespace, preconditions=current)
    with pytest.raises(ApiError):
        await client.get(Pod, "pre", namespace)


async def test_delete_deployment_with_propagation_policy(client: ApiClient, namespace: str) -> None:
    await client.create(new_deployment("del", namespace))
    result = await client.delete(Deployment, "del", namespace, propagation_policy="Background")
    assert isinstance(result, Deployment | Status)
    with pytest.raises(ApiError) as err:
        await client.get(Deployment, "del", namespace)
    assert err.value.is_not_found


async def test_raw_twins_and_delete_collection(client: ApiClient, namespace: str) -> None:
    for i in range(3):
        await client.create_raw(Pod, manifests.pod(f"raw-{i}", labels={"set": "a" if i < 2 else "b"}), namespace)
    got = await client.get_raw(Pod, "raw-0", namespace)
    assert got["kind"] == "Pod" and got["metadata"]["name"] == "raw-0"
    await client.delete_collection_raw(Pod, namespace, label_selector={"set": "a"})
    left = await client.list_raw(Pod, namespace)
    assert [item["metadata"]["name"] for item in left["items"]] == ["raw-2"]


# -- subresources ---------------------------------------------------------------------------------


async def test_bind_sets_the_node_once(client: ApiClient, namespace: str) -> None:
    pod = await client.create(new_pod("b", namespace))
    await client.bind("b", namespace, "node-1", pod_uid=pod.metadata.uid)
    bound = await client.get(Pod, "b", namespace)
    assert bound.spec is not None and bound.spec.node_name == "node-1"
    assert bound.status is not None
    assert any(c.type == "PodScheduled" and c.status == "True" for c in bound.status.conditions or [])
    with pytest.raises(ApiError) as err:
        await client.bind("b", namespace, "node-2")
    assert err.value.is_conflict and "already assigned" in err.value.message
    with pytest.raises(ApiError) as missing:
        await client.bind("nobody", namespace, "node-1")
    assert missing.value.is_not_found


async def test_bind_with_the_uid_of_a_deleted_pod_is_refused(client: ApiClient, namespace: str) -> None:
    old = await client.create(new_pod("recreated", namespace))
    await client.delete(Pod, "recreated", namespace)
    await client.create(new_pod("recreated", namespace))
    with pytest.raises(ApiError) as err:
        await client.bind("recreated", namespace, "node-1", pod_uid=old.metadata.uid)
    assert err.value.is_conflict


async def test_get_and_update_scale(client: ApiClient, namespace: str) -> None:
    await client.create(new_deployment("sc", namespace, replicas=2))
    scale = await client.get_scale(Deployment, "sc", namespace)
    assert isinstance(scale, Scale)
    assert scale.metadata.name == "sc" and scale.metadata.namespace == namespace
    assert scale.spec is not None and scale.spec.replicas == 2
    assert scale.status is not None and scale.status.selector == "app=sc"

    scale.spec = ScaleSpec(replicas=5)
    updated = await client.update_scale(Deployment, scale)
    assert updated.spec is not None and updated.spec.replicas == 5
    deploy = await client.get(Deployment, "sc", namespace)
    assert deploy.spec is not None and deploy.spec.replicas == 5
    assert deploy.metadata.generation == 2

    # the old Scale's resourceVersion is stale now
    scale.spec = ScaleSpec(replicas=1)
    with pytest.raises(ApiError) as err:
        await client.update_scale(Deployment, scale)
    assert err.value.is_conflict
    with pytest.raises(ApiError) as invalid:
        await client.update_scale(Deployment, Scale(metadata=ObjectMeta(name="sc", namespace=namespace),
                                                    spec=ScaleSpec(replicas=-1)))
    assert invalid.value.is_invalid


# -- errors ---------------------------------------------------------------------------------------


async def test_not_found(client: ApiClient, namespace: str) -> None:
    with pytest.raises(ApiError) as err:
        await client.get(Pod, "missing", namespace)
    e = err.value
    assert e.is_not_found and is_not_found(e) and e.code == 404
    assert not e.is_conflict and not is_conflict(e)
    assert e.status.kind == "Status" and e.status.status == "Failure"
    assert e.status.details is not None and e.status.details.name == "missing"
    assert 'pods "missing" not found' in str(e)
    assert not is_not_found(ValueError("x"))


async def test_stale_update_is_a_conflict(client: ApiClient, namespace: str) -> None:
    first = await client.create(new_pod("c", namespace))
    stale = first.model_copy(deep=True)
    first.metadata.labels = {"app": "one"}
    await client.update(first)
    stale.metadata.labels = {"app": "two"}
    with pytest.raises(ApiError) as err:
        await client.update(stale)
    assert err.value.is_conflict and is_conflict(err.value) and err.value.code == 409
    assert not err.value.is_already_exists
    current = await client.get(Pod, "c", namespace)
    assert current.metadata.labels == {"app": "one"}


async def test_create_existing_is_already_exists(client: ApiClient, namespace: str) -> None:
    await client.create(new_pod("dup", namespace))
    with pytest.raises(ApiError) as err:
        await client.create(new_pod("dup", namespace))
    assert err.value.is_already_exists and is_already_exists(err.value) and err.value.code == 409
    assert not err.value.is_conflict  # AlreadyExists is not a stale resourceVersion


async def test_invalid_is_422_with_causes(client: ApiClient, namespace: str) -> None:
    bad = new_deployment("bad", namespace)
    assert bad.spec is not None
    bad.spec.replicas = -1
    with pytest.raises(ApiError) as err:
        await client.create(bad)
    e = err.value
    assert e.code == 422 and e.is_invalid and e.reason == "Invalid"
    assert e.status.details is not None and e.status.details.causes
    assert [c.field for c in e.status.details.causes] == ["spec.replicas"]
    assert "spec.replicas" in e.message

    no_containers = new_pod("empty", namespace)
    assert no_containers.spec is not None
    no_containers.spec.containers = []
    with pytest.raises(ApiError) as err2:
        await client.create(no_containers)
    assert err2.value.is_invalid
    assert err2.value.status.details is not None
    assert any(c.field == "spec.containers" for c in err2.value.status.details.causes or [])


async def test_retry_on_conflict_lands_every_concurrent_increment(client: ApiClient, namespace: str) -> None:
    await client.create(new_pod("counter", namespace))
    attempts: list[int] = []

    async def increment() -> None:
        async def once() -> Pod:
            attempts.append(1)
            pod = await client.get(Pod, "counter", namespace)
            annotations = dict(pod.metadata.annotations or {})
            annotations["count"] = str(int(annotations.get("count", "0")) + 1)
            pod.metadata.annotations = annotations
            return await client.update(pod)

        await retry_on_conflict(once)

    await asyncio.wait_for(asyncio.gather(*(increment() for _ in range(20))), 60)
    final = await client.get(Pod, "counter", namespace)
    assert final.metadata.annotations == {"count": "20"}
    assert len(attempts) > 20  # there were conflicts, and they were retried


async def test_retry_on_conflict_gives_up_and_passes_other_errors(client: ApiClient, namespace: str) -> None:
    calls: list[int] = []

    async def always_conflicts() -> None:
        calls.append(1)
        stale = await client.create(new_pod(f"r{len(calls)}", namespace))
        fresh = stale.model_copy(deep=True)
        fresh.metadata.labels = {"moved": "on"}
        await client.update(fresh)  # moves the resourceVersion on
        stale.metadata.labels = {"too": "late"}
        await client.update(stale)  # stale now: 409 Conflict

    with pytest.raises(ApiError) as err:
        await retry_on_conflict(always_conflicts, attempts=3)
    assert err.value.is_conflict and len(calls) == 3

    async def not_found() -> None:
        calls.append(1)
        await client.get(Pod, "nope", namespace)

    calls.clear()
    with pytest.raises(ApiError) as err2:
        await retry_on_conflict(not_found)
    assert err2.value.is_not_found and len(calls) == 1


# -- lists ----------------------------------------------------------------------------------------


async def test_list_with_label_and_field_selectors(client: ApiClient, namespace: str) -> None:
    await client.create(new_pod("web-1", namespace, {"app": "web", "tier": "front"}))
    await client.create(new_pod("web-2", namespace, {"app": "web", "tier": "back"}))
    await client.create(new_pod("db-1", namespace, {"app": "db"}, nodeName="node-1"))

    def names(result: Any) -> list[str]:
        return sorted(p.metadata.name for p in result.items)

    assert names(await client.list(Pod, namespace, label_selector={"app": "web"})) == ["web-1", "web-2"]
    assert names(await client.list(Pod, namespace, label_selector="app=web,tier!=front")) == ["web-2"]
    assert names(await client.list(Pod, namespace, label_selector="app in (db, cache)")) == ["db-1"]
    assert names(await client.list(Pod, namespace, field_selector={"spec.nodeName": "node-1"})) == ["db-1"]
    assert names(await client.list(Pod, namespace, field_selector="spec.nodeName=")) == ["web-1", "web-2"]
    assert names(await client.list(Pod, namespace, field_selector="metadata.name=web-2")) == ["web-2"]
    assert names(await client.list(Pod, namespace, label_selector={"app": "web"},
                                   field_selector="metadata.name!=web-1")) == ["web-2"]
    everywhere = await client.list(Pod, label_selector={"app": "db"}, field_selector={"metadata.namespace": namespace})
    assert names(everywhere) == ["db-1"]
    result = await client.list(Pod, namespace)
    assert all(isinstance(p, Pod) for p in result.items)
    assert int(result.resource_version) >= max(int(p.metadata.resource_version or 0) for p in result.items)
    with pytest.raises(ApiError) as err:
        await client.list(Pod, namespace, field_selector="spec.unknownField=x")
    assert err.value.is_bad_request


async def test_list_pages_with_limit_and_continue(client: ApiClient, namespace: str) -> None:
    names = [f"page-{i:02d}" for i in range(7)]
    for name in names:
        await client.create(new_pod(name, namespace))
    seen: list[str] = []
    versions: set[str] = set()
    token = ""
    pages = 0
    while True:
        page = await client.list(Pod, namespace, limit=3, continue_=token or None)
        pages += 1
        assert len(page.items) <= 3
        seen.extend(p.metadata.name or "" for p in page.items)
        versions.add(page.resource_version)
        # a write between pages does not show up: every page reads the first page's revision
        if pages == 1:
            await client.create(new_pod("page-99-late", namespace))
        token = page.continue_
        if not token:
            break
    assert pages == 3
    assert seen == names
    assert len(versions) == 1


async def test_expired_continue_token_is_gone(compacting_apiserver: ApiServer, etcd: Etcd) -> None:
    async with ApiClient(ClientConfig(server=compacting_apiserver.url)) as c:
        ns = f"t-{uuid.uuid4().hex[:10]}"
        await c.create(Namespace(metadata=ObjectMeta(name=ns)))
        for i in range(4):
            await c.create(new_pod(f"x{i}", ns))
        first = await c.list(Pod, ns, limit=2)
        assert first.continue_
        await c.create(new_pod("after", ns))
        await compact_etcd(etcd)
        with pytest.raises(ApiError) as err:
            await c.list(Pod, ns, limit=2, continue_=first.continue_)
        assert err.value.is_gone and err.value.is_expired and is_gone(err.value)
        await c.delete(Namespace, ns)


# -- watch ----------------------------------------------------------------------------------------


async def test_watch_yields_typed_events_in_order(client: ApiClient, namespace: str) -> None:
    start = (await client.list(Pod, namespace)).resource_version
    async with contextlib.aclosing(client.watch(Pod, namespace, resource_version=start)) as events:
        created = await client.create(new_pod("w", namespace))
        patched = await client.patch(Pod, "w", {"metadata": {"labels": {"step": "2"}}}, "merge", namespace)
        await client.delete(Pod, "w", namespace)
        got = [await next_event(events) for _ in range(3)]
    assert [e.type for e in got] == ["ADDED", "MODIFIED", "DELETED"]
    assert all(isinstance(e.object, Pod) for e in got)
    assert all(e.object.metadata.name == "w" for e in got)  # type: ignore[union-attr]
    assert got[0].resource_version == created.metadata.resource_version
    assert got[1].resource_version == patched.metadata.resource_version
    assert got[1].object.metadata.labels == {"app": "test", "step": "2"}  # type: ignore[union-attr]
    rvs = [int(e.resource_version or 0) for e in got]
    assert rvs == sorted(rvs) and len(set(rvs)) == 3


async def test_watch_from_nothing_replays_current_state(client: ApiClient, namespace: str) -> None:
    await client.create(new_pod("old-1", namespace))
    await client.create(new_pod("old-2", namespace))
    async with contextlib.aclosing(client.watch(Pod, namespace)) as events:
        replayed = [await next_event(events) for _ in range(2)]
        assert sorted((e.type, e.object.metadata.name) for e in replayed) == [  # type: ignore[union-attr]
            ("ADDED", "old-1"), ("ADDED", "old-2")]
        await client.create(new_pod("new", namespace))
        event = await next_event(events)
        assert (event.type, event.object.metadata.name) == ("ADDED", "new")  # type: ignore[union-attr]


async def test_watch_with_selectors_and_bookmarks(client: ApiClient, namespace: str) -> None:
    start = (await client.list(Pod, namespace)).resource_version
    watch = client.watch(Pod, namespace, resource_version=start, label_selector={"app": "b"},
                         field_selector={"spec.nodeName": ""})
    async with contextlib.aclosing(watch) as events:
        await client.create(new_pod("a", namespace, {"app": "a"}))
        await client.create(new_pod("b", namespace, {"app": "b"}))
        await client.create(new_pod("b-bound", namespace, {"app": "b"}, nodeName="node-1"))
        event = await next_event(events)
        assert (event.type, event.object.metadata.name) == ("ADDED", "b")  # type: ignore[union-attr]
        await client.bind("b", namespace, "node-1")  # leaves the field selector: DELETED for this watcher
        event = await next_event(events)
        assert (event.type, event.object.metadata.name) == ("DELETED", "b")  # type: ignore[union-attr]
        bookmark = await next_event(events, skip_bookmarks=False)  # the session apiserver bookmarks every 1s
        assert bookmark.type == "BOOKMARK" and isinstance(bookmark.object, Pod)
        assert int(bookmark.resource_version or 0) >= int(event.resource_version or 0)


async def test_watch_timeout_seconds_ends_the_stream(client: ApiClient, namespace: str) -> None:
    start = (await client.list(Pod, namespace)).resource_version
    received: list[WatchEvent[Pod]] = []

    async def drain() -> None:
        async for event in client.watch(Pod, namespace, resource_version=start, timeout_seconds=1,
                                        allow_bookmarks=False):
            received.append(event)

    await asyncio.wait_for(drain(), TIMEOUT)
    assert received == []


async def test_watch_from_a_compacted_revision_is_error_410(compacting_apiserver: ApiServer, etcd: Etcd) -> None:
    async with ApiClient(ClientConfig(server=compacting_apiserver.url)) as c:
        ns = f"t-{uuid.uuid4().hex[:10]}"
        await c.create(Namespace(metadata=ObjectMeta(name=ns)))
        old_rv = (await c.create(new_pod("c00", ns))).metadata.resource_version
        for i in range(1, 24):  # more than the 16 events the watch cache keeps
            await c.create(new_pod(f"c{i:02d}", ns))
        await compact_etcd(etcd)
        events = [e async for e in _bounded(c.watch(Pod, ns, resource_version=old_rv))]
        assert len(events) == 1
        error = events[0]
        assert error.type == "ERROR" and isinstance(error.object, Status)
        assert error.object.code == 410 and error.object.reason == "Expired"

        # recent enough for the window: served, no error
        recent = (await c.list(Pod, ns)).resource_version
        async with contextlib.aclosing(c.watch(Pod, ns, resource_version=recent)) as stream:
            await c.create(new_pod("fresh", ns))
            event = await next_event(stream)
            assert (event.type, event.object.metadata.name) == ("ADDED", "fresh")  # type: ignore[union-attr]
        await c.delete(Namespace, ns)


async def _bounded(events: AsyncIterator[WatchEvent[Any]], timeout: float = TIMEOUT) -> AsyncIterator[WatchEvent[Any]]:
    """Every event of a stream that must end within `timeout` seconds."""
    async with contextlib.aclosing(events):
        async with asyncio.timeout(timeout):
            async for event in events:
                yield event


async def test_bookmark_of_a_kind_with_required_fields(client: ApiClient, namespace: str) -> None:
    """A BOOKMARK carries only metadata.resourceVersion; for Event (involvedObject required) the
    typed watch still yields it, with the resourceVersion readable."""
    start = (await client.list(Event, namespace)).resource_version
    async with contextlib.aclosing(client.watch(Event, namespace, resource_version=start)) as events:
        bookmark = await next_event(events, skip_bookmarks=False)
    assert bookmark.type == "BOOKMARK" and isinstance(bookmark.object, Event)
    assert bookmark.object.metadata.resource_version == bookmark.resource_version
    assert int(bookmark.resource_version or 0) >= int(start)


async def test_client_from_a_kubeconfig(apiserver: ApiServer, namespace: str, tmp_path: Path) -> None:
    path = write_kubeconfig(tmp_path / "kubeconfig", apiserver.url, "tester", token="not-checked-yet",
                            namespace=namespace)
    async with ApiClient.from_kubeconfig(str(path), user_agent=default_user_agent("kubeconfig-test")) as c:
        assert c.config.namespace == namespace and c.config.server == apiserver.url
        assert c.user_agent.startswith("kubeconfig-test/")
        created = await c.create(new_pod("via-kubeconfig", namespace))
        assert (await c.get(Pod, "via-kubeconfig", c.config.namespace)).metadata.uid == created.metadata.uid


async def test_mapping_field_selector_values_are_escaped(client: ApiClient, namespace: str) -> None:
    await client.create(new_pod("plain", namespace))
    assert format_selector({"metadata.name": "a,b=c"}) == r"metadata.name=a\,b\=c"
    # one term with an odd value, not three terms (which the apiserver would refuse with 400)
    assert (await client.list(Pod, namespace, field_selector={"metadata.name": "plain,x=y"})).items == []
    listed = await client.list(Pod, namespace, field_selector={"metadata.name": "plain"})
    assert [p.metadata.name for p in listed.items] == ["plain"]


# -- an unreachable apiserver ---------------------------------------------------------------------


async def test_nothing_listening_is_api_unavailable() -> None:
    async with ApiClient(ClientConfig(server=f"http://127.0.0.1:{free_port()}"), connect_timeout=2) as c:
        with pytest.raises(ApiUnavailable):
            await c.get(Pod, "x", "default")
        with pytest.raises(ApiUnavailable):
            await c.list(Pod)
        with pytest.raises(ApiUnavailable):
            await c.create(new_pod("x", "default"))
        with pytest.raises(ApiUnavailable):
            await anext(c.watch(Pod, "default"))


async def test_apiserver_killed_mid_watch_is_api_unavailable(workdir: Path, etcd: Etcd) -> None:
    server = ApiServer(workdir, etcd, "--etcd-compaction-interval", "0")
    await asyncio.to_thread(server.start)
    try:
        async with ApiClient(ClientConfig(server=server.url)) as c:
            start = (await c.list(Namespace)).resource_version
            async with contextlib.aclosing(c.watch(Namespace, resource_version=start)) as events:
                ns = f"t-{uuid.uuid4().hex[:10]}"
                await c.create(Namespace(metadata=ObjectMeta(name=ns)))
                event = await next_event(events)
                assert event.type == "ADDED"
                await asyncio.to_thread(server.process.kill)
                with pytest.raises(ApiUnavailable):
                    await next_event(events)
            with pytest.raises(ApiUnavailable):
                await c.get(Namespace, ns)
            await asyncio.to_thread(server.start)  # same port again: the same client works
            assert (await c.get(Namespace, ns)).metadata.name == ns
            await c.delete(Namespace, ns)
    finally:
        await asyncio.to_thread(server.stop)


async def test_error_body_that_is_not_a_status(apiserver: ApiServer) -> None:
    """A 404 for a path the API does not serve still decodes into an ApiError."""
    async with ApiClient(ClientConfig(server=apiserver.url)) as c:
        with pytest.raises(ApiError) as err:
            await c.request("GET", "/no/such/path")
        assert err.value.code == 404 and err.value.is_not_found


async def test_user_agent_and_raw_http_agree(client: ApiClient, api: httpx.Client, namespace: str) -> None:
    await client.create(new_pod("ua", namespace))
    assert api.get(f"/api/v1/namespaces/{namespace}/pods/ua").json()["metadata"]["name"] == "ua"
    assert client.user_agent.startswith("client-integration-test/")
