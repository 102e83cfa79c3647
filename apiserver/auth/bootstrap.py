"""The bootstrap RBAC policy (upstream: plugin/pkg/auth/authorizer/rbac/bootstrappolicy): the
ClusterRoles and ClusterRoleBindings every cluster starts with, reconciled at apiserver start
(created when missing; brought back to these rules when they carry
`rbac.authorization.kubernetes.io/autoupdate: "true"`, as upstream's post-start hook does).

Each component gets the least it needs for what it does here:
- system:kube-scheduler reads pods and nodes, binds pods, writes pod status (conditions) and
  events — and cannot, say, delete deployments;
- system:kube-controller-manager (the shared informers) reads everything, and gets each
  controller its service account and tokens for it (upstream --use-service-account-credentials);
- each controller writes as its service account kube-system/<name>, bound to
  system:controller:<name> with the verbs that controller uses;
- kubelets are answered by the Node authorizer (system:node is kept for reference, unbound);
- kube-proxy (user system:kube-proxy) is bound to system:node-proxier, cluster DNS (service account
  kube-system/kube-dns or user system:kube-dns) to system:kube-dns, and to minik8s's
  system:minik8s:kube-dns-service: it keeps the endpoints of the kube-dns Service pointing at itself;
- the ingress controller (service account kube-system/ingress-nginx, or user system:ingress-nginx) is
  bound to ingress-nginx, the ClusterRole of ingress-nginx's deploy manifests (its leader Role folded in);
- system:masters is bound to cluster-admin; every authenticated user may read discovery and ask
  `kubectl auth can-i` (system:discovery, system:basic-user); health and version are public.
"""

from __future__ import annotations

import copy

from machinery.rbac import AGGREGATE_TO_ADMIN, AGGREGATE_TO_EDIT, AGGREGATE_TO_VIEW, aggregated_rules, same_rules
from machinery.types import Obj

RBAC = "rbac.authorization.k8s.io"
AUTOUPDATE = "rbac.authorization.kubernetes.io/autoupdate"
BOOTSTRAP_LABEL = {"kubernetes.io/bootstrapping": "rbac-defaults"}

READ = ["get", "list", "watch"]
# --controllers name -> service account (controllers/manager.py CONTROLLERS) -> role rules below
CONTROLLER_ACCOUNTS: tuple[str, ...] = ("deployment-controller", "replicaset-controller", "generic-garbage-collector",
                       "namespace-controller", "node-controller", "service-account-controller",
                       "endpoint-controller", "endpointslice-controller", "endpointslicemirroring-controller",
                       "service-controller", "daemon-set-controller", "persistent-volume-binder",
                       "pvc-protection-controller", "pv-protection-controller", "job-controller",
                       "cronjob-controller", "ttl-after-finished-controller", "statefulset-controller",
                       "disruption-controller", "pod-garbage-collector", "root-ca-cert-publisher",
                       "horizontal-pod-autoscaler", "resourcequota-controller", "replication-controller",
                       "clusterrole-aggregation-controller")
WRITE = ["create", "delete", "deletecollection", "patch", "update"]
# what view reads and edit writes (upstream aggregate-to-view / aggregate-to-edit, for what minik8s serves)
_VIEW_CORE = ["pods", "pods/status", "pods/log", "events", "namespaces", "serviceaccounts", "services",
              "services/status", "endpoints", "configmaps", "persistentvolumeclaims",
              "persistentvolumeclaims/status",
              "replicationcontrollers", "replicationcontrollers/scale", "replicationcontrollers/status",
              "limitranges", "resourcequotas", "resourcequotas/status"]  # never secrets: view may not read them
