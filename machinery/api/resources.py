"""The API's resource table: one declarative entry per resource, read by the apiserver (routes,
discovery, OpenAPI), the API client (URLs) and mkubectl (short names).

Adding a resource is one `ResourceInfo` here, a model in machinery.api, and a strategy in
apiserver.registry.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import BaseModel

from machinery.api import (
    admissionregistration_v1,
    apiextensions_v1,
    apps_v1,
    authentication_v1,
    authentication_v1alpha1,
    authentication_v1beta1,
    authorization_v1,
    autoscaling_v2,
    batch_v1,
    coordination_v1,
    core_v1,
    discovery_v1,
    networking_v1,
    policy_v1,
    rbac_v1,
    scheduling_v1,
    storage_v1,
)

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True)
class ResourceInfo:
    group: str  # "" for the core group
    version: str
    kind: str
    plural: str
    singular: str
    namespaced: bool
    model: type[BaseModel]
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    # subresource name -> the kind it speaks (status speaks the parent kind)
    subresources: dict[str, str] = field(default_factory=dict)
    # answered, never stored (access reviews): no Store, no watch cache, only `create`
    virtual: bool = False

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_resource(self) -> str:
        """`pods`, `deployments.apps`: how upstream names a resource in messages."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def prefix(self) -> str:
        """URL prefix of the group-version: /api/v1 or /apis/apps/v1."""
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"

    def collection_path(self, namespace: str | None = None) -> str:
        if self.namespaced and namespace:
            return f"{self.prefix}/namespaces/{namespace}/{self.plural}"
        return f"{self.prefix}/{self.plural}"

    def object_path(self, name: str, namespace: str | None = None, subresource: str | None = None) -> str:
        path = f"{self.collection_path(namespace)}/{name}"
        return f"{path}/{subresource}" if subresource else path


_RBAC = "rbac.authorization.k8s.io"
_ADMISSION = "admissionregistration.k8s.io"

