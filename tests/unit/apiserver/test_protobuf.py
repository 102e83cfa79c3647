"""Decoding Kubernetes protobuf request bodies (apiserver.protobuf): bodies built here with a tiny encoder
on the wire primitives of apiserver.openapi_v2_proto, decoded to the JSON form; malformed bodies raise
ValueError; and every entry of the schema table agrees with upstream's generated.proto as compiled into a
real kubectl binary (its gzipped FileDescriptorProtos), when one is installed."""

from __future__ import annotations

import re
import zlib
from typing import Any

import pytest

from apiserver import protobuf
from apiserver.openapi_v2_proto import _key, _len_field, _varint
from tests.kubectl import find_kubectl

Fields = list[tuple[int, Any]]


def enc(fields: Fields) -> bytes:
    """A message from (number, value) pairs: int → varint, str/bytes → length-delimited, a list → a nested
    message (encoded recursively)."""
    out = b""
    for number, value in fields:
        if isinstance(value, bool | int):
            out += _key(number, 0) + _varint(int(value))
        elif isinstance(value, str):
            out += _len_field(number, value.encode())
        elif isinstance(value, bytes):
            out += _len_field(number, value)
        else:
            out += _len_field(number, enc(value))
    return out


def envelope(api_version: str, kind: str, raw: bytes, encoding: str = "") -> bytes:
    unknown: Fields = [(1, [(1, api_version), (2, kind)]), (2, raw), (3, encoding), (4, "")]
    return protobuf.MAGIC + enc(unknown)


def entry(key: str, value: Any) -> list[tuple[int, Any]]:
    return [(1, key), (2, value)]


def meta(name: str, **extra: Any) -> Fields:
    """ObjectMeta as Go writes it: every non-pointer scalar present, zero or not."""
    fields: Fields = [(1, name), (2, ""), (3, extra.get("namespace", "")), (4, ""), (5, ""), (6, ""), (7, 0),
                      (8, [])]
    fields += [(11, entry(k, v)) for k, v in extra.get("labels", {}).items()]
    return fields


def container(name: str, image: str) -> Fields:
    return [(1, name), (2, image), (6, [(1, ""), (2, 0), (3, 80), (4, "TCP"), (5, "")]),
            (8, [(1, entry("cpu", [(1, "250m")])), (2, entry("memory", [(1, "64Mi")]))]),  # resources
            (7, [(1, "A"), (2, "1")]),  # env
            (19, [(2, [(1, [(1, "cm")]), (2, 1)])]),  # envFrom: configMapRef{LocalObjectReference{name} inline}
            (9, [(1, "data"), (2, 0), (3, "/data")]),  # volumeMount, readOnly false
            (10, [(1, [(2, [(1, "/healthz"), (2, [(1, 1), (2, 0), (3, "http")])])]), (2, 5)]),  # liveness
            (14, "IfNotPresent"), (16, 0)]


def pod_spec() -> Fields:
    return [(1, [(1, "data"), (2, [(2, [(1, "Memory")])])]),  # volumes: emptyDir inline in Volume
            (2, container("web", "minik8s/httpd:1")), (3, "Always"), (4, 0),  # terminationGracePeriodSeconds 0
            (7, entry("disk", "ssd")), (22, [(1, "node.kubernetes.io/not-ready"), (2, "Exists"), (4, "NoExecute"),
                                             (5, 300)])]


