"""The PVC protection controller (upstream pkg/controller/volume/pvcprotection/
pvc_protection_controller.go; `--controllers` name pvc-protection).

A claim carries kubernetes.io/pvc-protection from creation (StorageObjectInUseProtection admission,
and this controller for one that lacks it); once deleted, the finalizer goes when no pod that has
not finished uses the claim, so a claim in use stays Terminating until its pods are gone. Pods are
read from the informer first and, when it shows none, from the apiserver (as upstream's
askAPIServer: the informer may not have seen a pod created a moment ago).
"""

from __future__ import annotations

import logging

from machinery.api.core_v1 import PersistentVolumeClaim, Pod
from machinery.client import ApiClient, ApiError
from machinery.controller import Controller
from machinery.informer import Informer, SharedInformerFactory
from machinery.volumeutil import PVC_PROTECTION_FINALIZER, pod_claim_names

log = logging.getLogger(__name__)


def pod_uses_claim(pod: Pod, claim_name: str) -> bool:
    """A pod that has not finished (Succeeded/Failed) and names the claim in its volumes."""
    if pod.status is not None and pod.status.phase in ("Succeeded", "Failed"):
        return False
    return claim_name in pod_claim_names(pod.to_dict())


class PVCProtectionController(Controller):
    name = "pvc-protection"

    def __init__(self, client: ApiClient, informers: SharedInformerFactory, workers: int = 1) -> None:
        super().__init__(workers)
        self.client = client
        self.claims: Informer[PersistentVolumeClaim] = informers.informer_for(PersistentVolumeClaim)
        self.pods: Informer[Pod] = informers.informer_for(Pod)
        self.watch(self.claims)
        # a pod going (or finishing) may free the claims it used
        self.watch(self.pods, lambda pod: [f"{pod.metadata.namespace}/{c}" for c in pod_claim_names(pod.to_dict())])

    async def reconcile(self, key: str) -> float | None:
        claim = self.claims.store.get(key)
        if claim is None:
            return None
        finalizers = list(claim.metadata.finalizers or [])
        deleting = claim.metadata.deletion_timestamp is not None
        if not deleting and PVC_PROTECTION_FINALIZER not in finalizers:
            await self._update(_with_finalizers(claim, [*finalizers, PVC_PROTECTION_FINALIZER]))
        elif deleting and PVC_PROTECTION_FINALIZER in finalizers and not await self._in_use(claim):
            await self._update(_with_finalizers(claim, [f for f in finalizers if f != PVC_PROTECTION_FINALIZER]))
            log.info("removed protection finalizer from claim %s: no pod uses it", key)
        return None

    async def _in_use(self, claim: PersistentVolumeClaim) -> bool:
        namespace, name = claim.metadata.namespace or "", claim.metadata.name or ""
        if any(pod_uses_claim(p, name) for p in self.pods.store.list() if p.metadata.namespace == namespace):
            return True
        live = await self.client.list(Pod, namespace)
        return any(pod_uses_claim(p, name) for p in live.items)

    async def _update(self, claim: PersistentVolumeClaim) -> None:
        try:
            await self.client.update(claim, field_manager="pvc-protection-controller")
        except ApiError as e:
            if not e.is_not_found:
                raise


def _with_finalizers(claim: PersistentVolumeClaim, finalizers: list[str]) -> PersistentVolumeClaim:
    """A copy of the (cached, read-only) claim with these finalizers."""
    return claim.model_copy(update={"metadata": claim.metadata.model_copy(update={"finalizers": finalizers})})
