"""The Secrets and ConfigMaps a pod refers to (upstream: pkg/api/v1/pod/util.go VisitPodSecretNames and
VisitPodConfigmapNames), over a pod's wire form: the Node authorizer's edges from a pod to what its
node may read, and the kubelet's list of what to fetch.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from machinery.types import Obj


def _containers(spec: Obj) -> Iterator[Obj]:
    for key in ("initContainers", "containers", "ephemeralContainers"):
        yield from spec.get(key) or []


def _projected_sources(volume: Obj) -> Iterator[Obj]:
    projected: Any = volume.get("projected") or {}
    yield from projected.get("sources") or []


def pod_secret_names(pod: Obj) -> set[str]:
    """Secrets named by imagePullSecrets, secret and projected volumes (and the volume plugins that take a
    secretRef), env valueFrom.secretKeyRef and envFrom.secretRef."""
    spec: Obj = pod.get("spec") or {}
    names: set[Any] = {ref.get("name") for ref in spec.get("imagePullSecrets") or []}
    for container in _containers(spec):
        names |= {(env.get("secretRef") or {}).get("name") for env in container.get("envFrom") or []}
        names |= {((env.get("valueFrom") or {}).get("secretKeyRef") or {}).get("name")
                  for env in container.get("env") or []}
    for volume in spec.get("volumes") or []:
        names.add((volume.get("secret") or {}).get("secretName"))
        names |= {(source.get("secret") or {}).get("name") for source in _projected_sources(volume)}
        for plugin_name, plugin in volume.items():  # cephfs, cinder, flexVolume, iscsi, rbd, scaleIO, ...
            if not isinstance(plugin, dict):
                continue
            names.add((plugin.get("secretRef") or {}).get("name"))
            if plugin_name == "azureFile":
                names.add(plugin.get("secretName"))
            elif plugin_name == "csi":
                names.add((plugin.get("nodePublishSecretRef") or {}).get("name"))
    return {n for n in names if isinstance(n, str) and n}


def pod_configmap_names(pod: Obj) -> set[str]:
    """ConfigMaps named by configMap and projected volumes, env valueFrom.configMapKeyRef and
    envFrom.configMapRef."""
    spec: Obj = pod.get("spec") or {}
    names: set[Any] = set()
    for container in _containers(spec):
        names |= {(env.get("configMapRef") or {}).get("name") for env in container.get("envFrom") or []}
        names |= {((env.get("valueFrom") or {}).get("configMapKeyRef") or {}).get("name")
                  for env in container.get("env") or []}
    for volume in spec.get("volumes") or []:
        names.add((volume.get("configMap") or {}).get("name"))
        names |= {(source.get("configMap") or {}).get("name") for source in _projected_sources(volume)}
    return {n for n in names if isinstance(n, str) and n}
