"""The kopf operator of examples/operator (issue 14) against minik8s: real kopf (`python -m kopf run`, out of
cluster, as the website-operator ServiceAccount with a TokenRequest token and only its ClusterRole), real
kubectl 1.33 as the admin, and one shared cluster of the module's own: a secure apiserver with every
admission plugin, the deployment, replicaset, garbage-collector, service-account, namespace and root-CA
publisher controllers, a scheduler and a real kubelet (Docker) for the pods.

- a Website applied with kubectl gets its Deployment and Service (owned by it), pods Running, status
  filled by the timer, kopf's finalizer and last-handled-configuration annotation and Events; a replicas
  change is followed; deleting it runs the delete handler and the garbage collector removes the children;
  every write of the operator is allowed by its role (the audit log);
- a Deployment of the same name someone else owns makes the handler retry: kopf's progress in its
  annotation and in status.kopf.progress, its failures as Events, success once the obstacle is gone;
- kill -9 of the operator: the restarted one takes the changes made while it was down, creates what was
  created meanwhile, and runs no create handler twice;
- peering: an operator of higher priority makes the first pause (kopf's ClusterKopfPeering), only it
  handles; when it stops the first resumes;
- 410 Gone: the apiserver restarted while etcd compacted past kopf's resourceVersion; kopf relists and
  goes on without handling anything twice; its watches ask for bookmarks and continue from a
  resourceVersion (the audit log);
- a Website against its schema: 422 Invalid with the field paths, through kubectl and the API, nothing stored.
"""

from __future__ import annotations

import base64
import json
import shutil
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from machinery.kubeconfig import write_kubeconfig
from tests.auth_cluster import SecureApiServer, SecureKubectl
from tests.cluster import ALL_ADMISSION, REPO, Etcd, Process, make_workdir, wait_for
from tests.controller_process import ControllerProcess
from tests.kubectl import find_kubectl
from tests.scheduler_process import SchedulerProcess

pytestmark = pytest.mark.kubectl

OPERATOR_DIR = REPO / "examples" / "operator"
GROUP = "example.minik8s.io"
WEBSITES = f"/apis/{GROUP}/v1"
KUBECTL_VERSION = "1.33"
ACCOUNT = "system:serviceaccount:website-operator:website-operator"


# -- the cluster -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def secure(workdir: Path, own_etcd: Etcd) -> Iterator[SecureApiServer]:
    server = SecureApiServer(workdir, own_etcd, *ALL_ADMISSION).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def control_plane(secure: SecureApiServer) -> Iterator[Path]:
    """The controllers and the scheduler over HTTPS as themselves; their work dir."""
    folder = make_workdir("minik8s-kopf-cp-")
    controllers = ControllerProcess(folder, secure.secure_url,
                                    ["deployment", "replicaset", "garbagecollector", "serviceaccount", "namespace",
                                     "root-ca-cert-publisher"],
                                    "--kubeconfig", str(secure.kubeconfig("controller-manager")))
    scheduler = SchedulerProcess(folder, secure.secure_url, None, "--kubeconfig", str(secure.kubeconfig("scheduler")))
    try:
        controllers.start()
        scheduler.start()
        yield folder
    finally:
        scheduler.stop()
        controllers.stop()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def kubelet(secure: SecureApiServer, workdir: Path) -> Iterator[Any]:
    """A real kubelet (Docker) on this module's apiserver; skipped without a Docker engine."""
    try:
        import docker

        docker.from_env().ping()
    except Exception as e:
        pytest.skip(f"no Docker engine to run a kubelet's pods: {e}")
    from tests.node_process import cleanup, ensure_images, free_pod_cidrs

    ensure_images()
    node = secure.kubelet(workdir, f"kopf-{uuid.uuid4().hex[:6]}", free_pod_cidrs(1)[0])
    try:
        with secure.client("admin") as api:
            node.start(api, timeout=60)
        yield node
    finally:
        cleanup([node])
        with secure.client("admin") as api:
            api.delete(f"/api/v1/nodes/{node.node}")


