"""Bad input, through raw HTTP and through mkubectl: every case is answered with a Status naming the
problem (never a 5xx), and etcd holds exactly what it held before (read from etcd itself).

The corpus is the two tables below: one line per case. HTTP cases go out through http.client, which,
unlike httpx, sends a path such as `pods/..` as written instead of resolving the dot segments.
"""

from __future__ import annotations

import copy
import http.client
import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpx
import pytest

from tests.cluster import ApiServer, Etcd
from tests.conftest import etcd_keys
from tests.integration.test_mkubectl import Mk
from tests.manifests import deployment, pod

DATA = Path(__file__).resolve().parent.parent / "data" / "bad_input"
MiB = 1024 * 1024
LIMIT = 3 * MiB  # upstream's MaxRequestBodyBytes: what etcd's own request limit leaves room for

PODS = "/api/v1/namespaces/{ns}/pods"
DEPLOYS = "/apis/apps/v1/namespaces/{ns}/deployments"
JSON, YAML = "application/json", "application/yaml"
MERGE, JSONPATCH = "application/merge-patch+json", "application/json-patch+json"
SMP, APPLY = "application/strategic-merge-patch+json", "application/apply-patch+yaml"
PROTOBUF = "application/vnd.kubernetes.protobuf"

Body = bytes | Callable[[], bytes] | None


# -- building bodies ---------------------------------------------------------------------------------


