"""Per-resource strategies, keyed "group/plural" as the resource table names them ("/pods",
"apps/deployments")."""

from __future__ import annotations

from apiserver.registry.admissionregistration import (
    MutatingWebhookConfigurationStrategy,
    ValidatingWebhookConfigurationStrategy,
)
from apiserver.registry.configmap import ConfigMapStrategy
from apiserver.registry.cronjob import CronJobStrategy
from apiserver.registry.daemonset import ControllerRevisionStrategy, DaemonSetStrategy
from apiserver.registry.deployment import DeploymentStrategy
from apiserver.registry.endpoints import EndpointsStrategy
from apiserver.registry.endpointslice import EndpointSliceStrategy
from apiserver.registry.event import EventStrategy
from apiserver.registry.horizontalpodautoscaler import HorizontalPodAutoscalerStrategy
from apiserver.registry.ingress import IngressClassStrategy, IngressStrategy
from apiserver.registry.job import JobStrategy
from apiserver.registry.lease import LeaseStrategy
from apiserver.registry.namespace import NamespaceStrategy
from apiserver.registry.node import NodeStrategy
from apiserver.registry.persistentvolume import PersistentVolumeStrategy
from apiserver.registry.persistentvolumeclaim import PersistentVolumeClaimStrategy
from apiserver.registry.pod import PodStrategy
from apiserver.registry.poddisruptionbudget import PodDisruptionBudgetStrategy
from apiserver.registry.priorityclass import PriorityClassStrategy
from apiserver.registry.rbac import (
    ClusterRoleBindingStrategy,
    ClusterRoleStrategy,
    RoleBindingStrategy,
    RoleStrategy,
)
from apiserver.registry.replicaset import ReplicaSetStrategy
from apiserver.registry.replicationcontroller import ReplicationControllerStrategy
from apiserver.registry.resourcequota import LimitRangeStrategy, ResourceQuotaStrategy
from apiserver.registry.secret import SecretStrategy
from apiserver.registry.service import ServiceStrategy
from apiserver.registry.serviceaccount import ServiceAccountStrategy
from apiserver.registry.statefulset import StatefulSetStrategy
from apiserver.registry.storageclass import StorageClassStrategy
from apiserver.registry.strategy import Strategy

STRATEGIES: dict[str, Strategy] = {
    "/namespaces": NamespaceStrategy(),
    "/nodes": NodeStrategy(),
    "/pods": PodStrategy(),
    "/events": EventStrategy(),
    "/serviceaccounts": ServiceAccountStrategy(),
    "/services": ServiceStrategy(),
    "/configmaps": ConfigMapStrategy(),
    "/secrets": SecretStrategy(),
    "/persistentvolumes": PersistentVolumeStrategy(),
    "/persistentvolumeclaims": PersistentVolumeClaimStrategy(),
    "/endpoints": EndpointsStrategy(),
    "discovery.k8s.io/endpointslices": EndpointSliceStrategy(),
    "apps/deployments": DeploymentStrategy(),
    "apps/replicasets": ReplicaSetStrategy(),
    "apps/daemonsets": DaemonSetStrategy(),
    "apps/controllerrevisions": ControllerRevisionStrategy(),
    "apps/statefulsets": StatefulSetStrategy(),
    "storage.k8s.io/storageclasses": StorageClassStrategy(),
    "batch/jobs": JobStrategy(),
    "batch/cronjobs": CronJobStrategy(),
    "coordination.k8s.io/leases": LeaseStrategy(),
    "policy/poddisruptionbudgets": PodDisruptionBudgetStrategy(),
    "rbac.authorization.k8s.io/clusterroles": ClusterRoleStrategy(),
    "rbac.authorization.k8s.io/clusterrolebindings": ClusterRoleBindingStrategy(),
    "rbac.authorization.k8s.io/roles": RoleStrategy(),
    "rbac.authorization.k8s.io/rolebindings": RoleBindingStrategy(),
    "admissionregistration.k8s.io/mutatingwebhookconfigurations": MutatingWebhookConfigurationStrategy(),
    "admissionregistration.k8s.io/validatingwebhookconfigurations": ValidatingWebhookConfigurationStrategy(),
    "authorization.k8s.io/selfsubjectaccessreviews": Strategy(),
    "authorization.k8s.io/selfsubjectrulesreviews": Strategy(),
    "authorization.k8s.io/subjectaccessreviews": Strategy(),
    "autoscaling/horizontalpodautoscalers": HorizontalPodAutoscalerStrategy(),
    "scheduling.k8s.io/priorityclasses": PriorityClassStrategy(),
    "/resourcequotas": ResourceQuotaStrategy(),
    "/limitranges": LimitRangeStrategy(),
    "/replicationcontrollers": ReplicationControllerStrategy(),
    "networking.k8s.io/ingresses": IngressStrategy(),
    "networking.k8s.io/ingressclasses": IngressClassStrategy(),
}


def strategy_for(group: str, plural: str) -> Strategy:
    """The resource's strategy, or the rule-free default for a resource without one."""
    return STRATEGIES.get(f"{group}/{plural}") or Strategy()
