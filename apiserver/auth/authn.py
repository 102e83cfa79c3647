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
import json
import time
from collections.abc import Awaitable, Callable, Mapping
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


# the live-object check of a verified service-account token: None if it holds, else why not; the
# validator reads the watch caches, the lookup also storage for what the caches have not seen (yet)
LiveValidator = Callable[[serviceaccount.ServiceAccountClaims, float], str | None]
LiveLookup = Callable[[serviceaccount.ServiceAccountClaims, float], Awaitable[str | None]]

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
    watch caches: a dictionary lookup), so a deleted account or pod ends its tokens at once.

    A token the caches cannot vouch for is asked about in storage (`authenticate_live`), as upstream's
    token getter falls back from its listers to a live GET: right after a start, or for an account
    created a moment ago, a valid token is not refused (a client such as kopf drops credentials that
    were refused once)."""

    CACHE_SIZE = 4096
    NEGATIVE_TTL = 10.0

    def __init__(self, tokens: Mapping[str, UserInfo] | None = None,
                 verifier: serviceaccount.TokenVerifier | None = None, validator: LiveValidator | None = None,
                 lookup: LiveLookup | None = None):
        self.tokens = dict(tokens or {})
        self.verifier = verifier
        self.validator = validator
        self.lookup = lookup
        self._cache: dict[bytes, tuple[serviceaccount.ServiceAccountClaims | None, UserInfo | None, float]] = {}
        self._subjects: dict[Any, UserInfo | None] = {}  # certificate subject -> user (a connection reuses one)

    def from_token(self, token: str) -> UserInfo | None:
        static = self.tokens.get(token)
        if static is not None:
            return static
        verified = self._verified(token)
        if verified is None:
            return None
        claims, user = verified
        if self.validator is not None and self.validator(claims, time.time()) is not None:
            return None
        return user

    def _verified(self, token: str) -> tuple[serviceaccount.ServiceAccountClaims, UserInfo] | None:
        """A service-account token's claims and user if its signature, issuer, audience and time hold."""
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
        return claims, user

    async def authenticate_live(self, authorization: bytes | None) -> UserInfo | None:
        """After authenticate() refused a bearer token: a verified service-account token checked
        against storage where the watch caches have not seen its account or pod. Only a token whose
        signature holds gets here, so a stranger cannot make the apiserver read etcd."""
        token = _bearer(authorization)
        if token is None or self.lookup is None or token in self.tokens:
            return None
        verified = self._verified(token)
        if verified is None:
            return None
        claims, user = verified
        return user if await self.lookup(claims, time.time()) is None else None

    async def review(self, token: str, audiences: tuple[str, ...]) -> tuple[UserInfo | None, list[str], str]:
        """A TokenReview's answer (upstream pkg/registry/authentication/tokenreview): the user, the audiences
        the token is good for among those asked (the apiserver's own when none are), and why not.

        Static tokens are audience-agnostic: good only when an asked audience is one of the apiserver's own
        (upstream's WrapAudienceAgnosticToken); a service-account token must name one of them."""
        implicit = self.verifier.audiences if self.verifier is not None else ()
        wanted = audiences or implicit
        static = self.tokens.get(token)
        if static is not None:
            common = [a for a in wanted if a in implicit] if audiences else list(implicit)
            return (static, common, "") if common or not implicit else (None, [], "")
        if self.verifier is None or token.count(".") != 2:
            return None, [], "invalid bearer token"
        now = time.time()
        try:
            claims = self.verifier.verify(token, now, tuple(wanted))
        except serviceaccount.TokenError as e:
            if "audience" in str(e):
                granted = serviceaccount.token_audiences(token)
                return None, [], f"token audiences {_go_quote(granted)} is invalid for the target audiences " \
                                 f"{_go_quote(list(wanted))}"
            return None, [], f"invalid bearer token, {e}"
        except (ValueError, UnicodeError) as e:
            return None, [], f"invalid bearer token, {e}"
        why = None
        if self.validator is not None:
            why = self.validator(claims, now)
        if why is not None and self.lookup is not None:
            why = await self.lookup(claims, now)
        if why is not None:
            return None, [], f"invalid bearer token, {why}"
        granted = serviceaccount.token_audiences(token)
        return service_account_user(claims), [a for a in granted if a in wanted], ""

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
        token = _bearer(authorization)
        return self.from_token(token) if token else None


def _bearer(authorization: bytes | None) -> str | None:
    """The token of an `Authorization: Bearer TOKEN` header, else None."""
    if not authorization:
        return None
    scheme, _, token = authorization.partition(b" ")
    if scheme.lower() != b"bearer":
        return None
    try:
        text = token.strip().decode("ascii")
    except UnicodeDecodeError:
        return None
    return text or None


def _go_quote(values: list[str]) -> str:
    """A list of strings as Go's %q prints a []string: ["a" "b"]."""
    return "[" + " ".join(json.dumps(v) for v in values) + "]"
