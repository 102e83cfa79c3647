"""OpenTelemetry tracing (issue 15, the tracing contract) across real processes: a real OTLP/gRPC collector
in the test (tests/otlp_collector.py), an apiserver, a controller-manager (deployment, replicaset), a scheduler
and one kubelet with its Docker shim, each started with --tracing-config-file. A 2-replica Deployment is
applied with a traceparent of the test's own, and the spans that arrive are checked: names, kinds, the
contract's attributes, service names, and the parent/child links across processes (the test's span → the
apiserver's request; the controller's sync → the apiserver requests it makes; the scheduler's bind → the
binding POST; the kubelet's sandbox step → the CRI server's RunPodSandbox → CNI ADD).

And the tracing adds no new failure mode: an apiserver whose collector is unreachable serves as before,
logs at most a line or two about it, and stops at once on SIGTERM.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.cluster import ApiServer, Etcd, free_port, make_workdir, ok, wait_for
from tests.controller_process import ControllerProcess
from tests.node_process import HTTPD, DockershimProcess, KubeletProcess, cleanup, ensure_images, free_pod_cidrs
from tests.otlp_collector import Collector, Span, config_file
from tests.scheduler_process import SchedulerProcess

TRACE_ID = uuid.uuid4().hex
TEST_SPAN_ID = uuid.uuid4().hex[:16]


@dataclass
class TracedCluster:
    collector: Collector
    apiserver: ApiServer
    node: str
    api: httpx.Client


@pytest.fixture(scope="module")
def cluster(own_etcd: Etcd) -> Iterator[TracedCluster]:
    """Its own etcd: on the session's shared one, nodes other modules left would take the pods."""
    etcd = own_etcd
    try:
        import docker

        docker.from_env().ping()
    except Exception as e:
        pytest.skip(f"no Docker engine to run a kubelet's pods: {e}")
    ensure_images()
    workdir = make_workdir("minik8s-tracing-")
    collector = Collector().start()
    tracing = ("--tracing-config-file", config_file(workdir / "tracing.yaml", collector.endpoint))
    apiserver = ApiServer(workdir, etcd, "--etcd-compaction-interval", "0", *tracing)
    started: list[Any] = []
    kubelet: KubeletProcess | None = None
    try:
        apiserver.start()
        started.append(apiserver)
        cm = ControllerProcess(workdir, apiserver.url, ["deployment", "replicaset"], *tracing)
        cm.start()
        started.append(cm)
        scheduler = SchedulerProcess(workdir, apiserver.url, None, *tracing)
        scheduler.start()
        started.append(scheduler)
        kubelet = KubeletProcess(workdir, apiserver, f"tr-{uuid.uuid4().hex[:6]}", free_pod_cidrs(1)[0],
                                 extra_args=tracing)
        kubelet.runtime = DockershimProcess(workdir, kubelet.node, kubelet.root_dir, tracing)
        with httpx.Client(base_url=apiserver.url, timeout=15) as api:
            kubelet.start(api)
            yield TracedCluster(collector, apiserver, kubelet.node, api)
    finally:
        if kubelet is not None:
            cleanup([kubelet])
            with httpx.Client(base_url=apiserver.url, timeout=10) as api:
                api.delete(f"/api/v1/nodes/{kubelet.node}")
        for component in reversed(started):
            component.stop()
        collector.stop()
        shutil.rmtree(workdir, ignore_errors=True)


@dataclass
class Road:
    deployment: dict[str, Any]
    pods: list[dict[str, Any]]


@pytest.fixture(scope="module")
def road(cluster: TracedCluster) -> Road:
    api, ns = cluster.api, f"trace-{uuid.uuid4().hex[:6]}"
    ok(api.post("/api/v1/namespaces", json={"metadata": {"name": ns}}))
    body = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "httpd", "image": HTTPD,
                                                           "imagePullPolicy": "IfNotPresent"}]}}}}
    created = ok(api.post(f"/apis/apps/v1/namespaces/{ns}/deployments", params={"fieldManager": "road-test"},
                          json=body, headers={"traceparent": f"00-{TRACE_ID}-{TEST_SPAN_ID}-01",
                                              "User-Agent": "tracing-test/1.0"}))

    def running() -> list[dict[str, Any]] | None:
        pods = ok(api.get(f"/api/v1/namespaces/{ns}/pods"))["items"]
        ready = [p for p in pods if p["status"].get("phase") == "Running" and p["status"].get("podIP")]
        return ready if len(ready) == 2 else None

    pods = wait_for(running, 90, what="the deployment's 2 pods running")
    assert isinstance(pods, list)
    return Road(created, pods)


