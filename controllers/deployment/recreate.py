"""The Recreate strategy (upstream pkg/controller/deployment/recreate.go): scale every old
ReplicaSet to 0, wait until no old pod is left running, then create or scale the new one.
"""

from __future__ import annotations

from collections.abc import Sequence

from controllers.deployment.progress import ProgressSync
from controllers.deployment.util import active, actual_replica_count, deployment_complete, replicas
from machinery.api.apps_v1 import ReplicaSet
from machinery.api.core_v1 import Pod


def old_pods_running(new_rs: ReplicaSet | None, old_rss: Sequence[ReplicaSet],
                     pods_by_rs: dict[str, list[Pod]]) -> bool:
    """Recreate waits for this to be false: an old ReplicaSet still reports pods, or an old pod is
    not finished."""
    if actual_replica_count(old_rss) > 0:
        return True
    for uid, pods in pods_by_rs.items():
        if new_rs is not None and new_rs.metadata.uid == uid:
            continue
        for pod in pods:
            if (pod.status.phase if pod.status else None) not in ("Failed", "Succeeded"):
                return True
    return False


class RecreateSync(ProgressSync):
    """rolloutRecreate: every old pod gone before the new ReplicaSet is scaled up."""

    def pods_by_replicaset(self, rss: Sequence[ReplicaSet]) -> dict[str, list[Pod]]:
        raise NotImplementedError  # the controller's getPodMapForDeployment

    async def rollout_recreate(self, rss: list[ReplicaSet]) -> float | None:
        new_rs, old_rss = await self.get_all_replicasets_and_sync_revision(rss, False)
        all_rss: list[ReplicaSet | None] = [*old_rss, new_rs]
        scaled_down = False
        for rs in active(old_rss):
            scaled, _ = await self.scale_replicaset_and_record_event(rs, 0)
            scaled_down = scaled_down or scaled
        if scaled_down:
            return await self.sync_rollout_status(all_rss, new_rs)
        if old_pods_running(new_rs, old_rss, self.pods_by_replicaset(rss)):
            return await self.sync_rollout_status(all_rss, new_rs)
        if new_rs is None:
            new_rs, old_rss = await self.get_all_replicasets_and_sync_revision(rss, True)
            all_rss = [*old_rss, new_rs]
        assert new_rs is not None
        await self.scale_replicaset_and_record_event(new_rs, replicas(self.d))
        if deployment_complete(self.d, self.d.status):
            await self.cleanup(old_rss)
        return await self.sync_rollout_status(all_rss, new_rs)