def _set(obj: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A copy of obj with the dotted path set ("spec.containers.0.image"); missing maps are made."""
    out = copy.deepcopy(obj)
    *parents, last = path.split(".")
    node: Any = out
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return out


def pod_with(changes: dict[str, Any], name: str = "bad") -> bytes:
    obj = pod(name)
    for path, value in changes.items():
        obj = _set(obj, path, value)
    return json.dumps(obj).encode()


def deploy_with(changes: dict[str, Any], name: str = "bad") -> bytes:
    obj = deployment(name)
    for path, value in changes.items():
        obj = _set(obj, path, value)
    return json.dumps(obj).encode()


def nested(depth: int) -> bytes:
    return json.dumps(_set(pod("deep"), "metadata.annotations", None)).encode()[:-1] + \
        b',"x":' + b'{"a":' * depth + b"1" + b"}" * depth + b"}"


def data(name: str) -> bytes:
    return (DATA / name).read_bytes()


# -- the HTTP corpus ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    id: str
    method: str
    path: str  # {ns} is the test's namespace; existing objects there: pod "seed", deployment "seed"
    body: Body
    code: int
    reason: str
    says: str  # a piece of the Status message that names the problem
    cause: str | None = None  # a details.causes[].field upstream names
    content_type: str = JSON
    params: dict[str, str] = field(default_factory=dict)


C = Case
CASES = [
    # malformed bodies
    C("truncated-json", "POST", PODS, b'{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": ', 400,
      "BadRequest", "could not be decoded"),
    C("truncated-yaml", "POST", PODS, lambda: data("truncated.yaml"), 400, "BadRequest", "could not be decoded",
      content_type=YAML),
    C("yaml-tab-indent", "POST", PODS, b"apiVersion: v1\nkind: Pod\nmetadata:\n\tname: x\n", 400, "BadRequest",
      "could not be decoded", content_type=YAML),
    C("yaml-two-documents", "POST", PODS, lambda: data("two-documents.yaml"), 400, "BadRequest",
      "single document", content_type=YAML),
    C("yaml-python-tag", "POST", PODS, b"!!python/object/apply:os.system [true]\n", 400, "BadRequest",
      "could not determine a constructor", content_type=YAML),
    C("yaml-recursive-anchor", "POST", PODS, b"a: &a [*a]\n", 400, "BadRequest", "recursive", content_type=YAML),
    C("yaml-billion-laughs", "POST", PODS, lambda: data("billion-laughs.yaml"), 400, "BadRequest",
      "excessive aliasing", content_type=YAML),
    C("yaml-list-as-key", "POST", PODS, b"? [a, b]\n: c\n", 400, "BadRequest", "unsupported map key",
      content_type=YAML),
    C("json-nan", "POST", PODS, b'{"metadata": {"name": "x"}, "x": NaN}', 400, "BadRequest", "NaN"),
    C("json-infinity", "POST", PODS, b'{"metadata": {"name": "x"}, "x": -Infinity}', 400, "BadRequest",
      "Infinity"),
    C("json-number-overflows-float", "POST", PODS,
      lambda: pod_with({"spec.containers.0.resources.requests": {"cpu": 1}}).replace(b'"cpu": 1', b'"cpu": 1e400'),
      400, "BadRequest", "spec.containers[0].resources.requests.cpu"),
    C("json-array", "POST", PODS, b"[1, 2, 3]", 400, "BadRequest", "must be an object"),
    C("json-scalar", "POST", PODS, b"5", 400, "BadRequest", "must be an object"),
    C("empty-body", "POST", PODS, b"", 400, "BadRequest", "empty"),
    C("not-utf8", "POST", PODS, b'{"metadata": {"name": "\xff\xfe"}}', 400, "BadRequest", "could not be decoded"),
    C("json-nested-200-deep", "POST", PODS, lambda: nested(200), 400, "BadRequest", "nesting"),
    C("json-nested-5000-deep", "POST", PODS, lambda: nested(5000), 400, "BadRequest", "nesting"),
    C("yaml-nested-5000-deep", "POST", PODS, b"a: " + b"[" * 5000 + b"]" * 5000, 400, "BadRequest", "nesting",
      content_type=YAML),
    # wrong types
    C("metadata-string", "POST", PODS, lambda: pod_with({"metadata": "x"}), 422, "Invalid", "metadata",
      "metadata"),
    C("metadata-list", "POST", PODS, lambda: pod_with({"metadata": []}), 422, "Invalid", "metadata", "metadata"),
    C("metadata-null", "POST", PODS, lambda: pod_with({"metadata": None}), 422, "Invalid",
      "name or generateName is required", "metadata.name"),
    C("name-null", "POST", PODS, lambda: pod_with({"metadata.name": None}), 422, "Invalid",
      "name or generateName is required", "metadata.name"),
    C("name-number", "POST", PODS, lambda: pod_with({"metadata.name": 5}), 422, "Invalid", "valid string",
      "metadata.name"),
    C("spec-list", "POST", PODS, lambda: pod_with({"spec": []}), 422, "Invalid", "spec", "spec"),
    C("containers-map", "POST", PODS, lambda: pod_with({"spec.containers": {"name": "c"}}), 422, "Invalid",
      "valid list", "spec.containers"),
    C("labels-list", "POST", PODS, lambda: pod_with({"metadata.labels": ["a"]}), 422, "Invalid",
      "valid dictionary", "metadata.labels"),
    C("label-value-number", "POST", PODS, lambda: pod_with({"metadata.labels": {"a": 5}}), 422, "Invalid",
      "valid string", "metadata.labels.a"),
    C("replicas-string", "POST", DEPLOYS, lambda: deploy_with({"spec.replicas": "3"}), 422, "Invalid",
      "valid integer", "spec.replicas"),
    C("replicas-float", "POST", DEPLOYS, lambda: deploy_with({"spec.replicas": 1.5}), 422, "Invalid",
      "valid integer", "spec.replicas"),
    C("replicas-bool", "POST", DEPLOYS, lambda: deploy_with({"spec.replicas": True}), 422, "Invalid",
      "valid integer", "spec.replicas"),
    C("port-string", "POST", PODS, lambda: pod_with({"spec.containers.0.ports": [{"containerPort": "80"}]}), 422,
      "Invalid", "valid integer", "spec.containers[0].ports[0].containerPort"),
    # sizes
    C("body-4mib", "POST", PODS, lambda: pod_with({"metadata.annotations": {"blob": "x" * (4 * MiB)}}), 413,
      "RequestEntityTooLarge", f"limit is {LIMIT}"),
    C("body-4mib-not-json", "POST", PODS, lambda: b"x" * (4 * MiB), 413, "RequestEntityTooLarge", "too large"),
    C("body-just-over-3mib", "POST", PODS, lambda: pod_with({"metadata.annotations": {"blob": "x" * LIMIT}}), 413,
      "RequestEntityTooLarge", f"limit is {LIMIT}"),
    C("put-4mib", "PUT", PODS + "/seed", lambda: pod_with({"metadata.annotations": {"b": "x" * (4 * MiB)}}, "seed"),
      413, "RequestEntityTooLarge", "too large"),
    C("patch-4mib", "PATCH", PODS + "/seed", lambda: b'{"x": "' + b"x" * (4 * MiB) + b'"}', 413,
      "RequestEntityTooLarge", "too large", content_type=MERGE),
    C("annotations-over-256kib", "POST", PODS, lambda: pod_with({"metadata.annotations": {"a": "x" * 300_000}}),
      422, "Invalid", "may not be more than 262144 bytes", "metadata.annotations"),
    C("replicas-beyond-int64", "POST", DEPLOYS, lambda: deploy_with({"spec.replicas": 2**64}), 400, "BadRequest",
      "spec.replicas"),
    C("replicas-beyond-int32", "POST", DEPLOYS, lambda: deploy_with({"spec.replicas": 2**31}), 422, "Invalid",
      "must be less than or equal to 2147483647", "spec.replicas"),
    C("grace-period-beyond-int64", "POST", PODS, lambda: pod_with({"spec.terminationGracePeriodSeconds": 2**70}),
      400, "BadRequest", "spec.terminationGracePeriodSeconds"),
    # names and labels (DNS-1123: subdomains of at most 253, labels of at most 63)
    C("name-uppercase", "POST", PODS, lambda: pod_with({"metadata.name": "Bad"}), 422, "Invalid",
      "RFC 1123 subdomain", "metadata.name"),
    C("name-underscore", "POST", DEPLOYS, lambda: deploy_with({"metadata.name": "bad_name"}), 422, "Invalid",
      "RFC 1123 subdomain", "metadata.name"),
    C("name-254", "POST", PODS, lambda: pod_with({"metadata.name": "a" * 254}), 422, "Invalid",
      "must be no more than 253 characters", "metadata.name"),
    C("namespace-name-64", "POST", "/api/v1/namespaces",
      json.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a" * 64}}).encode(), 422,
      "Invalid", "must be no more than 63 characters", "metadata.name"),
    C("namespace-name-dots", "POST", "/api/v1/namespaces",
      b'{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a.b"}}', 422, "Invalid",
      "must not contain dots", "metadata.name"),
    C("label-key-64", "POST", PODS, lambda: pod_with({"metadata.labels": {"k" * 64: "v"}}), 422, "Invalid",
      "name part must be no more than 63 characters", "metadata.labels"),
    C("label-key-two-slashes", "POST", PODS, lambda: pod_with({"metadata.labels": {"a/b/c": "v"}}), 422, "Invalid",
      "a valid label key", "metadata.labels"),
    C("label-value-64", "POST", PODS, lambda: pod_with({"metadata.labels": {"app": "v" * 64}}), 422, "Invalid",
      "must be no more than 63 characters", "metadata.labels"),
    C("label-value-space", "POST", PODS, lambda: pod_with({"metadata.labels": {"app": "a b"}}), 422, "Invalid",
      "a valid label", "metadata.labels"),
    C("body-name-dotdot-slash", "POST", PODS, lambda: pod_with({"metadata.name": "../x"}), 422, "Invalid",
      "RFC 1123 subdomain", "metadata.name"),
    C("body-name-dotdot", "POST", PODS, lambda: pod_with({"metadata.name": ".."}), 422, "Invalid",
      "RFC 1123 subdomain", "metadata.name"),
    C("body-name-slash", "POST", PODS, lambda: pod_with({"metadata.name": "a/b"}), 422, "Invalid",
      "RFC 1123 subdomain", "metadata.name"),
    C("body-name-percent-2f", "POST", PODS, lambda: pod_with({"metadata.name": "a%2Fb"}), 422, "Invalid",
      "RFC 1123 subdomain", "metadata.name"),
    C("generate-name-traversal", "POST", PODS, lambda: pod_with({"metadata.name": None, "metadata.generateName":
                                                                  "../"}), 422, "Invalid", "RFC 1123",
      "metadata.generateName"),
    # negative and absurd quantities
    C("replicas-negative", "POST", DEPLOYS, lambda: deploy_with({"spec.replicas": -1}), 422, "Invalid",
      "spec.replicas: Invalid value: -1: must be greater than or equal to 0", "spec.replicas"),
    C("cpu-negative", "POST", PODS, lambda: pod_with({"spec.containers.0.resources.requests": {"cpu": "-1"}}), 422,
      "Invalid", "must be greater than or equal to 0", "spec.containers[0].resources.requests[cpu]"),
    C("cpu-bad-suffix", "POST", PODS, lambda: pod_with({"spec.containers.0.resources.requests": {"cpu": "12XYZ"}}),
      422, "Invalid", "unable to parse quantity's suffix", "spec.containers[0].resources.requests[cpu]"),
    C("memory-empty", "POST", PODS, lambda: pod_with({"spec.containers.0.resources.requests": {"memory": ""}}), 422,
      "Invalid", "quantities must match the regular expression", "spec.containers[0].resources.requests[memory]"),
    C("request-over-limit", "POST", PODS, lambda: pod_with({"spec.containers.0.resources": {
        "limits": {"cpu": "1"}, "requests": {"cpu": "2"}}}), 422, "Invalid", "must be less than or equal to cpu limit",
      "spec.containers[0].resources.requests"),
    C("port-99999", "POST", PODS, lambda: pod_with({"spec.containers.0.ports": [{"containerPort": 99999}]}), 422,
      "Invalid", "must be between 1 and 65535", "spec.containers[0].ports[0].containerPort"),
    C("probe-period-negative", "POST", PODS, lambda: pod_with({"spec.containers.0.livenessProbe": {
        "exec": {"command": ["true"]}, "periodSeconds": -1}}), 422, "Invalid", "must be greater than or equal to 0",
      "spec.containers[0].livenessProbe.periodSeconds"),
    C("active-deadline-zero", "POST", PODS, lambda: pod_with({"spec.activeDeadlineSeconds": 0}), 422, "Invalid",
      "must be between 1 and 2147483647", "spec.activeDeadlineSeconds"),
    C("max-surge-garbage", "POST", DEPLOYS, lambda: deploy_with({"spec.strategy": {
        "type": "RollingUpdate", "rollingUpdate": {"maxSurge": "150x"}}}), 422, "Invalid", "percent",
      "spec.strategy.rollingUpdate.maxSurge"),
    C("revision-history-negative", "POST", DEPLOYS, lambda: deploy_with({"spec.revisionHistoryLimit": -1}), 422,
      "Invalid", "must be greater than or equal to 0", "spec.revisionHistoryLimit"),
    # unknown fields (fieldValidation: Strict refuses, Warn and Ignore drop them)
    C("unknown-field-strict", "POST", DEPLOYS, lambda: deploy_with({"spec.replicaz": 3}), 422, "Invalid",
      'unknown field "spec.replicaz"', "spec.replicaz", params={"fieldValidation": "Strict"}),
    C("unknown-nested-field-strict", "POST", PODS, lambda: pod_with({"spec.containers.0.imagee": "x"}), 422,
      "Invalid", 'unknown field "spec.containers[0].imagee"', "spec.containers[0].imagee",
      params={"fieldValidation": "Strict"}),
    C("field-validation-bogus", "POST", PODS, lambda: pod_with({}), 400, "BadRequest", "fieldValidation",
      params={"fieldValidation": "Loud"}),
    # duplicate keys
    C("duplicate-json-key-strict", "POST", PODS, lambda: data("duplicate-name.json"), 422, "Invalid",
      'duplicate field "metadata.name"', "metadata.name", params={"fieldValidation": "Strict"}),
    C("duplicate-yaml-key-strict", "POST", DEPLOYS, lambda: data("duplicate-replicas.yaml"), 422, "Invalid",
      'duplicate field "spec.replicas"', "spec.replicas", content_type=YAML, params={"fieldValidation": "Strict"}),
    # apiVersion/kind against the URL
    C("deployment-to-pods", "POST", PODS, lambda: deploy_with({}), 400, "BadRequest",
      "the API version in the data (apps/v1) does not match the expected API version (v1)"),
    C("pod-to-deployments", "POST", DEPLOYS, lambda: pod_with({}), 400, "BadRequest", "does not match"),
    C("kind-mismatch", "POST", DEPLOYS, lambda: deploy_with({"kind": "ReplicaSet"}), 400, "BadRequest",
      "the kind in the data (ReplicaSet) does not match the expected kind (Deployment)"),
    C("api-version-v2", "POST", DEPLOYS, lambda: deploy_with({"apiVersion": "apps/v2"}), 400, "BadRequest",
      "apps/v2"),
    C("deployments-under-core", "POST", "/api/v1/namespaces/{ns}/deployments", lambda: deploy_with({}), 404,
      "NotFound", "could not find the requested resource"),
    C("unknown-version-path", "POST", "/apis/apps/v2/namespaces/{ns}/deployments", lambda: deploy_with({}), 404,
      "NotFound", "could not find the requested resource"),
    C("post-to-object", "POST", PODS + "/seed", lambda: pod_with({}, "seed"), 405, "MethodNotAllowed",
      "does not allow this method"),
    C("namespace-mismatch", "POST", PODS, lambda: pod_with({"metadata.namespace": "elsewhere"}), 400,
      "BadRequest", "namespace of the provided object does not match"),
    C("put-name-mismatch", "PUT", PODS + "/seed", lambda: pod_with({}, "other"), 400, "BadRequest",
      "does not match the name on the URL"),
    # path traversal: names on the URL are single path segments; nothing else reaches a storage key
    C("get-dotdot", "GET", PODS + "/..", None, 400, "BadRequest", "Name parameter invalid: \"..\": may not be '..'"),
    C("delete-dotdot", "DELETE", PODS + "/..", None, 400, "BadRequest", "may not be '..'"),
    C("put-dotdot", "PUT", PODS + "/..", lambda: pod_with({}, ".."), 400, "BadRequest", "may not be '..'"),
    C("patch-dotdot", "PATCH", PODS + "/..", b'{"metadata": {"labels": {"a": "b"}}}', 400, "BadRequest",
      "may not be '..'", content_type=MERGE),
    C("get-encoded-dotdot", "GET", PODS + "/%2e%2e", None, 400, "BadRequest", "may not be '..'"),
    C("get-dot", "GET", PODS + "/.", None, 400, "BadRequest", "may not be '.'"),
    C("delete-namespace-dotdot", "DELETE", "/api/v1/namespaces/..", None, 400, "BadRequest", "may not be '..'"),
    C("get-percent", "GET", PODS + "/a%25b", None, 400, "BadRequest", "may not contain '%'"),
    C("get-encoded-slash", "GET", PODS + "/a%2Fb", None, 404, "NotFound", "could not find the requested resource"),
    C("delete-climbing", "DELETE", PODS + "/../../nodes/x", None, 404, "NotFound",
      "could not find the requested resource"),
    C("delete-encoded-climbing", "DELETE", PODS + "/..%2F..%2Fnodes", None, 404, "NotFound",
      "could not find the requested resource"),
    # query parameters
    C("limit-negative", "GET", PODS, None, 400, "BadRequest", "limit", params={"limit": "-1"}),
    C("limit-word", "GET", PODS, None, 400, "BadRequest", 'limit must be an integer, got "abc"',
      params={"limit": "abc"}),
    C("limit-beyond-int64", "GET", PODS, None, 400, "BadRequest", "out of range",
      params={"limit": "99999999999999999999999"}),
    C("list-resource-version-word", "GET", PODS, None, 400, "BadRequest", 'invalid resource version "abc"',
      params={"resourceVersion": "abc"}),
    C("list-resource-version-negative", "GET", PODS, None, 400, "BadRequest", "invalid resource version",
      params={"resourceVersion": "-1"}),
    C("watch-resource-version-word", "GET", PODS, None, 400, "BadRequest", "invalid resource version",
      params={"watch": "true", "resourceVersion": "abc"}),
    C("label-selector-open-paren", "GET", PODS, None, 400, "BadRequest", "unable to parse requirement",
      params={"labelSelector": "a in ("}),
    C("label-selector-no-key", "GET", PODS, None, 400, "BadRequest", "unable to parse requirement",
      params={"labelSelector": "=b"}),
    C("field-selector-unsupported", "GET", PODS, None, 400, "BadRequest", "field label not supported: spec.bogus",
      params={"fieldSelector": "spec.bogus=x"}),
    C("field-selector-pod-field-on-deployments", "GET", DEPLOYS, None, 400, "BadRequest",
      "field label not supported: spec.nodeName", params={"fieldSelector": "spec.nodeName=n"}),
    C("continue-garbage", "GET", PODS, None, 400, "BadRequest", "continue key is not valid",
      params={"limit": "1", "continue": "garbage"}),
    C("watch-timeout-negative", "GET", PODS, None, 400, "BadRequest", "timeoutSeconds",
      params={"watch": "true", "timeoutSeconds": "-1"}),
    C("dry-run-bogus", "POST", PODS, lambda: pod_with({}), 400, "BadRequest", "dryRun", params={"dryRun": "Some"}),
    C("delete-dry-run-bogus", "DELETE", PODS + "/seed", None, 400, "BadRequest", "dryRun", params={"dryRun": "x"}),
    C("propagation-policy-bogus", "DELETE", DEPLOYS + "/seed", None, 400, "BadRequest", "propagationPolicy",
      params={"propagationPolicy": "Sideways"}),
    C("grace-period-word", "DELETE", PODS + "/seed", None, 400, "BadRequest", "gracePeriodSeconds",
      params={"gracePeriodSeconds": "soon"}),
    # wrong content types
    C("text-plain", "POST", PODS, lambda: pod_with({}), 415, "UnsupportedMediaType", "text/plain",
      content_type="text/plain"),
    C("xml", "POST", PODS, b"<pod/>", 415, "UnsupportedMediaType", "application/xml", content_type="application/xml"),
    # Kubernetes protobuf (kubectl 1.32+'s typed creates): a malformed body is a 400, a valid one is validated
    C("protobuf-envelope-only", "POST", PODS, b"k8s\x00", 400, "BadRequest", "names no kind", content_type=PROTOBUF),
    C("protobuf-no-magic", "POST", PODS, b'{"kind": "Pod"}', 400, "BadRequest", "k8s", content_type=PROTOBUF),
    C("protobuf-truncated", "POST", PODS, b"k8s\x00\n\x05\n\x02v1", 400, "BadRequest", "runs past the end",
      content_type=PROTOBUF),
    # a kind minik8s does not serve (ConfigMap was this example until it was served)
    C("protobuf-unknown-kind", "POST", PODS,
      b'k8s\x00\n\x1b\n\x02v1\x12\x15ReplicationController\x12\x00\x1a\x00"\x00', 400, "BadRequest",
      'no protobuf decoding for kind "ReplicationController"', content_type=PROTOBUF),
    C("protobuf-name-as-number", "POST", PODS, b'k8s\x00\n\t\n\x02v1\x12\x03Pod\x12\x04\n\x02\x08\x05\x1a\x00"\x00',
      400, "BadRequest", "metadata.name: wire type 0", content_type=PROTOBUF),
    C("protobuf-name-uppercase", "POST", PODS,
      b'k8s\x00\n\t\n\x02v1\x12\x03Pod\x12\x11\n\x05\n\x03Bad\x12\x08\x12\x06\n\x01c\x12\x01i\x1a\x00"\x00', 422,
      "Invalid", "RFC 1123 subdomain", "metadata.name", content_type=PROTOBUF),
    C("patch-as-json", "PATCH", DEPLOYS + "/seed", b'{"spec": {}}', 415, "UnsupportedMediaType", "unknown format"),
    # patches
    C("merge-patch-list", "PATCH", DEPLOYS + "/seed", b"[]", 400, "BadRequest", "must be a JSON object",
      content_type=MERGE),
    C("merge-patch-metadata-list", "PATCH", DEPLOYS + "/seed", b'{"metadata": []}', 422, "Invalid", "metadata",
      "metadata", content_type=MERGE),
    C("merge-patch-replicas-beyond-int64", "PATCH", DEPLOYS + "/seed", b'{"spec": {"replicas": 99999999999999999999}}',
      400, "BadRequest", "spec.replicas", content_type=MERGE),
    C("merge-patch-replicas-negative", "PATCH", DEPLOYS + "/seed", b'{"spec": {"replicas": -5}}', 422, "Invalid",
      "must be greater than or equal to 0", "spec.replicas", content_type=MERGE),
    C("merge-patch-nan", "PATCH", DEPLOYS + "/seed", b'{"spec": {"replicas": NaN}}', 400, "BadRequest", "NaN",
      content_type=MERGE),
    C("merge-patch-renames", "PATCH", DEPLOYS + "/seed", b'{"metadata": {"name": "other"}}', 400, "BadRequest",
      "metadata.name", content_type=MERGE),
    C("json-patch-object", "PATCH", DEPLOYS + "/seed", b"{}", 422, "Invalid", "JSON array", content_type=JSONPATCH),
    C("json-patch-bad-op", "PATCH", DEPLOYS + "/seed", b'[{"op": "bogus", "path": "/spec"}]', 422, "Invalid",
      "bogus", content_type=JSONPATCH),
    C("json-patch-missing-path", "PATCH", DEPLOYS + "/seed", b'[{"op": "remove", "path": "/spec/nope"}]', 422,
      "Invalid", "/spec/nope", content_type=JSONPATCH),
    C("merge-patch-deep", "PATCH", DEPLOYS + "/seed", b'{"metadata": {"x": ' + b"[" * 300 + b"]" * 300 + b"}}", 400,
      "BadRequest", "nesting", content_type=MERGE),
    C("smp-without-merge-key", "PATCH", DEPLOYS + "/seed",
      b'{"spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}}', 400, "BadRequest",
      "does not contain declared merge key: name", content_type=SMP),
    C("apply-without-field-manager", "PATCH", DEPLOYS + "/seed", lambda: deploy_with({}, "seed"), 422, "Invalid",
      "fieldManager: Required value", content_type=APPLY),
    C("apply-truncated-yaml", "PATCH", DEPLOYS + "/seed", b"apiVersion: apps/v1\nkind: [Deploy", 400, "BadRequest",
      "error converting YAML to JSON", content_type=APPLY, params={"fieldManager": "t"}),
    C("apply-create-metadata-list", "PATCH", DEPLOYS + "/fresh",
      b"apiVersion: apps/v1\nkind: Deployment\nmetadata: []\n", 422, "Invalid", "metadata", "metadata",
      content_type=APPLY, params={"fieldManager": "t"}),
    C("apply-billion-laughs", "PATCH", DEPLOYS + "/seed", lambda: data("billion-laughs.yaml"), 400, "BadRequest",
      "excessive aliasing", content_type=APPLY, params={"fieldManager": "t"}),
    # deletes with bodies
    C("delete-grace-infinite", "DELETE", PODS + "/seed", b'{"gracePeriodSeconds": 1e400}', 400, "BadRequest",
      "gracePeriodSeconds"),
    C("delete-grace-float", "DELETE", PODS + "/seed", b'{"gracePeriodSeconds": 1.5}', 400, "BadRequest",
      "gracePeriodSeconds"),
    C("delete-dry-run-string", "DELETE", PODS + "/seed", b'{"dryRun": "x"}', 400, "BadRequest", "dryRun"),
    C("delete-body-list", "DELETE", PODS + "/seed", b"[]", 400, "BadRequest", "must be an object"),
    # subresources
    C("status-metadata-list", "PUT", DEPLOYS + "/seed/status", b'{"metadata": [], "status": {}}', 422, "Invalid",
      "metadata", "metadata"),
    C("scale-negative", "PUT", DEPLOYS + "/seed/scale",
      b'{"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "seed"}, "spec": {"replicas": -1}}',
      422, "Invalid", "must be greater than or equal to 0", "spec.replicas"),
    C("scale-beyond-int32", "PUT", DEPLOYS + "/seed/scale",
      b'{"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "seed"}, '
      b'"spec": {"replicas": 4294967296}}', 422, "Invalid", "2147483647", "spec.replicas"),
    C("binding-without-target", "POST", PODS + "/seed/binding",
      b'{"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "seed"}}', 400, "BadRequest", "target"),
    C("binding-node-traversal", "POST", PODS + "/seed/binding",
      b'{"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "seed"}, "target": {"kind": "Node", '
      b'"name": "../n"}}', 422, "Invalid", "RFC 1123 subdomain", "spec.nodeName"),
    C("finalize-metadata-list", "PUT", "/api/v1/namespaces/{ns}/finalize", b'{"metadata": []}', 422, "Invalid",
      "metadata", "metadata"),
]


# -- running it --------------------------------------------------------------------------------------


def raw_request(url: str, method: str, path: str, body: bytes | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    """One request with the path sent exactly as given (http.client does not resolve `..`)."""
    split = urlsplit(url)
    conn = http.client.HTTPConnection(split.hostname, split.port, timeout=60)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


def assert_status(code: int, headers: dict[str, str], raw: bytes, want_code: int, reason: str,
                  says: str, field_path: str | None = None) -> dict[str, Any]:
    """A Failure Status with upstream's code and reason whose message names the problem."""
    assert code < 500, f"a server error: {code} {raw[:500]!r}"
    assert headers.get("content-type", "").startswith("application/json"), (headers, raw[:300])
    status = json.loads(raw)
    assert (status.get("kind"), status.get("apiVersion"), status.get("status")) == ("Status", "v1", "Failure"), status
    assert (code, status.get("code"), status.get("reason")) == (want_code, want_code, reason), status
    assert says in status["message"], status
    if field_path is not None:
        causes = (status.get("details") or {}).get("causes") or []
        assert field_path in [c.get("field") for c in causes], status
    return status


@pytest.fixture(scope="module")
def bad_input_ns(apiserver: ApiServer) -> Iterator[str]:
    """A namespace holding the objects the update cases aim at: pod "seed", deployment "seed"."""
    name = f"bad-{uuid.uuid4().hex[:8]}"
    with httpx.Client(base_url=apiserver.url, timeout=30) as api:
        assert api.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace",
                                                    "metadata": {"name": name}}).status_code == 201
        assert api.post(PODS.format(ns=name), json=pod("seed")).status_code == 201
        assert api.post(DEPLOYS.format(ns=name), json=deployment("seed")).status_code == 201
        yield name
        api.delete(f"/api/v1/namespaces/{name}")


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_request_gets_a_status_and_writes_nothing(case: Case, apiserver: ApiServer, etcd: Etcd,
                                                      bad_input_ns: str) -> None:
    body = case.body() if callable(case.body) else case.body
    path = case.path.format(ns=bad_input_ns) + (f"?{urlencode(case.params)}" if case.params else "")
    before = etcd_keys(etcd, "/registry/")
    code, headers, raw = raw_request(apiserver.url, case.method, path, body, {"content-type": case.content_type})
    assert_status(code, headers, raw, case.code, case.reason, case.says, case.cause)
    assert etcd_keys(etcd, "/registry/") == before, "a refused request changed etcd"


