"""The PodSecurity admission plugin (upstream: staging/src/k8s.io/pod-security-admission/admission/admission.go
and plugin/pkg/admission/security/podsecurity/admission.go).

- pods (create; updates that change an image or a seccomp annotation, or add a container; any pod
  subresource but the read-only and status-like ones): enforce refuses with 403
  `pods "x" is forbidden: violates PodSecurity "restricted:latest": ...`; audit adds the audit
  annotation `pod-security.kubernetes.io/audit-violations`; warn answers `Warning:` headers
  `would violate PodSecurity "...": ...` (not on a request already refused).
- workloads with a pod template (Deployments, ReplicaSets, ... as served): warn and audit only.
- namespaces: invalid pod-security labels are refused with 422 on create (and on update when they
  changed); a stricter enforce level warns about the existing pods that would violate it (at
  most 3,000 pods, one second), as `kubectl label` shows.
Exempt namespaces, users and runtime classes are not evaluated (audit annotation `exempt`).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from apiserver import errors
from apiserver.admission.interfaces import AdmissionAttributes
from apiserver.admission.podsecurity.api import (
    LABELS,
    LEVEL_PRIVILEGED,
    LevelVersion,
    Policy,
    PolicyError,
    compare_levels,
    policy_to_evaluate,
)
from apiserver.admission.podsecurity.config import PodSecurityConfiguration
from apiserver.admission.podsecurity.policy import Aggregate, evaluate_pod, volume_name_read
from apiserver.validation import FieldError
from apiserver.warning import add_audit_annotation, add_warning
from machinery.types import Obj

AUDIT_PREFIX = "pod-security.kubernetes.io/"

# pod subresources that cannot change what a pod runs (upstream's ignoredPodSubresources)
IGNORED_POD_SUBRESOURCES = frozenset({"exec", "attach", "binding", "eviction", "log", "portforward", "proxy", "status"})
# where each pod-template-bearing kind keeps its template (upstream's DefaultPodSpecExtractor)
TEMPLATE_PATHS: dict[tuple[str, str], tuple[str, ...]] = {
    ("", "podtemplates"): ("template",),
    ("", "replicationcontrollers"): ("spec", "template"),
    ("apps", "replicasets"): ("spec", "template"),
    ("apps", "deployments"): ("spec", "template"),
    ("apps", "statefulsets"): ("spec", "template"),
    ("apps", "daemonsets"): ("spec", "template"),
    ("batch", "jobs"): ("spec", "template"),
    ("batch", "cronjobs"): ("spec", "jobTemplate", "spec", "template"),
}
NAMESPACE_MAX_PODS_TO_CHECK = 3000
NAMESPACE_POD_CHECK_TIMEOUT = 1.0
_SECCOMP_POD_ANNOTATION = "seccomp.security.alpha.kubernetes.io/pod"
_SECCOMP_CONTAINER_PREFIX = "container.seccomp.security.alpha.kubernetes.io/"


# distinct (level, spec, annotations) verdicts kept, and the bytes of their keys; past either the cache starts
# again (so specs written to fill it cost at most this much memory); a larger spec is evaluated each time
VERDICT_CACHE_SIZE = 1024
VERDICT_CACHE_BYTES = 4 << 20
VERDICT_KEY_MAX_BYTES = 16 << 10
_ALLOWED = Aggregate(())


def _d(v: Any) -> Obj:
    return v if isinstance(v, dict) else {}


_CONTAINER_KEYS = ("initContainers", "containers", "ephemeralContainers")


def _key_spec(spec: Obj) -> Obj:
    """The spec as far as a verdict reads it: without the containers' volumeMounts, and without the names of
    the volumes no answer names (policy.volume_name_read). The ServiceAccount plugin mounts a token volume
    named `kube-api-access-<5 random>` in every container of a new pod, which would make each replica of one
    template a spec of its own."""
    volumes = spec.get("volumes")
    if not isinstance(volumes, list) or not volumes:
        return spec  # nothing named at random, nothing mounted: the spec itself
    keyed = dict(spec)
    keyed["volumes"] = [{k: x for k, x in v.items() if k != "name"}
                        if isinstance(v, dict) and not volume_name_read(v) else v for v in volumes]
    for key in _CONTAINER_KEYS:
        listed = spec.get(key)
        if isinstance(listed, list):
            keyed[key] = [{k: x for k, x in c.items() if k != "volumeMounts"}
                          if isinstance(c, dict) and "volumeMounts" in c else c for c in listed]
    return keyed


def verdict_key(meta: Obj, spec: Obj) -> tuple[bytes, bytes] | None:
    """What a verdict depends on, as bytes: the spec (as _key_spec leaves it) and the annotations, as JSON in
    their own order (the pods of one template keep it); None for what does not encode (not JSON, or too large
    to be worth it)."""
    try:
        spec_json = orjson.dumps(_key_spec(spec))
        annotations = meta.get("annotations")
        annotations_json = orjson.dumps(annotations) if annotations else b""
    except (orjson.JSONEncodeError, TypeError):
        return None
    if len(spec_json) + len(annotations_json) > VERDICT_KEY_MAX_BYTES:
        return None
    return spec_json, annotations_json


def _username(user: Any) -> str:
    name = getattr(user, "name", None)
    return name if isinstance(name, str) else str(user or "")


def is_significant_pod_update(pod: Obj, old: Obj) -> bool:
    """Only an image, a seccomp annotation or an added container can change what the policy sees
    of a pod that exists (the rest of its spec is immutable)."""
    ann, old_ann = _d(_d(pod.get("metadata")).get("annotations")), _d(_d(old.get("metadata")).get("annotations"))
    if ann.get(_SECCOMP_POD_ANNOTATION) != old_ann.get(_SECCOMP_POD_ANNOTATION):
        return True
    spec, old_spec = _d(pod.get("spec")), _d(old.get("spec"))

    def changed(c: Obj, oc: Obj) -> bool:
        key = _SECCOMP_CONTAINER_PREFIX + str(c.get("name"))
        return c.get("image") != oc.get("image") or ann.get(key) != old_ann.get(key)

    for key in ("containers", "initContainers"):
        new_list, old_list = spec.get(key) or [], old_spec.get(key) or []
        if len(new_list) != len(old_list):
            return True
        if any(changed(_d(c), _d(oc)) for c, oc in zip(new_list, old_list, strict=True)):
            return True
    old_ephemeral = {_d(c).get("name"): _d(c) for c in old_spec.get("ephemeralContainers") or []}
    for c in spec.get("ephemeralContainers") or []:
        oc = old_ephemeral.get(_d(c).get("name"))
        if oc is None or changed(_d(c), oc):
            return True
    return False


class PodSecurity:
    def __init__(self, config: PodSecurityConfiguration, *,
                 namespace_labels: Callable[[str], Awaitable[dict[str, str] | None]],
                 pods_in_namespace: Callable[[str], list[bytes]]):
        self.config = config
        self.namespace_labels = namespace_labels
        self.pods_in_namespace = pods_in_namespace
        # every pod write asks for its namespace's policy: the few distinct label values are parsed once
        self._policies: dict[tuple[str | None, ...], tuple[Policy, PolicyError | None]] = {}
        # the verdicts on the pod specs seen lately, by level and version: the replicas of one template
        # are evaluated once (see verdict())
        self._verdicts: dict[tuple[LevelVersion, bytes, bytes], Aggregate] = {}
        self._verdict_bytes = 0
        self._names: dict[LevelVersion, str] = {}

    def policy(self, labels: dict[str, str] | None) -> tuple[Policy, PolicyError | None]:
        if not labels:
            return self.config.defaults, None
        values = tuple(map(labels.get, LABELS))
        found = self._policies.get(values)
        if found is None:
            if len(self._policies) >= 1024:
                self._policies.clear()
            found = self._policies[values] = policy_to_evaluate(labels, self.config.defaults)
        return found

    async def validate(self, a: AdmissionAttributes) -> None:
        if a.operation not in ("CREATE", "UPDATE") or a.obj is None:
            return
        info = a.store.info
        if info.group == "" and info.plural == "namespaces":
            self._validate_namespace(a)
        elif info.group == "" and info.plural == "pods":
            await self._validate_pod(a)
        elif (info.group, info.plural) in TEMPLATE_PATHS and not a.subresource:
            await self._validate_pod_controller(a, TEMPLATE_PATHS[(info.group, info.plural)])

    def verdict(self, lv: LevelVersion, meta: Obj, spec: Obj, key: tuple[bytes, bytes] | None) -> Aggregate:
        """evaluate_pod, remembered: the checks are pure functions of the spec and the annotations (the
        AppArmor ones), so the pods of one template (a ReplicaSet's, a Job's) share one verdict. `key` is
        their JSON (verdict_key); None: not cached. Privileged has no checks."""
        if lv.level == LEVEL_PRIVILEGED:
            return _ALLOWED
        if key is None:
            return evaluate_pod(lv, meta, spec)
        cache_key = (lv, *key)
        found = self._verdicts.get(cache_key)
        if found is None:
            found = evaluate_pod(lv, meta, spec)
            size = len(key[0]) + len(key[1])
            if len(self._verdicts) >= VERDICT_CACHE_SIZE or self._verdict_bytes + size > VERDICT_CACHE_BYTES:
                self._verdicts.clear()
                self._verdict_bytes = 0
            self._verdicts[cache_key] = found
            self._verdict_bytes += size
        return found

    # -- exemptions --------------------------------------------------------------------------------

    def _exemption(self, a: AdmissionAttributes) -> str | None:
        if a.namespace and a.namespace in self.config.exempt_namespaces:
            return "namespace"
        username = _username(a.user)
        if username and username in self.config.exempt_usernames:
            return "user"
        return None

    # -- namespaces --------------------------------------------------------------------------------

    def _validate_namespace(self, a: AdmissionAttributes) -> None:
        if a.subresource:
            return
        assert a.obj is not None
        labels = _d(_d(a.obj.get("metadata")).get("labels"))
        policy, error = self.policy(labels)
        if a.operation == "CREATE" or a.old is None:
            if error is not None:
                raise self._invalid(a, error)
            return
        old_labels = _d(_d(a.old.get("metadata")).get("labels"))
        old_policy, old_error = self.policy(old_labels)
        if error is not None and (old_error is None or str(error) != str(old_error)):
            raise self._invalid(a, error)
        new, old = policy.enforce, old_policy.enforce
        if new == old or new.level == LEVEL_PRIVILEGED:
            return
        if new.version == old.version and compare_levels(new.level, old.level) < 1:
            return  # relaxed
        if a.name in self.config.exempt_namespaces:
            return
        for warning in self._evaluate_pods_in_namespace(a.name, new):
            add_warning(warning)

    @staticmethod
    def _invalid(a: AdmissionAttributes, error: PolicyError) -> errors.ApiError:
        causes = [FieldError("FieldValueInvalid", f, why, value, True) for f, value, why in error.causes]
        return errors.invalid(a.store.info, a.name, causes)

    def _evaluate_pods_in_namespace(self, namespace: str, enforce: Any) -> list[str]:
        deadline = time.monotonic() + NAMESPACE_POD_CHECK_TIMEOUT
        pods = self.pods_in_namespace(namespace)
        total = len(pods)
        pods = pods[:NAMESPACE_MAX_PODS_TO_CHECK]
        checked = len(pods)
        by_reason: dict[str, list[Any]] = {}  # reason -> [first pod name, count], in first-seen order
        for i, raw in enumerate(pods):
            pod = orjson.loads(raw)
            spec, meta = _d(pod.get("spec")), _d(pod.get("metadata"))
            if spec.get("runtimeClassName") and spec["runtimeClassName"] in self.config.exempt_runtime_classes:
                continue
            result = evaluate_pod(enforce, meta, spec)
            if not result.allowed:
                reason = result.forbidden_reason()
                name = meta.get("name") or ""
                seen = by_reason.setdefault(reason, [name, 0])
                seen[0] = min(seen[0], name)
                seen[1] += 1
            if time.monotonic() > deadline:
                checked = i + 1
                break
        warnings: list[str] = []
        if checked < total:
            warnings.append(f"new PodSecurity enforce level only checked against the first {checked} of {total} "
                            f"existing pods")
        if by_reason:
            warnings.append(f'existing pods in namespace "{namespace}" violate the new PodSecurity enforce level '
                            f'"{enforce}"')
        pod_warnings = []
        for reason, (name, count) in by_reason.items():
            if count == 1:
                pod_warnings.append(f"{name}: {reason}")
            elif count == 2:
                pod_warnings.append(f"{name} (and 1 other pod): {reason}")
            else:
                pod_warnings.append(f"{name} (and {count - 1} other pods): {reason}")
        return warnings + sorted(pod_warnings)

    # -- pods and their templates ------------------------------------------------------------------

    async def _validate_pod(self, a: AdmissionAttributes) -> None:
        if a.subresource in IGNORED_POD_SUBRESOURCES:
            return
        exemption = self._exemption(a)
        if exemption is not None:
            add_audit_annotation(AUDIT_PREFIX + "exempt", exemption)
            return
        assert a.obj is not None
        if a.operation == "UPDATE" and a.old is not None and not is_significant_pod_update(a.obj, a.old):
            return
        await self._evaluate(a, _d(a.obj.get("metadata")), _d(a.obj.get("spec")), enforce=True)

    async def _validate_pod_controller(self, a: AdmissionAttributes, path: tuple[str, ...]) -> None:
        exemption = self._exemption(a)
        if exemption is not None:
            add_audit_annotation(AUDIT_PREFIX + "exempt", exemption)
            return
        template: Any = a.obj
        for key in path:
            template = _d(template).get(key)
        if not isinstance(template, dict):
            return  # a kind whose template is optional and absent
        await self._evaluate(a, _d(template.get("metadata")), _d(template.get("spec")), enforce=False)

    async def _evaluate(self, a: AdmissionAttributes, meta: Obj, spec: Obj, *, enforce: bool) -> None:
        """Upstream's EvaluatePod: enforce (pods only), then audit, then warn, reusing a result when
        two modes share a level and version."""
        policy, error = self.policy(await self.namespace_labels(a.namespace or ""))
        if error is None and policy.audit.level == policy.warn.level == LEVEL_PRIVILEGED \
                and (not enforce or policy.enforce.level == LEVEL_PRIVILEGED):
            if enforce:
                add_audit_annotation(AUDIT_PREFIX + "enforce-policy", str(policy.enforce))
            return
        runtime_class = spec.get("runtimeClassName")
        if runtime_class and runtime_class in self.config.exempt_runtime_classes:
            add_audit_annotation(AUDIT_PREFIX + "exempt", "runtimeClass")
            return
        if error is not None:
            add_audit_annotation(AUDIT_PREFIX + "error", f"Failed to parse policy: {error}")
        # each distinct level and version evaluated once (the modes often share one); verdict() answers
        # privileged at once and the others from its cache
        key = verdict_key(meta, spec)
        refusal: errors.ApiError | None = None
        enforced: Aggregate | None = None
        if enforce:
            add_audit_annotation(AUDIT_PREFIX + "enforce-policy", self._name(policy.enforce))
            enforced = self.verdict(policy.enforce, meta, spec, key)
            if not enforced.allowed:
                refusal = errors.forbidden(a.store.info, a.name, f'violates PodSecurity "{policy.enforce}": '
                                                                f"{enforced.forbidden_detail()}")
        audited = enforced if enforced is not None and policy.audit == policy.enforce \
            else self.verdict(policy.audit, meta, spec, key)
        if not audited.allowed:
            add_audit_annotation(AUDIT_PREFIX + "audit-violations",
                                 f'would violate PodSecurity "{policy.audit}": {audited.forbidden_detail()}')
        if refusal is not None:
            raise refusal  # no warnings on a request that is refused
        if policy.warn == policy.audit:
            warned = audited
        elif enforced is not None and policy.warn == policy.enforce:
            warned = enforced
        else:
            warned = self.verdict(policy.warn, meta, spec, key)
        if not warned.allowed:
            add_warning(f'would violate PodSecurity "{policy.warn}": {warned.forbidden_detail()}')

    def _name(self, lv: LevelVersion) -> str:
        """str(lv), remembered: every pod create writes its enforce level to the audit annotations."""
        name = self._names.get(lv)
        if name is None:
            if len(self._names) >= 1024:
                self._names.clear()
            name = self._names[lv] = str(lv)
        return name