def test_deployment_as_kubectl_create_sends_it() -> None:
    spec: Fields = [(1, 0),  # replicas: a pointer, its zero is kept
                    (2, [(1, entry("app", "web"))]),
                    (3, [(1, meta("", labels={"app": "web"})), (2, pod_spec())]),
                    (4, [(1, "RollingUpdate"), (2, [(1, [(1, 1), (3, "25%")]), (2, [(1, 0), (2, 1)])])]),
                    (5, 0), (7, 0)]  # minReadySeconds 0 (omitempty), paused false
    body = envelope("apps/v1", "Deployment", enc([(1, meta("web", namespace="ns1", labels={"app": "web"})),
                                                   (2, spec), (3, [])]))
    obj = protobuf.decode(body)
    assert obj["apiVersion"] == "apps/v1" and obj["kind"] == "Deployment"
    assert obj["metadata"] == {"name": "web", "namespace": "ns1", "labels": {"app": "web"}}
    assert obj["status"] == {}
    assert obj["spec"]["replicas"] == 0 and "minReadySeconds" not in obj["spec"] and "paused" not in obj["spec"]
    assert obj["spec"]["selector"] == {"matchLabels": {"app": "web"}}
    assert obj["spec"]["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%",
                                                                                   "maxSurge": 1}}
    template = obj["spec"]["template"]
    assert template["metadata"] == {"labels": {"app": "web"}}
    pod = template["spec"]
    assert pod["volumes"] == [{"name": "data", "emptyDir": {"medium": "Memory"}}]
    assert pod["terminationGracePeriodSeconds"] == 0 and pod["restartPolicy"] == "Always"
    assert pod["nodeSelector"] == {"disk": "ssd"}
    assert pod["tolerations"] == [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                                   "effect": "NoExecute", "tolerationSeconds": 300}]
    assert pod["containers"] == [{
        "name": "web", "image": "minik8s/httpd:1", "ports": [{"containerPort": 80, "protocol": "TCP"}],
        "resources": {"limits": {"cpu": "250m"}, "requests": {"memory": "64Mi"}},
        "env": [{"name": "A", "value": "1"}], "envFrom": [{"configMapRef": {"name": "cm", "optional": True}}],
        "volumeMounts": [{"name": "data", "mountPath": "/data"}],
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http"}, "initialDelaySeconds": 5},
        "imagePullPolicy": "IfNotPresent"}]


def test_times_negative_numbers_and_pointer_strings() -> None:
    lease = [(1, meta("leader", namespace="kube-system")),
             (2, [(1, ""), (2, 15), (3, [(1, 1795000000), (2, 123456789)]), (4, [(1, 1795000001)]), (5, 0)])]
    obj = protobuf.decode(envelope("coordination.k8s.io/v1", "Lease", enc(lease)))
    assert obj["spec"] == {"holderIdentity": "", "leaseDurationSeconds": 15, "leaseTransitions": 0,
                           "acquireTime": "2026-11-18T11:06:40.123456Z", "renewTime": "2026-11-18T11:06:41.000000Z"}
    meta_fields = [*meta("x"), (8, [(1, 1795000000), (2, 5)]), (10, (1 << 64) - 30)]  # int64 -30
    obj = protobuf.decode(envelope("v1", "Namespace", enc([(1, meta_fields)])))
    assert obj["metadata"] == {"name": "x", "creationTimestamp": "2026-11-18T11:06:40Z",
                               "deletionGracePeriodSeconds": -30}


def test_rbac_keeps_empty_strings_inside_lists() -> None:
    role = [(1, meta("r", namespace="ns1")), (2, [(1, "get"), (1, "list"), (2, ""), (3, "pods")])]
    obj = protobuf.decode(envelope("rbac.authorization.k8s.io/v1", "Role", enc(role)))
    assert obj["rules"] == [{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]}]
    binding = [(1, meta("b")), (2, [(1, "User"), (2, "rbac.authorization.k8s.io"), (3, "bob"), (4, "")]),
               (3, [(1, "rbac.authorization.k8s.io"), (2, "ClusterRole"), (3, "view")])]
    obj = protobuf.decode(envelope("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", enc(binding)))
    assert obj["subjects"] == [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "bob"}]
    assert obj["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"}