_VIEW_BATCH = ["jobs", "jobs/status", "cronjobs", "cronjobs/status"]
_VIEW_AUTOSCALING = ["horizontalpodautoscalers", "horizontalpodautoscalers/status"]
# metrics-server's system:aggregated-metrics-reader, aggregated to view (and so edit and admin)
_METRICS_READER = ["get", "list", "watch"]
METRICS_GROUP = "metrics.k8s.io"
# the road server's road.minik8s.io (the road of any object): system:aggregated-road-reader, aggregated to view
# (and so edit and admin) as metrics-server's reader is
ROAD_GROUP = "road.minik8s.io"
_ROAD_READER = ["get", "list", "watch"]
_VIEW_APPS = ["deployments", "deployments/scale", "deployments/status", "replicasets", "replicasets/scale",
              "replicasets/status", "daemonsets", "daemonsets/status", "controllerrevisions",
              "statefulsets", "statefulsets/scale", "statefulsets/status"]


def rule(verbs: list[str], groups: list[str], resources: list[str], names: list[str] | None = None) -> Obj:
    out: Obj = {"verbs": verbs, "apiGroups": groups, "resources": resources}
    if names:
        out["resourceNames"] = names
    return out


def url_rule(verbs: list[str], urls: list[str]) -> Obj:
    return {"verbs": verbs, "nonResourceURLs": urls}


EVENTS = rule(["create", "update", "patch"], ["", "events.k8s.io"], ["events"])


def cluster_roles() -> dict[str, list[Obj]]:
    """Every bootstrap ClusterRole's rules, the aggregated ones (admin, edit, view) filled as the
    clusterrole-aggregation controller fills them."""
    roles = _rule_sets()
    for name in AGGREGATED:
        roles[name] = []
    objects: list[Obj] = [{"metadata": {"name": name, "labels": ROLE_LABELS.get(name, {})}, "rules": rules}
                          for name, rules in roles.items()]
    # view feeds edit, which feeds admin: aggregate until nothing changes (three rounds at most)
    for _ in range(len(AGGREGATED) + 1):
        changed = False
        for obj in objects:
            label = AGGREGATED.get(obj["metadata"]["name"])
            if label is None:
                continue
            rules = aggregated_rules(obj["metadata"]["name"], [{"matchLabels": {label: "true"}}], objects)
            if not same_rules(rules, obj["rules"]):
                obj["rules"], changed = rules, True
        if not changed:
            break
    return {obj["metadata"]["name"]: obj["rules"] for obj in objects}


# upstream's aggregated roles: name -> the label whose roles they gather
AGGREGATED = {"view": AGGREGATE_TO_VIEW, "edit": AGGREGATE_TO_EDIT, "admin": AGGREGATE_TO_ADMIN}
_ALL = {AGGREGATE_TO_VIEW: "true", AGGREGATE_TO_EDIT: "true", AGGREGATE_TO_ADMIN: "true"}
# the bootstrap roles gathered into others (upstream: view into edit, edit into admin)
ROLE_LABELS: dict[str, dict[str, str]] = {
    "view": {AGGREGATE_TO_EDIT: "true"},
    "edit": {AGGREGATE_TO_ADMIN: "true"},
    "system:aggregate-to-view": {AGGREGATE_TO_VIEW: "true"},
    "system:aggregate-to-edit": {AGGREGATE_TO_EDIT: "true"},
    "system:aggregate-to-admin": {AGGREGATE_TO_ADMIN: "true"},
    "system:aggregated-metrics-reader": _ALL,  # as metrics-server's manifest labels it
    "system:aggregated-road-reader": _ALL,
}


