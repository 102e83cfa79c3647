"""The pure parts of CRD serving: structural-schema rules, custom-object validation with kube-openapi's
messages, pruning and defaulting, CEL rules (self, oldSelf, messageExpression, reason), the printer
columns' JSONPath, version order, and the CRD strategy's own validation."""

from __future__ import annotations

from typing import Any

import pytest

from apiserver.apiextensions import cel, tableconvertor
from apiserver.apiextensions.registry import version_priority
from apiserver.apiextensions.schema import apply_defaults, prune, validate_structural, validate_value
from apiserver.apiextensions.strategy import CustomResourceDefinitionStrategy, validate_spec

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "required": ["size"],
            "properties": {
                "size": {"type": "integer", "minimum": 1, "maximum": 10},
                "mode": {"type": "string", "enum": ["a", "b"], "default": "a"},
                "name": {"type": "string", "pattern": "^[a-z]+$", "minLength": 2},
                "when": {"type": "string", "format": "date-time"},
                "ratio": {"type": "number", "nullable": True},
                "port": {"x-kubernetes-int-or-string": True},
                "items": {"type": "array", "maxItems": 2, "items": {"type": "object", "properties": {
                    "key": {"type": "string"}, "value": {"type": "integer", "default": 0}},
                    "required": ["key"]}, "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["key"]},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "child": {"type": "object", "x-kubernetes-embedded-resource": True,
                          "x-kubernetes-preserve-unknown-fields": True},
            },
        },
    },
}


def causes(value: Any, schema: dict[str, Any] = SCHEMA) -> dict[str, str]:
    return {e.field: e.full() for e in validate_value(value, schema, "")}


def test_structural_schema_is_accepted() -> None:
    assert validate_structural(SCHEMA, "s") == []


@pytest.mark.parametrize("schema, field, text", [
    ({"type": "object", "properties": {"x": {}}}, "s.properties[x].type",
     "Required value: must not be empty for specified object fields"),
    ({"type": "object", "properties": {"x": {"type": "array"}}}, "s.properties[x].items",
     "Required value: must be specified"),
    ({"type": "object", "properties": {"x": {"type": "array", "items": {}}}}, "s.properties[x].items.type",
     "Required value: must not be empty for specified array items"),
    ({"type": "string"}, "s.type", 'Invalid value: "string": must be object at the root'),
    ({"type": "object", "properties": {"x": {"type": "string", "x-kubernetes-int-or-string": True}}},
     "s.properties[x].type", "must be empty if x-kubernetes-int-or-string is true"),
    ({"type": "object", "properties": {"x": {"type": "object", "x-kubernetes-preserve-unknown-fields": False}}},
     "s.properties[x].x-kubernetes-preserve-unknown-fields", "must be true or undefined"),
    ({"type": "object", "properties": {"metadata": {"type": "object", "properties": {"labels": {
        "type": "object"}}}}}, "s.properties[metadata]", "must not specify anything other than name and generateName"),
    ({"type": "object", "properties": {"x": {"type": "string", "default": 5}}}, "s.properties[x].default",
     "must be of type string"),
    ({"type": "object", "properties": {"x": {"type": "array", "items": {"type": "object"},
                                             "x-kubernetes-list-type": "map"}}},
     "s.properties[x].x-kubernetes-list-map-keys", "must not be empty if x-kubernetes-list-type is map"),
    ({"type": "object", "x-kubernetes-validations": [{"rule": "self.x ==="}]},
     "s.x-kubernetes-validations[0].rule", "compilation failed"),
    ({"type": "object", "properties": {"x": {"type": "string", "$ref": "#/x"}}}, "s.properties[x].$ref",
     "Forbidden"),
])
def test_non_structural_schemas_are_refused(schema: dict[str, Any], field: str, text: str) -> None:
    errs = {e.field: e.full() for e in validate_structural(schema, "s")}
    assert field in errs, errs
    assert text in errs[field]


def test_value_errors_read_as_upstreams() -> None:
    found = causes({"spec": {"size": "x", "mode": "c", "name": "A", "when": "yesterday", "ratio": None,
                             "port": 1.5, "items": [{"key": "a"}, {"key": "a"}, {"key": "b"}], "labels": {"k": 1}}})
    assert found["spec.size"] == 'spec.size: Invalid value: "x": spec.size in body must be of type integer: "string"'
    assert found["spec.mode"] == 'spec.mode: Unsupported value: "c": supported values: "a", "b"'
    assert found["spec.name"] in ("spec.name: Invalid value: \"A\": spec.name in body should match '^[a-z]+$'",
                                  'spec.name: Invalid value: "A": spec.name in body should be at least 2 chars long')
    assert found["spec.when"] == ('spec.when: Invalid value: "yesterday": spec.when in body must be of type '
                                  'date-time: "yesterday"')
    assert "spec.ratio" not in found  # nullable
    assert "must be of type integer,string" in found["spec.port"]
    assert found["spec.items"] == "spec.items: Too many: 3: must have at most 2 items"
    assert found["spec.items[1]"].startswith("spec.items[1]: Duplicate value:")
    assert found["spec.labels[k]"].endswith('must be of type string: "integer"')
    assert causes({"spec": {}}) == {"spec.size": "spec.size: Required value"}
    assert causes({"spec": {"size": 0}}) == {
        "spec.size": "spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1"}
    assert causes({"spec": {"size": 11}})["spec.size"].endswith("should be less than or equal to 10")
    assert causes({"spec": {"size": 2.0}}) == {}  # a JSON number that is a whole number is an integer


