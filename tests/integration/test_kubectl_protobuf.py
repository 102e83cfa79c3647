"""kubectl's typed creates against a real apiserver: 1.33 sends `create namespace|deployment|role|rolebinding|
clusterrole|clusterrolebinding` and `auth reconcile` as Kubernetes protobuf (`application/vnd.kubernetes.protobuf`),
1.30 sends the same as JSON; both must store the same objects. `-v=8` shows which body went out, so the test
knows the protobuf path was taken. (`kubectl run`, `apply`, `create -f`, patches and deletes send JSON.)"""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx
import pytest

from tests.integration.test_kubectl import deployments, kubectl  # noqa: F401 — the fixture, reused
from tests.kubectl import Kubectl

pytestmark = pytest.mark.kubectl

PROTOBUF = "Content-Type: application/vnd.kubernetes.protobuf"
RBAC = "/apis/rbac.authorization.k8s.io/v1"
VERSIONS = pytest.mark.parametrize("kubectl", ["1.30", "1.33"], indirect=True, ids=["kubectl1.30", "kubectl1.33"])


def sent_protobuf(k: Kubectl, *args: str) -> bool:
    """Run a kubectl command (it must succeed) and tell whether its write went out as protobuf."""
    r = k.run(*args, "-v=8").ok()
    return PROTOBUF in r.stderr


@VERSIONS
def test_create_deployment_and_namespace(kubectl: Kubectl, api: httpx.Client, namespace: str) -> None:  # noqa: F811
    protobuf = kubectl.version == "1.33"
    assert sent_protobuf(kubectl, "create", "deployment", "web", "--image=minik8s/httpd:1", "--replicas=2",
                         "--port=8080", "-n", namespace) == protobuf
    d = api.get(f"{deployments(namespace)}/web").json()
    assert d["metadata"]["labels"] == {"app": "web"}
    assert d["spec"]["replicas"] == 2 and d["spec"]["selector"] == {"matchLabels": {"app": "web"}}
    template = d["spec"]["template"]
    assert template["metadata"]["labels"] == {"app": "web"}
    [container] = template["spec"]["containers"]
    assert container["name"] == "httpd" and container["image"] == "minik8s/httpd:1"
    assert container["ports"] == [{"containerPort": 8080, "protocol": "TCP"}]
    assert d["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": "25%", "maxUnavailable": "25%"}  # defaulted

    # replicas is a pointer upstream: an explicit 0 travels and must not become the default 1
    assert sent_protobuf(kubectl, "create", "deployment", "zero", "--image=minik8s/httpd:1", "--replicas=0",
                         "-n", namespace) == protobuf
    assert api.get(f"{deployments(namespace)}/zero").json()["spec"]["replicas"] == 0

    name = f"pb-{uuid.uuid4().hex[:8]}"
    try:
        assert sent_protobuf(kubectl, "create", "namespace", name) == protobuf
        ns = api.get(f"/api/v1/namespaces/{name}").json()
        assert ns["status"]["phase"] == "Active" and ns["metadata"]["name"] == name
    finally:
        api.delete(f"/api/v1/namespaces/{name}")


@VERSIONS
def test_create_rbac_objects(kubectl: Kubectl, api: httpx.Client, namespace: str,  # noqa: F811
                             tmp_path: Path) -> None:
    protobuf = kubectl.version == "1.33"
    suffix = uuid.uuid4().hex[:8]
    cluster_role, cluster_binding = f"pb-cr-{suffix}", f"pb-crb-{suffix}"
    try:
        assert sent_protobuf(kubectl, "create", "role", "reader", "--verb=get", "--verb=list", "--resource=pods",
                             "--resource-name=a", "-n", namespace) == protobuf
        role = api.get(f"{RBAC}/namespaces/{namespace}/roles/reader").json()
        assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "resourceNames": ["a"],
                                  "verbs": ["get", "list"]}]
        assert sent_protobuf(kubectl, "create", "rolebinding", "readers", "--role=reader", "--user=bob",
                             f"--serviceaccount={namespace}:robot", "-n", namespace) == protobuf
        binding = api.get(f"{RBAC}/namespaces/{namespace}/rolebindings/readers").json()
        assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"}
        assert binding["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "bob"},
                                       {"kind": "ServiceAccount", "name": "robot", "namespace": namespace}]

        assert sent_protobuf(kubectl, "create", "clusterrole", cluster_role, "--aggregation-rule=team=a") == protobuf
        cr = api.get(f"{RBAC}/clusterroles/{cluster_role}").json()
        assert cr["aggregationRule"] == {"clusterRoleSelectors": [{"matchLabels": {"team": "a"}}]}
        assert sent_protobuf(kubectl, "create", "clusterrolebinding", cluster_binding,
                             f"--clusterrole={cluster_role}", "--group=devs") == protobuf
        crb = api.get(f"{RBAC}/clusterrolebindings/{cluster_binding}").json()
        assert crb["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "devs"}]

        # auth reconcile: a create, then an update (PUT) adding a rule, both typed
        manifest = tmp_path / "role.yaml"
        manifest.write_text(f"apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {{name: rec, "
                            f"namespace: {namespace}}}\nrules: [{{apiGroups: [apps], resources: [deployments], "
                            f"verbs: [get]}}]\n")
        assert sent_protobuf(kubectl, "auth", "reconcile", "-f", str(manifest)) == protobuf
        manifest.write_text(manifest.read_text().replace("verbs: [get]", "verbs: [get, watch]"))
        assert sent_protobuf(kubectl, "auth", "reconcile", "-f", str(manifest)) == protobuf
        rules = api.get(f"{RBAC}/namespaces/{namespace}/roles/rec").json()["rules"]
        assert sorted(v for rule in rules for v in rule["verbs"]) == ["get", "watch"]
        assert all(rule["apiGroups"] == ["apps"] and rule["resources"] == ["deployments"] for rule in rules)
    finally:
        api.delete(f"{RBAC}/clusterrolebindings/{cluster_binding}")
        api.delete(f"{RBAC}/clusterroles/{cluster_role}")
