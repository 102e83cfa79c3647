"""Webhook configurations (upstream: pkg/apis/admissionregistration/validation and defaults)."""

from __future__ import annotations

import base64
import binascii
from urllib.parse import urlsplit

from apiserver.registry.strategy import Strategy
from apiserver.validation import FieldError, duplicate, invalid, not_supported, required
from machinery.types import Obj

_OPERATIONS = ["*", "CONNECT", "CREATE", "DELETE", "UPDATE"]
_SIDE_EFFECTS = ["None", "NoneOnDryRun"]
_FAILURE_POLICIES = ["Fail", "Ignore"]
_SCOPES = ["*", "Cluster", "Namespaced"]


class WebhookConfigurationStrategy(Strategy):
    mutating: bool = False

    def prepare_for_create(self, obj: Obj) -> None:
        self._defaults(obj)

    def prepare_for_update(self, new: Obj, old: Obj) -> None:
        self._defaults(new)

    def _defaults(self, obj: Obj) -> None:
        for hook in obj.get("webhooks") or []:
            hook.setdefault("failurePolicy", "Fail")
            hook.setdefault("matchPolicy", "Equivalent")
            hook.setdefault("timeoutSeconds", 10)
            hook.setdefault("namespaceSelector", {})
            hook.setdefault("objectSelector", {})
            if self.mutating:
                hook.setdefault("reinvocationPolicy", "Never")
            for rule in hook.get("rules") or []:
                rule.setdefault("scope", "*")

    def validate(self, obj: Obj) -> list[FieldError]:
        errs: list[FieldError] = []
        seen: set[str] = set()
        for i, hook in enumerate(obj.get("webhooks") or []):
            path = f"webhooks[{i}]"
            name = hook.get("name") or ""
            if name.count(".") < 2:
                errs.append(invalid(f"{path}.name", name, "should be a domain with at least three segments "
                                    "separated by dots"))
            if name in seen:
                errs.append(duplicate(f"{path}.name", name))
            seen.add(name)
            errs += _validate_client_config(hook.get("clientConfig") or {}, f"{path}.clientConfig")
            for j, rule in enumerate(hook.get("rules") or []):
                rpath = f"{path}.rules[{j}]"
                for op in rule.get("operations") or []:
                    if op not in _OPERATIONS:
                        errs.append(not_supported(f"{rpath}.operations", op, _OPERATIONS))
                for key in ("operations", "apiGroups", "apiVersions", "resources"):
                    if not rule.get(key):
                        errs.append(required(f"{rpath}.{key}"))
                if rule.get("scope") not in _SCOPES:
                    errs.append(not_supported(f"{rpath}.scope", rule.get("scope"), _SCOPES))
            if hook.get("failurePolicy") not in _FAILURE_POLICIES:
                errs.append(not_supported(f"{path}.failurePolicy", hook.get("failurePolicy"), _FAILURE_POLICIES))
            if hook.get("sideEffects") not in _SIDE_EFFECTS:
                errs.append(not_supported(f"{path}.sideEffects", hook.get("sideEffects"), _SIDE_EFFECTS))
            timeout = hook.get("timeoutSeconds")
            if timeout is not None and not 1 <= timeout <= 30:
                errs.append(invalid(f"{path}.timeoutSeconds", timeout, "the timeout value must be between 1 and 30 "
                                    "seconds"))
            versions = hook.get("admissionReviewVersions") or []
            if "v1" not in versions:
                errs.append(invalid(f"{path}.admissionReviewVersions", versions,
                                    "must include at least one of v1 (the only version this apiserver speaks)"))
        return errs


def _validate_client_config(config: Obj, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    url, service = config.get("url"), config.get("service")
    if bool(url) == bool(service):
        errs.append(required(path, "exactly one of url or service is required"))
    if url:
        parts = urlsplit(url)
        if parts.scheme != "https":
            errs.append(invalid(f"{path}.url", url, "'https' is the only allowed URL scheme"))
        if not parts.hostname:
            errs.append(invalid(f"{path}.url", url, "host must be specified"))
        if parts.fragment or parts.query or parts.username:
            errs.append(invalid(f"{path}.url", url, "fragments, query parameters and user information are not "
                                "allowed"))
    ca = config.get("caBundle")
    if ca:
        try:
            base64.b64decode(ca, validate=True)
        except (binascii.Error, ValueError):
            errs.append(invalid(f"{path}.caBundle", "<bytes>", "must be base64 encoded PEM"))
    return errs


class MutatingWebhookConfigurationStrategy(WebhookConfigurationStrategy):
    mutating = True


class ValidatingWebhookConfigurationStrategy(WebhookConfigurationStrategy):
    mutating = False
