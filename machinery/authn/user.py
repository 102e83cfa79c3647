"""Who a request comes from (upstream k8s.io/apiserver/pkg/authentication/user/user.go: user.Info and
the well-known groups) and the identity in a verified X.509 client certificate (upstream
authentication/request/x509/x509.go CommonNameUserConversion: CN = user, O = groups). The apiserver
and the kubelet's server both authenticate client certificates this way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

AUTHENTICATED = "system:authenticated"
UNAUTHENTICATED = "system:unauthenticated"
MASTERS = "system:masters"
NODES = "system:nodes"
NODE_PREFIX = "system:node:"


@dataclass(frozen=True, slots=True)
class UserInfo:
    """user.DefaultInfo: a name, its groups, a uid and extra attributes (service-account pod names ...)."""

    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"username": self.name}
        if self.uid:
            out["uid"] = self.uid
        if self.groups:
            out["groups"] = list(self.groups)
        if self.extra:
            out["extra"] = {k: list(v) for k, v in self.extra.items()}
        return out

    @property
    def is_master(self) -> bool:
        return MASTERS in self.groups

    @property
    def node_name(self) -> str | None:
        """NAME for system:node:NAME in group system:nodes (a kubelet), else None."""
        if self.name.startswith(NODE_PREFIX) and NODES in self.groups:
            return self.name[len(NODE_PREFIX):] or None
        return None


def with_authenticated(groups: tuple[str, ...]) -> tuple[str, ...]:
    """Every authenticated user is also in system:authenticated (upstream's AuthenticatedGroupAdder)."""
    return groups if AUTHENTICATED in groups else (*groups, AUTHENTICATED)


def user_from_peercert(cert: Mapping[str, Any]) -> UserInfo | None:
    """The identity in a verified client certificate (ssl.SSLSocket.getpeercert() form)."""
    cn = ""
    orgs: list[str] = []
    for rdn in cert.get("subject") or ():
        for key, value in rdn:
            if key == "commonName":
                cn = value
            elif key == "organizationName":
                orgs.append(value)
    if not cn:
        return None
    return UserInfo(cn, with_authenticated(tuple(orgs)))
