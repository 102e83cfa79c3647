"""The provisioning controller (rancher local-path-provisioner provisioner.go, driven as
sig-storage-lib-external-provisioner's ProvisionController drives it).

Claims: a claim with no volume whose `volume.kubernetes.io/storage-provisioner` (or beta) annotation, or
else whose class, names this provisioner (`rancher.io/local-path`), and — under WaitForFirstConsumer —
that carries the scheduler's `volume.kubernetes.io/selected-node`, gets a directory on that node:

1. the helper pod `helper-pod-create-pvc-<claim uid>` runs the setup script (`mkdir -m 0777 -p`) there;
2. once it has Succeeded, the volume `pvc-<claim uid>` is created: hostPath (or `local`, by the claim's
   `volumeType` / the class's `defaultVolumeType` annotation) at `<base>/pvc-<uid>_<ns>_<name>`, node
   affinity `kubernetes.io/hostname In [node]`, the class's reclaim policy, the claim's access modes and
   request, `claimRef` set (the binder finishes the binding), `pv.kubernetes.io/provisioned-by` and the
   finalizer `external-provisioner.volume.kubernetes.io/finalizer`; then the helper pod is deleted.

Every name is deterministic, and each step is looked for before it is done, so a provisioner killed at any
point and started again finishes the same work: no second volume, no second directory. A claim deleted
while its helper ran leaves a helper pod whose claim is gone: its directory is removed by a teardown
helper (no orphan directory).

Volumes: one this provisioner made, Released (being deleted or not), with reclaim policy Delete: the helper
pod `helper-pod-delete-pvc-<uid>` runs the teardown script (`rm -rf`) on the volume's node (skipped when
the node is gone, as rancher does), then the volume is deleted and the finalizer dropped. Retain keeps
the directory (the finalizer is dropped when the volume object is deleted).

Refused as rancher refuses them, with the library's `ProvisioningFailed` event (`failed to provision volume
with StorageClass "local-path": ...`): access modes other than ReadWriteOnce / ReadWriteOncePod, a
selector, no selected node — unless the config names a `sharedFileSystemPath` (a directory every node
sees: here, with every node on one host, any directory is one): then any access mode and any node do, the
volume has no node affinity, and the helper pods are scheduled like any pod.
"""

from __future__ import annotations

import copy
import json
import logging
import posixpath
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from local_path_provisioner import helper_pod as hp
from local_path_provisioner.manifests import CONFIG_MAP, DEFAULT_NODE_KEY, DEFAULT_PATH, PROVISIONER_NAME
from machinery.api.core_v1 import Node, PersistentVolume, PersistentVolumeClaim, Pod
from machinery.api.storage_v1 import StorageClass
from machinery.client import ApiClient, ApiError
from machinery.controller import Controller
from machinery.events import EventRecorder
from machinery.informer import Informer, SharedInformerFactory, meta_namespace_key
from machinery.quantity import parse_quantity
from machinery.timeutil import parse_rfc3339
from machinery.types import Obj
from machinery.volumeutil import (
    ANN_BETA_STORAGE_PROVISIONER,
    ANN_DYNAMICALLY_PROVISIONED,
    ANN_SELECTED_NODE,
    ANN_STORAGE_PROVISIONER,
    BINDING_WAIT_FOR_FIRST_CONSUMER,
    binding_mode,
    claim_class,
)

log = logging.getLogger(__name__)

FINALIZER = "external-provisioner.volume.kubernetes.io/finalizer"  # the library's (AddFinalizer)
ANN_NODE_NAME = "local.path.provisioner/selected-node"  # rancher's, on the volume
NODE_AFFINITY_KEY = "kubernetes.io/hostname"
DEFAULT_CMD_TIMEOUT = 120  # rancher's defaultCmdTimeoutSeconds
CLAIM, VOLUME, HELPER = "claim:", "volume:", "helper:"
MODES_ERROR = "NodePath only supports ReadWriteOnce and ReadWriteOncePod (1.22+) access modes"


