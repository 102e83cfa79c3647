"""Authorization and authentication without processes: RBAC rule matching and binding scopes,
the bootstrap policy as a matrix per component identity, the Node authorizer, upstream's 403
message, static tokens, service-account tokens and certificate subjects."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from apiserver.auth import bootstrap
from apiserver.auth.authn import ANONYMOUS, UNSECURED, Authenticator, load_token_file
from apiserver.auth.authz import (
    ALLOW,
    NO_OPINION,
    Attributes,
    Authorizer,
    NodeAuthorizer,
    RBACAuthorizer,
    Rule,
    StaticRbac,
    forbidden,
)
from apiserver.auth.pki import new_key
from apiserver.auth.serviceaccount import TokenError, TokenVerifier, sign_token
from machinery.authn.user import UserInfo, user_from_peercert

AUTH = "system:authenticated"


def user(name: str, *groups: str) -> UserInfo:
    return UserInfo(name, (*groups, AUTH))


def res(u: UserInfo, verb: str, resource: str, namespace: str = "", name: str = "", group: str = "",
        subresource: str = "", field_selector: str = "") -> Attributes:
    return Attributes(u, verb, True, "", group, "v1", resource, subresource, namespace, name, field_selector)


def url(u: UserInfo, verb: str, path: str) -> Attributes:
    return Attributes(u, verb, False, path)


# -- rules --------------------------------------------------------------------------------------------


class TestRule:
    def test_verbs_groups_resources(self) -> None:
        r = Rule({"verbs": ["get", "list"], "apiGroups": ["apps"], "resources": ["deployments"]})
        u = user("u")
        assert r.allows(res(u, "get", "deployments", group="apps"))
        assert not r.allows(res(u, "delete", "deployments", group="apps"))
        assert not r.allows(res(u, "get", "deployments", group=""))
        assert not r.allows(res(u, "get", "replicasets", group="apps"))
        assert not r.allows(res(u, "get", "deployments", group="apps", subresource="scale"))

    def test_subresources_and_wildcards(self) -> None:
        u = user("u")
        assert Rule({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}).allows(
            res(u, "patch", "pods", subresource="status"))
        assert Rule({"verbs": ["update"], "apiGroups": [""], "resources": ["pods/status"]}).allows(
            res(u, "update", "pods", subresource="status"))
        assert not Rule({"verbs": ["update"], "apiGroups": [""], "resources": ["pods/status"]}).allows(
            res(u, "update", "pods"))
        assert Rule({"verbs": ["get"], "apiGroups": ["apps"], "resources": ["*/scale"]}).allows(
            res(u, "get", "replicasets", group="apps", subresource="scale"))
        assert Rule({"verbs": ["get"], "apiGroups": [""], "resources": ["pods/*"]}).allows(
            res(u, "get", "pods", subresource="log"))

    def test_resource_names(self) -> None:
        r = Rule({"verbs": ["get"], "apiGroups": [""], "resources": ["nodes"], "resourceNames": ["a"]})
        assert r.allows(res(user("u"), "get", "nodes", name="a"))
        assert not r.allows(res(user("u"), "get", "nodes", name="b"))
        assert not r.allows(res(user("u"), "list", "nodes"))

    def test_non_resource_urls(self) -> None:
        r = Rule({"verbs": ["get"], "nonResourceURLs": ["/api", "/apis/*"]})
        u = user("u")
        assert r.allows(url(u, "get", "/api"))
        assert r.allows(url(u, "get", "/apis/apps/v1"))
        assert not r.allows(url(u, "get", "/api/v1"))
        assert not r.allows(url(u, "post", "/api"))
        assert not r.allows(res(u, "get", "pods"))  # a URL rule says nothing about resources


# -- RBAC bindings ------------------------------------------------------------------------------------


def role(name: str, rules: list[dict[str, Any]], namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return {"metadata": meta, "rules": rules}


def binding(name: str, kind: str, ref: str, subjects: list[dict[str, Any]], namespace: str | None = None
            ) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return {"metadata": meta, "roleRef": {"apiGroup": bootstrap.RBAC, "kind": kind, "name": ref}, "subjects": subjects}


READ_PODS = [{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]}]


class MutableRbac(StaticRbac):
    gen = 0

    def generation(self) -> Any:
        return self.gen


class TestRBACAuthorizer:
    def test_cluster_role_binding_grants_everywhere(self) -> None:
        rbac = RBACAuthorizer(StaticRbac([role("reader", READ_PODS)], [], [
            binding("b", "ClusterRole", "reader", [{"kind": "User", "name": "alice"}])], []))
        decision, reason = rbac.authorize(res(user("alice"), "list", "pods", namespace="x"))
        assert decision == ALLOW
        assert reason == 'RBAC: allowed by ClusterRoleBinding "b" of ClusterRole "reader" to User "alice"'
        assert rbac.authorize(res(user("alice"), "list", "pods"))[0] == ALLOW
        assert rbac.authorize(res(user("bob"), "list", "pods"))[0] == NO_OPINION

    def test_role_binding_is_namespaced_even_to_a_cluster_role(self) -> None:
        rbac = RBACAuthorizer(StaticRbac([role("reader", READ_PODS)], [role("local", READ_PODS, "a")], [], [
            binding("b1", "ClusterRole", "reader", [{"kind": "User", "name": "alice"}], "a"),
            binding("b2", "Role", "local", [{"kind": "Group", "name": "devs"}], "a"),
        ]))
        assert rbac.authorize(res(user("alice"), "get", "pods", namespace="a", name="p"))[0] == ALLOW
        assert rbac.authorize(res(user("alice"), "get", "pods", namespace="b", name="p"))[0] == NO_OPINION
        assert rbac.authorize(res(user("alice"), "list", "pods"))[0] == NO_OPINION  # all namespaces
        assert rbac.authorize(res(user("carol", "devs"), "list", "pods", namespace="a"))[0] == ALLOW

    def test_service_account_subjects(self) -> None:
        rbac = RBACAuthorizer(StaticRbac([role("reader", READ_PODS)], [], [
            binding("b", "ClusterRole", "reader", [{"kind": "ServiceAccount", "name": "ci", "namespace": "tools"}])],
            [binding("b", "ClusterRole", "reader", [{"kind": "ServiceAccount", "name": "local"}], "a")]))
        assert rbac.authorize(res(user("system:serviceaccount:tools:ci"), "list", "pods"))[0] == ALLOW
        assert rbac.authorize(res(user("system:serviceaccount:a:local"), "list", "pods", namespace="a"))[0] == ALLOW
        assert rbac.authorize(res(user("system:serviceaccount:b:local"), "list", "pods", namespace="a"))[0] \
            == NO_OPINION

    def test_changes_take_effect_when_the_generation_moves(self) -> None:
        source = MutableRbac([role("reader", READ_PODS)], [], [], [])
        rbac = RBACAuthorizer(source)
        attrs = res(user("alice"), "list", "pods")
        assert rbac.authorize(attrs)[0] == NO_OPINION
        source.cluster_role_bindings.append(binding("b", "ClusterRole", "reader", [{"kind": "User", "name": "alice"}]))
        assert rbac.authorize(attrs)[0] == NO_OPINION  # cached until the caches say something changed
        source.gen = 1
        assert rbac.authorize(attrs)[0] == ALLOW
        source.cluster_role_bindings.clear()
        source.gen = 2
        assert rbac.authorize(attrs)[0] == NO_OPINION

    def test_binding_to_a_missing_role_grants_nothing(self) -> None:
        ghost = binding("b", "ClusterRole", "ghost", [{"kind": "User", "name": "a"}])
        rbac = RBACAuthorizer(StaticRbac([], [], [ghost], []))
        assert rbac.authorize(res(user("a"), "get", "pods", namespace="x"))[0] == NO_OPINION


# -- the bootstrap policy, per component --------------------------------------------------------------


@pytest.fixture(scope="module")
def authorizer() -> Authorizer:
    roles, bindings = bootstrap.policy_objects()
    pods = {("default", "on-a"): "node-a", ("default", "on-b"): "node-b"}
    return Authorizer([NodeAuthorizer(lambda ns, name: pods.get((ns, name))),
                       RBACAuthorizer(StaticRbac(roles, [], bindings, []))])


SCHEDULER = user("system:kube-scheduler")
KCM = user("system:kube-controller-manager")
DEPLOYMENT_CONTROLLER = user("system:serviceaccount:kube-system:deployment-controller", "system:serviceaccounts",
                             "system:serviceaccounts:kube-system")
REPLICASET_CONTROLLER = user("system:serviceaccount:kube-system:replicaset-controller", "system:serviceaccounts",
                             "system:serviceaccounts:kube-system")
DAEMONSET_CONTROLLER = user("system:serviceaccount:kube-system:daemon-set-controller", "system:serviceaccounts",
                            "system:serviceaccounts:kube-system")
JOB_CONTROLLER = user("system:serviceaccount:kube-system:job-controller", "system:serviceaccounts")
CRONJOB_CONTROLLER = user("system:serviceaccount:kube-system:cronjob-controller", "system:serviceaccounts")
TTL_CONTROLLER = user("system:serviceaccount:kube-system:ttl-after-finished-controller", "system:serviceaccounts")
ADMIN = user("kubernetes-admin", "system:masters")
NODE_A = user("system:node:node-a", "system:nodes")
NOBODY = user("alice")

MATRIX: list[tuple[UserInfo, Attributes, bool]] = [
    # the scheduler: reads pods and nodes, binds, writes pod status and events; nothing of apps
    (SCHEDULER, res(SCHEDULER, "list", "pods"), True),
    (SCHEDULER, res(SCHEDULER, "watch", "nodes"), True),
    (SCHEDULER, res(SCHEDULER, "create", "pods", "default", "p", subresource="binding"), True),
    # VolumeBinding writes the selected-node annotation on a WaitForFirstConsumer claim (system:volume-scheduler)
    (SCHEDULER, res(SCHEDULER, "patch", "persistentvolumeclaims", "default", "c"), True),
    (SCHEDULER, res(SCHEDULER, "delete", "persistentvolumeclaims", "default", "c"), False),
    (SCHEDULER, res(SCHEDULER, "patch", "pods", "default", "p", subresource="status"), True),
    (SCHEDULER, res(SCHEDULER, "create", "events", "default"), True),
    (SCHEDULER, res(SCHEDULER, "delete", "deployments", "default", "nginx", group="apps"), False),
    (SCHEDULER, res(SCHEDULER, "create", "pods", "default"), False),
    (SCHEDULER, res(SCHEDULER, "update", "nodes", name="n"), False),
    # the controller-manager's shared informers read everything, write nothing
    (KCM, res(KCM, "list", "replicasets", group="apps"), True),
    (KCM, res(KCM, "watch", "clusterroles", group="rbac.authorization.k8s.io"), True),
    (KCM, res(KCM, "delete", "pods", "default", "p"), False),
    # each controller: what it reconciles
    (DEPLOYMENT_CONTROLLER, res(DEPLOYMENT_CONTROLLER, "create", "replicasets", "default", group="apps"), True),
    (DEPLOYMENT_CONTROLLER, res(DEPLOYMENT_CONTROLLER, "update", "deployments", "default", "d", group="apps",
                                subresource="status"), True),
    (DEPLOYMENT_CONTROLLER, res(DEPLOYMENT_CONTROLLER, "create", "pods", "default"), False),
    (REPLICASET_CONTROLLER, res(REPLICASET_CONTROLLER, "create", "pods", "default"), True),
    (REPLICASET_CONTROLLER, res(REPLICASET_CONTROLLER, "delete", "pods", "default", "p"), True),
    (REPLICASET_CONTROLLER, res(REPLICASET_CONTROLLER, "create", "replicasets", "default", group="apps"), False),
    (REPLICASET_CONTROLLER, res(REPLICASET_CONTROLLER, "create", "pods", "default", "p", subresource="binding"),
     False),
    (DAEMONSET_CONTROLLER, res(DAEMONSET_CONTROLLER, "create", "pods", "default"), True),
    (DAEMONSET_CONTROLLER, res(DAEMONSET_CONTROLLER, "patch", "pods", "default", "p"), True),
    (DAEMONSET_CONTROLLER, res(DAEMONSET_CONTROLLER, "update", "daemonsets", "default", "d", group="apps",
                               subresource="status"), True),
    (DAEMONSET_CONTROLLER, res(DAEMONSET_CONTROLLER, "create", "controllerrevisions", "default", group="apps"), True),
    (DAEMONSET_CONTROLLER, res(DAEMONSET_CONTROLLER, "update", "daemonsets", "default", "d", group="apps"), False),
    (DAEMONSET_CONTROLLER, res(DAEMONSET_CONTROLLER, "create", "replicasets", "default", group="apps"), False),
    # the batch controllers: the Job controller's pods (the tracking finalizer comes off by patch), its status and
    # the jobs/finalizers that a blockOwnerDeletion reference needs; the CronJob controller's Jobs; the TTL one deletes
    (JOB_CONTROLLER, res(JOB_CONTROLLER, "create", "pods", "default"), True),
    (JOB_CONTROLLER, res(JOB_CONTROLLER, "patch", "pods", "default", "p"), True),
    (JOB_CONTROLLER, res(JOB_CONTROLLER, "delete", "pods", "default", "p"), True),
    (JOB_CONTROLLER, res(JOB_CONTROLLER, "update", "jobs", "default", "j", group="batch", subresource="status"), True),
    (JOB_CONTROLLER, res(JOB_CONTROLLER, "update", "jobs", "default", "j", group="batch", subresource="finalizers"),
     True),
    (JOB_CONTROLLER, res(JOB_CONTROLLER, "create", "events", "default"), True),
    (JOB_CONTROLLER, res(JOB_CONTROLLER, "delete", "jobs", "default", "j", group="batch"), False),
    (CRONJOB_CONTROLLER, res(CRONJOB_CONTROLLER, "create", "jobs", "default", group="batch"), True),
    (CRONJOB_CONTROLLER, res(CRONJOB_CONTROLLER, "delete", "jobs", "default", "j", group="batch"), True),
    (CRONJOB_CONTROLLER, res(CRONJOB_CONTROLLER, "update", "cronjobs", "default", "c", group="batch",
                             subresource="status"), True),
    (CRONJOB_CONTROLLER, res(CRONJOB_CONTROLLER, "update", "cronjobs", "default", "c", group="batch",
                             subresource="finalizers"), True),
    (CRONJOB_CONTROLLER, res(CRONJOB_CONTROLLER, "create", "pods", "default"), False),
    (TTL_CONTROLLER, res(TTL_CONTROLLER, "delete", "jobs", "default", "j", group="batch"), True),
    (TTL_CONTROLLER, res(TTL_CONTROLLER, "get", "jobs", "default", "j", group="batch"), True),
    (TTL_CONTROLLER, res(TTL_CONTROLLER, "delete", "pods", "default", "p"), False),
    (TTL_CONTROLLER, res(TTL_CONTROLLER, "delete", "cronjobs", "default", "c", group="batch"), False),
    # masters: anything
    (ADMIN, res(ADMIN, "delete", "clusterroles", name="cluster-admin", group="rbac.authorization.k8s.io"), True),
    (ADMIN, url(ADMIN, "post", "/anything"), True),
    # every authenticated user: discovery and `kubectl auth can-i`, nothing else
    (NOBODY, url(NOBODY, "get", "/apis/apps/v1"), True),
    (NOBODY, res(NOBODY, "create", "selfsubjectaccessreviews", group="authorization.k8s.io"), True),
    (NOBODY, res(NOBODY, "list", "pods", "default"), False),
    (ANONYMOUS, url(ANONYMOUS, "get", "/healthz"), True),
    (ANONYMOUS, url(ANONYMOUS, "get", "/api"), False),
    # a kubelet: its own node and lease, pods bound to it, pods listed by node
    (NODE_A, res(NODE_A, "patch", "nodes", name="node-a", subresource="status"), True),
    (NODE_A, res(NODE_A, "patch", "nodes", name="node-b", subresource="status"), False),
    (NODE_A, res(NODE_A, "delete", "nodes", name="node-b"), False),
    (NODE_A, res(NODE_A, "list", "nodes"), True),
    (NODE_A, res(NODE_A, "update", "leases", "kube-node-lease", "node-a", group="coordination.k8s.io"), True),
    (NODE_A, res(NODE_A, "update", "leases", "kube-node-lease", "node-b", group="coordination.k8s.io"), False),
    (NODE_A, res(NODE_A, "watch", "pods", field_selector="spec.nodeName=node-a"), True),
    (NODE_A, res(NODE_A, "list", "pods"), False),
    (NODE_A, res(NODE_A, "list", "pods", field_selector="spec.nodeName=node-b"), False),
    (NODE_A, res(NODE_A, "patch", "pods", "default", "on-a", subresource="status"), True),
    (NODE_A, res(NODE_A, "patch", "pods", "default", "on-b", subresource="status"), False),
    (NODE_A, res(NODE_A, "get", "pods", "default", "on-b"), False),
    (NODE_A, res(NODE_A, "delete", "pods", "default", "on-a"), True),
    (NODE_A, res(NODE_A, "delete", "pods", "default", "gone"), True),  # the store answers 404
    (NODE_A, res(NODE_A, "create", "pods", "default"), False),
    (NODE_A, res(NODE_A, "create", "events", "default"), True),
    (NODE_A, res(NODE_A, "list", "deployments", group="apps"), False),
]


@pytest.mark.parametrize(("who", "attrs", "allowed"), MATRIX,
                         ids=[f"{w.name.rsplit(':', 1)[-1]}-{a.verb}-{a.resource or a.path}"
                              f"{'/' + a.subresource if a.subresource else ''}-{a.name or a.namespace}"
                              for w, a, _ in MATRIX])
def test_bootstrap_matrix(authorizer: Authorizer, who: UserInfo, attrs: Attributes, allowed: bool) -> None:
    assert authorizer.authorize(attrs)[0] is allowed


def test_view_reads_and_edit_writes_jobs_and_cronjobs() -> None:
    roles = bootstrap.cluster_roles()

    def grants(role: str, verb: str, resource: str) -> bool:
        return any("batch" in r.get("apiGroups", []) and resource in r.get("resources", []) and verb in r["verbs"]
                   for r in roles[role])

    for resource in ("jobs", "cronjobs", "jobs/status", "cronjobs/status"):
        assert grants("view", "list", resource) and not grants("view", "create", resource)
    for role in ("edit", "admin"):
        assert grants(role, "create", "jobs") and grants(role, "delete", "cronjobs")


def test_unsecured_is_a_master(authorizer: Authorizer) -> None:
    assert authorizer.authorize(res(UNSECURED, "delete", "namespaces", name="kube-system")) == (True, "")


def test_denied_reasons_are_kept(authorizer: Authorizer) -> None:
    allowed, reason = authorizer.authorize(res(NODE_A, "patch", "pods", "default", "on-b", subresource="status"))
    assert not allowed
    assert reason == "no relationship found between node 'node-a' and this object"


def test_a_refusal_before_the_caches_listed_says_so_and_is_not_remembered() -> None:
    """Upstream's withNotSyncedReason: right after a start the bindings may not be listed yet; the 403 says
    "informers not synced" and the decision is asked again once they are."""

    class Listing:
        def __init__(self) -> None:
            self.listed = False
            self.bindings: list[dict[str, Any]] = []

        def generation(self) -> Any:
            return len(self.bindings)

        def objects(self) -> Any:
            role = {"metadata": {"name": "reader"}, "rules": [{"apiGroups": [""], "resources": ["pods"],
                                                                "verbs": ["get"]}]}
            return [role], [], self.bindings, []

        def synced(self) -> bool:
            return self.listed

    source = Listing()
    rbac = RBACAuthorizer(source)
    asked = res(NOBODY, "get", "pods", "default", "p")
    assert rbac.authorize(asked) == (NO_OPINION, "informers not synced")
    source.bindings.append({"metadata": {"name": "read"}, "roleRef": {"kind": "ClusterRole", "name": "reader"},
                            "subjects": [{"kind": "User", "name": NOBODY.name}]})
    source.listed = True
    assert rbac.authorize(asked)[0] == ALLOW
    assert rbac.authorize(res(NOBODY, "delete", "pods", "default", "p")) == (NO_OPINION, "")
    e = forbidden(asked, "informers not synced")
    assert e.message.endswith('in the namespace "default": informers not synced')


# -- the 403 ------------------------------------------------------------------------------------------


class TestForbiddenMessage:
    def test_namespaced_with_a_name(self) -> None:
        e = forbidden(res(SCHEDULER, "delete", "deployments", "default", "nginx", group="apps"))
        assert e.code == 403 and e.reason == "Forbidden"
        assert e.message == ('deployments.apps "nginx" is forbidden: User "system:kube-scheduler" cannot delete '
                             'resource "deployments" in API group "apps" in the namespace "default"')
        assert e.details == {"kind": "deployments", "group": "apps", "name": "nginx"}

    def test_cluster_scope_subresource_and_reason(self) -> None:
        e = forbidden(res(NODE_A, "patch", "nodes", name="node-b", subresource="status"), "because")
        assert e.message == ('nodes "node-b" is forbidden: User "system:node:node-a" cannot patch resource '
                             '"nodes/status" in API group "" at the cluster scope: because')

    def test_list_and_path(self) -> None:
        assert forbidden(res(NOBODY, "list", "pods", "default")).message == (
            'pods is forbidden: User "alice" cannot list resource "pods" in API group "" in the namespace "default"')
        assert forbidden(url(ANONYMOUS, "get", "/api")).message == \
            'forbidden: User "system:anonymous" cannot get path "/api"'


# -- authentication -----------------------------------------------------------------------------------


def test_certificate_subject_is_user_and_groups() -> None:
    cert = {"subject": ((("organizationName", "system:nodes"),), (("organizationName", "extra"),),
                        (("commonName", "system:node:n1"),))}
    u = user_from_peercert(cert)
    assert u == UserInfo("system:node:n1", ("system:nodes", "extra", AUTH))
    assert u is not None and u.node_name == "n1"
    assert user_from_peercert({"subject": ((("organizationName", "x"),),)}) is None
    assert UserInfo("system:node:n1", (AUTH,)).node_name is None  # the group is part of being a node


def test_token_file(tmp_path: Path) -> None:
    f = tmp_path / "tokens.csv"
    f.write_text('# comment\nabc123,alice,uid-1,"devs,ops"\nxyz,bob,uid-2\n')
    tokens = load_token_file(f)
    assert tokens["abc123"] == UserInfo("alice", ("devs", "ops", AUTH), "uid-1")
    authn = Authenticator(tokens)
    assert authn.authenticate(None, b"Bearer xyz") == UserInfo("bob", (AUTH,), "uid-2")
    assert authn.authenticate(None, b"Bearer nope") is None
    assert authn.authenticate(None, b"Basic eHl6") is None
    assert authn.authenticate(None, b"Bearer \xff\xfe") is None
    assert authn.authenticate(None, b"Bearer ") is None
    assert authn.authenticate(None, None) is None
    f.write_text("onlytoken\n")
    with pytest.raises(ValueError, match="expected token,user,uid"):
        load_token_file(f)


class TestServiceAccountTokens:
    def test_round_trip(self) -> None:
        key = new_key()
        token = sign_token(key, "kube-system", "deployment-controller", uid="u1")
        authn = Authenticator(verifier=TokenVerifier([key.public_key()]))
        u = authn.authenticate(None, f"Bearer {token}".encode())
        assert u is not None
        jti = u.extra["authentication.kubernetes.io/credential-id"]
        assert u == UserInfo("system:serviceaccount:kube-system:deployment-controller",
                             ("system:serviceaccounts", "system:serviceaccounts:kube-system", AUTH), "u1",
                             {"authentication.kubernetes.io/credential-id": jti})
        assert jti[0].startswith("JTI=")
        assert authn.authenticate(None, f"Bearer {token}".encode()) == u  # from the cache

    def test_refused(self) -> None:
        key, other = new_key(), new_key()
        verifier = TokenVerifier([key.public_key()])
        good = sign_token(key, "ns", "sa")
        with pytest.raises(TokenError, match="signature"):
            verifier.verify(sign_token(other, "ns", "sa"))
        with pytest.raises(TokenError, match="expired"):
            verifier.verify(sign_token(key, "ns", "sa", expiration_seconds=10, now=time.time() - 60))
        with pytest.raises(TokenError, match="issuer"):
            verifier.verify(sign_token(key, "ns", "sa", issuer="someone-else"))
        header, claims, signature = good.split(".")
        for broken in ("", "a.b", "a.b.c", f"{header}.{claims}.", f"{header}.{claims}.{signature}x",
                       f"{header}.e30.{signature}", "!!!.???.***", f"{claims}.{header}.{signature}"):
            with pytest.raises(TokenError):
                verifier.verify(broken)
        authn = Authenticator(verifier=verifier)
        assert authn.authenticate(None, b"Bearer a.b.c") is None
        assert authn.authenticate(None, f"Bearer {sign_token(other, 'ns', 'sa')}".encode()) is None


QUOTA_CONTROLLER = user("system:serviceaccount:kube-system:resourcequota-controller", "system:serviceaccounts")
RC_CONTROLLER = user("system:serviceaccount:kube-system:replication-controller", "system:serviceaccounts")


@pytest.mark.parametrize(("who", "attrs", "allowed"), [
    # the resource-quota controller counts anything and writes only quota status (and events)
    (QUOTA_CONTROLLER, res(QUOTA_CONTROLLER, "list", "deployments", "default", group="apps"), True),
    (QUOTA_CONTROLLER, res(QUOTA_CONTROLLER, "watch", "pods", "default"), True),
    (QUOTA_CONTROLLER, res(QUOTA_CONTROLLER, "update", "resourcequotas", "default", "q", subresource="status"), True),
    (QUOTA_CONTROLLER, res(QUOTA_CONTROLLER, "update", "resourcequotas", "default", "q"), False),
    (QUOTA_CONTROLLER, res(QUOTA_CONTROLLER, "delete", "pods", "default", "p"), False),
    (QUOTA_CONTROLLER, res(QUOTA_CONTROLLER, "create", "events", "default"), True),
    # the replication controller: its RCs' status and pods
    (RC_CONTROLLER, res(RC_CONTROLLER, "create", "pods", "default"), True),
    (RC_CONTROLLER, res(RC_CONTROLLER, "patch", "pods", "default", "p"), True),
    (RC_CONTROLLER, res(RC_CONTROLLER, "update", "replicationcontrollers", "default", "r", subresource="status"),
     True),
    (RC_CONTROLLER, res(RC_CONTROLLER, "create", "replicationcontrollers", "default"), False),
    # every authenticated user may ask who they are (kubectl auth whoami)
    (NOBODY, res(NOBODY, "create", "selfsubjectreviews", group="authentication.k8s.io"), True),
    (NOBODY, res(NOBODY, "create", "priorityclasses", group="scheduling.k8s.io"), False),
])
def test_policy_controllers_and_whoami(authorizer: Authorizer, who: UserInfo, attrs: Attributes,
                                       allowed: bool) -> None:
    assert authorizer.authorize(attrs)[0] is allowed


def test_view_reads_and_edit_writes_the_core_policy_objects_as_upstream() -> None:
    roles = bootstrap.cluster_roles()

    def grants(role: str, verb: str, resource: str) -> bool:
        return any("" in r.get("apiGroups", []) and resource in r.get("resources", []) and verb in r["verbs"]
                   for r in roles[role])

    for resource in ("resourcequotas", "resourcequotas/status", "limitranges", "replicationcontrollers",
                     "replicationcontrollers/scale", "replicationcontrollers/status"):
        assert grants("view", "list", resource) and not grants("view", "create", resource), resource
    for role in ("edit", "admin"):
        assert grants(role, "create", "replicationcontrollers") and grants(role, "patch",
                                                                          "replicationcontrollers/scale")
        # quotas and limit ranges are the cluster admin's to set, not a namespace editor's (upstream: read only)
        assert not grants(role, "create", "resourcequotas") and not grants(role, "update", "limitranges")


def test_edit_and_admin_may_get_and_create_the_streaming_subresources_view_may_not() -> None:
    """pods/attach, exec, portforward: create and get for edit (and admin, which aggregates it), as upstream's
    aggregate-to-edit; nothing for view."""
    roles = bootstrap.cluster_roles()

    def grants(role: str, verb: str, resource: str) -> bool:
        return any("" in r.get("apiGroups", []) and resource in r.get("resources", []) and verb in r["verbs"]
                   for r in roles[role])

    for resource in ("pods/attach", "pods/exec", "pods/portforward"):
        for role in ("edit", "admin"):
            assert grants(role, "create", resource) and grants(role, "get", resource), (role, resource)
        assert not grants("view", "create", resource) and not grants("view", "get", resource)
