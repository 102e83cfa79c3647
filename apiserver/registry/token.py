"""The serviceaccounts/{name}/token subresource and the live check of the tokens it issues.

- create_token: POST serviceaccounts/{name}/token (its HTTP side: apiserver/endpoints/subresources.py),
  a TokenRequest (authentication.k8s.io/v1) as upstream's TokenREST
  (pkg/registry/core/serviceaccount/storage/token.go): audiences default to --api-audiences,
  expirationSeconds to 3600 (at least 600, at most 2^32, shortened to
  --service-account-max-token-expiration with a warning), optionally bound to a Pod of the namespace
  running as that account; answered 201 with status.token (a JWT signed with
  --service-account-signing-key-file) and expirationTimestamp. A pod-bound token asked for 3607 s for the
  apiserver's audiences (the kube-api-access volume's) is valid a year, its `kubernetes.io.warnafter` at
  3607 s, unless --service-account-extend-token-expiration=false (upstream's default is true too).
- LiveTokenValidator: upstream's pkg/serviceaccount/claims.go validator: the token's service account
  must exist with the token's uid and not have been deleted more than a minute ago, and so must a
  bound pod. It reads the watch caches (a dictionary lookup per request, no etcd read).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import orjson
from pydantic import ValidationError

from apiserver import errors
from apiserver.auth import serviceaccount as tokens
from apiserver.registry.generic import Store, WriteOptions, loc_to_path
from apiserver.validation import FieldError, invalid
from machinery.api.authentication_v1 import TokenRequest
from machinery.timeutil import format_rfc3339, parse_rfc3339
from machinery.types import Obj

DEFAULT_EXPIRATION_SECONDS = 3600  # upstream v1 defaulting of TokenRequestSpec.expirationSeconds
MIN_EXPIRATION_SECONDS = 600  # "may not specify a duration less than 10 minutes"
MAX_EXPIRATION_SECONDS = 1 << 32
WARN_ONLY_BOUND_TOKEN_EXPIRATION_SECONDS = 3607  # upstream serviceaccount.WarnOnlyBoundTokenExpirationSeconds
EXPIRATION_EXTENSION_SECONDS = 24 * 365 * 60 * 60  # upstream serviceaccount.ExpirationExtensionSeconds
CACHE_WAIT = 2.0  # how long a TokenRequest waits for the watch cache to hold what it read


@dataclass(frozen=True)
class TokenIssuer:
    """What the apiserver signs TokenRequests with (--service-account-signing-key-file, -issuer,
    --api-audiences, --service-account-max-token-expiration)."""

    key: tokens.SigningKey
    issuer: str
    audiences: tuple[str, ...]
    max_expiration_seconds: int = 0  # 0: no limit beyond validation's
    extend_expiration: bool = True  # --service-account-extend-token-expiration


def _deletion_time(value: Any) -> float | None:
    t = parse_rfc3339(value)
    return None if t is None else t.timestamp()


_TOKEN_REQUEST = "TokenRequest.authentication.k8s.io"


def _token_invalid(name: str, errs: list[FieldError]) -> errors.ApiError:
    summary = errs[0].full() if len(errs) == 1 else "[" + ", ".join(e.full() for e in errs) + "]"
    return errors.ApiError(422, "Invalid", f'{_TOKEN_REQUEST} "{name}" is invalid: {summary}',
                           {"name": name, "group": "authentication.k8s.io", "kind": "TokenRequest",
                            "causes": [{"reason": e.reason, "message": e.message(), "field": e.field} for e in errs]})


async def _cached_by(store: Store, obj: Obj) -> None:
    """Wait (briefly) until the watch cache holds `obj`'s revision: the token we hand out is then
    accepted at once by this apiserver, whose authenticator reads the caches."""
    rv = int(obj["metadata"]["resourceVersion"])
    deadline = time.monotonic() + CACHE_WAIT
    while store.cacher.rv < rv and time.monotonic() < deadline:
        await asyncio.sleep(0.005)


async def create_token(accounts: Store, pods: Store, issuer: TokenIssuer, namespace: str | None, name: str,
                       body: Obj, opts: WriteOptions) -> Obj:
    """A TokenRequest for the service account `name`, validated, answered: the request with its
    status (token, expirationTimestamp). A shortened expiration is reported in `opts.warnings`."""
    try:
        req = TokenRequest.from_dict(body).to_dict()
    except ValidationError as e:
        p = e.errors()[0]
        raise _token_invalid(name, [invalid(loc_to_path(p["loc"]), p.get("input"), p["msg"])]) from e
    meta, spec = req.setdefault("metadata", {}), req.setdefault("spec", {})
    errs: list[FieldError] = []
    if meta.get("name") and meta["name"] != name:
        errs.append(invalid("metadata.name", meta["name"], "must match the service account name if specified"))
    if meta.get("namespace") and meta["namespace"] != namespace:
        errs.append(invalid("metadata.namespace", meta["namespace"],
                            "must match the service account namespace if specified"))
    expiration = spec.setdefault("expirationSeconds", DEFAULT_EXPIRATION_SECONDS)
    if expiration < MIN_EXPIRATION_SECONDS:
        errs.append(invalid("spec.expirationSeconds", expiration,
                            "may not specify a duration less than 10 minutes"))
    if expiration > MAX_EXPIRATION_SECONDS:
        errs.append(invalid("spec.expirationSeconds", expiration,
                            "may not specify a duration larger than 2^32 seconds"))
    if errs:
        raise _token_invalid(name, errs)
    account = await accounts.get(namespace, name)
    if issuer.max_expiration_seconds and expiration > issuer.max_expiration_seconds:
        opts.warnings.append(f"requested expiration of {expiration} seconds shortened to "
                             f"{issuer.max_expiration_seconds} seconds")
        expiration = spec["expirationSeconds"] = issuer.max_expiration_seconds
    bound: tokens.BoundObject | None = None
    ref = spec.get("boundObjectRef")
    if ref is not None:
        api_version, kind = ref.get("apiVersion") or "", ref.get("kind") or ""
        if api_version != "v1" or kind != "Pod":  # Secrets (and Nodes) are not served yet
            group, _, version = api_version.rpartition("/")
            raise errors.bad_request(f"cannot bind token to object of type {group}/{version}, Kind={kind}")
        pod = await pods.get(namespace, ref.get("name") or "")
        pod_uid = pod["metadata"]["uid"]
        if ref.get("uid") and ref["uid"] != pod_uid:
            raise errors.ApiError(409, "Conflict", f'Operation cannot be fulfilled on Pod "{ref["name"]}": the UID '
                                  f'in the bound object reference ({ref["uid"]}) does not match the UID in record '
                                  f"({pod_uid}). The object might have been deleted and then recreated",
                                  {"name": ref["name"], "kind": "Pod"})
        running_as = (pod.get("spec") or {}).get("serviceAccountName") or "default"
        if running_as != name:
            raise errors.bad_request(f'cannot bind token for serviceaccount "{name}" to pod running with '
                                     f'different serviceaccount name.')
        bound = tokens.BoundObject("Pod", pod["metadata"]["name"], pod_uid)
        await _cached_by(pods, pod)
    audiences = tuple(spec.get("audiences") or issuer.audiences)
    spec["audiences"] = list(audiences)
    now = time.time()
    # upstream's safe transition to bound tokens: a pod-bound token asked for 3607 s (the kube-api-access
    # volume's) for the apiserver's own audiences lives a year, warned of after the 3607 s
    lifetime, warn_after = expiration, None
    if issuer.extend_expiration and bound is not None and expiration == WARN_ONLY_BOUND_TOKEN_EXPIRATION_SECONDS \
            and set(audiences) <= set(issuer.audiences):
        lifetime, warn_after = EXPIRATION_EXTENSION_SECONDS, expiration
    token = tokens.sign_token(issuer.key, namespace or "", name, uid=account["metadata"]["uid"],
                              issuer=issuer.issuer, audiences=audiences, expiration_seconds=lifetime,
                              now=now, bound=bound, warn_after=warn_after)
    await _cached_by(accounts, account)
    meta.update(name=name, namespace=namespace, creationTimestamp=None)
    req["status"] = {"token": token, "expirationTimestamp": format_rfc3339(int(now) + expiration)}
    return req


class LiveTokenValidator:
    """Is a verified token's service account (and bound pod) still the one it was issued for?

    uid and deletionTimestamp of the cached objects, decoded once per resourceVersion."""

    MEMO_SIZE = 16384

    def __init__(self, accounts: Store, pods: Store):
        self.accounts = accounts
        self.pods = pods
        self._memo: dict[str, tuple[int, str, float | None]] = {}

    def _live(self, store: Store, namespace: str, name: str) -> tuple[str, float | None] | None:
        cached = store.cached(namespace, name)
        if cached is None:
            return None
        hit = self._memo.get(cached.key)
        if hit is None or hit[0] != cached.rv:
            meta = orjson.loads(cached.raw).get("metadata") or {}
            hit = (cached.rv, meta.get("uid") or "", _deletion_time(meta.get("deletionTimestamp")))
            if len(self._memo) >= self.MEMO_SIZE:
                self._memo.clear()
            self._memo[cached.key] = hit
        return hit[1], hit[2]

    async def _stored(self, store: Store, namespace: str, name: str) -> tuple[str, float | None] | None:
        """The watch cache's answer, else storage's (upstream's getter: lister first, then a live GET)."""
        live = self._live(store, namespace, name)
        if live is not None:
            return live
        try:
            obj = await store.get(namespace, name)
        except errors.ApiError as e:
            if e.code == 404:
                return None
            raise
        meta = obj.get("metadata") or {}
        return meta.get("uid") or "", _deletion_time(meta.get("deletionTimestamp"))

    def __call__(self, claims: tokens.ServiceAccountClaims, now: float) -> str | None:
        """From the watch caches only (every request)."""
        account = self._live(self.accounts, claims.namespace, claims.name)
        pod = self._live(self.pods, claims.namespace, claims.pod.name) if claims.pod is not None else None
        return _judge(claims, now, account, pod)

    async def lookup(self, claims: tokens.ServiceAccountClaims, now: float) -> str | None:
        """The same check where the watch caches have not seen the account or the pod: from storage."""
        account = await self._stored(self.accounts, claims.namespace, claims.name)
        pod = await self._stored(self.pods, claims.namespace, claims.pod.name) if claims.pod is not None else None
        return _judge(claims, now, account, pod)


def _judge(claims: tokens.ServiceAccountClaims, now: float, account: tuple[str, float | None] | None,
           pod: tuple[str, float | None] | None) -> str | None:
    """Upstream's validator on the live (uid, deletion time) of the account and of the bound pod."""
    deleted_before = now - tokens.LEEWAY  # things deleted before now-leeway are gone
    if account is None:
        return f'serviceaccounts "{claims.name}" not found'
    uid, deleting = account
    if deleting is not None and deleting < deleted_before:
        return f"service account {claims.namespace}/{claims.name} has been deleted"
    if uid != claims.uid:
        return f"service account UID ({uid}) does not match claim ({claims.uid})"
    if claims.secret is not None:  # no Secrets are served: a secret-bound token cannot be valid
        return "service account token has been invalidated"
    if claims.pod is not None:
        if pod is None or (pod[1] is not None and pod[1] < deleted_before):
            return "service account token has been invalidated"
        if pod[0] != claims.pod.uid:
            return f"pod UID ({pod[0]}) does not match service account pod ref claim ({claims.pod.uid})"
    return None