def assert_has(span: Span, expected: dict[str, Any]) -> None:
    wrong = {k: (span.attributes.get(k, "<absent>"), v) for k, v in expected.items() if span.attributes.get(k) != v}
    assert not wrong, f"{span.name}: (found, wanted) {wrong}"


def one(spans: list[Span], what: str) -> Span:
    assert spans, f"no {what}"
    return spans[0]


def test_the_apply_request_is_a_child_of_the_callers_span(cluster: TracedCluster, road: Road) -> None:
    meta = road.deployment["metadata"]
    request = one(cluster.collector.wait(lambda _: cluster.collector.find(
        "apiserver.request", {"k8s.verb": "create", "k8s.resource": "deployments", "k8s.object.uid": meta["uid"]})),
        "apiserver.request of the create")
    assert (request.trace_id, request.parent_id) == (TRACE_ID, TEST_SPAN_ID)
    assert request.service == "kube-apiserver" and request.kind == "SERVER"
    assert request.resource.get("service.instance.id")
    assert_has(request, {
        "http.request.method": "POST", "url.path": f"/apis/apps/v1/namespaces/{meta['namespace']}/deployments",
        "http.response.status_code": 201, "k8s.field_manager": "road-test", "user_agent.original": "tracing-test/1.0",
        "enduser.id": "system:unsecured", "k8s.object.kind": "Deployment", "k8s.object.api_version": "apps/v1",
        "k8s.object.namespace": meta["namespace"], "k8s.object.name": "web", "k8s.object.generation": 1,
        "k8s.object.resource_version": meta["resourceVersion"], "k8s.etcd.revision": int(meta["resourceVersion"])})
    assert "k8s.subresource" not in request.attributes  # none: not sent
    # its steps, events on it (no authentication nor authorization on the insecure port): each admission plugin
    # that ran, and the etcd transaction that wrote it
    children = request.steps
    assert all(request.start_ns <= s.start_ns <= s.end_ns <= request.end_ns for s in children)
    etcd = [s for s in children if s.name == "apiserver.etcd"]
    assert any(s["k8s.etcd.op"] == "txn" and s["k8s.etcd.revision"] == int(meta["resourceVersion"]) for s in etcd)
    # the admission plugins that take part in a Deployment create: PodSecurity checks its pod template
    admission = {(s["k8s.admission.plugin"], s["k8s.admission.phase"]): s for s in children
                 if s.name == "apiserver.admission"}
    assert admission.keys() == {("PodSecurity", "validating")}
    assert "k8s.admission.mutated" not in admission["PodSecurity", "validating"].attributes  # a validating one


