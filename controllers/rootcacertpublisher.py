"""The root-ca-cert-publisher: every namespace has the ConfigMap `kube-root-ca.crt` holding the cluster's CA
bundle under `ca.crt`, with which a pod verifies the apiserver (upstream pkg/controller/certificates/
rootcacertpublisher/publisher.go). The ServiceAccount admission plugin projects it into every pod's
kube-api-access volume.

Keys are namespace names: a namespace added or updated, or a `kube-root-ca.crt` changed or deleted, queues
its namespace. Reconciling creates the ConfigMap when the informer holds none, or puts back its data and
its description annotation when either differs; a namespace gone or terminating meanwhile is not retried.
The bundle is the controller-manager's --root-ca-file, else the CA its kubeconfig trusts.
"""

from __future__ import annotations

import logging

from machinery.api.core_v1 import ConfigMap, Namespace
from machinery.api.meta import ObjectMeta
from machinery.client import ApiClient, ApiError
from machinery.controller import Controller
from machinery.informer import SharedInformerFactory

log = logging.getLogger(__name__)

ROOT_CA_CONFIGMAP = "kube-root-ca.crt"
DESCRIPTION_ANNOTATION = "kubernetes.io/description"
DESCRIPTION = ("Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints "
               "such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across "
               "distributions of Kubernetes clusters.")
NAMESPACE_TERMINATING_CAUSE = "NamespaceTerminating"


class RootCACertPublisher(Controller):
    name = "root-ca-cert-publisher"

    def __init__(self, client: ApiClient, informers: SharedInformerFactory, root_ca: str, *, workers: int = 1) -> None:
        super().__init__(workers=workers)
        self.client = client
        self.root_ca = root_ca
        self.namespaces = informers.informer_for(Namespace)
        self.configmaps = informers.informer_for(ConfigMap)
        self.namespaces.add_event_handler(on_add=self._namespace, on_update=lambda _old, new: self._namespace(new))
        self.configmaps.add_event_handler(on_update=lambda _old, new: self._configmap(new), on_delete=self._configmap)
        self.informers += [self.namespaces, self.configmaps]

    def _namespace(self, ns: Namespace) -> None:
        if ns.metadata.name:
            self.queue.add(ns.metadata.name)

    def _configmap(self, cm: ConfigMap) -> None:
        if cm.metadata.name == ROOT_CA_CONFIGMAP and cm.metadata.namespace:
            self.queue.add(cm.metadata.namespace)

    async def reconcile(self, key: str) -> float | None:
        """upstream syncNamespace."""
        data = {"ca.crt": self.root_ca}
        cm = self.configmaps.get(ROOT_CA_CONFIGMAP, key)
        if cm is None:
            ns = self.namespaces.get(key)
            if ns is None or ns.metadata.deletion_timestamp is not None:
                return None
            try:
                await self.client.create(ConfigMap(
                    metadata=ObjectMeta(name=ROOT_CA_CONFIGMAP, annotations={DESCRIPTION_ANNOTATION: DESCRIPTION}),
                    data=data), namespace=key)
            except ApiError as e:
                # don't retry a create if the namespace doesn't exist or is terminating
                if e.is_not_found or _terminating(e) or e.is_already_exists:
                    return None
                raise
            log.info("root-ca-cert-publisher: created %s/%s", key, ROOT_CA_CONFIGMAP)
            return None
        annotations = dict(cm.metadata.annotations or {})
        if (cm.data or {}) == data and annotations.get(DESCRIPTION_ANNOTATION):
            return None
        annotations[DESCRIPTION_ANNOTATION] = DESCRIPTION
        updated = cm.model_copy(update={"data": data,
                                        "metadata": cm.metadata.model_copy(update={"annotations": annotations})})
        await self.client.update(updated)
        log.info("root-ca-cert-publisher: updated %s/%s", key, ROOT_CA_CONFIGMAP)
        return None


def _terminating(e: ApiError) -> bool:
    causes = (e.status.details.causes if e.status.details else None) or []
    return any(c.reason == NAMESPACE_TERMINATING_CAUSE for c in causes) or "terminat" in e.message
