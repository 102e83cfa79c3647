"""No privilege escalation through RBAC objects (upstream: pkg/registry/rbac/validation/rule.go
ConfirmNoEscalation, policy_comparator.go Covers, compact.go CompactRules, pkg/registry/rbac/
escalation_check.go and the policybased storages of roles, clusterroles, rolebindings and
clusterrolebindings).

- A Role or ClusterRole may be written only with rules its writer already holds (in the role's
  namespace; cluster-wide for a ClusterRole), unless the writer may `escalate` roles/clusterroles.
  Writing a ClusterRole that has (or had) an aggregationRule needs full authority (`*` on everything).
- A RoleBinding or ClusterRoleBinding may be written only by someone who holds every rule of the
  role it refers to (in the binding's namespace), unless they may `bind` that role (resourceName
  aware).
- system:masters may do both; a write that changes only what the garbage collector changes
  (ownerReferences, finalizers, deletion fields) is not checked.

The check runs in the store's admission step on create, update and patch alike, on the object
mutating admission made, with the requesting user (after impersonation): see RbacPolicy.
"""

from __future__ import annotations

import copy

from apiserver import errors
from apiserver.admission.interfaces import Admission, AdmissionAttributes
from apiserver.auth.authz import Attributes, Authorizer, RBACAuthorizer
from apiserver.registry.generic import Store
from machinery.authn.user import UserInfo
from machinery.types import Obj

RBAC_GROUP = "rbac.authorization.k8s.io"
ROLE_RESOURCES = frozenset({"roles", "clusterroles"})
BINDING_RESOURCES = frozenset({"rolebindings", "clusterrolebindings"})
FULL_AUTHORITY: list[Obj] = [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]},
                             {"verbs": ["*"], "nonResourceURLs": ["*"]}]


# -- covers (policy_comparator.go) ---------------------------------------------------------------------


def breakdown_rule(rule: Obj) -> list[Obj]:
    """One rule as rules of at most one verb, one group, one resource and one resource name."""
    out: list[Obj] = []
    names = rule.get("resourceNames") or []
    for group in rule.get("apiGroups") or []:
        for resource in rule.get("resources") or []:
            for verb in rule.get("verbs") or []:
                if names:
                    out.extend({"apiGroups": [group], "resources": [resource], "verbs": [verb],
                                "resourceNames": [n]} for n in names)
                else:
                    out.append({"apiGroups": [group], "resources": [resource], "verbs": [verb]})
    for url in rule.get("nonResourceURLs") or []:
        out.extend({"nonResourceURLs": [url], "verbs": [verb]} for verb in rule.get("verbs") or [])
    return out


def _resources_cover(owner: list[str], wanted: list[str]) -> bool:
    if "*" in owner or set(wanted) <= set(owner):
        return True
    for path in wanted:
        if path in owner:
            continue
        _, slash, sub = path.partition("/")
        if not slash or f"*/{sub}" not in owner:
            return False
    return True


def _url_covers(owner: str, path: str) -> bool:
    return owner == path or (owner.endswith("*") and path.startswith(owner.rstrip("*")))


def rule_covers(owner: Obj, sub: Obj) -> bool:
    """Does owner (any rule) cover sub (a broken-down rule)?"""
    owner_verbs, owner_groups = owner.get("verbs") or [], owner.get("apiGroups") or []
    owner_names, sub_names = owner.get("resourceNames") or [], sub.get("resourceNames") or []
    owner_urls = owner.get("nonResourceURLs") or []
    if not ("*" in owner_verbs or set(sub.get("verbs") or ()) <= set(owner_verbs)):
        return False
    if not ("*" in owner_groups or set(sub.get("apiGroups") or ()) <= set(owner_groups)):
        return False
    if not _resources_cover(owner.get("resources") or [], sub.get("resources") or []):
        return False
    if not all(any(_url_covers(o, p) for o in owner_urls) for p in sub.get("nonResourceURLs") or ()):
        return False
    return not owner_names or (bool(sub_names) and set(sub_names) <= set(owner_names))


def covers(owner_rules: list[Obj], servant_rules: list[Obj]) -> tuple[bool, list[Obj]]:
    """(whether owner_rules cover every servant rule, the broken-down rules they do not cover)."""
    missing = [sub for rule in servant_rules for sub in breakdown_rule(rule)
               if not any(rule_covers(owner, sub) for owner in owner_rules)]
    return not missing, missing


# -- the message (compact.go, PolicyRule.CompactString) ------------------------------------------------


def compact_rules(rules: list[Obj]) -> list[Obj]:
    """Simple rules (one group, one resource, at most one name) of the same resource merge their verbs."""
    out: list[Obj] = []
    simple: dict[tuple[str, str, str | None], Obj] = {}
    for rule in rules:
        names = rule.get("resourceNames") or []
        extra = set(rule) - {"apiGroups", "resources", "verbs", "resourceNames"}
        if (len(names) > 1 or rule.get("nonResourceURLs") or len(rule.get("apiGroups") or []) != 1
                or len(rule.get("resources") or []) != 1 or any(rule.get(k) for k in extra)):
            out.append(rule)
            continue
        key = (rule["apiGroups"][0], rule["resources"][0], names[0] if names else None)
        if key in simple:
            simple[key]["verbs"] = [*simple[key].get("verbs", []), *(rule.get("verbs") or [])]
        else:
            simple[key] = copy.deepcopy(rule)
    return out + list(simple.values())


def _go_quoted(values: list[str]) -> str:
    """Go's %q of a []string: ["a" "b"]."""
    return "[" + " ".join('"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' for v in values) + "]"


