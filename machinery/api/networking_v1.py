"""networking.k8s.io/v1 Ingress and IngressClass (upstream k8s.io/api/networking/v1/types.go): HTTP
routing by host and path to Services, served by an ingress controller (ingress_nginx/) that claims
the Ingresses of its class."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from machinery.api.base import ApiModel
from machinery.api.core_v1 import TypedLocalObjectReference
from machinery.api.meta import ObjectMeta

# PathType (types.go)
PATH_TYPE_EXACT = "Exact"
PATH_TYPE_PREFIX = "Prefix"
PATH_TYPE_IMPLEMENTATION_SPECIFIC = "ImplementationSpecific"
PATH_TYPES = [PATH_TYPE_EXACT, PATH_TYPE_IMPLEMENTATION_SPECIFIC, PATH_TYPE_PREFIX]
# the annotation that marks an IngressClass as the cluster's default (AnnotationIsDefaultIngressClass)
IS_DEFAULT_CLASS_ANNOTATION = "ingressclass.kubernetes.io/is-default-class"
# the deprecated class annotation (still read by ingress-nginx)
INGRESS_CLASS_ANNOTATION = "kubernetes.io/ingress.class"
# IngressClassParametersReference scopes
PARAMETERS_SCOPE_NAMESPACE = "Namespace"
PARAMETERS_SCOPE_CLUSTER = "Cluster"


class ServiceBackendPort(ApiModel):
    name: str | None = None
    number: int | None = None


class IngressServiceBackend(ApiModel):
    name: str
    port: ServiceBackendPort | None = None


class IngressBackend(ApiModel):
    service: IngressServiceBackend | None = None
    resource: TypedLocalObjectReference | None = None


class HTTPIngressPath(ApiModel):
    path: str | None = None
    path_type: str | None = None  # Exact | Prefix | ImplementationSpecific; required
    backend: IngressBackend


class HTTPIngressRuleValue(ApiModel):
    paths: list[HTTPIngressPath]


class IngressRule(ApiModel):
    host: str | None = None
    http: HTTPIngressRuleValue | None = None  # IngressRuleValue, inline


class IngressTLS(ApiModel):
    hosts: list[str] | None = None
    secret_name: str | None = None


class IngressSpec(ApiModel):
    ingress_class_name: str | None = None
    default_backend: IngressBackend | None = None
    tls: list[IngressTLS] | None = None
    rules: list[IngressRule] | None = None


class IngressPortStatus(ApiModel):
    port: int
    protocol: str
    error: str | None = None


class IngressLoadBalancerIngress(ApiModel):
    ip: str | None = None
    hostname: str | None = None
    ports: list[IngressPortStatus] | None = None


class IngressLoadBalancerStatus(ApiModel):
    ingress: list[IngressLoadBalancerIngress] | None = None


class IngressStatus(ApiModel):
    load_balancer: IngressLoadBalancerStatus | None = None


class Ingress(ApiModel):
    api_version: Literal["networking.k8s.io/v1"] = "networking.k8s.io/v1"
    kind: Literal["Ingress"] = "Ingress"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: IngressSpec | None = None
    status: IngressStatus | None = None


class IngressClassParametersReference(ApiModel):
    api_group: str | None = None
    kind: str
    name: str
    scope: str | None = None  # Cluster (default) | Namespace
    namespace: str | None = None


class IngressClassSpec(ApiModel):
    controller: str | None = None
    parameters: IngressClassParametersReference | None = None


class IngressClass(ApiModel):
    api_version: Literal["networking.k8s.io/v1"] = "networking.k8s.io/v1"
    kind: Literal["IngressClass"] = "IngressClass"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: IngressClassSpec | None = None
