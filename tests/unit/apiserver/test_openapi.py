"""The OpenAPI documents: upstream names, resolvable references, what kubectl looks for (GVKs, PATCH
operations with `fieldValidation`), and the v2 protobuf read back the way kubectl reads it.

The protobuf is decoded with message classes built at run time from the text of gnostic's
openapiv2/OpenAPIv2.proto (github.com/google/gnostic; comments left out below), so the test checks the
encoder against the upstream field numbers rather than against a second copy of its own tables.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from google.protobuf import any_pb2, descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import Message

from apiserver import openapi
from apiserver.openapi_v2_proto import encode_document, encode_schema
from machinery.api import apps_v1, autoscaling_v1, core_v1, meta
from machinery.api.resources import RESOURCES

# --------------------------------------------------------------------------- gnostic's OpenAPIv2.proto

OPENAPI_V2_PROTO = """
syntax = "proto3";
package openapi.v2;
import "google/protobuf/any.proto";
message AdditionalPropertiesItem { oneof oneof { Schema schema = 1; bool boolean = 2; } }
message Any { google.protobuf.Any value = 1; string yaml = 2; }
message ApiKeySecurity { string type = 1; string name = 2; string in = 3; string description = 4;
  repeated NamedAny vendor_extension = 5; }
message BasicAuthenticationSecurity { string type = 1; string description = 2;
  repeated NamedAny vendor_extension = 3; }
message BodyParameter { string description = 1; string name = 2; string in = 3; bool required = 4;
  Schema schema = 5; repeated NamedAny vendor_extension = 6; }
message Contact { string name = 1; string url = 2; string email = 3; repeated NamedAny vendor_extension = 4; }
message Default { repeated NamedAny additional_properties = 1; }
message Definitions { repeated NamedSchema additional_properties = 1; }
message Document { string swagger = 1; Info info = 2; string host = 3; string base_path = 4;
  repeated string schemes = 5; repeated string consumes = 6; repeated string produces = 7; Paths paths = 8;
  Definitions definitions = 9; ParameterDefinitions parameters = 10; ResponseDefinitions responses = 11;
  repeated SecurityRequirement security = 12; SecurityDefinitions security_definitions = 13;
  repeated Tag tags = 14; ExternalDocs external_docs = 15; repeated NamedAny vendor_extension = 16; }
message Examples { repeated NamedAny additional_properties = 1; }
message ExternalDocs { string description = 1; string url = 2; repeated NamedAny vendor_extension = 3; }
message FileSchema { string format = 1; string title = 2; string description = 3; Any default = 4;
  repeated string required = 5; string type = 6; bool read_only = 7; ExternalDocs external_docs = 8;
  Any example = 9; repeated NamedAny vendor_extension = 10; }
message FormDataParameterSubSchema { bool required = 1; string in = 2; string description = 3;
  string name = 4;
  bool allow_empty_value = 5; string type = 6; string format = 7; PrimitivesItems items = 8;
  string collection_format = 9; Any default = 10; double maximum = 11; bool exclusive_maximum = 12;
  double minimum = 13; bool exclusive_minimum = 14; int64 max_length = 15; int64 min_length = 16;
  string pattern = 17; int64 max_items = 18; int64 min_items = 19; bool unique_items = 20;
  repeated Any enum
  = 21; double multiple_of = 22; repeated NamedAny vendor_extension = 23; }
message Header { string type = 1; string format = 2; PrimitivesItems items = 3; string collection_format = 4;
  Any default = 5; double maximum = 6; bool exclusive_maximum = 7; double minimum = 8;
  bool exclusive_minimum = 9; int64 max_length = 10; int64 min_length = 11; string pattern = 12;
  int64 max_items = 13; int64 min_items = 14; bool unique_items = 15; repeated Any enum = 16;
  double multiple_of = 17; string description = 18; repeated NamedAny vendor_extension = 19; }
message HeaderParameterSubSchema { bool required = 1; string in = 2; string description = 3; string name = 4;
  string type = 5; string format = 6; PrimitivesItems items = 7; string collection_format = 8;
  Any default = 9;
  double maximum = 10; bool exclusive_maximum = 11; double minimum = 12; bool exclusive_minimum = 13;
  int64 max_length = 14; int64 min_length = 15; string pattern = 16; int64 max_items = 17;
  int64 min_items = 18;
  bool unique_items = 19; repeated Any enum = 20; double multiple_of = 21;
  repeated NamedAny vendor_extension = 22; }
