"""Ingresses and IngressClasses (upstream pkg/apis/networking/validation/validation.go ValidateIngressCreate,
ValidateIngressSpec, validateHTTPIngressPath, validateIngressBackend, ValidateIngressStatusUpdate,
ValidateIngressClass; pkg/apis/networking/v1/defaults.go SetDefaults_IngressClass;
pkg/registry/networking/ingress/strategy.go): every path states its pathType, Exact and Prefix paths are
absolute, a backend is a Service (name and port name or number) or a resource but not both, hosts are DNS
names (a leading `*.` allowed), never IP addresses; an Ingress's status is the controller's, written through
/status."""

from __future__ import annotations

from typing import Any

from apiserver.registry.strategy import Strategy
from apiserver.validation import (
    FieldError,
    forbidden,
    invalid,
    not_supported,
    required,
    too_long,
    validate_ip,
)
from machinery.api.networking_v1 import (
    INGRESS_CLASS_ANNOTATION,
    PARAMETERS_SCOPE_CLUSTER,
    PARAMETERS_SCOPE_NAMESPACE,
    PATH_TYPE_EXACT,
    PATH_TYPE_IMPLEMENTATION_SPECIFIC,
    PATH_TYPE_PREFIX,
    PATH_TYPES,
)
from machinery.types import Obj
from machinery.validation import (
    is_dns1035_label,
    is_dns1123_label,
    is_dns1123_subdomain,
    is_http_path,
    is_valid_ip,
    is_valid_path_segment_name,
    is_valid_port_name,
    is_valid_port_num,
    is_wildcard_dns1123_subdomain,
)

_INVALID_PATH_SEQUENCES = ("//", "/./", "/../", "%2f", "%2F")
_INVALID_PATH_SUFFIXES = ("/..", "/.")
_MAX_LEN_INGRESS_CLASS_CONTROLLER = 250
_SCOPES = [PARAMETERS_SCOPE_CLUSTER, PARAMETERS_SCOPE_NAMESPACE]


class _GoValue:
    """A value field.Invalid prints with %#v (a typed nil slice), shown as it is."""

    def __init__(self, text: str):
        self.text = text

    def __str__(self) -> str:
        return self.text


