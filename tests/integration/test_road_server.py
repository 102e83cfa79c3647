"""The road server behind a real apiserver (issue 15): a module's own etcd and secure apiserver
(`--road-server-url` over HTTPS with the front-proxy client certificate) and `python -m road` as
system:road-server. The test plays the components: it creates a Deployment, its ReplicaSet and a Pod through
the API, and sends the spans the components send for them (TRACING-CONTRACT.md) with the real OpenTelemetry
SDK over real OTLP/gRPC; then it reads the road back through the apiserver, with mkubectl and with the
official Python client. Checked: every step in causal order in the right lane, the watch delivery joined to
its write, `mkubectl road --follow` streaming a new step, kubectl's NotFound, RBAC (view reads roads through
the aggregated reader, a user without a role gets 403), the road server refusing anyone but the front proxy,
and 503 once it is away."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry import trace

from tests.auth_cluster import SecureApiServer, wait_until_allowed
from tests.cluster import REPO, Etcd, make_workdir, wait_for
from tests.kubectl import KubectlWatch, find_kubectl
from tests.road_process import ROAD, RoadServer, Tracers, api_request, object_attrs, road_args

NS = "default"
ADMIN = "kubernetes-admin"
DEPLOYMENT_CONTROLLER = "system:serviceaccount:kube-system:deployment-controller"
REPLICASET_CONTROLLER = "system:serviceaccount:kube-system:replicaset-controller"
SCHEDULER = "system:kube-scheduler"
NODE = "node-a"


@dataclass
class Env:
    secure: SecureApiServer
    road: RoadServer
    tracers: Tracers
    workdir: Path
    objects: dict[str, dict[str, Any]]


def template() -> dict[str, Any]:
    return {"metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "httpd", "image": "minik8s/httpd:1"}]}}


def create(admin: httpx.Client, path: str, body: dict[str, Any]) -> dict[str, Any]:
    r = admin.post(path, json=body)
    assert r.status_code == 201, r.text
    return dict(r.json())


def owner(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": obj["metadata"]["name"],
             "uid": obj["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}]


def play_the_components(tracers: Tracers, d: dict[str, Any], rs: dict[str, Any], pod: dict[str, Any],
                        bound: dict[str, Any], running: dict[str, Any]) -> None:
    """The spans of the road, in the order the components take its steps (each component a tracer of its own)."""
    cm = tracers.tracer("kube-controller-manager")
    sched = tracers.tracer("kube-scheduler")
    kubelet = tracers.tracer("kubelet", NODE)
    with api_request(tracers, "create", "deployments", ADMIN, d, code=201):
        pass
    with cm.start_as_current_span("informer.event", kind=trace.SpanKind.CONSUMER, attributes={
            **object_attrs(d), "k8s.watch.event_type": "ADDED", "k8s.resource": "deployments"}):
        pass
    with cm.start_as_current_span("controller.sync", attributes={
            **object_attrs(d), "k8s.controller": "deployment", "k8s.queue.key": f"{NS}/web",
            "k8s.queue.wait_ms": 1.5, "k8s.sync.result": "ok"}), \
            api_request(tracers, "create", "replicasets", DEPLOYMENT_CONTROLLER, rs, code=201):
        pass
    with cm.start_as_current_span("controller.sync", attributes={
            **object_attrs(rs), "k8s.controller": "replicaset", "k8s.queue.key": f"{NS}/{rs['metadata']['name']}",
            "k8s.queue.wait_ms": 0.7, "k8s.sync.result": "ok"}), \
            api_request(tracers, "create", "pods", REPLICASET_CONTROLLER, pod, code=201):
        pass
    with sched.start_as_current_span("informer.event", kind=trace.SpanKind.CONSUMER, attributes={
            **object_attrs(pod), "k8s.watch.event_type": "ADDED", "k8s.resource": "pods"}):
        pass
    with sched.start_as_current_span("scheduler.schedule_pod", attributes={
            **object_attrs(pod), "k8s.scheduler.profile": "default-scheduler", "k8s.scheduler.result": "scheduled",
            "k8s.scheduler.feasible_nodes": 1, "k8s.scheduler.filter": json.dumps({NODE: "ok"}),
            "k8s.scheduler.scores": json.dumps({NODE: 200}), "k8s.scheduler.selected_node": NODE}), \
            sched.start_as_current_span("scheduler.bind"), \
            api_request(tracers, "create", "pods", SCHEDULER, bound, subresource="binding", code=201):
        pass
    with kubelet.start_as_current_span("kubelet.sync_pod", attributes={
            **object_attrs(bound), "k8s.node.name": NODE, "k8s.sync.update_type": "create"}):
        with kubelet.start_as_current_span("kubelet.run_pod_sandbox", attributes={
                "k8s.pod.ip": "10.244.0.5", "k8s.sandbox.id": "abc123"}):
            pass
        with kubelet.start_as_current_span("kubelet.image", attributes={
                "k8s.container.name": "httpd", "k8s.image": "minik8s/httpd:1", "k8s.image.pulled": False}):
            pass
        with kubelet.start_as_current_span("kubelet.create_container", attributes={
                "k8s.container.name": "httpd", "k8s.container.id": "c1"}):
            pass
        with kubelet.start_as_current_span("kubelet.start_container", attributes={
                "k8s.container.name": "httpd", "k8s.container.id": "c1"}):
            pass
        with kubelet.start_as_current_span("kubelet.status", attributes={
                "k8s.pod.phase": "Running", "k8s.pod.ready": True}), \
                api_request(tracers, "patch", "pods", f"system:node:{NODE}", running, subresource="status"):
            pass
    tracers.flush()


@pytest.fixture(scope="module")
def env(own_etcd: Etcd) -> Iterator[Env]:
    workdir = make_workdir("minik8s-road-")
    secure = SecureApiServer(workdir, own_etcd, nodes=(NODE,))
    road = RoadServer(secure.pki, workdir)
    secure.process.argv += road_args(secure.pki, road.port)
    tracers = Tracers(road.otlp_port)
    try:
        secure.start()
        road.start()
        with secure.client("admin") as admin:
            d = create(admin, f"/apis/apps/v1/namespaces/{NS}/deployments", {
                "metadata": {"name": "web", "labels": {"app": "web"}},
                "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}}, "template": template()}})
            rs = create(admin, f"/apis/apps/v1/namespaces/{NS}/replicasets", {
                "metadata": {"name": "web-5d4f", "labels": {"app": "web"}, "ownerReferences": owner(d)},
                "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}}, "template": template()}})
            pod = create(admin, f"/api/v1/namespaces/{NS}/pods", {
                "metadata": {"name": "web-5d4f-x2x7q", "labels": {"app": "web"}, "ownerReferences": owner(rs)},
                **{k: v for k, v in template().items() if k == "spec"}})
            name = pod["metadata"]["name"]
            r = admin.post(f"/api/v1/namespaces/{NS}/pods/{name}/binding", json={
                "apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
                "target": {"apiVersion": "v1", "kind": "Node", "name": NODE}})
            assert r.status_code == 201, r.text
            bound = admin.get(f"/api/v1/namespaces/{NS}/pods/{name}").json()
            r = admin.patch(f"/api/v1/namespaces/{NS}/pods/{name}/status",
                            headers={"Content-Type": "application/merge-patch+json"},
                            json={"status": {"phase": "Running", "podIP": "10.244.0.5",
                                             "conditions": [{"type": "Ready", "status": "True"}]}})
            assert r.status_code == 200, r.text
            running = r.json()
            r = admin.patch(f"/apis/apps/v1/namespaces/{NS}/deployments/web/status",  # as its controller would
                            headers={"Content-Type": "application/merge-patch+json"},
                            json={"status": {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1,
                                             "readyReplicas": 1, "availableReplicas": 1}})
            assert r.status_code == 200, r.text
        play_the_components(tracers, d, rs, pod, bound, running)
        yield Env(secure, road, tracers, workdir, {"deployment": d, "replicaset": rs, "pod": running})
    finally:
        tracers.shutdown()
        road.stop()
        secure.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def mkubectl(env: Env, *args: str, identity: str = "admin") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kubectl", "--kubeconfig", str(env.secure.kubeconfig(identity)),
                           *args], capture_output=True, text=True, timeout=60, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)})


def flatten(road: dict[str, Any]) -> list[dict[str, Any]]:
    out = list(road["steps"])
    for child in road["roads"]:
        out += flatten(child)
    return sorted(out, key=lambda s: s["offset"])


def full_road(env: Env) -> dict[str, Any]:
    """The Deployment's road through the apiserver, once every span the test sent is in it."""
    def complete() -> dict[str, Any] | None:
        with env.secure.client("admin") as admin:
            r = admin.get(f"{ROAD}/namespaces/{NS}/deployments/web")
        assert r.status_code == 200, r.text
        road = r.json()
        spans = [s for s in flatten(road) if s["source"] == "span"]
        return road if len(spans) >= 27 else None
    return dict(wait_for(complete, 20, 0.1, what="all the spans in the Deployment's road"))