message Headers { repeated NamedHeader additional_properties = 1; }
message Info { string title = 1; string version = 2; string description = 3; string terms_of_service = 4;
  Contact contact = 5; License license = 6; repeated NamedAny vendor_extension = 7; }
message ItemsItem { repeated Schema schema = 1; }
message JsonReference { string _ref = 1; string description = 2; }
message License { string name = 1; string url = 2; repeated NamedAny vendor_extension = 3; }
message NamedAny { string name = 1; Any value = 2; }
message NamedHeader { string name = 1; Header value = 2; }
message NamedParameter { string name = 1; Parameter value = 2; }
message NamedPathItem { string name = 1; PathItem value = 2; }
message NamedResponse { string name = 1; Response value = 2; }
message NamedResponseValue { string name = 1; ResponseValue value = 2; }
message NamedSchema { string name = 1; Schema value = 2; }
message NamedSecurityDefinitionsItem { string name = 1; SecurityDefinitionsItem value = 2; }
message NamedString { string name = 1; string value = 2; }
message NamedStringArray { string name = 1; StringArray value = 2; }
message NonBodyParameter { oneof oneof { HeaderParameterSubSchema header_parameter_sub_schema = 1;
  FormDataParameterSubSchema form_data_parameter_sub_schema = 2;
  QueryParameterSubSchema query_parameter_sub_schema = 3;
  PathParameterSubSchema path_parameter_sub_schema = 4;
  } }
message Oauth2AccessCodeSecurity { string type = 1; string flow = 2; Oauth2Scopes scopes = 3;
  string authorization_url = 4; string token_url = 5; string description = 6;
  repeated NamedAny vendor_extension = 7; }
message Oauth2ApplicationSecurity { string type = 1; string flow = 2; Oauth2Scopes scopes = 3;
  string token_url = 4; string description = 5; repeated NamedAny vendor_extension = 6; }
message Oauth2ImplicitSecurity { string type = 1; string flow = 2; Oauth2Scopes scopes = 3;
  string authorization_url = 4; string description = 5; repeated NamedAny vendor_extension = 6; }
message Oauth2PasswordSecurity { string type = 1; string flow = 2; Oauth2Scopes scopes = 3;
  string token_url = 4; string description = 5; repeated NamedAny vendor_extension = 6; }
message Oauth2Scopes { repeated NamedString additional_properties = 1; }
message Operation { repeated string tags = 1; string summary = 2; string description = 3;
  ExternalDocs external_docs = 4; string operation_id = 5; repeated string produces = 6;
  repeated string consumes = 7; repeated ParametersItem parameters = 8; Responses responses = 9;
  repeated string schemes = 10; bool deprecated = 11; repeated SecurityRequirement security = 12;
  repeated NamedAny vendor_extension = 13; }
message Parameter { oneof oneof { BodyParameter body_parameter = 1; NonBodyParameter non_body_parameter = 2;
  } }
message ParameterDefinitions { repeated NamedParameter additional_properties = 1; }
message ParametersItem { oneof oneof { Parameter parameter = 1; JsonReference json_reference = 2; } }
message PathItem { string _ref = 1; Operation get = 2; Operation put = 3; Operation post = 4;
  Operation delete = 5; Operation options = 6; Operation head = 7; Operation patch = 8;
  repeated ParametersItem parameters = 9; repeated NamedAny vendor_extension = 10; }
message PathParameterSubSchema { bool required = 1; string in = 2; string description = 3; string name = 4;
  string type = 5; string format = 6; PrimitivesItems items = 7; string collection_format = 8;
  Any default = 9;
  double maximum = 10; bool exclusive_maximum = 11; double minimum = 12; bool exclusive_minimum = 13;
  int64 max_length = 14; int64 min_length = 15; string pattern = 16; int64 max_items = 17;
  int64 min_items = 18;
  bool unique_items = 19; repeated Any enum = 20; double multiple_of = 21;
  repeated NamedAny vendor_extension = 22; }
message Paths { repeated NamedAny vendor_extension = 1; repeated NamedPathItem path = 2; }
message PrimitivesItems { string type = 1; string format = 2; PrimitivesItems items = 3;
  string collection_format = 4; Any default = 5; double maximum = 6; bool exclusive_maximum = 7;
  double minimum = 8; bool exclusive_minimum = 9; int64 max_length = 10; int64 min_length = 11;
  string pattern = 12; int64 max_items = 13; int64 min_items = 14; bool unique_items = 15;
  repeated Any enum = 16; double multiple_of = 17; repeated NamedAny vendor_extension = 18; }
