"""The Job controller's sync (upstream pkg/controller/job/job_controller.go syncJob).

One reconcile of a Job key:
1. pods the Job controls (the selector is generated from the Job's uid, so its pods are found by
   their controller reference);
2. finished pods still carrying the `batch.kubernetes.io/job-tracking` finalizer are first recorded
   in status.uncountedTerminatedPods (written), then lose the finalizer, then move from
   uncounted to status.succeeded/failed (written): a pod is counted exactly once even when the
   controller dies between two of these steps, and never lost since the finalizer holds it until
   it is recorded (trackJobStatusAndRemoveFinalizers);
3. the Job's fate: podFailurePolicy FailJob, backoffLimit exceeded, activeDeadlineSeconds passed
   (FailureTarget, active pods deleted, then Failed); completions reached (SuccessCriteriaMet, then
   Complete once no pod runs); suspended (active pods deleted, Suspended);
4. otherwise pods up to parallelism (Indexed: one per pending index, with the index in the annotation,
   label, hostname and JOB_COMPLETION_INDEX), after the back-off of consecutive failures;
5. status (active, ready, terminating, startTime, completionTime, completedIndexes, conditions).
"""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import logging
import time
from typing import Any

from controllers.controller_ref_manager import controller_ref, new_controller_ref
from controllers.controller_utils import (
    UIDTrackingControllerExpectations,
    ensure_indexers,
    pod_body_from_template,
    pod_ready_condition,
)
from controllers.job.backoff_utils import (
    DEFAULT_JOB_POD_FAILURE_BACKOFF,
    MAX_JOB_POD_FAILURE_BACKOFF,
    BackoffRecord,
    remaining_backoff,
    update_record,
)
from controllers.job.indexed_job_utils import (
    format_intervals,
    get_completion_index,
    parse_intervals,
    pending_indexes,
)
from controllers.job.pod_failure_policy import match_pod_failure_policy
from machinery import timeutil
from machinery.api.batch_v1 import (
    JOB_COMPLETION_INDEX_ANNOTATION,
    JOB_TRACKING_FINALIZER,
    Job,
    JobCondition,
    JobStatus,
    UncountedTerminatedPods,
)
from machinery.api.core_v1 import Pod
from machinery.client import ApiClient, ApiError
from machinery.controller import Controller
from machinery.events import EventRecorder
from machinery.informer import (
    CONTROLLER_UID_INDEX,
    Informer,
    SharedInformerFactory,
    controller_uid_index,
    meta_namespace_key,
)

log = logging.getLogger(__name__)

CONTROLLER_NAME = "job-controller"
JOB_COMPLETION_INDEX_ENV = "JOB_COMPLETION_INDEX"
# how many pods one sync creates at most (upstream MaxPodCreateDeletePerSync)
MAX_POD_CREATE_DELETE_PER_SYNC = 500
_ORPHAN_KEY_PREFIX = "pod:"  # queue keys of finished pods whose Job is gone (their finalizer is removed)


def is_finished(job: Job) -> tuple[bool, str | None]:
    """IsJobFinished: (finished, "Complete" | "Failed")."""
    for c in (job.status.conditions if job.status else None) or []:
        if c.type in ("Complete", "Failed") and c.status == "True":
            return True, c.type
    return False, None


def condition(job: Job, type_: str) -> JobCondition | None:
    return next((c for c in (job.status.conditions if job.status else None) or [] if c.type == type_), None)


def is_pod_finished(pod: Pod) -> bool:
    phase = pod.status.phase if pod.status else None
    return phase in ("Succeeded", "Failed")


def considered_failed(pod: Pod) -> bool:
    """isPodFailed: failed, or deleted before it succeeded (with podReplacementPolicy TerminatingOrFailed)."""
    phase = pod.status.phase if pod.status else None
    return phase == "Failed" or (phase != "Succeeded" and pod.metadata.deletion_timestamp is not None)


def has_tracking_finalizer(pod: Pod) -> bool:
    return JOB_TRACKING_FINALIZER in (pod.metadata.finalizers or [])


def has_uncounted(status: JobStatus) -> bool:
    uncounted = status.uncounted_terminated_pods
    return uncounted is not None and bool(uncounted.succeeded or uncounted.failed)