def test_informers_controller_syncs_and_their_requests(cluster: TracedCluster, road: Road) -> None:
    c = cluster.collector
    meta = road.deployment["metadata"]
    # the watch delivery of the create to the controller-manager, joined by the write's revision
    event = one(c.wait(lambda _: c.find("informer.event", {"k8s.object.uid": meta["uid"],
                                                           "k8s.watch.event_type": "ADDED"},
                                        "kube-controller-manager")), "informer.event of the deployment")
    assert event.kind == "CONSUMER" and event["k8s.resource"] == "deployments"
    assert event["k8s.object.resource_version"] == meta["resourceVersion"]
    # the deployment controller's sync of it, and the ReplicaSet create it made, a child in the apiserver
    syncs = c.wait(lambda _: c.find("controller.sync", {"k8s.controller": "deployment",
                                                       "k8s.object.uid": meta["uid"]}) or None)
    assert all(s.service == "kube-controller-manager" and s["k8s.queue.key"] == f"{meta['namespace']}/web"
               and isinstance(s["k8s.queue.wait_ms"], float) and s["k8s.sync.result"] in ("ok", "requeue", "error")
               for s in syncs)

    def rs_create() -> tuple[Span, Span] | None:
        for sync in c.find("controller.sync", {"k8s.controller": "deployment", "k8s.object.uid": meta["uid"]}):
            for child in c.children(sync, "apiserver.request"):
                if child["k8s.verb"] == "create" and child["k8s.resource"] == "replicasets":
                    return sync, child
        return None

    _, request = c.wait(lambda _: rs_create(), what="the ReplicaSet create as a child of the deployment sync")
    assert request.service == "kube-apiserver" and request["http.response.status_code"] == 201
    assert request["enduser.id"] == "system:unsecured"
    assert (request["k8s.owner.uid"], request["k8s.owner.kind"], request["k8s.owner.name"]) == (
        meta["uid"], "Deployment", "web")
    rs_uid = request["k8s.object.uid"]

    # the replicaset controller: its syncs of that ReplicaSet create the two pods, as its children
    def pod_creates() -> list[Span] | None:
        found = [child for sync in c.find("controller.sync", {"k8s.controller": "replicaset",
                                                              "k8s.object.uid": rs_uid})
                 for child in c.children(sync, "apiserver.request")
                 if child["k8s.verb"] == "create" and child["k8s.resource"] == "pods"]
        return found if len(found) >= 2 else None

    creates = c.wait(lambda _: pod_creates(), what="the pod creates as children of the replicaset syncs")
    assert {s["k8s.object.uid"] for s in creates} >= {p["metadata"]["uid"] for p in road.pods}
    assert all(s["k8s.owner.kind"] == "ReplicaSet" and s["k8s.owner.uid"] == rs_uid for s in creates)
    # a pod create's admission: Priority sets spec.priority (mutated), the pod plugins validate it
    plugins = {(s["k8s.admission.plugin"], s["k8s.admission.phase"]): s.get("k8s.admission.mutated")
               for s in creates[0].steps_named("apiserver.admission")}
    assert plugins.items() >= {("Priority", "mutating"): True, ("Priority", "validating"): None,
                               ("PodSecurity", "validating"): None}.items()
    assert {name for name, _ in plugins} <= {"LimitRanger", "Priority", "PodSecurity", "ResourceQuota"}


def test_the_scheduler_cycle_and_its_binding(cluster: TracedCluster, road: Road) -> None:
    c = cluster.collector
    for pod in road.pods:
        uid = pod["metadata"]["uid"]
        cycle = one(c.wait(lambda _, uid=uid: c.find("scheduler.schedule_pod", {"k8s.object.uid": uid})),
                    "scheduler.schedule_pod")
        assert cycle.service == "kube-scheduler"
        assert_has(cycle, {
            "k8s.scheduler.result": "scheduled", "k8s.scheduler.selected_node": cluster.node,
            "k8s.scheduler.feasible_nodes": 1, "k8s.scheduler.profile": "default-scheduler",
            "k8s.object.kind": "Pod", "k8s.object.name": pod["metadata"]["name"]})
        assert json.loads(cycle["k8s.scheduler.filter"]) == {cluster.node: "ok"}
        bind = one(c.wait(lambda _, cycle=cycle: c.children(cycle, "scheduler.bind") or None), "scheduler.bind")
        post = one(c.wait(lambda _, bind=bind: c.children(bind, "apiserver.request") or None),
                   "the binding POST as the bind span's child")
        assert post.service == "kube-apiserver"
        assert (post["k8s.verb"], post["k8s.resource"], post["k8s.subresource"]) == ("create", "pods", "binding")
        assert post["http.response.status_code"] == 201


