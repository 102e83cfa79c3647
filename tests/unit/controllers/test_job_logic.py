"""The Job controller's pure decisions: back-off, Indexed intervals, podFailurePolicy, how many pods to run,
conditions, the pod it creates for an index; and the TTL-after-finished expiry."""

from __future__ import annotations

import datetime as dt
from typing import Any

from controllers.job.backoff_utils import BackoffRecord, backoff_delay, remaining_backoff, update_record
from controllers.job.indexed_job_utils import format_intervals, get_completion_index, parse_intervals, pending_indexes
from controllers.job.job_controller import JobController, considered_failed, set_condition, wanted_active
from controllers.job.pod_failure_policy import match_pod_failure_policy
from controllers.ttlafterfinished import time_left
from machinery.api.batch_v1 import Job, JobStatus, PodFailurePolicy
from machinery.api.core_v1 import Pod

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def job(**spec: Any) -> Job:
    return Job.model_validate({"metadata": {"name": "pi", "namespace": "ns", "uid": "u1"}, "spec": {
        "template": {"metadata": {"labels": {"batch.kubernetes.io/controller-uid": "u1"}},
                     "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}},
        **spec}})


def failed_pod(exit_code: int, conditions: list[dict[str, Any]] | None = None, name: str = "c") -> Pod:
    return Pod.model_validate({"metadata": {"name": "p", "namespace": "ns"}, "status": {
        "phase": "Failed", "conditions": conditions or [],
        "containerStatuses": [{"name": name, "ready": False, "restartCount": 0, "image": "b", "imageID": "",
                               "state": {"terminated": {"exitCode": exit_code}}}]}})


def test_backoff_doubles_from_the_base_and_is_capped_at_six_minutes() -> None:
    assert [backoff_delay(n) for n in range(0, 8)] == [0, 10, 20, 40, 80, 160, 320, 360]
    assert backoff_delay(3, base=1) == 4
    record = update_record(BackoffRecord(), 0, 2, now=100.0)
    assert record == BackoffRecord(2, 100.0)
    assert remaining_backoff(record, 105.0) == 15.0  # 20 s after the second failure
    assert remaining_backoff(record, 130.0) == 0.0
    assert update_record(record, 1, 0, now=131.0) == BackoffRecord()  # a success resets it


def test_completed_indexes_as_intervals() -> None:
    assert format_intervals([5, 0, 1, 2, 7, 4]) == "0-2,4-5,7"
    assert format_intervals([]) == ""
    assert parse_intervals("0-2,4-5,7,x,9", completions=8) == {0, 1, 2, 4, 5, 7}
    assert pending_indexes(6, succeeded={0, 2}, active={1}, count=2) == [3, 4]
    pod = Pod.model_validate({"metadata": {"annotations": {"batch.kubernetes.io/job-completion-index": "3"}}})
    assert get_completion_index(pod) == 3
    assert get_completion_index(Pod.model_validate({"metadata": {}})) is None


def test_pod_failure_policy_first_matching_rule_wins() -> None:
    policy = PodFailurePolicy.model_validate({"rules": [
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
        {"action": "FailJob", "onExitCodes": {"containerName": "c", "operator": "In", "values": [42]}},
        {"action": "Count", "onExitCodes": {"operator": "NotIn", "values": [1]}},
    ]})
    match = match_pod_failure_policy(policy, failed_pod(42))
    assert match is not None and match.action == "FailJob"
    assert match.message == "Container c for pod ns/p failed with exit code 42 matching FailJob rule at index 1"
    assert match_pod_failure_policy(policy, failed_pod(42, name="other")).action == "Count"  # type: ignore[union-attr]
    assert match_pod_failure_policy(policy, failed_pod(1)) is None  # NotIn [1]: no rule, counted as usual
    disrupted = failed_pod(137, [{"type": "DisruptionTarget", "status": "True"}])
    assert match_pod_failure_policy(policy, disrupted).action == "Ignore"  # type: ignore[union-attr]
    assert match_pod_failure_policy(None, failed_pod(42)) is None


def test_wanted_active_pods() -> None:
    assert wanted_active(job(completions=5, parallelism=2), succeeded=0, succeeded_indexes=set()) == 2
    assert wanted_active(job(completions=5, parallelism=2), succeeded=4, succeeded_indexes=set()) == 1
    assert wanted_active(job(completions=5, parallelism=2), succeeded=5, succeeded_indexes=set()) == 0
    assert wanted_active(job(parallelism=3), succeeded=0, succeeded_indexes=set()) == 3  # a work queue
    assert wanted_active(job(parallelism=3), succeeded=1, succeeded_indexes=set()) == 0
    indexed = job(completions=3, parallelism=3, completionMode="Indexed")
    assert wanted_active(indexed, succeeded=9, succeeded_indexes={0, 2}) == 1


def test_a_terminating_pod_counts_as_failed_unless_it_succeeded() -> None:
    deleting = Pod.model_validate({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"},
                                   "status": {"phase": "Running"}})
    assert considered_failed(deleting)
    assert not considered_failed(Pod.model_validate({"metadata": {}, "status": {"phase": "Succeeded"}}))
    assert not considered_failed(Pod.model_validate({"metadata": {}, "status": {"phase": "Running"}}))


def test_conditions_are_added_once_and_flipped() -> None:
    status = JobStatus()
    assert set_condition(status, "Suspended", "True", "JobSuspended", "Job suspended", T0)
    assert not set_condition(status, "Suspended", "True", "JobSuspended", "Job suspended", T0)
    assert set_condition(status, "Suspended", "False", "JobResumed", "Job resumed", T0)
    assert [(c.type, c.status, c.reason) for c in status.conditions or []] == [("Suspended", "False", "JobResumed")]
    assert not set_condition(status, "Failed", "False", "x", "y", T0)  # never set: not added as False


def test_indexed_pod_gets_index_annotation_label_hostname_and_env() -> None:
    controller = JobController.__new__(JobController)  # only pod_body, which reads nothing of its own
    body = controller.pod_body(job(completions=3, completionMode="Indexed"), 2)
    meta = body["metadata"]
    assert meta["generateName"] == "pi-2-"
    assert meta["annotations"]["batch.kubernetes.io/job-completion-index"] == "2"
    assert meta["labels"]["batch.kubernetes.io/job-completion-index"] == "2"
    assert meta["finalizers"] == ["batch.kubernetes.io/job-tracking"]
    assert meta["ownerReferences"][0]["kind"] == "Job" and meta["ownerReferences"][0]["blockOwnerDeletion"]
    assert body["spec"]["hostname"] == "pi-2"
    assert body["spec"]["containers"][0]["env"][0] == {"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {
        "apiVersion": "v1", "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}}
    plain = controller.pod_body(job(), None)
    assert plain["metadata"]["generateName"] == "pi-" and "hostname" not in plain["spec"]


def test_ttl_after_finished_expiry() -> None:
    finished = job(ttlSecondsAfterFinished=30).model_copy(update={"status": JobStatus.model_validate({
        "conditions": [{"type": "Complete", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]})})
    assert time_left(finished, T0 + dt.timedelta(seconds=10)) == 20
    assert time_left(finished, T0 + dt.timedelta(seconds=31)) == -1
    assert time_left(job(ttlSecondsAfterFinished=30), T0) is None  # not finished
    assert time_left(job(), T0) is None  # no TTL
