"""batch/v1: Job and CronJob, as in upstream's k8s.io/api/batch/v1/types.go."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from machinery.api.base import ApiModel, merge_key
from machinery.api.core_v1 import ObjectReference, PodTemplateSpec
from machinery.api.meta import LabelSelector, ObjectMeta, Time

# labels and annotations the Job controller and the apiserver put on Jobs and their pods
CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"
LEGACY_CONTROLLER_UID_LABEL = "controller-uid"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
LEGACY_JOB_NAME_LABEL = "job-name"
JOB_COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
JOB_TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
CRONJOB_SCHEDULED_TIMESTAMP_ANNOTATION = "batch.kubernetes.io/cronjob-scheduled-timestamp"

# --- Job -----------------------------------------------------------------------------------------


class PodFailurePolicyOnExitCodesRequirement(ApiModel):
    container_name: str | None = None
    operator: str  # In | NotIn
    values: list[int]


class PodFailurePolicyOnPodConditionsPattern(ApiModel):
    type: str
    status: str | None = None  # default True


class PodFailurePolicyRule(ApiModel):
    action: str  # FailJob | FailIndex | Ignore | Count
    on_exit_codes: PodFailurePolicyOnExitCodesRequirement | None = None
    on_pod_conditions: list[PodFailurePolicyOnPodConditionsPattern] | None = None


class PodFailurePolicy(ApiModel):
    rules: list[PodFailurePolicyRule]


class SuccessPolicyRule(ApiModel):
    succeeded_indexes: str | None = None
    succeeded_count: int | None = None


class SuccessPolicy(ApiModel):
    rules: list[SuccessPolicyRule]


class JobSpec(ApiModel):
    parallelism: int | None = None
    completions: int | None = None
    active_deadline_seconds: int | None = None
    pod_failure_policy: PodFailurePolicy | None = None
    success_policy: SuccessPolicy | None = None
    backoff_limit: int | None = None
    backoff_limit_per_index: int | None = None
    max_failed_indexes: int | None = None
    selector: LabelSelector | None = None
    manual_selector: bool | None = None
    template: PodTemplateSpec
    ttl_seconds_after_finished: int | None = None
    completion_mode: str | None = None  # NonIndexed | Indexed
    suspend: bool | None = None
    pod_replacement_policy: str | None = None  # TerminatingOrFailed | Failed
    managed_by: str | None = None


class JobCondition(ApiModel):
    type: str  # Suspended | Complete | Failed | FailureTarget | SuccessCriteriaMet
    status: str
    last_probe_time: Time | None = None
    last_transition_time: Time | None = None
    reason: str | None = None
    message: str | None = None


class UncountedTerminatedPods(ApiModel):
    succeeded: list[str] | None = None
    failed: list[str] | None = None


class JobStatus(ApiModel):
    conditions: list[JobCondition] | None = Field(None, json_schema_extra=merge_key("type"))
    start_time: Time | None = None
    completion_time: Time | None = None
    active: int | None = None
    succeeded: int | None = None
    failed: int | None = None
    terminating: int | None = None
    completed_indexes: str | None = None
    failed_indexes: str | None = None
    uncounted_terminated_pods: UncountedTerminatedPods | None = None
    ready: int | None = None


class Job(ApiModel):
    api_version: Literal["batch/v1"] = "batch/v1"
    kind: Literal["Job"] = "Job"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: JobSpec | None = None
    status: JobStatus | None = None


# --- CronJob -------------------------------------------------------------------------------------


class JobTemplateSpec(ApiModel):
    metadata: ObjectMeta | None = None
    spec: JobSpec | None = None


class CronJobSpec(ApiModel):
    schedule: str
    time_zone: str | None = None
    starting_deadline_seconds: int | None = None
    concurrency_policy: str | None = None  # Allow | Forbid | Replace
    suspend: bool | None = None
    job_template: JobTemplateSpec
    successful_jobs_history_limit: int | None = None
    failed_jobs_history_limit: int | None = None


class CronJobStatus(ApiModel):
    active: list[ObjectReference] | None = None
    last_schedule_time: Time | None = None
    last_successful_time: Time | None = None


class CronJob(ApiModel):
    api_version: Literal["batch/v1"] = "batch/v1"
    kind: Literal["CronJob"] = "CronJob"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: CronJobSpec | None = None
    status: CronJobStatus | None = None
