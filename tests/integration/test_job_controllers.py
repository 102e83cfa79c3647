"""Jobs, CronJobs and TTL-after-finished on real processes: the session's etcd and apiserver, one
controller-manager process (job, cronjob, ttl-after-finished, garbagecollector; the Job back-off base
shortened to 1 s by its flag) and one kubelet running the pods as Docker containers (busybox; the pod
templates name the node, so no scheduler is needed). Every wait has a deadline.

The CronJob test waits for real minutes (a `* * * * *` schedule): one Job within ~70 s, then the
next minute's run skipped by concurrencyPolicy Forbid while the first still runs. Its CronJob is made when the
module starts (the `ticking` fixture), so those minutes pass while the other tests run."""

from __future__ import annotations

import datetime as dt
import re
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.cluster import ApiServer, make_workdir, wait_for
from tests.controller_process import ControllerProcess
from tests.integration.test_kubelet import log_of
from tests.integration.test_mkubectl import Mk, same_output
from tests.kubectl import Kubectl, find_kubectl
from tests.node_process import BUSYBOX

JSONDict = dict[str, Any]
FINALIZER = "batch.kubernetes.io/job-tracking"


@pytest.fixture(scope="module")
def controllers(apiserver: ApiServer) -> Iterator[ControllerProcess]:
    workdir = make_workdir("minik8s-batch-cm-")
    process = ControllerProcess(workdir, apiserver.url, ["job", "cronjob", "ttl-after-finished", "garbagecollector"],
                                "--job-pod-failure-backoff=1s")
    process.start()
    try:
        yield process
    finally:
        process.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def job(name: str, node: str, script: str, **spec: Any) -> JSONDict:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {**spec, "template": {"spec": {
                "nodeName": node, "restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                "containers": [{"name": "c", "image": BUSYBOX, "command": ["sh", "-c", script]}]}}}}


def create(api: httpx.Client, ns: str, path: str, body: JSONDict) -> JSONDict:
    r = api.post(f"/apis/batch/v1/namespaces/{ns}/{path}", json=body)
    assert r.status_code == 201, r.text
    return r.json()


def get_job(api: httpx.Client, ns: str, name: str) -> JSONDict:
    r = api.get(f"/apis/batch/v1/namespaces/{ns}/jobs/{name}")
    assert r.status_code == 200, r.text
    return r.json()


def pods_of(api: httpx.Client, ns: str, name: str) -> list[JSONDict]:
    r = api.get(f"/api/v1/namespaces/{ns}/pods", params={"labelSelector": f"batch.kubernetes.io/job-name={name}"})
    assert r.status_code == 200, r.text
    items: list[JSONDict] = r.json()["items"]
    return items


def condition(obj: JSONDict, type_: str) -> JSONDict | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or []
                 if c["type"] == type_ and c["status"] == "True"), None)


def wait_condition(api: httpx.Client, ns: str, name: str, type_: str, timeout: float = 90) -> JSONDict:
    found = wait_for(lambda: condition(j := get_job(api, ns, name), type_) and j, timeout, 0.25,
                     what=f"job {name} to be {type_}")
    assert isinstance(found, dict)
    return found


def reasons(api: httpx.Client, ns: str, name: str) -> list[str]:
    items = api.get(f"/api/v1/namespaces/{ns}/events").json()["items"]
    return [e["reason"] for e in items if e["involvedObject"].get("name") == name]


def test_job_of_three_completions_two_at_a_time(api: httpx.Client, namespace: str, controllers: ControllerProcess,
                                                kubelet_node: str) -> None:
    create(api, namespace, "jobs", job("three", kubelet_node, "echo done; sleep 1", completions=3, parallelism=2))
    seen_active: list[int] = []

    def complete() -> JSONDict | None:
        j = get_job(api, namespace, "three")
        seen_active.append(len([p for p in pods_of(api, namespace, "three")
                                if p.get("status", {}).get("phase") not in ("Succeeded", "Failed")]))
        return j if condition(j, "Complete") else None

    done = wait_for(complete, 120, 0.25, what="job three to complete")
    assert isinstance(done, dict)
    status = done["status"]
    assert status["succeeded"] == 3 and status.get("failed", 0) == 0 and status["active"] == 0, status
    assert status["startTime"] <= status["completionTime"], status
    assert condition(done, "SuccessCriteriaMet") is not None, status
    assert not (status.get("uncountedTerminatedPods") or {}).get("succeeded"), status
    assert max(seen_active) <= 2, seen_active
    pods = pods_of(api, namespace, "three")
    assert sorted(p["status"]["phase"] for p in pods) == ["Succeeded"] * 3, [p["status"] for p in pods]
    assert all(FINALIZER not in (p["metadata"].get("finalizers") or []) for p in pods)
    assert all(p["metadata"]["labels"]["batch.kubernetes.io/controller-uid"] == done["metadata"]["uid"] for p in pods)
    assert log_of(api, namespace, pods[0]["metadata"]["name"]) == "done\n"
    wait_for(lambda: reasons(api, namespace, "three").count("SuccessfulCreate") == 3
             and "Completed" in reasons(api, namespace, "three"), 20, 0.25, what="the job's events")


def test_indexed_job_gives_each_pod_its_index(api: httpx.Client, namespace: str, controllers: ControllerProcess,
                                              kubelet_node: str) -> None:
    create(api, namespace, "jobs", job("idx", kubelet_node, "echo index=$JOB_COMPLETION_INDEX host=$(hostname)",
                                       completions=3, parallelism=3, completionMode="Indexed"))
    done = wait_condition(api, namespace, "idx", "Complete")
    assert done["status"]["completedIndexes"] == "0-2" and done["status"]["succeeded"] == 3, done["status"]
    printed = set()
    for pod in pods_of(api, namespace, "idx"):
        index = pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]
        assert pod["spec"]["hostname"] == f"idx-{index}"
        assert pod["metadata"]["name"].startswith(f"idx-{index}-")
        printed.add(log_of(api, namespace, pod["metadata"]["name"]))
    assert printed == {f"index={i} host=idx-{i}\n" for i in range(3)}