@pytest.fixture(scope="module")
def admin_kubectl(secure: SecureApiServer, workdir: Path) -> SecureKubectl:
    binary = find_kubectl(KUBECTL_VERSION)
    if binary is None:
        pytest.skip(f"kubectl {KUBECTL_VERSION} is not installed: this test drives it")
    return SecureKubectl(binary, KUBECTL_VERSION, secure, "admin", workdir / "kubectl-admin")


@pytest.fixture(scope="module")
def installed(secure: SecureApiServer, admin: httpx.Client, admin_kubectl: SecureKubectl) -> Path:
    """The operator's manifests applied with kubectl (the CRDs first, then the objects of kopf's peering
    CRDs, as one applies them on any cluster); a kubeconfig of its ServiceAccount with a token from
    TokenRequest."""
    for manifest in ("crd.yaml", "rbac.yaml", "peering.yaml"):
        admin_kubectl.run("apply", "-f", str(OPERATOR_DIR / manifest))  # peering.yaml's objects: the 2nd time
    def established(name: str) -> bool:
        crd = admin.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}").json()
        return any(c["type"] == "Established" and c["status"] == "True"
                   for c in crd.get("status", {}).get("conditions", []))

    for name in ("websites.example.minik8s.io", "kopfpeerings.kopf.dev", "clusterkopfpeerings.kopf.dev"):
        wait_for(lambda n=name: established(n), 20, 0.1, what=f"CRD {name} Established")  # type: ignore[misc]
    admin_kubectl.run("apply", "-f", str(OPERATOR_DIR / "peering.yaml")).ok()
    assert admin.get("/apis/kopf.dev/v1/clusterkopfpeerings/website-operator").status_code == 200
    token = secure.request_token("website-operator", "website-operator", expirationSeconds=7200)
    path = secure.workdir / "website-operator.conf"
    write_kubeconfig(path, secure.secure_url, ACCOUNT, token=token, ca_file=secure.pki.ca_cert, embed=True)
    return path


class Operator:
    """`python -m kopf run --all-namespaces --peering website-operator examples/operator/website_operator.py`
    as a process of its own, with the ServiceAccount's kubeconfig."""

    def __init__(self, kubeconfig: Path, ident: str, priority: int, log: Path) -> None:
        self.ident = ident
        argv = [sys.executable, "-m", "kopf", "run", "--all-namespaces", "--peering", "website-operator",
                "--priority", str(priority), "--verbose", str(OPERATOR_DIR / "website_operator.py")]
        # a short peering lifetime: a killed operator's entry expires soon, as the restart test needs
        self.process = Process(f"kopf-{ident}", argv, log, env={
            "KUBECONFIG": str(kubeconfig), "WEBSITE_OPERATOR_ID": ident, "WEBSITE_PEERING_LIFETIME": "10",
            "WEBSITE_WATCH_TIMEOUT": "30"})
        self._start_at = 0

    def log(self) -> str:
        return self.process.log_path.read_bytes()[self._start_at:].decode(errors="replace")

    def start(self, *, active: bool = True) -> Operator:
        path = self.process.log_path
        self._start_at = path.stat().st_size if path.exists() else 0
        self.process.start()

        def up() -> bool:
            if not self.process.alive():
                raise RuntimeError(f"kopf exited:\n{self.process.log_tail()}")
            text = self.log()
            return "Keep-alive in 'website-operator' cluster-wide: ok." in text and (
                not active or "Resuming the watch-stream for websites" in text)

        wait_for(up, 60, 0.2, what=f"operator {self.ident} up{' and handling' if active else ''}\n"
                                   f"{self.process.log_tail()}")
        return self

    def stop(self) -> None:
        self.process.stop(timeout=20)

    def kill(self) -> None:
        self.process.kill()


@pytest.fixture(scope="module")
def operator(installed: Path, control_plane: Path, kubelet: Any, workdir: Path) -> Iterator[Operator]:
    op = Operator(installed, "A", 100, workdir / "kopf-A.log")
    try:
        yield op.start()
    finally:
        op.stop()


