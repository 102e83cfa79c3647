"""The PersistentVolume binder (upstream pkg/controller/volume/persistentvolume/pv_controller.go,
pv_controller_base.go; `--controllers` name persistentvolume-binder).

Claims and volumes are synced one key at a time ("claim:NS/NAME", "volume:NAME"):

- an unbound claim gets the smallest Available volume that satisfies it (index.py), or the volume
  its spec.volumeName names, or the volume pre-bound to it by claimRef. Binding writes, in order,
  the volume's claimRef, the volume's phase Bound, the claim's volumeName with
  pv.kubernetes.io/bind-completed (and bound-by-controller on whichever side the controller
  filled in), then the claim's status (Bound, the volume's capacity and access modes);
- a claim with no volume for it and a class with a provisioner is handed to that provisioner by
  volume.kubernetes.io/storage-provisioner (and its beta twin); a WaitForFirstConsumer class waits
  for the scheduler's volume.kubernetes.io/selected-node first;
- a volume whose claim is gone is Released; Retain keeps it so, Delete deletes the volume object
  (a provisioner that made it holds its own finalizer on it and deletes the data first);
- a bound claim whose volume is gone is Lost.

Events as upstream's: FailedBinding, WaitForFirstConsumer, ExternalProvisioning, ProvisioningFailed,
VolumeMismatch, ClaimLost. Not here (the next slice): provisioning itself (an external provisioner
such as local-path answers the storage-provisioner annotation, creating a volume with claimRef set
and pv.kubernetes.io/provisioned-by), and the scheduler's VolumeBinding (it sets selected-node).
"""

from __future__ import annotations

import copy
import logging
from typing import Any

from controllers.volume.persistentvolume.index import find_best_match, is_volume_bound_to_claim, satisfies_claim
from machinery.api.core_v1 import Node, PersistentVolume, PersistentVolumeClaim
from machinery.api.storage_v1 import StorageClass
from machinery.client import ApiClient, ApiError
from machinery.controller import Controller
from machinery.events import EventRecorder
from machinery.informer import Informer, SharedInformerFactory, meta_namespace_key
from machinery.types import Obj
from machinery.volumeutil import (
    ANN_BETA_STORAGE_PROVISIONER,
    ANN_BIND_COMPLETED,
    ANN_BOUND_BY_CONTROLLER,
    ANN_SELECTED_NODE,
    ANN_STORAGE_PROVISIONER,
    BETA_STORAGE_CLASS_ANNOTATION,
    BINDING_WAIT_FOR_FIRST_CONSUMER,
    binding_mode,
    claim_class,
    default_class,
    is_default_class,
    volume_class,
)

log = logging.getLogger(__name__)

EVENT_COMPONENT = "persistentvolume-controller"
NO_VOLUME_NO_CLASS = "no persistent volumes available for this claim and no storage class is set"
WAITING_FOR_CONSUMER = "waiting for first consumer to be created before binding"
CLAIM_PREFIX, VOLUME_PREFIX = "claim:", "volume:"


def _meta(obj: Obj) -> Obj:
    return obj.setdefault("metadata", {})


def _annotations(obj: Obj) -> dict[str, str]:
    return _meta(obj).get("annotations") or {}


def _set_annotation(obj: Obj, key: str, value: str) -> None:
    _meta(obj).setdefault("annotations", {})[key] = value


def _phase(obj: Obj) -> str:
    return (obj.get("status") or {}).get("phase") or ""


def external_provisioning_message(provisioner: str) -> str:
    return (f"Waiting for a volume to be created either by the external provisioner '{provisioner}' or manually by "
            "the system administrator. If volume creation is delayed, please verify that the provisioner is "
            "running and correctly registered.")