class ProvisioningError(Exception):
    """Provisioning failed for good (no retry until the claim changes): the event says why."""


@dataclass
class Config:
    """rancher's config.json: base paths per node (DEFAULT_PATH_FOR_NON_LISTED_NODES for the rest), or one
    sharedFileSystemPath that every node sees (then volumes have no node affinity, and ReadWriteMany is fine)."""

    node_paths: dict[str, list[str]] = field(default_factory=lambda: {DEFAULT_NODE_KEY: [DEFAULT_PATH]})
    cmd_timeout: int = DEFAULT_CMD_TIMEOUT
    shared_path: str = ""

    @property
    def shared(self) -> bool:
        return bool(self.shared_path)

    @classmethod
    def parse(cls, text: str) -> Config:
        data = json.loads(text)
        shared = data.get("sharedFileSystemPath") or ""
        if shared and data.get("nodePathMap"):
            raise ValueError("both nodePathMap and sharedFileSystemPath are defined. Please make sure only one is "
                             "in use")
        if shared:
            if not posixpath.isabs(shared):
                raise ValueError(f"config: path {shared} must be absolute")
            return cls({}, int(data.get("cmdTimeoutSeconds") or DEFAULT_CMD_TIMEOUT), posixpath.normpath(shared))
        paths: dict[str, list[str]] = {}
        for entry in data.get("nodePathMap") or []:
            node = entry.get("node") or ""
            if not node:
                raise ValueError("config: a nodePathMap entry has no node")
            for p in entry.get("paths") or []:
                if not posixpath.isabs(p):
                    raise ValueError(f"config: path {p} must be absolute")
            paths[node] = [posixpath.normpath(p) for p in entry.get("paths") or []]
        if not paths:
            raise ValueError("both nodePathMap and sharedFileSystemPath are unconfigured")
        return cls(paths, int(data.get("cmdTimeoutSeconds") or DEFAULT_CMD_TIMEOUT))

    def path_on_node(self, node: str, requested: str = "") -> str:
        if self.shared:
            return self.shared_path
        paths = self.node_paths.get(node)
        if paths is None:
            paths = self.node_paths.get(DEFAULT_NODE_KEY)
            if paths is None:
                raise ProvisioningError(f"config doesn't contain node {node}, and no {DEFAULT_NODE_KEY} available")
        if not paths:
            raise ProvisioningError(f"no local path available on node {node}")
        if requested:
            if requested not in paths:
                raise ProvisioningError(f"config doesn't contain path {requested} on node {node}")
            return requested
        return paths[0]


def _meta(obj: Obj) -> Obj:
    meta: Obj = obj.setdefault("metadata", {})
    return meta


def _annotations(obj: Obj) -> dict[str, str]:
    return (obj.get("metadata") or {}).get("annotations") or {}


def _phase(obj: Obj | None) -> str:
    return ((obj or {}).get("status") or {}).get("phase") or ""


def volume_name(claim: Obj) -> str:
    return f"pvc-{claim['metadata'].get('uid')}"


def volume_node(volume: Obj) -> str:
    """getPathAndNodeForPV: the one value of the first `In` requirement of the volume's node affinity."""
    terms = ((((volume.get("spec") or {}).get("nodeAffinity") or {}).get("required") or {})
             .get("nodeSelectorTerms") or [])
    for term in terms:
        for expr in term.get("matchExpressions") or []:
            if expr.get("operator") == "In" and len(expr.get("values") or []) == 1:
                return str(expr["values"][0])
    return ""


def volume_path(volume: Obj) -> str:
    spec = volume.get("spec") or {}
    source = spec.get("hostPath") or spec.get("local") or {}
    return str(source.get("path") or "")