def test_backoff_limit_fails_the_job(api: httpx.Client, namespace: str, controllers: ControllerProcess,
                                     kubelet_node: str) -> None:
    create(api, namespace, "jobs", job("fails", kubelet_node, "exit 1", backoffLimit=1))
    failed = wait_condition(api, namespace, "fails", "Failed")
    cond = condition(failed, "Failed")
    assert cond is not None and cond["reason"] == "BackoffLimitExceeded", cond
    assert cond["message"] == "Job has reached the specified backoff limit"
    assert failed["status"]["failed"] == 2 and failed["status"].get("succeeded", 0) == 0, failed["status"]
    assert len(pods_of(api, namespace, "fails")) == 2  # the second waited out the back-off, no third one
    assert "BackoffLimitExceeded" in reasons(api, namespace, "fails")


def test_pod_failure_policy_fail_job_on_exit_code(api: httpx.Client, namespace: str, controllers: ControllerProcess,
                                                  kubelet_node: str) -> None:
    create(api, namespace, "jobs", job("policy", kubelet_node, "exit 42", backoffLimit=6, podFailurePolicy={
        "rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}]}))
    failed = wait_condition(api, namespace, "policy", "Failed")
    cond = condition(failed, "Failed")
    assert cond is not None and cond["reason"] == "PodFailurePolicy", cond
    assert "failed with exit code 42 matching FailJob rule at index 0" in cond["message"], cond
    assert len(pods_of(api, namespace, "policy")) == 1


def test_active_deadline_and_suspend(api: httpx.Client, namespace: str, controllers: ControllerProcess,
                                     kubelet_node: str) -> None:
    create(api, namespace, "jobs", job("slow", kubelet_node, "sleep 3600", activeDeadlineSeconds=3))
    failed = wait_condition(api, namespace, "slow", "Failed", 60)
    cond = condition(failed, "Failed")
    assert cond is not None and cond["reason"] == "DeadlineExceeded", cond
    wait_for(lambda: all(p["metadata"].get("deletionTimestamp") for p in pods_of(api, namespace, "slow")), 30, 0.25,
             what="the running pod of the expired job to be deleted")

    create(api, namespace, "jobs", job("held", kubelet_node, "echo ran", suspend=True))
    suspended = wait_condition(api, namespace, "held", "Suspended", 30)
    assert pods_of(api, namespace, "held") == [] and "startTime" not in suspended["status"], suspended["status"]
    r = api.patch(f"/apis/batch/v1/namespaces/{namespace}/jobs/held", json={"spec": {"suspend": False}},
                  headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text
    done = wait_condition(api, namespace, "held", "Complete")
    resumed = next(c for c in done["status"]["conditions"] if c["type"] == "Suspended")
    assert (resumed["status"], resumed["reason"]) == ("False", "JobResumed"), resumed


def test_ttl_after_finished_deletes_job_and_pods(api: httpx.Client, namespace: str, controllers: ControllerProcess,
                                                 kubelet_node: str) -> None:
    create(api, namespace, "jobs", job("brief", kubelet_node, "true", ttlSecondsAfterFinished=1))
    wait_for(lambda: api.get(f"/apis/batch/v1/namespaces/{namespace}/jobs/brief").status_code == 404, 90, 0.25,
             what="the finished job to be deleted after its TTL")
    wait_for(lambda: pods_of(api, namespace, "brief") == [], 60, 0.25, what="its pods to be collected")


def test_deleting_a_running_job_leaves_no_pod_held_by_its_finalizer(
        api: httpx.Client, namespace: str, controllers: ControllerProcess, kubelet_node: str) -> None:
    create(api, namespace, "jobs", job("doomed", kubelet_node, "sleep 3600", parallelism=2, completions=4))
    wait_for(lambda: len(pods_of(api, namespace, "doomed")) == 2
             and all(FINALIZER in (p["metadata"].get("finalizers") or []) for p in pods_of(api, namespace, "doomed")),
             30, 0.25, what="two tracked pods")
    r = api.delete(f"/apis/batch/v1/namespaces/{namespace}/jobs/doomed", params={"propagationPolicy": "Background"})
    assert r.status_code == 200, r.text
    # the garbage collector deletes the pods; the Job controller lets go of them once their Job is gone
    wait_for(lambda: pods_of(api, namespace, "doomed") == [], 60, 0.25, what="the orphaned pods to be gone")


def _owned_finished_job(api: httpx.Client, ns: str, cronjob: JSONDict, name: str, kind: str, start: str) -> None:
    """A Job the CronJob owns that finished long ago (suspended, so it never runs; its status written)."""
    body = {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "ownerReferences": [{
                "apiVersion": "batch/v1", "kind": "CronJob", "name": cronjob["metadata"]["name"],
                "uid": cronjob["metadata"]["uid"], "controller": True}]},
            "spec": {"suspend": True, "template": {"spec": {"restartPolicy": "Never", "containers": [
                {"name": "c", "image": BUSYBOX}]}}}}
    create(api, ns, "jobs", body)

    def finish() -> bool:  # the Job controller writes its status too (Suspended): retry on a conflict
        current = get_job(api, ns, name)
        current["status"] = {"startTime": start, "conditions": [
            {"type": kind, "status": "True", "lastTransitionTime": start, "reason": "Test", "message": "test"}]}
        r = api.put(f"/apis/batch/v1/namespaces/{ns}/jobs/{name}/status", json=current)
        assert r.status_code in (200, 409), r.text
        return r.status_code == 200

    wait_for(finish, 20, 0.1, what=f"the status of {name} to be written")


@pytest.fixture(scope="module", autouse=True)
def ticking(apiserver: ApiServer, controllers: ControllerProcess, kubelet_node: str) -> Iterator[tuple[str, JSONDict]]:
    """A namespace of its own with the CronJob `tick` (`* * * * *`, Forbid, one successful Job kept) and three
    finished Jobs it owns, made when the module's first test starts: the CronJob test waits for real minute
    boundaries, which then pass while the module's other tests run. (namespace, the CronJob as created)"""
    namespace = f"cron-{uuid.uuid4().hex[:8]}"
    with httpx.Client(base_url=apiserver.url, timeout=10) as api:
        r = api.post("/api/v1/namespaces", json={"metadata": {"name": namespace}})
        assert r.status_code == 201, r.text
        try:
            template = job("unused", kubelet_node, "sleep 3600")
            cronjob = create(api, namespace, "cronjobs", {
                "apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "tick"},
                "spec": {"schedule": "* * * * *", "concurrencyPolicy": "Forbid", "successfulJobsHistoryLimit": 1,
                         "jobTemplate": {"spec": template["spec"]}}})
            for i, start in enumerate(("2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z")):
                _owned_finished_job(api, namespace, cronjob, f"old-{i}", "Complete", start)
            yield namespace, cronjob
        finally:
            api.delete(f"/api/v1/namespaces/{namespace}")


def test_cronjob_runs_each_minute_forbids_overlap_and_prunes_history(
        api: httpx.Client, ticking: tuple[str, JSONDict]) -> None:
    namespace, cronjob = ticking
    assert cronjob["spec"]["failedJobsHistoryLimit"] == 1 and cronjob["spec"]["suspend"] is False

    def jobs() -> list[JSONDict]:
        items: list[JSONDict] = api.get(f"/apis/batch/v1/namespaces/{namespace}/jobs").json()["items"]
        return items

    # history: only the newest successful Job is kept
    wait_for(lambda: sorted(j["metadata"]["name"] for j in jobs() if j["metadata"]["name"].startswith("old-")
                            and not j["metadata"].get("deletionTimestamp")) == ["old-2"], 30, 0.25,
             what="the successful history to be pruned to 1")

    def scheduled() -> list[JSONDict]:
        return [j for j in jobs() if j["metadata"]["name"].startswith("tick-")]

    first = wait_for(lambda: scheduled(), 75, 0.5, what="the first scheduled Job")
    assert isinstance(first, list) and len(first) == 1
    name = first[0]["metadata"]["name"]
    minutes = int(name.removeprefix("tick-"))
    stamp = first[0]["metadata"]["annotations"]["batch.kubernetes.io/cronjob-scheduled-timestamp"]
    assert dt.datetime.fromisoformat(stamp).timestamp() == minutes * 60, stamp
    cj = wait_for(lambda: (c := api.get(f"/apis/batch/v1/namespaces/{namespace}/cronjobs/tick").json())
                  ["status"].get("active") and c, 20, 0.25, what="the CronJob's active list")
    assert isinstance(cj, dict)
    assert [a["name"] for a in cj["status"]["active"]] == [name]
    assert dt.datetime.fromisoformat(cj["status"]["lastScheduleTime"]).timestamp() == minutes * 60

    # the next minute: Forbid skips it while the first Job still runs
    wait_for(lambda: "JobAlreadyActive" in reasons(api, namespace, "tick"), 75, 0.5,
             what="the next run to be skipped (Forbid)")
    assert [j["metadata"]["name"] for j in scheduled()] == [name]
    r = api.delete(f"/apis/batch/v1/namespaces/{namespace}/cronjobs/tick",
                   params={"propagationPolicy": "Background"})
    assert r.status_code == 200, r.text


# -- real kubectl ---------------------------------------------------------------------------------

KUBECTL_VERSIONS = ("1.27", "1.33")


@pytest.fixture(params=KUBECTL_VERSIONS, ids=[f"kubectl{v}" for v in KUBECTL_VERSIONS])
def kubectl(request: pytest.FixtureRequest, tmp_path: Path, apiserver: ApiServer, namespace: str) -> Kubectl:
    version: str = request.param
    binary = find_kubectl(version)
    if binary is None:
        pytest.skip(f"kubectl.{version} is not installed")
    return Kubectl(binary, version, apiserver.url, tmp_path / f"kubectl-{version}", namespace)


def _columns(line: str) -> list[str]:
    return re.split(r"\s{2,}", line.strip())


def test_kubectl_create_and_get_jobs_and_cronjobs(kubectl: Kubectl, api: httpx.Client, namespace: str,
                                                  controllers: ControllerProcess) -> None:
    r = kubectl.run("create", "cronjob", "tick", f"--image={BUSYBOX}", "--schedule=*/5 * * * *", "--", "echo",
                    "hi").ok()
    assert r.stdout == "cronjob.batch/tick created\n", r
    r = kubectl.run("create", "job", "hello", f"--image={BUSYBOX}", "--", "echo", "hi").ok()
    assert r.stdout == "job.batch/hello created\n", r
    r = kubectl.run("create", "job", "manual", "--from=cronjob/tick").ok()
    assert r.stdout == "job.batch/manual created\n", r
    manual = get_job(api, namespace, "manual")
    assert manual["metadata"]["annotations"]["cronjob.kubernetes.io/instantiate"] == "manual"
    assert manual["metadata"]["ownerReferences"][0]["kind"] == "CronJob"
    assert manual["spec"]["template"]["spec"]["containers"][0]["command"] == ["echo", "hi"]
    hello = get_job(api, namespace, "hello")
    container = hello["spec"]["template"]["spec"]["containers"][0]
    assert (container["name"], container["image"], container["command"]) == ("hello", BUSYBOX, ["echo", "hi"])
    assert hello["spec"]["template"]["spec"]["restartPolicy"] == "Never"

    lines = kubectl.run("get", "jobs,cronjobs").ok().stdout.splitlines()
    assert _columns(lines[0]) == ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"], lines
    jobs = {_columns(line)[0]: _columns(line) for line in lines[1:] if line.startswith("job.batch/")}
    assert set(jobs) == {"job.batch/hello", "job.batch/manual"}, lines
    assert jobs["job.batch/hello"][1:3] == ["Running", "0/1"], lines
    header = next(i for i, line in enumerate(lines) if line.startswith("NAME") and i > 0)
    assert _columns(lines[header]) == ["NAME", "SCHEDULE", "TIMEZONE", "SUSPEND", "ACTIVE", "LAST SCHEDULE",
                                       "AGE"], lines
    assert _columns(lines[header + 1])[:6] == ["cronjob.batch/tick", "*/5 * * * *", "<none>", "False", "0",
                                               "<none>"], lines

    r = kubectl.run("create", "cronjob", "bad", f"--image={BUSYBOX}", "--schedule=every minute")
    assert r.returncode == 1, r
    assert r.stderr == ('error: failed to create cronjob: CronJob.batch "bad" is invalid: spec.schedule: Invalid '
                        'value: "every minute": expected exactly 5 fields, found 2: every minute\n'), r
    assert api.get(f"/apis/batch/v1/namespaces/{namespace}/cronjobs/bad").status_code == 404


def test_mkubectl_prints_kubectls_text(api: httpx.Client, apiserver: ApiServer, namespace: str, tmp_path: Path,
                                       controllers: ControllerProcess, kubelet_node: str) -> None:
    """mkubectl beside kubectl 1.33 on the same objects: client dry runs of `create job|cronjob` byte for byte,
    then `describe job|cronjob` and `get jobs,cronjobs -o wide` on a finished Indexed Job and a CronJob."""
    binary = find_kubectl("1.33")
    if binary is None:
        pytest.skip("kubectl.1.33 is not installed: nothing to compare with")
    kubectl = Kubectl(binary, "1.33", apiserver.url, tmp_path / "kubectl-1.33", namespace)
    mk = Mk(apiserver.url, tmp_path, namespace)
    same_output(mk, kubectl, "create", "job", "dry", f"--image={BUSYBOX}", "--dry-run=client", "-o", "yaml", "--",
                "echo", "hi")
    same_output(mk, kubectl, "create", "cronjob", "dry", f"--image={BUSYBOX}", "--schedule=0 * * * *",
                "--restart=Never", "--dry-run=client", "-o", "yaml")
    create(api, namespace, "jobs", job("shown", kubelet_node, "true", completions=2, completionMode="Indexed"))
    wait_condition(api, namespace, "shown", "Complete")
    mk.run("create", "cronjob", "nightly", f"--image={BUSYBOX}", "--schedule=0 3 * * *").ok()
    described = same_output(mk, kubectl, "describe", "job", "shown")
    assert "Completed Indexes:  0,1\n" in described or "Completed Indexes:  0-1\n" in described, described
    same_output(mk, kubectl, "describe", "cronjob", "nightly")
    same_output(mk, kubectl, "get", "jobs,cronjobs", "-o", "wide")


def test_official_python_client(apiserver: ApiServer, namespace: str, controllers: ControllerProcess,
                                kubelet_node: str) -> None:
    """kubernetes' BatchV1Api: create a Job and a CronJob, read them back typed (defaults, generated selector),
    watch the Job to Complete, and get a 422 for a bad schedule."""
    from kubernetes import client, watch
    from kubernetes.client.exceptions import ApiException

    configuration = client.Configuration()
    configuration.host = apiserver.url
    container = client.V1Container(name="c", image=BUSYBOX, command=["true"])
    pod_spec = client.V1PodSpec(containers=[container], restart_policy="Never", node_name=kubelet_node)
    job_spec = client.V1JobSpec(template=client.V1PodTemplateSpec(spec=pod_spec), ttl_seconds_after_finished=600)
    with client.ApiClient(configuration) as api_client:
        batch = client.BatchV1Api(api_client)
        created = batch.create_namespaced_job(namespace, client.V1Job(metadata=client.V1ObjectMeta(name="py"),
                                                                      spec=job_spec))
        assert created.spec.backoff_limit == 6 and created.spec.completions == 1
        assert created.spec.selector.match_labels == {"batch.kubernetes.io/controller-uid": created.metadata.uid}
        complete = None
        for event in watch.Watch().stream(batch.list_namespaced_job, namespace, field_selector="metadata.name=py",
                                          timeout_seconds=90):
            conditions = event["object"].status.conditions or []
            if any(c.type == "Complete" and c.status == "True" for c in conditions):
                complete = event["object"]
                break
        assert complete is not None and complete.status.succeeded == 1, "the Job did not complete"
        assert complete.status.completion_time >= complete.status.start_time

        cron = batch.create_namespaced_cron_job(namespace, client.V1CronJob(
            metadata=client.V1ObjectMeta(name="py-cron"),
            spec=client.V1CronJobSpec(schedule="0 3 * * *", time_zone="Europe/Berlin",
                                      job_template=client.V1JobTemplateSpec(spec=job_spec))))
        assert (cron.spec.concurrency_policy, cron.spec.successful_jobs_history_limit) == ("Allow", 3)
        assert [c.metadata.name for c in batch.list_namespaced_cron_job(namespace).items] == ["py-cron"]
        with pytest.raises(ApiException) as e:
            batch.create_namespaced_cron_job(namespace, client.V1CronJob(
                metadata=client.V1ObjectMeta(name="py-bad"),
                spec=client.V1CronJobSpec(schedule="61 * * * *", job_template=client.V1JobTemplateSpec(spec=job_spec))))
        assert e.value.status == 422 and "end of range (61) above maximum (59): 61" in e.value.body


def test_bad_jobs_and_cronjobs_are_refused_and_nothing_is_stored(api: httpx.Client, namespace: str,
                                                                 kubelet_node: str) -> None:
    """422 Invalid with upstream's field causes; nothing is written."""
    mismatched = job("mismatch", kubelet_node, "true", manualSelector=True, selector={"matchLabels": {"app": "a"}})
    mismatched["spec"]["template"]["metadata"] = {"labels": {"app": "b"}}
    r = api.post(f"/apis/batch/v1/namespaces/{namespace}/jobs", json=mismatched)
    assert r.status_code == 422, r.text
    status = r.json()
    assert (status["reason"], status["details"]["kind"], status["details"]["name"]) == ("Invalid", "Job", "mismatch")
    assert [(c["field"], c["message"]) for c in status["details"]["causes"]] == [
        ("spec.template.metadata.labels", 'Invalid value: map[string]string{"app":"b"}: `selector` does not match '
                                          "template `labels`")]
    always = job("always", kubelet_node, "true")
    always["spec"]["template"]["spec"]["restartPolicy"] = "Always"
    r = api.post(f"/apis/batch/v1/namespaces/{namespace}/jobs", json=always)
    assert r.status_code == 422 and r.json()["message"].endswith('supported values: "OnFailure", "Never"'), r.text
    r = api.post(f"/apis/batch/v1/namespaces/{namespace}/cronjobs", json={
        "apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "bad"},
        "spec": {"schedule": "* * *", "jobTemplate": {"spec": job("x", kubelet_node, "true")["spec"]}}})
    assert r.status_code == 422, r.text
    assert r.json()["message"] == ('CronJob.batch "bad" is invalid: spec.schedule: Invalid value: "* * *": '
                                   "expected exactly 5 fields, found 3: * * *")
    for resource in ("jobs", "cronjobs"):
        assert api.get(f"/apis/batch/v1/namespaces/{namespace}/{resource}").json()["items"] == []
    # an immutable field of a stored Job
    create(api, namespace, "jobs", job("fixed", kubelet_node, "sleep 3600", suspend=True))
    r = api.patch(f"/apis/batch/v1/namespaces/{namespace}/jobs/fixed", json={"spec": {"completions": 5}},
                  headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 422, r.text
    assert "spec.completions: Invalid value: 5: field is immutable" in r.json()["message"], r.text
    assert get_job(api, namespace, "fixed")["spec"]["completions"] == 1