RESOURCES: tuple[ResourceInfo, ...] = (
    ResourceInfo("", "v1", "Namespace", "namespaces", "namespace", False, core_v1.Namespace,
                 short_names=("ns",), subresources={"status": "Namespace", "finalize": "Namespace"},
                 verbs=("create", "delete", "get", "list", "patch", "update", "watch")),
    ResourceInfo("", "v1", "Node", "nodes", "node", False, core_v1.Node,
                 short_names=("no",), subresources={"status": "Node", "proxy": "NodeProxyOptions"}),
    ResourceInfo("", "v1", "Pod", "pods", "pod", True, core_v1.Pod,
                 short_names=("po",), categories=("all",),
                 subresources={"status": "Pod", "binding": "Binding", "log": "", "exec": "", "eviction": "Eviction",
                               "ephemeralcontainers": "Pod", "attach": "", "portforward": "",
                               "proxy": "PodProxyOptions"}),
    ResourceInfo("", "v1", "Event", "events", "event", True, core_v1.Event, short_names=("ev",)),
    ResourceInfo("", "v1", "ServiceAccount", "serviceaccounts", "serviceaccount", True, core_v1.ServiceAccount,
                 short_names=("sa",), subresources={"token": "TokenRequest"}),
    ResourceInfo("", "v1", "Service", "services", "service", True, core_v1.Service,
                 short_names=("svc",), categories=("all",),
                 subresources={"status": "Service", "proxy": "ServiceProxyOptions"}),
    ResourceInfo("", "v1", "ConfigMap", "configmaps", "configmap", True, core_v1.ConfigMap, short_names=("cm",)),
    ResourceInfo("", "v1", "Secret", "secrets", "secret", True, core_v1.Secret),
    ResourceInfo("", "v1", "PersistentVolume", "persistentvolumes", "persistentvolume", False,
                 core_v1.PersistentVolume, short_names=("pv",), subresources={"status": "PersistentVolume"}),
    ResourceInfo("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims", "persistentvolumeclaim", True,
                 core_v1.PersistentVolumeClaim, short_names=("pvc",),
                 subresources={"status": "PersistentVolumeClaim"}),
    ResourceInfo("", "v1", "Endpoints", "endpoints", "endpoints", True, core_v1.Endpoints, short_names=("ep",)),
    ResourceInfo("", "v1", "ResourceQuota", "resourcequotas", "resourcequota", True, core_v1.ResourceQuota,
                 short_names=("quota",), subresources={"status": "ResourceQuota"}),
    ResourceInfo("", "v1", "LimitRange", "limitranges", "limitrange", True, core_v1.LimitRange,
                 short_names=("limits",)),
    ResourceInfo("", "v1", "ReplicationController", "replicationcontrollers", "replicationcontroller", True,
                 core_v1.ReplicationController, short_names=("rc",), categories=("all",),
                 subresources={"status": "ReplicationController", "scale": "Scale"}),
    ResourceInfo("discovery.k8s.io", "v1", "EndpointSlice", "endpointslices", "endpointslice", True,
                 discovery_v1.EndpointSlice),
    ResourceInfo("apps", "v1", "Deployment", "deployments", "deployment", True, apps_v1.Deployment,
                 short_names=("deploy",), categories=("all",),
                 subresources={"status": "Deployment", "scale": "Scale"}),
    ResourceInfo("apps", "v1", "ReplicaSet", "replicasets", "replicaset", True, apps_v1.ReplicaSet,
                 short_names=("rs",), categories=("all",),
                 subresources={"status": "ReplicaSet", "scale": "Scale"}),
    ResourceInfo("apps", "v1", "DaemonSet", "daemonsets", "daemonset", True, apps_v1.DaemonSet,
                 short_names=("ds",), categories=("all",), subresources={"status": "DaemonSet"}),
    ResourceInfo("apps", "v1", "StatefulSet", "statefulsets", "statefulset", True, apps_v1.StatefulSet,
                 short_names=("sts",), categories=("all",),
                 subresources={"status": "StatefulSet", "scale": "Scale"}),
    ResourceInfo("apps", "v1", "ControllerRevision", "controllerrevisions", "controllerrevision", True,
                 apps_v1.ControllerRevision),
    ResourceInfo("storage.k8s.io", "v1", "StorageClass", "storageclasses", "storageclass", False,
                 storage_v1.StorageClass, short_names=("sc",)),
    ResourceInfo("batch", "v1", "Job", "jobs", "job", True, batch_v1.Job, categories=("all",),
                 subresources={"status": "Job"}),
    ResourceInfo("batch", "v1", "CronJob", "cronjobs", "cronjob", True, batch_v1.CronJob,
                 short_names=("cj",), categories=("all",), subresources={"status": "CronJob"}),
    ResourceInfo("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", "poddisruptionbudget", True,
                 policy_v1.PodDisruptionBudget, short_names=("pdb",), subresources={"status": "PodDisruptionBudget"}),
    ResourceInfo("coordination.k8s.io", "v1", "Lease", "leases", "lease", True, coordination_v1.Lease),
    ResourceInfo(_RBAC, "v1", "ClusterRole", "clusterroles", "clusterrole", False, rbac_v1.ClusterRole),
    ResourceInfo(_RBAC, "v1", "ClusterRoleBinding", "clusterrolebindings", "clusterrolebinding", False,
                 rbac_v1.ClusterRoleBinding),
    ResourceInfo(_RBAC, "v1", "Role", "roles", "role", True, rbac_v1.Role),
    ResourceInfo(_RBAC, "v1", "RoleBinding", "rolebindings", "rolebinding", True, rbac_v1.RoleBinding),
    ResourceInfo(_ADMISSION, "v1", "MutatingWebhookConfiguration", "mutatingwebhookconfigurations",
                 "mutatingwebhookconfiguration", False, admissionregistration_v1.MutatingWebhookConfiguration),
    ResourceInfo(_ADMISSION, "v1", "ValidatingWebhookConfiguration", "validatingwebhookconfigurations",
                 "validatingwebhookconfiguration", False, admissionregistration_v1.ValidatingWebhookConfiguration),
    ResourceInfo("authorization.k8s.io", "v1", "SelfSubjectAccessReview", "selfsubjectaccessreviews",
                 "selfsubjectaccessreview", False, authorization_v1.SelfSubjectAccessReview, verbs=("create",),
                 virtual=True),
    ResourceInfo("authorization.k8s.io", "v1", "SelfSubjectRulesReview", "selfsubjectrulesreviews",
                 "selfsubjectrulesreview", False, authorization_v1.SelfSubjectRulesReview, verbs=("create",),
                 virtual=True),
    ResourceInfo("authorization.k8s.io", "v1", "SubjectAccessReview", "subjectaccessreviews",
                 "subjectaccessreview", False, authorization_v1.SubjectAccessReview, verbs=("create",),
                 virtual=True),
    ResourceInfo("autoscaling", "v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers", "horizontalpodautoscaler",
                 True, autoscaling_v2.HorizontalPodAutoscaler, short_names=("hpa",), categories=("all",),
                 subresources={"status": "HorizontalPodAutoscaler"}),
    ResourceInfo("scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses", "priorityclass", False,
                 scheduling_v1.PriorityClass, short_names=("pc",)),
    ResourceInfo("networking.k8s.io", "v1", "Ingress", "ingresses", "ingress", True, networking_v1.Ingress,
                 short_names=("ing",), subresources={"status": "Ingress"}),
    ResourceInfo("networking.k8s.io", "v1", "IngressClass", "ingressclasses", "ingressclass", False,
                 networking_v1.IngressClass),
    ResourceInfo("authentication.k8s.io", "v1", "TokenReview", "tokenreviews", "tokenreview", False,
                 authentication_v1.TokenReview, verbs=("create",), virtual=True),
    # kubectl auth whoami: v1 (1.28+), v1beta1 (1.27), v1alpha1 (1.26); v1 first, the group's preferred version
    *(ResourceInfo("authentication.k8s.io", version, "SelfSubjectReview", "selfsubjectreviews", "selfsubjectreview",
                   False, model, verbs=("create",), virtual=True)
      for version, model in (("v1", authentication_v1.SelfSubjectReview),
                             ("v1beta1", authentication_v1beta1.SelfSubjectReview),
                             ("v1alpha1", authentication_v1alpha1.SelfSubjectReview))),
    ResourceInfo("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions",
                 "customresourcedefinition", False, apiextensions_v1.CustomResourceDefinition,
                 short_names=("crd", "crds"), categories=("api-extensions",),
                 subresources={"status": "CustomResourceDefinition"}),
)

