"""May they (upstream: plugin/pkg/auth/authorizer/{rbac,node} and the union authorizer of
--authorization-mode=Node,RBAC)?

- system:masters may do everything (upstream's privileged-group authorizer, ahead of the rest);
- the Node authorizer answers for kubelets (system:node:NAME in system:nodes): their own Node and
  Lease, the pods bound to them (reads, status, the final delete), pods listed or watched only
  with `fieldSelector=spec.nodeName=NAME`, events, the Secrets and ConfigMaps its pods refer to
  (upstream's graph: pod -> secret/configmap edges from volumes, env, envFrom and imagePullSecrets),
  and tokens (serviceaccounts/NAME/token) of the accounts its pods run as;
- RBAC answers from Role/ClusterRole/RoleBinding/ClusterRoleBinding objects as the watch caches
  hold them: an index from subject to rules, rebuilt when any of the four changes, and a decision
  cache in front of it, so an authorized request costs a dictionary lookup.

Nothing allowed → 403 with upstream's message:
`deployments.apps "nginx" is forbidden: User "system:kube-scheduler" cannot delete resource
"deployments" in API group "apps" in the namespace "default"`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from apiserver import errors
from apiserver.auth.serviceaccount import username as service_account_user
from machinery.authn.user import UserInfo
from machinery.types import Obj

ALLOW, DENY, NO_OPINION = "allow", "deny", "no-opinion"
NODE_LEASE_NAMESPACE = "kube-node-lease"


@dataclass(slots=True)
class Attributes:
    """What is asked (upstream authorizer.AttributesRecord)."""

    user: UserInfo
    verb: str
    resource_request: bool
    path: str = ""
    api_group: str = ""
    api_version: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    field_selector: str = ""

    def key(self) -> tuple[Any, ...]:
        return (self.user.name, self.user.groups, self.verb, self.resource_request, self.path, self.api_group,
                self.resource, self.subresource, self.namespace, self.name)


class Decider(Protocol):
    def authorize(self, a: Attributes) -> tuple[str, str]: ...


def forbidden_message(a: Attributes) -> str:
    """Upstream's forbiddenMessage()."""
    if not a.resource_request:
        return f'User "{a.user.name}" cannot {a.verb} path "{a.path}"'
    resource = f"{a.resource}/{a.subresource}" if a.subresource else a.resource
    if a.namespace:
        return (f'User "{a.user.name}" cannot {a.verb} resource "{resource}" in API group "{a.api_group}" '
                f'in the namespace "{a.namespace}"')
    return (f'User "{a.user.name}" cannot {a.verb} resource "{resource}" in API group "{a.api_group}" '
            f"at the cluster scope")


def forbidden(a: Attributes, reason: str = "") -> errors.ApiError:
    """403 Forbidden as upstream's responsewriters.Forbidden writes it."""
    message = forbidden_message(a) + (f": {reason}" if reason else "")
    if not a.resource_request:
        return errors.ApiError(403, "Forbidden", f"forbidden: {message}", {})
    qualified = f"{a.resource}.{a.api_group}" if a.api_group else a.resource
    details: dict[str, Any] = {"kind": a.resource}
    if a.api_group:
        details["group"] = a.api_group
    if a.name:
        details["name"] = a.name
        return errors.ApiError(403, "Forbidden", f'{qualified} "{a.name}" is forbidden: {message}', details)
    return errors.ApiError(403, "Forbidden", f"{qualified} is forbidden: {message}", details)


# -- RBAC --------------------------------------------------------------------------------------------


class Rule:
    """One PolicyRule, compiled to sets."""

    __slots__ = ("all_groups", "all_names", "all_resources", "all_verbs", "groups", "names", "raw", "resources",
                 "urls", "verbs")

    def __init__(self, rule: Obj):
        self.raw = rule  # as written in the role: what rule resolution (escalation checks, rules reviews) hands out
        self.verbs = frozenset(rule.get("verbs") or ())
        self.all_verbs = "*" in self.verbs
        self.groups = frozenset(rule.get("apiGroups") or ())
        self.all_groups = "*" in self.groups
        self.resources = frozenset(rule.get("resources") or ())
        self.all_resources = "*" in self.resources
        self.names = frozenset(rule.get("resourceNames") or ())
        self.all_names = not self.names
        self.urls = tuple(rule.get("nonResourceURLs") or ())

    def allows(self, a: Attributes) -> bool:
        if not (self.all_verbs or a.verb in self.verbs):
            return False
        if not a.resource_request:
            return any(u == "*" or u == a.path or (u.endswith("*") and a.path.startswith(u[:-1])) for u in self.urls)
        if not self.resources or not (self.all_groups or a.api_group in self.groups):
            return False
        if not self.all_resources:
            if a.subresource:
                combined = f"{a.resource}/{a.subresource}"
                if not (combined in self.resources or f"*/{a.subresource}" in self.resources
                        or f"{a.resource}/*" in self.resources):
                    return False
            elif a.resource not in self.resources:
                return False
        return self.all_names or a.name in self.names