def test_webhooks_bytes_and_access_review_extra() -> None:
    hook = [(1, "w.example.com"), (2, [(3, "https://h"), (2, b"\x00\x01ca")]), (8, "v1"), (7, 0)]  # timeout 0
    obj = protobuf.decode(envelope("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration",
                                   enc([(1, meta("v")), (2, hook)])))
    assert obj["webhooks"] == [{"name": "w.example.com", "clientConfig": {"url": "https://h", "caBundle": "AAFjYQ=="},
                                "admissionReviewVersions": ["v1"], "timeoutSeconds": 0}]
    review = [(1, meta("")), (2, [(2, [(1, "/healthz"), (2, "get")]), (3, "bob"), (4, "devs"),
                                  (5, entry("scopes", [(1, "a"), (1, "b")]))])]
    obj = protobuf.decode(envelope("authorization.k8s.io/v1", "SubjectAccessReview", enc(review)))
    assert obj["spec"] == {"nonResourceAttributes": {"path": "/healthz", "verb": "get"}, "user": "bob",
                           "groups": ["devs"], "extra": {"scopes": ["a", "b"]}}


def test_unknown_fields_are_skipped_and_packed_numbers_read() -> None:
    extra = _key(99, 0) + _varint(7) + _key(98, 1) + b"\x00" * 8 + _key(97, 5) + b"\x00" * 4 + _len_field(96, b"zz")
    obj = protobuf.decode(envelope("v1", "Namespace", enc([(1, meta("x"))]) + extra))
    assert obj == {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}}
    packed = _len_field(4, _varint(1000) + _varint(2000))  # PodSecurityContext.supplementalGroups, packed
    obj = protobuf.decode(envelope("v1", "Pod", enc([(1, meta("p"))]) + _len_field(2, _len_field(14, packed))))
    assert obj["spec"]["securityContext"] == {"supplementalGroups": [1000, 2000]}


def test_the_last_occurrence_of_a_scalar_wins() -> None:
    obj = protobuf.decode(envelope("v1", "Namespace", enc([(1, [(1, "a"), (1, "b")])])))
    assert obj["metadata"] == {"name": "b"}
    obj = protobuf.decode(envelope("v1", "Namespace", enc([(1, [(1, "a"), (1, "")])])))
    assert obj["metadata"] == {}


GOOD = enc([(1, meta("x"))])
MALFORMED = [
    (b'{"kind": "Namespace"}', "does not start with"),
    (protobuf.MAGIC, "names no kind"),
    (protobuf.MAGIC + b"\x0a\x05\x0a\x02v1", "runs past the end"),
    (protobuf.MAGIC + b"\x0a", "truncated varint"),
    (protobuf.MAGIC + b"\x08" + b"\xff" * 11, "longer than 10 bytes"),
    (protobuf.MAGIC + b"\x0b", "unsupported wire type 3"),
    (protobuf.MAGIC + b"\x00", "field number 0"),
    (protobuf.MAGIC + b"\x08\x01", "not length-delimited"),
    (envelope("v1", "PersistentVolumeClaim", GOOD), 'no protobuf decoding for kind "PersistentVolumeClaim"'),
    (envelope("apps/v1beta1", "Deployment", GOOD), 'in version "apps/v1beta1"'),
    (envelope("v1", "Namespace", GOOD, encoding="gzip"), 'content encoding "gzip"'),
    (envelope("v1", "Namespace", enc([(1, [(1, 5)])])), "metadata.name: wire type 0 does not carry a str"),
    (envelope("v1", "Namespace", enc([(1, 5)])), "metadata: wire type 0 does not carry a ObjectMeta"),
    (envelope("v1", "Namespace", enc([(1, [(7, "x")])])), "metadata.generation: wire type 2"),
    (envelope("v1", "Namespace", enc([(1, [(1, b"\xff\xfe")])])), "utf-8"),
    (envelope("v1", "Namespace", enc([(1, [(8, [(1, 1 << 62)])])])), "time out of range"),
    (envelope("apps/v1", "Deployment", enc([(2, [(4, [(2, [(1, [(1, 7)])])])])])),
     "IntOrString type must be 0 (int) or 1 (string), got 7"),
    (envelope("v1", "Namespace", enc([(1, [(11, [(1, "a"), (2, 5)])])])), "metadata.labels[a]: wire type 0"),
]


