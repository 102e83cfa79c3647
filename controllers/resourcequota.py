"""The resource-quota controller (upstream pkg/controller/resourcequota/resource_quota_controller.go):
keeps each ResourceQuota's status.hard equal to spec.hard and status.used equal to what the
namespace's objects use now.

Admission charges a quota when an object is created; this controller gives the usage back when
objects go away or stop counting (a pod that finished), and corrects what admission charged for a
create that then failed. One reconcile of a quota key, as upstream's syncResourceQuota: compute the
usage of every resource named in spec.hard (machinery/quota.py, the evaluators admission uses) from
the informers' caches (pods, services, configmaps, secrets, claims, replication controllers) or, for
other `count/<resource>.<group>` names, a list through the API; write status only when it changed.
A change to a counted object (its delete, a pod turning Succeeded/Failed) enqueues the quotas of its
namespace (upstream's replenishment); every quota is also recomputed each --resource-quota-sync-period.
A change of a quota's status is not looked at (upstream ignores those too): admission writes status.used
as it admits, and a recompute from a pod cache a moment behind would take back what it just charged.
It writes as kube-system/resourcequota-controller (`system:controller:resourcequota-controller`).
"""

from __future__ import annotations

import logging
from typing import Any

from machinery.api import core_v1
from machinery.api.core_v1 import ResourceQuota
from machinery.api.resources import resource_for
from machinery.client import ApiClient, ApiError
from machinery.controller import Controller
from machinery.informer import Informer, SharedInformerFactory, meta_namespace_key, split_meta_namespace_key
from machinery.quota import calculate_usage, format_list, parse_list, resource_of
from machinery.types import Obj

log = logging.getLogger(__name__)

CONTROLLER_NAME = "resourcequota-controller"
SYNC_PERIOD = 300.0  # upstream --resource-quota-sync-period 5m0s
# the kinds whose changes are watched for replenishment (upstream's monitors watch every resource)
WATCHED: dict[tuple[str, str], Any] = {
           ("", "pods"): core_v1.Pod, ("", "services"): core_v1.Service, ("", "configmaps"): core_v1.ConfigMap,
           ("", "secrets"): core_v1.Secret, ("", "persistentvolumeclaims"): core_v1.PersistentVolumeClaim,
           ("", "replicationcontrollers"): core_v1.ReplicationController}


def status_of(quota: Obj, used: dict[str, str]) -> Obj:
    return {"hard": dict((quota.get("spec") or {}).get("hard") or {}), "used": used}


def status_changed(quota: Obj, new: Obj) -> bool:
    """Compared as quantities: "1Gi" written by admission equals "1024Mi" computed here."""
    old = quota.get("status") or {}
    for key in ("hard", "used"):
        if parse_list(old.get(key)) != parse_list(new.get(key)) or set(old.get(key) or {}) != set(new.get(key) or {}):
            return True
    return False


class ResourceQuotaController(Controller):
    name = "resourcequota"  # its --controllers name; it writes as CONTROLLER_NAME

    def __init__(self, client: ApiClient, informers: SharedInformerFactory, workers: int = 5,
                 sync_period: float = SYNC_PERIOD) -> None:
        super().__init__(workers)
        self.client = client
        self.sync_period = sync_period
        self.quota_informer: Informer[ResourceQuota] = informers.informer_for(ResourceQuota)
        self.quota_informer.add_event_handler(on_add=self._quota_added, on_update=self._quota_updated,
                                              on_delete=lambda q: None)
        self.informers.append(self.quota_informer)
        self.object_informers: dict[tuple[str, str], Informer[Any]] = {}
        for key, model in WATCHED.items():
            informer: Informer[Any] = informers.informer_for(model)
            self.object_informers[key] = informer
            informer.add_event_handler(on_update=self._object_updated, on_delete=self._object_deleted)
            self.informers.append(informer)

    # -- quotas --------------------------------------------------------------------------------

    def _quota_added(self, quota: ResourceQuota) -> None:
        self.queue.add(meta_namespace_key(quota))

    def _quota_updated(self, old: ResourceQuota, cur: ResourceQuota) -> None:
        """Only a change of spec.hard: status changes are admission's and this controller's own, and
        recomputing on them from caches a moment behind would undo what admission just charged."""
        old_hard = parse_list(old.spec.hard if old.spec else None)
        cur_hard = parse_list(cur.spec.hard if cur.spec else None)
        if old_hard != cur_hard or set(old_hard) != set(cur_hard):
            self.queue.add(meta_namespace_key(cur))

    # -- replenishment -----------------------------------------------------------------------

    def _enqueue_namespace(self, namespace: str | None) -> None:
        for quota in self.quota_informer.store.list():
            if quota.metadata.namespace == namespace:
                self.queue.add(meta_namespace_key(quota))

    def _object_updated(self, old: Any, cur: Any) -> None:
        if isinstance(cur, core_v1.Pod):
            # only a change of what a pod is charged for matters: its phase turning terminal
            old_phase = old.status.phase if old.status is not None else None
            cur_phase = cur.status.phase if cur.status is not None else None
            if old_phase == cur_phase:
                return
        elif old.metadata.resource_version == cur.metadata.resource_version:
            return
        self._enqueue_namespace(cur.metadata.namespace)

    def _object_deleted(self, obj: Any) -> None:
        self._enqueue_namespace(obj.metadata.namespace)

    # -- reconcile ---------------------------------------------------------------------------

    async def _objects(self, group: str, plural: str, namespace: str) -> list[Obj]:
        informer = self.object_informers.get((group, plural))
        if informer is not None:
            return [o.to_dict() for o in informer.store.list() if o.metadata.namespace == namespace]
        info = resource_for(group, plural)
        if info is None or not info.namespaced or info.virtual:
            return []
        items: list[Obj] = (await self.client.list_raw(info, namespace)).get("items") or []
        return items

    async def reconcile(self, key: str) -> float | None:
        namespace, name = split_meta_namespace_key(key)
        cached = self.quota_informer.store.get(key)
        if cached is None:
            return None
        quota = cached.to_dict()
        wanted = {resource_of(n) for n in ((quota.get("spec") or {}).get("hard") or {})} - {None}
        objects = {r: await self._objects(r[0], r[1], namespace or "") for r in wanted if r is not None}
        used = calculate_usage(quota, objects)
        status = status_of(quota, format_list(used))
        if status_changed(quota, status):
            quota["status"] = status
            try:
                await self.client.update_raw(ResourceQuota, name, quota, namespace, subresource="status")
            except ApiError as e:
                if e.is_not_found:
                    return None
                raise  # a conflict (admission charged it meanwhile): again, with back-off, from the new cache
            log.info("%s: status.used %s", key, status["used"])
        return self.sync_period