message Properties { repeated NamedSchema additional_properties = 1; }
message QueryParameterSubSchema { bool required = 1; string in = 2; string description = 3; string name = 4;
  bool allow_empty_value = 5; string type = 6; string format = 7; PrimitivesItems items = 8;
  string collection_format = 9; Any default = 10; double maximum = 11; bool exclusive_maximum = 12;
  double minimum = 13; bool exclusive_minimum = 14; int64 max_length = 15; int64 min_length = 16;
  string pattern = 17; int64 max_items = 18; int64 min_items = 19; bool unique_items = 20;
  repeated Any enum = 21; double multiple_of = 22; repeated NamedAny vendor_extension = 23; }
message Response { string description = 1; SchemaItem schema = 2; Headers headers = 3; Examples examples = 4;
  repeated NamedAny vendor_extension = 5; }
message ResponseDefinitions { repeated NamedResponse additional_properties = 1; }
message ResponseValue { oneof oneof { Response response = 1; JsonReference json_reference = 2; } }
message Responses { repeated NamedResponseValue response_code = 1; repeated NamedAny vendor_extension = 2; }
message Schema { string _ref = 1; string format = 2; string title = 3; string description = 4;
  Any default = 5;
  double multiple_of = 6; double maximum = 7; bool exclusive_maximum = 8; double minimum = 9;
  bool exclusive_minimum = 10; int64 max_length = 11; int64 min_length = 12; string pattern = 13;
  int64 max_items = 14; int64 min_items = 15; bool unique_items = 16; int64 max_properties = 17;
  int64 min_properties = 18; repeated string required = 19; repeated Any enum
  = 20; AdditionalPropertiesItem additional_properties = 21; TypeItem type = 22; ItemsItem items = 23;
  repeated Schema all_of = 24; Properties properties = 25; string discriminator = 26; bool read_only = 27;
  Xml xml = 28; ExternalDocs external_docs = 29; Any example = 30; repeated NamedAny vendor_extension = 31; }
message SchemaItem { oneof oneof { Schema schema = 1; FileSchema file_schema = 2; } }
message SecurityDefinitions { repeated NamedSecurityDefinitionsItem additional_properties = 1; }
message SecurityDefinitionsItem { oneof oneof {
  BasicAuthenticationSecurity basic_authentication_security = 1; ApiKeySecurity api_key_security = 2;
  Oauth2ImplicitSecurity oauth2_implicit_security = 3; Oauth2PasswordSecurity oauth2_password_security = 4;
  Oauth2ApplicationSecurity oauth2_application_security = 5;
  Oauth2AccessCodeSecurity oauth2_access_code_security = 6; } }
message SecurityRequirement { repeated NamedStringArray additional_properties = 1; }
message StringArray { repeated string value = 1; }
message Tag { string name = 1; string description = 2; ExternalDocs external_docs = 3;
  repeated NamedAny vendor_extension = 4; }
message TypeItem { repeated string value = 1; }
message VendorExtension { repeated NamedAny additional_properties = 1; }
message Xml { string name = 1; string namespace = 2; string prefix = 3; bool attribute = 4; bool wrapped = 5;
  repeated NamedAny vendor_extension = 6; }