def test_pruning_keeps_what_the_schema_specifies() -> None:
    obj = {"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "n"}, "junk": 1,
           "spec": {"size": 1, "extra": True, "free": {"any": {"thing": 1}}, "labels": {"a": "b"},
                    "items": [{"key": "a", "nope": 1}], "child": {"apiVersion": "v1", "kind": "Pod", "z": 1}}}
    unknown: list[str] = []
    prune(obj, SCHEMA, unknown=unknown)
    assert sorted(unknown) == ["junk", "spec.extra", "spec.items[0].nope"]
    assert obj["spec"]["free"] == {"any": {"thing": 1}}
    assert obj["spec"]["child"] == {"apiVersion": "v1", "kind": "Pod", "z": 1}
    assert obj["metadata"] == {"name": "n"} and obj["apiVersion"] == "x/v1"


def test_defaults_fill_what_is_missing() -> None:
    obj: dict[str, Any] = {"spec": {"size": 1, "items": [{"key": "a"}, {"key": "b", "value": 3}]}}
    apply_defaults(obj, SCHEMA)
    assert obj["spec"]["mode"] == "a"
    assert obj["spec"]["items"] == [{"key": "a", "value": 0}, {"key": "b", "value": 3}]


RULES: dict[str, Any] = {
    "type": "object",
    "properties": {"spec": {
        "type": "object",
        "x-kubernetes-validations": [
            {"rule": "self.min <= self.max", "messageExpression": "'min ' + string(self.min) + ' > max'"},
            {"rule": "self.max == oldSelf.max", "message": "max is immutable", "reason": "FieldValueForbidden"},
        ],
        "properties": {"min": {"type": "integer"}, "max": {"type": "integer"},
                       "name": {"type": "string", "x-kubernetes-validations": [{"rule": "self.startsWith('a')"}]}},
    }},
}


def test_cel_rules_with_self_old_self_and_messages() -> None:
    errs = cel.validate_object({"spec": {"min": 5, "max": 1, "name": "bob"}}, None, RULES)
    assert [e.full() for e in errs] == ['spec: Invalid value: "object": min 5 > max',
                                        "spec.name: Invalid value: \"string\": failed rule: self.startsWith('a')"]
    # a transition rule runs only on an update
    errs = cel.validate_object({"spec": {"min": 1, "max": 3}}, {"spec": {"min": 1, "max": 2}}, RULES)
    assert [e.full() for e in errs] == ["spec: Forbidden: max is immutable"]
    assert cel.validate_object({"spec": {"min": 1, "max": 2}}, {"spec": {"min": 0, "max": 2}}, RULES) == []


def test_cel_rule_checks() -> None:
    assert cel.check_rule({"rule": "self > 1"}, "r") == []
    assert [e.field for e in cel.check_rule({"rule": ""}, "r")] == ["r.rule"]
    assert [e.reason for e in cel.check_rule({"rule": "true", "reason": "Nope"}, "r")] == ["FieldValueNotSupported"]


