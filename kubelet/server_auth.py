"""The kubelet API's delegated authorization (upstream pkg/kubelet/server/auth.go with the webhook
authorizer of k8s.io/apiserver/plugin/pkg/authorizer/webhook): a user outside system:masters is
allowed a request when the apiserver says so to a SubjectAccessReview for the node's subresource
(`nodes/stats` for /stats, `nodes/metrics` for /metrics, `nodes/log`, `nodes/proxy` for the rest),
named after the node. A caller without a client certificate is known by its bearer token through a
TokenReview (upstream's authentication.webhook). Answers are cached as upstream's kubelet defaults:
allowed 5 minutes, denied 30 s, tokens 2 minutes (the reviews themselves: machinery/delegated_auth.py)."""

from __future__ import annotations

from machinery.authn.user import UserInfo
from machinery.delegated_auth import ReviewClient, TokenReviewer
from machinery.delegated_auth import SubjectAccessReviewer as Reviewer

ALLOWED_TTL = 300.0
DENIED_TTL = 30.0
TOKEN_TTL = 120.0  # upstream's kubelet: authentication.webhook.cacheTTL 2m


class SubjectAccessReviewer:
    def __init__(self, client: ReviewClient, node_name: str) -> None:
        self.node_name = node_name
        self.reviewer = Reviewer(client, ALLOWED_TTL, DENIED_TTL)
        self.tokens = TokenReviewer(client, TOKEN_TTL)  # bearer tokens: upstream's webhook token authentication

    async def allowed(self, user: UserInfo, verb: str, subresource: str) -> bool:
        return await self.reviewer.allowed(user, {"verb": verb, "resource": "nodes", "subresource": subresource,
                                                  "name": self.node_name})