"""

_SCALARS = {
    "string": descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
    "bool": descriptor_pb2.FieldDescriptorProto.TYPE_BOOL,
    "double": descriptor_pb2.FieldDescriptorProto.TYPE_DOUBLE,
    "int64": descriptor_pb2.FieldDescriptorProto.TYPE_INT64,
}


def _proto_classes(text: str) -> dict[str, type[Message]]:
    """A tiny .proto reader (messages, fields, one oneof) → message classes of a fresh pool."""
    tokens = re.findall(r"[A-Za-z_][\w.]*|\d+|[{}=;]|\"[^\"]*\"", text)
    file = descriptor_pb2.FileDescriptorProto(
        name="openapiv2/OpenAPIv2.proto", package="openapi.v2", syntax="proto3",
        dependency=["google/protobuf/any.proto"],
    )
    i = 0
    while i < len(tokens):
        if tokens[i] != "message":
            i += 1
            continue
        message = file.message_type.add(name=tokens[i + 1])
        i += 3  # message Name {
        oneof: int | None = None
        while tokens[i] != "}" or oneof is not None:
            if tokens[i] == "}":
                oneof, i = None, i + 1
                continue
            if tokens[i] == "oneof":
                message.oneof_decl.add(name=tokens[i + 1])
                oneof, i = len(message.oneof_decl) - 1, i + 3
                continue
            repeated = tokens[i] == "repeated"
            i += repeated
            type_name, name, _, number, _ = tokens[i:i + 5]
            i += 5
            fd = message.field.add(name=name, number=int(number))
            fd.label = fd.LABEL_REPEATED if repeated else fd.LABEL_OPTIONAL
            if type_name in _SCALARS:
                fd.type = _SCALARS[type_name]
            else:
                fd.type = fd.TYPE_MESSAGE
                fd.type_name = "." + (type_name if "." in type_name else f"openapi.v2.{type_name}")
            if oneof is not None:
                fd.oneof_index = oneof
        i += 1
    pool = descriptor_pool.DescriptorPool()
    any_file = descriptor_pb2.FileDescriptorProto()
    any_pb2.DESCRIPTOR.CopyToProto(any_file)
    pool.Add(any_file)
    pool.Add(file)
    return {
        m.name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"openapi.v2.{m.name}"))
        for m in file.message_type
    }


PROTO = _proto_classes(OPENAPI_V2_PROTO)


def _json_name(field_name: str) -> str:
    if field_name == "_ref":
        return "$ref"
    head, *rest = field_name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def to_swagger(message: Message) -> Any:
    """gnostic → Swagger JSON, the way gnostic's own ToRawInfo() would write it."""
    name = message.DESCRIPTOR.name
    if name == "Any":
        return yaml.safe_load(message.yaml)  # type: ignore[attr-defined]
    if name == "TypeItem":
        values = list(message.value)  # type: ignore[attr-defined]
        return values[0] if len(values) == 1 else values
    if name == "ItemsItem":
        items = [to_swagger(s) for s in message.schema]  # type: ignore[attr-defined]
        return items[0] if len(items) == 1 else items
    if message.DESCRIPTOR.oneofs_by_name.get("oneof") is not None:
        which = message.WhichOneof("oneof")
        assert which is not None, f"{name}: empty oneof"
        value = getattr(message, which)
        return to_swagger(value) if isinstance(value, Message) else value
    out: dict[str, Any] = {}
    for fd, value in message.ListFields():
        repeated = fd.is_repeated
        if repeated and fd.message_type is not None and fd.message_type.name.startswith("Named"):
            for pair in value:
                assert pair.name not in out
                out[pair.name] = to_swagger(pair.value) if isinstance(pair.value, Message) else pair.value
        elif repeated:
            out[_json_name(fd.name)] = [to_swagger(v) if isinstance(v, Message) else v for v in value]
        else:
            out[_json_name(fd.name)] = to_swagger(value) if isinstance(value, Message) else value
    return out


def _without_zero_values(node: Any, parent_key: str = "") -> Any:
    """What survives proto3: scalars equal to their zero value are not sent (oneof members are)."""
    if parent_key.startswith("x-") or parent_key == "enum":  # carried as YAML, whole
        return node
    if isinstance(node, dict):
        return {
            k: _without_zero_values(v, k) for k, v in node.items()
            if k.startswith("x-") or k == "additionalProperties" or v not in (False, "", 0) or v is True
        }
    if isinstance(node, list):
        return [_without_zero_values(v) for v in node]
    return node


def _decoded() -> Any:
    document = PROTO["Document"]()
    document.ParseFromString(openapi.openapi_v2_protobuf())
    return document


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        if isinstance(node.get("$ref"), str):
            yield node["$ref"]
        for value in node.values():
            yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


def _gvk(info: Any) -> dict[str, str]:
    return {"group": info.group, "kind": info.kind, "version": info.version}


# --------------------------------------------------------------------------- definitions


@pytest.mark.parametrize(("model", "name", "gvk"), [
    (core_v1.Pod, "io.k8s.api.core.v1.Pod", {"group": "", "kind": "Pod", "version": "v1"}),
    (apps_v1.Deployment, "io.k8s.api.apps.v1.Deployment",
     {"group": "apps", "kind": "Deployment", "version": "v1"}),
    (autoscaling_v1.Scale, "io.k8s.api.autoscaling.v1.Scale",
     {"group": "autoscaling", "kind": "Scale", "version": "v1"}),
    (core_v1.Binding, "io.k8s.api.core.v1.Binding", {"group": "", "kind": "Binding", "version": "v1"}),
    (meta.Status, "io.k8s.apimachinery.pkg.apis.meta.v1.Status",
     {"group": "", "kind": "Status", "version": "v1"}),
])


