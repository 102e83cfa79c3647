"""CronJobs (upstream: pkg/apis/batch/v1/defaults.go SetDefaults_CronJob, pkg/apis/batch/validation
ValidateCronJobSpec, pkg/registry/batch/cronjob/strategy.go)."""

from __future__ import annotations

from apiserver.registry.job import default_job_spec, validate_job_spec
from apiserver.registry.strategy import Strategy
from apiserver.validation import (
    FieldError,
    invalid,
    not_supported,
    required,
    validate_labels,
    validate_nonnegative,
)
from machinery.cron import ScheduleError, load_zone, parse_standard
from machinery.types import Obj

CONCURRENCY_POLICIES = ["Allow", "Forbid", "Replace"]
# a CronJob's name gets `-<minutes since epoch>` (11 characters) and must stay a valid Job name
# whose pods' job-name label fits in 63 characters (upstream validation.ValidateCronJob)
MAX_CRONJOB_NAME_LENGTH = 52


def default_cronjob_spec(spec: Obj) -> None:
    if not spec.get("concurrencyPolicy"):
        spec["concurrencyPolicy"] = "Allow"
    if spec.get("suspend") is None:
        spec["suspend"] = False
    if spec.get("successfulJobsHistoryLimit") is None:
        spec["successfulJobsHistoryLimit"] = 3
    if spec.get("failedJobsHistoryLimit") is None:
        spec["failedJobsHistoryLimit"] = 1
    job_spec = (spec.get("jobTemplate") or {}).get("spec")
    if isinstance(job_spec, dict):
        default_job_spec(job_spec)


def validate_schedule(schedule: str, time_zone: str | None, path: str) -> list[FieldError]:
    if not schedule:
        return [required(f"{path}.schedule")]
    if "TZ=" in schedule:
        if time_zone is not None:
            return [invalid(f"{path}.schedule", schedule, "cannot use both timeZone field and TZ or CRON_TZ in "
                                                          "schedule")]
        return [invalid(f"{path}.schedule", schedule, "cannot use TZ or CRON_TZ in schedule, use timeZone field "
                                                      "instead")]
    errs: list[FieldError] = []
    if time_zone is not None:
        try:
            load_zone(time_zone)
        except ScheduleError as e:
            errs.append(invalid(f"{path}.timeZone", time_zone, str(e)))
    try:
        parse_standard(schedule)
    except ScheduleError as e:
        errs.append(invalid(f"{path}.schedule", schedule, str(e)))
    return errs


def validate_cronjob(obj: Obj) -> list[FieldError]:
    spec = obj.get("spec") or {}
    name = (obj.get("metadata") or {}).get("name") or ""
    errs: list[FieldError] = []
    if len(name) > MAX_CRONJOB_NAME_LENGTH:
        errs.append(invalid("metadata.name", name, f"must be no more than {MAX_CRONJOB_NAME_LENGTH} characters"))
    errs += validate_schedule(spec.get("schedule") or "", spec.get("timeZone"), "spec")
    for key in ("startingDeadlineSeconds", "successfulJobsHistoryLimit", "failedJobsHistoryLimit"):
        errs += validate_nonnegative(spec.get(key), f"spec.{key}")
    policy = spec.get("concurrencyPolicy") or ""
    if policy not in CONCURRENCY_POLICIES:
        errs.append(not_supported("spec.concurrencyPolicy", policy, CONCURRENCY_POLICIES))
    template = spec.get("jobTemplate")
    if template is None:
        return [*errs, required("spec.jobTemplate")]
    tmeta = template.get("metadata") or {}
    errs += validate_labels(tmeta.get("labels"), "spec.jobTemplate.metadata.labels")
    job_spec = template.get("spec") or {}
    if job_spec.get("manualSelector") and job_spec.get("selector") is not None:
        errs += validate_job_spec(job_spec, "spec.jobTemplate.spec")
    else:
        # the selector is generated per Job: only the rest of the Job spec is checked here
        # (ValidateJobTemplateSpec with the generated-selector option)
        errs += [e for e in validate_job_spec({**job_spec, "selector": {}}, "spec.jobTemplate.spec")
                 if not e.field.startswith("spec.jobTemplate.spec.selector")]
    return errs


class CronJobStrategy(Strategy):
    has_status_subresource = True

    def prepare_for_create(self, obj: Obj) -> None:
        default_cronjob_spec(obj.setdefault("spec", {}))
        obj["status"] = {}  # a fresh status, written as `status: {}` as upstream's

    def validate(self, obj: Obj) -> list[FieldError]:
        return validate_cronjob(obj)

    def prepare_for_update(self, new: Obj, old: Obj) -> None:
        default_cronjob_spec(new.setdefault("spec", {}))
        super().prepare_for_update(new, old)