def test_absurd_but_valid_quantity_is_kept_as_upstream_keeps_it(api: httpx.Client, namespace: str) -> None:
    """resource.ParseQuantity takes "1e400" (an exponent, not a float): upstream stores it, and so do we."""
    r = api.post(PODS.format(ns=namespace), params={"dryRun": "All"},
                 json=_set(pod("huge"), "spec.containers.0.resources.requests", {"cpu": "1e400"}))
    assert r.status_code == 201, r.text
    assert r.json()["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "1e400"


def test_unknown_fields_are_dropped_under_warn_and_ignore(api: httpx.Client, namespace: str, etcd: Etcd) -> None:
    base = DEPLOYS.format(ns=namespace)
    warned = api.post(base, params={"fieldValidation": "Warn"}, json=_set(deployment("warn"), "spec.replicaz", 3))
    assert warned.status_code == 201 and 'unknown field \\"spec.replicaz\\"' in warned.headers["warning"]
    ignored = api.post(base, params={"fieldValidation": "Ignore"}, json=_set(deployment("ign"), "spec.replicaz", 3))
    assert ignored.status_code == 201 and "warning" not in ignored.headers
    stored = etcd_keys(etcd, f"/registry/deployments/{namespace}/")
    assert len(stored) == 2 and all(b"replicaz" not in v for v in stored.values())


# -- the mkubectl corpus -----------------------------------------------------------------------------


@dataclass(frozen=True)
class CliCase:
    id: str
    args: tuple[str, ...]  # {file} is the manifest written from `manifest`; {ns} the namespace
    says: str  # a piece of mkubectl's one line on stderr
    manifest: str | Callable[[], str] | None = None


def _manifest(obj: dict[str, Any]) -> str:
    return json.dumps(obj)


CLI = [
    CliCase("apply-truncated-yaml", ("apply", "-f", "{file}"), "error", lambda: data("truncated.yaml").decode()),
    CliCase("apply-replicas-string", ("apply", "-f", "{file}"), 'The Deployment "bad" is invalid: spec.replicas',
            lambda: _manifest(_set(deployment("bad"), "spec.replicas", "three"))),
    CliCase("apply-replicas-negative", ("apply", "-f", "{file}"),
            'The Deployment "bad" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0',
            lambda: _manifest(_set(deployment("bad"), "spec.replicas", -1))),
    CliCase("apply-bad-name", ("apply", "-f", "{file}"), "metadata.name: Invalid value: \"Bad_Name\"",
            lambda: _manifest(_set(deployment("bad"), "metadata.name", "Bad_Name"))),
    CliCase("apply-long-label", ("apply", "-f", "{file}"), "metadata.labels: Invalid value",
            lambda: _manifest(_set(pod("bad"), "metadata.labels", {"app": "v" * 64}))),
    CliCase("apply-cpu-bad-suffix", ("apply", "-f", "{file}"), "unable to parse quantity's suffix",
            lambda: _manifest(_set(pod("bad"), "spec.containers.0.resources.requests", {"cpu": "12XYZ"}))),
    CliCase("apply-unknown-field", ("apply", "-f", "{file}"), 'unknown field "spec.replicaz"',
            lambda: _manifest(_set(deployment("bad"), "spec.replicaz", 3))),
    CliCase("apply-duplicate-key", ("apply", "-f", "{file}"), 'mapping key "replicas" already defined',
            lambda: data("duplicate-replicas.yaml").decode()),
    CliCase("apply-kind-version-mismatch", ("apply", "-f", "{file}"), "Deployment",
            lambda: _manifest(_set(deployment("bad"), "apiVersion", "v1"))),
    CliCase("apply-4mib", ("apply", "-f", "{file}"), "too large",
            lambda: _manifest(_set(pod("bad"), "metadata.annotations", {"blob": "x" * (4 * MiB)}))),
    CliCase("get-dotdot", ("get", "pods", ".."), "invalid resource name \"..\""),
    CliCase("get-label-selector", ("get", "pods", "-l", "a in ("), "unable to parse requirement"),
    CliCase("get-field-selector", ("get", "pods", "--field-selector", "spec.bogus=x"),
            "field label not supported: spec.bogus"),
    CliCase("scale-negative", ("scale", "deployment", "seed", "--replicas=-1"), "replicas"),
    CliCase("delete-dotdot", ("delete", "pod", ".."), "invalid resource name \"..\""),
]


@pytest.fixture(scope="module")
def cli_ns(apiserver: ApiServer) -> Iterator[str]:
    name = f"badcli-{uuid.uuid4().hex[:8]}"
    with httpx.Client(base_url=apiserver.url, timeout=30) as api:
        assert api.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace",
                                                    "metadata": {"name": name}}).status_code == 201
        assert api.post(DEPLOYS.format(ns=name), json=deployment("seed")).status_code == 201
        yield name
        api.delete(f"/api/v1/namespaces/{name}")


@pytest.mark.parametrize("case", CLI, ids=[c.id for c in CLI])
def test_mkubectl_prints_one_line_and_writes_nothing(case: CliCase, apiserver: ApiServer, etcd: Etcd, cli_ns: str,
                                                     tmp_path: Path) -> None:
    mk = Mk(apiserver.url, tmp_path, cli_ns)
    manifest = tmp_path / "manifest.yaml"
    if case.manifest is not None:
        manifest.write_text(case.manifest() if callable(case.manifest) else case.manifest)
    args = [a.format(file=manifest, ns=cli_ns) for a in case.args]
    before = etcd_keys(etcd, "/registry/")
    line = mk.fails(*args)  # exit code 1, exactly one line on stderr, no traceback
    assert case.says in line, line
    assert etcd_keys(etcd, "/registry/") == before, "a refused command changed etcd"