def test_kinds_are_named_as_upstream_and_carry_their_gvk(model: type, name: str, gvk: dict[str, str]) -> None:
    assert openapi.definition_name(model) == name
    definitions = openapi.openapi_v2_json()["definitions"]
    assert gvk in definitions[name]["x-kubernetes-group-version-kind"]


def test_every_resource_has_its_kind_and_list_definitions() -> None:
    definitions = openapi.openapi_v2_json()["definitions"]
    for info in RESOURCES:
        name = openapi.definition_name(info.model) or ""
        assert definitions[name]["x-kubernetes-group-version-kind"] == [_gvk(info)]
        listed = definitions[f"{name}List"]
        assert listed["x-kubernetes-group-version-kind"] == [{**_gvk(info), "kind": f"{info.kind}List"}]
        assert listed["required"] == ["items"]
        assert listed["properties"]["items"]["items"] == {"$ref": f"#/definitions/{name}"}
        assert listed["properties"]["metadata"] == {"$ref": f"#/definitions/{openapi.META_PREFIX}.ListMeta"}


def _schema_keywords(definitions: dict[str, Any]) -> set[str]:
    """The keywords the schemas use, not the names of their properties."""
    found: set[str] = set()

    def walk(schema: Any) -> None:
        if isinstance(schema, dict):
            for key, value in schema.items():
                found.add(key)
                if key == "properties" and isinstance(value, dict):
                    for sub in value.values():
                        walk(sub)
                else:
                    walk(value)
        elif isinstance(schema, list):
            for item in schema:
                walk(item)

    for schema in definitions.values():
        walk(schema)
    return found


def test_all_definitions_are_upstream_names_without_nulls_titles_or_any_of() -> None:
    definitions = openapi.openapi_v2_json()["definitions"]
    assert all(name.startswith("io.k8s.") for name in definitions)
    text = json.dumps(definitions)
    for word in ('"null"', '"anyOf"', '"title"', '"const"', '"$defs"'):
        assert word not in text
    assert "default" not in _schema_keywords(definitions)  # a property may be called so (LimitRangeItem.default)
    for name, schema in definitions.items():
        assert schema.get("type") in ("object", "string"), name


def test_api_version_and_kind_are_plain_strings() -> None:
    deployment = openapi.openapi_v2_json()["definitions"]["io.k8s.api.apps.v1.Deployment"]
    assert deployment["properties"]["apiVersion"] == {"type": "string"}
    assert deployment["properties"]["kind"] == {"type": "string"}
    assert deployment["properties"]["spec"] == {"$ref": "#/definitions/io.k8s.api.apps.v1.DeploymentSpec"}
    assert set(deployment) == {"properties", "type", "x-kubernetes-group-version-kind"}


def test_strategic_merge_extensions_are_kept() -> None:
    definitions = openapi.openapi_v2_json()["definitions"]
    pod_spec = definitions["io.k8s.api.core.v1.PodSpec"]["properties"]
    assert pod_spec["containers"] == {
        "items": {"$ref": "#/definitions/io.k8s.api.core.v1.Container"}, "type": "array",
        "x-kubernetes-patch-merge-key": "name", "x-kubernetes-patch-strategy": "merge",
    }
    assert pod_spec["volumes"]["x-kubernetes-patch-strategy"] == "merge,retainKeys"
    container = definitions["io.k8s.api.core.v1.Container"]["properties"]
    assert container["ports"]["x-kubernetes-patch-merge-key"] == "containerPort"
    assert container["env"]["x-kubernetes-patch-merge-key"] == "name"
    owner_refs = definitions[f"{openapi.META_PREFIX}.ObjectMeta"]["properties"]["ownerReferences"]
    assert owner_refs["x-kubernetes-patch-merge-key"] == "uid"
    assert definitions["io.k8s.api.core.v1.PodSpec"]["required"] == ["containers"]


def test_int_or_string_and_quantity_are_upstreams_named_types() -> None:
    definitions = openapi.openapi_v2_json()["definitions"]
    rolling = definitions["io.k8s.api.apps.v1.RollingUpdateDeployment"]["properties"]
    assert rolling["maxSurge"] == {"$ref": f"#/definitions/{openapi.INT_OR_STRING}"}
    assert definitions[openapi.INT_OR_STRING]["type"] == "string"
    assert definitions[openapi.INT_OR_STRING]["format"] == "int-or-string"
    limits = definitions["io.k8s.api.core.v1.ResourceRequirements"]["properties"]["limits"]
    assert limits == {"type": "object", "additionalProperties": {"$ref": f"#/definitions/{openapi.QUANTITY}"}}
    assert definitions[openapi.QUANTITY]["type"] == "string"
    v3 = openapi.openapi_v3_group("apis/apps/v1")
    assert v3 is not None
    assert v3["components"]["schemas"][openapi.INT_OR_STRING]["x-kubernetes-int-or-string"] is True


