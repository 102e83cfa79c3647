"""The root-ca-cert-publisher's reconcile (controllers/rootcacertpublisher.py, upstream publisher.go syncNamespace)
from filled informer caches and a fake API client: create when missing, put data and annotation back, leave a
right one alone, and do not retry a create into a namespace that is gone or terminating."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from controllers.rootcacertpublisher import DESCRIPTION, DESCRIPTION_ANNOTATION, RootCACertPublisher
from machinery.api.core_v1 import ConfigMap, Namespace
from machinery.api.meta import Status, StatusCause, StatusDetails
from machinery.client import ApiError
from machinery.informer import SharedInformerFactory

CA = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


class FakeClient:
    def __init__(self, fail: ApiError | None = None) -> None:
        self.created: list[tuple[ConfigMap, str | None]] = []
        self.updated: list[ConfigMap] = []
        self.fail = fail

    async def create(self, obj: ConfigMap, namespace: str | None = None) -> ConfigMap:
        if self.fail is not None:
            raise self.fail
        self.created.append((obj, namespace))
        return obj

    async def update(self, obj: ConfigMap) -> ConfigMap:
        self.updated.append(obj)
        return obj


def publisher(client: FakeClient, *objects: Any) -> RootCACertPublisher:
    factory = SharedInformerFactory(None)  # type: ignore[arg-type]  # never started: the caches are filled here
    controller = RootCACertPublisher(client, factory, CA)  # type: ignore[arg-type]
    for obj in objects:
        informer = controller.namespaces if isinstance(obj, Namespace) else controller.configmaps
        informer.store.upsert(obj)
    return controller


def ns(name: str = "prod", **meta: Any) -> Namespace:
    return Namespace.model_validate({"metadata": {"name": name, **meta}})


def root_ca(data: dict[str, str], annotations: dict[str, str] | None = None) -> ConfigMap:
    return ConfigMap.model_validate({"metadata": {"name": "kube-root-ca.crt", "namespace": "prod",
                                                  "resourceVersion": "3", "annotations": annotations or {}},
                                     "data": data})


def test_creates_the_configmap() -> None:
    client = FakeClient()
    assert asyncio.run(publisher(client, ns()).reconcile("prod")) is None
    [(cm, namespace)] = client.created
    assert namespace == "prod" and cm.metadata.name == "kube-root-ca.crt" and cm.data == {"ca.crt": CA}
    assert (cm.metadata.annotations or {})[DESCRIPTION_ANNOTATION] == DESCRIPTION


def test_puts_data_and_annotation_back_and_leaves_a_right_one_alone() -> None:
    for stale in (root_ca({"ca.crt": "forged"}, {DESCRIPTION_ANNOTATION: DESCRIPTION}),
                  root_ca({"ca.crt": CA}), root_ca({"ca.crt": CA, "extra": "x"}, {DESCRIPTION_ANNOTATION: "d"})):
        client = FakeClient()
        asyncio.run(publisher(client, ns(), stale).reconcile("prod"))
        [cm] = client.updated
        assert cm.data == {"ca.crt": CA} and cm.metadata.resource_version == "3"
        assert (cm.metadata.annotations or {})[DESCRIPTION_ANNOTATION] == DESCRIPTION  # upstream sets it on update
    client = FakeClient()
    asyncio.run(publisher(client, ns(), root_ca({"ca.crt": CA}, {DESCRIPTION_ANNOTATION: DESCRIPTION}))
                .reconcile("prod"))
    assert client.created == [] and client.updated == []


@pytest.mark.parametrize(("code", "reason", "causes", "retried"), [
    (404, "NotFound", [], False),
    (403, "Forbidden", [StatusCause(reason="NamespaceTerminating", message="namespace prod is being terminated")],
     False),
    (409, "AlreadyExists", [], False),
    (500, "InternalError", [], True),
])
def test_create_errors(code: int, reason: str, causes: list[StatusCause], retried: bool) -> None:
    error = ApiError(Status(code=code, reason=reason, message="unable to create new content",
                            details=StatusDetails(causes=causes or None)), code)
    controller = publisher(FakeClient(fail=error), ns())
    if retried:
        with pytest.raises(ApiError):
            asyncio.run(controller.reconcile("prod"))
    else:
        assert asyncio.run(controller.reconcile("prod")) is None


def test_a_namespace_gone_or_going_gets_nothing() -> None:
    client = FakeClient()
    asyncio.run(publisher(client).reconcile("gone"))
    asyncio.run(publisher(client, ns(deletionTimestamp="2026-11-24T00:00:00Z")).reconcile("prod"))
    assert client.created == []
