"""A pod's own volumes on a real, secured cluster (issue 12): etcd, an apiserver serving HTTPS only on this host's
address (every admission plugin on, Node,RBAC), the controller-manager's serviceaccount and root-ca-cert-publisher
controllers, two kubelets (the Docker shim) as system:node:NAME, and kube-proxy routing the `kubernetes` Service to
the apiserver, all real processes (tests/secure_cluster.py).

- the kube-api-access volume the ServiceAccount admission plugin adds: a JWT for the pod's account with the pod
  bound in its claims, the cluster CA as ca.crt, the namespace;
- the official Python client in a pod (minik8s/python:1, hack/python-image.sh) with `load_incluster_config()`
  lists what its account may, and is refused what it may not;
- projected and downwardAPI files, a label change reaching the file; a mounted ConfigMap's update seen in
  seconds (the kubelet watches the object); hostPath types refused with upstream's FailedMount; subPath and
  subPathExpr;
- the Node authorizer: node-1 may not read a Secret used only on node-2, nor get a token for an account only
  node-2's pods run as.
"""

from __future__ import annotations

import base64
import json
import re
import shutil
import ssl
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.cluster import REPO, wait_for
from tests.kubectl import Kubectl, find_kubectl
from tests.node_process import BUSYBOX
from tests.secure_cluster import SecureCluster

PYTHON_IMAGE = "minik8s/python:1"
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
RESYNC = 60.0  # kubelet.kubelet.RESYNC_SECONDS: what a change would wait without the watch


@pytest.fixture(scope="module")
def cluster() -> Iterator[SecureCluster]:
    try:
        import docker

        docker.from_env().ping()
    except Exception as e:
        pytest.skip(f"no Docker engine to run pods: {e}")
    c = SecureCluster().start()
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture
def admin(cluster: SecureCluster) -> Iterator[httpx.Client]:
    with cluster.client() as client:
        yield client


@pytest.fixture
def ns(admin: httpx.Client) -> Iterator[str]:
    name = f"pv-{uuid.uuid4().hex[:6]}"
    r = admin.post("/api/v1/namespaces", json={"metadata": {"name": name}})
    assert r.status_code == 201, r.text
    # the controllers give it its default account and kube-root-ca.crt
    wait_for(lambda: admin.get(f"/api/v1/namespaces/{name}/serviceaccounts/default").status_code == 200, 30,
             what="the default ServiceAccount")
    wait_for(lambda: admin.get(f"/api/v1/namespaces/{name}/configmaps/kube-root-ca.crt").status_code == 200, 30,
             what="kube-root-ca.crt")
    yield name
    admin.delete(f"/api/v1/namespaces/{name}")


def create(api: httpx.Client, ns: str, resource: str, body: dict[str, Any]) -> dict[str, Any]:
    r = api.post(f"/api/v1/namespaces/{ns}/{resource}", json=body)
    assert r.status_code == 201, r.text
    return r.json()  # type: ignore[no-any-return]


def pod(name: str, node: str, script: str, image: str = BUSYBOX, **spec: Any) -> dict[str, Any]:
    container = {"name": "c", "image": image, "imagePullPolicy": "IfNotPresent", "command": ["sh", "-c", script],
                 **spec.pop("container", {})}
    return {"metadata": {"name": name, **spec.pop("meta", {})},
            "spec": {"nodeName": node, "terminationGracePeriodSeconds": 0, "containers": [container], **spec}}


def log(api: httpx.Client, ns: str, name: str) -> str:
    r = api.get(f"/api/v1/namespaces/{ns}/pods/{name}/log")
    return r.text if r.status_code == 200 else ""


def events(api: httpx.Client, ns: str, name: str) -> list[dict[str, Any]]:
    return [e for e in api.get(f"/api/v1/namespaces/{ns}/events").json()["items"]
            if e["involvedObject"]["name"] == name]


def jwt_claims(token: str) -> dict[str, Any]:
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))  # type: ignore[no-any-return]


# -- the service-account mount ---------------------------------------------------------------------------------


