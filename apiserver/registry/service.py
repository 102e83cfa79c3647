"""Services (upstream: pkg/apis/core/v1/defaults.go SetDefaults_Service, pkg/apis/core/validation
ValidateService / ValidateServiceUpdate / ValidateServiceStatusUpdate, pkg/registry/core/service/strategy.go).

The strategy holds the rules that need nothing but the object; what needs the cluster (the IP
families the service CIDR offers, ClusterIP and NodePort allocation) is the service's own storage,
apiserver/registry/servicestorage.py, as upstream's storage/alloc.go.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from apiserver.registry.endpoints import validate_non_special_ip
from apiserver.registry.strategy import Strategy
from apiserver.validation import (
    FieldError,
    duplicate,
    forbidden,
    invalid,
    not_supported,
    required,
    validate_dns1123_label,
    validate_dns1123_subdomain,
    validate_immutable,
    validate_ip,
    validate_labels,
    validate_port_num_or_name,
)
from machinery.types import Obj
from machinery.validation import is_valid_port_num

CLUSTER_IP_NONE = "None"
SERVICE_TYPES = ("ClusterIP", "ExternalName", "LoadBalancer", "NodePort")
PROTOCOLS = ("SCTP", "TCP", "UDP")
SESSION_AFFINITIES = ("ClientIP", "None")
TRAFFIC_POLICIES = ("Cluster", "Local")
IP_FAMILIES = ("IPv4", "IPv6")
IP_FAMILY_POLICIES = ("PreferDualStack", "RequireDualStack", "SingleStack")
# core.DefaultClientIPServiceAffinitySeconds (3 hours) and core.MaxClientIPServiceAffinitySeconds (1 day)
DEFAULT_CLIENT_IP_AFFINITY_SECONDS = 10800
MAX_CLIENT_IP_AFFINITY_SECONDS = 86400


def spec_of(obj: Obj) -> Obj:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        spec = obj["spec"] = {}
    return spec


def is_headless(spec: Obj) -> bool:
    return spec.get("clusterIP") == CLUSTER_IP_NONE


def needs_cluster_ip(spec: Obj) -> bool:
    """Every type but ExternalName has a virtual IP, unless it is headless (upstream needsClusterIP)."""
    return spec.get("type") != "ExternalName" and not is_headless(spec)


def needs_node_port(spec: Obj) -> bool:
    """NodePort, and LoadBalancer unless allocateLoadBalancerNodePorts is false (upstream needsNodePort)."""
    kind = spec.get("type")
    if kind == "NodePort":
        return True
    return kind == "LoadBalancer" and spec.get("allocateLoadBalancerNodePorts") is not False


def externally_accessible(spec: Obj) -> bool:
    """apiservice.ExternallyAccessible: reached from outside through a node port, a load balancer or
    an external IP."""
    kind = spec.get("type")
    return kind in ("LoadBalancer", "NodePort") or (kind == "ClusterIP" and bool(spec.get("externalIPs")))


def needs_health_check(spec: Obj) -> bool:
    return spec.get("type") == "LoadBalancer" and spec.get("externalTrafficPolicy") == "Local"


def default_service(obj: Obj) -> None:
    """SetDefaults_Service (pkg/apis/core/v1/defaults.go)."""
    spec = spec_of(obj)
    if not spec.get("sessionAffinity"):
        spec["sessionAffinity"] = "None"
    if spec["sessionAffinity"] == "None":
        spec.pop("sessionAffinityConfig", None)
    elif spec["sessionAffinity"] == "ClientIP":
        client_ip = (spec.get("sessionAffinityConfig") or {}).get("clientIP") or {}
        if client_ip.get("timeoutSeconds") is None:
            spec["sessionAffinityConfig"] = {"clientIP": {"timeoutSeconds": DEFAULT_CLIENT_IP_AFFINITY_SECONDS}}
    if not spec.get("type"):
        spec["type"] = "ClusterIP"
    for port in spec.get("ports") or []:
        if not port.get("protocol"):
            port["protocol"] = "TCP"
        if port.get("targetPort") in (None, 0, ""):
            port["targetPort"] = port.get("port")
    if externally_accessible(spec) and not spec.get("externalTrafficPolicy"):
        spec["externalTrafficPolicy"] = "Cluster"
    if spec.get("internalTrafficPolicy") is None and spec["type"] in ("ClusterIP", "NodePort", "LoadBalancer"):
        spec["internalTrafficPolicy"] = "Cluster"
    if spec["type"] == "LoadBalancer" and spec.get("allocateLoadBalancerNodePorts") is None:
        spec["allocateLoadBalancerNodePorts"] = True
    default_load_balancer_status(obj)


def default_load_balancer_status(obj: Obj) -> None:
    """A LoadBalancer's ingress IP is a VIP unless its controller says the traffic is proxied."""
    if (obj.get("spec") or {}).get("type") != "LoadBalancer":
        return
    for ingress in ((obj.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []:
        if ingress.get("ip") and ingress.get("ipMode") is None:
            ingress["ipMode"] = "VIP"


def normalize_cluster_ips(spec: Obj, old_spec: Obj | None) -> None:
    """upstream normalizeClusterIPs: clusterIP and clusterIPs[0] say the same thing; a client that
    changes only clusterIP (old clients do not know clusterIPs) is taken at its word."""
    ip, ips = spec.get("clusterIP") or "", list(spec.get("clusterIPs") or [])
    if old_spec is not None:
        old_ip, old_ips = old_spec.get("clusterIP") or "", list(old_spec.get("clusterIPs") or [])
        if ip != old_ip and ips == old_ips:  # only clusterIP changed: clusterIPs follows
            ips = [ip] if ip else []
    if ip and not ips:
        ips = [ip]
    if ips:
        spec["clusterIPs"] = ips
    else:
        spec.pop("clusterIPs", None)


def _same_port(a: Obj, b: Obj) -> bool:
    """upstream findMatchingPort... a port is the same port if it has the same name, or (unnamed)
    the same number and protocol."""
    if a.get("name") or b.get("name"):
        return bool(a.get("name") == b.get("name"))
    return bool(a.get("port") == b.get("port") and a.get("protocol") == b.get("protocol"))


def patch_allocated_values(spec: Obj, old_spec: Obj) -> None:
    """upstream patchAllocatedValues: an update that leaves out what was allocated (kubectl apply of a
    manifest without clusterIP or nodePort) keeps the old values instead of asking for new ones."""
    if needs_cluster_ip(old_spec) and needs_cluster_ip(spec) and not spec.get("clusterIP"):
        spec["clusterIP"] = old_spec.get("clusterIP") or ""
        if not spec.get("clusterIPs") and old_spec.get("clusterIPs"):
            spec["clusterIPs"] = list(old_spec["clusterIPs"])
    if needs_node_port(old_spec) and needs_node_port(spec):
        for port in spec.get("ports") or []:
            if port.get("nodePort"):
                continue
            for old in old_spec.get("ports") or []:
                if old.get("nodePort") and _same_port(port, old):
                    port["nodePort"] = old["nodePort"]
                    break
    if needs_health_check(old_spec) and needs_health_check(spec) and not spec.get("healthCheckNodePort") \
            and old_spec.get("healthCheckNodePort"):
        spec["healthCheckNodePort"] = old_spec["healthCheckNodePort"]


def drop_type_dependent_fields(spec: Obj, old_spec: Obj) -> None:
    """upstream dropTypeDependentFields: a type change clears what the new type cannot have, if the
    client left it as it was (a value the client changed stays, and validation judges it)."""
    if needs_cluster_ip(old_spec) and not needs_cluster_ip(spec) and not is_headless(spec):
        if (spec.get("clusterIP") or "") == (old_spec.get("clusterIP") or ""):
            spec.pop("clusterIP", None)
        if (spec.get("clusterIPs") or []) == (old_spec.get("clusterIPs") or []):
            spec.pop("clusterIPs", None)
    if spec.get("type") == "ExternalName" and old_spec.get("type") != "ExternalName":
        if spec.get("ipFamilies") == old_spec.get("ipFamilies"):
            spec.pop("ipFamilies", None)
        if spec.get("ipFamilyPolicy") == old_spec.get("ipFamilyPolicy"):
            spec.pop("ipFamilyPolicy", None)
    if needs_node_port(old_spec) and not needs_node_port(spec):
        old_ports = old_spec.get("ports") or []
        for port in spec.get("ports") or []:
            if port.get("nodePort") and any(_same_port(port, o) and o.get("nodePort") == port["nodePort"]
                                            for o in old_ports):
                port.pop("nodePort", None)
    if needs_health_check(old_spec) and not needs_health_check(spec) \
            and spec.get("healthCheckNodePort") == old_spec.get("healthCheckNodePort"):
        spec.pop("healthCheckNodePort", None)
    if spec.get("type") != "LoadBalancer":
        if spec.get("allocateLoadBalancerNodePorts") == old_spec.get("allocateLoadBalancerNodePorts"):
            spec.pop("allocateLoadBalancerNodePorts", None)
        if spec.get("loadBalancerClass") == old_spec.get("loadBalancerClass"):
            spec.pop("loadBalancerClass", None)
    if not externally_accessible(spec) and spec.get("externalTrafficPolicy") == old_spec.get("externalTrafficPolicy"):
        spec.pop("externalTrafficPolicy", None)


class GoServicePort:
    """A (protocol, port) pair as upstream's duplicate-port error prints it (%#v of core.ServicePort)."""

    def __init__(self, protocol: str, port: int):
        self.protocol, self.port = protocol, port

    def __str__(self) -> str:
        return (f'core.ServicePort{{Name:"", Protocol:"{self.protocol}", AppProtocol:(*string)(nil), '
                f'Port:{self.port}, TargetPort:intstr.IntOrString{{Type:0, IntVal:0, StrVal:""}}, NodePort:0}}')


def _validate_port(port: Obj, require_name: bool, names: set[str], path: str) -> list[FieldError]:
    """validateServicePort."""
    errs: list[FieldError] = []
    name = port.get("name") or ""
    if require_name and not name:
        errs.append(required(f"{path}.name"))
    elif name:
        errs += validate_dns1123_label(name, f"{path}.name")
        if name in names:
            errs.append(duplicate(f"{path}.name", name))
        names.add(name)
    errs += [invalid(f"{path}.port", port.get("port"), m) for m in is_valid_port_num(port.get("port") or 0)]
    protocol = port.get("protocol") or ""
    if not protocol:
        errs.append(required(f"{path}.protocol"))
    elif protocol not in PROTOCOLS:
        errs.append(not_supported(f"{path}.protocol", protocol, list(PROTOCOLS)))
    errs += validate_port_num_or_name(port.get("targetPort"), f"{path}.targetPort")
    return errs


def _validate_session_affinity(spec: Obj) -> list[FieldError]:
    affinity = spec.get("sessionAffinity") or ""
    path = "spec.sessionAffinityConfig"
    if not affinity:
        return [required("spec.sessionAffinity")]
    if affinity not in SESSION_AFFINITIES:
        return [not_supported("spec.sessionAffinity", affinity, list(SESSION_AFFINITIES))]
    config = spec.get("sessionAffinityConfig")
    if affinity == "None":
        return [forbidden(path, "must not be set when session affinity is None")] if config else []
    when = "when session affinity type is ClientIP"
    if config is None:
        return [required(path, when)]
    if config.get("clientIP") is None:
        return [required(f"{path}.clientIP", when)]
    timeout = config["clientIP"].get("timeoutSeconds")
    if timeout is None:
        return [required(f"{path}.clientIP.timeoutSeconds", when)]
    if timeout <= 0 or timeout > MAX_CLIENT_IP_AFFINITY_SECONDS:
        return [invalid(f"{path}.clientIP.timeoutSeconds", timeout,
                        f"must be greater than 0 and less than {MAX_CLIENT_IP_AFFINITY_SECONDS}")]
    return []


def _validate_cluster_ips(spec: Obj) -> list[FieldError]:
    """validateServiceClusterIPsRelatedFields (the parts a single-stack cluster reaches)."""
    errs: list[FieldError] = []
    ips: list[str] = spec.get("clusterIPs") or []
    path = "spec.clusterIPs"
    if ips and (spec.get("clusterIP") or "") != ips[0]:
        errs.append(invalid(path, ips, "first value must match `clusterIP`"))
    for i, ip in enumerate(ips):
        if i == 0 and ip == CLUSTER_IP_NONE:
            if len(ips) > 1:
                errs.append(invalid(path, ips, "'None' must be the first and only value"))
            continue
        errs += validate_ip(ip, f"{path}[{i}]")
    if len(ips) > 2:
        errs.append(invalid(path, ips, "may only hold up to 2 values"))
    for i, family in enumerate(spec.get("ipFamilies") or []):
        if family not in IP_FAMILIES:
            errs.append(not_supported(f"spec.ipFamilies[{i}]", family, list(IP_FAMILIES)))
        elif family in (spec.get("ipFamilies") or [])[:i]:
            errs.append(duplicate(f"spec.ipFamilies[{i}]", family))
    policy = spec.get("ipFamilyPolicy")
    if policy is not None and policy not in IP_FAMILY_POLICIES:
        errs.append(not_supported("spec.ipFamilyPolicy", policy, list(IP_FAMILY_POLICIES)))
    return errs


def _validate_type(spec: Obj) -> list[FieldError]:
    errs: list[FieldError] = []
    kind = spec.get("type") or ""
    ips: list[str] = spec.get("clusterIPs") or []
    if not kind:
        return [required("spec.type")]
    if kind not in SERVICE_TYPES:
        return [not_supported("spec.type", kind, list(SERVICE_TYPES))]
    if kind in ("LoadBalancer", "NodePort") and is_headless(spec):
        errs.append(invalid("spec.clusterIPs[0]", ips[0] if ips else CLUSTER_IP_NONE,
                            f"may not be set to 'None' for {kind} services"))
    if kind == "ExternalName":
        if ips:
            errs.append(forbidden("spec.clusterIPs", "may not be set for ExternalName services"))
        if spec.get("ipFamilies"):
            errs.append(forbidden("spec.ipFamilies", "may not be set for ExternalName services"))
        if spec.get("ipFamilyPolicy") is not None:
            errs.append(forbidden("spec.ipFamilyPolicy", "may not be set for ExternalName services"))
        cname = (spec.get("externalName") or "").removesuffix(".")  # a trailing dot: fully qualified
        if cname:
            errs += validate_dns1123_subdomain(cname, "spec.externalName")
        else:
            errs.append(required("spec.externalName"))
    if kind == "ClusterIP":
        for i, port in enumerate(spec.get("ports") or []):
            if port.get("nodePort"):
                errs.append(forbidden(f"spec.ports[{i}].nodePort", "may not be used when `type` is 'ClusterIP'"))
    return errs


def _validate_ports(spec: Obj) -> list[FieldError]:
    errs: list[FieldError] = []
    ports: list[Obj] = spec.get("ports") or []
    if not ports and not is_headless(spec) and spec.get("type") != "ExternalName":
        errs.append(required("spec.ports"))
    names: set[str] = set()
    for i, port in enumerate(ports):
        errs += _validate_port(port, len(ports) > 1, names, f"spec.ports[{i}]")
    node_ports: set[tuple[str, int]] = set()
    for i, port in enumerate(ports):
        node_port = port.get("nodePort")
        if not node_port:
            continue
        errs += [invalid(f"spec.ports[{i}].nodePort", node_port, m) for m in is_valid_port_num(node_port)]
        key = (port.get("protocol") or "", node_port)
        if key in node_ports:
            errs.append(duplicate(f"spec.ports[{i}].nodePort", node_port))
        node_ports.add(key)
    seen: set[tuple[str, int]] = set()
    for i, port in enumerate(ports):
        key = (port.get("protocol") or "", port.get("port") or 0)
        if key in seen:
            errs.append(duplicate(f"spec.ports[{i}]", GoServicePort(*key)))
        seen.add(key)
    return errs


def _validate_traffic_policies(spec: Obj) -> list[FieldError]:
    """validateServiceExternalTrafficPolicy and validateServiceInternalTrafficFieldsValue."""
    errs: list[FieldError] = []
    external = spec.get("externalTrafficPolicy") or ""
    if not externally_accessible(spec):
        if external:
            errs.append(invalid("spec.externalTrafficPolicy", external,
                                "may only be set for externally-accessible services"))
    elif not external:
        errs.append(required("spec.externalTrafficPolicy"))
    elif external not in TRAFFIC_POLICIES:
        errs.append(not_supported("spec.externalTrafficPolicy", external, list(TRAFFIC_POLICIES)))
    check_port = spec.get("healthCheckNodePort")
    if check_port and not needs_health_check(spec):
        errs.append(invalid("spec.healthCheckNodePort", check_port,
                            "may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is 'Local'"))
    internal = spec.get("internalTrafficPolicy")
    if internal is None:
        if spec.get("type") in ("ClusterIP", "NodePort", "LoadBalancer"):
            errs.append(required("spec.internalTrafficPolicy"))
    elif internal not in TRAFFIC_POLICIES:
        errs.append(not_supported("spec.internalTrafficPolicy", internal, list(TRAFFIC_POLICIES)))
    return errs


def validate_service(obj: Obj) -> list[FieldError]:
    """ValidateService (metadata is the generic store's)."""
    spec: Obj = obj.get("spec") or {}
    errs = _validate_type(spec)
    errs += _validate_ports(spec)
    if spec.get("selector") is not None:
        errs += validate_labels(spec["selector"], "spec.selector")
    errs += _validate_session_affinity(spec)
    errs += _validate_cluster_ips(spec)
    for i, ip in enumerate(spec.get("externalIPs") or []):
        ip_errs = validate_ip(ip, f"spec.externalIPs[{i}]")
        errs += ip_errs or validate_non_special_ip(ip, f"spec.externalIPs[{i}]")
    for i, cidr in enumerate(spec.get("loadBalancerSourceRanges") or []):
        try:
            ipaddress.ip_network(cidr.strip(), strict=False)
        except ValueError:
            errs.append(invalid(f"spec.loadBalancerSourceRanges[{i}]", cidr,
                                "must be a list of IP ranges. For example, 10.240.0.0/24,10.250.0.0/24 "))
    if spec.get("type") != "LoadBalancer":
        if spec.get("loadBalancerSourceRanges"):
            errs.append(forbidden("spec.loadBalancerSourceRanges", "may only be used when `type` is 'LoadBalancer'"))
        if spec.get("allocateLoadBalancerNodePorts") is not None:
            errs.append(forbidden("spec.allocateLoadBalancerNodePorts",
                                  "may only be used when `type` is 'LoadBalancer'"))
        if spec.get("loadBalancerClass") is not None:
            errs.append(forbidden("spec.loadBalancerClass", "may only be used when `type` is 'LoadBalancer'"))
    errs += _validate_traffic_policies(spec)
    return errs


def validate_service_update(new: Obj, old: Obj) -> list[FieldError]:
    """ValidateServiceUpdate: a Service's virtual IP never changes once it has one (only a type change
    to ExternalName, which has none, lets it go); the load balancer class is immutable."""
    spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
    errs: list[FieldError] = []
    if spec.get("type") != "ExternalName" and old_spec.get("type") != "ExternalName" and old_spec.get("clusterIP"):
        errs += validate_immutable(spec.get("clusterIP") or "", old_spec.get("clusterIP") or "", "spec.clusterIP")
        new_ips, old_ips = spec.get("clusterIPs") or [], old_spec.get("clusterIPs") or []
        if new_ips[:1] != old_ips[:1] and not errs:
            errs += validate_immutable(new_ips[:1], old_ips[:1], "spec.clusterIPs[0]")
    if old_spec.get("type") == "LoadBalancer" and spec.get("type") == "LoadBalancer":
        errs += validate_immutable(spec.get("loadBalancerClass"), old_spec.get("loadBalancerClass"),
                                   "spec.loadBalancerClass")
    return errs


def validate_load_balancer_status(status: Obj, path: str) -> list[FieldError]:
    """ValidateLoadBalancerStatus: an ingress has a valid IP or a DNS name (that is not an IP)."""
    errs: list[FieldError] = []
    for i, ingress in enumerate(status.get("ingress") or []):
        ipath = f"{path}.ingress[{i}]"
        if ingress.get("ip"):
            errs += validate_ip(ingress["ip"], f"{ipath}.ip")
        if ingress.get("ipMode") is not None:
            if not ingress.get("ip"):
                errs.append(forbidden(f"{ipath}.ipMode", "may not be specified when `ip` is not set"))
            elif ingress["ipMode"] not in ("Proxy", "VIP"):
                errs.append(not_supported(f"{ipath}.ipMode", ingress["ipMode"], ["Proxy", "VIP"]))
        hostname = ingress.get("hostname")
        if hostname:
            errs += validate_dns1123_subdomain(hostname, f"{ipath}.hostname")
            try:
                ipaddress.ip_address(hostname)
                errs.append(invalid(f"{ipath}.hostname", hostname, "must be a DNS name, not an IP address"))
            except ValueError:
                pass
    return errs


class ServiceStrategy(Strategy):
    """Services: upstream's defaults and validation; status (the load balancer's ingress) is written
    only through services/status."""

    has_status_subresource = True

    def prepare_for_create(self, obj: Obj) -> None:
        default_service(obj)
        normalize_cluster_ips(spec_of(obj), None)
        obj["status"] = {"loadBalancer": {}}  # upstream resets status on create

    def validate(self, obj: Obj) -> list[FieldError]:
        return validate_service(obj)

    def prepare_for_update(self, new: Obj, old: Obj) -> None:
        spec, old_spec = spec_of(new), old.get("spec") or {}
        default_service(new)
        patch_allocated_values(spec, old_spec)
        normalize_cluster_ips(spec, old_spec)
        drop_type_dependent_fields(spec, old_spec)
        super().prepare_for_update(new, old)

    def prepare_for_status_update(self, new: Obj, old: Obj) -> None:
        super().prepare_for_status_update(new, old)
        default_load_balancer_status(new)

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        errs = validate_service_update(new, old)
        status: Any = new.get("status") or {}
        if status != (old.get("status") or {}):
            errs += validate_load_balancer_status(status.get("loadBalancer") or {}, "status.loadBalancer")
        return errs

    def field_values(self, obj: Obj) -> dict[str, str]:
        values = super().field_values(obj)
        spec = obj.get("spec") or {}
        # upstream's service field selectors (pkg/registry/core/service: spec.clusterIP, spec.type)
        values["spec.clusterIP"] = spec.get("clusterIP") or ""
        values["spec.type"] = spec.get("type") or ""
        return values