def compact_string(rule: Obj) -> str:
    parts = [f"{label}:{_go_quoted(rule[key])}"
             for label, key in (("APIGroups", "apiGroups"), ("Resources", "resources"),
                                ("NonResourceURLs", "nonResourceURLs"), ("ResourceNames", "resourceNames"),
                                ("Verbs", "verbs"))
             if rule.get(key)]
    return "{" + ", ".join(parts) + "}"


def escalation_message(user: UserInfo, owner_rules: list[Obj], rules: list[Obj]) -> str | None:
    """ConfirmNoEscalation: None when owner_rules cover rules, else upstream's message."""
    ok, missing = covers(owner_rules, rules)
    if ok:
        return None
    described = sorted({compact_string(r) for r in compact_rules(missing)})
    return (f"user {_go_quoted([user.name])[1:-1]} (groups={_go_quoted(list(user.groups))}) is attempting to grant "
            f"RBAC permissions not currently held:\n" + "\n".join(described))


def only_gc_fields_changed(new: Obj, old: Obj | None) -> bool:
    """IsOnlyMutatingGCFields: the write changes only ownerReferences, finalizers and deletion fields."""
    if old is None:
        return False
    stripped = []
    for obj in (new, old):
        copied = copy.deepcopy(obj)
        meta = copied.get("metadata") or {}
        for key in ("ownerReferences", "finalizers", "selfLink", "deletionTimestamp", "deletionGracePeriodSeconds",
                    "resourceVersion", "managedFields", "generation"):
            meta.pop(key, None)
        stripped.append(copied)
    return stripped[0] == stripped[1]


def _aggregates(role: Obj | None) -> bool:
    return bool(((role or {}).get("aggregationRule") or {}).get("clusterRoleSelectors"))


# -- the storage step ----------------------------------------------------------------------------------


class RbacPolicy:
    """Stands in front of the admission chain of the four RBAC stores (the check cannot be
    switched off with the admission plugins, as upstream's policybased storage cannot)."""

    def __init__(self, authorizer: Authorizer, resolver: RBACAuthorizer, roles: dict[str, Store],
                 inner: Admission | None):
        self.authorizer = authorizer
        self.resolver = resolver
        self.roles = roles  # "Role" / "ClusterRole" -> its store: a roleRef is read from etcd, as upstream's getter
        self.inner = inner

    async def mutate(self, a: AdmissionAttributes) -> Obj:
        """Upstream checks the object mutating admission made, before the strategy validates it (an
        escalating role that is also invalid is a 403, not a 422)."""
        if self.inner is not None:
            a.obj = await self.inner.mutate(a)
        if a.operation in ("CREATE", "UPDATE") and a.obj is not None and isinstance(a.user, UserInfo):
            await self.check(a, a.user)
        assert a.obj is not None
        return a.obj

    async def validate(self, a: AdmissionAttributes) -> None:
        if self.inner is not None:
            await self.inner.validate(a)

    def _allowed(self, user: UserInfo, verb: str, resource: str, namespace: str, name: str) -> bool:
        allowed, _ = self.authorizer.authorize(Attributes(user, verb, True, "", RBAC_GROUP, "*", resource, "",
                                                          namespace, name))
        return allowed

    async def role_rules(self, kind: str, name: str, namespace: str) -> list[Obj] | None:
        """GetRoleReferenceRules: the rules of the role a roleRef names; None if there is no such role."""
        store = self.roles.get(kind)
        if store is None:
            return None
        try:
            role = await store.get(namespace if store.info.namespaced else None, name)
        except errors.ApiError as e:
            if e.code == 404:
                return None
            raise
        return list(role.get("rules") or [])

    async def check(self, a: AdmissionAttributes, user: UserInfo) -> None:
        info = a.store.info
        obj = a.obj
        assert obj is not None
        if info.group != RBAC_GROUP or user.is_master:  # EscalationAllowed
            return
        if a.operation == "UPDATE" and only_gc_fields_changed(obj, a.old):
            return
        namespace = a.namespace or ""
        if info.plural in ROLE_RESOURCES:
            # RoleEscalationAuthorized asks with the name of the request's URL: none on a create
            if self._allowed(user, "escalate", info.plural, namespace, "" if a.operation == "CREATE" else a.name):
                return
            held = self.resolver.rules_for(user, namespace)
            message = escalation_message(user, held, list(obj.get("rules") or []))
            if message is not None:
                raise errors.forbidden(info, a.name, message)
            # an aggregationRule can gather anything (and keep a role from being tightened): writing a role
            # that has or had one needs full authority
            if info.plural == "clusterroles" and (_aggregates(obj) or _aggregates(a.old)) \
                    and escalation_message(user, held, FULL_AUTHORITY) is not None:
                raise errors.forbidden(info, a.name, "must have cluster-admin privileges to use the aggregationRule")
        elif info.plural in BINDING_RESOURCES:
            ref = obj.get("roleRef") or {}
            kind, role = ref.get("kind") or "", ref.get("name") or ""
            # BindingAuthorized: bind on the role, asked in the binding's namespace
            plural = {"Role": "roles", "ClusterRole": "clusterroles"}.get(kind)
            if plural is None:
                return  # no role to escalate through; validation refuses the kind (422)
            if self._allowed(user, "bind", plural, namespace, role):
                return
            rules = await self.role_rules(kind, role, namespace)
            if rules is None:
                raise errors.ApiError(404, "NotFound", f'{plural}.{RBAC_GROUP} "{role}" not found',
                                      {"name": role, "group": RBAC_GROUP, "kind": plural})
            message = escalation_message(user, self.resolver.rules_for(user, namespace), rules)
            if message is not None:
                raise errors.forbidden(info, a.name, message)