def test_service_account_mount(cluster: SecureCluster, admin: httpx.Client, ns: str) -> None:
    node = cluster.nodes[0]
    script = (f"echo TOKEN=$(cat {SA_DIR}/token); echo NS=$(cat {SA_DIR}/namespace); echo CA-BEGIN; "
              f"cat {SA_DIR}/ca.crt; echo CA-END; echo HOST=$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT; "
              f"ls -l {SA_DIR}/; sleep 3600")
    created = create(admin, ns, "pods", pod("sa", node, script))
    volume = next(v for v in created["spec"]["volumes"] if v["name"].startswith("kube-api-access-"))
    assert created["spec"]["containers"][0]["volumeMounts"] == [
        {"name": volume["name"], "readOnly": True, "mountPath": SA_DIR}]
    wait_for(lambda: "CA-END" in log(admin, ns, "sa"), 90, what="the pod's output")
    out = log(admin, ns, "sa")
    token = next(line[len("TOKEN="):] for line in out.splitlines() if line.startswith("TOKEN="))
    claims = jwt_claims(token)
    uid = created["metadata"]["uid"]
    assert claims["sub"] == f"system:serviceaccount:{ns}:default"
    assert claims["kubernetes.io"]["namespace"] == ns
    assert claims["kubernetes.io"]["pod"] == {"name": "sa", "uid": uid}
    account = admin.get(f"/api/v1/namespaces/{ns}/serviceaccounts/default").json()
    assert claims["kubernetes.io"]["serviceaccount"] == {"name": "default", "uid": account["metadata"]["uid"]}
    # upstream's extension of the kube-api-access token: valid a year, warned of after the 3607 s asked for
    assert claims["exp"] - claims["iat"] == 365 * 24 * 3600
    assert claims["kubernetes.io"]["warnafter"] - claims["iat"] == 3607
    assert f"NS={ns}" in out
    ca = out.split("CA-BEGIN\n", 1)[1].split("CA-END", 1)[0]
    assert ca.strip() == cluster.pki.ca_cert.read_text().strip()
    assert f"HOST={cluster.service_ip}:443" in out
    # the token is the pod's credential: the apiserver takes it, as the account
    with httpx.Client(base_url=cluster.url, verify=ssl.create_default_context(cafile=str(cluster.pki.ca_cert)),
                      timeout=10, headers={"Authorization": f"Bearer {token}"}) as as_pod:
        review = as_pod.post("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", json={
            "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {"verb": "list", "resource": "pods", "namespace": ns}}})
        assert review.status_code == 201, review.text


def test_automount_off_and_missing_account(cluster: SecureCluster, admin: httpx.Client, ns: str) -> None:
    created = create(admin, ns, "pods", pod("no-sa", cluster.nodes[0], "sleep 3600",
                                            automountServiceAccountToken=False))
    assert not created["spec"].get("volumes") and not created["spec"]["containers"][0].get("volumeMounts")
    r = admin.post(f"/api/v1/namespaces/{ns}/pods", json=pod("ghost", cluster.nodes[0], "true",
                                                              serviceAccountName="ghost"))
    assert r.status_code == 403
    assert r.json()["message"] == (f'pods "ghost" is forbidden: error looking up service account {ns}/ghost: '
                                   'serviceaccount "ghost" not found')


def test_python_client_in_cluster(cluster: SecureCluster, admin: httpx.Client, ns: str) -> None:
    subprocess.run([str(REPO / "hack" / "python-image.sh")], check=True, capture_output=True, timeout=900)
    create(admin, ns, "configmaps", {"metadata": {"name": "settings"}, "data": {"a": "1"}})
    r = admin.post(f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings", json={
        "metadata": {"name": "default-view"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                                           "kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": ns}]})
    assert r.status_code == 201, r.text
    script = "\n".join([
        "from kubernetes import client, config",
        "from kubernetes.client.exceptions import ApiException",
        "config.load_incluster_config()",
        "v1 = client.CoreV1Api()",
        f"print('CONFIGMAPS', sorted(c.metadata.name for c in v1.list_namespaced_config_map('{ns}').items))",
        "try:",
        f"    v1.list_namespaced_secret('{ns}')",
        "except ApiException as e:",
        "    print('SECRETS', e.status)",
        "print('DONE', flush=True)",
        "import time; time.sleep(3600)",
    ])
    create(admin, ns, "pods", pod("pyclient", cluster.nodes[1], "", image=PYTHON_IMAGE,
                                  container={"command": ["python3", "-u", "-c", script]}))
    try:
        wait_for(lambda: "DONE" in log(admin, ns, "pyclient"), 120, what="the in-cluster client's answer")
    except TimeoutError:
        raise AssertionError(f"pod log:\n{log(admin, ns, 'pyclient')}\n{cluster.logs()}") from None
    out = log(admin, ns, "pyclient")
    assert "CONFIGMAPS ['kube-root-ca.crt', 'settings']" in out
    assert "SECRETS 403" in out


