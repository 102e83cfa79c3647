"""Who is asking (upstream: staging/.../apiserver/pkg/authentication): X.509 client certificates
(verified by the TLS handshake against --client-ca-file; CN = user, O = groups), bearer tokens
from --token-auth-file (CSV: token,user,uid,"group1,group2") and service-account tokens (JWTs
checked against --service-account-key-file, then against the live objects: the service account
must exist with the token's uid, a bound pod with its uid and not deleted; upstream
pkg/serviceaccount/claims.go). Every authenticated user is also in system:authenticated.

A request with no credentials is anonymous only for the few public paths (health and version);
anywhere else it gets 401. A token that is malformed, unknown, badly signed or expired is a 401,
never an error of the server.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from apiserver.auth import serviceaccount
from machinery.authn.user import (
    AUTHENTICATED,
    MASTERS,
    UNAUTHENTICATED,
    UserInfo,
    user_from_peercert,
    with_authenticated,
)

PUBLIC_PATHS = frozenset({"/healthz", "/livez", "/readyz", "/version"})


ANONYMOUS = UserInfo("system:anonymous", (UNAUTHENTICATED,))
# The plain (insecure) port: upstream's insecure handler used exactly this identity.
UNSECURED = UserInfo("system:unsecured", (MASTERS, AUTHENTICATED))


def load_token_file(path: str | Path) -> dict[str, UserInfo]:
    """Upstream's static token file: `token,user,uid[,"group1,group2"]` per line."""
    tokens: dict[str, UserInfo] = {}
    with open(path, newline="") as f:
        for lineno, row in enumerate(csv.reader(f), 1):
            if not row or row[0].startswith("#"):
                continue
            if len(row) < 3 or not row[0] or not row[1]:
                raise ValueError(f"{path}:{lineno}: expected token,user,uid[,groups]")
            groups = tuple(g.strip() for g in row[3].split(",") if g.strip()) if len(row) > 3 else ()
            tokens[row[0].strip()] = UserInfo(row[1].strip(), with_authenticated(groups), row[2].strip())
    return tokens


# the live-object check of a verified service-account token: None if it holds, else why not
LiveValidator = Callable[[serviceaccount.ServiceAccountClaims, float], str | None]

POD_NAME_EXTRA = "authentication.kubernetes.io/pod-name"
POD_UID_EXTRA = "authentication.kubernetes.io/pod-uid"
CREDENTIAL_ID_EXTRA = "authentication.kubernetes.io/credential-id"


def service_account_user(claims: serviceaccount.ServiceAccountClaims) -> UserInfo:
    """upstream serviceaccount.ServiceAccountInfo.UserInfo: the account's name, groups and uid, and
    the bound pod and the token's id as extras."""
    extra: dict[str, tuple[str, ...]] = {}
    if claims.pod is not None:
        extra[POD_NAME_EXTRA] = (claims.pod.name,)
        extra[POD_UID_EXTRA] = (claims.pod.uid,)
    if claims.jti:
        extra[CREDENTIAL_ID_EXTRA] = (f"JTI={claims.jti}",)
    return UserInfo(serviceaccount.username(claims.namespace, claims.name),
                    with_authenticated(serviceaccount.groups(claims.namespace)), claims.uid, extra)


class Authenticator:
    """Token authentication with a small cache (a verified JWT costs an ECDSA verify); the cached
    claims of a service-account token are checked against the live objects on every request (the
    watch caches: a dictionary lookup), so a deleted account or pod ends its tokens at once."""

    CACHE_SIZE = 4096
    NEGATIVE_TTL = 10.0

    def __init__(self, tokens: Mapping[str, UserInfo] | None = None,
                 verifier: serviceaccount.TokenVerifier | None = None, validator: LiveValidator | None = None):
        self.tokens = dict(tokens or {})
        self.verifier = verifier
        self.validator = validator
        self._cache: dict[bytes, tuple[serviceaccount.ServiceAccountClaims | None, UserInfo | None, float]] = {}
        self._subjects: dict[Any, UserInfo | None] = {}  # certificate subject -> user (a connection reuses one)

    def from_token(self, token: str) -> UserInfo | None:
        static = self.tokens.get(token)
        if static is not None:
            return static
        if self.verifier is None or token.count(".") != 2:
            return None
        key = hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()
        now = time.time()
        hit = self._cache.get(key)
        if hit is not None and now < hit[2]:
            claims, user = hit[0], hit[1]
        else:
            claims = user = None
            try:
                claims = self.verifier.verify(token, now)
            except (serviceaccount.TokenError, ValueError, UnicodeError):
                until = now + self.NEGATIVE_TTL
            else:
                user = service_account_user(claims)
                until = min(claims.expires, now + 300) if claims.expires else now + 300
            if len(self._cache) >= self.CACHE_SIZE:
                self._cache.clear()
            self._cache[key] = (claims, user, until)
        if claims is None or user is None:
            return None
        if self.validator is not None and self.validator(claims, now) is not None:
            return None
        return user

    def authenticate(self, peercert: Mapping[str, Any] | None, authorization: bytes | None) -> UserInfo | None:
        """The request's user; None when credentials were given but are not valid, or none were given.

        The client certificate (already verified by the handshake) first, then a bearer token, as
        upstream's union authenticator orders them."""
        if peercert:
            subject = peercert.get("subject")
            try:
                user = self._subjects[subject]
            except (KeyError, TypeError):
                user = user_from_peercert(peercert)
                if len(self._subjects) >= self.CACHE_SIZE:
                    self._subjects.clear()
                with contextlib.suppress(TypeError):
                    self._subjects[subject] = user
            if user is not None:
                return user
        if authorization:
            scheme, _, token = authorization.partition(b" ")
            if scheme.lower() != b"bearer":
                return None
            try:
                text = token.strip().decode("ascii")
            except UnicodeDecodeError:
                return None
            return self.from_token(text) if text else None
        return None
