"""apiextensions.k8s.io/v1 CustomResourceDefinition (upstream
staging/src/k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1/types.go).

The schema itself (JSONSchemaProps) is kept as the JSON it is: it is recursive, carries `$ref`,
`default` and `x-kubernetes-*` keys, and the apiserver checks it against upstream's structural
rules (apiserver/apiextensions/schema.py) with upstream's messages rather than pydantic's.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from machinery.api.base import ApiModel
from machinery.api.meta import ObjectMeta, Time


class CustomResourceDefinitionNames(ApiModel):
    plural: str | None = None
    singular: str | None = None
    short_names: list[str] | None = None
    kind: str | None = None
    list_kind: str | None = None
    categories: list[str] | None = None


class CustomResourceValidation(ApiModel):
    open_api_v3_schema: dict[str, Any] | None = Field(None, alias="openAPIV3Schema")


class CustomResourceSubresourceScale(ApiModel):
    spec_replicas_path: str | None = None
    status_replicas_path: str | None = None
    label_selector_path: str | None = None


class CustomResourceSubresources(ApiModel):
    status: dict[str, Any] | None = None
    scale: CustomResourceSubresourceScale | None = None


class CustomResourceColumnDefinition(ApiModel):
    name: str | None = None
    type: str | None = None
    format: str | None = None
    description: str | None = None
    priority: int | None = None
    json_path: str | None = Field(None, alias="jsonPath")


class SelectableField(ApiModel):
    json_path: str | None = Field(None, alias="jsonPath")


class CustomResourceDefinitionVersion(ApiModel):
    name: str | None = None
    served: bool | None = None
    storage: bool | None = None
    deprecated: bool | None = None
    deprecation_warning: str | None = None
    schema_: CustomResourceValidation | None = Field(None, alias="schema")
    subresources: CustomResourceSubresources | None = None
    additional_printer_columns: list[CustomResourceColumnDefinition] | None = None
    selectable_fields: list[SelectableField] | None = None


class ServiceReference(ApiModel):
    namespace: str | None = None
    name: str | None = None
    path: str | None = None
    port: int | None = None


class WebhookClientConfig(ApiModel):
    url: str | None = None
    service: ServiceReference | None = None
    ca_bundle: str | None = None


class WebhookConversion(ApiModel):
    client_config: WebhookClientConfig | None = None
    conversion_review_versions: list[str] | None = None


class CustomResourceConversion(ApiModel):
    strategy: str | None = None
    webhook: WebhookConversion | None = None


class CustomResourceDefinitionSpec(ApiModel):
    group: str | None = None
    names: CustomResourceDefinitionNames | None = None
    scope: str | None = None
    versions: list[CustomResourceDefinitionVersion] | None = None
    conversion: CustomResourceConversion | None = None
    preserve_unknown_fields: bool | None = None


class CustomResourceDefinitionCondition(ApiModel):
    type: str | None = None
    status: str | None = None
    last_transition_time: Time | None = None
    reason: str | None = None
    message: str | None = None


class CustomResourceDefinitionStatus(ApiModel):
    conditions: list[CustomResourceDefinitionCondition] | None = None
    accepted_names: CustomResourceDefinitionNames | None = None
    stored_versions: list[str] | None = None


class CustomResourceDefinition(ApiModel):
    api_version: Literal["apiextensions.k8s.io/v1"] = "apiextensions.k8s.io/v1"
    kind: Literal["CustomResourceDefinition"] = "CustomResourceDefinition"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: CustomResourceDefinitionSpec | None = None
    status: CustomResourceDefinitionStatus | None = None


class CustomResource(ApiModel):
    """Stands for any custom object in the resource table of a served CRD (ResourceInfo.model): the
    objects themselves are checked against the CRD's schema, not this."""

    model_config = {**ApiModel.model_config, "extra": "allow"}
    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)


_MODELS: dict[tuple[str, str, str], type[CustomResource]] = {}


def custom_resource_model(group: str, version: str, kind: str) -> type[CustomResource]:
    """One model class per custom kind (the resource table and informers tell resources apart by model)."""
    key = (group, version, kind)
    if key not in _MODELS:
        _MODELS[key] = type(kind, (CustomResource,), {"__module__": __name__,
                                                      "__qualname__": f"{kind}.{version}.{group}"})
    return _MODELS[key]
