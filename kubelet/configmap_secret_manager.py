"""The ConfigMaps and Secrets a pod uses, read for its sync (upstream: pkg/kubelet/configmap/
configmap_manager.go and pkg/kubelet/secret/secret_manager.go, over pkg/kubelet/util/manager).

With a watcher (kubelet/object_watcher.py, what the kubelet runs: upstream's default `Watch` strategy),
each object a pod uses is watched on its own and read from that cache, and a change wakes the pods that
use it; without one, the objects are read at each sync of the pod (upstream's "Get" strategy without its
TTL). The Node authorizer lets a kubelet read exactly these objects (machinery/podutil.py names them).
"""

from __future__ import annotations

import asyncio
import base64
from dataclasses import dataclass, field

from kubelet import volume_pvc
from kubelet.object_watcher import ObjectWatcher
from kubelet.token_manager import TokenKey
from machinery.api.core_v1 import ConfigMap, Pod, Secret
from machinery.client import ApiClient, ApiError
from machinery.podutil import pod_configmap_names, pod_secret_names
from machinery.types import Obj


@dataclass
class PodObjects:
    """What one sync of a pod read: name -> object, or None when it does not exist."""

    namespace: str = ""
    configmaps: dict[str, Obj | None] = field(default_factory=dict)
    secrets: dict[str, Obj | None] = field(default_factory=dict)
    # the service-account tokens of its projected volumes (kubelet/token_manager.py), or why there is none
    tokens: dict[TokenKey, str | Exception] = field(default_factory=dict)
    claims: dict[str, volume_pvc.ClaimState] = field(default_factory=dict)  # claim name -> it and its volume

    def configmap_data(self, name: str) -> dict[str, bytes] | None:
        """A ConfigMap's keys and their bytes (data as UTF-8, binaryData decoded); None if it is missing."""
        cm = self.configmaps.get(name)
        if cm is None:
            return None
        out = {k: v.encode() for k, v in (cm.get("data") or {}).items()}
        out.update({k: base64.b64decode(v) for k, v in (cm.get("binaryData") or {}).items()})
        return out

    def secret_data(self, name: str) -> dict[str, bytes] | None:
        secret = self.secrets.get(name)
        if secret is None:
            return None
        return {k: base64.b64decode(v) for k, v in (secret.get("data") or {}).items()}


class ConfigMapSecretManager:
    def __init__(self, client: ApiClient, watcher: ObjectWatcher | None = None) -> None:
        self.client = client
        self.watcher = watcher  # kubelet/object_watcher.py: each object watched; None reads at each sync

    async def _get(self, model: type[ConfigMap] | type[Secret], name: str, namespace: str) -> Obj | None:
        if self.watcher is not None:
            known, obj = await self.watcher.get(model, namespace, name)
            if known:
                return obj
        try:
            return await self.client.get_raw(model, name, namespace)
        except ApiError as e:
            if e.is_not_found:
                return None
            raise

    async def fetch(self, pod: Pod) -> PodObjects:
        """Every ConfigMap and Secret the pod names, read now; an unreachable apiserver raises (the sync is
        retried), a missing object is None (the volume or env that needs it says so)."""
        if self.watcher is not None:
            self.watcher.register_pod(pod)
        wire = pod.to_dict()
        namespace = pod.metadata.namespace or ""
        cm_names = sorted(pod_configmap_names(wire))
        secret_names = sorted(pod_secret_names(wire))
        found = await asyncio.gather(*(self._get(ConfigMap, n, namespace) for n in cm_names),
                                     *(self._get(Secret, n, namespace) for n in secret_names))
        return PodObjects(namespace, dict(zip(cm_names, found[:len(cm_names)], strict=True)),
                          dict(zip(secret_names, found[len(cm_names):], strict=True)),
                          claims=await volume_pvc.fetch(self.client, pod))
