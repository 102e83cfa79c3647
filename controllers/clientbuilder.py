"""Clients for the controllers under their own service accounts, as upstream's
--use-service-account-credentials builds them (staging/src/k8s.io/controller-manager/pkg/clientbuilder/
client_builder_dynamic.go): the controller-manager authenticates as itself (its kubeconfig,
system:kube-controller-manager), makes sure kube-system/<account> exists, and asks the apiserver for
a token of that account through TokenRequest (serviceaccounts/<account>/token, an hour by default).
Each controller's ApiClient asks its token source before every request; the source refreshes the
token once 80% of its lifetime has passed, so requests after a refresh carry the new token.

Nothing here signs a token: only the apiserver holds the signing key.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging

from machinery.api.core_v1 import ServiceAccount
from machinery.api.meta import ObjectMeta
from machinery.api.resources import resource_for_model
from machinery.client import ApiClient, ApiError, CachingTokenSource, TokenFetch
from machinery.kubeconfig import ClientConfig
from machinery.timeutil import parse_rfc3339

log = logging.getLogger(__name__)

NAMESPACE = "kube-system"
DEFAULT_EXPIRATION_SECONDS = 3600  # upstream defaultExpirationSeconds
SERVICE_ACCOUNTS = resource_for_model(ServiceAccount)


def _timestamp(value: str) -> float:
    t = parse_rfc3339(value)
    if t is None:
        raise ValueError(f"not an RFC 3339 time: {value!r}")
    return t.timestamp()


class DynamicClientBuilder:
    """One token source per service account, fetched through `root` (the controller-manager's own client)."""

    def __init__(self, root: ApiClient, config: ClientConfig, *, namespace: str = NAMESPACE,
                 expiration_seconds: int = DEFAULT_EXPIRATION_SECONDS) -> None:
        self.root = root
        # the controllers present their tokens only: never the manager's own certificate or token
        self.config = dataclasses.replace(config, cert_file=None, key_file=None, token=None)
        self.namespace = namespace
        self.expiration_seconds = expiration_seconds
        self.sources: dict[str, CachingTokenSource] = {}

    def client(self, account: str, user_agent: str) -> ApiClient:
        source = self.sources.get(account)
        if source is None:
            source = self.sources[account] = CachingTokenSource(self._fetcher(account))
        return ApiClient(self.config, user_agent=user_agent, token_source=source)

    async def prefetch(self) -> None:
        """Get every account's first token now, as upstream's ClientOrDie does when a controller is
        built; a failure is logged and retried on the controller's first request."""
        results = await asyncio.gather(*(source() for source in self.sources.values()), return_exceptions=True)
        for account, result in zip(self.sources, results, strict=True):
            if isinstance(result, BaseException):
                log.warning("no token for %s/%s yet: %s", self.namespace, account, result)

    def _fetcher(self, account: str) -> TokenFetch:
        async def fetch() -> tuple[str, float]:
            await self._ensure_account(account)
            answer = await self.root.request(
                "POST", SERVICE_ACCOUNTS.object_path(account, self.namespace, "token"),
                body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                      "spec": {"expirationSeconds": self.expiration_seconds}})
            status = answer.get("status") or {}
            expires = _timestamp(status["expirationTimestamp"])
            log.info("obtained a token for %s/%s, valid until %s", self.namespace, account,
                     status["expirationTimestamp"])
            return status["token"], expires

        return fetch

    async def _ensure_account(self, account: str) -> None:
        """upstream getOrCreateServiceAccount: get, create when missing (AlreadyExists is fine)."""
        try:
            await self.root.get(ServiceAccount, account, self.namespace)
            return
        except ApiError as e:
            if not e.is_not_found:
                raise
        try:
            await self.root.create(ServiceAccount(metadata=ObjectMeta(name=account)), namespace=self.namespace)
            log.info("created service account %s/%s", self.namespace, account)
        except ApiError as e:
            if not e.is_already_exists:
                raise