def test_enums_keep_their_values() -> None:
    requirement = openapi.openapi_v2_json()["definitions"][
        "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelectorRequirement"]
    assert requirement["properties"]["operator"] == {"enum": ["In", "NotIn", "Exists", "DoesNotExist"],
                                                     "type": "string"}


# --------------------------------------------------------------------------- OpenAPI v3


def test_v3_root_lists_every_group_version_with_its_hash() -> None:
    root = openapi.openapi_v3_root()
    assert set(root["paths"]) == {"api", "apis", "api/v1", "apis/apps/v1", "apis/batch/v1",
                                  "apis/coordination.k8s.io/v1", "apis/discovery.k8s.io/v1",
                                  "apis/rbac.authorization.k8s.io/v1",
                                  "apis/admissionregistration.k8s.io/v1",
                                  "apis/authorization.k8s.io/v1", "apis/storage.k8s.io/v1",
                                  "apis/policy/v1", "apis/autoscaling/v2",
                                  "apis/authentication.k8s.io/v1", "apis/authentication.k8s.io/v1beta1",
                                  "apis/authentication.k8s.io/v1alpha1", "apis/scheduling.k8s.io/v1",
                                  "apis/apiextensions.k8s.io/v1", "apis/networking.k8s.io/v1"}
    for path, entry in root["paths"].items():
        url = entry["serverRelativeURL"]
        assert url.startswith(f"/openapi/v3/{path}?hash=")
        digest = url.partition("?hash=")[2]
        assert re.fullmatch(r"[0-9A-F]{128}", digest)
        assert openapi.openapi_v3_hash(path) == digest
        assert openapi.openapi_v3_group(path) is not None
    assert openapi.openapi_v3_group("apis/nope/v1") is None
    assert openapi.openapi_v3_group("/apis/apps/v1") is openapi.openapi_v3_group("apis/apps/v1")


@pytest.mark.parametrize("path", ["api", "apis", "api/v1", "apis/apps/v1", "apis/coordination.k8s.io/v1"])
def test_v3_documents_are_self_contained(path: str) -> None:
    document = openapi.openapi_v3_group(path)
    assert document is not None
    assert document["openapi"].startswith("3.0")
    schemas = document["components"]["schemas"]
    for ref in _refs(document):
        assert ref.startswith("#/components/schemas/")
        assert ref.removeprefix("#/components/schemas/") in schemas, ref
    assert "#/definitions/" not in json.dumps(document)


def _supports_query_param_v3(document: dict[str, Any], gvk: dict[str, str], param: str) -> bool:
    """cli-runtime's supportsQueryParamV3: any PATCH operation of the GVK decides (Go maps: any order)."""
    verdicts = set()
    for item in document["paths"].values():
        op = item.get("patch")
        if op is None or op.get("x-kubernetes-group-version-kind") != gvk:
            continue
        verdicts.add(any(p["name"] == param and p["in"] == "query" for p in op.get("parameters", [])))
    return verdicts == {True}


def test_v3_patch_operations_carry_field_validation_for_every_kind() -> None:
    for info in RESOURCES:
        if "patch" not in info.verbs:  # access reviews are only created
            continue
        path = f"apis/{info.api_version}" if info.group else f"api/{info.version}"
        document = openapi.openapi_v3_group(path)
        assert document is not None
        assert _supports_query_param_v3(document, _gvk(info), "fieldValidation"), info.kind
    scale = openapi.openapi_v3_group("apis/apps/v1")
    assert scale is not None
    assert _supports_query_param_v3(scale, {"group": "autoscaling", "kind": "Scale", "version": "v1"},
                                    "fieldValidation")


