"""discovery.k8s.io/v1 EndpointSlice: the endpoints of a Service, at most 100 per slice.

Field names follow upstream's k8s.io/api/discovery/v1/types.go.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from machinery.api.base import ApiModel
from machinery.api.core_v1 import ObjectReference
from machinery.api.meta import ObjectMeta


class EndpointConditions(ApiModel):
    ready: bool | None = None
    serving: bool | None = None
    terminating: bool | None = None


class ForZone(ApiModel):
    name: str


class ForNode(ApiModel):
    name: str


class EndpointHints(ApiModel):
    for_zones: list[ForZone] | None = None
    for_nodes: list[ForNode] | None = None


class Endpoint(ApiModel):
    addresses: list[str]
    conditions: EndpointConditions | None = None
    hostname: str | None = None
    target_ref: ObjectReference | None = None
    deprecated_topology: dict[str, str] | None = None
    node_name: str | None = None
    zone: str | None = None
    hints: EndpointHints | None = None


class EndpointPort(ApiModel):
    name: str | None = None
    protocol: str | None = None
    port: int | None = None
    app_protocol: str | None = None


class EndpointSlice(ApiModel):
    api_version: Literal["discovery.k8s.io/v1"] = "discovery.k8s.io/v1"
    kind: Literal["EndpointSlice"] = "EndpointSlice"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    address_type: str  # IPv4 | IPv6 | FQDN
    endpoints: list[Endpoint] | None = None  # upstream: required, may be empty
    ports: list[EndpointPort] | None = None
