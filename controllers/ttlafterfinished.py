"""The TTL-after-finished controller (upstream pkg/controller/ttlafterfinished/ttlafterfinished_controller.go):
a finished Job with spec.ttlSecondsAfterFinished is deleted (background propagation, so the garbage
collector removes its pods) that many seconds after its Complete or Failed condition. Before deleting
it reads the Job fresh from the apiserver, as upstream does, so a TTL changed meanwhile is honoured,
and deletes with the uid and resourceVersion it checked as preconditions."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable

from machinery import timeutil
from machinery.api.batch_v1 import Job
from machinery.client import ApiClient, ApiError
from machinery.controller import Controller
from machinery.informer import Informer, SharedInformerFactory, split_meta_namespace_key

log = logging.getLogger(__name__)


def finish_time(job: Job) -> dt.datetime | None:
    """jobFinishTime: when the Complete or Failed condition turned True."""
    for c in (job.status.conditions if job.status else None) or []:
        if c.type in ("Complete", "Failed") and c.status == "True":
            return timeutil.parse_rfc3339(c.last_transition_time)
    return None


def time_left(job: Job, now: dt.datetime) -> float | None:
    """Seconds until the Job expires (<= 0: expired), None when it has no TTL or is not finished."""
    ttl = job.spec.ttl_seconds_after_finished if job.spec else None
    if ttl is None or job.metadata.deletion_timestamp is not None:
        return None
    finished = finish_time(job)
    if finished is None:
        return None
    return (finished + dt.timedelta(seconds=ttl) - now).total_seconds()


class TTLAfterFinishedController(Controller):
    name = "ttl-after-finished"

    def __init__(self, client: ApiClient, informers: SharedInformerFactory, workers: int = 5,
                 clock: Callable[[], dt.datetime] = timeutil.now) -> None:
        super().__init__(workers)
        self.client = client
        self.clock = clock
        self.job_informer: Informer[Job] = informers.informer_for(Job)
        self.watch(self.job_informer)
        self.informers.append(self.job_informer)

    async def reconcile(self, key: str) -> float | None:
        job = self.job_informer.store.get(key)
        if job is None:
            return None
        left = time_left(job, self.clock())
        if left is None:
            return None
        if left > 0:
            return left
        namespace, name = split_meta_namespace_key(key)
        try:
            fresh = await self.client.get(Job, name, namespace)  # the cache may be stale: check again
        except ApiError as e:
            if e.is_not_found:
                return None
            raise
        left = time_left(fresh, self.clock())
        if left is None:
            return None
        if left > 0:
            return left
        log.info("cleaning up Job %s", key)
        try:
            await self.client.delete_raw(Job, name, namespace, propagation_policy="Background",
                                         preconditions={"uid": fresh.metadata.uid or "",
                                                        "resourceVersion": fresh.metadata.resource_version or ""})
        except ApiError as e:
            if not (e.is_not_found or e.is_conflict):
                raise
        return None