def test_the_road_in_causal_order_with_its_lanes(env: Env) -> None:
    road = full_road(env)
    assert road["kind"] == "Road" and road["apiVersion"] == "road.minik8s.io/v1alpha1"
    assert road["object"]["uid"] == env.objects["deployment"]["metadata"]["uid"]
    rs_road = road["roads"][0]
    pod_road = rs_road["roads"][0]
    assert rs_road["object"]["name"] == "web-5d4f" and pod_road["object"]["name"] == "web-5d4f-x2x7q"
    top = [(s["object"]["kind"], s["step"], s["lane"]) for s in flatten(road) if s["level"] == 0]
    assert top == [
        ("Deployment", "create deployments → 201", ADMIN),
        ("Deployment", "watch ADDED deployments", "kube-controller-manager"),
        ("Deployment", "sync deployment: ok", "kube-controller-manager"),
        ("ReplicaSet", "create replicasets → 201", DEPLOYMENT_CONTROLLER),
        ("ReplicaSet", "sync replicaset: ok", "kube-controller-manager"),
        ("Pod", "create pods → 201", REPLICASET_CONTROLLER),
        ("Pod", "watch ADDED pods", "kube-scheduler"),
        ("Pod", "schedule: scheduled → node-a", "kube-scheduler"),
        ("Pod", "sync pod (create)", f"kubelet/{NODE}"),
    ]
    pod_steps = [(s["step"], s["lane"], s["level"]) for s in pod_road["steps"]]
    assert ("create pods/binding → 201", SCHEDULER, 2) in pod_steps  # bind's child, under the cycle
    kubelet = [s for s in pod_steps if s[1] == f"kubelet/{NODE}"]
    assert [s[0] for s in kubelet] == ["sync pod (create)", "run sandbox (IP 10.244.0.5)",
                                       "image minik8s/httpd:1 present", "create container httpd",
                                       "start container httpd", "status Running, Ready"]
    assert ("patch pods/status → 200", f"system:node:{NODE}", 2) in pod_steps
    offsets = [s["offset"] for s in flatten(road)]
    assert offsets == sorted(offsets) and offsets[0] == 0.0
    steps = {s["id"]: s for s in flatten(road)}
    watch = next(s for s in pod_road["steps"] if s["step"] == "watch ADDED pods")
    assert steps[watch["cause"]]["step"] == "create pods → 201" and watch["delay"] >= 0  # joined by revision
    status = next(s for s in pod_road["steps"] if s["step"] == "status Running, Ready")
    assert status["slo"]["name"] == "pod-startup-latency" and status["slo"]["met"] is True
    create = next(s for s in road["steps"] if s["step"] == "create deployments → 201")
    assert create["slo"] == {"name": "mutating-api-call-latency", "limitSeconds": 1.0,
                             "seconds": create["slo"]["seconds"], "met": True}
    assert any(s["step"].startswith("etcd txn (revision") and s["level"] == 1 for s in road["steps"])