class RbacSource(Protocol):
    """Where RBAC objects come from: the watch caches in the apiserver, lists in unit tests."""

    def generation(self) -> Any: ...

    def objects(self) -> tuple[list[Obj], list[Obj], list[Obj], list[Obj]]:
        """(cluster roles, roles, cluster role bindings, role bindings)."""
        ...

    def synced(self) -> bool:
        """Has every source listed once (false right after an apiserver start)?"""
        ...


@dataclass(frozen=True)
class StaticRbac:
    cluster_roles: list[Obj]
    roles: list[Obj]
    cluster_role_bindings: list[Obj]
    role_bindings: list[Obj]

    synced_: bool = True

    def generation(self) -> Any:
        return 0

    def objects(self) -> tuple[list[Obj], list[Obj], list[Obj], list[Obj]]:
        return self.cluster_roles, self.roles, self.cluster_role_bindings, self.role_bindings

    def synced(self) -> bool:
        return self.synced_


Grant = tuple[str, tuple[Rule, ...]]  # (how upstream's reason names it, the rules)


def _subject_keys(subject: Obj, binding_namespace: str) -> str | None:
    kind, name = subject.get("kind"), subject.get("name") or ""
    if kind == "User":
        return "u:" + name
    if kind == "Group":
        return "g:" + name
    if kind == "ServiceAccount":
        return "u:" + service_account_user(subject.get("namespace") or binding_namespace, name)
    return None


def _describe_subject(subject: Obj, binding_namespace: str) -> str:
    kind = subject.get("kind")
    if kind == "ServiceAccount":
        return f'ServiceAccount "{subject.get("name")}/{subject.get("namespace") or binding_namespace}"'
    return f'{kind} "{subject.get("name")}"'


class RBACAuthorizer:
    CACHE_SIZE = 65536

    def __init__(self, source: RbacSource):
        self.source = source
        self._generation: Any = object()
        self._cluster: dict[str, list[Grant]] = {}
        self._namespaced: dict[str, dict[str, list[Grant]]] = {}
        self._decisions: dict[tuple[Any, ...], tuple[str, str]] = {}

    def _refresh(self) -> None:
        generation = self.source.generation()
        if generation == self._generation:
            return
        cluster_roles, roles, cluster_bindings, bindings = self.source.objects()
        by_cluster_role = {r["metadata"]["name"]: tuple(Rule(x) for x in r.get("rules") or ()) for r in cluster_roles}
        by_role = {(r["metadata"].get("namespace"), r["metadata"]["name"]): tuple(Rule(x) for x in r.get("rules") or ())
                   for r in roles}
        cluster: dict[str, list[Grant]] = {}
        namespaced: dict[str, dict[str, list[Grant]]] = {}
        for binding in cluster_bindings:
            ref = binding.get("roleRef") or {}
            rules = by_cluster_role.get(ref.get("name"), ()) if ref.get("kind") == "ClusterRole" else ()
            for subject in binding.get("subjects") or ():
                key = _subject_keys(subject, "")
                if key is not None and rules:
                    why = (f'RBAC: allowed by ClusterRoleBinding "{binding["metadata"]["name"]}" of ClusterRole '
                           f'"{ref.get("name")}" to {_describe_subject(subject, "")}')
                    cluster.setdefault(key, []).append((why, rules))
        for binding in bindings:
            namespace = binding["metadata"].get("namespace") or ""
            ref = binding.get("roleRef") or {}
            if ref.get("kind") == "ClusterRole":
                rules = by_cluster_role.get(ref.get("name"), ())
            else:
                rules = by_role.get((namespace, ref.get("name")), ())
            for subject in binding.get("subjects") or ():
                key = _subject_keys(subject, namespace)
                if key is not None and rules:
                    why = (f'RBAC: allowed by RoleBinding "{binding["metadata"]["name"]}/{namespace}" of '
                           f'{ref.get("kind")} "{ref.get("name")}" to {_describe_subject(subject, namespace)}')
                    namespaced.setdefault(namespace, {}).setdefault(key, []).append((why, rules))
        self._cluster, self._namespaced = cluster, namespaced
        self._decisions = {}
        self._generation = generation

    def authorize(self, a: Attributes) -> tuple[str, str]:
        self._refresh()
        key = a.key()
        hit = self._decisions.get(key)
        if hit is not None:
            return hit
        decision = self._decide(a)
        if decision[0] == NO_OPINION and not self.source.synced():
            # upstream's withNotSyncedReason: a request before the caches listed is refused with a reason
            # that says so (a client retries a 403), and the decision is not remembered
            return NO_OPINION, "informers not synced"
        if len(self._decisions) >= self.CACHE_SIZE:
            self._decisions.clear()
        self._decisions[key] = decision
        return decision

    def _decide(self, a: Attributes) -> tuple[str, str]:
        keys = ["u:" + a.user.name, *("g:" + g for g in a.user.groups)]
        for index in (self._cluster, self._namespaced.get(a.namespace) if a.namespace else None):
            if not index:
                continue
            for key in keys:
                for why, rules in index.get(key, ()):
                    for rule in rules:
                        if rule.allows(a):
                            return ALLOW, why
        return NO_OPINION, ""

    def rules_for(self, user: UserInfo, namespace: str) -> list[Obj]:
        """Every PolicyRule that applies to user in namespace ("" = the cluster-wide ones only), as
        upstream's DefaultRuleResolver.RulesFor: cluster role bindings first, then the namespace's
        role bindings. The escalation checks and SelfSubjectRulesReview read it."""
        self._refresh()
        keys = ["u:" + user.name, *("g:" + g for g in user.groups)]
        out: list[Obj] = []
        for index in (self._cluster, self._namespaced.get(namespace) if namespace else None):
            for key in keys:
                for _, rules in (index or {}).get(key, ()):
                    out.extend(r.raw for r in rules)
        return out