@pytest.mark.parametrize(("body", "says"), MALFORMED, ids=[s for _, s in MALFORMED])
def test_malformed_bodies_raise_value_error(body: bytes, says: str) -> None:
    with pytest.raises(ValueError, match=re.escape(says)):
        protobuf.decode(body)


# -- the table against upstream's descriptors ----------------------------------------------------------------

_SCALAR_TYPES = {"str": {9}, "bool": {8}, "int": {3, 5, 4, 13, 17, 18}, "bytes": {12}}
_WELL_KNOWN = {"time": "Time", "microtime": "MicroTime", "quantity": "Quantity", "intorstr": "IntOrString",
               "fieldsv1": "FieldsV1", "extra": "ExtraValue"}
_PACKAGES = {"v1": "core.v1", "apps/v1": "apps.v1", "batch/v1": "batch.v1", "coordination.k8s.io/v1": "coordination.v1",
             "rbac.authorization.k8s.io/v1": "rbac.v1", "admissionregistration.k8s.io/v1": "admissionregistration.v1",
             "authorization.k8s.io/v1": "authorization.v1", "authentication.k8s.io/v1": "authentication.v1",
             "policy/v1": "policy.v1", "policy/v1beta1": "policy.v1beta1",
             "autoscaling/v2": "autoscaling.v2",
             "authentication.k8s.io/v1beta1": "authentication.v1beta1", "scheduling.k8s.io/v1": "scheduling.v1",
             "networking.k8s.io/v1": "networking.v1",
             "authentication.k8s.io/v1alpha1": "authentication.v1alpha1"}
# go-to-protobuf kept the Go field name where the JSON tag differs
_JSON_NAMES = {"Webhooks": "webhooks", "uID": "uid", "aPIGroup": "apiGroup"}


def upstream_messages(binary: bytes) -> dict[str, Any]:
    """Every message of the k8s.io generated.proto files compiled into a Go binary, by full name."""
    descriptor_pb2 = pytest.importorskip("google.protobuf.descriptor_pb2")
    found: dict[str, Any] = {}

    def walk(prefix: str, messages: Any) -> None:
        for m in messages:
            found[f"{prefix}.{m.name}"] = m
            walk(f"{prefix}.{m.name}", m.nested_type)

    for match in re.finditer(b"\x1f\x8b\x08\x00\x00\x00\x00\x00", binary):
        try:
            raw = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(binary[match.start():match.start() + (1 << 21)])
            fd = descriptor_pb2.FileDescriptorProto.FromString(raw)
        except Exception:  # most gzip magics in a binary are not descriptors
            continue
        if fd.name.startswith("k8s.io/"):
            walk("." + fd.package, fd.message_type)
    return found