class LocalPathProvisioner(Controller):
    name = "local-path-provisioner"

    def __init__(self, client: ApiClient, informers: SharedInformerFactory, *, config: Config, namespace: str,
                 helper_image: str, service_account: str, provisioner_name: str = PROVISIONER_NAME,
                 config_map: str = CONFIG_MAP, identity: str | None = None, workers: int = 4) -> None:
        super().__init__(workers)
        self.client = client
        self.config = config
        self.namespace = namespace
        self.helper_image = helper_image
        self.service_account = service_account
        self.provisioner_name = provisioner_name
        self.config_map = config_map
        identity = identity or uuid.uuid4().hex
        # the library's event source: <provisioner>_<hostname>_<uuid>
        self.recorder = EventRecorder(client, f"{provisioner_name}_{identity}", workers=1)
        self.claims: Informer[PersistentVolumeClaim] = informers.informer_for(PersistentVolumeClaim)
        self.volumes: Informer[PersistentVolume] = informers.informer_for(PersistentVolume)
        self.classes: Informer[StorageClass] = informers.informer_for(StorageClass)
        self.nodes: Informer[Node] = informers.informer_for(Node)
        self.helpers: Informer[Pod] = informers.informer_for(Pod, namespace, label_selector=f"{hp.LABEL_HELPER}=true")
        self.watch(self.claims, lambda c: [CLAIM + meta_namespace_key(c)])
        self.watch(self.volumes, self._volume_keys)
        self.watch(self.helpers, self._helper_keys)
        self.classes.add_event_handler(on_add=self._class_changed, on_update=lambda _o, n: self._class_changed(n),
                                       on_delete=lambda _c: None)
        # a node appearing unblocks the claims selected for it (retried with back-off until then)
        self.nodes.add_event_handler(on_add=self._node_added, on_update=lambda _o, _n: None,
                                     on_delete=lambda _n: None)
        self.informers += [self.classes, self.nodes]
        self.provisioned = 0
        self.deleted = 0
        self._reported: set[tuple[str, str]] = set()  # (uid, reason) of one-time events

    # -- keys ------------------------------------------------------------------------------------

    @staticmethod
    def _volume_keys(volume: PersistentVolume) -> list[str]:
        keys = [VOLUME + (volume.metadata.name or "")]
        ref = volume.spec.claim_ref if volume.spec else None
        if ref is not None and ref.name:
            keys.append(f"{CLAIM}{ref.namespace}/{ref.name}")
        return keys

    def _helper_keys(self, pod: Pod) -> list[str]:
        annotations = pod.metadata.annotations or {}
        if annotations.get(hp.ANN_PROVISIONER, self.provisioner_name) != self.provisioner_name:
            return []  # another provisioner's helper in the same namespace
        keys = [HELPER + (pod.metadata.name or "")]
        if annotations.get(hp.ANN_CLAIM):
            keys.append(CLAIM + annotations[hp.ANN_CLAIM])
        if annotations.get(hp.ANN_ACTION) == hp.ACTION_DELETE and annotations.get(hp.ANN_VOLUME):
            keys.append(VOLUME + annotations[hp.ANN_VOLUME])
        return keys

    def _class_changed(self, storage_class: StorageClass) -> None:
        if storage_class.provisioner != self.provisioner_name:
            return
        for claim in self.claims.store.list():
            unbound = not (claim.spec and claim.spec.volume_name)
            if unbound and claim_class(claim.to_dict()) == storage_class.metadata.name:
                self.queue.add(CLAIM + meta_namespace_key(claim))

    def _node_added(self, node: Node) -> None:
        for claim in self.claims.store.list():
            if (claim.metadata.annotations or {}).get(ANN_SELECTED_NODE) == node.metadata.name and \
                    not (claim.spec and claim.spec.volume_name):
                self.queue.add(CLAIM + meta_namespace_key(claim))

    # -- caches ----------------------------------------------------------------------------------

    def _claim(self, key: str) -> Obj | None:
        found = self.claims.store.get(key)
        return found.to_dict() if found is not None else None

    def _volume(self, name: str) -> Obj | None:
        found = self.volumes.store.get(name)
        return found.to_dict() if found is not None else None

    def _class(self, name: str) -> Obj | None:
        found = self.classes.store.get(name)
        return found.to_dict() if found is not None else None

    def _helper(self, name: str) -> Obj | None:
        found = self.helpers.store.get(f"{self.namespace}/{name}")
        return found.to_dict() if found is not None else None

    async def reconcile(self, key: str) -> float | None:
        if key.startswith(CLAIM):
            return await self.sync_claim(key.removeprefix(CLAIM))
        if key.startswith(VOLUME):
            return await self.sync_volume(key.removeprefix(VOLUME))
        return await self.sync_helper(key.removeprefix(HELPER))

    # -- events ----------------------------------------------------------------------------------

    def _event(self, obj: Obj, type_: str, reason: str, message: str) -> None:
        model: Any = PersistentVolumeClaim if obj.get("metadata", {}).get("namespace") else PersistentVolume
        self.recorder.event(model.from_dict(obj), type_, reason, message)

    def _event_once(self, obj: Obj, type_: str, reason: str, message: str) -> None:
        key = (str(obj["metadata"].get("uid")), f"{reason}:{message}")
        if len(self._reported) > 10_000:  # a bound: at worst an event is said twice
            self._reported.clear()
        if key not in self._reported:
            self._reported.add(key)
            self._event(obj, type_, reason, message)

    # -- claims ----------------------------------------------------------------------------------

    def _should_provision(self, claim: Obj) -> bool:
        """shouldProvision: no volume yet, and this provisioner is the one asked (annotation, else the class)."""
        if (claim.get("spec") or {}).get("volumeName") or claim["metadata"].get("deletionTimestamp"):
            return False
        annotations = _annotations(claim)
        asked = annotations.get(ANN_STORAGE_PROVISIONER) or annotations.get(ANN_BETA_STORAGE_PROVISIONER)
        if asked:
            return asked == self.provisioner_name
        storage_class = self._class(claim_class(claim))
        return storage_class is not None and storage_class.get("provisioner") == self.provisioner_name

    async def sync_claim(self, key: str) -> float | None:
        claim = self._claim(key)
        if claim is None or not self._should_provision(claim):
            return None
        class_name = claim_class(claim)
        storage_class = self._class(class_name)
        if storage_class is None:
            raise RuntimeError(f'storageclass.storage.k8s.io "{class_name}" not found')  # retried: it may come
        name = volume_name(claim)
        if self._volume(name) is not None:  # made already (by us before a restart): only the helper to clear
            await self._delete_pod(hp.helper_pod_name(hp.ACTION_CREATE, name))
            return None
        node = _annotations(claim).get(ANN_SELECTED_NODE, "")
        if not node and binding_mode(storage_class) == BINDING_WAIT_FOR_FIRST_CONSUMER:
            return None  # the binder says WaitForFirstConsumer; the scheduler will pick the node
        try:
            return await self._provision(claim, storage_class, name, node)
        except ProvisioningError as e:
            self._event_once(claim, "Warning", "ProvisioningFailed",
                             f'failed to provision volume with StorageClass "{class_name}": {e}')
            return None

    async def _provision(self, claim: Obj, storage_class: Obj, name: str, node: str) -> float | None:
        spec = claim.get("spec") or {}
        if not self.config.shared:  # a shared file system: any node, any access mode
            if spec.get("selector"):
                raise ProvisioningError("claim.Spec.Selector is not supported")
            for mode in spec.get("accessModes") or []:
                if mode not in ("ReadWriteOnce", "ReadWriteOncePod"):
                    raise ProvisioningError(MODES_ERROR)
            if not node:
                raise ProvisioningError("configuration error, no node was specified")
        node_obj = self.nodes.store.get(node) if node else None
        if node and node_obj is None:
            raise RuntimeError(f'failed to get target node: node "{node}" not found')  # retried
        helper_name = hp.helper_pod_name(hp.ACTION_CREATE, name)
        helper = self._helper(helper_name)
        meta = claim["metadata"]
        size = parse_quantity(((spec.get("resources") or {}).get("requests") or {}).get("storage") or "0").int_value()
        if helper is None:
            if await self._get_volume(name) is not None:
                return None  # made a moment ago, not in the cache yet
            params = storage_class.get("parameters") or {}
            base = self.config.path_on_node(node, params.get("nodePath") or "")
            path = posixpath.join(base, "_".join([name, meta.get("namespace") or "", meta["name"]]))
            self._event_once(claim, "Normal", "Provisioning",
                             f'External provisioner is provisioning volume for claim "{meta.get("namespace")}/'
                             f'{meta["name"]}"')
            log.info("Creating volume %s at %s:%s", name, node, path)
            pod = hp.helper_pod(action=hp.ACTION_CREATE, volume=name, path=path, node=node, namespace=self.namespace,
                                image=self.helper_image, service_account=self.service_account,
                                config_map=self.config_map, size_bytes=size,
                                mode=spec.get("volumeMode") or "Filesystem",
                                claim=(meta.get("namespace") or "", meta["name"], meta.get("uid") or ""),
                                provisioner=self.provisioner_name)
            await self._create_pod(pod)
            return float(self.config.cmd_timeout)  # the helper's changes requeue the claim before that
        phase = _phase(helper)
        annotations = _annotations(helper)
        if phase == "Succeeded":
            labels = (node_obj.metadata.labels or {}) if node_obj is not None else {}
            volume = self._volume_for(claim, storage_class, name, annotations.get(hp.ANN_NODE) or node,
                                      annotations.get(hp.ANN_PATH) or "", labels)
            try:
                await self.client.create_raw(PersistentVolume, volume)
            except ApiError as e:
                if not e.is_already_exists:
                    raise
            else:
                self.provisioned += 1
                log.info("Volume %s has been created on %s:%s", name, node, volume_path(volume))
                self._event(claim, "Normal", "ProvisioningSucceeded", f"Successfully provisioned volume {name}")
            await self._delete_pod(helper_name)
            return None
        failed = phase == "Failed"
        if failed or self._helper_age(helper) > self.config.cmd_timeout:
            await self._delete_pod(helper_name)
            why = "create process failed" if failed else \
                f"create process timeout after {self.config.cmd_timeout} seconds"
            message = (f'failed to provision volume with StorageClass "{claim_class(claim)}": '
                       f"failed to create volume {name}: {why}")
            self._event(claim, "Warning", "ProvisioningFailed", message)
            raise RuntimeError(message)  # retried with back-off
        return max(1.0, self.config.cmd_timeout - self._helper_age(helper))

    def _volume_for(self, claim: Obj, storage_class: Obj, name: str, node: str, path: str,
                    node_labels: dict[str, str]) -> Obj:
        spec = claim.get("spec") or {}
        meta = claim["metadata"]
        volume_type = _annotations(claim).get("volumeType") or _annotations(storage_class).get("defaultVolumeType") \
            or "hostPath"
        source: Obj = {"local": {"path": path}} if volume_type.lower() == "local" else \
            {"hostPath": {"path": path, "type": "DirectoryOrCreate"}}
        key = (storage_class.get("parameters") or {}).get("nodeAffinityKey") or NODE_AFFINITY_KEY
        return {
            "apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": name, "finalizers": [FINALIZER],
                         "annotations": {ANN_NODE_NAME: node, ANN_DYNAMICALLY_PROVISIONED: self.provisioner_name}},
            "spec": {
                "persistentVolumeReclaimPolicy": storage_class.get("reclaimPolicy") or "Delete",
                "accessModes": list(spec.get("accessModes") or []),
                "volumeMode": "Filesystem",
                "capacity": {"storage": ((spec.get("resources") or {}).get("requests") or {}).get("storage")},
                **source,
                **({} if self.config.shared else {"nodeAffinity": {"required": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": key, "operator": "In", "values": [node_labels.get(key, node)]}]}]}}}),
                "claimRef": {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": meta.get("namespace"),
                             "name": meta["name"], "uid": meta.get("uid"),
                             "resourceVersion": meta.get("resourceVersion")},
                "storageClassName": storage_class["metadata"]["name"],
                **({"mountOptions": storage_class["mountOptions"]} if storage_class.get("mountOptions") else {}),
            },
        }

    # -- volumes ---------------------------------------------------------------------------------

    async def sync_volume(self, name: str) -> float | None:
        volume = self._volume(name)
        if volume is None or _annotations(volume).get(ANN_DYNAMICALLY_PROVISIONED) != self.provisioner_name:
            return None
        meta = volume["metadata"]
        deleting = bool(meta.get("deletionTimestamp"))
        policy = (volume.get("spec") or {}).get("persistentVolumeReclaimPolicy") or "Retain"
        if policy != "Delete":
            if deleting:
                await self._drop_finalizer(volume)
            return None
        if _phase(volume) not in ("Released", "Failed"):
            return None  # bound still (a deleted volume in use waits for pv-protection; the data stays)
        node, path = volume_node(volume), volume_path(volume)
        helper_name = hp.helper_pod_name(hp.ACTION_DELETE, name)
        helper = self._helper(helper_name)
        if helper is None:
            if not path or (not node and not self.config.shared):
                self._event(volume, "Warning", "VolumeFailedDelete",
                            f"failed to delete volume {name}: no path or no node affinity set")
                return None
            if node and self.nodes.store.get(node) is None:
                log.info("Node %s does not exist, skipping cleanup of volume %s", node, name)
                await self._finish_delete(volume, helper_name)
                return None
            log.info("Deleting volume %s at %s:%s", name, node, path)
            size = parse_quantity(((volume.get("spec") or {}).get("capacity") or {}).get("storage") or "0").int_value()
            await self._create_pod(hp.helper_pod(
                action=hp.ACTION_DELETE, volume=name, path=path, node=node, namespace=self.namespace,
                image=self.helper_image, service_account=self.service_account, config_map=self.config_map,
                size_bytes=size, provisioner=self.provisioner_name))
            return float(self.config.cmd_timeout)
        phase = _phase(helper)
        if phase == "Succeeded":
            log.info("Volume %s has been deleted on %s:%s", name, node, path)
            await self._finish_delete(volume, helper_name)
            return None
        if phase == "Failed" or self._helper_age(helper) > self.config.cmd_timeout:
            await self._delete_pod(helper_name)
            message = f"failed to delete volume {name}: failed to delete volume {name}: " + \
                ("delete process failed" if phase == "Failed" else
                 f"delete process timeout after {self.config.cmd_timeout} seconds")
            self._event(volume, "Warning", "VolumeFailedDelete", message)
            raise RuntimeError(message)
        return max(1.0, self.config.cmd_timeout - self._helper_age(helper))

    async def _finish_delete(self, volume: Obj, helper_name: str) -> None:
        """The data is gone: delete the volume object (unless it is being deleted) and drop our finalizer."""
        meta = volume["metadata"]
        if not meta.get("deletionTimestamp"):
            try:
                await self.client.delete(PersistentVolume, meta["name"], preconditions={"uid": meta.get("uid") or ""})
            except ApiError as e:
                if not (e.is_not_found or e.is_conflict):
                    raise
            fresh = await self._get_volume(meta["name"])
            if fresh is None:
                await self._delete_pod(helper_name)
                return
            volume = fresh
        await self._drop_finalizer(volume)
        self.deleted += 1
        await self._delete_pod(helper_name)

    async def _get_volume(self, name: str) -> Obj | None:
        try:
            return await self.client.get_raw(PersistentVolume, name)
        except ApiError as e:
            if e.is_not_found:
                return None
            raise

    async def _drop_finalizer(self, volume: Obj) -> None:
        finalizers = volume["metadata"].get("finalizers") or []
        if FINALIZER not in finalizers:
            return
        volume = copy.deepcopy(volume)
        volume["metadata"]["finalizers"] = [f for f in finalizers if f != FINALIZER]
        try:
            await self.client.update_raw(PersistentVolume, volume["metadata"]["name"], volume)
        except ApiError as e:
            if not e.is_not_found:
                raise  # a conflict: retried from the cache's newer copy

    # -- helper pods left behind -----------------------------------------------------------------

    async def sync_helper(self, name: str) -> float | None:
        """A helper pod whose owner is gone: a claim deleted while its directory was made (undo it), or a
        volume whose deletion finished before its helper was removed (remove it)."""
        pod = self._helper(name)
        if pod is None:
            return None
        annotations = _annotations(pod)
        action, volume = annotations.get(hp.ANN_ACTION), annotations.get(hp.ANN_VOLUME) or ""
        done = _phase(pod) in ("Succeeded", "Failed")
        if self._volume(volume) is not None:
            if action == hp.ACTION_CREATE and done:
                await self._delete_pod(name)  # the volume exists: its directory has an owner
            return None  # a delete helper belongs to the volume's own sync
        if action == hp.ACTION_CREATE:
            claim = self._claim(annotations.get(hp.ANN_CLAIM) or "")
            if claim is not None and claim["metadata"].get("uid") == annotations.get(hp.ANN_CLAIM_UID) \
                    and not claim["metadata"].get("deletionTimestamp"):
                return None  # the claim's sync owns it
            if not done:
                return None  # let it finish, then undo it (its changes requeue this key)
            teardown = hp.helper_pod_name(hp.ACTION_DELETE, volume)
            node = annotations.get(hp.ANN_NODE) or ""
            node_there = not node or node in self.nodes.store
            if self._helper(teardown) is None and node_there:
                log.info("Claim %s is gone: removing the directory %s made for it", annotations.get(hp.ANN_CLAIM),
                         annotations.get(hp.ANN_PATH))
                await self._create_pod(hp.helper_pod(
                    action=hp.ACTION_DELETE, volume=volume, path=annotations.get(hp.ANN_PATH) or "",
                    node=node, namespace=self.namespace, image=self.helper_image,
                    service_account=self.service_account, config_map=self.config_map, size_bytes=0,
                    provisioner=self.provisioner_name))
                return None
            if not node_there:
                await self._delete_pod(name)
            return None
        # a delete helper with no volume: an orphan's teardown, or a deletion finished before the pod was removed
        if not done:
            return None
        await self._delete_pod(hp.helper_pod_name(hp.ACTION_CREATE, volume))
        await self._delete_pod(name)
        return None

    # -- pods ------------------------------------------------------------------------------------

    @staticmethod
    def _helper_age(pod: Obj) -> float:
        created = parse_rfc3339(pod["metadata"].get("creationTimestamp"))
        return time.time() - created.timestamp() if created is not None else 0.0

    async def _create_pod(self, pod: Obj) -> None:
        log.info("create the helper pod %s into %s", pod["metadata"]["name"], self.namespace)
        try:
            await self.client.create_raw(Pod, pod, self.namespace)
        except ApiError as e:
            if not e.is_already_exists:
                raise

    async def _delete_pod(self, name: str) -> None:
        if self._helper(name) is None:
            return
        try:
            await self.client.delete(Pod, name, self.namespace, grace_period_seconds=0)
        except ApiError as e:
            if not e.is_not_found:
                raise
