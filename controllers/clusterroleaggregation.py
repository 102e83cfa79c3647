"""The clusterrole-aggregation controller (upstream pkg/controller/clusterroleaggregation): a ClusterRole
with an `aggregationRule` holds the rules of every ClusterRole its selectors pick, so a CRD's author labels a
role `rbac.authorization.k8s.io/aggregate-to-edit: "true"` and whoever holds `edit` may use the new resource.

Keys are the names of aggregated roles. Any ClusterRole added, changed or deleted may change what any
aggregated role gathers, so every aggregated role is queued (upstream's enqueue); view feeding edit feeding
admin settles as each write comes back through the informer. The rules are written by server-side apply
with upstream's field manager and force, and nothing is written when they are already right."""

from __future__ import annotations

import logging

from machinery.api.rbac_v1 import ClusterRole
from machinery.client import ApiClient
from machinery.controller import Controller
from machinery.informer import SharedInformerFactory
from machinery.rbac import aggregated_rules, same_rules, selectors_of

log = logging.getLogger(__name__)

FIELD_MANAGER = "clusterrole-aggregation-controller"


class ClusterRoleAggregationController(Controller):
    name = "clusterrole-aggregation"

    def __init__(self, client: ApiClient, informers: SharedInformerFactory, *, workers: int = 1) -> None:
        super().__init__(workers=workers)
        self.client = client
        self.roles = informers.informer_for(ClusterRole)
        self.watch(self.roles, lambda _: self._aggregated_names())

    def _aggregated_names(self) -> list[str]:
        return [r.metadata.name for r in self.roles.list()
                if r.aggregation_rule is not None and r.metadata.name]

    async def reconcile(self, key: str) -> float | None:
        role = self.roles.get(key)
        if role is None:
            return None
        wire = role.to_dict()
        selectors = selectors_of(wire)
        if selectors is None:
            return None
        rules = aggregated_rules(key, selectors, (r.to_dict() for r in self.roles.list()))
        if same_rules(rules, wire.get("rules")):
            return None
        await self.client.patch_raw(ClusterRole, key, {"apiVersion": "rbac.authorization.k8s.io/v1",
                                                       "kind": "ClusterRole", "metadata": {"name": key},
                                                       "rules": rules},
                                    "apply", field_manager=FIELD_MANAGER, force=True)
        log.info("clusterrole-aggregation: %s now has %d rules", key, len(rules))
        return None