def test_mkubectl_road_table_and_json(env: Env) -> None:
    full_road(env)
    done = mkubectl(env, "road", "deployment/web", "-o", "json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["object"]["name"] == "web"
    table = mkubectl(env, "road", "deploy", "web")  # TYPE NAME too; the road is Done: the finished table
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["OFFSET", "DURATION", "LANE", "OBJECT", "STEP", "DETAILS"]
    assert "deployment/web" in lines[1] and ADMIN in lines[1] and "create deployments" in lines[1]
    assert any("replicaset/web-5d4f" in line and DEPLOYMENT_CONTROLLER in line for line in lines)
    assert any("    pod/web-5d4f-x2x7q" in line and "start container httpd" in line for line in lines)
    assert any("SLO pod-startup-latency" in line for line in lines)


def test_official_python_client_reads_the_road(env: Env) -> None:
    from kubernetes import client, config

    api_client = config.new_client_from_config(str(env.secure.kubeconfig("admin")))
    try:
        road = client.CustomObjectsApi(api_client).get_namespaced_custom_object(
            "road.minik8s.io", "v1alpha1", NS, "replicasets", "web-5d4f")
        assert road["kind"] == "Road" and road["object"]["kind"] == "ReplicaSet"
        assert road["steps"][0]["step"] == "create replicasets → 201"
        groups = client.ApisApi(api_client).get_api_versions()
        assert "road.minik8s.io" in [g.name for g in groups.groups]
    finally:
        api_client.close()


@pytest.mark.kubectl
@pytest.mark.parametrize("version", ["1.27", "1.32"])
def test_real_kubectl_still_maps_the_builtin_resources(env: Env, version: str) -> None:
    """road.minik8s.io names every resource's plural (deployments, pods, ...): kubectl's RESTMapper must still map
    `deployments` and `po` to apps and core, the groups listed first, as it maps `pods` past metrics.k8s.io."""
    binary = find_kubectl(version)
    if binary is None:
        pytest.skip(f"kubectl {version} is not installed")
    home = env.workdir / f"kubectl-{version}"
    home.mkdir(exist_ok=True)
    out = []
    for args in (["get", "deployments", "-o", "name"], ["get", "po", "-o", "name"], ["get", "replicasets.apps"]):
        done = subprocess.run([str(binary), "--kubeconfig", str(env.secure.kubeconfig("admin")), "--cache-dir",
                               str(home / "cache"), *args], capture_output=True, text=True, timeout=60,
                              env={**os.environ, "HOME": str(home)})
        assert done.returncode == 0, done.stderr
        out.append(done.stdout)
    assert out[0].split() == ["deployment.apps/web"] and out[1].split() == ["pod/web-5d4f-x2x7q"]
    assert "web-5d4f" in out[2]


def test_follow_streams_a_new_step(env: Env) -> None:
    full_road(env)
    argv = [sys.executable, "-m", "kubectl", "--kubeconfig", str(env.secure.kubeconfig("admin")), "road",
            "pod/web-5d4f-x2x7q", "--follow"]
    with KubectlWatch(argv, {**os.environ, "PYTHONPATH": str(REPO)}, env.workdir) as watch:
        watch.wait_for_line(lambda line: "start container httpd" in line, what="the steps so far")
        pod = env.objects["pod"]
        with env.tracers.tracer("kubelet", NODE).start_as_current_span("kubelet.probe", attributes={
                **object_attrs(pod), "k8s.probe.type": "readiness", "k8s.probe.result": "success",
                "k8s.container.name": "httpd"}):
            pass
        line = watch.wait_for_line(lambda line: "readiness probe httpd: success" in line, what="the new step")
        assert f"kubelet/{NODE}" in line and "pod/web-5d4f-x2x7q" in line


def test_not_found(env: Env) -> None:
    missing = mkubectl(env, "road", "deployment/nope")
    assert missing.returncode == 1
    assert missing.stderr.strip() == 'Error from server (NotFound): deployments.apps "nope" not found'
    with env.secure.client("admin") as admin:
        r = admin.get(f"{ROAD}/namespaces/{NS}/deployments/nope")  # the road server's own answer
        assert r.status_code == 404 and r.json()["message"] == 'deployments.apps "nope" not found'
        r = admin.get(f"{ROAD}/namespaces/{NS}/deployments")
        assert r.status_code == 405 and r.json()["reason"] == "MethodNotAllowed"
        r = admin.get(f"{ROAD}/namespaces/{NS}/deployments", params={"watch": "true"})
        assert r.status_code == 400 and "fieldSelector=metadata.name" in r.json()["message"]


def test_rbac(env: Env) -> None:
    secure = env.secure
    secure.issue("road-viewer", "road-viewer")
    secure.issue("road-nobody", "road-nobody")
    with secure.client("admin") as admin:
        r = admin.post("/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings", json={
            "metadata": {"name": "road-viewer"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                                             "kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "road-viewer"}]})
        assert r.status_code == 201, r.text
        reader = admin.get("/apis/rbac.authorization.k8s.io/v1/clusterroles/system:aggregated-road-reader").json()
        assert reader["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-view"] == "true"
    with secure.client("road-viewer") as viewer:
        wait_until_allowed(viewer, "GET", f"{ROAD}/namespaces/{NS}/deployments/web", True)
    with secure.client("road-nobody") as nobody:
        r = nobody.get(f"{ROAD}/namespaces/{NS}/deployments/web")
        assert r.status_code == 403
        assert r.json()["message"] == ('deployments.road.minik8s.io "web" is forbidden: User "road-nobody" cannot '
                                       'get resource "deployments" in API group "road.minik8s.io" in the namespace '
                                       '"default"')
    denied = mkubectl(env, "road", "deployment/web", identity="road-nobody")
    assert denied.returncode == 1 and "(Forbidden)" in denied.stderr
    # the road server itself takes only the front proxy's certificate
    with httpx.Client(verify=secure.ssl_context("admin"), timeout=5) as direct:
        r = direct.get(f"{env.road.url}{ROAD}/namespaces/{NS}/deployments/web")
        assert r.status_code == 401


def test_unavailable_when_the_road_server_is_away(env: Env) -> None:
    """Last in the module: it stops the road server."""
    env.road.stop()
    with env.secure.client("admin") as admin:
        r = admin.get(f"{ROAD}/namespaces/{NS}/deployments/web")
        assert r.status_code == 503 and r.json()["reason"] == "ServiceUnavailable"
        assert "road.minik8s.io/v1alpha1 is not reachable" in r.json()["message"]
        assert "road.minik8s.io" in [g["name"] for g in admin.get("/apis").json()["groups"]]
