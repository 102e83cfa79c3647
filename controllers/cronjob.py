"""The CronJob controller (upstream pkg/controller/cronjob: cronjob_controllerv2.go syncCronJob, utils.go).

One reconcile of a CronJob key:
1. status.active is brought in line with the Jobs it controls: finished ones leave it (a Complete
   one moves lastSuccessfulTime); a running one it does not list is reported (UnexpectedJob), not adopted;
2. suspended, or being deleted: nothing more;
3. the most recent scheduled time not yet run (upstream's mostRecentScheduleTime): counting from
   lastScheduleTime (or creation), at most startingDeadlineSeconds back; more than 100 missed is
   one TooManyMissedTimes warning, not a flood of Jobs: only the latest one runs;
4. concurrencyPolicy: Forbid skips while a Job runs, Replace deletes the running ones first;
5. the Job `<cronjob>-<minutes since the epoch>` from jobTemplate, owned by the CronJob;
6. history: finished Jobs beyond successful/failedJobsHistoryLimit are deleted, oldest first;
7. requeue for the next scheduled time.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from controllers.controller_ref_manager import controller_ref, new_controller_ref
from controllers.controller_utils import ensure_indexers
from machinery import timeutil
from machinery.api.batch_v1 import CRONJOB_SCHEDULED_TIMESTAMP_ANNOTATION, CronJob, CronJobStatus, Job
from machinery.api.core_v1 import ObjectReference
from machinery.client import ApiClient, ApiError
from machinery.controller import Controller
from machinery.cron import Schedule, ScheduleError, parse_standard
from machinery.events import EventRecorder
from machinery.informer import (
    CONTROLLER_UID_INDEX,
    Informer,
    SharedInformerFactory,
    controller_uid_index,
)

log = logging.getLogger(__name__)

CONTROLLER_NAME = "cronjob-controller"
MAX_MISSED_SCHEDULES = 100  # more than this many missed start times is reported, not replayed
NEXT_SCHEDULE_DELTA = 0.1  # upstream nextScheduleDelta: wake just after the scheduled time


@dataclass(frozen=True)
class ScheduleDecision:
    most_recent: dt.datetime | None  # the latest unmet scheduled time, or None
    missed: int  # how many scheduled times passed since the last one run (capped at MAX_MISSED_SCHEDULES + 1)


def most_recent_schedule_time(schedule: Schedule, earliest: dt.datetime, now: dt.datetime,
                              starting_deadline_seconds: int | None) -> ScheduleDecision:
    """mostRecentScheduleTime: the latest scheduled time in (earliest, now], counting the misses.
    With startingDeadlineSeconds the window starts no earlier than now minus the deadline."""
    if starting_deadline_seconds is not None:
        earliest = max(earliest, now - dt.timedelta(seconds=starting_deadline_seconds))
    if earliest > now:
        return ScheduleDecision(None, 0)
    t = schedule.next(earliest)
    missed = 0
    latest: dt.datetime | None = None
    while t is not None and t <= now:
        latest = t
        missed += 1
        if missed > MAX_MISSED_SCHEDULES:
            # enough to know there are too many; the latest one is the last at or before now
            latest = schedule.previous(now)
            break
        t = schedule.next(t)
    return ScheduleDecision(latest, missed)


def job_name_for(cronjob_name: str, scheduled: dt.datetime) -> str:
    """getJobName: `<cronjob>-<minutes since the epoch>`."""
    return f"{cronjob_name}-{int(scheduled.timestamp()) // 60}"


def job_finished(job: Job) -> str | None:
    """"Complete" or "Failed" when the Job has that condition True."""
    for c in (job.status.conditions if job.status else None) or []:
        if c.type in ("Complete", "Failed") and c.status == "True":
            return c.type
    return None


def jobs_to_prune(jobs: list[Job], successful_limit: int | None, failed_limit: int | None) -> list[Job]:
    """cleanupFinishedJobs: the oldest finished Jobs beyond each history limit."""
    out: list[Job] = []
    for kind, limit in (("Complete", successful_limit), ("Failed", failed_limit)):
        if limit is None:
            continue
        finished = sorted((j for j in jobs if job_finished(j) == kind),
                          key=lambda j: ((j.status.start_time if j.status else None) or j.metadata.creation_timestamp
                                         or "", j.metadata.name or ""))
        if len(finished) > limit:
            out += finished[:len(finished) - limit]
    return out


class CronJobController(Controller):
    name = "cronjob"

    def __init__(self, client: ApiClient, informers: SharedInformerFactory, workers: int = 5,
                 clock: Callable[[], dt.datetime] = timeutil.now) -> None:
        super().__init__(workers)
        self.client = client
        self.clock = clock
        self.recorder = EventRecorder(client, CONTROLLER_NAME)
        self.cronjob_informer: Informer[CronJob] = informers.informer_for(CronJob)
        self.job_informer: Informer[Job] = informers.informer_for(Job)
        ensure_indexers(self.job_informer, {CONTROLLER_UID_INDEX: controller_uid_index})
        self.watch(self.cronjob_informer)
        self.job_informer.add_event_handler(self._job_event, lambda old, cur: self._job_event(cur), self._job_event)
        self.informers.extend([self.cronjob_informer, self.job_informer])
        self._too_many_reported: set[tuple[str, str]] = set()  # (key, lastScheduleTime) warned about

    def _job_event(self, job: Job) -> None:
        ref = controller_ref(job)
        if ref is None or ref.kind != "CronJob":
            return
        self.queue.add(f"{job.metadata.namespace}/{ref.name}")

    async def reconcile(self, key: str) -> float | None:
        cj = self.cronjob_informer.store.get(key)
        if cj is None or cj.spec is None:
            return None
        now = self.clock()
        jobs = [j for j in self.job_informer.store.by_index(CONTROLLER_UID_INDEX, cj.metadata.uid or "")
                if j.metadata.namespace == cj.metadata.namespace]
        status = (cj.status or CronJobStatus()).model_copy(deep=True)
        self._reconcile_active(cj, status, jobs)
        try:
            schedule = parse_standard(cj.spec.schedule, cj.spec.time_zone)
        except ScheduleError as e:
            self.recorder.event(cj, "Warning", "UnparseableSchedule",
                                f"unparseable schedule: {cj.spec.schedule!r} : {e}")
            await self._write_status(cj, status)
            return None
        await self._cleanup_finished(cj, jobs)
        if cj.metadata.deletion_timestamp is not None or cj.spec.suspend:
            await self._write_status(cj, status)
            return None
        earliest = timeutil.parse_rfc3339(status.last_schedule_time) or timeutil.parse_rfc3339(
            cj.metadata.creation_timestamp) or now
        decision = most_recent_schedule_time(schedule, earliest, now, cj.spec.starting_deadline_seconds)
        upcoming = schedule.next(now)
        next_wait: float | None = None  # a schedule that never fires waits for a change of the CronJob
        if upcoming is not None:
            next_wait = max(0.0, (upcoming - now).total_seconds()) + NEXT_SCHEDULE_DELTA
        if decision.missed > MAX_MISSED_SCHEDULES:
            marker = (key, status.last_schedule_time or "")
            if marker not in self._too_many_reported:
                self._too_many_reported.add(marker)
                self.recorder.event(cj, "Warning", "TooManyMissedTimes",
                                    f"too many missed start times: {decision.missed}. Set or decrease "
                                    ".spec.startingDeadlineSeconds or check clock skew")
        scheduled = decision.most_recent
        if scheduled is None:
            await self._write_status(cj, status)
            return next_wait
        name = job_name_for(cj.metadata.name or "", scheduled)
        if any(ref.name == name for ref in status.active or []) or any(j.metadata.name == name for j in jobs):
            await self._write_status(cj, status)
            return next_wait  # this time has run already
        policy = cj.spec.concurrency_policy or "Allow"
        if policy == "Forbid" and status.active:
            self.recorder.event(cj, "Normal", "JobAlreadyActive",
                                "Not starting job because prior execution is running and concurrency policy is "
                                "Forbid")
            await self._write_status(cj, status)
            return next_wait
        if policy == "Replace":
            for ref in list(status.active or []):
                await self._delete_job(cj, ref.name or "")
            status.active = None
        job = await self._create_job(cj, name, scheduled)
        if job is not None:
            status.active = [*(status.active or []), _reference(job)]
        status.last_schedule_time = timeutil.format_rfc3339(scheduled)
        await self._write_status(cj, status)
        return next_wait

    def _reconcile_active(self, cj: CronJob, status: CronJobStatus, jobs: list[Job]) -> None:
        by_uid = {j.metadata.uid: j for j in jobs}
        active: list[ObjectReference] = []
        for ref in status.active or []:
            job = by_uid.get(ref.uid)
            if job is None:
                if self.job_informer.store.get_by_name(ref.name or "", cj.metadata.namespace) is None:
                    self.recorder.event(cj, "Normal", "MissingJob", f"Active job went missing: {ref.name}")
                continue
            finished = job_finished(job)
            if finished is None:
                active.append(ref)
                continue
            self.recorder.event(cj, "Normal", "SawCompletedJob",
                                f"Saw completed job: {job.metadata.name}, condition: {finished}")
            if finished == "Complete" and job.status is not None and job.status.completion_time:
                last = timeutil.parse_rfc3339(status.last_successful_time)
                done = timeutil.parse_rfc3339(job.status.completion_time)
                if done is not None and (last is None or done > last):
                    status.last_successful_time = job.status.completion_time
        listed = {ref.uid for ref in status.active or []}
        for job in jobs:
            # as upstream: a running Job it did not list (made by hand, or before a crash) is reported, not adopted
            if job.metadata.uid not in listed and job_finished(job) is None and job.metadata.deletion_timestamp is None:
                self.recorder.event(cj, "Warning", "UnexpectedJob",
                                    f"Saw a job that the controller did not create or forgot: {job.metadata.name}")
        status.active = active or None

    async def _create_job(self, cj: CronJob, name: str, scheduled: dt.datetime) -> Job | None:
        """getJobFromTemplate2 + create: AlreadyExists means another sync made it."""
        assert cj.spec is not None
        template = cj.spec.job_template
        tmeta = template.metadata
        zone = parse_standard(cj.spec.schedule, cj.spec.time_zone).zone
        annotations = dict((tmeta.annotations if tmeta else None) or {})
        annotations[CRONJOB_SCHEDULED_TIMESTAMP_ANNOTATION] = scheduled.astimezone(zone).isoformat()
        body: dict[str, Any] = {
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": cj.metadata.namespace,
                         "labels": dict((tmeta.labels if tmeta else None) or {}) or None,
                         "annotations": annotations,
                         "ownerReferences": [new_controller_ref(cj, "batch/v1", "CronJob").to_dict()]},
            "spec": template.spec.to_dict() if template.spec is not None else {},
        }
        body["metadata"] = {k: v for k, v in body["metadata"].items() if v is not None}
        try:
            created = await self.client.create_raw(Job, body, cj.metadata.namespace)
        except ApiError as e:
            if e.is_already_exists:
                return None
            self.recorder.event(cj, "Warning", "FailedCreate", f"Error creating job: {e.message or e}")
            raise
        job = Job.model_validate(created)
        self.recorder.event(cj, "Normal", "SuccessfulCreate", f"Created job {name}")
        return job

    async def _delete_job(self, cj: CronJob, name: str) -> None:
        try:
            await self.client.delete_raw(Job, name, cj.metadata.namespace, propagation_policy="Background")
        except ApiError as e:
            if not e.is_not_found:
                self.recorder.event(cj, "Warning", "FailedDelete", f"Deleted job: {e.message or e}")
                raise
            return
        self.recorder.event(cj, "Normal", "SuccessfulDelete", f"Deleted job {name}")

    async def _cleanup_finished(self, cj: CronJob, jobs: list[Job]) -> None:
        assert cj.spec is not None
        for job in jobs_to_prune([j for j in jobs if j.metadata.deletion_timestamp is None],
                                 cj.spec.successful_jobs_history_limit, cj.spec.failed_jobs_history_limit):
            await self._delete_job(cj, job.metadata.name or "")

    async def _write_status(self, cj: CronJob, status: CronJobStatus) -> None:
        if (cj.status or CronJobStatus()) == status:
            return
        await self.client.update_status(cj.model_copy(update={"status": status}))


def _reference(job: Job) -> ObjectReference:
    return ObjectReference(kind="Job", namespace=job.metadata.namespace, name=job.metadata.name,
                           uid=job.metadata.uid, api_version="batch/v1",
                           resource_version=job.metadata.resource_version)
