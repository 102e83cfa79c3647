"""Privilege escalation through the API, tried as issue 10 tried it, against a real apiserver over
HTTPS with real identities (client certificates from the cluster CA, service-account tokens):

- RBAC (upstream's policybased role and binding storage): a user who may write Roles and
  RoleBindings in its namespace may not bind cluster-admin to itself nor write a Role granting
  `*/*/*`, by create, update or patch, nor when impersonated; the garbage collector's account
  (update on everything) may not add a subject to cluster-admin's binding. `escalate`, `bind`
  (with resourceNames) and holding the rules each allow it. SelfSubjectRulesReview answers
  `kubectl auth can-i --list` (real kubectl 1.27 and 1.33).
- NodeRestriction: a kubelet (system:node:NAME) may not give its Node node-role or
  node-restriction labels nor change its taints.

Every refusal is a 403 Status with upstream's message, and nothing is written.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.auth_cluster import SecureApiServer, SecureKubectl, wait_until_allowed
from tests.cluster import Etcd, wait_for
from tests.controller_process import ControllerProcess
from tests.kubectl import find_kubectl

RBAC_GROUP = "rbac.authorization.k8s.io"
RBAC = f"/apis/{RBAC_GROUP}/v1"
SSRR = "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews"
MERGE = {"Content-Type": "application/merge-patch+json"}
STAR = '{APIGroups:["*"], Resources:["*"], Verbs:["*"]}'
ALL_URLS = '{NonResourceURLs:["*"], Verbs:["*"]}'
MALLORY = 'user "mallory" (groups=["dev" "system:authenticated"])'
NOT_HELD = "is attempting to grant RBAC permissions not currently held:\n"


@pytest.fixture(scope="module")
def secure(workdir: Path) -> Iterator[SecureApiServer]:
    folder = workdir / f"etcd-{uuid.uuid4().hex[:6]}"
    folder.mkdir()
    etcd = Etcd(folder)
    etcd.start()
    try:
        server = SecureApiServer(workdir, etcd).start()
        try:
            yield server
        finally:
            server.stop()
    finally:
        etcd.stop()


def role(name: str, *rules: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": name}, "rules": list(rules)}


def rule(verbs: list[str], groups: list[str], resources: list[str], names: list[str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"verbs": verbs, "apiGroups": groups, "resources": resources}
    if names:
        out["resourceNames"] = names
    return out


def binding(name: str, kind: str, role_name: str, user: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "roleRef": {"apiGroup": RBAC_GROUP, "kind": kind, "name": role_name},
            "subjects": [{"kind": "User", "apiGroup": RBAC_GROUP, "name": user}]}


def created(r: httpx.Response) -> dict[str, Any]:
    assert r.status_code in (200, 201), r.text
    return dict(r.json())


def refused(r: httpx.Response, message: str) -> None:
    assert r.status_code == 403, r.text
    body = r.json()
    assert (body["kind"], body["reason"], body["code"]) == ("Status", "Forbidden", 403), body
    assert body["message"] == message, body["message"]


@pytest.fixture(scope="module")
def ns(admin: httpx.Client) -> Iterator[str]:
    """A namespace where user mallory (group dev) may write Roles and RoleBindings, and nothing else."""
    name = f"esc-{uuid.uuid4().hex[:6]}"
    created(admin.post("/api/v1/namespaces", json={"metadata": {"name": name}}))
    created(admin.post(f"{RBAC}/namespaces/{name}/roles", json=role(
        "rbac-writer", rule(["create", "get", "list", "update", "patch", "delete"], [RBAC_GROUP],
                            ["roles", "rolebindings"]))))
    created(admin.post(f"{RBAC}/namespaces/{name}/rolebindings",
                       json=binding("mallory-writes-rbac", "Role", "rbac-writer", "mallory")))
    yield name
    admin.delete(f"/api/v1/namespaces/{name}")


@pytest.fixture(scope="module")
def mallory(secure: SecureApiServer, ns: str) -> Iterator[httpx.Client]:
    secure.issue("mallory", "mallory", ["dev"])
    with secure.client("mallory") as client:
        wait_until_allowed(client, "GET", f"{RBAC}/namespaces/{ns}/roles", True)
        yield client


# -- the attacks of the issue --------------------------------------------------------------------------


def test_binding_cluster_admin_to_oneself_is_refused(admin: httpx.Client, mallory: httpx.Client, ns: str) -> None:
    path = f"{RBAC}/namespaces/{ns}/rolebindings"
    r = mallory.post(path, json=binding("mine", "ClusterRole", "cluster-admin", "mallory"))
    refused(r, f'rolebindings.{RBAC_GROUP} "mine" is forbidden: {MALLORY} {NOT_HELD}{STAR}\n{ALL_URLS}')
    assert r.json()["details"] == {"name": "mine", "group": RBAC_GROUP, "kind": "rolebindings"}
    assert admin.get(f"{path}/mine").status_code == 404
    # a ClusterRoleBinding is not hers to write at all
    r = mallory.post(f"{RBAC}/clusterrolebindings", json=binding("mine", "ClusterRole", "cluster-admin", "mallory"))
    assert r.status_code == 403
    # nor does server-side apply (a patch that creates) get around it
    r = mallory.patch(f"{path}/applied", content=httpx.Request("POST", "/", json={
        "apiVersion": f"{RBAC_GROUP}/v1", "kind": "RoleBinding",
        **binding("applied", "ClusterRole", "cluster-admin", "mallory")}).content,
        headers={"Content-Type": "application/apply-patch+yaml"}, params={"fieldManager": "m"})
    refused(r, f'rolebindings.{RBAC_GROUP} "applied" is forbidden: {MALLORY} {NOT_HELD}{STAR}\n{ALL_URLS}')
    assert admin.get(f"{path}/applied").status_code == 404


def test_a_role_granting_everything_is_refused_on_create_update_and_patch(admin: httpx.Client,
                                                                           mallory: httpx.Client, ns: str) -> None:
    path = f"{RBAC}/namespaces/{ns}/roles"
    r = mallory.post(path, json=role("god", rule(["*"], ["*"], ["*"])))
    refused(r, f'roles.{RBAC_GROUP} "god" is forbidden: {MALLORY} {NOT_HELD}{STAR}')
    assert admin.get(f"{path}/god").status_code == 404
    # escalation is checked before validation, as upstream: an invalid escalating role is a 403 too
    url_rule = {"verbs": ["get"], "nonResourceURLs": ["/version"]}  # held, but not for a namespaced Role
    r = mallory.post(path, json=role("bad", rule(["*"], ["*"], ["*"]), url_rule))
    refused(r, f'roles.{RBAC_GROUP} "bad" is forbidden: {MALLORY} {NOT_HELD}{STAR}')
    r = mallory.post(path, json=role("bad", url_rule))
    assert r.status_code == 422 and "namespaced rules cannot apply to non-resource URLs" in r.text, r.text
    # a role she holds the rules of is fine; growing it past them is not, by PUT or by PATCH
    created(mallory.post(path, json=role("small", rule(["get"], [RBAC_GROUP], ["roles"]))))
    stored = admin.get(f"{path}/small").json()
    grown = {**stored, "rules": [rule(["get"], [RBAC_GROUP], ["roles"]), rule(["get", "delete"], [""], ["pods"])]}
    r = mallory.put(f"{path}/small", json=grown)
    refused(r, f'roles.{RBAC_GROUP} "small" is forbidden: {MALLORY} {NOT_HELD}'
               '{APIGroups:[""], Resources:["pods"], Verbs:["get" "delete"]}')
    r = mallory.patch(f"{path}/small", json={"rules": [rule(["*"], ["*"], ["*"])]}, headers=MERGE)
    refused(r, f'roles.{RBAC_GROUP} "small" is forbidden: {MALLORY} {NOT_HELD}{STAR}')
    r = mallory.patch(f"{path}/small", json=[{"op": "add", "path": "/rules/-", "value": rule(["*"], ["*"], ["*"])}],
                      headers={"Content-Type": "application/json-patch+json"})
    refused(r, f'roles.{RBAC_GROUP} "small" is forbidden: {MALLORY} {NOT_HELD}{STAR}')
    after = admin.get(f"{path}/small").json()
    assert after["rules"] == stored["rules"] and after["metadata"]["resourceVersion"] == \
        stored["metadata"]["resourceVersion"]


def test_a_cluster_role_needs_the_rules_cluster_wide(secure: SecureApiServer, admin: httpx.Client, ns: str) -> None:
    """carol may write ClusterRoles; she reads pods in ns only, and secrets everywhere."""
    suffix = uuid.uuid4().hex[:6]
    writer = f"cluster-role-writer-{suffix}"
    created(admin.post(f"{RBAC}/clusterroles", json=role(
        writer, rule(["create", "get", "update", "patch"], [RBAC_GROUP], ["clusterroles"]),
        rule(["get"], [""], ["secrets"]))))
    created(admin.post(f"{RBAC}/clusterrolebindings", json=binding(writer, "ClusterRole", writer, "carol")))
    created(admin.post(f"{RBAC}/namespaces/{ns}/roles", json=role("carol-pods", rule(["get"], [""], ["pods"]))))
    created(admin.post(f"{RBAC}/namespaces/{ns}/rolebindings",
                       json=binding("carol-pods", "Role", "carol-pods", "carol")))
    secure.issue("carol", "carol")
    path = f"{RBAC}/clusterroles"
    who = 'user "carol" (groups=["system:authenticated"])'
    with secure.client("carol") as carol:
        wait_until_allowed(carol, "GET", f"{path}/{writer}", True)
        wait_until_allowed(carol, "GET", f"/api/v1/namespaces/{ns}/pods/x", True)
        created(carol.post(path, json=role(f"secrets-{suffix}", rule(["get"], [""], ["secrets"]))))
        r = carol.post(path, json=role(f"pods-{suffix}", rule(["get"], [""], ["pods"])))
        refused(r, f'clusterroles.{RBAC_GROUP} "pods-{suffix}" is forbidden: {who} {NOT_HELD}'
                   '{APIGroups:[""], Resources:["pods"], Verbs:["get"]}')
        aggregated = {"metadata": {"name": f"agg-{suffix}"},
                      "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"x": "y"}}]}}
        r = carol.post(path, json=aggregated)
        refused(r, f'clusterroles.{RBAC_GROUP} "agg-{suffix}" is forbidden: must have cluster-admin privileges '
                   "to use the aggregationRule")
        assert admin.get(f"{path}/agg-{suffix}").status_code == 404
        # nor may she touch one an admin made
        created(admin.post(path, json=aggregated))
        r = carol.patch(f"{path}/agg-{suffix}", json={"aggregationRule": None}, headers=MERGE)
        assert r.status_code == 403 and "aggregationRule" in r.json()["message"]
    for name in (writer, f"secrets-{suffix}", f"agg-{suffix}"):
        admin.delete(f"{path}/{name}")
    admin.delete(f"{RBAC}/clusterrolebindings/{writer}")


def test_cluster_roles_aggregate_what_their_selectors_pick(secure: SecureApiServer, admin: httpx.Client, ns: str,
                                                           workdir: Path) -> None:
    """Upstream's admin, edit and view are aggregated roles; the clusterrole-aggregation controller (as its
    own service account, which holds `escalate` on clusterroles) keeps each one's rules the union of the roles
    its selectors pick: a CRD author's role labelled aggregate-to-edit reaches edit and admin (edit feeds
    admin), not view, and leaves them when it is deleted."""
    path = f"{RBAC}/clusterroles"
    edit = admin.get(f"{path}/edit").json()
    assert edit["aggregationRule"] == {"clusterRoleSelectors": [
        {"matchLabels": {"rbac.authorization.k8s.io/aggregate-to-edit": "true"}}]}
    assert edit["rules"] and edit["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-admin"] == "true"
    suffix = uuid.uuid4().hex[:6]
    widgets = rule(["get", "list", "create"], [f"{suffix}.example.com"], ["widgets"])
    manager = ControllerProcess(workdir, secure.secure_url, ["clusterrole-aggregation"], "--kubeconfig",
                                str(secure.kubeconfig("controller-manager")))
    manager.start()
    try:
        created(admin.post(path, json={**role(f"widgets-edit-{suffix}", widgets), "metadata": {
            "name": f"widgets-edit-{suffix}", "labels": {"rbac.authorization.k8s.io/aggregate-to-edit": "true"}}}))

        def holds(name: str) -> bool:
            return widgets in admin.get(f"{path}/{name}").json()["rules"]

        wait_for(lambda: holds("edit") and holds("admin"), 20, 0.1, what="edit and admin to gather the widgets rule")
        assert not holds("view")
        # a role of one's own, gathering by a label of one's own, is filled the same way
        created(admin.post(path, json={"metadata": {"name": f"team-{suffix}"},
                                       "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {
                                           "team": suffix}}]}}))
        created(admin.post(path, json={**role(f"team-pods-{suffix}", rule(["get"], [""], ["pods"])),
                                       "metadata": {"name": f"team-pods-{suffix}", "labels": {"team": suffix}}}))
        wait_for(lambda: admin.get(f"{path}/team-{suffix}").json().get("rules") == [rule(["get"], [""], ["pods"])],
                 20, 0.1, what="the team role to gather its member's rules")
        managers = {m["manager"] for m in admin.get(f"{path}/team-{suffix}").json()["metadata"]["managedFields"]}
        assert "clusterrole-aggregation-controller" in managers
        # a user bound to edit may now use the new resource
        created(admin.post(f"{RBAC}/namespaces/{ns}/rolebindings",
                           json=binding(f"erin-edits-{suffix}", "ClusterRole", "edit", "erin")))
        secure.issue("erin", "erin")
        with secure.client("erin") as erin:
            def may_create_widgets() -> bool:
                review = erin.post("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", json={
                    "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                    "spec": {"resourceAttributes": {"namespace": ns, "verb": "create",
                                                    "group": f"{suffix}.example.com", "resource": "widgets"}}})
                return bool(review.json()["status"]["allowed"])

            wait_for(may_create_widgets, 10, 0.1, what="erin (edit) to be allowed to create widgets")
        assert admin.delete(f"{path}/widgets-edit-{suffix}").status_code == 200
        wait_for(lambda: not holds("edit") and not holds("admin"), 20, 0.1,
                 what="edit and admin to drop the deleted role's rule")
    finally:
        manager.stop()
        for name in (f"widgets-edit-{suffix}", f"team-{suffix}", f"team-pods-{suffix}"):
            admin.delete(f"{path}/{name}")


def test_impersonation_is_checked_as_the_impersonated_user(admin: httpx.Client, mallory: httpx.Client,
                                                            ns: str) -> None:
    as_mallory = {"Impersonate-User": "mallory", "Impersonate-Group": "dev"}
    r = admin.post(f"{RBAC}/namespaces/{ns}/rolebindings", headers=as_mallory,
                   json=binding("via-admin", "ClusterRole", "cluster-admin", "mallory"))
    refused(r, f'rolebindings.{RBAC_GROUP} "via-admin" is forbidden: {MALLORY} {NOT_HELD}{STAR}\n{ALL_URLS}')
    assert admin.get(f"{RBAC}/namespaces/{ns}/rolebindings/via-admin").status_code == 404


def test_garbage_collector_cannot_join_cluster_admin(secure: SecureApiServer, admin: httpx.Client) -> None:
    gc_token = secure.service_account_token("generic-garbage-collector")
    path = f"{RBAC}/clusterrolebindings/cluster-admin"
    before = admin.get(path).json()
    who = ('user "system:serviceaccount:kube-system:generic-garbage-collector" (groups=["system:serviceaccounts" '
           '"system:serviceaccounts:kube-system" "system:authenticated"])')
    with secure.token_client(gc_token) as gc:
        current = gc.get(path).json()
        current["subjects"].append({"kind": "User", "apiGroup": RBAC_GROUP, "name": "mallory"})
        message = (f'clusterrolebindings.{RBAC_GROUP} "cluster-admin" is forbidden: {who} {NOT_HELD}{STAR}\n'
                   f"{ALL_URLS}")
        refused(gc.put(path, json=current), message)
        refused(gc.patch(path, json={"subjects": current["subjects"]}, headers=MERGE), message)
        # what the collector itself does (ownerReferences, finalizers) is still allowed
        created(admin.post(f"{RBAC}/clusterroles", json=role("gc-owned", rule(["get"], [""], ["pods"]))))
        r = gc.patch(f"{RBAC}/clusterroles/gc-owned", json={"metadata": {"finalizers": ["example.com/x"]}},
                     headers=MERGE)
        assert r.status_code == 200, r.text
    after = admin.get(path).json()
    assert after["subjects"] == before["subjects"]
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    admin.patch(f"{RBAC}/clusterroles/gc-owned", json={"metadata": {"finalizers": None}}, headers=MERGE)
    admin.delete(f"{RBAC}/clusterroles/gc-owned")


def test_binding_a_missing_role_is_not_found(mallory: httpx.Client, ns: str) -> None:
    r = mallory.post(f"{RBAC}/namespaces/{ns}/rolebindings", json=binding("b", "Role", "nowhere", "mallory"))
    assert r.status_code == 404, r.text
    assert r.json()["message"] == f'roles.{RBAC_GROUP} "nowhere" not found'
    bad = binding("b", "Group", "x", "mallory")
    r = mallory.post(f"{RBAC}/namespaces/{ns}/rolebindings", json=bad)
    assert r.status_code == 422 and "roleRef.kind" in r.text, r.text
    assert mallory.get(f"{RBAC}/namespaces/{ns}/rolebindings/b").status_code == 404


# -- who may ---------------------------------------------------------------------------------------------


def test_escalate_bind_and_held_rules_allow(secure: SecureApiServer, admin: httpx.Client, ns: str) -> None:
    roles, bindings = f"{RBAC}/namespaces/{ns}/roles", f"{RBAC}/namespaces/{ns}/rolebindings"
    writer = rule(["create", "get", "update", "patch"], [RBAC_GROUP], ["roles", "rolebindings"])
    created(admin.post(roles, json=role("escalator", writer, rule(["escalate"], [RBAC_GROUP], ["roles"]))))
    created(admin.post(roles, json=role("binder", writer,
                                        rule(["bind"], [RBAC_GROUP], ["clusterroles"], ["view"]))))
    created(admin.post(roles, json=role("pod-reader-holder", writer, rule(["get", "list"], [""], ["pods"]))))
    for user in ("escalator", "binder", "pod-reader-holder"):
        created(admin.post(bindings, json=binding(f"{user}-is", "Role", user, user)))
        secure.issue(user, user)
    with secure.client("escalator") as escalator:
        wait_until_allowed(escalator, "GET", f"{roles}/escalator", True)
        created(escalator.post(roles, json=role("everything", rule(["*"], ["*"], ["*"]))))
        # escalate is not bind: it still may not bind what it does not hold
        r = escalator.post(bindings, json=binding("e", "Role", "everything", "escalator"))
        assert r.status_code == 403 and NOT_HELD in r.json()["message"]
    with secure.client("binder") as binder:
        wait_until_allowed(binder, "GET", f"{roles}/binder", True)
        created(binder.post(bindings, json=binding("reads", "ClusterRole", "view", "someone")))
        r = binder.post(bindings, json=binding("admin", "ClusterRole", "cluster-admin", "binder"))
        assert r.status_code == 403 and r.json()["message"].startswith(
            f'rolebindings.{RBAC_GROUP} "admin" is forbidden: user "binder" (groups=["system:authenticated"]) '
            f"{NOT_HELD}")
    with secure.client("pod-reader-holder") as holder:
        wait_until_allowed(holder, "GET", f"{roles}/pod-reader-holder", True)
        created(holder.post(roles, json=role("reads-pods", rule(["get"], [""], ["pods"]))))
        created(holder.post(bindings, json=binding("reads-pods", "Role", "reads-pods", "someone")))
        r = holder.post(roles, json=role("deletes-pods", rule(["delete"], [""], ["pods"])))
        refused(r, f'roles.{RBAC_GROUP} "deletes-pods" is forbidden: user "pod-reader-holder" '
                   f'(groups=["system:authenticated"]) {NOT_HELD}'
                   '{APIGroups:[""], Resources:["pods"], Verbs:["delete"]}')
    # system:masters may do anything
    created(admin.post(bindings, json=binding("root", "ClusterRole", "cluster-admin", "root")))


def test_escalate_on_one_role_by_name(secure: SecureApiServer, admin: httpx.Client, ns: str) -> None:
    """escalate with resourceNames covers writes to that role; a create has no name yet, as upstream."""
    roles = f"{RBAC}/namespaces/{ns}/roles"
    created(admin.post(roles, json=role("named-escalator", rule(["create", "get", "update", "patch"], [RBAC_GROUP],
                                                                ["roles"]),
                                        rule(["escalate"], [RBAC_GROUP], ["roles"], ["target"]))))
    created(admin.post(f"{RBAC}/namespaces/{ns}/rolebindings",
                       json=binding("named-escalator", "Role", "named-escalator", "dana")))
    secure.issue("dana", "dana")
    with secure.client("dana") as dana:
        wait_until_allowed(dana, "GET", f"{roles}/named-escalator", True)
        r = dana.post(roles, json=role("target", rule(["*"], ["*"], ["*"])))
        assert r.status_code == 403 and NOT_HELD in r.json()["message"], r.text
        created(admin.post(roles, json=role("target")))
        r = dana.patch(f"{roles}/target", json={"rules": [rule(["*"], ["*"], ["*"])]}, headers=MERGE)
        assert r.status_code == 200 and r.json()["rules"] == [rule(["*"], ["*"], ["*"])], r.text
        created(admin.post(roles, json=role("other")))
        r = dana.patch(f"{roles}/other", json={"rules": [rule(["*"], ["*"], ["*"])]}, headers=MERGE)
        assert r.status_code == 403 and NOT_HELD in r.json()["message"], r.text


# -- SelfSubjectRulesReview ------------------------------------------------------------------------------


def test_self_subject_rules_review(secure: SecureApiServer, mallory: httpx.Client, ns: str) -> None:
    body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview", "spec": {"namespace": ns}}
    r = mallory.post(SSRR, json=body)
    assert r.status_code == 201, r.text
    review = r.json()
    assert review["kind"] == "SelfSubjectRulesReview"
    status = review["status"]
    assert status["incomplete"] is False and "evaluationError" not in status
    assert {"verbs": ["create", "get", "list", "update", "patch", "delete"], "apiGroups": [RBAC_GROUP],
            "resources": ["roles", "rolebindings"]} in status["resourceRules"]
    assert {"verbs": ["create"], "apiGroups": ["authorization.k8s.io"],
            "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]} in status["resourceRules"]
    assert any("/api" in x["nonResourceURLs"] for x in status["nonResourceRules"])
    # elsewhere only what the cluster gives everyone
    other = mallory.post(SSRR, json={**body, "spec": {"namespace": "default"}}).json()["status"]
    assert all(RBAC_GROUP not in x["apiGroups"] for x in other["resourceRules"])
    # no namespace: upstream's 400
    r = mallory.post(SSRR, json={**body, "spec": {}})
    assert r.status_code == 400 and r.json()["message"] == "no namespace on request"
    # a kubelet: the Node authorizer cannot enumerate what it allows
    with secure.client("kubelet-node-a") as kubelet:
        status = kubelet.post(SSRR, json=body).json()["status"]
        assert status["incomplete"] is True
        assert status["evaluationError"] == "node authorizer does not support user rule resolution"


@pytest.mark.kubectl
@pytest.mark.parametrize("version", ["1.27", "1.33"])
def test_kubectl_auth_can_i_list(secure: SecureApiServer, mallory: httpx.Client, ns: str, version: str,
                                 tmp_path: Path) -> None:
    binary = find_kubectl(version)
    if binary is None:
        pytest.skip(f"kubectl.{version} is not installed")
    kubectl = SecureKubectl(binary, version, secure, "mallory", tmp_path, ns)
    out = kubectl.run("auth", "can-i", "--list").ok().stdout
    lines = [line.split() for line in out.splitlines()]
    assert lines[0][:2] == ["Resources", "Non-Resource"], out
    assert ["roles.rbac.authorization.k8s.io", "[]", "[]", "[create", "get", "list", "update", "patch",
            "delete]"] in lines, out
    assert ["selfsubjectrulesreviews.authorization.k8s.io", "[]", "[]", "[create]"] in lines, out
    assert ["[/api/*]", "[]", "[get]"] in lines, out
    assert "rbac.authorization.k8s.io" not in kubectl.run("auth", "can-i", "--list", "-n", "default").ok().stdout
    kubelet = SecureKubectl(binary, version, secure, "kubelet-node-a", tmp_path / "kubelet", ns)
    listed = kubelet.run("auth", "can-i", "--list").ok()
    assert "Warning: the list may be incomplete: node authorizer does not support user rule resolution" in \
        listed.stderr, listed.stderr


# -- NodeRestriction ---------------------------------------------------------------------------------------


def test_a_kubelet_may_not_label_or_taint_itself_past_upstreams_list(secure: SecureApiServer,
                                                                      admin: httpx.Client) -> None:
    node = "node-b"
    path = f"/api/v1/nodes/{node}"
    admin.delete(path)
    taint = {"key": "example.com/dedicated", "value": "x", "effect": "NoSchedule"}
    with secure.client(f"kubelet-{node}") as kubelet:
        # registration: forbidden labels refused, allowed labels and initial taints accepted
        body = {"apiVersion": "v1", "kind": "Node", "spec": {"taints": [taint]},
                "metadata": {"name": node, "labels": {"kubernetes.io/hostname": node,
                                                      "node-role.kubernetes.io/control-plane": "",
                                                      "node-restriction.kubernetes.io/secure": "true"}}}
        refused(kubelet.post("/api/v1/nodes", json=body),
                f'nodes "{node}" is forbidden: node "{node}" is not allowed to set the following labels: '
                "node-restriction.kubernetes.io/secure, node-role.kubernetes.io/control-plane")
        assert admin.get(path).status_code == 404
        body["metadata"]["labels"] = {"kubernetes.io/hostname": node, "kubernetes.io/os": "linux",
                                      "node.kubernetes.io/instance-type": "small", "example.com/rack": "r1"}
        created(kubelet.post("/api/v1/nodes", json=body))
        stored = admin.get(path).json()
        # after: no node-role, no node-restriction labels; no taint changes
        for label in ("node-role.kubernetes.io/worker", "node-restriction.kubernetes.io/secure"):
            r = kubelet.patch(path, json={"metadata": {"labels": {label: "true"}}}, headers=MERGE)
            refused(r, f'nodes "{node}" is forbidden: is not allowed to modify labels: {label}')
        refused(kubelet.patch(path, json={"spec": {"taints": None}}, headers=MERGE),
                f'nodes "{node}" is forbidden: node "{node}" is not allowed to modify taints')
        refused(kubelet.patch(path, json={"spec": {"taints": [taint, {**taint, "key": "b"}]}}, headers=MERGE),
                f'nodes "{node}" is forbidden: node "{node}" is not allowed to modify taints')
        after = admin.get(path).json()
        assert after["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
        # what the kubelet owns it may change
        r = kubelet.patch(path, json={"metadata": {"labels": {"kubelet.kubernetes.io/x": "1", "example.com/rack": "r2",
                                                              "topology.kubernetes.io/zone": "z"}}}, headers=MERGE)
        assert r.status_code == 200, r.text
        assert r.json()["spec"]["taints"] == [taint]
    # the cluster's own writers are not restricted
    r = admin.patch(path, json={"metadata": {"labels": {"node-role.kubernetes.io/worker": ""}},
                                "spec": {"taints": None}}, headers=MERGE)
    assert r.status_code == 200, r.text
    admin.delete(path)