# -- projected, downwardAPI, ConfigMap updates --------------------------------------------------------------------


def test_projected_and_downward_api(cluster: SecureCluster, admin: httpx.Client, ns: str) -> None:
    create(admin, ns, "configmaps", {"metadata": {"name": "app"}, "data": {"conf": "version=1"}})
    create(admin, ns, "secrets", {"metadata": {"name": "creds"}, "stringData": {"user": "admin"}})
    script = ("while true; do echo \"L=$(cat /info/labels | tr '\\n' ' ')|C=$(cat /all/conf)|U=$(cat /all/user)|"
              "A=$(cat /all/aud-token | cut -c1-3)|M=$(cat /info/mem)\"; sleep 0.5; done")
    create(admin, ns, "pods", pod("proj", cluster.nodes[0], script, meta={"labels": {"tier": "web"}}, container={
        "resources": {"limits": {"memory": "64Mi"}},
        "volumeMounts": [{"name": "info", "mountPath": "/info"}, {"name": "all", "mountPath": "/all"}]},
        volumes=[
            {"name": "info", "downwardAPI": {"items": [
                {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
                {"path": "mem", "resourceFieldRef": {"containerName": "c", "resource": "limits.memory",
                                                     "divisor": "1Mi"}}]}},
            {"name": "all", "projected": {"sources": [
                {"configMap": {"name": "app"}}, {"secret": {"name": "creds"}},
                {"serviceAccountToken": {"path": "aud-token", "audience": "vault", "expirationSeconds": 600}}]}}]))
    wait_for(lambda: 'L=tier="web"|C=version=1|U=admin|A=eyJ|M=64' in log(admin, ns, "proj"), 90,
             what="the projected files")
    # a label change and a ConfigMap change reach the files at once (the pod informer, the object's watch)
    started = time.monotonic()
    admin.patch(f"/api/v1/namespaces/{ns}/pods/proj", json={"metadata": {"labels": {"tier": "db", "v": "2"}}},
                headers={"Content-Type": "application/merge-patch+json"})
    admin.patch(f"/api/v1/namespaces/{ns}/configmaps/app", json={"data": {"conf": "version=2"}},
                headers={"Content-Type": "application/merge-patch+json"})
    wait_for(lambda: 'L=tier="db" v="2"|C=version=2|' in log(admin, ns, "proj"), RESYNC / 3,
             what="the new label and ConfigMap in the files, well before a periodic resync")
    assert time.monotonic() - started < RESYNC
    # the ConfigMap deleted under the running pod: FailedMount, the files keep what they held, the pod runs on
    assert admin.delete(f"/api/v1/namespaces/{ns}/configmaps/app").status_code == 200
    wait_for(lambda: any(e["reason"] == "FailedMount" and e["message"] ==
                         'MountVolume.SetUp failed for volume "all" : configmap "app" not found'
                         for e in events(admin, ns, "proj")), 30, what="FailedMount for the deleted ConfigMap")
    lines = len(log(admin, ns, "proj").splitlines())
    wait_for(lambda: len(log(admin, ns, "proj").splitlines()) > lines + 2, 30, what="the pod to go on writing")
    assert log(admin, ns, "proj").splitlines()[-1].startswith('L=tier="db" v="2"|C=version=2|')
    current = admin.get(f"/api/v1/namespaces/{ns}/pods/proj").json()["status"]
    assert current["phase"] == "Running" and current["containerStatuses"][0]["restartCount"] == 0


def test_missing_secret_waits_then_starts(cluster: SecureCluster, admin: httpx.Client, ns: str) -> None:
    create(admin, ns, "pods", pod("later", cluster.nodes[0], "cat /s/k; echo; sleep 3600",
                                  container={"volumeMounts": [{"name": "s", "mountPath": "/s"}]},
                                  volumes=[{"name": "s", "projected": {"sources": [{"secret": {"name": "later"}}]}}]))
    wait_for(lambda: any(e["reason"] == "FailedMount" and e["message"] ==
                         'MountVolume.SetUp failed for volume "s" : secret "later" not found'
                         for e in events(admin, ns, "later")), 60, what="FailedMount for the missing Secret")
    create(admin, ns, "secrets", {"metadata": {"name": "later"}, "stringData": {"k": "arrived"}})
    wait_for(lambda: "arrived" in log(admin, ns, "later"), RESYNC / 2, what="the pod to start once the Secret exists")


# -- hostPath and subPath ------------------------------------------------------------------------------------


def test_host_path_types(cluster: SecureCluster, admin: httpx.Client, ns: str) -> None:
    base = cluster.workdir / f"host-{uuid.uuid4().hex[:6]}"
    base.mkdir()
    (base / "file").write_text("hello")
    cases = {
        "missing": ({"path": str(base / "missing"), "type": "Directory"},
                    f"hostPath {base / 'missing'} doesn't exist"),
        "notdir": ({"path": str(base / "file"), "type": "Directory"},
                   f"hostPath type check failed: {base / 'file'} is not a directory, it's a File"),
        "notsock": ({"path": str(base), "type": "Socket"},
                    f"hostPath type check failed: {base} is not a socket file, it's a Directory"),
    }
    for name, (source, _) in cases.items():
        create(admin, ns, "pods", pod(name, cluster.nodes[0], "true", volumes=[{"name": "h", "hostPath": source}],
                                      container={"volumeMounts": [{"name": "h", "mountPath": "/h"}]}))
    create(admin, ns, "pods", pod("made", cluster.nodes[0], "cat /f/f; ls -d /d && echo MADE; sleep 3600", volumes=[
        {"name": "d", "hostPath": {"path": str(base / "new" / "dir"), "type": "DirectoryOrCreate"}},
        {"name": "f", "hostPath": {"path": str(base / "file"), "type": "File"}}],
        container={"volumeMounts": [{"name": "d", "mountPath": "/d"}, {"name": "f", "mountPath": "/f/f"}]}))
    for name, (_, message) in cases.items():
        wait_for(lambda name=name, message=message: any(
            e["reason"] == "FailedMount" and e["type"] == "Warning"
            and e["message"] == f'MountVolume.SetUp failed for volume "h" : {message}'
            for e in events(admin, ns, name)), 60, what=f"{name}'s FailedMount")
        assert admin.get(f"/api/v1/namespaces/{ns}/pods/{name}").json()["status"]["phase"] == "Pending"
    wait_for(lambda: "helloMADE" in log(admin, ns, "made").replace("\n", "").replace("/d", ""), 60,
             what="the pod with created and existing host paths")
    assert (base / "new" / "dir").is_dir()


def test_sub_paths(cluster: SecureCluster, admin: httpx.Client, ns: str) -> None:
    create(admin, ns, "configmaps", {"metadata": {"name": "nginx"}, "data": {"a.conf": "A", "b.conf": "B"}})
    script = "echo data > /out/f; cat /etc/app/a.conf; echo; ls /etc/app; echo END; sleep 3600"
    created = create(admin, ns, "pods", pod("sub", cluster.nodes[0], script, container={
        "env": [{"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
        "volumeMounts": [{"name": "cfg", "mountPath": "/etc/app/a.conf", "subPath": "a.conf"},
                         {"name": "work", "mountPath": "/out", "subPathExpr": "logs/$(POD)"}]},
        volumes=[{"name": "cfg", "configMap": {"name": "nginx"}}, {"name": "work", "emptyDir": {}}]))
    wait_for(lambda: "END" in log(admin, ns, "sub"), 60, what="the subPath pod's output")
    out = log(admin, ns, "sub")
    assert out.splitlines()[:3] == ["A", "a.conf", "END"]  # one key of the ConfigMap, not the others
    kubelet = cluster.kubelets[0]
    written = kubelet.root_dir / "pods" / created["metadata"]["uid"] / "volumes" / "kubernetes.io~empty-dir" / "work"
    assert (written / "logs" / "sub" / "f").read_text() == "data\n"
    # a subPathExpr naming no variable: the container waits with CreateContainerConfigError
    create(admin, ns, "pods", pod("badexpr", cluster.nodes[0], "true", container={
        "volumeMounts": [{"name": "work", "mountPath": "/out", "subPathExpr": "$(NOPE)"}]},
        volumes=[{"name": "work", "emptyDir": {}}]))

    def config_error() -> bool:
        statuses = admin.get(f"/api/v1/namespaces/{ns}/pods/badexpr").json()["status"].get("containerStatuses") or []
        waiting = (statuses[0]["state"].get("waiting") or {}) if statuses else {}
        return waiting.get("reason") == "CreateContainerConfigError" and waiting.get("message") == \
            "missing value for NOPE"

    wait_for(config_error, 60, what="CreateContainerConfigError for the subPathExpr")


# -- the Node authorizer ------------------------------------------------------------------------------------


def test_node_reads_only_its_pods_objects(cluster: SecureCluster, admin: httpx.Client, ns: str) -> None:
    node1, node2 = cluster.nodes
    create(admin, ns, "secrets", {"metadata": {"name": "only-2"}, "stringData": {"k": "v"}})
    create(admin, ns, "serviceaccounts", {"metadata": {"name": "two"}})
    created = create(admin, ns, "pods", pod("on-2", node2, "sleep 3600", serviceAccountName="two",
                                            volumes=[{"name": "s", "secret": {"secretName": "only-2"}}],
                                            container={"volumeMounts": [{"name": "s", "mountPath": "/s"}]}))
    with cluster.client(f"kubelet-{node1}") as kubelet1, cluster.client(f"kubelet-{node2}") as kubelet2:
        wait_for(lambda: kubelet2.get(f"/api/v1/namespaces/{ns}/secrets/only-2").status_code == 200, 10,
                 what="node-2 to read its pod's Secret")
        r = kubelet1.get(f"/api/v1/namespaces/{ns}/secrets/only-2")
        assert r.status_code == 403
        assert r.json()["message"] == (f'secrets "only-2" is forbidden: User "system:node:{node1}" cannot get '
                                       f'resource "secrets" in API group "" in the namespace "{ns}": no relationship '
                                       f"found between node '{node1}' and this object")
        token_request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {
            "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": "on-2", "uid": created["metadata"]["uid"]}}}
        path = f"/api/v1/namespaces/{ns}/serviceaccounts/two/token"
        assert kubelet1.post(path, json=token_request).status_code == 403
        answer = kubelet2.post(path, json=token_request)
        assert answer.status_code == 201
        claims = jwt_claims(answer.json()["status"]["token"])  # 3600 s asked: no extension
        assert claims["exp"] - claims["iat"] == 3600 and "warnafter" not in claims["kubernetes.io"]
        token_request["spec"]["expirationSeconds"] = 3607
        extended = jwt_claims(kubelet2.post(path, json=token_request).json()["status"]["token"])
        assert extended["exp"] - extended["iat"] == 365 * 24 * 3600
        token_request["spec"]["audiences"] = ["vault"]  # not the apiserver's own audience: not extended
        foreign = jwt_claims(kubelet2.post(path, json=token_request).json()["status"]["token"])
        assert foreign["exp"] - foreign["iat"] == 3607 and "warnafter" not in foreign["kubernetes.io"]
        unbound = kubelet2.post(path, json={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                            "spec": {}})
        assert unbound.status_code == 403
        assert unbound.json()["message"] == ('serviceaccounts "two" is forbidden: node requested token not bound '
                                             "to a pod")


# -- emptyDir in memory; the root CA ConfigMap ---------------------------------------------------------------


def test_memory_empty_dir_is_a_sized_tmpfs(cluster: SecureCluster, admin: httpx.Client, ns: str) -> None:
    script = ("grep ' /cache ' /proc/mounts; dd if=/dev/zero of=/cache/big bs=1M count=12 2>&1 | tail -1; "
              "echo SIZE=$(du -k /cache/big | cut -f1); sleep 3600")
    create(admin, ns, "pods", pod("mem", cluster.nodes[1], script, container={
        "volumeMounts": [{"name": "cache", "mountPath": "/cache"}]},
        volumes=[{"name": "cache", "emptyDir": {"medium": "Memory", "sizeLimit": "8Mi"}}]))
    wait_for(lambda: "SIZE=" in log(admin, ns, "mem"), 60, what="the memory emptyDir pod's output")
    out = log(admin, ns, "mem")
    assert any(line.startswith("tmpfs /cache tmpfs") and "size=8192k" in line for line in out.splitlines()), out
    assert "8+0 records out" in out and "SIZE=8192" in out  # 12 MiB asked, the tmpfs took 8


def test_root_ca_configmap_is_kept(cluster: SecureCluster, admin: httpx.Client, ns: str) -> None:
    path = f"/api/v1/namespaces/{ns}/configmaps/kube-root-ca.crt"
    ca = cluster.pki.ca_cert.read_text()
    cm = admin.get(path).json()
    assert cm["data"] == {"ca.crt": ca}
    assert cm["metadata"]["annotations"]["kubernetes.io/description"].startswith(
        "Contains a CA bundle that can be used to verify the kube-apiserver")
    r = admin.patch(path, json={"data": {"ca.crt": "forged"}}, headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 200
    wait_for(lambda: admin.get(path).json()["data"] == {"ca.crt": ca}, 30, what="the CA put back")
    assert admin.delete(path).status_code == 200
    wait_for(lambda: admin.get(path).status_code == 200, 30, what="kube-root-ca.crt made again")
    # a user may read it (view), as upstream's clients do; its writer is the controller's own account
    with cluster.client("controller-manager") as manager:  # the manager's identity itself may not write it
        r = manager.put(path, json=admin.get(path).json())
        assert r.status_code == 403, r.text


# -- real kubectl ---------------------------------------------------------------------------------------------


@pytest.mark.kubectl
@pytest.mark.parametrize("version", ["1.27", "1.33"])
def test_kubectl_describes_the_service_account_volume(cluster: SecureCluster, admin: httpx.Client, ns: str,
                                                      version: str, tmp_path: Path) -> None:
    binary = find_kubectl(version)
    if binary is None:
        pytest.skip(f"no kubectl.{version} on this machine")
    kubectl = Kubectl(binary, version, cluster.url, tmp_path / f"kubectl-{version}")
    shutil.copy(cluster.pki.kubeconfig("admin"), kubectl.kubeconfig)
    created = create(admin, ns, "pods", pod("described", cluster.nodes[0], "sleep 3600"))
    volume = next(v["name"] for v in created["spec"]["volumes"])
    wait_for(lambda: (admin.get(f"/api/v1/namespaces/{ns}/pods/described").json().get("status") or {})
             .get("phase") == "Running", 60, what="the pod running")
    out = kubectl.run("describe", "pod", "described", "-n", ns).ok().stdout
    assert re.search(rf"{volume}:\n\s+Type:\s+Projected \(a volume that contains injected data from multiple "
                     r"sources\)\n\s+TokenExpirationSeconds:\s+3607\n\s+ConfigMapName:\s+kube-root-ca\.crt\n"
                     r"\s+(ConfigMapOptional:\s+<nil>|Optional:\s+false)\n\s+DownwardAPI:\s+true\n", out), out
    # (1.27 prints ConfigMapOptional: <nil>, 1.33 Optional: false)
    assert re.search(rf"/var/run/secrets/kubernetes\.io/serviceaccount from {volume} \(ro\)", out), out
    token = kubectl.run("create", "token", "default", "-n", ns, "--bound-object-kind", "Pod",
                        "--bound-object-name", "described").ok().stdout.strip()
    assert jwt_claims(token)["kubernetes.io"]["pod"] == {"name": "described", "uid": created["metadata"]["uid"]}
    table = kubectl.run("get", "configmap", "kube-root-ca.crt", "-n", ns).ok().stdout.splitlines()
    assert table[0].split() == ["NAME", "DATA", "AGE"] and table[1].split()[:2] == ["kube-root-ca.crt", "1"]