def _rule_sets() -> dict[str, list[Obj]]:
    return {
        "cluster-admin": [rule(["*"], ["*"], ["*"]), url_rule(["*"], ["*"])],
        "system:discovery": [url_rule(["get"], ["/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez",
                                                "/readyz", "/openapi", "/openapi/*", "/version", "/version/"])],
        "system:basic-user": [rule(["create"], ["authorization.k8s.io"],
                                   ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]),
                              rule(["create"], ["authentication.k8s.io"], ["selfsubjectreviews"])],
        # /metrics and the health checks' details, for scrapers in the group (upstream's bootstrap role)
        "system:monitoring": [url_rule(["get"], ["/healthz", "/healthz/*", "/livez", "/livez/*", "/readyz",
                                                 "/readyz/*", "/metrics", "/metrics/slis"])],
        # for servers that delegate authentication and authorization to the apiserver (upstream's role)
        "system:auth-delegator": [rule(["create"], ["authentication.k8s.io"], ["tokenreviews"]),
                                  rule(["create"], ["authorization.k8s.io"], ["subjectaccessreviews"])],
        "system:public-info-viewer": [url_rule(["get"], ["/healthz", "/livez", "/readyz", "/version",
                                                         "/version/"])],
        # what view, edit and admin gather (their own rules are computed: AGGREGATED below)
        "system:aggregate-to-view": _view(),
        "system:aggregate-to-edit": _edit(),
        "system:aggregate-to-admin": [rule([*READ, *WRITE], [RBAC], ["roles", "rolebindings"]),
                                      rule(["create"], ["authorization.k8s.io"], ["localsubjectaccessreviews"])],
        "system:kube-scheduler": [
            rule([*READ, "delete"], [""], ["pods"]),
            rule(["create"], [""], ["pods/binding", "bindings"]),
            rule(["patch", "update"], [""], ["pods/status"]),
            rule(READ, [""], ["nodes", "namespaces"]),
            rule(READ, ["policy"], ["poddisruptionbudgets"]),  # preemption spares protected pods
            # the secure port's delegated authentication and authorization
            rule(["create"], ["authentication.k8s.io"], ["tokenreviews"]),
            rule(["create"], ["authorization.k8s.io"], ["subjectaccessreviews"]),
            EVENTS,
            rule(["create", "get", "list", "update", "watch"], ["coordination.k8s.io"], ["leases"]),
        ],
        "system:kube-controller-manager": [
            rule(READ, ["*"], ["*"]),
            EVENTS,
            # the secure port's delegated authentication and authorization
            rule(["create"], ["authentication.k8s.io"], ["tokenreviews"]),
            rule(["create"], ["authorization.k8s.io"], ["subjectaccessreviews"]),
            rule(["create", "get", "update"], ["coordination.k8s.io"], ["leases"]),
            rule(["create"], [""], ["serviceaccounts", "serviceaccounts/token"]),
        ],
        "system:node": [
            # the kubelet API's delegated authentication and authorization ("these creates are non-mutating")
            rule(["create"], ["authentication.k8s.io"], ["tokenreviews"]),
            rule(["create"], ["authorization.k8s.io"], ["subjectaccessreviews", "localsubjectaccessreviews"]),
            rule([*READ, "create", "update", "patch", "delete"], [""], ["nodes"]),
            rule(["patch", "update"], [""], ["nodes/status"]),
            rule([*READ, "delete"], [""], ["pods"]),
            rule(["patch", "update"], [""], ["pods/status"]),
            EVENTS,
            rule(["get", "create", "update", "patch", "delete"], ["coordination.k8s.io"], ["leases"]),
            rule(READ, [""], ["services"]),  # the kubelet's service environment variables
            # volumes, env and image pull secrets of its pods; the Node authorizer narrows it to those
            rule(READ, [""], ["secrets", "configmaps"]),
            # the claims of its pods and their volumes (narrowed by the Node authorizer), and resize status
            rule(["get"], [""], ["persistentvolumeclaims", "persistentvolumes"]),
            rule(["get", "update", "patch"], [""], ["persistentvolumeclaims/status"]),
            rule(["create"], [""], ["pods/eviction"]),  # its own pods only (Node authorizer, NodeRestriction)
        ],
        # the scheduler's VolumeBinding (bound to system:kube-scheduler)
        "system:volume-scheduler": [
            # patch: the selected-node annotation on a WaitForFirstConsumer claim (upstream's rule has it too)
            rule([*READ, "patch", "update"], [""], ["persistentvolumes", "persistentvolumeclaims"]),
            rule(READ, ["storage.k8s.io"], ["storageclasses"]),
        ],
        # kube-proxy (user system:kube-proxy)
        # metrics-server (service account kube-system/metrics-server, or user system:metrics-server)
        "system:metrics-server": [
            rule(["get"], [""], ["nodes/metrics", "nodes/stats"]),
            rule(READ, [""], ["pods", "nodes"]),
        ],
        "system:aggregated-metrics-reader": [rule(_METRICS_READER, [METRICS_GROUP], ["pods", "nodes"])],
        "system:aggregated-road-reader": [rule(_ROAD_READER, [ROAD_GROUP], ["*"])],
        # the road server (python -m road; user system:road-server or service account kube-system/road-server):
        # reads, never writes: the objects whose roads it draws and their Events, and whether an object exists
        "system:road-server": [
            rule(READ, [""], ["pods", "events"]),
            rule(READ, ["apps"], ["deployments", "replicasets"]),
            rule(["get"], [""], [r for r in _VIEW_CORE if "/" not in r] + ["nodes", "persistentvolumes"]),
            rule(["get"], ["apps", "batch", "discovery.k8s.io", "networking.k8s.io", "policy", "autoscaling",
                           "storage.k8s.io", "scheduling.k8s.io", "coordination.k8s.io"], ["*"]),
        ],
        "system:controller:horizontal-pod-autoscaler": [
            rule(READ, ["autoscaling"], ["horizontalpodautoscalers"]),
            rule(["update"], ["autoscaling"], ["horizontalpodautoscalers/status"]),
            rule(["get", "update"], ["*"], ["*/scale"]),
            rule(["list"], [""], ["pods"]),
            rule(["list"], [METRICS_GROUP], ["pods"]),
            rule(["get", "list"], ["custom.metrics.k8s.io"], ["*"]),
            rule(["get", "list"], ["external.metrics.k8s.io"], ["*"]),
            EVENTS,
        ],
        "system:node-proxier": [
            rule(["list", "watch"], [""], ["services", "endpoints"]),
            rule(["get"], [""], ["nodes"]),
            EVENTS,
            rule(["list", "watch"], ["discovery.k8s.io"], ["endpointslices"]),
        ],
        # cluster DNS (service account kube-system/kube-dns, or user system:kube-dns); upstream's role
        # predates EndpointSlices, which a DNS server reads today (as CoreDNS's system:coredns role)
        "system:kube-dns": [
            rule(["list", "watch"], [""], ["endpoints", "services"]),
            rule(["list", "watch"], ["discovery.k8s.io"], ["endpointslices"]),
        ],
        # ingress-nginx's ClusterRole (deploy/static/provider/*/deploy.yaml), with its namespaced leader-election
        # Role (the ingress-nginx-leader Lease) folded in: ingress_nginx/ runs on the host, not in a namespace
        "ingress-nginx": [
            rule(["list", "watch"], [""], ["configmaps", "endpoints", "nodes", "pods", "secrets", "namespaces"]),
            rule(["list", "watch"], ["coordination.k8s.io"], ["leases"]),
            rule(["get"], [""], ["nodes"]),
            rule(["get", "list", "watch"], [""], ["services"]),
            rule(["get", "list", "watch"], ["networking.k8s.io"], ["ingresses"]),
            EVENTS,
            rule(["update"], ["networking.k8s.io"], ["ingresses/status"]),
            rule(["get", "list", "watch"], ["networking.k8s.io"], ["ingressclasses"]),
            rule(["list", "watch", "get"], ["discovery.k8s.io"], ["endpointslices"]),
            rule(["get", "update"], ["coordination.k8s.io"], ["leases"], ["ingress-nginx-leader"]),
            rule(["create"], ["coordination.k8s.io"], ["leases"]),
        ],
        # minik8s's own: the DNS process keeps kube-system/kube-dns pointing at itself (dns/kube_dns_service.py).
        # No create: a create cannot be narrowed to a name, and one of Services or EndpointSlices anywhere would
        # let it take other Services' traffic; the add-on's objects are created once by an admin (local-up)
        "system:minik8s:kube-dns-service": [
            rule(["get"], [""], ["services"], ["kube-dns"]),
            rule(["get", "update"], [""], ["endpoints"], ["kube-dns"]),
            rule(["get", "update"], ["discovery.k8s.io"], ["endpointslices"], ["kube-dns-host"]),
        ],
        "system:controller:deployment-controller": [
            rule([*READ, "update", "patch"], ["apps"], ["deployments"]),
            rule(["update", "patch"], ["apps"], ["deployments/status", "deployments/finalizers"]),
            rule([*READ, "create", "update", "patch", "delete"], ["apps"], ["replicasets"]),
            rule([*READ, "update"], [""], ["pods"]),
            EVENTS,
        ],
        "system:controller:replicaset-controller": [
            rule([*READ, "update", "patch"], ["apps"], ["replicasets"]),
            rule(["update", "patch"], ["apps"], ["replicasets/status", "replicasets/finalizers"]),
            rule([*READ, "create", "update", "patch", "delete"], [""], ["pods"]),
            EVENTS,
        ],
        "system:controller:daemon-set-controller": [
            rule(READ, ["extensions", "apps"], ["daemonsets"]),
            rule(["update"], ["extensions", "apps"], ["daemonsets/status"]),
            rule(["update"], ["extensions", "apps"], ["daemonsets/finalizers"]),
            rule(["list", "watch"], [""], ["nodes"]),
            rule(["list", "watch", "create", "delete", "patch"], [""], ["pods"]),
            rule(["create"], [""], ["pods/binding"]),
            rule([*READ, "create", "delete", "update", "patch"], ["apps"], ["controllerrevisions"]),
            EVENTS,
        ],
        "system:controller:statefulset-controller": [
            rule(["list", "watch"], [""], ["pods"]),
            rule(READ, ["apps"], ["statefulsets"]),
            rule(["update"], ["apps"], ["statefulsets/status"]),
            rule(["update"], ["apps"], ["statefulsets/finalizers"]),
            rule(["get", "create", "delete", "update", "patch"], [""], ["pods"]),
            rule(["get", "create", "delete", "update", "patch", "list", "watch"], ["apps"], ["controllerrevisions"]),
            rule(["get", "create"], [""], ["persistentvolumeclaims"]),
            EVENTS,
            # StatefulSetAutoDeletePVC (on since 1.27): owner references on claims per the retention policy
            rule(["update", "delete"], [""], ["persistentvolumeclaims"]),
        ],
        "system:controller:generic-garbage-collector": [
            rule(["get", "list", "watch", "patch", "update", "delete"], ["*"], ["*"]),
            EVENTS,
        ],
        "system:controller:namespace-controller": [
            rule(["get", "list", "watch", "delete"], [""], ["namespaces"]),
            rule(["update"], [""], ["namespaces/finalize", "namespaces/status"]),
            rule(["get", "list", "delete", "deletecollection"], ["*"], ["*"]),
            EVENTS,
        ],
        "system:controller:service-account-controller": [
            rule(["create"], [""], ["serviceaccounts"]),
            EVENTS,
        ],
        "system:controller:endpoint-controller": [
            rule(READ, [""], ["services", "pods"]),
            rule(["get", "list", "create", "update", "delete"], [""], ["endpoints"]),
            rule(["create"], [""], ["endpoints/restricted"]),
            EVENTS,
        ],
        "system:controller:endpointslice-controller": [
            rule(READ, [""], ["services", "pods", "nodes"]),
            # ownerReferences with blockOwnerDeletion to the Service need its finalizers
            rule(["update"], [""], ["services/finalizers"]),
            rule(["get", "list", "create", "update", "delete"], ["discovery.k8s.io"], ["endpointslices"]),
            EVENTS,
        ],
        "system:controller:endpointslicemirroring-controller": [
            rule(READ, [""], ["services", "endpoints"]),
            rule(["update"], [""], ["services/finalizers", "endpoints/finalizers"]),
            rule(["get", "list", "create", "update", "delete"], ["discovery.k8s.io"], ["endpointslices"]),
            EVENTS,
        ],
        # the service load-balancer controller
        "system:controller:service-controller": [
            rule(READ, [""], ["services"]),
            rule(["patch", "update"], [""], ["services/status"]),
            rule(["list", "watch"], [""], ["nodes"]),
            EVENTS,
        ],
        "system:controller:persistent-volume-binder": [
            rule([*READ, "update", "create", "delete"], [""], ["persistentvolumes"]),
            rule(["update"], [""], ["persistentvolumes/status"]),
            rule([*READ, "update"], [""], ["persistentvolumeclaims"]),
            rule(["update"], [""], ["persistentvolumeclaims/status"]),
            rule(["list", "watch", "get", "create", "delete"], [""], ["pods"]),
            rule(READ, ["storage.k8s.io"], ["storageclasses"]),
            rule(["get", "list"], [""], ["nodes"]),
            rule(["watch"], [""], ["events"]),
            EVENTS,
        ],
        "system:controller:pvc-protection-controller": [
            rule([*READ, "update"], [""], ["persistentvolumeclaims"]),
            rule(["list", "watch", "get"], [""], ["pods"]),
            EVENTS,
        ],
        "system:controller:pv-protection-controller": [
            rule([*READ, "update"], [""], ["persistentvolumes"]),
            EVENTS,
        ],
        "system:controller:job-controller": [
            rule([*READ, "update", "patch"], ["batch"], ["jobs"]),
            rule(["update", "patch"], ["batch"], ["jobs/status"]),
            rule(["update"], ["batch"], ["jobs/finalizers"]),
            rule([*READ, "create", "delete", "patch"], [""], ["pods"]),
            EVENTS,
        ],
        "system:controller:cronjob-controller": [
            rule([*READ, "update"], ["batch"], ["cronjobs"]),
            rule([*READ, "create", "update", "delete", "patch"], ["batch"], ["jobs"]),
            rule(["update"], ["batch"], ["cronjobs/status"]),
            rule(["update"], ["batch"], ["cronjobs/finalizers"]),
            rule(["list", "delete"], [""], ["pods"]),
            EVENTS,
        ],
        "system:controller:ttl-after-finished-controller": [
            rule(["get", "list", "watch", "delete"], ["batch"], ["jobs"]),
            EVENTS,
        ],
        "system:controller:disruption-controller": [
            rule(READ, ["extensions", "apps"], ["deployments"]),
            rule(READ, ["apps", "extensions"], ["replicasets"]),
            rule(READ, [""], ["replicationcontrollers"]),
            rule(READ, ["policy"], ["poddisruptionbudgets"]),
            rule(READ, ["apps"], ["statefulsets"]),
            rule(["update"], ["policy"], ["poddisruptionbudgets/status"]),
            rule(["get"], ["*"], ["*/scale"]),
            rule(["patch", "update"], [""], ["pods/status"]),  # stale DisruptionTarget conditions
            EVENTS,
        ],
        "system:controller:pod-garbage-collector": [
            rule(["list", "watch", "delete"], [""], ["pods"]),
            rule(["get", "list"], [""], ["nodes"]),
            rule(["patch"], [""], ["pods/status"]),
        ],
        "system:controller:root-ca-cert-publisher": [
            rule(["create", "update"], [""], ["configmaps"]),
            EVENTS,
        ],
        # quota counts anything it may be asked to, so it may list and watch everything
        "system:controller:resourcequota-controller": [
            rule(["list", "watch"], ["*"], ["*"]),
            rule(["update"], [""], ["resourcequotas/status"]),
            EVENTS,
        ],
        "system:controller:replication-controller": [
            rule(["get", "list", "watch", "update"], [""], ["replicationcontrollers"]),
            rule(["update"], [""], ["replicationcontrollers/status"]),
            rule(["update"], [""], ["replicationcontrollers/finalizers"]),
            rule(["list", "watch", "patch", "create", "delete"], [""], ["pods"]),
            EVENTS,
        ],
        # escalate: an aggregated role gathers rules its writer need not hold (upstream's role)
        "system:controller:clusterrole-aggregation-controller": [
            rule(["escalate", "get", "list", "patch", "update", "watch"], [RBAC], ["clusterroles"]),
        ],
        "system:controller:node-controller": [
            rule(["get", "list", "watch", "update", "patch", "delete"], [""], ["nodes"]),
            rule(["patch", "update"], [""], ["nodes/status"]),
            rule(["list", "watch", "delete"], [""], ["pods"]),
            rule(["patch", "update"], [""], ["pods/status"]),
            EVENTS,
        ],
    }


