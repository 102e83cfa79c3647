"""The RollingUpdate strategy (upstream pkg/controller/deployment/rolling.go): scale the new
ReplicaSet up while all pods stay within replicas + maxSurge; scale old ones down, their
unavailable pods first, while available pods stay at least replicas - maxUnavailable; clean
up old ReplicaSets once the rollout is complete.
"""

from __future__ import annotations

from collections.abc import Sequence

from controllers.deployment.progress import ProgressSync
from controllers.deployment.util import (
    active,
    by_creation,
    deployment_complete,
    max_unavailable,
    new_rs_new_replicas,
    replicas,
    safe_available,
    spec_replica_count,
)
from machinery.api.apps_v1 import Deployment, ReplicaSet


def old_replicas_max_scaled_down(d: Deployment, all_rss: Sequence[ReplicaSet | None], new_rs: ReplicaSet | None) -> int:
    """reconcileOldReplicaSets' budget: pods that may go without dropping below
    replicas - maxUnavailable, counting the new ReplicaSet's unavailable pods as already missing."""
    min_available = replicas(d) - max_unavailable(d)
    new_unavailable = replicas(new_rs) - safe_available(new_rs) if new_rs is not None else 0
    return spec_replica_count(all_rss) - min_available - new_unavailable


def cleanup_unhealthy_plan(old_rss: Sequence[ReplicaSet], max_cleanup: int) -> list[tuple[ReplicaSet, int]]:
    """cleanupUnhealthyReplicas: scale old ReplicaSets down by their unavailable pods first
    (oldest first), at most max_cleanup in all. Returns (ReplicaSet, new size) for each change."""
    plan: list[tuple[ReplicaSet, int]] = []
    total = 0
    for rs in by_creation(old_rss):
        if total >= max_cleanup:
            break
        size = replicas(rs)
        unhealthy = size - safe_available(rs)
        if size == 0 or unhealthy <= 0:
            continue
        count = min(max_cleanup - total, unhealthy)
        plan.append((rs, size - count))
        total += count
    return plan


def scale_down_old_plan(d: Deployment, all_rss: Sequence[ReplicaSet | None],
                        old_rss: Sequence[ReplicaSet]) -> list[tuple[ReplicaSet, int]]:
    """scaleDownOldReplicaSetsForRollingUpdate: take available pods from old ReplicaSets (oldest
    first) while more than replicas - maxUnavailable are available."""
    min_available = replicas(d) - max_unavailable(d)
    available = sum(safe_available(rs) for rs in all_rss if rs is not None)
    if available <= min_available:
        return []
    budget = available - min_available
    plan: list[tuple[ReplicaSet, int]] = []
    total = 0
    for rs in by_creation(old_rss):
        if total >= budget:
            break
        size = replicas(rs)
        if size == 0:
            continue
        count = min(size, budget - total)
        plan.append((rs, size - count))
        total += count
    return plan


class RollingSync(ProgressSync):
    """rolloutRolling: scale the new ReplicaSet up within maxSurge, old ones down within maxUnavailable."""

    async def rollout_rolling(self, rss: list[ReplicaSet]) -> float | None:
        new_rs, old_rss = await self.get_all_replicasets_and_sync_revision(rss, True)
        assert new_rs is not None
        all_rss: list[ReplicaSet] = [*old_rss, new_rs]
        scaled_up, new_rs = await self.reconcile_new_replicaset(all_rss, new_rs)
        all_rss = [*old_rss, new_rs]
        if scaled_up:
            return await self.sync_rollout_status(all_rss, new_rs)
        if await self.reconcile_old_replicasets(all_rss, active(old_rss), new_rs):
            return await self.sync_rollout_status(all_rss, new_rs)
        if deployment_complete(self.d, self.d.status):
            await self.cleanup(old_rss)
        return await self.sync_rollout_status(all_rss, new_rs)

    async def reconcile_new_replicaset(self, all_rss: list[ReplicaSet], new_rs: ReplicaSet) -> tuple[bool, ReplicaSet]:
        want = replicas(self.d)
        if replicas(new_rs) == want:
            return False, new_rs
        if replicas(new_rs) > want:
            return await self.scale_replicaset_and_record_event(new_rs, want)
        return await self.scale_replicaset_and_record_event(new_rs, new_rs_new_replicas(self.d, all_rss, new_rs))

    async def reconcile_old_replicasets(self, all_rss: list[ReplicaSet], old_rss: list[ReplicaSet],
                                        new_rs: ReplicaSet) -> bool:
        if spec_replica_count(old_rss) == 0:
            return False
        budget = old_replicas_max_scaled_down(self.d, all_rss, new_rs)
        if budget <= 0:
            return False
        scaled = 0
        current = {rs.metadata.uid: rs for rs in old_rss}
        for rs, size in cleanup_unhealthy_plan(old_rss, budget):
            _, updated = await self.scale_replicaset_and_record_event(rs, size)
            scaled += replicas(rs) - size
            current[rs.metadata.uid] = updated
        olds = list(current.values())
        for rs, size in scale_down_old_plan(self.d, [*olds, new_rs], olds):
            await self.scale_replicaset_and_record_event(rs, size)
            scaled += replicas(rs) - size
        return scaled > 0