def test_the_kubelet_steps_and_the_runtime(cluster: TracedCluster, road: Road) -> None:
    c = cluster.collector
    for pod in road.pods:
        uid, ip = pod["metadata"]["uid"], pod["status"]["podIP"]
        syncs = c.wait(lambda _, uid=uid: c.find("kubelet.sync_pod", {"k8s.object.uid": uid}) or None)
        assert all(s.service == "kubelet" and s.resource.get("k8s.node.name") == cluster.node
                   and s["k8s.node.name"] == cluster.node for s in syncs)
        first = next(s for s in syncs if s["k8s.sync.update_type"] == "create")

        def steps(first: Span = first) -> dict[str, Span] | None:
            found = {s.name: s for s in c.children(first)}
            wanted = {"kubelet.run_pod_sandbox", "kubelet.image", "kubelet.create_container",
                      "kubelet.start_container", "kubelet.status"}
            return found if wanted <= found.keys() else None

        found = c.wait(lambda _: steps(), what="the kubelet's steps as children of its first sync")
        sandbox = found["kubelet.run_pod_sandbox"]
        assert sandbox["k8s.pod.ip"] == ip and sandbox["k8s.sandbox.id"]
        assert_has(found["kubelet.image"], {"k8s.container.name": "httpd", "k8s.image": HTTPD,
                                            "k8s.image.pulled": False})
        assert found["kubelet.start_container"]["k8s.container.id"] == found["kubelet.create_container"][
            "k8s.container.id"]
        assert found["kubelet.status"]["k8s.pod.phase"] in ("Pending", "Running")
        # the CRI server's side, over gRPC with the kubelet's trace context, and the CNI ADD inside it
        cri = one(c.wait(lambda _, s=sandbox: c.children(s, "cri.RunPodSandbox") or None), "cri.RunPodSandbox")
        assert cri.service == "dockershim" and cri.kind == "SERVER"
        cni = one(c.wait(lambda _, cri=cri: c.children(cri, "cni.add") or None), "cni.add")
        assert cni["k8s.pod.ip"] == ip
    # the status writes: a kubelet.status span whose child is the status PATCH in the apiserver. The apiserver
    # exports its request span in its own batch, after the kubelet's may have arrived: wait for it.
    def status_patches(_: list[Span]) -> list[Span] | None:
        syncs = {x.trace_id for pod in road.pods
                 for x in c.find("kubelet.sync_pod", {"k8s.object.uid": pod["metadata"]["uid"]})}
        statuses = [s for s in c.find("kubelet.status", {}) if s.trace_id in syncs]
        patches = [p for s in statuses for p in c.children(s, "apiserver.request")
                   if p.attributes.get("k8s.subresource") == "status"
                   and p.attributes.get("enduser.id") == "system:unsecured"]
        return patches or None

    c.wait(status_patches, what="a status PATCH in the apiserver as a kubelet.status span's child")


def test_an_unreachable_collector_changes_nothing(etcd: Etcd) -> None:
    """The endpoint is a closed port: requests succeed, the exporter's complaints are a line or two, not one per
    batch, and SIGTERM ends the process at once (the queued spans are given up within 2 s)."""
    workdir = make_workdir("minik8s-tracing-away-")
    away = f"127.0.0.1:{free_port()}"
    apiserver = ApiServer(workdir, etcd, "--etcd-compaction-interval", "0",
                          "--tracing-config-file", config_file(workdir / "tracing.yaml", away))
    try:
        apiserver.start()
        ns = f"away-{uuid.uuid4().hex[:6]}"
        with httpx.Client(base_url=apiserver.url, timeout=10) as api:
            ok(api.post("/api/v1/namespaces", json={"metadata": {"name": ns}}))
            deadline = time.monotonic() + 3  # a few export rounds (every 200 ms) against the closed port
            created = 0
            while time.monotonic() < deadline:
                ok(api.post(f"/api/v1/namespaces/{ns}/configmaps",
                            json={"metadata": {"name": f"c{created}"}, "data": {"k": "v"}}))
                created += 1
            assert len(ok(api.get(f"/api/v1/namespaces/{ns}/configmaps"))["items"]) == created
        assert apiserver.process.proc is not None
        pid = apiserver.process.proc.pid
        os.killpg(pid, 15)
        started = time.monotonic()
        code = apiserver.process.proc.wait(15)
        assert code == 0, f"apiserver ended with {code}:\n{apiserver.process.log_tail()}"
        took = time.monotonic() - started
        log = Path(apiserver.process.log_path).read_text(errors="replace")
        complaints = re.findall(r"opentelemetry.*(?:export|Export)", log)
        assert len(complaints) <= 3, f"{len(complaints)} exporter lines in {took:.1f}s:\n" + "\n".join(complaints)
        assert "Traceback" not in log
    finally:
        apiserver.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def test_a_bad_tracing_config_file_ends_the_start(tmp_path: Path) -> None:
    """Upstream's validation message, exit 1, nothing served."""
    import subprocess
    import sys

    bad = tmp_path / "tracing.yaml"
    bad.write_text("apiVersion: apiserver.config.k8s.io/v1beta1\nkind: TracingConfiguration\n"
                   "samplingRatePerMillion: -1\n")
    # (the other components call the same machinery.tracing.setup_or_exit: tests/unit/machinery/test_tracing.py)
    argv = [sys.executable, "-m", "apiserver", "--tracing-config-file", str(bad), "--port", str(free_port()),
            "--etcd-servers", "http://127.0.0.1:1"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=Path(__file__).parents[2])
    assert done.returncode == 1, done.stderr
    assert ("--tracing-config-file: tracingConfiguration.samplingRatePerMillion: Invalid value: -1: "
            "sampling rate must be positive") in done.stderr
    assert "serving on" not in done.stderr
