"""batch/v1 in the apiserver: Job and CronJob defaults and validation (upstream pkg/apis/batch/validation,
pkg/registry/batch/{job,cronjob}/strategy.go) and their Table rows (printJob, printCronJob)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

from apiserver.printers import column_definitions, table_for
from apiserver.registry.cronjob import CronJobStrategy
from apiserver.registry.job import JobStrategy
from apiserver.validation import FieldError

NOW = datetime(2026, 11, 24, 12, 0, 0, tzinfo=UTC)
Obj = dict[str, Any]


def full(errs: list[FieldError]) -> list[str]:
    return [e.full() for e in errs]


def pod_template(restart: str = "Never", **spec: Any) -> Obj:
    return {"spec": {"restartPolicy": restart, "containers": [{"name": "c", "image": "busybox"}], **spec}}


def new_job(**spec: Any) -> Obj:
    obj = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "pi", "namespace": "ns", "uid": "u-1"},
           "spec": {"template": pod_template(), **spec}}
    JobStrategy().prepare_for_create(obj)
    return obj


def test_job_defaults_and_generated_selector() -> None:
    spec = new_job()["spec"]
    assert {k: spec[k] for k in ("completions", "parallelism", "backoffLimit", "completionMode", "suspend",
                                 "podReplacementPolicy", "manualSelector")} == {
        "completions": 1, "parallelism": 1, "backoffLimit": 6, "completionMode": "NonIndexed", "suspend": False,
        "podReplacementPolicy": "TerminatingOrFailed", "manualSelector": False}
    assert spec["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": "u-1"}}
    assert spec["template"]["metadata"]["labels"] == {
        "batch.kubernetes.io/controller-uid": "u-1", "controller-uid": "u-1",
        "batch.kubernetes.io/job-name": "pi", "job-name": "pi"}
    assert new_job(parallelism=3)["spec"].get("completions") is None  # a work queue keeps no completions
    assert JobStrategy().validate(new_job()) == []


def test_job_validation_errors() -> None:
    assert full(JobStrategy().validate(new_job(template=pod_template("Always")))) == [
        'spec.template.spec.restartPolicy: Unsupported value: "Always": supported values: "OnFailure", "Never"']
    assert full(JobStrategy().validate(new_job(completionMode="Indexed", parallelism=2))) == [
        "spec.completions: Required value: when completion mode is Indexed"]
    assert full(JobStrategy().validate(new_job(backoffLimit=-1, completionMode="Sometimes"))) == [
        "spec.backoffLimit: Invalid value: -1: must be greater than or equal to 0",
        'spec.completionMode: Unsupported value: "Sometimes": supported values: "NonIndexed", "Indexed"']
    manual = new_job(manualSelector=True)
    assert full(JobStrategy().validate(manual)) == ["spec.selector: Required value"]
    manual = new_job(manualSelector=True, selector={"matchLabels": {"app": "other"}})
    assert full(JobStrategy().validate(manual)) == [
        "spec.template.metadata.labels: Invalid value: map[string]string{}: `selector` does not match template "
        "`labels`"]
    policy = new_job(template=pod_template("OnFailure"), podFailurePolicy={"rules": [
        {"action": "Explode", "onExitCodes": {"operator": "In", "values": [0]}}]})
    assert full(JobStrategy().validate(policy)) == [
        'spec.template.spec.restartPolicy: Invalid value: "OnFailure": only "Never" is supported when '
        "podFailurePolicy is specified",
        'spec.podFailurePolicy.rules[0].action: Unsupported value: "Explode": supported values: "Count", '
        '"FailIndex", "FailJob", "Ignore"',
        "spec.podFailurePolicy.rules[0].onExitCodes.values[0]: Invalid value: 0: must not be 0 for the In operator"]


def test_job_update_keeps_selector_and_template_but_lets_a_suspended_job_move() -> None:
    old = new_job(suspend=True)
    new = copy.deepcopy(old)
    new["spec"]["template"]["spec"]["containers"][0]["image"] = "other"
    new["spec"]["completions"] = 4
    strategy = JobStrategy()
    strategy.prepare_for_update(new, old)
    fields = [e.field for e in strategy.validate_update(new, old)]
    assert fields == ["spec.completions", "spec.template"], fields
    moved = copy.deepcopy(old)
    moved["spec"]["template"]["spec"]["nodeSelector"] = {"zone": "a"}
    assert strategy.validate_update(moved, old) == []  # a scheduling directive of a never-started suspended Job
    running = copy.deepcopy(old)
    running["spec"]["suspend"] = False
    running_moved = copy.deepcopy(moved)
    running_moved["spec"]["suspend"] = False
    assert [e.field for e in strategy.validate_update(running_moved, running)] == ["spec.template"]


def new_cronjob(schedule: str = "*/5 * * * *", **spec: Any) -> Obj:
    obj = {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "tick", "namespace": "ns"},
           "spec": {"schedule": schedule, "jobTemplate": {"spec": {"template": pod_template("OnFailure")}},
                    **spec}}
    CronJobStrategy().prepare_for_create(obj)
    return obj


def test_cronjob_defaults_and_validation() -> None:
    spec = new_cronjob()["spec"]
    assert (spec["concurrencyPolicy"], spec["suspend"], spec["successfulJobsHistoryLimit"],
            spec["failedJobsHistoryLimit"], spec["jobTemplate"]["spec"]["backoffLimit"]) == ("Allow", False, 3, 1, 6)
    assert CronJobStrategy().validate(new_cronjob("@hourly", timeZone="Europe/Berlin")) == []
    assert full(CronJobStrategy().validate(new_cronjob("every minute"))) == [
        'spec.schedule: Invalid value: "every minute": expected exactly 5 fields, found 2: every minute']
    assert full(CronJobStrategy().validate(new_cronjob("TZ=UTC * * * * *"))) == [
        'spec.schedule: Invalid value: "TZ=UTC * * * * *": cannot use TZ or CRON_TZ in schedule, use timeZone '
        "field instead"]
    assert full(CronJobStrategy().validate(new_cronjob(timeZone="Mars/Base", concurrencyPolicy="Sometimes"))) == [
        'spec.timeZone: Invalid value: "Mars/Base": unknown time zone Mars/Base',
        'spec.concurrencyPolicy: Unsupported value: "Sometimes": supported values: "Allow", "Forbid", "Replace"']
    always = new_cronjob()
    always["spec"]["jobTemplate"]["spec"]["template"]["spec"]["restartPolicy"] = "Always"
    assert full(CronJobStrategy().validate(always)) == [
        'spec.jobTemplate.spec.template.spec.restartPolicy: Unsupported value: "Always": supported values: '
        '"OnFailure", "Never"']
    long_name = new_cronjob()
    long_name["metadata"]["name"] = "x" * 53
    assert [e.field for e in CronJobStrategy().validate(long_name)] == ["metadata.name"]


def ago(seconds: float) -> str:
    return (NOW - timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def row(resource: str, obj: Obj) -> list[Any]:
    table = table_for(resource, [obj], now=NOW)
    (only,) = table["rows"]
    return list(only["cells"])


def test_job_table() -> None:
    assert [(c["name"], c["priority"]) for c in column_definitions("jobs")] == [
        ("Name", 0), ("Status", 0), ("Completions", 0), ("Duration", 0), ("Age", 0), ("Containers", 1),
        ("Images", 1), ("Selector", 1)]
    job = new_job(completions=3)
    job["metadata"]["creationTimestamp"] = ago(120)
    job["status"] = {"succeeded": 1, "startTime": ago(100)}
    assert row("jobs", job) == ["pi", "Running", "1/3", "100s", "2m", "c", "busybox",
                                "batch.kubernetes.io/controller-uid=u-1"]
    job["status"] = {"succeeded": 3, "startTime": ago(100), "completionTime": ago(40),
                     "conditions": [{"type": "Complete", "status": "True"}]}
    assert row("jobs", job)[1:4] == ["Complete", "3/3", "60s"]
    queue = new_job(parallelism=2)
    queue["metadata"]["creationTimestamp"] = ago(5)
    queue["status"] = {"conditions": [{"type": "Suspended", "status": "True"}]}
    assert row("jobs", queue)[1:4] == ["Suspended", "0/1 of 2", ""]


def test_cronjob_table() -> None:
    assert [c["name"] for c in column_definitions("cronjobs")] == [
        "Name", "Schedule", "Timezone", "Suspend", "Active", "Last Schedule", "Age", "Containers", "Images",
        "Selector"]
    cronjob = new_cronjob()
    cronjob["metadata"]["creationTimestamp"] = ago(3600)
    assert row("cronjobs", cronjob)[:7] == ["tick", "*/5 * * * *", "<none>", "False", 0, "<none>", "60m"]
    cronjob["spec"]["timeZone"] = "Europe/Berlin"
    cronjob["status"] = {"active": [{"name": "tick-1"}], "lastScheduleTime": ago(30)}
    assert row("cronjobs", cronjob)[2:6] == ["Europe/Berlin", "False", 1, "30s"]
