"""Service-account tokens for projected volumes, cached and refreshed (upstream: pkg/kubelet/token/token_manager.go).

The kubelet asks the apiserver for a token bound to the pod (TokenRequest with a boundObjectRef to the
Pod, its audience and expirationSeconds) and keeps it per (account, namespace, audiences, expiration,
pod uid). A cached token is handed out again until it needs a refresh, as upstream decides it: once it
is older than 24 hours, or within 20 % of its life from its expiry (so at 80 % of its life), each less a
random jitter of up to 10 s. A refresh that fails keeps the old token while it is still valid (upstream
logs "Couldn't update token"); an expired one that cannot be refreshed is an error, and so is a first
request that fails (`failed to fetch token: ...`). The pod's tokens are dropped when the pod goes
(upstream DeleteServiceAccountToken).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

from machinery.api.core_v1 import ServiceAccount
from machinery.api.resources import resource_for_model
from machinery.client import ApiClient, ApiError, ApiUnavailable
from machinery.timeutil import parse_rfc3339

log = logging.getLogger(__name__)

MAX_TTL = 24 * 3600.0
MAX_JITTER = 10.0


class TokenError(Exception):
    """No usable token: the projected volume fails to mount with this message."""


@dataclass(frozen=True)
class TokenKey:
    namespace: str
    account: str
    audiences: tuple[str, ...]
    expiration_seconds: int | None
    pod_name: str
    pod_uid: str

    def __str__(self) -> str:  # upstream keyFunc: "name/namespace/audiences/expiration/boundObject"
        return (f'"{self.account}"/"{self.namespace}"/{list(self.audiences)}/{self.expiration_seconds}/'
                f"{{Pod {self.pod_name} {self.pod_uid}}}")


@dataclass(frozen=True)
class Token:
    token: str
    expires: float  # status.expirationTimestamp as a UNIX time
    expiration_seconds: int  # spec.expirationSeconds as the apiserver answered it (it may shorten it)


class TokenManager:
    def __init__(self, client: ApiClient, *, clock: Callable[[], float] = time.time,
                 jitter: Callable[[], float] = lambda: random.random() * MAX_JITTER) -> None:
        self.client = client
        self.clock = clock
        self.jitter = jitter
        self.cache: dict[TokenKey, Token] = {}

    def requires_refresh(self, token: Token) -> bool:
        """upstream requiresRefresh: older than 24 h, or within 20 % of its life (plus jitter) of expiring."""
        now = self.clock()
        issued = token.expires - token.expiration_seconds
        jitter = self.jitter()
        if now > issued + MAX_TTL - jitter:
            return True
        return now > token.expires - token.expiration_seconds * 20 // 100 - jitter

    def expired(self, token: Token) -> bool:
        return self.clock() > token.expires

    async def _request(self, key: TokenKey) -> Token:
        spec: dict[str, object] = {"boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": key.pod_name,
                                                      "uid": key.pod_uid}}
        if key.audiences:
            spec["audiences"] = list(key.audiences)
        if key.expiration_seconds is not None:
            spec["expirationSeconds"] = key.expiration_seconds
        path = resource_for_model(ServiceAccount).object_path(key.account, key.namespace, "token")
        answer = await self.client.request("POST", path, body={"apiVersion": "authentication.k8s.io/v1",
                                                               "kind": "TokenRequest", "spec": spec})
        status = (answer or {}).get("status") or {}
        expires = parse_rfc3339(status.get("expirationTimestamp"))
        if not status.get("token") or expires is None:
            raise TokenError(f"TokenRequest for {key} answered without a token: {answer!r:.200}")
        seconds = ((answer.get("spec") or {}).get("expirationSeconds") or key.expiration_seconds or 3600)
        return Token(status["token"], expires.timestamp(), int(seconds))

    async def get(self, key: TokenKey) -> str:
        """upstream GetServiceAccountToken."""
        cached = self.cache.get(key)
        if cached is not None and not self.requires_refresh(cached):
            return cached.token
        try:
            fresh = await self._request(key)
        except (ApiError, ApiUnavailable, TokenError) as e:
            message = e.message if isinstance(e, ApiError) else str(e)
            if cached is None:
                raise TokenError(f"failed to fetch token: {message}") from e
            if self.expired(cached):
                raise TokenError(f"token {key} expired and refresh failed: {message}") from e
            log.warning("Couldn't update token %s: %s", key, message)
            return cached.token
        self.cache[key] = fresh
        return fresh.token

    def next_refresh(self, pod_uid: str) -> float | None:
        """Seconds until the first of the pod's tokens is due for a refresh (None: the pod has none)."""
        due = [t.expires - t.expiration_seconds * 20 // 100 for k, t in self.cache.items() if k.pod_uid == pod_uid]
        return max(0.0, min(due) - self.clock()) if due else None

    def delete_pod(self, pod_uid: str) -> None:
        """upstream DeleteServiceAccountToken."""
        for key in [k for k in self.cache if k.pod_uid == pod_uid]:
            del self.cache[key]