def _view() -> list[Obj]:
    return [rule(READ, [""], _VIEW_CORE), rule(READ, ["apps"], _VIEW_APPS), rule(READ, ["batch"], _VIEW_BATCH),
            rule(READ, ["discovery.k8s.io"], ["endpointslices"]), rule(READ, ["coordination.k8s.io"], ["leases"]),
            rule(READ, ["policy"], ["poddisruptionbudgets", "poddisruptionbudgets/status"]),
            rule(READ, ["autoscaling"], _VIEW_AUTOSCALING),
            rule(READ, ["networking.k8s.io"], ["ingresses", "ingresses/status"])]


def _edit() -> list[Obj]:
    """What edit adds to view: writes of workloads and services (not of endpoints: upstream took those out of
    edit, CVE-2021-25740)."""
    return [
        rule(READ, [""], ["pods/attach", "pods/exec", "pods/portforward", "pods/proxy", "secrets", "services/proxy"]),
        rule(WRITE, [""], ["pods", "pods/attach", "pods/exec", "pods/portforward", "pods/proxy", "events",
                           "serviceaccounts", "services", "services/proxy", "configmaps", "secrets",
                           "persistentvolumeclaims", "replicationcontrollers", "replicationcontrollers/scale"]),
        rule(["impersonate"], [""], ["serviceaccounts"]),
        rule(["create"], [""], ["serviceaccounts/token"]),
        rule(WRITE, ["apps"], ["deployments", "deployments/rollback", "deployments/scale", "replicasets",
                               "replicasets/scale", "daemonsets", "statefulsets",
                               "statefulsets/scale"]),
        rule(WRITE, ["batch"], ["jobs", "cronjobs"]),
        rule(["create"], [""], ["pods/eviction"]),
        rule(WRITE, ["policy"], ["poddisruptionbudgets"]),
        rule(WRITE, ["autoscaling"], ["horizontalpodautoscalers"]),
        rule(WRITE, ["networking.k8s.io"], ["ingresses"]),
    ]


