"""Impersonation without processes: what each Impersonate-* header is authorized as, upstream's 403
and 400 answers, the groups the impersonated user ends up in."""

from __future__ import annotations

from typing import Any

import pytest

from apiserver import errors
from apiserver.auth.authz import Authorizer, RBACAuthorizer, StaticRbac
from apiserver.auth.impersonation import impersonate
from machinery.authn.user import UserInfo

AUTH = "system:authenticated"
RBAC = "rbac.authorization.k8s.io"


def _binding(name: str, role: str, user: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "User", "apiGroup": RBAC, "name": user}]}


ROLES = [
    {"metadata": {"name": "impersonate-jane"},
     "rules": [{"verbs": ["impersonate"], "apiGroups": [""], "resources": ["users"], "resourceNames": ["jane"]},
               {"verbs": ["impersonate"], "apiGroups": [""], "resources": ["groups"], "resourceNames": ["devs"]},
               {"verbs": ["impersonate"], "apiGroups": [""], "resources": ["serviceaccounts"]},
               {"verbs": ["impersonate"], "apiGroups": ["authentication.k8s.io"],
                "resources": ["userextras/scopes", "uids"]}]},
]
AUTHORIZER = Authorizer([RBACAuthorizer(StaticRbac(ROLES, [], [_binding("ops", "impersonate-jane", "ops")], []))])
OPS = UserInfo("ops", (AUTH,))
STRANGER = UserInfo("x", (AUTH,))


def h(*pairs: tuple[str, str]) -> list[tuple[bytes, bytes]]:
    return [(k.lower().encode(), v.encode()) for k, v in pairs]


def test_user_groups_uid_and_extras() -> None:
    acting = impersonate(OPS, h(("Impersonate-User", "jane"), ("Impersonate-Group", "devs"),
                                ("Impersonate-Uid", "u-1"), ("Impersonate-Extra-Scopes", "view"),
                                ("Impersonate-Extra-Scopes", "edit")), AUTHORIZER)
    assert acting == UserInfo("jane", ("devs", AUTH), "u-1", {"scopes": ("view", "edit")})
    assert impersonate(OPS, h(("Impersonate-User", "jane")), AUTHORIZER).groups == (AUTH,)
    # system:unauthenticated asked for: no system:authenticated added
    masters = UserInfo("root", ("system:masters",))
    assert impersonate(masters, h(("Impersonate-User", "jane"), ("Impersonate-Group", "system:unauthenticated")),
                       AUTHORIZER).groups == ("system:unauthenticated",)
    assert impersonate(masters, h(("Impersonate-User", "system:anonymous")), AUTHORIZER).groups == (
        "system:unauthenticated",)


def test_percent_encoded_extra_key() -> None:
    masters = UserInfo("root", ("system:masters",))
    acting = impersonate(masters, h(("Impersonate-User", "jane"), ("Impersonate-Extra-Example.com%2fteam", "a")),
                         AUTHORIZER)
    assert dict(acting.extra) == {"example.com/team": ("a",)}


def test_service_account_gets_its_groups_and_is_checked_as_a_serviceaccount() -> None:
    acting = impersonate(OPS, h(("Impersonate-User", "system:serviceaccount:kube-system:builder")), AUTHORIZER)
    assert acting.groups == ("system:serviceaccounts", "system:serviceaccounts:kube-system", AUTH)
    with pytest.raises(errors.ApiError) as err:
        impersonate(STRANGER, h(("Impersonate-User", "system:serviceaccount:kube-system:builder")), AUTHORIZER)
    assert err.value.message == ('serviceaccounts "builder" is forbidden: User "x" cannot impersonate resource '
                                 '"serviceaccounts" in API group "" in the namespace "kube-system"')


@pytest.mark.parametrize(("headers", "message"), [
    ((("Impersonate-User", "jane"),),
     'users "jane" is forbidden: User "x" cannot impersonate resource "users" in API group "" at the cluster scope'),
])
def test_forbidden_for_a_stranger(headers: tuple[tuple[str, str], ...], message: str) -> None:
    with pytest.raises(errors.ApiError) as err:
        impersonate(STRANGER, h(*headers), AUTHORIZER)
    assert (err.value.code, err.value.reason, err.value.message) == (403, "Forbidden", message)


@pytest.mark.parametrize(("headers", "message"), [
    ((("Impersonate-User", "bob"),),
     'users "bob" is forbidden: User "ops" cannot impersonate resource "users" in API group "" at the cluster scope'),
    ((("Impersonate-User", "jane"), ("Impersonate-Group", "system:masters")),
     'groups "system:masters" is forbidden: User "ops" cannot impersonate resource "groups" in API group "" '
     "at the cluster scope"),
    ((("Impersonate-User", "jane"), ("Impersonate-Extra-Other", "v")),
     'userextras.authentication.k8s.io "v" is forbidden: User "ops" cannot impersonate resource "userextras/other" '
     'in API group "authentication.k8s.io" at the cluster scope'),
])
def test_each_thing_asked_for_is_authorized(headers: tuple[tuple[str, str], ...], message: str) -> None:
    with pytest.raises(errors.ApiError) as err:
        impersonate(OPS, h(*headers), AUTHORIZER)
    assert (err.value.code, err.value.message) == (403, message)


@pytest.mark.parametrize("headers", [
    (("Impersonate-Group", "devs"),),
    (("Impersonate-Uid", "u-1"),),
    (("Impersonate-Extra-Scopes", "view"),),
    (("Impersonate-User", ""), ("Impersonate-Group", "devs")),
])
def test_anything_without_a_user_is_a_bad_request(headers: tuple[tuple[str, str], ...]) -> None:
    with pytest.raises(errors.ApiError) as err:
        impersonate(UserInfo("root", ("system:masters",)), h(*headers), AUTHORIZER)
    assert err.value.code == 400 and "without impersonating a user" in err.value.message


def test_bad_bytes_are_a_bad_request_and_other_headers_are_ignored() -> None:
    masters = UserInfo("root", ("system:masters",))
    with pytest.raises(errors.ApiError) as err:
        impersonate(masters, [(b"impersonate-user", b"\xff\xfe")], AUTHORIZER)
    assert err.value.code == 400
    assert impersonate(masters, [(b"impersonate-foo", b"x")], AUTHORIZER) is masters
    assert impersonate(masters, [(b"impersonate-user", b"jane"), (b"impersonate-foo", b"x")], AUTHORIZER).name == "jane"


def test_no_user_asked_is_no_impersonation() -> None:
    assert impersonate(OPS, h(("Impersonate-User", "")), AUTHORIZER) is OPS


def test_the_audit_table_names_whom_a_request_impersonated() -> None:
    from apiserver.audit import row

    event = {"kind": "Event", "verb": "list", "requestURI": "/api/v1/pods", "objectRef": {"resource": "pods"},
             "user": {"username": "ops"}, "impersonatedUser": {"username": "jane"}, "responseStatus": {"code": 200}}
    assert row(event)[6] == "ops (as jane)"
    del event["impersonatedUser"]
    assert row(event)[6] == "ops"