_BY_PLURAL: dict[tuple[str, str], ResourceInfo] = {}
_BY_KIND: dict[tuple[str, str], ResourceInfo] = {}
for _info in RESOURCES:  # a resource served in several versions: the first (preferred) one
    _BY_PLURAL.setdefault((_info.group, _info.plural), _info)
    _BY_KIND.setdefault((_info.api_version, _info.kind), _info)
# custom resources a client discovered at run time (client-go's dynamic RESTMapper): (group, plural) → info
_DISCOVERED: dict[tuple[str, str], ResourceInfo] = {}


def register_discovered(info: ResourceInfo) -> None:
    """Make a custom resource found by discovery known to the lookups below (the garbage collector's)."""
    _DISCOVERED[(info.group, info.plural)] = info


def forget_discovered(group: str, plural: str) -> None:
    _DISCOVERED.pop((group, plural), None)


def discovered() -> list[ResourceInfo]:
    return list(_DISCOVERED.values())


def resource_for(group: str, plural: str) -> ResourceInfo | None:
    return _BY_PLURAL.get((group, plural)) or _DISCOVERED.get((group, plural))


def resource_for_kind(api_version: str, kind: str) -> ResourceInfo | None:
    info = _BY_KIND.get((api_version, kind))
    if info is None:  # a custom resource the client discovered
        group = api_version.rpartition("/")[0] if "/" in api_version else ""
        info = next((i for i in _DISCOVERED.values()
                     if i.group == group and i.kind == kind and i.api_version == api_version), None)
    return info


def resource_for_model(model: type[BaseModel]) -> ResourceInfo:
    for info in (*RESOURCES, *_DISCOVERED.values()):
        if info.model is model:
            return info
    raise KeyError(model.__name__)


def group_versions() -> dict[str, list[ResourceInfo]]:
    """Resources grouped by apiVersion ("v1", "apps/v1", ...), in table order."""
    out: dict[str, list[ResourceInfo]] = {}
    for info in RESOURCES:
        out.setdefault(info.api_version, []).append(info)
    return out