def _user(name: str) -> Obj:
    return {"kind": "User", "apiGroup": RBAC, "name": name}


def _group(name: str) -> Obj:
    return {"kind": "Group", "apiGroup": RBAC, "name": name}


def _service_account(namespace: str, name: str) -> Obj:
    return {"kind": "ServiceAccount", "name": name, "namespace": namespace}


def cluster_role_bindings() -> dict[str, tuple[str, list[Obj]]]:
    """binding name -> (cluster role, subjects)."""
    out: dict[str, tuple[str, list[Obj]]] = {
        "cluster-admin": ("cluster-admin", [_group("system:masters")]),
        "system:discovery": ("system:discovery", [_group("system:authenticated")]),
        "system:basic-user": ("system:basic-user", [_group("system:authenticated")]),
        "system:monitoring": ("system:monitoring", [_group("system:monitoring")]),
        "system:public-info-viewer": ("system:public-info-viewer",
                                      [_group("system:authenticated"), _group("system:unauthenticated")]),
        "system:kube-scheduler": ("system:kube-scheduler", [_user("system:kube-scheduler")]),
        "system:kube-controller-manager": ("system:kube-controller-manager",
                                           [_user("system:kube-controller-manager")]),
        "system:volume-scheduler": ("system:volume-scheduler", [_user("system:kube-scheduler")]),
        "system:node-proxier": ("system:node-proxier", [_user("system:kube-proxy")]),
        "system:metrics-server": ("system:metrics-server", [_service_account("kube-system", "metrics-server"),
                                                            _user("system:metrics-server")]),
        "system:road-server": ("system:road-server", [_service_account("kube-system", "road-server"),
                                                      _user("system:road-server")]),
        "system:kube-dns": ("system:kube-dns", [_service_account("kube-system", "kube-dns"),
                                                _user("system:kube-dns")]),
        "ingress-nginx": ("ingress-nginx", [_service_account("kube-system", "ingress-nginx"),
                                            _user("system:ingress-nginx")]),
        "system:minik8s:kube-dns-service": ("system:minik8s:kube-dns-service",
                                            [_service_account("kube-system", "kube-dns"), _user("system:kube-dns")]),
    }
    for account in CONTROLLER_ACCOUNTS:
        role = f"system:controller:{account}"
        out[role] = (role, [_service_account("kube-system", account)])
    return out


