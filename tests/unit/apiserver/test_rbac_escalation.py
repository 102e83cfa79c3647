"""The escalation checks without processes (upstream: pkg/registry/rbac/validation/
policy_comparator_test.go, rule_test.go): covers, breakdown, compaction and upstream's message,
and the rules a user holds as the RBAC authorizer resolves them."""

from __future__ import annotations

from apiserver.auth.authz import AlwaysAllow, Authorizer, NodeAuthorizer, RBACAuthorizer, StaticRbac
from apiserver.registry.rbac_escalation import (
    FULL_AUTHORITY,
    breakdown_rule,
    compact_rules,
    compact_string,
    covers,
    escalation_message,
    only_gc_fields_changed,
)
from machinery.authn.user import UserInfo
from machinery.types import Obj

RBAC = "rbac.authorization.k8s.io"


def rule(verbs: list[str], groups: list[str], resources: list[str], names: list[str] | None = None) -> Obj:
    out: Obj = {"verbs": verbs, "apiGroups": groups, "resources": resources}
    if names:
        out["resourceNames"] = names
    return out


def urls(verbs: list[str], paths: list[str]) -> Obj:
    return {"verbs": verbs, "nonResourceURLs": paths}


class TestCovers:
    def test_star_covers_everything_resource_like(self) -> None:
        assert covers([rule(["*"], ["*"], ["*"])], [rule(["get", "delete"], ["", "apps"], ["pods", "deployments"],
                                                         ["x"])]) == (True, [])

    def test_star_resources_do_not_cover_urls(self) -> None:
        ok, missing = covers([rule(["*"], ["*"], ["*"])], FULL_AUTHORITY)
        assert not ok and missing == [urls(["*"], ["*"])]
        assert covers(FULL_AUTHORITY, FULL_AUTHORITY)[0]

    def test_exact_and_partial(self) -> None:
        owner = [rule(["get", "list"], [""], ["pods"])]
        assert covers(owner, [rule(["get"], [""], ["pods"])])[0]
        ok, missing = covers(owner, [rule(["get", "delete"], ["", "apps"], ["pods"])])
        assert not ok
        assert missing == [rule(["delete"], [""], ["pods"]), rule(["get"], ["apps"], ["pods"]),
                           rule(["delete"], ["apps"], ["pods"])]

    def test_verb_star_is_not_held_by_listing_verbs(self) -> None:
        assert not covers([rule(["get", "list"], [""], ["pods"])], [rule(["*"], [""], ["pods"])])[0]

    def test_subresources(self) -> None:
        assert covers([rule(["get"], [""], ["*/status"])], [rule(["get"], [""], ["pods/status"])])[0]
        assert not covers([rule(["get"], [""], ["pods"])], [rule(["get"], [""], ["pods/status"])])[0]
        assert not covers([rule(["get"], [""], ["*/status"])], [rule(["get"], [""], ["pods"])])[0]

    def test_resource_names(self) -> None:
        named = [rule(["get"], [""], ["pods"], ["a", "b"])]
        assert covers(named, [rule(["get"], [""], ["pods"], ["a"])])[0]
        assert not covers(named, [rule(["get"], [""], ["pods"], ["c"])])[0]
        assert not covers(named, [rule(["get"], [""], ["pods"])])[0]  # all names is more than some
        assert covers([rule(["get"], [""], ["pods"])], [rule(["get"], [""], ["pods"], ["c"])])[0]

    def test_non_resource_urls(self) -> None:
        owner = [urls(["get"], ["/api/*", "/healthz"])]
        assert covers(owner, [urls(["get"], ["/api/v1", "/healthz"])])[0]
        assert not covers(owner, [urls(["get"], ["/apis"])])[0]
        assert not covers(owner, [urls(["post"], ["/healthz"])])[0]

    def test_nothing_to_grant_is_covered(self) -> None:
        assert covers([], []) == (True, [])

    def test_breakdown(self) -> None:
        assert breakdown_rule(rule(["get"], ["a"], ["x", "y"], ["n"])) == [
            rule(["get"], ["a"], ["x"], ["n"]), rule(["get"], ["a"], ["y"], ["n"])]
        assert breakdown_rule(urls(["get", "post"], ["/p"])) == [urls(["get"], ["/p"]), urls(["post"], ["/p"])]


