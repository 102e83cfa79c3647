"""The audit log of a real apiserver: one audit.k8s.io/v1 Event line per request at the level the
policy file gives it, and the seed question answered from it — a Deployment applied with real
kubectl as kubernetes-admin, taken by the controller-manager (each controller with its own
service-account token, from TokenRequest) and the scheduler (its own certificate), all over HTTPS: which identities
created the Deployment, the ReplicaSet, the Pods and the Bindings, with which user agents?"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from apiserver.audit import filter_events
from tests.auth_cluster import SecureApiServer, SecureKubectl
from tests.cluster import REPO, Etcd, wait_for
from tests.controller_process import ControllerProcess
from tests.kubectl import find_kubectl
from tests.manifests import deployment, pod
from tests.scheduler_process import SchedulerProcess

POLICY = """
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: None
  nonResourceURLs: ["/healthz*", "/readyz*", "/livez*"]
- level: None
  users: ["system:kube-controller-manager"]  # the shared informers' lists and watches
  verbs: ["list", "watch"]
- level: RequestResponse
  resources:
  - group: ""
    resources: ["pods/binding"]
- level: Request
  verbs: ["create", "update", "patch", "delete"]
  resources:
  - group: apps
    resources: ["deployments"]
- level: Metadata
"""

SA = "system:serviceaccount:kube-system:"


@pytest.fixture(scope="module")
def secure(workdir: Path, own_etcd: Etcd) -> Iterator[SecureApiServer]:
    etcd = own_etcd
    server = SecureApiServer(workdir, etcd, audit_policy=POLICY).start()
    yield server
    server.stop()


def complete(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["stage"] == "ResponseComplete"]


# -- one line per request, at the policy's level -----------------------------------------------------


def test_one_entry_per_request_at_the_policys_level(secure: SecureApiServer, ns: str) -> None:
    marker = f"audit-test/{uuid.uuid4().hex}"
    with secure.client("admin", user_agent=marker) as admin:
        assert admin.post(f"/api/v1/namespaces/{ns}/pods", json=pod("p1")).status_code == 201
        assert admin.get(f"/api/v1/namespaces/{ns}/pods/p1").status_code == 200
        assert admin.get(f"/api/v1/namespaces/{ns}/pods").status_code == 200
        assert admin.post(f"/apis/apps/v1/namespaces/{ns}/deployments", json=deployment("web")).status_code == 201
        assert admin.post(f"/api/v1/namespaces/{ns}/pods/p1/binding",
                          json={"metadata": {"name": "p1"}, "target": {"name": "n1"}}).status_code == 201
        assert admin.get("/healthz").status_code == 200
    events = secure.wait_audit(lambda e: e.get("userAgent") == marker and e["verb"] == "create"
                               and e["objectRef"].get("subresource") == "binding")
    events = [e for e in secure.audit_events() if e.get("userAgent") == marker]
    assert [e["stage"] for e in events] == ["ResponseComplete"] * 5  # no RequestReceived, no /healthz
    assert len({e["auditID"] for e in events}) == 5
    create_pod, get_pod, list_pods, create_deploy, bind = events
    assert (create_pod["verb"], create_pod["level"], create_pod["responseStatus"]["code"]) == ("create", "Metadata",
                                                                                              201)
    assert create_pod["objectRef"] == {"resource": "pods", "namespace": ns, "name": "p1",
                                       "uid": create_pod["objectRef"]["uid"], "apiVersion": "v1"}
    assert create_pod["requestURI"] == f"/api/v1/namespaces/{ns}/pods"
    assert create_pod["user"] == {"username": "kubernetes-admin", "groups": ["system:masters",
                                                                             "system:authenticated"]}
    assert create_pod["sourceIPs"] == ["127.0.0.1"]
    assert "requestObject" not in create_pod and "responseObject" not in create_pod
    assert get_pod["verb"] == "get" and get_pod["objectRef"]["name"] == "p1"
    assert list_pods["verb"] == "list" and "name" not in list_pods["objectRef"]
    assert create_deploy["level"] == "Request"
    assert create_deploy["objectRef"]["apiGroup"] == "apps"
    assert create_deploy["requestObject"]["metadata"]["name"] == "web"
    assert "responseObject" not in create_deploy
    assert bind["level"] == "RequestResponse"
    assert bind["objectRef"]["subresource"] == "binding"
    assert bind["requestObject"]["target"] == {"name": "n1"}
    assert bind["responseObject"]["status"] == "Success"
    for e in events:
        assert e["requestReceivedTimestamp"] <= e["stageTimestamp"]
        assert e["annotations"]["authorization.k8s.io/decision"] == "allow"


def test_refusals_and_watches_are_logged(secure: SecureApiServer, ns: str) -> None:
    marker = f"audit-test/{uuid.uuid4().hex}"
    with secure.client(user_agent=marker) as anonymous:
        assert anonymous.get("/api/v1/pods").status_code == 401
    with secure.client("scheduler", user_agent=marker) as scheduler:
        assert scheduler.delete(f"/apis/apps/v1/namespaces/{ns}/deployments/x").status_code == 403
    with secure.client("admin", user_agent=marker) as admin:
        r = admin.get(f"/api/v1/namespaces/{ns}/pods", params={"watch": "true", "timeoutSeconds": "1"})
        assert r.status_code == 200
    secure.wait_audit(lambda e: e.get("userAgent") == marker and e["verb"] == "watch"
                      and e["stage"] == "ResponseComplete")
    events = [e for e in secure.audit_events() if e.get("userAgent") == marker]
    unauthorized, forbidden, *watch = events
    assert unauthorized["responseStatus"]["code"] == 401 and unauthorized["user"] == {"username": ""}
    assert forbidden["responseStatus"]["code"] == 403
    assert forbidden["user"]["username"] == "system:kube-scheduler"
    assert forbidden["annotations"]["authorization.k8s.io/decision"] == "forbid"
    assert forbidden["responseStatus"]["message"].startswith('deployments.apps "x" is forbidden')
    assert [e["stage"] for e in watch] == ["ResponseStarted", "ResponseComplete"]
    assert watch[0]["auditID"] == watch[1]["auditID"]


# -- the seed question --------------------------------------------------------------------------------


def ready_node(admin: httpx.Client, name: str) -> None:
    resources = {"cpu": "4", "memory": "8Gi", "pods": "110"}
    body = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": {}, "status": {"capacity": resources, "allocatable": resources,
                                   "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}}
    r = admin.post("/api/v1/nodes", json=body)
    assert r.status_code == 201, r.text


def test_who_created_the_deployment_the_replicaset_the_pods_and_the_bindings(
        secure: SecureApiServer, admin: httpx.Client, ns: str, workdir: Path, tmp_path: Path) -> None:
    node = f"audit-node-{uuid.uuid4().hex[:6]}"
    ready_node(admin, node)
    controllers = ControllerProcess(workdir, secure.secure_url, ["deployment", "replicaset"],
                                    "--kubeconfig", str(secure.kubeconfig("controller-manager")))
    scheduler = SchedulerProcess(workdir, secure.secure_url, None, "--kubeconfig", str(secure.kubeconfig("scheduler")))
    try:
        controllers.start()
        scheduler.start()
        # 1. kubectl apply as kubernetes-admin (real kubectl when there is one)
        manifest = REPO / "examples" / "nginx-deployment.yaml"
        binary = find_kubectl("1.30") or find_kubectl("1.33") or find_kubectl("1.27")
        if binary is not None:
            kubectl = SecureKubectl(binary, "1.30", secure, "admin", tmp_path / "kubectl", ns)
            kubectl.run("apply", "-f", str(manifest)).ok()
        else:
            import yaml

            body = yaml.safe_load(manifest.read_text())
            with secure.client("admin", user_agent="kubectl/v1.30.0 (stand-in)") as client:
                assert client.post(f"/apis/apps/v1/namespaces/{ns}/deployments", json=body,
                                   params={"fieldManager": "kubectl-client-side-apply"}).status_code == 201
        name = "nginx-deployment"
        replicas = 3

        # 2-4. the controllers and the scheduler do the rest
        def all_bound() -> bool:
            items = admin.get(f"/api/v1/namespaces/{ns}/pods").json()["items"]
            return len(items) == replicas and all(p["spec"].get("nodeName") == node for p in items)

        wait_for(all_bound, 60, 0.2, what=f"{replicas} pods bound\n{controllers.log_tail()}\n{scheduler.log_tail()}")
        pods = {p["metadata"]["name"] for p in admin.get(f"/api/v1/namespaces/{ns}/pods").json()["items"]}
        [rs] = admin.get(f"/apis/apps/v1/namespaces/{ns}/replicasets").json()["items"]

        def answered() -> bool:
            bindings = filter_events(secure.audit_events(), resource="pods/binding", verb="create", namespace=ns)
            return {e["objectRef"]["name"] for e in bindings if e["responseStatus"]["code"] == 201} == pods

        wait_for(answered, 10, what="every binding in the audit log")
        events = secure.audit_events()
    finally:
        scheduler.stop()
        controllers.stop()

    created = lambda resource: [e for e in filter_events(events, resource=resource, verb="create", namespace=ns)  # noqa: E731
                                if e["responseStatus"]["code"] == 201]
    [deploy] = created("deployments.apps")
    assert deploy["objectRef"]["name"] == name
    assert deploy["user"]["username"] == "kubernetes-admin"
    assert "system:masters" in deploy["user"]["groups"]
    assert deploy["userAgent"].startswith("kubectl")
    if binary is not None:
        assert "fieldManager=kubectl-client-side-apply" in deploy["requestURI"]
    assert deploy["requestObject"]["metadata"]["name"] == name  # Request level for deployments

    [rs_event] = created("replicasets.apps")
    assert rs_event["objectRef"]["name"] == rs["metadata"]["name"]
    assert rs_event["user"]["username"] == f"{SA}deployment-controller"
    assert rs_event["userAgent"].startswith("kube-controller-manager/") and \
        rs_event["userAgent"].endswith(f"minik8s/{SA}deployment-controller")

    pod_events = created("pods")
    assert {e["objectRef"]["name"] for e in pod_events} == pods
    assert {e["user"]["username"] for e in pod_events} == {f"{SA}replicaset-controller"}
    assert all(e["userAgent"].endswith(f"minik8s/{SA}replicaset-controller") for e in pod_events)

    bindings = created("pods/binding")
    assert {e["objectRef"]["name"] for e in bindings} == pods
    assert {e["user"]["username"] for e in bindings} == {"system:kube-scheduler"}
    assert all(e["userAgent"].startswith("kube-scheduler/") for e in bindings)
    assert {e["requestObject"]["target"]["name"] for e in bindings} == {node}  # RequestResponse level

    # and the same answer from the command line
    table = subprocess.run([sys.executable, "-m", "apiserver.audit", str(secure.audit_log), "--verb", "create",
                            "--namespace", ns], capture_output=True, text=True, cwd=REPO, check=True).stdout
    lines = table.splitlines()
    assert lines[0].split()[:6] == ["TIME", "VERB", "RESOURCE", "NAMESPACE", "NAME", "CODE"]
    assert any("deployments.apps" in line and "kubernetes-admin" in line for line in lines)
    assert any("replicasets.apps" in line and f"{SA}deployment-controller" in line for line in lines)
    assert sum("pods/binding" in line and "system:kube-scheduler" in line for line in lines) == replicas