def _meta(name: str) -> Obj:
    return {"name": name, "labels": dict(BOOTSTRAP_LABEL), "annotations": {AUTOUPDATE: "true"}}


def policy_objects() -> tuple[list[Obj], list[Obj]]:
    """(ClusterRoles, ClusterRoleBindings) as wire objects."""
    roles: list[Obj] = []
    for name, rules in cluster_roles().items():
        role: Obj = {"apiVersion": f"{RBAC}/v1", "kind": "ClusterRole", "metadata": _meta(name), "rules": rules}
        role["metadata"]["labels"].update(ROLE_LABELS.get(name, {}))
        if name in AGGREGATED:
            role["aggregationRule"] = {"clusterRoleSelectors": [{"matchLabels": {AGGREGATED[name]: "true"}}]}
        roles.append(role)
    bindings = [{"apiVersion": f"{RBAC}/v1", "kind": "ClusterRoleBinding", "metadata": _meta(name),
                 "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": role}, "subjects": subjects}
                for name, (role, subjects) in cluster_role_bindings().items()]
    return roles, bindings


def reconciled(existing: Obj, wanted: Obj) -> Obj | None:
    """The stored bootstrap object brought back to what it should be (upstream's reconcile: the rules, or
    for an aggregated role its aggregationRule (its rules are the aggregation controller's), or the
    subjects; labels and annotations it lacks added), None when it already is or may not be changed."""
    meta = existing.get("metadata") or {}
    if (meta.get("annotations") or {}).get(AUTOUPDATE, "true") != "true":
        return None
    fields = ("subjects",) if wanted["kind"] != "ClusterRole" else \
        ("aggregationRule",) if wanted.get("aggregationRule") else ("rules",)
    missing = {k: v for k, v in wanted["metadata"]["labels"].items() if (meta.get("labels") or {}).get(k) != v}
    if not missing and all(existing.get(f) == wanted.get(f) for f in fields):
        return None
    out = {**existing, **{f: copy.deepcopy(wanted[f]) for f in fields}}
    out["metadata"] = {**meta, "labels": {**(meta.get("labels") or {}), **missing}}
    return out
