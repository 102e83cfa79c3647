"""The PV protection controller (upstream pkg/controller/volume/pvprotection/
pv_protection_controller.go; `--controllers` name pv-protection).

A volume carries kubernetes.io/pv-protection from creation; once deleted, the finalizer goes when
the volume is no longer Bound to a claim, so deleting a bound volume leaves it Terminating until
its claim is gone.
"""

from __future__ import annotations

import logging

from machinery.api.core_v1 import PersistentVolume
from machinery.client import ApiClient, ApiError
from machinery.controller import Controller
from machinery.informer import Informer, SharedInformerFactory
from machinery.volumeutil import PV_PROTECTION_FINALIZER

log = logging.getLogger(__name__)


def is_volume_used(volume: PersistentVolume) -> bool:
    """upstream isPVUsed: a Bound volume is in use."""
    return volume.status is not None and volume.status.phase == "Bound"


class PVProtectionController(Controller):
    name = "pv-protection"

    def __init__(self, client: ApiClient, informers: SharedInformerFactory, workers: int = 1) -> None:
        super().__init__(workers)
        self.client = client
        self.volumes: Informer[PersistentVolume] = informers.informer_for(PersistentVolume)
        self.watch(self.volumes)

    async def reconcile(self, key: str) -> float | None:
        volume = self.volumes.store.get(key)
        if volume is None:
            return None
        finalizers = list(volume.metadata.finalizers or [])
        deleting = volume.metadata.deletion_timestamp is not None
        if not deleting and PV_PROTECTION_FINALIZER not in finalizers:
            finalizers = [*finalizers, PV_PROTECTION_FINALIZER]
        elif deleting and PV_PROTECTION_FINALIZER in finalizers and not is_volume_used(volume):
            finalizers = [f for f in finalizers if f != PV_PROTECTION_FINALIZER]
        else:
            return None
        try:
            # a copy: the cached volume is read-only
            await self.client.update(volume.model_copy(update={"metadata": volume.metadata.model_copy(
                update={"finalizers": finalizers})}), field_manager="pv-protection-controller")
        except ApiError as e:
            if not e.is_not_found:
                raise
        return None