def set_condition(status: JobStatus, type_: str, cond_status: str, reason: str, message: str,
                  now: dt.datetime) -> bool:
    """ensureJobConditionStatus: add or flip a condition; False when it already said so."""
    conditions = list(status.conditions or [])
    stamp = timeutil.format_rfc3339(now)
    for i, c in enumerate(conditions):
        if c.type == type_:
            if c.status == cond_status and c.reason == reason and c.message == message:
                return False
            conditions[i] = JobCondition(type=type_, status=cond_status, reason=reason, message=message,
                                         last_probe_time=stamp, last_transition_time=stamp)
            status.conditions = conditions
            return True
    if cond_status != "True":
        return False  # a condition never set need not be set False
    conditions.append(JobCondition(type=type_, status=cond_status, reason=reason, message=message,
                                   last_probe_time=stamp, last_transition_time=stamp))
    status.conditions = conditions
    return True


def wanted_active(job: Job, succeeded: int, succeeded_indexes: set[int]) -> int:
    """How many pods should run now (NonIndexed: parallelism, at most the completions left;
    completions unset: parallelism until the first success)."""
    spec = job.spec
    assert spec is not None
    parallelism = spec.parallelism if spec.parallelism is not None else 1
    if spec.completions is None:
        return 0 if succeeded > 0 else parallelism
    left = spec.completions - (len(succeeded_indexes) if spec.completion_mode == "Indexed" else succeeded)
    return max(0, min(parallelism, left))


