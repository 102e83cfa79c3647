"""The default plugin set of minik8s' scheduler profile, in upstream's order and with its weights.

Filters run in this order and stop at a node's first failure:
NodeUnschedulable, NodeName, TaintToleration, NodeReady (minik8s: the Ready condition read as the
taint it implies), NodeAffinity, NodePorts, NodeResourcesFit.

Scores (weight): TaintToleration (3), NodeAffinity (2), SelectorSpread (2, standing in for
PodTopologySpread's default spreading), NodeResourcesFit LeastAllocated (1),
NodeResourcesBalancedAllocation (1).

NodeName, NodeAffinity and NodePorts have a PreFilter that skips them for pods they have nothing to
check on (no nodeName, no nodeSelector or required affinity, no host ports); every score plugin also
scores all feasible nodes in one call (`*_scores`), equal by definition to its per-node function.
"""

from __future__ import annotations

from scheduler.framework import Filter, Framework, Score
from scheduler.plugins import (
    node_affinity,
    node_name,
    node_ports,
    node_ready,
    node_resources,
    node_unschedulable,
    selector_spread,
    taint_toleration,
)


def default_filters() -> list[Filter]:
    return [
        Filter(node_unschedulable.NAME, node_unschedulable.node_unschedulable, None,
               node_unschedulable.node_unschedulable_nodes),
        Filter(node_name.NAME, node_name.node_name, node_name.skip),
        Filter(taint_toleration.NAME, taint_toleration.taint_toleration, None, taint_toleration.taint_toleration_nodes),
        Filter(node_ready.NAME, node_ready.node_ready, None, node_ready.node_ready_nodes),
        Filter(node_affinity.NAME, node_affinity.node_affinity, node_affinity.skip),
        Filter(node_ports.NAME, node_ports.node_ports, node_ports.skip),
        Filter(node_resources.NAME, node_resources.node_resources_fit, None, node_resources.node_resources_fit_nodes),
    ]


def default_scores() -> list[Score]:
    return [
        Score(taint_toleration.NAME, taint_toleration.taint_toleration_score, 3,
              taint_toleration.taint_toleration_normalize, taint_toleration.taint_toleration_scores),
        Score(node_affinity.NAME, node_affinity.node_affinity_score, 2, node_affinity.node_affinity_normalize,
              node_affinity.node_affinity_scores),
        Score(selector_spread.NAME, selector_spread.selector_spread_score, 2,
              selector_spread.selector_spread_normalize, selector_spread.selector_spread_scores),
        Score(node_resources.NAME, node_resources.least_allocated_score, 1, None,
              node_resources.least_allocated_scores),
        Score(node_resources.BALANCED_ALLOCATION, node_resources.balanced_allocation_score, 1, None,
              node_resources.balanced_allocation_scores),
    ]


def default_framework(percentage_of_nodes_to_score: int = 0) -> Framework:
    return Framework(default_filters(), default_scores(), percentage_of_nodes_to_score)
