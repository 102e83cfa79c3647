"""Endpoints (upstream: pkg/apis/core/v1/defaults.go SetDefaults_EndpointPort, pkg/apis/core/validation
ValidateEndpoints, pkg/registry/core/endpoint/strategy.go): the addresses behind a Service, as the
endpoints controller (or a user, for a selector-less Service) writes them. The checks on an address
that kube-proxy will send traffic to (ValidateNonSpecialIP) are shared with EndpointSlices.
"""

from __future__ import annotations

import ipaddress

from apiserver.registry.strategy import Strategy
from apiserver.validation import (
    FieldError,
    invalid,
    not_supported,
    required,
    validate_dns1123_label,
    validate_dns1123_subdomain,
)
from machinery.types import Obj
from machinery.validation import is_valid_port_num

PROTOCOLS = ("SCTP", "TCP", "UDP")


def validate_non_special_ip(address: str, path: str) -> list[FieldError]:
    """ValidateNonSpecialIP: an endpoint may not be an address no pod can have."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return [invalid(path, address, "must be a valid IP address")]
    if ip.is_unspecified:
        return [invalid(path, address, f"may not be unspecified ({'0.0.0.0' if ip.version == 4 else '::'})")]
    if ip.is_loopback:
        return [invalid(path, address, "may not be in the loopback range (127.0.0.0/8, ::1/128)")]
    if ip.is_link_local:
        return [invalid(path, address, "may not be in the link-local range (169.254.0.0/16, fe80::/10)")]
    if ip in ipaddress.ip_network("224.0.0.0/24") or ip in ipaddress.ip_network("ff02::/16"):
        return [invalid(path, address, "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)")]
    return []


def _validate_address(address: Obj, path: str) -> list[FieldError]:
    """validateEndpointAddress."""
    ip = address.get("ip") or ""
    errs = validate_non_special_ip(ip, f"{path}.ip")
    if address.get("hostname"):
        errs += validate_dns1123_label(address["hostname"], f"{path}.hostname")
    if address.get("nodeName") is not None:
        errs += validate_dns1123_subdomain(address["nodeName"], f"{path}.nodeName")
    return errs


def validate_port_protocol(protocol: str | None, path: str) -> list[FieldError]:
    if not protocol:
        return [required(path)]
    if protocol not in PROTOCOLS:
        return [not_supported(path, protocol, list(PROTOCOLS))]
    return []


def _validate_port(port: Obj, require_name: bool, path: str) -> list[FieldError]:
    """validateEndpointPort."""
    errs: list[FieldError] = []
    name = port.get("name") or ""
    if require_name and not name:
        errs.append(required(f"{path}.name"))
    elif name:
        errs += validate_dns1123_label(name, f"{path}.name")
    errs += [invalid(f"{path}.port", port.get("port"), m) for m in is_valid_port_num(port.get("port") or 0)]
    errs += validate_port_protocol(port.get("protocol"), f"{path}.protocol")
    return errs


def validate_endpoints(obj: Obj) -> list[FieldError]:
    """ValidateEndpoints: each subset has an address (ready or not); ports need names when several."""
    errs: list[FieldError] = []
    for i, subset in enumerate(obj.get("subsets") or []):
        path = f"subsets[{i}]"
        if not subset.get("addresses") and not subset.get("notReadyAddresses"):
            errs.append(required(path, "must specify `addresses` or `notReadyAddresses`"))
        for kind in ("addresses", "notReadyAddresses"):
            for j, address in enumerate(subset.get(kind) or []):
                errs += _validate_address(address, f"{path}.{kind}[{j}]")
        ports = subset.get("ports") or []
        for j, port in enumerate(ports):
            errs += _validate_port(port, len(ports) > 1, f"{path}.ports[{j}]")
    return errs


class EndpointsStrategy(Strategy):
    """Endpoints: ports default to TCP; no status."""

    def prepare_for_create(self, obj: Obj) -> None:
        _default(obj)

    def prepare_for_update(self, new: Obj, old: Obj) -> None:
        _default(new)

    def validate(self, obj: Obj) -> list[FieldError]:
        return validate_endpoints(obj)


def _default(obj: Obj) -> None:
    for subset in obj.get("subsets") or []:
        for port in subset.get("ports") or []:
            if not port.get("protocol"):
                port["protocol"] = "TCP"
