"""Two more Python clients against a secure minik8s (every admission plugin, x509 admin from its kubeconfig):
lightkube (typed models, its own HTTP client) and kr8s (discovery, then generic objects). Each creates, reads,
lists by label, patches (lightkube: server-side apply too), watches and deletes ConfigMaps in a namespace of its
own, and gets upstream's NotFound as its own error type. The official Python client and kopf have their own
modules (test_server_side_apply, test_crd_kubectl, test_kopf_operator)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.auth_cluster import SecureApiServer
from tests.cluster import ALL_ADMISSION, Etcd


@pytest.fixture(scope="module")
def secure(workdir: Path, etcd: Etcd) -> Iterator[SecureApiServer]:
    server = SecureApiServer(workdir, etcd, *ALL_ADMISSION).start()
    yield server
    server.stop()


def test_lightkube_creates_lists_applies_watches_and_deletes(secure: SecureApiServer) -> None:
    from lightkube import ApiError, Client, KubeConfig
    from lightkube.models.meta_v1 import ObjectMeta
    from lightkube.resources.core_v1 import ConfigMap, Namespace

    client = Client(config=KubeConfig.from_file(str(secure.kubeconfig("admin"))), field_manager="lightkube-test")
    ns = f"lightkube-{uuid.uuid4().hex[:6]}"
    client.create(Namespace(metadata=ObjectMeta(name=ns)))
    try:
        made = client.create(ConfigMap(metadata=ObjectMeta(name="one", namespace=ns, labels={"app": "lk"}),
                                       data={"k": "v"}))
        assert made.metadata is not None and made.metadata.uid and made.metadata.resourceVersion
        client.create(ConfigMap(metadata=ObjectMeta(name="two", namespace=ns), data={"k": "w"}))
        assert [c.metadata.name for c in client.list(ConfigMap, namespace=ns, labels={"app": "lk"})
                if c.metadata is not None] == ["one"]
        patched = client.patch(ConfigMap, "one", {"data": {"k2": "v2"}}, namespace=ns)
        assert patched.data == {"k": "v", "k2": "v2"}
        applied = client.apply(ConfigMap(metadata=ObjectMeta(name="three", namespace=ns), data={"a": "1"}))
        assert applied.metadata is not None and applied.metadata.managedFields is not None
        assert [f.manager for f in applied.metadata.managedFields] == ["lightkube-test"]
        # a watch from the list's resourceVersion sees a change made after it
        listed = client.list(ConfigMap, namespace=ns)
        assert {c.metadata.name for c in listed if c.metadata is not None} >= {"one", "two", "three"}
        rv = listed.resourceVersion  # known once the list was read
        client.patch(ConfigMap, "two", {"data": {"k": "changed"}}, namespace=ns)
        seen = None
        for kind, obj in client.watch(ConfigMap, namespace=ns, resource_version=rv, server_timeout=20):
            if obj.metadata is not None and obj.metadata.name == "two":
                seen = (kind, obj.data)
                break
        assert seen == ("MODIFIED", {"k": "changed"})
        client.delete(ConfigMap, "one", namespace=ns)
        with pytest.raises(ApiError) as refused:
            client.get(ConfigMap, "one", namespace=ns)
        assert refused.value.status.code == 404 and refused.value.status.reason == "NotFound"
        assert refused.value.status.message == 'configmaps "one" not found'
    finally:
        client.delete(Namespace, ns)


def test_kr8s_discovers_creates_lists_patches_and_deletes(secure: SecureApiServer) -> None:
    import kr8s
    from kr8s.objects import ConfigMap, Namespace

    api = kr8s.api(kubeconfig=str(secure.kubeconfig("admin")))
    assert "configmaps" in {r["name"] for r in api.api_resources()}  # its discovery, as kubectl's
    ns = f"kr8s-{uuid.uuid4().hex[:6]}"
    namespace = Namespace({"metadata": {"name": ns}}, api=api)
    namespace.create()
    try:
        cm = ConfigMap({"metadata": {"name": "one", "namespace": ns, "labels": {"app": "kr"}}, "data": {"k": "v"}},
                       api=api)
        cm.create()
        ConfigMap({"metadata": {"name": "two", "namespace": ns}, "data": {"k": "w"}}, api=api).create()
        assert [c.name for c in api.get("configmaps", namespace=ns, label_selector={"app": "kr"})] == ["one"]
        cm.patch({"data": {"k2": "v2"}})
        assert ConfigMap.get("one", namespace=ns, api=api).raw["data"] == {"k": "v", "k2": "v2"}
        cm.delete()
        with pytest.raises(kr8s.NotFoundError):
            ConfigMap.get("one", namespace=ns, api=api)
        assert [c.name for c in api.get("configmaps", namespace=ns) if c.name != "kube-root-ca.crt"] == ["two"]
    finally:
        namespace.delete()
