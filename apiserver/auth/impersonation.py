"""Acting as someone else (upstream: staging/.../apiserver/pkg/endpoints/filters/impersonation.go):
the Impersonate-User, Impersonate-Group, Impersonate-Uid and Impersonate-Extra-<key> headers that
`kubectl --as=jane --as-group=devs --as-uid=... ` sends.

Each thing asked for is authorized for the *requester* first, as the verb `impersonate` on
  users (core group)                      Impersonate-User: jane
  serviceaccounts in NAMESPACE (core)     Impersonate-User: system:serviceaccount:NAMESPACE:NAME
  groups (core)                           Impersonate-Group: devs (one header per group)
  uids (authentication.k8s.io)            Impersonate-Uid: 1234
  userextras/KEY (authentication.k8s.io)  Impersonate-Extra-KEY: value (KEY percent-decoded)
and the first one not allowed is a 403 with upstream's message (`users "jane" is forbidden: User
"x" cannot impersonate resource "users" in API group "" at the cluster scope`). Groups, a uid or
extras without a user are a 400. The request then goes on as the impersonated user, who is also in
system:authenticated (unless the groups asked for say system:(un)authenticated; the anonymous
user gets system:unauthenticated instead); a service account without groups asked for gets its
fixed ones.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import unquote

from apiserver import errors
from apiserver.auth import serviceaccount
from apiserver.auth.authz import Attributes, Authorizer, forbidden
from machinery.authn.user import AUTHENTICATED, UNAUTHENTICATED, UserInfo

HEADER_PREFIX = b"impersonate-"
USER, GROUP, UID = b"impersonate-user", b"impersonate-group", b"impersonate-uid"
EXTRA_PREFIX = b"impersonate-extra-"
AUTHENTICATION_GROUP = "authentication.k8s.io"
ANONYMOUS_USER = "system:anonymous"


def _text(name: bytes, value: bytes) -> str:
    try:
        return value.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise errors.bad_request(f"{name.decode('latin-1')}: the value is not valid UTF-8") from None


def impersonate(requester: UserInfo, headers: Iterable[tuple[bytes, bytes]], authorizer: Authorizer) -> UserInfo:
    """The user the request acts as, once the requester may impersonate everything asked for
    (errors.ApiError: 400 for a malformed request, 403 when the requester may not)."""
    user = uid = ""
    groups: list[str] = []
    extra: dict[str, list[str]] = {}
    asked: list[str] = []  # what was asked for, for the 400 message (upstream prints the requests)
    for name, raw in headers:
        if name == USER:
            user = _text(name, raw)
            continue
        if name != GROUP and name != UID and not name.startswith(EXTRA_PREFIX):
            continue  # not one of upstream's headers: ignored, as upstream does
        value = _text(name, raw)
        if name == GROUP:
            groups.append(value)
            asked.append(f"group {value}")
        elif name == UID:
            uid = value
            asked.append(f"uid {value}")
        else:
            key = unquote(name[len(EXTRA_PREFIX):].decode("latin-1"))
            extra.setdefault(key, []).append(value)
            asked.append(f"extra {key}={value}")
    if not user:
        if asked:
            raise errors.bad_request(f"requested [{', '.join(asked)}] without impersonating a user")
        return requester  # empty headers: nothing asked (as upstream, which reads Header.Get)

    checks: list[Attributes] = []
    sa_namespace = sa_name = ""
    if user.startswith(serviceaccount.SERVICE_ACCOUNT_PREFIX):
        sa_namespace, _, sa_name = user[len(serviceaccount.SERVICE_ACCOUNT_PREFIX):].partition(":")
    if sa_namespace and sa_name and ":" not in sa_name:
        checks.append(Attributes(requester, "impersonate", True, "", "", "v1", "serviceaccounts", "",
                                 sa_namespace, sa_name))
    else:
        checks.append(Attributes(requester, "impersonate", True, "", "", "v1", "users", "", "", user))
        sa_namespace = ""
    checks += [Attributes(requester, "impersonate", True, "", "", "v1", "groups", "", "", g) for g in groups]
    checks += [Attributes(requester, "impersonate", True, "", AUTHENTICATION_GROUP, "v1", "userextras", key, "", v)
               for key, values in extra.items() for v in values]
    if uid:
        checks.append(Attributes(requester, "impersonate", True, "", AUTHENTICATION_GROUP, "v1", "uids", "", "", uid))
    for attrs in checks:
        allowed, reason = authorizer.authorize(attrs)
        if not allowed:
            raise forbidden(attrs, reason)
    if sa_namespace and not groups:  # a service account's groups are a fixed mapping, not asked for
        groups = list(serviceaccount.groups(sa_namespace))

    if user != ANONYMOUS_USER:
        if AUTHENTICATED not in groups and UNAUTHENTICATED not in groups:
            groups.append(AUTHENTICATED)
    elif UNAUTHENTICATED not in groups:
        groups.append(UNAUTHENTICATED)
    return UserInfo(user, tuple(groups), uid, {k: tuple(v) for k, v in extra.items()})
