"""PodSecurity admission on a real apiserver over TLS, with real kubectl where it prints what a user
sees (issue 10, finding 4): a namespace labelled enforce=restricted refuses a hostPath:/ pod, a
hostNetwork pod and a privileged pod with 403 and upstream's message and writes nothing; warn
labels give kubectl's `Warning:` lines for pods and Deployments; audit labels annotate the audit
event; tightening a namespace's enforce label warns about the pods already there; the admission
configuration file's cluster defaults and exemptions (users, namespaces, runtime classes) apply."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.auth_cluster import SecureApiServer, SecureKubectl
from tests.cluster import REPO, Etcd, wait_for
from tests.kubectl import find_kubectl
from tests.manifests import deployment, pod

PREFIX = "pod-security.kubernetes.io/"
KUBECTL_VERSION = "1.33"
ADMISSION_CONFIG = """
apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: PodSecurity
  configuration:
    apiVersion: pod-security.admission.config.k8s.io/v1
    kind: PodSecurityConfiguration
    defaults: {enforce: privileged, audit: baseline, warn: baseline}
    exemptions: {usernames: [ci-bot], runtimeClasses: [trusted], namespaces: [exempt-ns]}
"""
RESTRICTED_SC = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, "runAsNonRoot": True,
                 "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}}
BARE_RESTRICTED_DETAIL = (
    'allowPrivilegeEscalation != false (container "main" must set securityContext.allowPrivilegeEscalation=false), '
    'unrestricted capabilities (container "main" must set securityContext.capabilities.drop=["ALL"]), '
    'runAsNonRoot != true (pod or container "main" must set securityContext.runAsNonRoot=true), '
    'seccompProfile (pod or container "main" must set securityContext.seccompProfile.type to "RuntimeDefault" or '
    '"Localhost")')


@pytest.fixture(scope="module")
def secure(workdir: Path, own_etcd: Etcd) -> Iterator[SecureApiServer]:
    config = workdir / f"admission-{uuid.uuid4().hex[:6]}.yaml"
    config.write_text(ADMISSION_CONFIG)
    server = SecureApiServer(workdir, own_etcd, "--admission-control-config-file", str(config)).start()
    server.issue("ci", "ci-bot", ["system:masters"])
    yield server
    server.stop()


@pytest.fixture
def make_ns(admin: httpx.Client) -> Iterator[Any]:
    made: list[str] = []

    def make(labels: dict[str, str] | None = None, name: str | None = None) -> str:
        name = name or f"psa-{uuid.uuid4().hex[:8]}"
        r = admin.post("/api/v1/namespaces", json={"metadata": {"name": name, "labels": labels or {}}})
        assert r.status_code == 201, r.text
        made.append(name)
        return name

    yield make
    for name in made:
        admin.delete(f"/api/v1/namespaces/{name}")


@pytest.fixture
def kubectl(secure: SecureApiServer, tmp_path: Path) -> Any:
    binary = find_kubectl(KUBECTL_VERSION)
    if binary is None:
        pytest.skip(f"kubectl.{KUBECTL_VERSION} is not installed")

    def make(ns: str) -> SecureKubectl:
        return SecureKubectl(binary, KUBECTL_VERSION, secure, "admin", tmp_path / f"kubectl-{ns}", ns)

    return make


def pods(ns: str) -> str:
    return f"/api/v1/namespaces/{ns}/pods"


def wait_enforced(admin: httpx.Client, ns: str) -> None:
    """A label change reaches admission through the watch cache: wait until a host pod is refused
    (a dry run: nothing is written)."""
    probe = pod("probe", hostNetwork=True)
    wait_for(lambda: admin.post(f"{pods(ns)}?dryRun=All", json=probe).status_code == 403, 10,
             what=f"namespace {ns}'s new enforce label to apply")


def manifest(obj: dict[str, Any]) -> str:
    import json

    return json.dumps(obj)


def host_pods() -> dict[str, tuple[dict[str, Any], str]]:
    """The three attacks of the finding and the refusal each gets under restricted:latest."""
    hostpath = pod("hostpath", volumes=[{"name": "root", "hostPath": {"path": "/"}}])
    hostpath["spec"]["containers"][0]["volumeMounts"] = [{"name": "root", "mountPath": "/host"}]
    privileged = pod("privileged")
    privileged["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    head, tail = BARE_RESTRICTED_DETAIL.split(", runAsNonRoot")
    return {
        "hostpath": (hostpath, f'{head}, restricted volume types (volume "root" uses restricted volume type '
                               f'"hostPath"), runAsNonRoot{tail}'),
        "hostnet": (pod("hostnet", hostNetwork=True), f"host namespaces (hostNetwork=true), {BARE_RESTRICTED_DETAIL}"),
        "privileged": (privileged, 'privileged (container "main" must not set securityContext.privileged=true), '
                                   f"{BARE_RESTRICTED_DETAIL}"),
    }


@pytest.mark.kubectl
def test_restricted_namespace_refuses_host_access_with_upstreams_message(admin: httpx.Client, make_ns: Any,
                                                                         kubectl: Any) -> None:
    ns = make_ns()
    k = kubectl(ns)
    k.run("label", "namespace", ns, f"{PREFIX}enforce=restricted").ok()
    wait_enforced(admin, ns)
    for name, (obj, detail) in host_pods().items():
        message = f'pods "{name}" is forbidden: violates PodSecurity "restricted:latest": {detail}'
        r = admin.post(pods(ns), json=obj)
        assert r.status_code == 403, r.text
        status = r.json()
        assert (status["reason"], status["code"], status["message"]) == ("Forbidden", 403, message)
        assert "warning" not in r.headers  # a refused request carries no warnings
        r = k.run("apply", "-f", "-", stdin=manifest(obj))
        assert r.returncode != 0
        assert f'Error from server (Forbidden): error when creating "STDIN": {message}' in r.stderr, r.stderr
        assert admin.get(f"{pods(ns)}/{name}").status_code == 404  # nothing written
    assert admin.get(pods(ns)).json()["items"] == []


def test_a_restricted_pod_is_admitted_and_a_baseline_namespace_allows_what_baseline_allows(
        admin: httpx.Client, make_ns: Any) -> None:
    ns = make_ns({f"{PREFIX}enforce": "restricted"})
    good = pod("good")
    good["spec"]["containers"][0]["securityContext"] = RESTRICTED_SC
    r = admin.post(pods(ns), json=good)
    assert r.status_code == 201, r.text
    assert "warning" not in r.headers
    baseline = make_ns({f"{PREFIX}enforce": "baseline", f"{PREFIX}warn": "baseline"})
    assert admin.post(pods(baseline), json=pod("plain")).status_code == 201
    r = admin.post(pods(baseline), json=pod("hostpid", hostPID=True))
    assert r.status_code == 403
    assert r.json()["message"] == ('pods "hostpid" is forbidden: violates PodSecurity "baseline:latest": '
                                   "host namespaces (hostPID=true)")
    # a pinned version evaluates that version's checks: runAsUser=0 is restricted from v1.23 on
    root_sc = {**RESTRICTED_SC, "runAsUser": 0}
    root = pod("root")
    root["spec"]["containers"][0]["securityContext"] = root_sc
    old = make_ns({f"{PREFIX}enforce": "restricted", f"{PREFIX}enforce-version": "v1.22"})
    assert admin.post(pods(old), json=root).status_code == 201
    latest = make_ns({f"{PREFIX}enforce": "restricted"})
    r = admin.post(pods(latest), json=root)
    assert r.status_code == 403
    assert r.json()["message"].endswith('runAsUser=0 (container "main" must not set runAsUser=0)')


@pytest.mark.kubectl
def test_warn_label_prints_kubectl_warnings_for_pods_and_deployments(admin: httpx.Client, make_ns: Any,
                                                                    kubectl: Any) -> None:
    ns = make_ns({f"{PREFIX}warn": "restricted"})
    k = kubectl(ns)
    r = k.run("apply", "-f", "-", stdin=manifest(pod("warned"))).ok()
    assert f'Warning: would violate PodSecurity "restricted:latest": {BARE_RESTRICTED_DETAIL}' in r.stderr, r.stderr
    assert "pod/warned created" in r.stdout
    web = deployment("web", replicas=1)
    r = k.run("apply", "-f", "-", stdin=manifest(web)).ok()
    detail = BARE_RESTRICTED_DETAIL.replace('"main"', '"web"')
    assert f'Warning: would violate PodSecurity "restricted:latest": {detail}' in r.stderr, r.stderr
    assert "deployment.apps/web created" in r.stdout
    # the header itself, as upstream writes it
    r = admin.post(pods(ns), json=pod("raw"))
    assert r.status_code == 201
    quoted = f'would violate PodSecurity "restricted:latest": {BARE_RESTRICTED_DETAIL}'.replace('"', '\\"')
    assert r.headers.get_list("warning") == [f'299 - "{quoted}"']
    # enforce applies to pods only: a Deployment in an enforcing namespace is admitted (its pods are not)
    enforcing = make_ns({f"{PREFIX}enforce": "restricted"})
    r = admin.post(f"/apis/apps/v1/namespaces/{enforcing}/deployments", json=web)
    assert r.status_code == 201, r.text
    assert 'would violate PodSecurity \\"restricted:latest\\"' in r.headers["warning"]


def test_audit_label_annotates_the_audit_event(secure: SecureApiServer, admin: httpx.Client, make_ns: Any) -> None:
    ns = make_ns({f"{PREFIX}audit": "restricted", f"{PREFIX}enforce": "baseline"})
    r = admin.post(pods(ns), json=pod("audited"))
    assert r.status_code == 201
    assert "warning" not in r.headers  # warn follows enforce (baseline), which the pod meets

    def created(e: dict[str, Any]) -> bool:
        ref = e.get("objectRef") or {}
        return (e.get("stage") == "ResponseComplete" and e.get("verb") == "create" and ref.get("resource") == "pods"
                and ref.get("namespace") == ns and ref.get("name") == "audited")

    [event] = secure.wait_audit(created, what="the pod's audit event")
    annotations = event["annotations"]
    assert annotations[f"{PREFIX}enforce-policy"] == "baseline:latest"
    assert annotations[f"{PREFIX}audit-violations"] == \
        f'would violate PodSecurity "restricted:latest": {BARE_RESTRICTED_DETAIL}'
    assert annotations["authorization.k8s.io/decision"] == "allow"


@pytest.mark.kubectl
def test_tightening_a_namespace_warns_about_its_existing_pods(admin: httpx.Client, make_ns: Any,
                                                              kubectl: Any) -> None:
    ns = make_ns({f"{PREFIX}warn": "privileged", f"{PREFIX}audit": "privileged"})
    for name in ("a", "b", "c"):
        assert admin.post(pods(ns), json=pod(name, hostNetwork=True)).status_code == 201
    privileged = pod("d")
    privileged["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    assert admin.post(pods(ns), json=privileged).status_code == 201
    k = kubectl(ns)
    r = k.run("label", "namespace", ns, f"{PREFIX}enforce=baseline").ok()
    assert f'Warning: existing pods in namespace "{ns}" violate the new PodSecurity enforce level "baseline:latest"' \
        in r.stderr, r.stderr
    assert "Warning: a (and 2 other pods): host namespaces" in r.stderr
    assert "Warning: d: privileged" in r.stderr  # pods are grouped by their reasons, named by the first
    wait_enforced(admin, ns)
    # the pods stay (enforce checks new pods), and updates that do not change what runs are admitted
    r = admin.patch(f"{pods(ns)}/a", json={"metadata": {"labels": {"touched": "yes"}}},
                    headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text
    r = admin.patch(f"{pods(ns)}/a/status", json={"status": {"phase": "Running"}},
                    headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text
    # an update that changes an image is evaluated
    r = admin.patch(f"{pods(ns)}/a", json={"spec": {"containers": [{"name": "main", "image": "busybox:1.37"}]}},
                    headers={"Content-Type": "application/strategic-merge-patch+json"})
    assert r.status_code == 403, r.text
    assert 'violates PodSecurity "baseline:latest": host namespaces (hostNetwork=true)' in r.json()["message"]
    # relaxing warns about nothing
    r = k.run("label", "--overwrite", "namespace", ns, f"{PREFIX}enforce=privileged").ok()
    assert "Warning" not in r.stderr


def test_invalid_labels_are_refused_on_namespaces(admin: httpx.Client, make_ns: Any) -> None:
    name = f"psa-{uuid.uuid4().hex[:8]}"
    r = admin.post("/api/v1/namespaces", json={"metadata": {"name": name, "labels": {f"{PREFIX}enforce": "strict"}}})
    assert r.status_code == 422
    status = r.json()
    assert status["reason"] == "Invalid"
    assert status["message"] == (f'Namespace "{name}" is invalid: metadata.labels[{PREFIX}enforce]: Invalid value: '
                                 '"strict": must be one of privileged, baseline, restricted')
    assert admin.get(f"/api/v1/namespaces/{name}").status_code == 404
    ns = make_ns()
    r = admin.patch(f"/api/v1/namespaces/{ns}", json={"metadata": {"labels": {f"{PREFIX}warn-version": "1.30"}}},
                    headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 422
    assert r.json()["details"]["causes"] == [{"reason": "FieldValueInvalid",
                                              "field": f"metadata.labels[{PREFIX}warn-version]",
                                              "message": 'Invalid value: "1.30": must be "latest" or "v1.x"'}]
    assert f"{PREFIX}warn-version" not in (admin.get(f"/api/v1/namespaces/{ns}").json()["metadata"].get("labels") or {})


def test_configuration_defaults_and_exemptions_apply(secure: SecureApiServer, admin: httpx.Client,
                                                     make_ns: Any) -> None:
    # defaults from the file: an unlabelled namespace warns and audits at baseline, enforces privileged
    plain = make_ns()
    r = admin.post(pods(plain), json=pod("hostnet", hostNetwork=True))
    assert r.status_code == 201
    assert r.headers["warning"] == '299 - "would violate PodSecurity \\"baseline:latest\\": host namespaces ' \
                                   '(hostNetwork=true)"'
    # exempt namespace, user and runtime class: a restricted namespace admits them, without a word
    restricted = {f"{PREFIX}enforce": "restricted"}
    exempt = make_ns(restricted, name="exempt-ns")
    r = admin.post(pods(exempt), json=pod("hostnet", hostNetwork=True))
    assert r.status_code == 201 and "warning" not in r.headers
    ns = make_ns(restricted)
    with secure.client("ci") as ci:
        r = ci.post(pods(ns), json=pod("by-ci", hostNetwork=True))
        assert r.status_code == 201, r.text
    assert admin.post(pods(ns), json=pod("trusted", runtimeClassName="trusted", hostNetwork=True)).status_code == 201
    assert admin.post(pods(ns), json=pod("untrusted", runtimeClassName="other", hostNetwork=True)).status_code == 403

    def exempted(e: dict[str, Any]) -> bool:
        ref = e.get("objectRef") or {}
        return e.get("stage") == "ResponseComplete" and ref.get("namespace") == ns and ref.get("name") == "by-ci"

    [event] = secure.wait_audit(exempted, what="the exempt user's audit event")
    assert event["annotations"][f"{PREFIX}exempt"] == "user"


def test_a_bad_admission_configuration_stops_the_apiserver(tmp_path: Path) -> None:
    config = tmp_path / "admission.yaml"
    config.write_text(ADMISSION_CONFIG.replace("enforce: privileged", "enforce: strict"))
    done = subprocess.run([sys.executable, "-m", "apiserver", "--etcd-servers", "http://127.0.0.1:9",
                           "--admission-control-config-file", str(config)],
                          capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.returncode != 0
    assert ('--admission-control-config-file: defaults.enforce: Invalid value: "strict": must be one of privileged, '
            "baseline, restricted") in done.stderr
