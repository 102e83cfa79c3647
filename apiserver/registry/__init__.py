"""Per-resource strategies, keyed "group/plural" as the resource table names them ("/pods",
"apps/deployments")."""

from __future__ import annotations

from apiserver.registry.deployment import DeploymentStrategy
from apiserver.registry.event import EventStrategy
from apiserver.registry.lease import LeaseStrategy
from apiserver.registry.namespace import NamespaceStrategy
from apiserver.registry.node import NodeStrategy
from apiserver.registry.pod import PodStrategy
from apiserver.registry.replicaset import ReplicaSetStrategy
from apiserver.registry.strategy import Strategy

STRATEGIES: dict[str, Strategy] = {
    "/namespaces": NamespaceStrategy(),
    "/nodes": NodeStrategy(),
    "/pods": PodStrategy(),
    "/events": EventStrategy(),
    "apps/deployments": DeploymentStrategy(),
    "apps/replicasets": ReplicaSetStrategy(),
    "coordination.k8s.io/leases": LeaseStrategy(),
}


def strategy_for(group: str, plural: str) -> Strategy:
    """The resource's strategy, or the rule-free default for a resource without one."""
    return STRATEGIES.get(f"{group}/{plural}") or Strategy()
