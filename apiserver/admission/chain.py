"""Admission (upstream: staging/.../apiserver/pkg/admission and plugin/pkg/admission): an ordered
chain the generic store runs on every write that came through the API (internal writes skip it).

Mutating, after the resource's defaults and before its validation:
  LimitRanger                a new pod's containers get the namespace's default requests and limits
                             (limitranger.py; validating too: min, max, maxLimitRequestRatio)
  ServiceAccount             a pod without a service account runs as "default"; a new one gets the
                             kube-api-access projected volume (token, ca.crt, namespace) unless
                             automountServiceAccountToken is false (serviceaccount.py); validating,
                             a new pod's service account must exist (403 "error looking up service
                             account NS/NAME: serviceaccount "NAME" not found"), mirror pods aside
  DefaultStorageClass, StorageObjectInUseProtection
                             a claim's default class, the protection finalizers (storage.py)
  MutatingAdmissionWebhook   MutatingWebhookConfigurations, called one after another over HTTPS
                             with an admission.k8s.io/v1 AdmissionReview; their JSONPatch is
                             applied and the object defaulted again
Validating, after the resource's validation (schema and rules):
  NodeRestriction            a kubelet may write only its own Node (no forbidden labels, no taint
                             changes) and Lease, and the status (or the final delete) of pods
                             bound to it — checked on the objects (noderestriction.py)
  PersistentVolumeClaimResize a claim grows only if bound and its class allows it (storage.py)
  PodSecurity                the Pod Security Standards by namespace label (podsecurity/)
  ValidatingAdmissionWebhook ValidatingWebhookConfigurations, called concurrently; any denial
                             refuses the request

  ResourceQuota              last: a new object's usage charged to the namespace's quotas, refused
                             past spec.hard (resourcequota.py)
  DefaultIngressClass        (mutating) a new Ingress naming no class gets the default IngressClass
                             (defaultingressclass.py)
  Priority                   a new pod's priorityClassName → spec.priority and preemptionPolicy,
                             globalDefault kept unique (priority.py; mutating and validating)

A webhook that cannot be called (refused, timed out, an answer that is not an AdmissionReview)
follows its failurePolicy: Fail refuses the request with 500 `failed calling webhook "NAME": ...`;
Ignore admits it (and logs). Webhook configurations are read from the watch cache and compiled
again only when one changes. A webhook is called for pods and its subresources as the store
sees them: pods/binding and deployments/scale arrive as the parent object (the pod, the
deployment) under operation UPDATE (binding: CREATE), not as Binding or Scale.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import copy
import logging
import ssl
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import orjson

from apiserver import errors
from apiserver.admission import limitranger, resourcequota
from apiserver.admission.defaultingressclass import IngressClasses, set_default_ingress_class
from apiserver.admission.interfaces import AdmissionAttributes
from apiserver.admission.noderestriction import node_restriction
from apiserver.admission.podsecurity.admission import PodSecurity
from apiserver.admission.priority import PriorityClasses, validate_priority_class
from apiserver.admission.priority import admit_pod as admit_pod_priority
from apiserver.admission.serviceaccount import admit_pod as admit_pod_service_account
from apiserver.admission.storage import (
    StorageClasses,
    add_protection_finalizer,
    set_default_storage_class,
    validate_claim_resize,
)
from apiserver.storage.cacher import Cacher
from apiserver.tracing import plugin_span
from apiserver.warning import add_warning
from machinery.authn.user import UserInfo
from machinery.patch import PatchError, json_patch
from machinery.selectors import LabelSelector, SelectorError, selector_from_label_selector
from machinery.types import Obj

if TYPE_CHECKING:
    import aiohttp

log = logging.getLogger(__name__)

MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"
ALL_PLUGINS = ("ServiceAccount", "DefaultStorageClass", "StorageObjectInUseProtection", "MutatingAdmissionWebhook",
               "NodeRestriction", "PersistentVolumeClaimResize", "PodSecurity", "ValidatingAdmissionWebhook",
               "Priority", "LimitRanger", "ResourceQuota", "DefaultIngressClass")
# webhooks are never called for their own configurations (upstream excludes them, so a broken
# webhook can always be removed) nor for access reviews
_NOT_WEBHOOKED = frozenset({"admissionregistration.k8s.io", "authorization.k8s.io"})
_STORAGE_PLURALS = frozenset({"persistentvolumeclaims", "persistentvolumes"})
_REASONS = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 409: "Conflict",
            422: "Invalid", 429: "TooManyRequests", 500: "InternalError"}


# -- webhooks ------------------------------------------------------------------------------------------


@dataclass
class Webhook:
    configuration: str
    name: str
    url: str
    ssl: ssl.SSLContext | None
    rules: list[Obj]
    failure_policy: str
    namespace_selector: LabelSelector | None
    object_selector: LabelSelector | None
    timeout: float
    mutating: bool

    def matches_rule(self, a: AdmissionAttributes) -> bool:
        info = a.store.info
        sub = a.subresource or ""
        operation = "CREATE" if sub == "binding" else a.operation
        for rule in self.rules:
            ops = rule.get("operations") or ()
            if "*" not in ops and operation not in ops:
                continue
            groups, versions = rule.get("apiGroups") or (), rule.get("apiVersions") or ()
            if "*" not in groups and info.group not in groups:
                continue
            if "*" not in versions and info.version not in versions:
                continue
            scope = rule.get("scope") or "*"
            if (scope == "Cluster" and info.namespaced) or (scope == "Namespaced" and not info.namespaced):
                continue
            for resource in rule.get("resources") or ():
                res, _, rsub = resource.partition("/")
                if (res == "*" or res == info.plural) and (rsub == "*" or rsub == sub):
                    return True
        return False


def _ssl_context(ca_bundle: str | None) -> ssl.SSLContext | None:
    if not ca_bundle:
        return None
    try:
        pem = base64.b64decode(ca_bundle, validate=True).decode("ascii")
        return ssl.create_default_context(cadata=pem)
    except (binascii.Error, ValueError, ssl.SSLError) as e:
        log.warning("webhook caBundle is not usable PEM: %s", e)
        return ssl.create_default_context()


def _selector(raw: Obj | None) -> LabelSelector | None:
    if not raw:
        return None
    try:
        selector = selector_from_label_selector(raw)
    except SelectorError as e:
        log.warning("webhook selector %s: %s; it matches nothing", raw, e)
        return LabelSelector.nothing()
    return None if selector.empty else selector


def compile_webhooks(configurations: list[Obj], mutating: bool) -> list[Webhook]:
    """Webhooks in call order: configurations by name, then as listed."""
    out: list[Webhook] = []
    for config in sorted(configurations, key=lambda c: c["metadata"]["name"]):
        for hook in config.get("webhooks") or ():
            client = hook.get("clientConfig") or {}
            url = client.get("url") or ""
            if not url and client.get("service"):
                service = client["service"]
                url = (f"https://{service.get('name')}.{service.get('namespace')}.svc:{service.get('port') or 443}"
                       f"{service.get('path') or ''}")
            out.append(Webhook(config["metadata"]["name"], hook.get("name") or "", url,
                               _ssl_context(client.get("caBundle")), hook.get("rules") or [],
                               hook.get("failurePolicy") or "Fail", _selector(hook.get("namespaceSelector")),
                               _selector(hook.get("objectSelector")), float(hook.get("timeoutSeconds") or 10),
                               mutating))
    return out


class WebhookSource:
    """The webhooks of one configuration kind, as the watch cache holds them."""

    def __init__(self, cacher: Cacher, mutating: bool):
        self.cacher = cacher
        self.mutating = mutating
        self._rv = -1
        self._count = -1
        self._hooks: list[Webhook] = []

    def hooks(self) -> list[Webhook]:
        store = self.cacher.store
        if self.cacher.rv != self._rv or len(store) != self._count:
            self._hooks = compile_webhooks([o.obj() for o in store.values()], self.mutating)
            self._rv, self._count = self.cacher.rv, len(store)
        return self._hooks


def _gvk(a: AdmissionAttributes) -> tuple[Obj, Obj]:
    info = a.store.info
    kind = {"group": info.group, "version": info.version, "kind": info.kind}
    if a.subresource == "eviction":  # the object is the policy/v1 Eviction, as upstream's review says
        kind = {"group": "policy", "version": "v1", "kind": "Eviction"}
    resource = {"group": info.group, "version": info.version, "resource": info.plural}
    return kind, resource


def admission_review(a: AdmissionAttributes, uid: str) -> Obj:
    kind, resource = _gvk(a)
    operation = "CREATE" if a.subresource == "binding" else a.operation
    request: Obj = {"uid": uid, "kind": kind, "resource": resource, "requestKind": kind,
                    "requestResource": resource, "name": a.name, "operation": operation,
                    "userInfo": a.user.to_dict() if isinstance(a.user, UserInfo) else {"username": str(a.user)},
                    "object": a.obj, "oldObject": a.old, "dryRun": a.dry_run,
                    "options": {"kind": f"{operation.capitalize()}Options", "apiVersion": "meta.k8s.io/v1"}}
    if a.namespace:
        request["namespace"] = a.namespace
    if a.subresource:
        request["subResource"] = a.subresource
        request["requestSubResource"] = a.subresource
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


class WebhookCallError(Exception):
    pass


def _denied(hook: Webhook, result: Obj | None) -> errors.ApiError:
    """Upstream's webhookerrors.ToStatusErr."""
    denied_by = f'admission webhook "{hook.name}" denied the request'
    result = result if isinstance(result, dict) else {}
    given = result.get("code")
    code = given if isinstance(given, int) and given >= 400 else 400
    if result.get("message"):
        message = f"{denied_by}: {result['message']}"
    elif result.get("reason"):
        message = f"{denied_by}: {result['reason']}"
    else:
        message = f"{denied_by} without explanation"
    reason = result.get("reason") if isinstance(result.get("reason"), str) and result.get("reason") else None
    return errors.ApiError(code, reason or _REASONS.get(code, "BadRequest"), message)


