"""The Deployment controller (upstream pkg/controller/deployment/deployment_controller.go): roll
pods from one template to the next through ReplicaSets.

A Deployment owns one ReplicaSet per pod template it has had, named `{deployment}-{hash}` where
the hash (controllers.hashing) is also the `pod-template-hash` label on the ReplicaSet, its
selector and its template, so the ReplicaSets never select each other's pods. The one whose
template equals the Deployment's is the *new* ReplicaSet; the others are *old*. Here are the
informers, the event handlers and the queue, and syncDeployment's first steps:

- claim ReplicaSets (adopt matching orphans, release owned ones that stopped matching);
- deleting, paused, or a scaling event (spec.replicas differs from what the active ReplicaSets
  were sized for): only the status, or only scale (sync.py);
- Recreate (recreate.py) or RollingUpdate (rolling.py), then the status with the Progressing
  condition (progress.py).

The arithmetic is in pure functions (util.py; tests/unit/test_deployment_logic.py); a sync only
reads the caches, calls them and writes the results.
"""

from __future__ import annotations

from collections.abc import Sequence

from controllers.controller_ref_manager import ControllerRefManager, controller_ref, recheck_deletion_timestamp
from controllers.controller_utils import (
    ORPHAN_INDEX,
    ensure_indexers,
    label_selector_of,
    orphan_index,
    owned_and_orphans,
)
from controllers.deployment.recreate import RecreateSync
from controllers.deployment.rolling import RollingSync
from controllers.deployment.util import is_rolling_update
from machinery.api.apps_v1 import Deployment, DeploymentStatus, ReplicaSet
from machinery.api.core_v1 import Pod
from machinery.client import ApiClient
from machinery.controller import Controller
from machinery.events import EventRecorder
from machinery.informer import (
    CONTROLLER_UID_INDEX,
    Informer,
    SharedInformerFactory,
    controller_uid_index,
    meta_namespace_key,
)

CONTROLLER_NAME = "deployment-controller"


class DeploymentController(Controller):
    name = "deployment"  # its --controllers name; it writes as CONTROLLER_NAME

    def __init__(self, client: ApiClient, informers: SharedInformerFactory, workers: int = 5) -> None:
        super().__init__(workers)
        self.client = client
        self.recorder = EventRecorder(client, CONTROLLER_NAME)
        self.d_informer: Informer[Deployment] = informers.informer_for(Deployment)
        self.rs_informer: Informer[ReplicaSet] = informers.informer_for(ReplicaSet)
        self.pod_informer: Informer[Pod] = informers.informer_for(Pod)
        indexes = {CONTROLLER_UID_INDEX: controller_uid_index, ORPHAN_INDEX: orphan_index}
        ensure_indexers(self.rs_informer, indexes)
        ensure_indexers(self.pod_informer, indexes)
        enqueue = self._enqueue
        self.d_informer.add_event_handler(enqueue, lambda old, new: enqueue(new), enqueue)
        self.rs_informer.add_event_handler(self._rs_added, self._rs_updated, self._rs_deleted)
        self.pod_informer.add_event_handler(on_delete=self._pod_deleted)
        self.informers.extend([self.d_informer, self.rs_informer, self.pod_informer])

    # -- event handlers ---------------------------------------------------------------------------

    def _enqueue(self, d: Deployment) -> None:
        self.queue.add(meta_namespace_key(d))

    def _resolve(self, namespace: str | None, rs: ReplicaSet) -> Deployment | None:
        ref = controller_ref(rs)
        if ref is None or ref.kind != "Deployment":
            return None
        d = self.d_informer.store.get_by_name(ref.name, namespace)
        return d if d is not None and d.metadata.uid == ref.uid else None

    def _deployments_for_rs(self, rs: ReplicaSet) -> list[Deployment]:
        labels = rs.metadata.labels or {}
        out = []
        for d in self.d_informer.store.list():
            if d.metadata.namespace != rs.metadata.namespace:
                continue
            sel = label_selector_of(d)
            if not sel.empty and sel.matches(labels):
                out.append(d)
        return out

    def _rs_added(self, rs: ReplicaSet) -> None:
        if rs.metadata.deletion_timestamp is not None:
            self._rs_deleted(rs)
            return
        if controller_ref(rs) is not None:
            d = self._resolve(rs.metadata.namespace, rs)
            if d is not None:
                self._enqueue(d)
            return
        for d in self._deployments_for_rs(rs):
            self._enqueue(d)

    def _rs_updated(self, old: ReplicaSet, cur: ReplicaSet) -> None:
        if old.metadata.resource_version == cur.metadata.resource_version:
            return
        cur_ref, old_ref = controller_ref(cur), controller_ref(old)
        ref_changed = (cur_ref.uid if cur_ref else None) != (old_ref.uid if old_ref else None)
        if ref_changed and old_ref is not None:
            d = self._resolve(old.metadata.namespace, old)
            if d is not None:
                self._enqueue(d)
        if cur_ref is not None:
            d = self._resolve(cur.metadata.namespace, cur)
            if d is not None:
                self._enqueue(d)
            return
        if ref_changed or (old.metadata.labels or {}) != (cur.metadata.labels or {}):
            for d in self._deployments_for_rs(cur):
                self._enqueue(d)

    def _rs_deleted(self, rs: ReplicaSet) -> None:
        d = self._resolve(rs.metadata.namespace, rs)
        if d is not None:
            self._enqueue(d)

    def _pod_deleted(self, pod: Pod) -> None:
        """Recreate waits for the old pods to be gone: a pod going may be the last one."""
        ref = controller_ref(pod)
        if ref is None or ref.kind != "ReplicaSet":
            return
        rs = self.rs_informer.store.get_by_name(ref.name, pod.metadata.namespace)
        if rs is None or rs.metadata.uid != ref.uid:
            return
        d = self._resolve(rs.metadata.namespace, rs)
        if d is not None and not is_rolling_update(d):
            self._enqueue(d)

    # -- reconcile --------------------------------------------------------------------------------

    async def reconcile(self, key: str) -> float | None:
        cached = self.d_informer.store.get(key)
        if cached is None:
            return None
        return await _Sync(self, cached).run()


