"""The Progressing condition (upstream pkg/controller/deployment/progress.go): after a rollout
step, the status with Progressing (ReplicaSetUpdated, NewReplicaSetAvailable, or
ProgressDeadlineExceeded past progressDeadlineSeconds without progress) and the ReplicaSets'
ReplicaFailure, and when to look again so the deadline is noticed (requeueStuckDeployment).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from controllers.deployment.sync import DeploymentSync, calculate_status
from controllers.deployment.util import (
    NEW_RS_AVAILABLE,
    PROGRESSING,
    REPLICA_FAILURE,
    REPLICASET_UPDATED,
    TIMED_OUT,
    deployment_complete,
    deployment_progressing,
    deployment_timed_out,
    get_condition,
    has_progress_deadline,
    new_condition,
    remove_condition,
    set_condition,
    status_equal,
)
from machinery.api.apps_v1 import Deployment, DeploymentCondition, DeploymentStatus, ReplicaSet
from machinery.timeutil import now as now_utc
from machinery.timeutil import parse_rfc3339 as parse_time


def rollout_status(d: Deployment, all_rss: Sequence[ReplicaSet | None], new_rs: ReplicaSet | None,
                   now: dt.datetime | None = None) -> DeploymentStatus:
    """syncRolloutStatus' computation: the status plus the Progressing and ReplicaFailure conditions."""
    now = now or now_utc()
    status = calculate_status(all_rss, new_rs, d, now)
    if not has_progress_deadline(d):
        remove_condition(status, PROGRESSING)
    current = get_condition(d.status, PROGRESSING)
    complete_before = (status.replicas == status.updated_replicas and current is not None
                       and current.reason == NEW_RS_AVAILABLE)
    if has_progress_deadline(d) and not complete_before:
        name = new_rs.metadata.name if new_rs is not None else None
        if deployment_complete(d, status):
            msg = (f'ReplicaSet "{name}" has successfully progressed.' if name
                   else f'Deployment "{d.metadata.name}" has successfully progressed.')
            set_condition(status, new_condition(PROGRESSING, "True", NEW_RS_AVAILABLE, msg, now))
        elif deployment_progressing(d, status):
            msg = (f'ReplicaSet "{name}" is progressing.' if name
                   else f'Deployment "{d.metadata.name}" is progressing.')
            cond = new_condition(PROGRESSING, "True", REPLICASET_UPDATED, msg, now)
            if current is not None:
                if current.status == "True":
                    cond = cond.model_copy(update={"last_transition_time": current.last_transition_time})
                remove_condition(status, PROGRESSING)
            set_condition(status, cond)
        elif deployment_timed_out(d, status, now):
            msg = (f'ReplicaSet "{name}" has timed out progressing.' if name
                   else f'Deployment "{d.metadata.name}" has timed out progressing.')
            set_condition(status, new_condition(PROGRESSING, "False", TIMED_OUT, msg, now))
    failures = replica_failures(all_rss, new_rs)
    if failures:
        set_condition(status, failures[0])
    else:
        remove_condition(status, REPLICA_FAILURE)
    status.conditions = status.conditions or None
    return status


def replica_failures(all_rss: Sequence[ReplicaSet | None], new_rs: ReplicaSet | None) -> list[DeploymentCondition]:
    """ReplicaFailure conditions of the new ReplicaSet, else of any ReplicaSet, as Deployment conditions."""
    def of(rs: ReplicaSet | None) -> list[DeploymentCondition]:
        out = []
        for c in (rs.status.conditions if rs is not None and rs.status else None) or []:
            if c.type == REPLICA_FAILURE:
                out.append(DeploymentCondition(type=c.type, status=c.status, reason=c.reason, message=c.message,
                                               last_transition_time=c.last_transition_time,
                                               last_update_time=c.last_transition_time))
        return out

    found = of(new_rs)
    if found:
        return found
    return [c for rs in all_rss for c in of(rs)]


def requeue_after(d: Deployment, new: DeploymentStatus, now: dt.datetime | None = None) -> float | None:
    """requeueStuckDeployment: when to look again to notice the progress deadline passing."""
    current = get_condition(d.status, PROGRESSING)
    if not has_progress_deadline(d) or current is None:
        return None
    if deployment_complete(d, new) or current.reason == TIMED_OUT:
        return None
    since = parse_time(current.last_update_time)
    if since is None:
        return None
    deadline = since + dt.timedelta(seconds=d.spec.progress_deadline_seconds or 0)  # type: ignore[union-attr]
    after = (deadline - (now or now_utc())).total_seconds()
    return max(after, 0.0) + 1.0  # a second more, for the whole seconds timestamps are kept in


class ProgressSync(DeploymentSync):
    """syncRolloutStatus: the status with the Progressing condition, after a rollout step."""

    async def sync_rollout_status(self, all_rss: Sequence[ReplicaSet | None],
                                  new_rs: ReplicaSet | None) -> float | None:
        d = self.d
        status = rollout_status(d, all_rss, new_rs)
        if status_equal(d.status, status):
            return requeue_after(d, status)
        d.status = status
        await self.write_status()
        return None