# -- Node --------------------------------------------------------------------------------------------


def _selects_node(field_selector: str, node: str) -> bool:
    """Does a field selector pin spec.nodeName to node (`spec.nodeName=node`, `==`, among others)?"""
    for term in field_selector.split(","):
        key, op, value = term.partition("==") if "==" in term else term.partition("=")
        if op and key.strip() == "spec.nodeName" and not key.endswith("!") and value.strip() == node:
            return True
    return False


def _selected_name(field_selector: str) -> str:
    """The one name a `metadata.name=X` field selector picks (what a kubelet's informer of one object sends)."""
    key, sep, value = field_selector.partition("=")
    value = value.removeprefix("=")
    return value if sep and key.strip() == "metadata.name" and "," not in value else ""


class NodeAuthorizer:
    """Upstream's Node authorizer (with AuthorizeNodeWithSelectors): a kubelet reaches its own Node,
    its own Lease, the pods bound to it, and events; anything else is left to RBAC (which binds
    nothing to system:nodes by default, so it is denied)."""

    READ = frozenset({"get", "list", "watch"})
    WRITE = frozenset({"update", "patch", "delete"})

    def __init__(self, pod_node: Callable[[str, str], str | None],
                 node_refers_to: Callable[[str, str, str, str], bool] = lambda *_: False):
        self.pod_node = pod_node  # (namespace, name) -> spec.nodeName ("" unbound), None if not in the cache
        # (node, resource, namespace, name): is the object referred to by a pod bound to node?
        self.node_refers_to = node_refers_to

    def authorize(self, a: Attributes) -> tuple[str, str]:
        node = a.user.node_name
        if node is None or not a.resource_request:
            return NO_OPINION, ""
        group, resource, sub, verb = a.api_group, a.resource, a.subresource, a.verb
        if group == "" and resource == "nodes":
            if not sub and verb in self.READ:
                return ALLOW, ""
            if not sub and verb == "create":
                return ALLOW, ""  # NodeRestriction admission checks the name in the body
            if sub in ("", "status") and (verb in self.WRITE or (sub == "status" and verb == "get")):
                if a.name == node:
                    return ALLOW, ""
                return NO_OPINION, f"node '{node}' cannot modify node '{a.name}'"
            return NO_OPINION, ""
        if group == "" and resource == "pods":
            if not sub and verb in ("list", "watch"):
                if _selects_node(a.field_selector, node):
                    return ALLOW, ""
                return NO_OPINION, f"can only list/watch pods with spec.nodeName field selector set to '{node}'"
            if (not sub and verb in ("get", "delete")) or (sub == "status" and verb in ("get", "update", "patch")):
                bound = self.pod_node(a.namespace, a.name)
                # a pod gone from the cache: let the store answer 404 (a kubelet confirming a deletion
                # expects it); writes to a pod still stored are checked again by NodeRestriction
                if bound == node or bound is None:
                    return ALLOW, ""
            if sub == "eviction" and verb == "create":  # upstream: a kubelet may evict its own pods
                bound = self.pod_node(a.namespace, a.name)
                if bound == node or bound is None:
                    return ALLOW, ""
            return NO_OPINION, f"no relationship found between node '{node}' and this object"
        if group in ("", "events.k8s.io") and resource == "events" and verb in ("create", "update", "patch"):
            return ALLOW, ""
        if verb == "create" and ((group == "authorization.k8s.io" and resource == "subjectaccessreviews")
                                 or (group == "authentication.k8s.io" and resource == "tokenreviews")):
            return ALLOW, ""  # upstream NodeRules: the kubelet API's delegated authentication and authorization
        if group == "" and resource in ("secrets", "configmaps") and not sub:
            # upstream: get only (and list/watch of that one name), of an object a pod on this node uses
            name = a.name if verb == "get" else _selected_name(a.field_selector) if verb in ("list", "watch") else ""
            if name and self.node_refers_to(node, resource, a.namespace, name):
                return ALLOW, ""
            return NO_OPINION, f"no relationship found between node '{node}' and this object"
        if group == "" and resource in ("persistentvolumeclaims", "persistentvolumes") and verb == "get" \
                and (not sub or (sub == "status" and resource == "persistentvolumeclaims")):
            # upstream's graph: pod -> claim -> volume; a claim's status also to update (expansion)
            if a.name and self.node_refers_to(node, resource, a.namespace or "", a.name):
                return ALLOW, ""
            return NO_OPINION, f"no relationship found between node '{node}' and this object"
        if group == "" and resource == "persistentvolumeclaims" and sub == "status" and verb in ("update", "patch"):
            if a.name and self.node_refers_to(node, resource, a.namespace or "", a.name):
                return ALLOW, ""
            return NO_OPINION, f"no relationship found between node '{node}' and this object"
        if group == "" and resource == "serviceaccounts":
            # upstream authorizeCreateToken: a token of an account one of its pods runs as
            if verb != "create" or not a.name:
                return NO_OPINION, "can only create tokens for individual service accounts"
            if sub != "token":
                return NO_OPINION, "can only create token subresource of serviceaccount"
            if self.node_refers_to(node, resource, a.namespace or "", a.name):
                return ALLOW, ""
            return NO_OPINION, f"no relationship found between node '{node}' and this object"
        if group == "" and resource == "services" and not sub and verb in self.READ:
            return ALLOW, ""  # upstream NodeRules: the kubelet's service environment variables
        if group == "coordination.k8s.io" and resource == "leases" and not sub:
            if a.namespace == NODE_LEASE_NAMESPACE and verb in ("get", "create", "update", "patch", "delete") \
                    and (verb == "create" or a.name == node):
                return ALLOW, ""
            return NO_OPINION, "can only access node lease with the same name as the requesting node"
        return NO_OPINION, ""