class _Sync(RollingSync, RecreateSync):
    """One syncDeployment, from its first step: claim the ReplicaSets, then scale or roll out."""

    # -- the flow ---------------------------------------------------------------------------------

    async def run(self) -> float | None:
        d = self.d
        assert d.spec is not None
        if label_selector_of(d).empty:
            self.ctl.recorder.event(d, "Warning", "SelectingAll",
                                    "This deployment is selecting all pods. A non-empty selector is required.")
            if ((d.status.observed_generation if d.status else None) or 0) < (d.metadata.generation or 0):
                d.status = (d.status or DeploymentStatus()).model_copy(
                    update={"observed_generation": d.metadata.generation})
                await self.write_status()
            return None
        rss = await self.replicasets()
        if d.metadata.deletion_timestamp is not None:
            return await self.sync_status_only(rss)
        await self.check_paused_conditions()
        if d.spec.paused:
            return await self.sync(rss)
        if await self.is_scaling_event(rss):
            return await self.sync(rss)
        if not is_rolling_update(d):
            return await self.rollout_recreate(rss)
        return await self.rollout_rolling(rss)

    async def replicasets(self) -> list[ReplicaSet]:
        """getReplicaSetsForDeployment: owned ReplicaSets and orphans the selector claims."""
        d = self.d
        candidates = owned_and_orphans(self.ctl.rs_informer, d.metadata.uid or "", self.ns)
        manager = ControllerRefManager(self.client, d, "apps/v1", "Deployment", label_selector_of(d), ReplicaSet,
                                       recheck_deletion_timestamp(self.client, d))
        return await manager.claim(candidates)

    def pods_by_replicaset(self, rss: Sequence[ReplicaSet]) -> dict[str, list[Pod]]:
        """getPodMapForDeployment: the Deployment's pods grouped by the ReplicaSet controlling them."""
        selector = label_selector_of(self.d)
        out: dict[str, list[Pod]] = {}
        for rs in rss:
            uid = rs.metadata.uid or ""
            out[uid] = [p for p in self.ctl.pod_informer.store.by_index(CONTROLLER_UID_INDEX, uid)
                        if selector.matches(p.metadata.labels or {})]
        return out
