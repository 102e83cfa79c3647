"""The service-account controller: every active namespace has a `default` ServiceAccount, and gets it
back when it is deleted (upstream pkg/controller/serviceaccount/serviceaccounts_controller.go).

Keys are namespace names: a namespace added or updated, or a ServiceAccount deleted, queues its
namespace; reconciling creates each managed account the informer does not hold. A namespace that
is not Active (being deleted) is left alone, as upstream's, and an AlreadyExists answer is success
(the informer was behind).
"""

from __future__ import annotations

import logging

from machinery.api.core_v1 import Namespace, ServiceAccount
from machinery.api.meta import ObjectMeta
from machinery.client import ApiClient, ApiError
from machinery.controller import Controller
from machinery.informer import SharedInformerFactory

log = logging.getLogger(__name__)

IDENTITY = "system:serviceaccount:kube-system:service-account-controller"
MANAGED_ACCOUNTS = ("default",)  # upstream DefaultServiceAccountsControllerOptions


class ServiceAccountsController(Controller):
    name = "serviceaccount"

    def __init__(self, client: ApiClient, informers: SharedInformerFactory, *, workers: int = 1,
                 accounts: tuple[str, ...] = MANAGED_ACCOUNTS) -> None:
        super().__init__(workers=workers)
        self.client = client
        self.accounts_to_ensure = accounts
        self.namespaces = informers.informer_for(Namespace)
        self.accounts = informers.informer_for(ServiceAccount)
        self.watch(self.namespaces)
        self._watch_account_deletions()

    def _watch_account_deletions(self) -> None:
        """Only a deleted account matters (upstream serviceAccountDeleted): queue its namespace."""

        def deleted(obj: ServiceAccount) -> None:
            if obj.metadata.namespace and obj.metadata.name in self.accounts_to_ensure:
                self.queue.add(obj.metadata.namespace)

        self.accounts.add_event_handler(on_delete=deleted)
        self.informers.append(self.accounts)

    async def reconcile(self, key: str) -> float | None:
        ns = self.namespaces.store.get(key)
        if ns is None or ns.metadata.deletion_timestamp is not None:
            return None
        if (ns.status.phase if ns.status else None) not in (None, "Active"):
            return None
        for name in self.accounts_to_ensure:
            if self.accounts.get(name, key) is not None:
                continue
            try:
                await self.client.create(ServiceAccount(metadata=ObjectMeta(name=name)), namespace=key)
                log.info("serviceaccount: created %s/%s", key, name)
            except ApiError as e:
                if e.is_already_exists:
                    continue
                if e.is_forbidden and "terminat" in e.message:  # the namespace began to go away meanwhile
                    return None
                raise
        return None
