"""The admission chain calls a plugin only for the objects it can act on (apiserver/admission/chain.py): a claim
still gets its default StorageClass and protection finalizer, a PersistentVolume its finalizer, an Ingress its
default IngressClass, a claim's growth is still checked; a pod create asks for none of them."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from apiserver import errors
from apiserver.admission.chain import ALL_PLUGINS, AdmissionChain
from apiserver.admission.interfaces import AdmissionAttributes
from machinery.api.resources import RESOURCES
from machinery.authn.user import UserInfo

USER = UserInfo("jane", ("system:authenticated",))
STORAGE_CLASS = {"metadata": {"name": "fast", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
                 "provisioner": "p"}
INGRESS_CLASS = {"metadata": {"name": "nginx", "creationTimestamp": "2026-01-01T00:00:00Z",
                              "annotations": {"ingressclass.kubernetes.io/is-default-class": "true"}}}


class _Store:
    def __init__(self, group: str, plural: str) -> None:
        self.info = next(i for i in RESOURCES if i.group == group and i.plural == plural)


def _chain(asked: list[str]) -> AdmissionChain:
    async def storage_classes() -> list[Any]:
        asked.append("storageclasses")
        return [STORAGE_CLASS]

    async def ingress_classes() -> list[Any]:
        asked.append("ingressclasses")
        return [INGRESS_CLASS]

    # ServiceAccount, Priority, LimitRanger, quotas and webhooks left out: a pod needs none of them here
    plugins = [p for p in ALL_PLUGINS if p not in ("ServiceAccount", "Priority", "LimitRanger", "ResourceQuota",
                                                   "MutatingAdmissionWebhook", "ValidatingAdmissionWebhook")]
    return AdmissionChain(plugins, namespace_labels=lambda _: {}, storage_classes=storage_classes,
                          ingress_classes=ingress_classes)


def _run(chain: AdmissionChain, operation: str, group: str, plural: str, obj: dict[str, Any],
         old: dict[str, Any] | None = None) -> dict[str, Any]:
    store = _Store(group, plural)
    namespace = "ns" if store.info.namespaced else None
    a = AdmissionAttributes(operation, store, namespace, obj["metadata"]["name"], None, obj, old, USER, False)

    async def both() -> dict[str, Any]:
        mutated = await chain.mutate(a)
        a.obj = mutated
        await chain.validate(a)
        return mutated

    return asyncio.run(both())


def test_claims_volumes_and_ingresses_still_get_their_defaults_and_a_pod_asks_for_nothing() -> None:
    asked: list[str] = []
    chain = _chain(asked)
    claim = _run(chain, "CREATE", "", "persistentvolumeclaims",
                 {"metadata": {"name": "c"}, "spec": {"resources": {"requests": {"storage": "1Gi"}}}})
    assert claim["spec"]["storageClassName"] == "fast"
    assert claim["metadata"]["finalizers"] == ["kubernetes.io/pvc-protection"]
    volume = _run(chain, "CREATE", "", "persistentvolumes", {"metadata": {"name": "v"}, "spec": {}})
    assert volume["metadata"]["finalizers"] == ["kubernetes.io/pv-protection"]
    ingress = _run(chain, "CREATE", "networking.k8s.io", "ingresses", {"metadata": {"name": "i"}, "spec": {}})
    assert ingress["spec"]["ingressClassName"] == "nginx"
    assert asked == ["storageclasses", "ingressclasses"]
    pod = _run(chain, "CREATE", "", "pods", {"metadata": {"name": "p"}, "spec": {"containers": []}})
    assert "finalizers" not in pod["metadata"] and asked == ["storageclasses", "ingressclasses"]


def test_a_claim_that_grows_is_still_checked() -> None:
    chain = _chain([])
    old = {"metadata": {"name": "c"}, "spec": {"storageClassName": "fast",
                                               "resources": {"requests": {"storage": "1Gi"}}},
           "status": {"phase": "Pending"}}
    new = {"metadata": {"name": "c"}, "spec": {"storageClassName": "fast",
                                               "resources": {"requests": {"storage": "2Gi"}}}}
    with pytest.raises(errors.ApiError) as refused:
        _run(chain, "UPDATE", "", "persistentvolumeclaims", new, old)
    assert refused.value.code == 403 and "Only bound persistent volume claims can be expanded" in refused.value.message