def test_schema_matches_upstream_generated_proto() -> None:
    binary = find_kubectl("1.33") or find_kubectl("1.32")
    if binary is None:
        pytest.skip("no kubectl 1.32/1.33 binary to read upstream's protobuf descriptors from")
    upstream = upstream_messages(binary.read_bytes())
    assert upstream, "no descriptors found in the kubectl binary"
    checked: set[str] = set()

    def check(ours: str, theirs: str) -> None:
        if ours in checked:
            return
        checked.add(ours)
        descriptor = upstream[theirs]
        assert descriptor.name == ours, f"{ours} is upstream's {theirs}"
        by_number = {f.number: f for f in descriptor.field}
        for number, field in protobuf.message(ours).items():
            where = f"{ours}.{field.name} = {number}"
            assert number in by_number, f"{where}: no such field number upstream"
            up = by_number[number]
            assert _JSON_NAMES.get(up.name, up.name) == field.name, f"{where}: upstream calls it {up.name}"
            target = upstream.get(up.type_name) if up.type == 11 else None
            if field.map:
                assert target is not None and target.options.map_entry, f"{where}: not a map upstream"
                value = target.field[1]
                kind = value.type_name.rsplit(".", 1)[-1] if value.type == 11 else value.type
                expected = _WELL_KNOWN.get(field.type, field.type) if value.type == 11 else _SCALAR_TYPES[field.type]
                assert kind == expected or kind in expected, f"{where}: map values are {kind} upstream"
                if field.type in protobuf.SCHEMA:
                    check(field.type, value.type_name)
                continue
            assert (up.label == 3) == field.repeated, f"{where}: repeated is {up.label == 3} upstream"
            if field.type in _SCALAR_TYPES:
                assert up.type in _SCALAR_TYPES[field.type], f"{where}: upstream type {up.type}"
            elif field.type in _WELL_KNOWN:
                assert up.type_name.endswith("." + _WELL_KNOWN[field.type]), f"{where}: upstream {up.type_name}"
            else:
                assert up.type == 11 and target is not None, f"{where}: not a message upstream"
                assert not target.options.map_entry, f"{where}: a map upstream"
                check(field.type, up.type_name)

    for (api_version, kind), name in protobuf.KINDS.items():
        package = _PACKAGES[api_version] if kind != "DeleteOptions" else None
        full = f".k8s.io.api.{package}.{kind}" if package else f".k8s.io.apimachinery.pkg.apis.meta.v1.{kind}"
        check(name, full)
    assert checked == set(protobuf.SCHEMA), f"unreachable table entries: {set(protobuf.SCHEMA) - checked}"


def test_self_subject_rules_review() -> None:
    """What `kubectl auth can-i --list` sends."""
    review = [(1, meta("")), (2, [(1, "team-a")])]
    obj = protobuf.decode(envelope("authorization.k8s.io/v1", "SelfSubjectRulesReview", enc(review)))
    assert obj["kind"] == "SelfSubjectRulesReview" and obj["spec"] == {"namespace": "team-a"}


def test_configmap_and_secret_as_kubectl_create_sends_them() -> None:
    """`kubectl create configmap|secret` (1.32+): []byte values come out base64, as JSON carries them."""
    body = envelope("v1", "ConfigMap", enc([(1, meta("app", namespace="ns1")), (2, entry("mode", "dark")),
                                            (3, entry("blob", b"\x00\xff"))]))
    assert protobuf.decode(body) == {"apiVersion": "v1", "kind": "ConfigMap",
                                     "metadata": {"name": "app", "namespace": "ns1"},
                                     "data": {"mode": "dark"}, "binaryData": {"blob": "AP8="}}
    body = envelope("v1", "Secret", enc([(1, meta("db")), (2, entry("password", b"s3cr3t")),
                                         (3, "kubernetes.io/basic-auth"), (5, 1)]))
    assert protobuf.decode(body) == {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db"},
                                     "data": {"password": "czNjcjN0"}, "type": "kubernetes.io/basic-auth",
                                     "immutable": True}


def test_projected_configmap_and_secret_names_sit_inline() -> None:
    """A pod's projected kube-api-access volume as `kubectl debug --copy-to` (1.33) creates it: the
    LocalObjectReference of ConfigMapProjection and SecretProjection is inline (`json:",inline"`)."""
    projected = [(1, [(3, [(1, [(1, "kube-root-ca.crt")]), (2, [(1, "ca.crt"), (2, "ca.crt")])])]),
                 (1, [(1, [(1, [(1, "creds")])])])]
    decoded = protobuf.decode_message("VolumeProjection", enc(projected[0][1]))
    assert decoded == {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}
    assert protobuf.decode_message("VolumeProjection", enc(projected[1][1])) == {"secret": {"name": "creds"}}