def _d(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _validate_host(host: str, path: str) -> tuple[list[FieldError], bool]:
    errs: list[FieldError] = []
    if is_valid_ip(host):
        errs.append(invalid(path, host, "must be a DNS name, not an IP address"))
    if "*" in host:
        return errs + [invalid(path, host, m) for m in is_wildcard_dns1123_subdomain(host)], True
    return errs + [invalid(path, host, m) for m in is_dns1123_subdomain(host)], False


def validate_typed_local_object_reference(ref: Obj, path: str) -> list[FieldError]:
    """validateIngressTypedLocalObjectReference."""
    errs: list[FieldError] = []
    if ref.get("apiGroup") is not None:
        errs += [invalid(f"{path}.apiGroup", ref["apiGroup"], m) for m in is_dns1123_subdomain(ref["apiGroup"])]
    for key in ("kind", "name"):
        value = ref.get(key) or ""
        if not value:
            errs.append(required(f"{path}.{key}", f"{key} is required"))
        else:
            errs += [invalid(f"{path}.{key}", value, m) for m in is_valid_path_segment_name(value)]
    return errs


def validate_backend(backend: Obj, path: str) -> list[FieldError]:
    """validateIngressBackend: a Service (name and one of port name/number) or a resource."""
    service, resource = backend.get("service"), backend.get("resource")
    if service is not None and resource is not None:
        return [invalid(path, "", "cannot set both resource and service backends")]
    if resource is not None:
        return validate_typed_local_object_reference(_d(resource), f"{path}.resource")
    if service is None:
        return [invalid(path, "", "resource or service backend is required")]
    errs: list[FieldError] = []
    service = _d(service)
    name = service.get("name") or ""
    if not name:
        errs.append(required(f"{path}.service.name"))
    else:
        errs += [invalid(f"{path}.service.name", name, m) for m in is_dns1035_label(name)]
    port = _d(service.get("port"))
    port_name, port_number = port.get("name") or "", port.get("number") or 0
    if port_name and port_number:
        errs.append(invalid(path, "", "cannot set both port name & port number"))
    elif port_name:
        errs += [invalid(f"{path}.service.port.name", port_name, m) for m in is_valid_port_name(port_name)]
    elif port_number:
        errs += [invalid(f"{path}.service.port.number", port_number, m) for m in is_valid_port_num(port_number)]
    else:
        errs.append(required(path, "port name or number is required"))
    return errs


def validate_http_path(item: Obj, path: str) -> list[FieldError]:
    """validateHTTPIngressPath."""
    path_type = item.get("pathType")
    if path_type is None:
        return [required(f"{path}.pathType", "pathType must be specified")]
    value = item.get("path") or ""
    errs: list[FieldError] = []
    if path_type in (PATH_TYPE_EXACT, PATH_TYPE_PREFIX):
        if not value.startswith("/"):
            errs.append(invalid(f"{path}.path", value, "must be an absolute path"))
        if value:
            errs += [invalid(f"{path}.path", value, f"must not contain '{seq}'")
                     for seq in _INVALID_PATH_SEQUENCES if seq in value]
            errs += [invalid(f"{path}.path", value, f"cannot end with '{suffix}'")
                     for suffix in _INVALID_PATH_SUFFIXES if value.endswith(suffix)]
    elif path_type == PATH_TYPE_IMPLEMENTATION_SPECIFIC:
        if value and not value.startswith("/"):
            errs.append(invalid(f"{path}.path", value, "must be an absolute path"))
    else:
        errs.append(not_supported(f"{path}.pathType", path_type, PATH_TYPES))
    return errs + validate_backend(_d(item.get("backend")), f"{path}.backend")


def validate_ingress_spec(spec: Obj, path: str = "spec") -> list[FieldError]:
    """ValidateIngressSpec (the create options: no invalid secret names, no wildcard-host exemption)."""
    errs: list[FieldError] = []
    rules = spec.get("rules") or []
    if not rules and spec.get("defaultBackend") is None:
        shown = _GoValue("[]networking.IngressRule(nil)" if spec.get("rules") is None else "[]networking.IngressRule{}")
        errs.append(invalid(path, shown, "either `defaultBackend` or `rules` must be specified"))
    if spec.get("defaultBackend") is not None:
        errs += validate_backend(_d(spec["defaultBackend"]), f"{path}.defaultBackend")
    for i, rule in enumerate(rules):
        rpath = f"{path}.rules[{i}]"
        rule = _d(rule)
        if rule.get("host"):
            errs += _validate_host(rule["host"], f"{rpath}.host")[0]
        http = rule.get("http")
        if http is not None:
            paths = _d(http).get("paths") or []
            if not paths:
                errs.append(required(f"{rpath}.http.paths"))
            for j, item in enumerate(paths):
                errs += validate_http_path(_d(item), f"{rpath}.http.paths[{j}]")
    for tls in spec.get("tls") or []:
        tls = _d(tls)
        for i, host in enumerate(tls.get("hosts") or []):
            check = is_wildcard_dns1123_subdomain if "*" in host else is_dns1123_subdomain
            errs += [invalid(f"{path}.tls[{i}].hosts", host, m) for m in check(host)]
        secret = tls.get("secretName") or ""
        if secret:
            errs += [invalid(f"{path}.tls.secretName", secret, m) for m in is_dns1123_subdomain(secret)]
    class_name = spec.get("ingressClassName")
    if class_name is not None:
        errs += [invalid(f"{path}.ingressClassName", class_name, m) for m in is_dns1123_subdomain(class_name)]
    return errs


def validate_load_balancer_status(status: Obj, path: str = "status.loadBalancer") -> list[FieldError]:
    """ValidateIngressLoadBalancerStatus."""
    errs: list[FieldError] = []
    for i, entry in enumerate(_d(status).get("ingress") or []):
        entry = _d(entry)
        ipath = f"{path}.ingress[{i}]"
        if entry.get("ip"):
            errs += validate_ip(entry["ip"], f"{ipath}.ip")
        hostname = entry.get("hostname") or ""
        if hostname:
            errs += [invalid(f"{ipath}.hostname", hostname, m) for m in is_dns1123_subdomain(hostname)]
            if is_valid_ip(hostname):
                errs.append(invalid(f"{ipath}.hostname", hostname, "must be a DNS name, not an IP address"))
    return errs


class IngressStrategy(Strategy):
    has_status_subresource = True

    def prepare_for_create(self, obj: Obj) -> None:
        obj.pop("status", None)  # ingressStrategy.PrepareForCreate: status is the controller's
        obj["status"] = {"loadBalancer": {}}

    def validate(self, obj: Obj) -> list[FieldError]:
        spec = _d(obj.get("spec"))
        errs = validate_ingress_spec(spec)
        annotations = _d(_d(obj.get("metadata")).get("annotations"))
        annotation = annotations.get(INGRESS_CLASS_ANNOTATION)
        class_name = spec.get("ingressClassName")
        if annotation is not None and class_name is not None and annotation != class_name:
            errs.append(invalid(f"annotations.{INGRESS_CLASS_ANNOTATION}", annotation,
                                "must match `ingressClassName` when both are specified"))
        return errs + validate_load_balancer_status(_d(_d(obj.get("status")).get("loadBalancer")))


def default_ingress_class(obj: Obj) -> None:
    """SetDefaults_IngressClass: parameters without a scope are cluster-scoped."""
    params = _d(obj.get("spec")).get("parameters")
    if isinstance(params, dict) and params.get("scope") is None:
        params["scope"] = PARAMETERS_SCOPE_CLUSTER


def validate_ingress_class_spec(spec: Obj, path: str = "spec") -> list[FieldError]:
    """validateIngressClassSpec: a domain-prefixed controller name, a well-formed parameters reference."""
    errs: list[FieldError] = []
    controller = spec.get("controller") or ""
    if len(controller) > _MAX_LEN_INGRESS_CLASS_CONTROLLER:
        errs.append(too_long(f"{path}.controller", _MAX_LEN_INGRESS_CLASS_CONTROLLER))
    errs += _domain_prefixed_path(f"{path}.controller", controller)
    params = spec.get("parameters")
    if isinstance(params, dict):
        ppath = f"{path}.parameters"
        errs += validate_typed_local_object_reference(params, ppath)
        scope = params.get("scope")
        if scope is None:
            errs.append(required(f"{ppath}.scope"))
        elif scope not in _SCOPES:
            errs.append(not_supported(f"{ppath}.scope", scope, _SCOPES))
        elif scope == PARAMETERS_SCOPE_NAMESPACE:
            namespace = params.get("namespace")
            if namespace is None:
                errs.append(required(f"{ppath}.namespace", "`parameters.scope` is set to 'Namespace'"))
            else:
                errs += [invalid(f"{ppath}.namespace", namespace, m) for m in is_dns1123_label(namespace)]
        elif params.get("namespace") is not None:
            errs.append(forbidden(f"{ppath}.namespace", "`parameters.scope` is set to 'Cluster'"))
    return errs


def _domain_prefixed_path(path: str, value: str) -> list[FieldError]:
    """validation.IsDomainPrefixedPath."""
    if not value:
        return [required(path)]
    host, _, rest = value.partition("/")
    if not host or not rest:
        return [invalid(path, value, 'must be a domain-prefixed path (such as "acme.io/foo")')]
    errs = [invalid(path, host, m) for m in is_dns1123_subdomain(host)]
    if not is_http_path(rest):
        errs.append(invalid(path, rest, "Invalid path (regex used for validation is "
                                        "'[A-Za-z0-9/\\-._~%!$&'()*+,;=:]+')"))
    return errs


class IngressClassStrategy(Strategy):
    def prepare_for_create(self, obj: Obj) -> None:
        default_ingress_class(obj)

    def prepare_for_update(self, new: Obj, old: Obj) -> None:
        default_ingress_class(new)

    def validate(self, obj: Obj) -> list[FieldError]:
        return validate_ingress_class_spec(_d(obj.get("spec")))

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        if _d(new.get("spec")).get("controller") != _d(old.get("spec")).get("controller"):
            return [forbidden("spec.controller", "may not change once set")]
        return []