def _warn(response: Obj) -> None:
    """A webhook's warnings reach the client as Warning headers (upstream: warning.AddWarning)."""
    for text in response.get("warnings") or ():
        if isinstance(text, str):
            add_warning(text)


# -- the chain -----------------------------------------------------------------------------------------


class AdmissionChain:
    """The plugins named in `plugins`, in upstream's order; see the module doc."""

    def __init__(self, plugins: list[str] | tuple[str, ...], *,
                 namespace_labels: Callable[[str], dict[str, str] | None],
                 mutating_webhooks: WebhookSource | None = None, validating_webhooks: WebhookSource | None = None,
                 pod_security: PodSecurity | None = None,
                 service_account_exists: Callable[[str, str], Awaitable[bool]] | None = None,
                 storage_classes: StorageClasses | None = None,
                 service_account: Callable[[str, str], Awaitable[Obj | None]] | None = None,
                 priority_classes: PriorityClasses | None = None,
                 limit_ranges: limitranger.LimitRanges | None = None,
                 quotas: resourcequota.Quotas | None = None,
                 ingress_classes: IngressClasses | None = None):
        unknown = set(plugins) - set(ALL_PLUGINS)
        if unknown:
            raise ValueError(f"unknown admission plugins: {', '.join(sorted(unknown))} "
                             f"(known: {', '.join(ALL_PLUGINS)})")
        self.plugins = frozenset(plugins)
        self.namespace_labels = namespace_labels
        self.service_account_exists = service_account_exists
        self.service_account = service_account  # (namespace, name) -> the ServiceAccount or None
        self.storage_classes = storage_classes
        self.mutating_webhooks = mutating_webhooks if "MutatingAdmissionWebhook" in self.plugins else None
        self.validating_webhooks = validating_webhooks if "ValidatingAdmissionWebhook" in self.plugins else None
        self.pod_security = pod_security if "PodSecurity" in self.plugins else None
        self.priority_classes = priority_classes if "Priority" in self.plugins else None
        self.limit_ranges = limit_ranges if "LimitRanger" in self.plugins else None
        self.quotas = quotas if "ResourceQuota" in self.plugins else None
        self.ingress_classes = ingress_classes if "DefaultIngressClass" in self.plugins else None
        self._session: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    def _http(self) -> aiohttp.ClientSession:
        # imported on the first webhook call: an apiserver with no webhooks never needs the HTTP client (~10 MB)
        import aiohttp

        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=64), trust_env=False,
                                                  json_serialize=lambda o: orjson.dumps(o).decode())
        return self._session

    # -- mutating ----------------------------------------------------------------------------------

    async def mutate(self, a: AdmissionAttributes) -> Obj:
        obj = a.obj
        assert obj is not None
        info = a.store.info
        # what the object is decides which plugins can act on it: the others are not called (each checks
        # again); a pod create passes through LimitRanger, ServiceAccount and Priority only
        core = info.group == ""
        pods = core and info.plural == "pods"
        storage = core and info.plural in _STORAGE_PLURALS
        if self.limit_ranges is not None and (pods or storage):
            with plugin_span("LimitRanger", "mutating", a):
                if limitranger.mutate(a, self.limit_ranges):
                    # defaulted again: the pod's QoS class follows its new resources
                    obj = a.obj = self._reconcile(a, obj)
        if pods and "ServiceAccount" in self.plugins and not a.subresource:
            with plugin_span("ServiceAccount", "mutating", a):
                await self._mutate_service_account(a, obj)
        if pods and self.priority_classes is not None:
            with plugin_span("Priority", "mutating", a):
                await admit_pod_priority(a, self.priority_classes)  # priority.py
        if storage and "DefaultStorageClass" in self.plugins and self.storage_classes is not None:
            with plugin_span("DefaultStorageClass", "mutating", a):
                await set_default_storage_class(a, self.storage_classes)
        if self.ingress_classes is not None and info.plural == "ingresses":
            with plugin_span("DefaultIngressClass", "mutating", a):
                await set_default_ingress_class(a, self.ingress_classes)
        if storage and "StorageObjectInUseProtection" in self.plugins:
            with plugin_span("StorageObjectInUseProtection", "mutating", a):
                add_protection_finalizer(a)
        if self.mutating_webhooks is not None and info.group not in _NOT_WEBHOOKED:
            hooks = [h for h in self.mutating_webhooks.hooks() if self._matches(h, a)]
            if hooks:
                obj = await self._run_mutating(hooks, a)
        return obj

    async def _mutate_service_account(self, a: AdmissionAttributes, obj: Obj) -> None:
        """The ServiceAccount plugin's Admit: the pod's account, and its token volume on create."""
        spec = obj.setdefault("spec", {})
        if not spec.get("serviceAccountName"):
            old_spec = (a.old or {}).get("spec") or {}
            spec["serviceAccountName"] = (spec.get("serviceAccount") or old_spec.get("serviceAccountName")
                                          or "default")
        if a.operation == "CREATE" and self.service_account is not None \
                and MIRROR_POD_ANNOTATION not in ((obj.get("metadata") or {}).get("annotations") or {}):
            account = await self.service_account(a.namespace or "", spec["serviceAccountName"])
            if account is not None:  # a missing one is refused by validate, with upstream's message
                admit_pod_service_account(obj, account)  # the kube-api-access volume (serviceaccount.py)

    async def _run_mutating(self, hooks: list[Webhook], a: AdmissionAttributes) -> Obj:
        obj = a.obj
        assert obj is not None
        changed = False
        for hook in hooks:
            a.obj = obj
            with plugin_span(hook.name, "mutating", a):
                patched = await self._mutating_hook(hook, a, obj)
                if patched is not None:
                    obj = a.obj = patched
                    changed = True
        if changed:
            obj = self._reconcile(a, obj)
        a.obj = obj
        return obj

    async def _mutating_hook(self, hook: Webhook, a: AdmissionAttributes, obj: Obj) -> Obj | None:
        """One mutating webhook: the object it patched, or None when it left it alone."""
        try:
            response = await self._call(hook, a)
        except WebhookCallError as e:
            if hook.failure_policy == "Ignore":
                log.warning("webhook %s failed (failurePolicy Ignore, admitted): %s", hook.name, e)
                return None
            raise errors.internal(f'failed calling webhook "{hook.name}": {e}') from None
        if not response.get("allowed"):
            raise _denied(hook, response.get("status"))
        _warn(response)
        patch = response.get("patch")
        if not patch:
            return None
        if response.get("patchType") not in (None, "JSONPatch"):
            raise errors.internal(f'webhook "{hook.name}" answered with an unsupported patchType '
                                  f'{response.get("patchType")!r}')
        try:
            operations = orjson.loads(base64.b64decode(patch, validate=True))
            patched = json_patch(copy.deepcopy(obj), operations)
        except (binascii.Error, ValueError, PatchError) as e:
            raise errors.internal(f'webhook "{hook.name}" answered with a patch that does not apply: {e}') from None
        if not isinstance(patched, dict):
            raise errors.internal(f'webhook "{hook.name}" patched the object into a {type(patched).__name__}')
        return self._keep_identity(patched, obj)

    @staticmethod
    def _keep_identity(patched: Obj, before: Obj) -> Obj:
        """A webhook may not change what the object is: kind, name, namespace, uid."""
        patched["apiVersion"], patched["kind"] = before["apiVersion"], before["kind"]
        meta, old_meta = patched.setdefault("metadata", {}), before.get("metadata") or {}
        for key in ("name", "namespace", "uid", "creationTimestamp", "resourceVersion", "generation"):
            if key in old_meta:
                meta[key] = old_meta[key]
            else:
                meta.pop(key, None)
        return patched

    @staticmethod
    def _reconcile(a: AdmissionAttributes, obj: Obj) -> Obj:
        """A patched object is checked against the schema and defaulted again, as upstream decodes it."""
        return a.store.redecode(obj, a.operation, a.old, a.subresource)

    # -- validating --------------------------------------------------------------------------------

    async def validate(self, a: AdmissionAttributes) -> None:
        info = a.store.info
        core = info.group == ""  # as in mutate: plugins that cannot act on the object are not called
        pods = core and info.plural == "pods"
        claims = core and info.plural == "persistentvolumeclaims"
        if self.limit_ranges is not None and (pods or claims):
            with plugin_span("LimitRanger", "validating", a):
                limitranger.validate(a, self.limit_ranges)
        if pods and "ServiceAccount" in self.plugins and self.service_account_exists is not None \
                and a.operation == "CREATE" and not a.subresource:
            with plugin_span("ServiceAccount", "validating", a):
                await self._service_account_exists(a)
        if "NodeRestriction" in self.plugins and isinstance(a.user, UserInfo) and a.user.node_name is not None:
            with plugin_span("NodeRestriction", "validating", a):
                self._node_restriction(a, a.user.node_name)
        if claims and "PersistentVolumeClaimResize" in self.plugins and self.storage_classes is not None:
            with plugin_span("PersistentVolumeClaimResize", "validating", a):
                await validate_claim_resize(a, self.storage_classes)
        if self.priority_classes is not None and info.plural in ("pods", "priorityclasses"):
            with plugin_span("Priority", "validating", a):
                validate_priority_class(a, self.priority_classes)
        if self.pod_security is not None:
            with plugin_span("PodSecurity", "validating", a):
                await self.pod_security.validate(a)
        if self.validating_webhooks is not None and a.store.info.group not in _NOT_WEBHOOKED:
            hooks = [h for h in self.validating_webhooks.hooks() if self._matches(h, a)]
            if hooks:
                await self._run_validating(hooks, a)
        if self.quotas is not None:  # last: usage is charged only for what every other plugin admitted
            with plugin_span("ResourceQuota", "validating", a):
                await resourcequota.admit(a, self.quotas)

    async def _validating_hook(self, hook: Webhook, a: AdmissionAttributes) -> Obj:
        with plugin_span(hook.name, "validating", a):
            return await self._call(hook, a)

    async def _run_validating(self, hooks: list[Webhook], a: AdmissionAttributes) -> None:
        results = await asyncio.gather(*(self._validating_hook(h, a) for h in hooks), return_exceptions=True)
        for hook, result in zip(hooks, results, strict=True):
            if isinstance(result, WebhookCallError):
                if hook.failure_policy == "Ignore":
                    log.warning("webhook %s failed (failurePolicy Ignore, admitted): %s", hook.name, result)
                    continue
                raise errors.internal(f'failed calling webhook "{hook.name}": {result}')
            if isinstance(result, BaseException):
                raise result
            if not result.get("allowed"):
                raise _denied(hook, result.get("status"))
            _warn(result)

    async def _service_account_exists(self, a: AdmissionAttributes) -> None:
        """upstream serviceAccount.Validate: a pod runs as an account that exists (mirror pods aside)."""
        assert a.obj is not None and self.service_account_exists is not None
        if MIRROR_POD_ANNOTATION in ((a.obj.get("metadata") or {}).get("annotations") or {}):
            return
        account = (a.obj.get("spec") or {}).get("serviceAccountName") or "default"
        namespace = a.namespace or ""
        if not await self.service_account_exists(namespace, account):
            raise errors.forbidden(a.store.info, a.name, f"error looking up service account {namespace}/{account}: "
                                   f'serviceaccount "{account}" not found')

    @staticmethod
    def _node_restriction(a: AdmissionAttributes, node: str) -> None:
        node_restriction(a, node)  # noderestriction.py

    # -- calling -----------------------------------------------------------------------------------

    def _matches(self, hook: Webhook, a: AdmissionAttributes) -> bool:
        if not hook.matches_rule(a):
            return False
        info = a.store.info
        if hook.namespace_selector is not None:
            if info.group == "" and info.plural == "namespaces":
                labels = ((a.obj or a.old or {}).get("metadata") or {}).get("labels") or {}
                if not hook.namespace_selector.matches(labels):
                    return False
            elif info.namespaced:
                labels = self.namespace_labels(a.namespace or "") or {}
                if not hook.namespace_selector.matches(labels):
                    return False
        if hook.object_selector is not None:
            new_labels = ((a.obj or {}).get("metadata") or {}).get("labels") or {}
            old_labels = ((a.old or {}).get("metadata") or {}).get("labels") or {}
            if not (hook.object_selector.matches(new_labels) or (a.old is not None
                                                                   and hook.object_selector.matches(old_labels))):
                return False
        return True

    async def _call(self, hook: Webhook, a: AdmissionAttributes) -> Obj:
        import aiohttp  # see _http

        uid = str(uuid.uuid4())
        body = orjson.dumps(admission_review(a, uid))
        url = hook.url
        try:
            async with self._http().post(
                    url, data=body, headers={"Content-Type": "application/json", "Accept": "application/json"},
                    ssl=hook.ssl if hook.ssl is not None else True,
                    timeout=aiohttp.ClientTimeout(total=hook.timeout)) as response:
                payload = await response.read()
                code = response.status
        except TimeoutError:
            raise WebhookCallError(f'failed to call webhook: Post "{url}": context deadline exceeded '
                                   f"(timeout {hook.timeout:g}s)") from None
        except aiohttp.ClientError as e:
            raise WebhookCallError(f'failed to call webhook: Post "{url}": {e}') from None
        if code != 200:
            raise WebhookCallError(f"received invalid webhook response: HTTP {code}: "
                                   f"{payload[:200].decode('utf-8', 'replace')}")
        try:
            review = orjson.loads(payload)
        except orjson.JSONDecodeError:
            raise WebhookCallError("received invalid webhook response: not JSON") from None
        response_obj = review.get("response") if isinstance(review, dict) else None
        if not isinstance(response_obj, dict) or review.get("kind") != "AdmissionReview":
            raise WebhookCallError("received invalid webhook response: expected an AdmissionReview with a response")
        if response_obj.get("uid") != uid:
            raise WebhookCallError(f"received invalid webhook response: expected response.uid={uid!r}, "
                                   f"got {response_obj.get('uid')!r}")
        return response_obj