@pytest.fixture
def ns(admin: httpx.Client, operator: Operator) -> Iterator[str]:
    """A fresh namespace whose default ServiceAccount exists (the ServiceAccount admission wants it)."""
    name = f"kopf-{uuid.uuid4().hex[:8]}"
    assert admin.post("/api/v1/namespaces", json={"metadata": {"name": name}}).status_code == 201
    wait_for(lambda: admin.get(f"/api/v1/namespaces/{name}/serviceaccounts/default").status_code == 200, 30,
             0.1, what="the namespace's default service account")
    yield name
    admin.delete(f"/api/v1/namespaces/{name}")


@pytest.fixture
def kubectl(secure: SecureApiServer, ns: str, tmp_path: Path) -> SecureKubectl:
    binary = find_kubectl(KUBECTL_VERSION)
    if binary is None:
        pytest.skip(f"kubectl {KUBECTL_VERSION} is not installed: this test drives it")
    return SecureKubectl(binary, KUBECTL_VERSION, secure, "admin", tmp_path / "kubectl", ns)


# -- helpers -----------------------------------------------------------------------------------------


def website(name: str, replicas: int = 1, image: str | None = None) -> dict[str, Any]:
    from tests.node_process import HTTPD

    return {"apiVersion": f"{GROUP}/v1", "kind": "Website", "metadata": {"name": name},
            "spec": {"image": image or HTTPD, "replicas": replicas, "port": 80}}


def apply(kubectl: SecureKubectl, tmp_path: Path, obj: dict[str, Any]) -> str:
    path = tmp_path / f"{obj['metadata']['name']}-{uuid.uuid4().hex[:4]}.yaml"
    path.write_text(yaml.safe_dump(obj))
    return kubectl.run("apply", "-f", str(path)).ok().stdout


def get(admin: httpx.Client, path: str) -> dict[str, Any] | None:
    r = admin.get(path)
    return r.json() if r.status_code == 200 else None  # type: ignore[no-any-return]


