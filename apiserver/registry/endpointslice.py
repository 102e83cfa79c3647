"""EndpointSlices (upstream: pkg/apis/discovery/v1/defaults.go, pkg/apis/discovery/validation/validation.go,
pkg/registry/discovery/endpointslice/strategy.go): at most 1,000 endpoints of one address type, each
with 1 to 100 addresses; ports named uniquely."""

from __future__ import annotations

import ipaddress

from apiserver.registry.endpoints import validate_non_special_ip, validate_port_protocol
from apiserver.registry.strategy import Strategy
from apiserver.validation import (
    FieldError,
    duplicate,
    invalid,
    not_supported,
    required,
    validate_dns1123_label,
    validate_dns1123_subdomain,
    validate_immutable,
    validate_labels,
)
from machinery.types import Obj

ADDRESS_TYPES = ("FQDN", "IPv4", "IPv6")
MAX_ENDPOINTS = 1000
MAX_ADDRESSES = 100
MAX_PORTS = 20000


def too_many(path: str, actual: int, limit: int) -> FieldError:
    """field.TooMany."""
    return FieldError("FieldValueTooMany", path, f"must have at most {limit} items", actual, True)


def _validate_address(address: str, address_type: str, path: str) -> list[FieldError]:
    if address_type in ("IPv4", "IPv6"):
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            ip = None
        if ip is None or ip.version != (4 if address_type == "IPv4" else 6):
            return [invalid(path, address, f"must be a valid {address_type} address")]
        return validate_non_special_ip(address, path)
    if address_type == "FQDN":
        errs = validate_dns1123_subdomain(address, path)
        if not errs and "." not in address:
            errs.append(invalid(path, address, "should be a domain with at least two segments separated by dots"))
        return errs
    return []  # an unknown type is reported once, on addressType


def validate_endpoint_slice(obj: Obj) -> list[FieldError]:
    """ValidateEndpointSlice and (on create) validateAddressType."""
    errs: list[FieldError] = []
    address_type = obj.get("addressType") or ""
    if not address_type:
        errs.append(required("addressType"))
    elif address_type not in ADDRESS_TYPES:
        errs.append(not_supported("addressType", address_type, list(ADDRESS_TYPES)))
    endpoints: list[Obj] = obj.get("endpoints") or []
    if len(endpoints) > MAX_ENDPOINTS:
        errs.append(too_many("endpoints", len(endpoints), MAX_ENDPOINTS))
    for i, endpoint in enumerate(endpoints):
        path = f"endpoints[{i}]"
        addresses = endpoint.get("addresses") or []
        if not addresses:
            errs.append(required(f"{path}.addresses", "must contain at least 1 address"))
        elif len(addresses) > MAX_ADDRESSES:
            errs.append(too_many(f"{path}.addresses", len(addresses), MAX_ADDRESSES))
        for j, address in enumerate(addresses):
            errs += _validate_address(address, address_type, f"{path}.addresses[{j}]")
        if endpoint.get("nodeName") is not None:
            errs += validate_dns1123_subdomain(endpoint["nodeName"], f"{path}.nodeName")
        errs += validate_labels(endpoint.get("deprecatedTopology"), f"{path}.deprecatedTopology")
        if endpoint.get("hostname") is not None:
            errs += validate_dns1123_label(endpoint["hostname"], f"{path}.hostname")
    ports: list[Obj] = obj.get("ports") or []
    if len(ports) > MAX_PORTS:
        errs.append(too_many("ports", len(ports), MAX_PORTS))
    names: set[str] = set()
    for i, port in enumerate(ports):
        path = f"ports[{i}]"
        name = port.get("name") or ""
        if name:
            errs += validate_dns1123_label(name, f"{path}.name")
        if name in names:
            errs.append(duplicate(f"{path}.name", name))
        names.add(name)
        errs += validate_port_protocol(port.get("protocol"), f"{path}.protocol")
        if port.get("port") is not None and not 0 <= port["port"] <= 65535:
            errs.append(invalid(f"{path}.port", port["port"], "must be between 0 and 65535, inclusive"))
    return errs


def _default(obj: Obj) -> None:
    """SetDefaults_EndpointPort: an unnamed port is named "", the protocol is TCP."""
    for port in obj.get("ports") or []:
        port.setdefault("name", "")
        if not port.get("protocol"):
            port["protocol"] = "TCP"


class EndpointSliceStrategy(Strategy):
    """EndpointSlices: addressType never changes."""

    def prepare_for_create(self, obj: Obj) -> None:
        _default(obj)

    def prepare_for_update(self, new: Obj, old: Obj) -> None:
        _default(new)

    def validate(self, obj: Obj) -> list[FieldError]:
        return validate_endpoint_slice(obj)

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        if old.get("addressType") in ADDRESS_TYPES:
            return validate_immutable(new.get("addressType"), old.get("addressType"), "addressType")
        return []