def test_jsonpath_of_printer_columns() -> None:
    obj = {"spec": {"replicas": 3, "list": [{"n": 1}, {"n": 2}]},
           "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "Other", "status": "False"}]}}
    assert tableconvertor.evaluate(".spec.replicas", obj) == [3]
    assert tableconvertor.evaluate(".spec.list[1].n", obj) == [2]
    assert tableconvertor.evaluate(".spec.list[*].n", obj) == [1, 2]
    assert tableconvertor.evaluate('.status.conditions[?(@.type=="Ready")].status', obj) == ["True"]
    assert tableconvertor.evaluate(".spec.missing", obj) == []
    table = tableconvertor.table([{"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
                                  {"name": "Ready", "type": "string",
                                   "jsonPath": '.status.conditions[?(@.type=="Ready")].status'}],
                                 [{"metadata": {"name": "x"}, **obj}])
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Replicas", "Ready"]
    assert table["rows"][0]["cells"] == ["x", 3, "True"]


def test_version_priority_is_kubernetes_order() -> None:
    versions = ["v1beta1", "v2alpha1", "v1", "v2", "v1alpha1", "foo", "v10beta3"]
    assert sorted(versions, key=version_priority) == ["v2", "v1", "v10beta3", "v1beta1", "v2alpha1", "v1alpha1",
                                                      "foo"]


def crd(**spec: Any) -> dict[str, Any]:
    base = {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "foos", "singular": "foo", "kind": "Foo", "listKind": "FooList"},
            "versions": [{"name": "v1", "served": True, "storage": True,
                          "schema": {"openAPIV3Schema": {"type": "object"}}}]}
    return {"metadata": {"name": "foos.example.com"}, "spec": {**base, **spec}}


def test_crd_validation_and_defaults() -> None:
    strategy = CustomResourceDefinitionStrategy()
    obj = crd()
    obj["spec"]["names"].pop("listKind")
    strategy.prepare_for_create(obj)
    assert obj["spec"]["names"]["listKind"] == "FooList"
    assert obj["status"]["storedVersions"] == ["v1"]
    assert strategy.validate(obj) == []
    bad = {e.field: e.full() for e in validate_spec(crd(scope="Everywhere", versions=[]))}
    assert bad["spec.scope"] == 'spec.scope: Unsupported value: "Everywhere": supported values: "Cluster", "Namespaced"'
    assert "must have exactly one version marked as storage version" in bad["spec.versions"]
    names = {e.field for e in validate_spec(crd(names={"plural": "Foos", "singular": "foo", "kind": "Foo",
                                                       "listKind": "FooList", "shortNames": ["f_"]}))}
    assert {"spec.names.plural", "spec.names.shortNames[0]", "metadata.name"} <= names
    # an update keeps group and plural, and a new storage version is recorded as stored
    new = crd(versions=[{"name": "v1", "served": True, "storage": False,
                         "schema": {"openAPIV3Schema": {"type": "object"}}},
                        {"name": "v2", "served": True, "storage": True,
                         "schema": {"openAPIV3Schema": {"type": "object"}}}])
    new["status"] = {}
    strategy.prepare_for_update(new, obj)
    assert new["status"]["storedVersions"] == ["v1", "v2"]
    changed = crd(group="other.com")
    assert [e.field for e in strategy.validate_update(changed, obj)] == ["spec.group"]


def test_protected_groups_need_the_approval_annotation() -> None:
    obj = crd(group="widgets.k8s.io")
    obj["metadata"]["name"] = "foos.widgets.k8s.io"
    errs = {e.field: e.full() for e in validate_spec(obj)}
    assert "protected groups must have approval annotation" in errs["metadata.annotations[api-approved.kubernetes.io]"]
    obj["metadata"]["annotations"] = {"api-approved.kubernetes.io": "https://github.com/kubernetes/kubernetes/pull/1"}
    assert validate_spec(obj) == []
    obj["metadata"]["annotations"] = {"api-approved.kubernetes.io": "unapproved, experimental"}
    assert validate_spec(obj) == []


def test_aggregated_discovery_negotiation() -> None:
    from apiserver.discovery_aggregated import negotiate

    v2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    v2beta1 = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
    assert negotiate(f"{v2},{v2beta1},application/json") == "v2"  # kubectl 1.30+
    assert negotiate(f"{v2beta1},application/json") == "v2beta1"  # kubectl 1.27-1.29
    assert negotiate("application/json, */*") is None
    assert negotiate(f"application/json,{v2}") is None  # plain JSON preferred
    assert negotiate("application/json;g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList") is None


def test_feature_gates_flag() -> None:
    from apiserver.__main__ import _feature_gates

    assert _feature_gates("") == {}
    assert _feature_gates("AggregatedDiscoveryEndpoint=false") == {"AggregatedDiscoveryEndpoint": False}
    with pytest.raises(SystemExit, match="unrecognized feature gate: Nope"):
        _feature_gates("Nope=true")
    with pytest.raises(SystemExit, match="invalid value"):
        _feature_gates("AggregatedDiscoveryEndpoint=maybe")


def test_unknown_custom_paths_answer_503_until_the_crds_are_served() -> None:
    """After a restart, before the CRDs there are are served, a custom resource's path is not "not found"
    but "not installed yet" (upstream's notfoundhandler): 503 with retryAfterSeconds and Retry-After, which
    clients such as kopf retry; once synced, 404 as before."""
    import asyncio

    from apiserver.apiextensions.registry import CustomResourceRegistry
    from apiserver.app import _status_response
    from apiserver.errors import ApiError

    registry = CustomResourceRegistry(None, None, None, 100, 1800, {})  # type: ignore[arg-type]

    def answer() -> ApiError:
        with pytest.raises(ApiError) as raised:
            asyncio.run(registry.dispatch(None, "kopf.dev", "v1", "clusterkopfpeerings"))  # type: ignore[arg-type]
        return raised.value

    early = answer()
    assert (early.code, early.reason, early.details) == (503, "ServiceUnavailable", {"retryAfterSeconds": 5})
    assert early.message == ("the request has been made before all known HTTP paths have been installed, "
                             "please try again")
    assert _status_response(early).headers["Retry-After"] == "5"
    registry.synced.set()
    late = answer()
    assert (late.code, late.reason) == (404, "NotFound")
    assert "retry-after" not in _status_response(late).headers