class PersistentVolumeController(Controller):
    name = "persistentvolume-binder"

    def __init__(self, client: ApiClient, informers: SharedInformerFactory, workers: int = 1,
                 sync_period: float = 15.0) -> None:
        super().__init__(workers)
        self.sync_period = sync_period
        self.client = client
        self.recorder = EventRecorder(client, EVENT_COMPONENT, workers=1)
        self.volumes: Informer[PersistentVolume] = informers.informer_for(PersistentVolume)
        self.claims: Informer[PersistentVolumeClaim] = informers.informer_for(PersistentVolumeClaim)
        self.classes: Informer[StorageClass] = informers.informer_for(StorageClass)
        self.nodes: Informer[Node] = informers.informer_for(Node)
        self.informers.append(self.nodes)
        self.watch(self.volumes, lambda v: [VOLUME_PREFIX + meta_namespace_key(v), *self._claim_of(v),
                                            *self._waiting_claims(v)])
        self.watch(self.claims, lambda c: [CLAIM_PREFIX + meta_namespace_key(c), *self._volume_of(c)])
        # a class appearing can unblock claims that name it
        self.classes.add_event_handler(on_add=self._class_changed, on_update=lambda _o, n: self._class_changed(n),
                                       on_delete=lambda _c: None)
        self.informers.append(self.classes)

    @staticmethod
    def _claim_of(volume: PersistentVolume) -> list[str]:
        ref = volume.spec.claim_ref if volume.spec else None
        return [f"{CLAIM_PREFIX}{ref.namespace}/{ref.name}"] if ref and ref.name else []

    @staticmethod
    def _volume_of(claim: PersistentVolumeClaim) -> list[str]:
        name = claim.spec.volume_name if claim.spec else None
        return [VOLUME_PREFIX + name] if name else []

    def _waiting_claims(self, volume: PersistentVolume) -> list[str]:
        """The cache shows an Available, unbound volume (created, freed, or its phase just written): the
        unbound claims of its class may match it now rather than at their next resync."""
        if volume.spec is None or volume.spec.claim_ref is not None or \
                volume.status is None or volume.status.phase != "Available":
            return []
        class_name = volume_class(volume.to_dict())
        return [CLAIM_PREFIX + meta_namespace_key(c) for c in self.claims.store.list()
                if not (c.spec and c.spec.volume_name) and claim_class(c.to_dict()) == class_name]

    def _class_changed(self, storage_class: StorageClass) -> None:
        """Claims of the class (or, for a default class, claims of none) may go further now."""
        default = is_default_class(storage_class.to_dict())
        for claim in self.claims.store.list():
            raw = claim.to_dict()
            if _phase(raw) != "Pending":
                continue
            unset = raw.get("spec", {}).get("storageClassName") is None
            if claim_class(raw) == storage_class.metadata.name or (default and unset):
                self.queue.add(CLAIM_PREFIX + meta_namespace_key(claim))

    # -- lookups from the caches -----------------------------------------------------------------

    def _volume(self, name: str) -> Obj | None:
        found = self.volumes.store.get(name)
        return found.to_dict() if found is not None else None

    def _claim(self, namespace: str, name: str) -> Obj | None:
        found = self.claims.store.get(f"{namespace}/{name}")
        return found.to_dict() if found is not None else None

    def _class(self, name: str) -> Obj | None:
        found = self.classes.store.get(name)
        return found.to_dict() if found is not None else None

    async def reconcile(self, key: str) -> float | None:
        if key.startswith(CLAIM_PREFIX):
            namespace, _, name = key.removeprefix(CLAIM_PREFIX).partition("/")
            claim = self._claim(namespace, name)
            if claim is not None:
                await self.sync_claim(claim)
                if _phase(self._claim(namespace, name) or {}) == "Pending":
                    return self.sync_period  # upstream's periodic resync (--pvclaimbinder-sync-period)
        else:
            volume = self._volume(key.removeprefix(VOLUME_PREFIX))
            if volume is not None:
                await self.sync_volume(volume)
        return None

    # -- claims ----------------------------------------------------------------------------------

    async def sync_claim(self, claim: Obj) -> None:
        if _annotations(claim).get(ANN_BIND_COMPLETED) is None:
            await self._sync_unbound_claim(claim)
        else:
            await self._sync_bound_claim(claim)

    async def _sync_unbound_claim(self, claim: Obj) -> None:
        if (claim.get("spec") or {}).get("storageClassName") is None \
                and BETA_STORAGE_CLASS_ANNOTATION not in _annotations(claim):
            # RetroactiveDefaultStorageClass: a claim made before any default class existed gets it now
            chosen = default_class([c.to_dict() for c in self.classes.store.list()])
            if chosen is not None:
                claim = copy.deepcopy(claim)
                claim["spec"]["storageClassName"] = chosen["metadata"]["name"]
                log.info("assigning StorageClass[%s] to PersistentVolumeClaim[%s/%s]", chosen["metadata"]["name"],
                         claim["metadata"].get("namespace"), claim["metadata"]["name"])
                claim = await self._update_claim(claim)
        volume_name = (claim.get("spec") or {}).get("volumeName") or ""
        if not volume_name:
            delay = self._delay_binding(claim)
            volume = find_best_match(claim, [v.to_dict() for v in self.volumes.store.list()], delay,
                                     self._selected_node(claim))
            if volume is None:
                await self._no_volume(claim, delay)
                return
            await self._bind(volume, claim)
            return
        volume = self._volume(volume_name)
        if volume is None:  # the user asked for a volume that does not exist (yet)
            await self._claim_status(claim, "Pending", None)
            return
        ref = (volume.get("spec") or {}).get("claimRef")
        if not ref:
            why = satisfies_claim(volume, claim)
            if why:
                self._event(claim, "Warning", "VolumeMismatch",
                            f'Cannot bind to requested volume "{volume_name}": {why}')
                await self._claim_status(claim, "Pending", None)
                return
            await self._bind(volume, claim)
        elif is_volume_bound_to_claim(volume, claim):
            await self._bind(volume, claim)
        else:
            self._event(claim, "Warning", "FailedBinding",
                        f'volume "{volume_name}" already bound to a different claim.')
            await self._claim_status(claim, "Pending", None)

    def _selected_node(self, claim: Obj) -> tuple[dict[str, str], str] | None:
        """The scheduler's node for a delayed claim: its labels (none if it is not in the cache) and name."""
        name = _annotations(claim).get(ANN_SELECTED_NODE)
        if not name:
            return None
        node = self.nodes.store.get(name)
        return dict((node.metadata.labels or {}) if node is not None else {}), name

    def _delay_binding(self, claim: Obj) -> bool:
        """IsDelayBindingMode, unless the scheduler has chosen a node already."""
        if ANN_SELECTED_NODE in _annotations(claim):
            return False
        name = claim_class(claim)
        return bool(name) and binding_mode(self._class(name)) == BINDING_WAIT_FOR_FIRST_CONSUMER

    async def _no_volume(self, claim: Obj, delay: bool) -> None:
        name = claim_class(claim)
        if delay:
            self._event(claim, "Normal", "WaitForFirstConsumer", WAITING_FOR_CONSUMER)
        elif not name:
            self._event(claim, "Normal", "FailedBinding", NO_VOLUME_NO_CLASS)
        else:
            storage_class = self._class(name)
            if storage_class is None:
                self._event(claim, "Warning", "ProvisioningFailed", f'storageclass.storage.k8s.io "{name}" not found')
            else:
                provisioner = storage_class.get("provisioner") or ""
                if _annotations(claim).get(ANN_STORAGE_PROVISIONER) != provisioner:
                    claim = copy.deepcopy(claim)
                    _set_annotation(claim, ANN_STORAGE_PROVISIONER, provisioner)
                    _set_annotation(claim, ANN_BETA_STORAGE_PROVISIONER, provisioner)
                    claim = await self._update_claim(claim)
                self._event(claim, "Normal", "ExternalProvisioning", external_provisioning_message(provisioner))
        await self._claim_status(claim, "Pending", None)

    async def _sync_bound_claim(self, claim: Obj) -> None:
        volume_name = (claim.get("spec") or {}).get("volumeName") or ""
        if not volume_name:
            await self._lost(claim, "Bound claim has lost reference to PersistentVolume. Data on the volume is lost!")
            return
        volume = self._volume(volume_name)
        if volume is None:
            await self._lost(claim, "Bound claim has lost its PersistentVolume. Data on the volume is lost!")
            return
        if not (volume.get("spec") or {}).get("claimRef") or is_volume_bound_to_claim(volume, claim):
            await self._bind(volume, claim)  # finish (or confirm) a binding half done
        else:
            await self._lost(claim, "Two claims are bound to the same volume, this one is bound incorrectly")

    async def _lost(self, claim: Obj, message: str) -> None:
        if _phase(claim) != "Lost":
            self._event(claim, "Warning", "ClaimLost", message)
        await self._claim_status(claim, "Lost", None)

    # -- binding ---------------------------------------------------------------------------------

    async def _bind(self, volume: Obj, claim: Obj) -> None:
        """bind(): volume.claimRef, volume phase, claim.volumeName + annotations, claim phase."""
        volume = await self._bind_volume_to_claim(volume, claim)
        volume = await self._volume_status(volume, "Bound")
        claim = await self._bind_claim_to_volume(claim, volume)
        await self._claim_status(claim, "Bound", volume)

    async def _bind_volume_to_claim(self, volume: Obj, claim: Obj) -> Obj:
        spec = volume.get("spec") or {}
        meta = claim["metadata"]
        ref = spec.get("claimRef") or {}
        wanted = {"kind": "PersistentVolumeClaim", "namespace": meta.get("namespace"), "name": meta["name"],
                  "uid": meta.get("uid"), "apiVersion": "v1", "resourceVersion": meta.get("resourceVersion")}
        if ref.get("uid") == meta.get("uid") and ref.get("name") == meta["name"]:
            return volume
        volume = copy.deepcopy(volume)
        if not ref:
            _set_annotation(volume, ANN_BOUND_BY_CONTROLLER, "yes")
        volume["spec"]["claimRef"] = wanted
        updated = await self.client.update(PersistentVolume.from_dict(volume), field_manager=EVENT_COMPONENT)
        return updated.to_dict()

    async def _bind_claim_to_volume(self, claim: Obj, volume: Obj) -> Obj:
        spec = claim.get("spec") or {}
        name = volume["metadata"]["name"]
        annotations = _annotations(claim)
        if spec.get("volumeName") == name and annotations.get(ANN_BIND_COMPLETED) is not None:
            return claim
        claim = copy.deepcopy(claim)
        if spec.get("volumeName") != name:
            claim["spec"]["volumeName"] = name
            _set_annotation(claim, ANN_BOUND_BY_CONTROLLER, "yes")
        _set_annotation(claim, ANN_BIND_COMPLETED, "yes")
        return await self._update_claim(claim)

    async def _update_claim(self, claim: Obj) -> Obj:
        updated = await self.client.update(PersistentVolumeClaim.from_dict(claim), field_manager=EVENT_COMPONENT)
        return updated.to_dict()

    async def _claim_status(self, claim: Obj, phase: str, volume: Obj | None) -> Obj:
        """updateClaimStatus: the phase, and from the volume its capacity and access modes."""
        status = dict(claim.get("status") or {})
        wanted = dict(status, phase=phase)
        if volume is not None:
            vspec = volume.get("spec") or {}
            wanted["accessModes"] = vspec.get("accessModes")
            wanted["capacity"] = vspec.get("capacity")
        if wanted == status:
            return claim
        claim = copy.deepcopy(claim)
        claim["status"] = {k: v for k, v in wanted.items() if v is not None}
        updated = await self.client.update_status(PersistentVolumeClaim.from_dict(claim),
                                                  field_manager=EVENT_COMPONENT)
        return updated.to_dict()

    async def _volume_status(self, volume: Obj, phase: str, message: str | None = None) -> Obj:
        status = volume.get("status") or {}
        if status.get("phase") == phase and status.get("message") == message:
            return volume
        volume = copy.deepcopy(volume)
        volume["status"] = {**{k: v for k, v in status.items() if k not in ("message", "reason")}, "phase": phase}
        if message:
            volume["status"]["message"] = message
        updated = await self.client.update_status(PersistentVolume.from_dict(volume), field_manager=EVENT_COMPONENT)
        return updated.to_dict()

    # -- volumes ---------------------------------------------------------------------------------

    async def sync_volume(self, volume: Obj) -> None:
        spec = volume.get("spec") or {}
        ref = spec.get("claimRef")
        if not ref:
            await self._volume_status(volume, "Available")
            return
        if not ref.get("uid"):  # pre-bound by the user to a claim not bound yet: the claim's sync binds it
            if _phase(volume) != "Bound":
                await self._volume_status(volume, "Available")
            self.queue.add(f"{CLAIM_PREFIX}{ref.get('namespace')}/{ref.get('name')}")
            return
        claim = self._claim(ref.get("namespace") or "", ref.get("name") or "")
        if claim is not None and claim["metadata"].get("uid") != ref.get("uid"):
            claim = None  # deleted and created again: not the claim this volume was bound to
        if claim is None:
            await self._released(volume)
            return
        volume_name = (claim.get("spec") or {}).get("volumeName") or ""
        if not volume_name:
            # the claim is being bound to this volume (or is pre-bound by this claimRef): its sync does it
            self.queue.add(CLAIM_PREFIX + f"{ref.get('namespace')}/{ref.get('name')}")
            return
        if volume_name == volume["metadata"]["name"]:
            await self._volume_status(volume, "Bound")
            return
        # the claim went to another volume
        if ANN_BOUND_BY_CONTROLLER in _annotations(volume):
            await self._unbind_volume(volume)
        else:
            await self._volume_status(volume, "Available")

    async def _unbind_volume(self, volume: Obj) -> None:
        volume = copy.deepcopy(volume)
        volume["spec"].pop("claimRef", None)
        _meta(volume).get("annotations", {}).pop(ANN_BOUND_BY_CONTROLLER, None)
        updated = await self.client.update(PersistentVolume.from_dict(volume), field_manager=EVENT_COMPONENT)
        await self._volume_status(updated.to_dict(), "Available")

    async def _released(self, volume: Obj) -> None:
        """The claim is gone: Released, then the reclaim policy (reclaimVolume)."""
        if _phase(volume) not in ("Released", "Failed"):
            volume = await self._volume_status(volume, "Released")
        policy = (volume.get("spec") or {}).get("persistentVolumeReclaimPolicy") or "Retain"
        if policy == "Delete" and not _meta(volume).get("deletionTimestamp"):
            try:
                await self.client.delete(PersistentVolume, volume["metadata"]["name"],
                                         preconditions={"uid": volume["metadata"].get("uid") or ""})
            except ApiError as e:
                if not e.is_not_found:
                    self._event(volume, "Warning", "VolumeFailedDelete", e.message)
                    raise

    # -- events ----------------------------------------------------------------------------------

    def _event(self, obj: Obj, type_: str, reason: str, message: str) -> None:
        model: Any = PersistentVolumeClaim if obj.get("kind") == "PersistentVolumeClaim" or \
            (obj.get("metadata") or {}).get("namespace") else PersistentVolume
        self.recorder.event(model.from_dict(obj), type_, reason, message)