class JobController(Controller):
    name = "job"  # its --controllers name; it writes as CONTROLLER_NAME

    def __init__(self, client: ApiClient, informers: SharedInformerFactory, workers: int = 5,
                 backoff_base: float = DEFAULT_JOB_POD_FAILURE_BACKOFF,
                 backoff_cap: float = MAX_JOB_POD_FAILURE_BACKOFF) -> None:
        super().__init__(workers)
        self.client = client
        self.recorder = EventRecorder(client, CONTROLLER_NAME)
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.expectations = UIDTrackingControllerExpectations()
        self.backoff: dict[str, BackoffRecord] = {}
        # pods whose finalizer this controller removed (upstream expectedRmFinalizers): a lagging
        # informer showing the finalizer again must not get them recorded a second time
        self.finalizer_removed: set[str] = set()
        self.deleted_by_us: set[str] = set()  # pods deleted for suspend or a finished Job: no failure
        self.job_informer: Informer[Job] = informers.informer_for(Job)
        self.pod_informer: Informer[Pod] = informers.informer_for(Pod)
        ensure_indexers(self.pod_informer, {CONTROLLER_UID_INDEX: controller_uid_index})
        self.job_informer.add_event_handler(self._job_added, self._job_updated, self._job_deleted)
        self.pod_informer.add_event_handler(self._pod_added, self._pod_updated, self._pod_deleted)
        self.informers.extend([self.job_informer, self.pod_informer])

    # -- event handlers -------------------------------------------------------------------------

    def _job_added(self, job: Job) -> None:
        self.queue.add(meta_namespace_key(job))

    def _job_updated(self, old: Job, cur: Job) -> None:
        self.queue.add(meta_namespace_key(cur))

    def _job_deleted(self, job: Job) -> None:
        key = meta_namespace_key(job)
        self.expectations.delete_expectations(key)
        self.backoff.pop(key, None)
        # its pods lose their finalizers (the garbage collector deletes them)
        for pod in self.pod_informer.store.by_index(CONTROLLER_UID_INDEX, job.metadata.uid or ""):
            if has_tracking_finalizer(pod):
                self.queue.add(_ORPHAN_KEY_PREFIX + meta_namespace_key(pod))

    def _job_key_of(self, pod: Pod) -> str | None:
        ref = controller_ref(pod)
        if ref is None or ref.kind != "Job":
            return None
        job = self.job_informer.store.get_by_name(ref.name, pod.metadata.namespace)
        if job is None or job.metadata.uid != ref.uid:
            if has_tracking_finalizer(pod):
                self.queue.add(_ORPHAN_KEY_PREFIX + meta_namespace_key(pod))
            return None
        return meta_namespace_key(job)

    def _pod_added(self, pod: Pod) -> None:
        key = self._job_key_of(pod)
        if key is not None:
            self.expectations.creation_observed(key)
            self.queue.add(key)

    def _pod_updated(self, old: Pod, cur: Pod) -> None:
        if old.metadata.resource_version == cur.metadata.resource_version:
            return
        key = self._job_key_of(cur)
        if key is not None:
            if cur.metadata.deletion_timestamp is not None and old.metadata.deletion_timestamp is None:
                self.expectations.deletion_observed_of(key, meta_namespace_key(cur))
            self.queue.add(key)

    def _pod_deleted(self, pod: Pod) -> None:
        self.finalizer_removed.discard(pod.metadata.uid or "")
        self.deleted_by_us.discard(pod.metadata.uid or "")
        key = self._job_key_of(pod)
        if key is not None:
            self.expectations.deletion_observed_of(key, meta_namespace_key(pod))
            self.queue.add(key)

    # -- reconcile ------------------------------------------------------------------------------

    async def reconcile(self, key: str) -> float | None:
        if key.startswith(_ORPHAN_KEY_PREFIX):
            await self._remove_orphan_finalizer(key[len(_ORPHAN_KEY_PREFIX):])
            return None
        job = self.job_informer.store.get(key)
        if job is None or job.spec is None:
            self.expectations.delete_expectations(key)
            return None
        pods = [p for p in self.pod_informer.store.by_index(CONTROLLER_UID_INDEX, job.metadata.uid or "")
                if p.metadata.namespace == job.metadata.namespace]
        finished, _ = is_finished(job)
        if finished:
            # a finished Job only lets go of its pods (ones counted before a crash, or deleted later)
            await self._remove_finalizers([p for p in pods if has_tracking_finalizer(p)])
            return None
        if not self.expectations.satisfied(key):
            return None
        return await self._sync(key, job, pods)

    async def _sync(self, key: str, job: Job, pods: list[Pod]) -> float | None:
        spec = job.spec
        assert spec is not None
        now = timeutil.now()
        status = (job.status or JobStatus()).model_copy(deep=True)
        uncounted = status.uncounted_terminated_pods or UncountedTerminatedPods()
        uncounted_ok, uncounted_failed = set(uncounted.succeeded or []), set(uncounted.failed or [])
        by_uid = {p.metadata.uid or "": p for p in pods}

        # (2) record newly finished pods, remove their finalizers, then count them
        fail_job_message: str | None = None
        newly_recorded = False
        for pod in pods:
            uid = pod.metadata.uid or ""
            if (not has_tracking_finalizer(pod) or uid in self.finalizer_removed or uid in uncounted_ok
                    or uid in uncounted_failed):
                continue
            if (pod.status.phase if pod.status else None) == "Succeeded":
                uncounted_ok.add(uid)
                newly_recorded = True
            elif considered_failed(pod):
                match = match_pod_failure_policy(spec.pod_failure_policy, pod)
                if uid in self.deleted_by_us or (match is not None and match.action == "Ignore"):
                    await self._remove_finalizers([pod])  # not counted at all
                    continue
                if match is not None and match.action == "FailJob" and fail_job_message is None:
                    fail_job_message = match.message
                uncounted_failed.add(uid)
                newly_recorded = True
        if newly_recorded:
            status.uncounted_terminated_pods = UncountedTerminatedPods(
                succeeded=sorted(uncounted_ok) or None, failed=sorted(uncounted_failed) or None)
            job = await self._write_status(job, status)
            status = (job.status or JobStatus()).model_copy(deep=True)
        await self._remove_finalizers([by_uid[u] for u in uncounted_ok | uncounted_failed
                                       if u in by_uid and has_tracking_finalizer(by_uid[u])
                                       and u not in self.finalizer_removed])
        new_ok = [u for u in uncounted_ok if u not in by_uid or u in self.finalizer_removed
                  or not has_tracking_finalizer(by_uid[u])]
        new_failed = [u for u in uncounted_failed if u not in by_uid or u in self.finalizer_removed
                      or not has_tracking_finalizer(by_uid[u])]
        succeeded_indexes = parse_intervals(status.completed_indexes, spec.completions or 0)
        if new_ok or new_failed:
            status.succeeded = (status.succeeded or 0) + len(new_ok)
            status.failed = (status.failed or 0) + len(new_failed)
            if spec.completion_mode == "Indexed":
                for u in new_ok:
                    index = get_completion_index(by_uid[u]) if u in by_uid else None
                    if index is not None and index < (spec.completions or 0):
                        succeeded_indexes.add(index)
                status.completed_indexes = format_intervals(succeeded_indexes) or None
            left_ok = sorted(uncounted_ok - set(new_ok))
            left_failed = sorted(uncounted_failed - set(new_failed))
            status.uncounted_terminated_pods = UncountedTerminatedPods(succeeded=left_ok or None,
                                                                       failed=left_failed or None)
            self.backoff[key] = update_record(self.backoff.get(key, BackoffRecord()), len(new_ok), len(new_failed),
                                              time.monotonic())

        active = [p for p in pods if not is_pod_finished(p) and p.metadata.deletion_timestamp is None]
        terminating = [p for p in pods if p.metadata.deletion_timestamp is not None and not is_pod_finished(p)]
        succeeded = status.succeeded or 0
        failed = status.failed or 0

        # (3) the Job's fate
        failure: tuple[str, str] | None = None
        target = condition(job, "FailureTarget")
        if target is not None and target.status == "True":
            failure = (target.reason or "", target.message or "")
        elif fail_job_message is not None:
            failure = ("PodFailurePolicy", fail_job_message)
        elif failed > (spec.backoff_limit if spec.backoff_limit is not None else 6):
            failure = ("BackoffLimitExceeded", "Job has reached the specified backoff limit")
        elif spec.active_deadline_seconds is not None and status.start_time and not spec.suspend:
            started = timeutil.parse_rfc3339(status.start_time)
            if started is not None and (now - started).total_seconds() >= spec.active_deadline_seconds:
                failure = ("DeadlineExceeded", "Job was active longer than specified deadline")
        complete = False
        if failure is None:
            if spec.completion_mode == "Indexed":
                complete = len(succeeded_indexes) >= (spec.completions or 0)
            elif spec.completions is None:
                complete = succeeded > 0 and not active
            else:
                complete = succeeded >= spec.completions

        requeue: float | None = None
        if failure is not None:
            reason, message = failure
            if set_condition(status, "FailureTarget", "True", reason, message, now):
                self.recorder.event(job, "Warning", reason, message)
            await self._delete_pods(key, job, active)
            active = []
            if not has_uncounted(status):
                set_condition(status, "Failed", "True", reason, message, now)
        elif complete:
            message = "Reached expected number of succeeded pods"
            set_condition(status, "SuccessCriteriaMet", "True", "CompletionsReached", message, now)
            await self._delete_pods(key, job, active)
            active = []
            if not has_uncounted(status) and set_condition(
                    status, "Complete", "True", "CompletionsReached", message, now):
                status.completion_time = timeutil.format_rfc3339(now)
                self.recorder.event(job, "Normal", "Completed", "Job completed")
        elif spec.suspend:
            await self._delete_pods(key, job, active)
            if set_condition(status, "Suspended", "True", "JobSuspended", "Job suspended", now):
                self.recorder.event(job, "Normal", "Suspended", "Job suspended")
            active = []
        else:
            if condition(job, "Suspended") is not None and set_condition(
                    status, "Suspended", "False", "JobResumed", "Job resumed", now):
                self.recorder.event(job, "Normal", "Resumed", "Job resumed")
                status.start_time = timeutil.format_rfc3339(now)  # the deadline counts from the resume
            if status.start_time is None:
                status.start_time = timeutil.format_rfc3339(now)
            requeue = await self._manage_pods(key, job, active, succeeded, succeeded_indexes)
            if spec.active_deadline_seconds is not None:
                started = timeutil.parse_rfc3339(status.start_time)
                if started is not None:
                    left = spec.active_deadline_seconds - (now - started).total_seconds()
                    requeue = max(0.1, left) if requeue is None else min(requeue, max(0.1, left))

        # (5) status
        status.active = len(active)
        status.ready = sum(1 for p in active if (c := pod_ready_condition(p)) is not None and c.status == "True")
        status.terminating = len(terminating)
        status.succeeded, status.failed = succeeded, failed
        await self._write_status(job, status)
        return requeue

    async def _manage_pods(self, key: str, job: Job, active: list[Pod], succeeded: int,
                           succeeded_indexes: set[int]) -> float | None:
        """Create or delete pods toward wanted_active (manageJob); None, or seconds to wait for back-off."""
        spec = job.spec
        assert spec is not None
        want = wanted_active(job, succeeded, succeeded_indexes)
        if len(active) > want:
            extra = sorted(active, key=lambda p: p.metadata.creation_timestamp or "", reverse=True)[:len(active) - want]
            await self._delete_pods(key, job, extra)
            return None
        diff = min(want - len(active), MAX_POD_CREATE_DELETE_PER_SYNC)
        if diff <= 0:
            return None
        wait = remaining_backoff(self.backoff.get(key, BackoffRecord()), time.monotonic(), self.backoff_base,
                                 self.backoff_cap)
        if wait > 0:
            return wait
        indexes: list[int | None]
        if spec.completion_mode == "Indexed":
            running = {i for p in active if (i := get_completion_index(p)) is not None}
            indexes = list(pending_indexes(spec.completions or 0, succeeded_indexes, running, diff))
        else:
            indexes = [None] * diff
        if not indexes:
            return None
        self.expectations.expect_creations(key, len(indexes))
        results = await asyncio.gather(*(self._create_pod(job, i) for i in indexes), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        for _ in errors:
            self.expectations.creation_observed(key)
        if errors:
            raise errors[0]
        return None

    def pod_body(self, job: Job, index: int | None) -> dict[str, Any]:
        """The pod of a Job (and of one index): tracked by the finalizer, owned by the Job."""
        spec = job.spec
        assert spec is not None
        body = copy.deepcopy(pod_body_from_template(spec.template, job, new_controller_ref(job, "batch/v1", "Job")))
        meta = body["metadata"]
        meta["finalizers"] = [*(meta.get("finalizers") or []), JOB_TRACKING_FINALIZER]
        if index is not None:
            meta["generateName"] = f"{job.metadata.name}-{index}-"
            meta.setdefault("annotations", {})[JOB_COMPLETION_INDEX_ANNOTATION] = str(index)
            meta.setdefault("labels", {})[JOB_COMPLETION_INDEX_ANNOTATION] = str(index)
            pod_spec = body["spec"]
            pod_spec["hostname"] = f"{job.metadata.name}-{index}"
            env_var = {"name": JOB_COMPLETION_INDEX_ENV, "valueFrom": {"fieldRef": {
                "apiVersion": "v1", "fieldPath": f"metadata.annotations['{JOB_COMPLETION_INDEX_ANNOTATION}']"}}}
            for group in ("initContainers", "containers"):
                for container in pod_spec.get(group) or []:
                    env = [e for e in container.get("env") or [] if e.get("name") != JOB_COMPLETION_INDEX_ENV]
                    container["env"] = [env_var, *env]
        return body

    async def _create_pod(self, job: Job, index: int | None) -> None:
        try:
            created = await self.client.create_raw(Pod, self.pod_body(job, index), job.metadata.namespace)
        except ApiError as e:
            self.recorder.event(job, "Warning", "FailedCreate", f"Error creating: {e.message or e}")
            raise
        self.recorder.event(job, "Normal", "SuccessfulCreate", f"Created pod: {created['metadata']['name']}")

    async def _delete_pods(self, key: str, job: Job, pods: list[Pod]) -> None:
        if not pods:
            return
        self.expectations.expect_deletions_of(key, [meta_namespace_key(p) for p in pods])

        async def delete(pod: Pod) -> None:
            self.deleted_by_us.add(pod.metadata.uid or "")
            try:
                await self.client.delete(Pod, pod.metadata.name or "", pod.metadata.namespace)
            except ApiError as e:
                self.expectations.deletion_observed_of(key, meta_namespace_key(pod))
                if not e.is_not_found:
                    self.recorder.event(job, "Warning", "FailedDelete", f"Error deleting: {e.message or e}")
                    raise
                return
            self.recorder.event(job, "Normal", "SuccessfulDelete", f"Deleted pod: {pod.metadata.name}")
            await self._remove_finalizers([pod])  # deleted by the Job itself: not a failure to count

        results = await asyncio.gather(*(delete(p) for p in pods), return_exceptions=True)
        for r in results:
            if isinstance(r, BaseException):
                raise r

    async def _remove_finalizers(self, pods: list[Pod]) -> None:
        """removeTrackingFinalizerFromPods: a JSON patch that tests the list it rewrites."""
        async def remove(pod: Pod) -> None:
            finalizers = list(pod.metadata.finalizers or [])
            if JOB_TRACKING_FINALIZER not in finalizers:
                return
            patch: list[dict[str, Any]] = [
                {"op": "test", "path": "/metadata/finalizers", "value": finalizers},
                {"op": "replace", "path": "/metadata/finalizers",
                 "value": [f for f in finalizers if f != JOB_TRACKING_FINALIZER]}]
            try:
                await self.client.patch_raw(Pod, pod.metadata.name or "", patch, "json", pod.metadata.namespace)
            except ApiError as e:
                if not e.is_not_found:
                    raise
            self.finalizer_removed.add(pod.metadata.uid or "")

        results = await asyncio.gather(*(remove(p) for p in pods), return_exceptions=True)
        for r in results:
            if isinstance(r, BaseException):
                raise r

    async def _remove_orphan_finalizer(self, pod_key: str) -> None:
        pod = self.pod_informer.store.get(pod_key)
        if pod is None or not has_tracking_finalizer(pod):
            return
        if self._job_key_of_quiet(pod) is None:
            await self._remove_finalizers([pod])

    def _job_key_of_quiet(self, pod: Pod) -> str | None:
        ref = controller_ref(pod)
        if ref is None or ref.kind != "Job":
            return None
        job = self.job_informer.store.get_by_name(ref.name, pod.metadata.namespace)
        return meta_namespace_key(job) if job is not None and job.metadata.uid == ref.uid else None

    async def _write_status(self, job: Job, status: JobStatus) -> Job:
        if job.status == status:
            return job
        updated: Job = await self.client.update_status(job.model_copy(update={"status": status}))
        return updated