def events(admin: httpx.Client, ns: str, name: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = admin.get(f"/api/v1/namespaces/{ns}/events").json()["items"]
    return [e for e in items if e["involvedObject"].get("name") == name and e["involvedObject"]["kind"] == "Website"]


def reasons(admin: httpx.Client, ns: str, name: str) -> list[str]:
    return [e["reason"] for e in events(admin, ns, name)]


def handled(admin: httpx.Client, ns: str, name: str) -> dict[str, Any]:
    """status.create_fn: what the create handler returned (kopf stores it under the handler's id)."""
    obj = get(admin, f"{WEBSITES}/namespaces/{ns}/websites/{name}") or {}
    return obj.get("status", {}).get("create_fn") or {}  # type: ignore[no-any-return]


def owned_by(obj: dict[str, Any] | None, owner: dict[str, Any]) -> bool:
    refs = (obj or {}).get("metadata", {}).get("ownerReferences", [])
    return any(r["uid"] == owner["metadata"]["uid"] and r["kind"] == "Website" and r.get("controller")
               for r in refs)


# -- the tests ---------------------------------------------------------------------------------------


def test_a_website_gets_its_deployment_service_pods_and_status(
        secure: SecureApiServer, admin: httpx.Client, kubectl: SecureKubectl, ns: str, operator: Operator,
        tmp_path: Path) -> None:
    assert "website.example.minik8s.io/hello created" in apply(kubectl, tmp_path, website("hello", 2))
    path = f"{WEBSITES}/namespaces/{ns}/websites/hello"
    deployment_path = f"/apis/apps/v1/namespaces/{ns}/deployments/hello"
    service_path = f"/api/v1/namespaces/{ns}/services/hello"
    wait_for(lambda: get(admin, deployment_path) and get(admin, service_path), 30, 0.2,
             what=f"the Deployment and the Service\n{operator.process.log_tail()}")
    # kopf records the handler as done after it returned: the last handled spec in its annotation
    wait_for(lambda: "kopf.zalando.org/last-handled-configuration" in (
        (get(admin, path) or {}).get("metadata", {}).get("annotations") or {}), 30, 0.2, what="kopf's annotation")
    owner = get(admin, path)
    assert owner is not None
    assert owned_by(get(admin, deployment_path), owner) and owned_by(get(admin, service_path), owner)
    # kopf's own marks on the custom object: its finalizer and the last handled spec
    meta = owner["metadata"]
    assert "kopf.zalando.org/KopfFinalizerMarker" in meta["finalizers"]
    assert json.loads(meta["annotations"]["kopf.zalando.org/last-handled-configuration"])["spec"] == {
        "image": website("x")["spec"]["image"], "replicas": 2, "port": 80}

    def running() -> int:
        pods = admin.get(f"/api/v1/namespaces/{ns}/pods", params={"labelSelector": "app.kubernetes.io/name=hello"})
        return sum(p.get("status", {}).get("phase") == "Running" for p in pods.json()["items"])

    def pods() -> str:
        items = admin.get(f"/api/v1/namespaces/{ns}/pods").json()["items"]
        rs = admin.get(f"/apis/apps/v1/namespaces/{ns}/replicasets").json()["items"]
        return json.dumps({"pods": [(p["metadata"]["name"], p["spec"].get("nodeName"), p.get("status")) for p in items],
                           "replicasets": [(r["metadata"]["name"], r.get("status")) for r in rs]})[:4000]

    try:
        wait_for(lambda: running() == 2, 120, 0.5, what="two pods Running on the kubelet")
    except TimeoutError as e:
        raise TimeoutError(f"{e}\n{pods()}") from None
    # the timer fills the status from the Deployment (through the status subresource)
    wait_for(lambda: (get(admin, path) or {}).get("status", {}).get("readyReplicas") == 2, 60, 0.5,
             what=f"status.readyReplicas 2\n{operator.process.log_tail()}")
    status = (get(admin, path) or {})["status"]
    assert status["url"] == f"http://hello.{ns}.svc:80"
    assert status["create_fn"]["operator"] == "A"
    # kubectl shows the printer columns of the CRD
    lines = kubectl.run("get", "websites").ok().stdout.splitlines()
    assert lines[0].split() == ["NAME", "IMAGE", "REPLICAS", "READY", "URL", "AGE"]
    assert lines[1].split()[:5] == ["hello", website("x")["spec"]["image"], "2", "2", f"http://hello.{ns}.svc:80"]
    wait_for(lambda: "Created" in reasons(admin, ns, "hello"), 20, 0.2, what="the Created event")

    # update: the Deployment follows the Website's replicas (a merge patch through kubectl)
    kubectl.run("patch", "website", "hello", "--type", "merge", "-p", '{"spec": {"replicas": 1}}').ok()
    wait_for(lambda: (get(admin, deployment_path) or {}).get("spec", {}).get("replicas") == 1, 30, 0.2,
             what=f"the Deployment scaled to 1\n{operator.process.log_tail()}")
    wait_for(lambda: running() == 1, 60, 0.5, what="one pod left")
    wait_for(lambda: (get(admin, path) or {}).get("status", {}).get("readyReplicas") == 1, 30, 0.5,
             what="status.readyReplicas 1")
    wait_for(lambda: "Updated" in reasons(admin, ns, "hello"), 20, 0.2, what="the Updated event")

    # delete: kopf's finalizer holds the Website until the delete handler ran; the GC takes the children
    kubectl.run("delete", "website", "hello", "--wait=false").ok()
    wait_for(lambda: get(admin, path) is None, 120, 0.2,
             what=f"the Website gone once kopf removed its finalizer\n{operator.process.log_tail()}")
    wait_for(lambda: get(admin, deployment_path) is None and get(admin, service_path) is None, 60, 0.2,
             what="the Deployment and the Service garbage-collected")
    wait_for(lambda: running() == 0, 60, 0.5, what="the pods gone")
    assert "Deleting" in reasons(admin, ns, "hello")
    # the operator's account needed nothing beyond its ClusterRole (the audit backend writes in batches)
    expected = {("patch", "websites", ""), ("patch", "websites", "status"), ("create", "deployments", ""),
                ("create", "services", ""), ("patch", "deployments", ""), ("create", "events", "")}

    def mine() -> list[dict[str, Any]]:
        return [e for e in secure.audit_events() if e["user"]["username"] == ACCOUNT
                and e.get("objectRef", {}).get("namespace") == ns]

    wait_for(lambda: expected <= {(e["verb"], e["objectRef"]["resource"], e["objectRef"].get("subresource", ""))
                                  for e in mine()}, 20, 0.2, what="the operator's writes in the audit log")
    assert [e for e in mine() if e["responseStatus"]["code"] in (401, 403)] == []


def test_a_foreign_deployment_makes_the_handler_retry_with_kopf_progress(
        admin: httpx.Client, kubectl: SecureKubectl, ns: str, operator: Operator, tmp_path: Path) -> None:
    kubectl.run("create", "deployment", "clash", "--image", website("x")["spec"]["image"], "--replicas", "0").ok()
    apply(kubectl, tmp_path, website("clash", 0))
    path = f"{WEBSITES}/namespaces/{ns}/websites/clash"

    def progress() -> dict[str, Any]:
        obj = get(admin, path) or {}
        found: dict[str, Any] = obj.get("status", {}).get("kopf", {}).get("progress", {}).get("create_fn") or {}
        return found

    wait_for(lambda: progress().get("retries", 0) >= 2, 30, 0.2,
             what=f"kopf's retries in status.kopf.progress\n{operator.process.log_tail()}")
    assert progress()["message"] == "Deployment clash exists and is not owned by Website clash"
    annotation = json.loads((get(admin, path) or {})["metadata"]["annotations"]["kopf.zalando.org/create_fn"])
    assert annotation["success"] is False and annotation["retries"] >= 1
    wait_for(lambda: any(e["type"] == "Error" and "failed temporarily" in e["message"]
                         for e in events(admin, ns, "clash")), 20, 0.2, what="kopf's Event of the failed try")
    # the obstacle removed: the next retry succeeds, kopf clears its progress
    assert admin.delete(f"/apis/apps/v1/namespaces/{ns}/deployments/clash").status_code == 200
    wait_for(lambda: handled(admin, ns, "clash").get("action") == "created", 30, 0.2,
             what=f"the handler succeeding on a retry\n{operator.process.log_tail()}")
    obj = get(admin, path) or {}
    assert progress() == {} and "kopf.zalando.org/create_fn" not in obj["metadata"].get("annotations", {})
    assert owned_by(get(admin, f"/apis/apps/v1/namespaces/{ns}/deployments/clash"), obj)


def test_a_killed_operator_resumes_without_duplicates(
        admin: httpx.Client, kubectl: SecureKubectl, ns: str, operator: Operator, tmp_path: Path) -> None:
    apply(kubectl, tmp_path, website("steady", 0))
    wait_for(lambda: handled(admin, ns, "steady").get("action") == "created", 30, 0.2, what="steady handled")
    operator.kill()
    # while it is down: a spec change and a new Website
    kubectl.run("patch", "website", "steady", "--type", "merge", "-p", '{"spec": {"port": 8080}}').ok()
    apply(kubectl, tmp_path, website("late", 0))
    operator.start()
    wait_for(lambda: handled(admin, ns, "late").get("action") == "created", 60, 0.2,
             what=f"the Website made while the operator was down\n{operator.process.log_tail()}")
    service = f"/api/v1/namespaces/{ns}/services/steady"
    wait_for(lambda: (get(admin, service) or {}).get("spec", {}).get("ports", [{}])[0].get("port") == 8080, 30, 0.2,
             what="the Service following the change made while the operator was down")
    # one create per Website: the handler of `steady` did not run again, nothing was created twice
    wait_for(lambda: "Updated" in reasons(admin, ns, "steady"), 20, 0.2, what="the Updated event")
    assert reasons(admin, ns, "steady").count("Created") == 1
    assert handled(admin, ns, "steady")["action"] == "created"
    deployments = admin.get(f"/apis/apps/v1/namespaces/{ns}/deployments").json()["items"]
    assert sorted(d["metadata"]["name"] for d in deployments) == ["late", "steady"]
    assert f"[{ns}/steady] Handler 'create_fn'" not in operator.log()


def test_peering_lets_only_the_higher_priority_operator_handle(
        admin: httpx.Client, kubectl: SecureKubectl, ns: str, operator: Operator, installed: Path, workdir: Path,
        tmp_path: Path) -> None:
    other = Operator(installed, "B", 200, workdir / "kopf-B.log")
    try:
        other.start()
        wait_for(lambda: "Pausing operations in favour of" in operator.log(), 30, 0.2,
                 what=f"operator A pausing for B\n{operator.process.log_tail()}")
        peering = get(admin, "/apis/kopf.dev/v1/clusterkopfpeerings/website-operator") or {}
        assert sorted(p["priority"] for p in peering["status"].values()) == [100, 200]
        apply(kubectl, tmp_path, website("peer", 0))
        wait_for(lambda: handled(admin, ns, "peer").get("operator") == "B", 30, 0.2,
                 what=f"B handling the Website\n{other.process.log_tail()}")
        assert f"[{ns}/peer]" not in operator.log()
    finally:
        other.stop()  # kopf marks itself gone in the peering object on the way out
    wait_for(lambda: "Resuming operations after the pause" in operator.log().rsplit("Pausing operations", 1)[-1],
             30, 0.2, what=f"A resuming once B is gone\n{operator.process.log_tail()}")
    apply(kubectl, tmp_path, website("after", 0))
    wait_for(lambda: handled(admin, ns, "after").get("operator") == "A", 30, 0.2, what="A handling again")


def test_the_operator_relists_after_410_gone(secure: SecureApiServer, own_etcd: Etcd, admin: httpx.Client,
                                            kubectl: SecureKubectl, ns: str, operator: Operator,
                                            tmp_path: Path) -> None:
    """The apiserver restarts (its watch cache empty) while etcd moves on and compacts away the revision kopf
    resumes its watches from: the watch answers 410 Expired in the stream, kopf lists anew and goes on."""
    apply(kubectl, tmp_path, website("before", 0))
    wait_for(lambda: handled(admin, ns, "before").get("action") == "created", 30, 0.2, what="before handled")
    secure.stop()
    try:
        with httpx.Client(base_url=own_etcd.endpoint, timeout=10) as etcd:
            key = base64.b64encode(b"/kopf-test/tick").decode()
            put = etcd.post("/v3/kv/put", json={"key": key, "value": base64.b64encode(b"x").decode()})
            assert put.status_code == 200, put.text
            revision = int(put.json()["header"]["revision"])
            r = etcd.post("/v3/kv/compaction", json={"revision": revision, "physical": True})
            assert r.status_code == 200, r.text
    finally:
        secure.start()
    wait_for(lambda: "Restarting the watch-stream for websites.v1.example.minik8s.io" in operator.log(), 90, 0.2,
             what=f"kopf restarting its watch after 410 Gone\n{operator.process.log_tail()}")
    apply(kubectl, tmp_path, website("after", 0))
    wait_for(lambda: handled(admin, ns, "after").get("operator") == "A", 60, 0.2,
             what=f"the operator handling a Website after the relist\n{operator.process.log_tail()}")
    assert reasons(admin, ns, "before").count("Created") == 1  # the relist ran no handler twice

    # its watches ask for bookmarks and continue from a resourceVersion (each ends after WEBSITE_WATCH_TIMEOUT)
    def continued_watches() -> list[str]:
        return [e["requestURI"] for e in secure.audit_events() if e["user"]["username"] == ACCOUNT
                and e.get("verb") == "watch" and e.get("objectRef", {}).get("resource") == "websites"
                and "allowWatchBookmarks=true" in e["requestURI"] and "resourceVersion=" in e["requestURI"]]

    wait_for(continued_watches, 40, 0.5, what="a continued watch of websites in the audit log")


def test_a_website_against_its_schema_is_refused_with_field_paths(
        admin: httpx.Client, kubectl: SecureKubectl, ns: str, tmp_path: Path) -> None:
    bad = website("bad", 11)
    bad["spec"]["image"] = ""
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(bad))
    result = kubectl.run("apply", "-f", str(path))
    assert result.returncode != 0
    assert 'The Website "bad" is invalid' in result.stderr
    assert "spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10" in result.stderr
    r = admin.post(f"{WEBSITES}/namespaces/{ns}/websites", json={**bad, "spec": {"replicas": 1}})
    assert r.status_code == 422
    status = r.json()
    assert status["reason"] == "Invalid"
    assert status["details"]["causes"][0]["field"] == "spec.image"
    assert status["details"]["causes"][0]["reason"] == "FieldValueRequired"
    assert get(admin, f"{WEBSITES}/namespaces/{ns}/websites/bad") is None
