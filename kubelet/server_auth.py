"""The kubelet API's delegated authorization (upstream pkg/kubelet/server/auth.go with the webhook
authorizer of k8s.io/apiserver/plugin/pkg/authorizer/webhook): a user outside system:masters is
allowed a request when the apiserver says so to a SubjectAccessReview for the node's subresource
(`nodes/stats` for /stats, `nodes/metrics` for /metrics, `nodes/log`, `nodes/proxy` for the rest),
named after the node. Answers are cached as upstream's defaults: allowed 5 minutes, denied 30 s."""

from __future__ import annotations

import logging
import time
from typing import Any, Protocol

from machinery.authn.user import UserInfo

log = logging.getLogger(__name__)

ALLOWED_TTL = 300.0
DENIED_TTL = 30.0


SAR_PATH = "/apis/authorization.k8s.io/v1/subjectaccessreviews"


class ReviewClient(Protocol):
    async def request(self, method: str, path: str, *, body: Any = None) -> Any: ...


class SubjectAccessReviewer:
    def __init__(self, client: ReviewClient, node_name: str) -> None:
        self.client = client
        self.node_name = node_name
        self.cache: dict[tuple[str, tuple[str, ...], str, str], tuple[bool, float]] = {}

    async def allowed(self, user: UserInfo, verb: str, subresource: str) -> bool:
        key = (user.name, tuple(user.groups), verb, subresource)
        cached = self.cache.get(key)
        now = time.monotonic()
        if cached is not None and cached[1] > now:
            return cached[0]
        review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                  "spec": {"user": user.name, "groups": list(user.groups), "uid": user.uid or None,
                           "resourceAttributes": {"verb": verb, "resource": "nodes", "subresource": subresource,
                                                  "name": self.node_name}}}
        try:
            answer = await self.client.request("POST", SAR_PATH, body=review)
        except Exception as e:  # the apiserver unreachable: no decision, not cached (upstream retries)
            log.warning("SubjectAccessReview for %s: %s", user.name, e)
            return False
        allowed = isinstance(answer, dict) and bool((answer.get("status") or {}).get("allowed"))
        self.cache[key] = (allowed, now + (ALLOWED_TTL if allowed else DENIED_TTL))
        return allowed