def test_v3_operations_of_a_namespaced_resource() -> None:
    document = openapi.openapi_v3_group("apis/apps/v1")
    assert document is not None
    paths = document["paths"]
    item = paths["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]
    assert {"get", "put", "patch", "delete"} <= set(item)
    assert [p["name"] for p in item["parameters"]] == ["name", "namespace", "pretty"]
    patch = item["patch"]
    assert patch["operationId"] == "patchAppsV1NamespacedDeployment"
    assert patch["x-kubernetes-action"] == "patch"
    assert patch["x-kubernetes-group-version-kind"] == {"group": "apps", "kind": "Deployment",
                                                        "version": "v1"}
    assert {"fieldValidation", "fieldManager", "dryRun", "force"} <= {p["name"] for p in patch["parameters"]}
    assert set(patch["requestBody"]["content"]) == set(openapi.PATCH_CONTENT_TYPES)
    for content in patch["requestBody"]["content"].values():
        assert content["schema"] == {"$ref": f"#/components/schemas/{openapi.PATCH}"}
    assert patch["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/io.k8s.api.apps.v1.Deployment"}
    for method in ("put", "post"):
        op = item.get(method) or paths["/apis/apps/v1/namespaces/{namespace}/deployments"][method]
        assert {"fieldValidation", "fieldManager", "dryRun"} <= {p["name"] for p in op["parameters"]}
    collection = paths["/apis/apps/v1/namespaces/{namespace}/deployments"]
    assert collection["get"]["x-kubernetes-action"] == "list"
    assert collection["get"]["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/io.k8s.api.apps.v1.DeploymentList"}
    assert collection["post"]["x-kubernetes-action"] == "post"
    assert collection["delete"]["x-kubernetes-action"] == "deletecollection"
    assert paths["/apis/apps/v1/deployments"]["get"]["operationId"] == "listAppsV1DeploymentForAllNamespaces"
    scale = paths["/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale"]["patch"]
    assert scale["x-kubernetes-group-version-kind"] == {"group": "autoscaling", "kind": "Scale",
                                                        "version": "v1"}
    assert "io.k8s.api.autoscaling.v1.Scale" in document["components"]["schemas"]


def test_v3_cluster_scoped_resources_and_subresources() -> None:
    document = openapi.openapi_v3_group("api/v1")
    assert document is not None
    paths = document["paths"]
    assert "/api/v1/nodes/{name}" in paths
    assert paths["/api/v1/nodes/{name}"]["patch"]["operationId"] == "patchCoreV1Node"
    assert "deletecollection" not in json.dumps(paths["/api/v1/namespaces"])  # Namespace has no such verb
    binding = paths["/api/v1/namespaces/{namespace}/pods/{name}/binding"]["post"]
    assert binding["x-kubernetes-group-version-kind"] == {"group": "", "kind": "Binding", "version": "v1"}
    log = paths["/api/v1/namespaces/{namespace}/pods/{name}/log"]["get"]
    assert log["operationId"] == "readCoreV1NamespacedPodLog"
    exec_ = paths["/api/v1/namespaces/{namespace}/pods/{name}/exec"]
    assert exec_["get"]["operationId"] == "connectCoreV1GetNamespacedPodExec"
    assert exec_["post"]["x-kubernetes-action"] == "connect"
    status = paths["/api/v1/namespaces/{namespace}/pods/{name}/status"]["patch"]
    assert status["x-kubernetes-group-version-kind"] == {"group": "", "kind": "Pod", "version": "v1"}
    assert status["operationId"] == "patchCoreV1NamespacedPodStatus"
    assert "io.k8s.api.apps.v1.Deployment" not in document["components"]["schemas"]


# --------------------------------------------------------------------------- OpenAPI v2


def test_v2_refs_resolve() -> None:
    document = openapi.openapi_v2_json()
    assert document["swagger"] == "2.0"
    for ref in _refs(document):
        assert ref.startswith("#/definitions/")
        assert ref.removeprefix("#/definitions/") in document["definitions"], ref
    v2_paths = set(document["paths"])
    for path in openapi.openapi_v3_root()["paths"]:
        group = openapi.openapi_v3_group(path)
        assert group is not None
        assert set(group["paths"]) <= v2_paths


def test_protobuf_round_trips_to_the_json_document() -> None:
    decoded = to_swagger(_decoded())
    assert decoded == _without_zero_values(openapi.openapi_v2_json())


def test_protobuf_is_what_protobuf_itself_would_write() -> None:
    """Parsed and re-serialized by the protobuf runtime, the bytes come back identical."""
    data = openapi.openapi_v2_protobuf()
    assert _decoded().SerializeToString(deterministic=True) == data


def _check_schema(schema: Any, models: set[str], where: str) -> None:
    """kube-openapi's proto.Definitions.ParseSchema (what kubectl's NewOpenAPIData runs): its errors."""
    ref = schema._ref
    if ref:
        assert not schema.properties.additional_properties, f"{where}: unallowed embedded type definition"
        assert not schema.type.value, f"{where}: definition reference can't have a type"
        assert ref.startswith("#/definitions/"), f"{where}: reference to non-definition {ref}"
        assert ref.removeprefix("#/definitions/") in models, f"{where}: unknown model {ref}"
        return
    types = list(schema.type.value)
    assert len(types) <= 1, f"{where}: definitions with multiple types aren't supported"
    if not types or types[0] == "object":
        if schema.HasField("properties"):
            for pair in schema.properties.additional_properties:
                _check_schema(pair.value, models, f"{where}.{pair.name}")
        elif schema.additional_properties.HasField("schema"):
            _check_schema(schema.additional_properties.schema, models, f"{where}[*]")
    elif types[0] == "array":
        assert len(schema.items.schema) == 1, f"{where}: array should have exactly one sub-item"
        _check_schema(schema.items.schema[0], models, f"{where}[]")
    else:
        assert types[0] in ("string", "number", "integer", "boolean"), f"{where}: primitive {types[0]}"


def _extensions(named_anys: Any) -> dict[str, Any]:
    return {pair.name: yaml.safe_load(pair.value.yaml) for pair in named_anys}


def test_protobuf_definitions_parse_as_kubectl_parses_them() -> None:
    document = _decoded()
    models = {pair.name for pair in document.definitions.additional_properties}
    by_gvk: dict[tuple[str, str, str], str] = {}
    for pair in document.definitions.additional_properties:
        _check_schema(pair.value, models, pair.name)
        for gvk in _extensions(pair.value.vendor_extension).get("x-kubernetes-group-version-kind", []):
            by_gvk[(gvk["group"], gvk["version"], gvk["kind"])] = pair.name
    assert by_gvk[("apps", "v1", "Deployment")] == "io.k8s.api.apps.v1.Deployment"
    assert by_gvk[("", "v1", "Pod")] == "io.k8s.api.core.v1.Pod"
    for info in RESOURCES:
        assert by_gvk[(info.group, info.version, info.kind)] == openapi.definition_name(info.model)
    pod_spec = next(p.value for p in document.definitions.additional_properties
                    if p.name == "io.k8s.api.core.v1.PodSpec")
    containers = next(p.value for p in pod_spec.properties.additional_properties if p.name == "containers")
    assert _extensions(containers.vendor_extension) == {
        "x-kubernetes-patch-merge-key": "name", "x-kubernetes-patch-strategy": "merge"}
    assert containers.items.schema[0]._ref == "#/definitions/io.k8s.api.core.v1.Container"


def test_protobuf_patch_operations_carry_field_validation() -> None:
    """cli-runtime's supportsQueryParam on the v2 document, as kubectl 1.27 runs it."""
    document = _decoded()
    for info in RESOURCES:
        if "patch" not in info.verbs:  # access reviews are only created
            continue
        verdicts = set()
        for pair in document.paths.path:
            op = pair.value.patch
            if not pair.value.HasField("patch"):
                continue
            gvk = _extensions(op.vendor_extension).get("x-kubernetes-group-version-kind")
            if gvk != _gvk(info):  # yaml → map[string]string, compared field by field
                continue
            names = {p.parameter.non_body_parameter.query_parameter_sub_schema.name for p in op.parameters}
            verdicts.add("fieldValidation" in names)
        assert verdicts == {True}, info.kind


# --------------------------------------------------------------------------- the encoder itself


def test_encoder_wire_details() -> None:
    schema = {
        "type": "object", "description": "é", "minimum": -1, "maxLength": -2, "required": ["a"],
        "additionalProperties": False, "enum": ["x", 1], "x-kubernetes-preserve-unknown-fields": True,
    }
    message = PROTO["Schema"]()
    message.ParseFromString(encode_schema(schema))
    assert message.additional_properties.WhichOneof("oneof") == "boolean"
    assert message.additional_properties.boolean is False
    assert message.minimum == -1.0
    assert message.max_length == -2
    assert [yaml.safe_load(a.yaml) for a in message.enum] == ["x", 1]
    assert to_swagger(message) == {**schema, "type": "object"}


def test_encoder_refuses_what_it_cannot_carry() -> None:
    with pytest.raises(ValueError, match="oneOf"):
        encode_schema({"oneOf": [{"type": "string"}]})
    with pytest.raises(ValueError, match="in='cookie'"):
        encode_document({"paths": {"/x": {"get": {"parameters": [{"in": "cookie", "name": "c"}]}}}})


def test_v2_protobuf_content_type() -> None:
    assert openapi.V2_PROTOBUF_CONTENT_TYPE == "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
    assert openapi.openapi_v2_protobuf() is openapi.openapi_v2_protobuf()