# -- the union ---------------------------------------------------------------------------------------


class AlwaysAllow:
    def authorize(self, a: Attributes) -> tuple[str, str]:
        return ALLOW, ""


class Authorizer:
    """--authorization-mode: the deciders in order; the first ALLOW or DENY wins, after
    system:masters (always allowed)."""

    def __init__(self, deciders: Iterable[Decider]):
        self.deciders = list(deciders)

    def authorize(self, a: Attributes) -> tuple[bool, str]:
        if a.user.is_master:
            return True, ""
        reasons = []
        for decider in self.deciders:
            decision, reason = decider.authorize(a)
            if decision == ALLOW:
                return True, reason
            if decision == DENY:
                return False, reason
            if reason:
                reasons.append(reason)
        return False, ", ".join(reasons)

    def rules_for(self, user: UserInfo, namespace: str) -> tuple[list[Obj], list[Obj], bool, list[str]]:
        """What user may do in namespace (upstream's union RuleResolver, behind SelfSubjectRulesReview):
        (resource rules, non-resource rules, incomplete, evaluation errors)."""
        resource_rules: list[Obj] = []
        url_rules: list[Obj] = []
        incomplete = False
        errs: list[str] = []
        # (system:masters is no rule resolver upstream: its rules come from the cluster-admin binding)
        for decider in self.deciders:
            if isinstance(decider, AlwaysAllow):
                resource_rules.append({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]})
                url_rules.append({"verbs": ["*"], "nonResourceURLs": ["*"]})
            elif isinstance(decider, NodeAuthorizer):
                if user.node_name is not None:
                    incomplete = True  # nodes do not have fully enumerated permissions
                    errs.append("node authorizer does not support user rule resolution")
            elif isinstance(decider, RBACAuthorizer):
                for rule in decider.rules_for(user, namespace):
                    if rule.get("resources"):
                        resource_rules.append({k: list(rule[k]) for k in ("verbs", "apiGroups", "resources",
                                                                          "resourceNames") if rule.get(k)})
                    if rule.get("nonResourceURLs"):
                        url_rules.append({"verbs": list(rule.get("verbs") or ()),
                                          "nonResourceURLs": list(rule["nonResourceURLs"])})
        return resource_rules, url_rules, incomplete, errs
