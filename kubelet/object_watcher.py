"""The ConfigMaps and Secrets of this node's pods, each watched on its own (upstream: pkg/kubelet/util/manager/
watch_based_manager.go, the kubelet's default `Watch` configMapAndSecretChangeDetectionStrategy).

A pod registered at its sync names objects (machinery/podutil.py); each object a registered pod names gets an
informer of that single object (`fieldSelector=metadata.name=NAME` in the pod's namespace: what the Node
authorizer lets a kubelet list and watch), shared by reference count between the pods that name it and
stopped when the last of them goes. A sync reads the object from its informer once that has listed (a
missing object is None: the volume or env that needs it says so); before that, the caller reads it
directly, as upstream's Get falls back after its wait.

An immutable object is no longer watched once read (upstream's isImmutable): its cached copy serves.

Unlike upstream, which leaves the change to the next periodic sync of the pod, a change (the object
created, updated or deleted) wakes the pods that name it at once: a mounted ConfigMap's files follow an
update within a second or two, and a pod waiting for a missing ConfigMap starts as soon as it appears.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from machinery.api.core_v1 import ConfigMap, Pod, Secret
from machinery.client import ApiClient
from machinery.informer import Informer
from machinery.podutil import pod_configmap_names, pod_secret_names
from machinery.types import Obj

log = logging.getLogger(__name__)

Kind = type[ConfigMap] | type[Secret]
ObjectKey = tuple[str, str, str]  # ("configmaps" | "secrets", namespace, name)


@dataclass
class _Watched:
    informer: Informer[Any]
    task: asyncio.Task[None]
    pods: set[str] = field(default_factory=set)


def _plural(model: Kind) -> str:
    return "configmaps" if model is ConfigMap else "secrets"


def pod_object_keys(pod: Pod) -> set[ObjectKey]:
    wire = pod.to_dict()
    namespace = pod.metadata.namespace or ""
    return ({("configmaps", namespace, n) for n in pod_configmap_names(wire)}
            | {("secrets", namespace, n) for n in pod_secret_names(wire)})


class ObjectWatcher:
    def __init__(self, client: ApiClient, wake: Callable[[str], None]) -> None:
        self.client = client
        self.wake = wake  # pod uid -> sync it soon
        self.watched: dict[ObjectKey, _Watched] = {}
        self.pod_keys: dict[str, set[ObjectKey]] = {}

    def register_pod(self, pod: Pod) -> None:
        """upstream RegisterPod: watch what the pod names now, stop watching what it no longer names."""
        uid = pod.metadata.uid or ""
        keys = pod_object_keys(pod)
        for key in self.pod_keys.get(uid, set()) - keys:
            self._release(key, uid)
        for key in keys:
            watched = self.watched.get(key)
            if watched is None:
                watched = self.watched[key] = self._watch(key)
            watched.pods.add(uid)
        self.pod_keys[uid] = keys

    def unregister_pod(self, uid: str) -> None:
        for key in self.pod_keys.pop(uid, set()):
            self._release(key, uid)

    def _release(self, key: ObjectKey, uid: str) -> None:
        watched = self.watched.get(key)
        if watched is None:
            return
        watched.pods.discard(uid)
        if not watched.pods:
            del self.watched[key]
            watched.informer.stop()

    def _watch(self, key: ObjectKey) -> _Watched:
        plural, namespace, name = key
        model: Kind = ConfigMap if plural == "configmaps" else Secret
        informer: Informer[Any] = Informer(self.client, model, namespace=namespace,
                                           field_selector={"metadata.name": name})

        def changed(*objs: Any) -> None:
            watched = self.watched.get(key)
            for uid in list(watched.pods if watched is not None else ()):
                self.wake(uid)
            if objs and getattr(objs[-1], "immutable", None):
                informer.stop()  # upstream: an immutable object cannot change; its cached copy is kept

        informer.add_event_handler(on_add=changed, on_update=changed, on_delete=lambda obj: changed())
        return _Watched(informer, informer.start())

    async def get(self, model: Kind, namespace: str, name: str, wait: float = 1.0) -> tuple[bool, Obj | None]:
        """(True, the object or None when it does not exist) from the object's informer once it has listed;
        (False, None) when it is not watched or has not listed within `wait` seconds."""
        watched = self.watched.get((_plural(model), namespace, name))
        if watched is None:
            return False, None
        if not watched.informer.has_synced and not await watched.informer.wait_for_sync(wait):
            return False, None
        obj = watched.informer.get(name, namespace)
        return True, (obj.to_dict() if obj is not None else None)

    async def stop(self) -> None:
        watched = list(self.watched.values())
        self.watched.clear()
        self.pod_keys.clear()
        for w in watched:
            w.informer.stop()
        for w in watched:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(w.task, 5)