class TestMessage:
    def test_compact_merges_verbs_of_one_resource(self) -> None:
        missing = [rule(["get"], [""], ["pods"]), rule(["delete"], [""], ["pods"]), urls(["get"], ["/x"])]
        assert compact_rules(missing) == [urls(["get"], ["/x"]), rule(["get", "delete"], [""], ["pods"])]

    def test_compact_string_is_gos(self) -> None:
        assert compact_string(rule(["*"], ["*"], ["*"])) == '{APIGroups:["*"], Resources:["*"], Verbs:["*"]}'
        assert compact_string(rule(["get"], [""], ["pods"], ["a"])) == \
            '{APIGroups:[""], Resources:["pods"], ResourceNames:["a"], Verbs:["get"]}'
        assert compact_string(urls(["get"], ["/a", "/b"])) == '{NonResourceURLs:["/a" "/b"], Verbs:["get"]}'

    def test_upstreams_message(self) -> None:
        user = UserInfo("mallory", ("dev", "system:authenticated"))
        assert escalation_message(user, [rule(["*"], [RBAC], ["roles", "rolebindings"])],
                                  [rule(["*"], ["*"], ["*"])]) == (
            'user "mallory" (groups=["dev" "system:authenticated"]) is attempting to grant RBAC permissions not '
            'currently held:\n{APIGroups:["*"], Resources:["*"], Verbs:["*"]}')
        assert escalation_message(user, [rule(["*"], ["*"], ["*"])], [rule(["get"], [""], ["pods"])]) is None

    def test_missing_rules_are_sorted_and_unique(self) -> None:
        message = escalation_message(UserInfo("u"), [], [rule(["list", "get"], [""], ["secrets", "pods"])])
        assert message is not None
        assert message.splitlines()[1:] == ['{APIGroups:[""], Resources:["pods"], Verbs:["list" "get"]}',
                                            '{APIGroups:[""], Resources:["secrets"], Verbs:["list" "get"]}']


def test_only_gc_fields() -> None:
    old = {"metadata": {"name": "r", "resourceVersion": "5"}, "rules": []}
    new = {"metadata": {"name": "r", "resourceVersion": "6", "finalizers": ["x"],
                        "ownerReferences": [{"uid": "1"}]}, "rules": []}
    assert only_gc_fields_changed(new, old)
    assert not only_gc_fields_changed({**new, "rules": [rule(["*"], ["*"], ["*"])]}, old)
    assert not only_gc_fields_changed(new, None)


# -- rule resolution ----------------------------------------------------------------------------------


def _policy() -> StaticRbac:
    def meta(name: str, namespace: str | None = None) -> Obj:
        return {"name": name, **({"namespace": namespace} if namespace else {})}

    cluster_roles = [{"metadata": meta("reader"), "rules": [rule(["get"], [""], ["pods"]), urls(["get"], ["/x"])]}]
    roles = [{"metadata": meta("writer", "team"), "rules": [rule(["create"], [""], ["pods"])]}]
    crbs = [{"metadata": meta("r"), "roleRef": {"kind": "ClusterRole", "name": "reader"},
             "subjects": [{"kind": "Group", "name": "readers"}]}]
    rbs = [{"metadata": meta("w", "team"), "roleRef": {"kind": "Role", "name": "writer"},
            "subjects": [{"kind": "User", "name": "alice"}]}]
    return StaticRbac(cluster_roles, roles, crbs, rbs)


def test_rules_for_a_user_in_a_namespace() -> None:
    rbac = RBACAuthorizer(_policy())
    alice = UserInfo("alice", ("readers",))
    assert rbac.rules_for(alice, "") == [rule(["get"], [""], ["pods"]), urls(["get"], ["/x"])]
    assert rbac.rules_for(alice, "team") == [rule(["get"], [""], ["pods"]), urls(["get"], ["/x"]),
                                              rule(["create"], [""], ["pods"])]
    assert rbac.rules_for(alice, "other") == rbac.rules_for(alice, "")


def test_union_rules_for() -> None:
    rbac = RBACAuthorizer(_policy())
    union = Authorizer([NodeAuthorizer(lambda ns, name: None), rbac])
    resource, non_resource, incomplete, errs = union.rules_for(UserInfo("alice", ("readers",)), "team")
    assert resource == [rule(["get"], [""], ["pods"]), rule(["create"], [""], ["pods"])]
    assert non_resource == [urls(["get"], ["/x"])]
    assert (incomplete, errs) == (False, [])
    node = UserInfo("system:node:n1", ("system:nodes",))
    _, _, incomplete, errs = union.rules_for(node, "team")
    assert incomplete and errs == ["node authorizer does not support user rule resolution"]
    assert Authorizer([AlwaysAllow()]).rules_for(UserInfo("x"), "a")[0] == [rule(["*"], ["*"], ["*"])]
