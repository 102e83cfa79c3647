"""Per-resource strategies: defaulting and validation as pure logic (wire dicts in, FieldErrors out),
checked against upstream's rules and messages."""

from __future__ import annotations

import copy
import time
from typing import Any

import pytest

from apiserver.registry import STRATEGIES, strategy_for
from apiserver.registry.deployment import DeploymentStrategy
from apiserver.registry.event import EventStrategy
from apiserver.registry.lease import LeaseStrategy
from apiserver.registry.meta import validate_object_meta, validate_object_meta_update
from apiserver.registry.namespace import FORCE_LIVE_LOOKUP_TTL, NamespaceStrategy
from apiserver.registry.node import NodeStrategy
from apiserver.registry.pod import (
    PodStrategy,
    compute_qos_class,
    default_image_pull_policy,
    validate_pod_template_spec,
)
from apiserver.registry.replicaset import ReplicaSetStrategy
from apiserver.registry.strategy import Strategy
from apiserver.validation import (
    FieldError,
    StringMap,
    go_value,
    invalid,
    not_found,
    semantic_equal,
    too_long,
    validate_annotations,
    validate_cidr,
    validate_label_selector,
    validate_labels,
    validate_nonnegative_int_or_percent,
    validate_not_more_than_100_percent,
)
from machinery.types import Obj
from machinery.validation import name_is_dns_subdomain

SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                 "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
                 "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
             "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
             "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
LABEL_VALUE_MSG = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
                   "and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or "
                   "'12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")
QNAME_NAME_MSG = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
                  "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
                  "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
POD_UPDATE_MSG = ("spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`,"
                  "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions "
                  "to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was "
                  "previously negative)")


def full(errs: list[FieldError]) -> list[str]:
    return [e.full() for e in errs]


def one(errs: list[FieldError]) -> str:
    assert len(errs) == 1, full(errs)
    return errs[0].full()


# ---------------------------------------------------------------------------------------------
# Builders.
# ---------------------------------------------------------------------------------------------


def container(name: str = "app", image: str = "nginx:1.25", **extra: Any) -> Obj:
    return {"name": name, "image": image, **extra}


def make_pod(*containers: Obj, **spec: Any) -> Obj:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": list(containers) or [container()], **spec}}


def created_pod(*containers: Obj, **spec: Any) -> Obj:
    pod = make_pod(*containers, **spec)
    PodStrategy().prepare_for_create(pod)
    return pod


def pod_errors(*containers: Obj, **spec: Any) -> list[str]:
    return full(PodStrategy().validate(created_pod(*containers, **spec)))


def template(labels: dict[str, str] | None = None, **spec: Any) -> Obj:
    spec.setdefault("containers", [container()])
    return {"metadata": {"labels": {"app": "web"} if labels is None else labels}, "spec": spec}


def make_deployment(**spec: Any) -> Obj:
    spec.setdefault("selector", {"matchLabels": {"app": "web"}})
    spec.setdefault("template", template())
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "default"},
            "spec": spec}


def deployment_errors(**spec: Any) -> list[str]:
    d = make_deployment(**spec)
    DeploymentStrategy().prepare_for_create(d)
    return full(DeploymentStrategy().validate(d))


def make_replicaset(**spec: Any) -> Obj:
    spec.setdefault("selector", {"matchLabels": {"app": "web"}})
    spec.setdefault("template", template())
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "rs", "namespace": "default"},
            "spec": spec}


# ---------------------------------------------------------------------------------------------
# Common validators (apiserver.validation).
# ---------------------------------------------------------------------------------------------


class TestLabelsAndAnnotations:
    def test_validate_labels_reports_on_the_map(self) -> None:
        errs = validate_labels({"bad key": "ok", "k": "bad value"}, "metadata.labels")
        assert full(errs) == [
            f'metadata.labels: Invalid value: "bad key": {QNAME_NAME_MSG}',
            f'metadata.labels: Invalid value: "bad value": {LABEL_VALUE_MSG}',
        ]

    def test_annotation_keys_are_case_insensitive(self) -> None:
        assert validate_annotations({"Example.COM/Key": "v"}, "metadata.annotations") == []

    def test_annotations_total_size_is_limited(self) -> None:
        assert validate_annotations({"k": "x" * (256 * 1024 - 1)}, "metadata.annotations") == []
        errs = validate_annotations({"k": "x" * (256 * 1024)}, "metadata.annotations")
        assert one(errs) == "metadata.annotations: Too long: may not be more than 262144 bytes"


class TestErrorsAndValues:
    def test_go_rendering_of_maps_and_slices(self) -> None:
        assert go_value(StringMap({"b": "2", "a": "1"})) == 'map[string]string{"a":"1", "b":"2"}'
        assert go_value(["x", "y"]) == '[]string{"x", "y"}'
        assert go_value({"a": 1, "b": "c"}) == '{"a":1,"b":"c"}'

    def test_messages(self) -> None:
        assert invalid("f", StringMap({"app": "x"}), "d").full() == 'f: Invalid value: map[string]string{"app":"x"}: d'
        assert not_found("f", "vol").full() == 'f: Not found: "vol"'
        assert too_long("f", 1).full() == "f: Too long: may not be more than 1 byte"

    def test_semantic_equality_treats_empty_as_unset(self) -> None:
        assert semantic_equal({"a": [], "b": {}, "c": None}, {})
        assert semantic_equal(None, {})
        assert not semantic_equal({"a": 1}, {"a": 2})

    def test_int_or_percent(self) -> None:
        assert validate_nonnegative_int_or_percent("25%", "f") == []
        assert validate_nonnegative_int_or_percent(3, "f") == []
        assert one(validate_nonnegative_int_or_percent(-1, "f")) == \
            "f: Invalid value: -1: must be greater than or equal to 0"
        assert one(validate_nonnegative_int_or_percent("abc", "f")) == (
            "f: Invalid value: \"abc\": a valid percent string must be a numeric string followed by an ending '%' "
            "(e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')")
        assert one(validate_not_more_than_100_percent("101%", "f")) == \
            'f: Invalid value: "101%": must not be greater than 100%'
        assert validate_not_more_than_100_percent("100%", "f") == []

    def test_cidr(self) -> None:
        assert validate_cidr("10.244.0.0/24", "f") == []
        assert validate_cidr("10.244.0.1/24", "f") == []  # host bits allowed, as net.ParseCIDR does
        assert one(validate_cidr("10.244.0.0", "f")) == \
            'f: Invalid value: "10.244.0.0": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)'

    def test_label_selector_validation(self) -> None:
        sel = {"matchExpressions": [{"key": "a", "operator": "In"},
                                    {"key": "b", "operator": "Exists", "values": ["x"]},
                                    {"key": "c", "operator": "Bogus"}]}
        assert full(validate_label_selector(sel, "spec.selector")) == [
            "spec.selector.matchExpressions[0].values: Required value: must be specified when `operator` is "
            "'In' or 'NotIn'",
            "spec.selector.matchExpressions[1].values: Forbidden: may not be specified when `operator` is "
            "'Exists' or 'DoesNotExist'",
            'spec.selector.matchExpressions[2].operator: Invalid value: "Bogus": not a valid selector operator',
        ]


# ---------------------------------------------------------------------------------------------
# ObjectMeta.
# ---------------------------------------------------------------------------------------------


class TestObjectMeta:
    def test_valid(self) -> None:
        meta = {"name": "web", "namespace": "default", "labels": {"app": "web"}, "annotations": {"a/b": "c"},
                "finalizers": ["kubernetes", "example.com/x"]}
        assert validate_object_meta(meta, True, name_is_dns_subdomain) == []

    def test_bad_name(self) -> None:
        errs = validate_object_meta({"name": "Bad_Name", "namespace": "default"}, True, "Pod")
        assert one(errs) == f'metadata.name: Invalid value: "Bad_Name": {SUBDOMAIN_MSG}'

    def test_kind_picks_label_rule_for_namespaces(self) -> None:
        assert one(validate_object_meta({"name": "a.b"}, False, "Namespace")) == \
            'metadata.name: Invalid value: "a.b": must not contain dots'
        assert validate_object_meta({"name": "a.b"}, False, "Node") == []

    def test_name_or_generate_name_required(self) -> None:
        assert one(validate_object_meta({"namespace": "default"}, True, "Pod")) == \
            "metadata.name: Required value: name or generateName is required"

    def test_bad_generate_name(self) -> None:
        errs = validate_object_meta({"name": "x", "generateName": "Web-", "namespace": "default"}, True, "Pod")
        assert full(errs) == [f'metadata.generateName: Invalid value: "Web-": {SUBDOMAIN_MSG}']

    def test_namespace_required_and_forbidden(self) -> None:
        assert one(validate_object_meta({"name": "x"}, True, "Pod")) == "metadata.namespace: Required value"
        assert one(validate_object_meta({"name": "x", "namespace": "d"}, False, "Node")) == \
            "metadata.namespace: Forbidden: not allowed on this type"
        assert one(validate_object_meta({"name": "x", "namespace": "Bad"}, True, "Pod")).startswith(
            'metadata.namespace: Invalid value: "Bad": a lowercase RFC 1123 label')

    def test_labels_and_annotations(self) -> None:
        errs = validate_object_meta({"name": "x", "labels": {"k": "-v"}, "annotations": {"-k": ""}}, False, "Node")
        assert [e.field for e in errs] == ["metadata.labels", "metadata.annotations"]

    def test_negative_generation(self) -> None:
        assert one(validate_object_meta({"name": "x", "generation": -1}, False, "Node")) == \
            "metadata.generation: Invalid value: -1: must be greater than or equal to 0"

    def test_finalizers(self) -> None:
        errs = validate_object_meta({"name": "x", "finalizers": ["custom", "bad_/x"]}, False, "Node")
        assert full(errs) == [
            'metadata.finalizers[0]: Invalid value: "custom": name is neither a standard finalizer name nor is it '
            "fully qualified",
            f'metadata.finalizers: Invalid value: "bad_/x": prefix part {SUBDOMAIN_MSG}',
        ]

    def test_orphan_and_foreground_exclude_each_other(self) -> None:
        errs = validate_object_meta({"name": "x", "finalizers": ["orphan", "foregroundDeletion"]}, False, "Node")
        assert one(errs) == ('metadata.finalizers: Invalid value: []string{"orphan", "foregroundDeletion"}: '
                             "finalizer orphan and foregroundDeletion cannot be both set")

    def test_owner_references_need_identity(self) -> None:
        refs = [{"apiVersion": "apps/", "kind": "", "name": "", "uid": ""}]
        errs = validate_object_meta({"name": "x", "namespace": "d", "ownerReferences": refs}, True, "Pod")
        assert full(errs) == [
            'metadata.ownerReferences.apiVersion: Invalid value: "apps/": version must not be empty',
            'metadata.ownerReferences.kind: Invalid value: "": must not be empty',
            'metadata.ownerReferences.name: Invalid value: "": must not be empty',
            'metadata.ownerReferences.uid: Invalid value: "": must not be empty',
        ]

    def test_one_controller_only(self) -> None:
        refs = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "a", "uid": "1", "controller": True},
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "b", "uid": "2", "controller": True}]
        errs = validate_object_meta({"name": "x", "namespace": "d", "ownerReferences": refs}, True, "Pod")
        assert one(errs).endswith('Only one reference can have Controller set to true. Found "true" in references '
                                  "for ReplicaSet/a and ReplicaSet/b")

    def test_update_identity_is_immutable(self) -> None:
        old = {"name": "x", "namespace": "d", "uid": "u1", "creationTimestamp": "2024-01-01T00:00:00Z"}
        new = {"name": "y", "namespace": "e", "uid": "u2", "creationTimestamp": "2024-01-02T00:00:00Z"}
        assert full(validate_object_meta_update(new, old)) == [
            'metadata.name: Invalid value: "y": field is immutable',
            'metadata.namespace: Invalid value: "e": field is immutable',
            'metadata.uid: Invalid value: "u2": field is immutable',
            'metadata.creationTimestamp: Invalid value: "2024-01-02T00:00:00Z": field is immutable',
        ]

    def test_update_may_leave_system_fields_out(self) -> None:
        old = {"name": "x", "uid": "u1", "creationTimestamp": "t"}
        assert validate_object_meta_update({"name": "x"}, old) == []

    def test_no_new_finalizers_while_deleting(self) -> None:
        old = {"name": "x", "deletionTimestamp": "t", "finalizers": ["a/b"]}
        errs = validate_object_meta_update({"name": "x", "deletionTimestamp": "t", "finalizers": ["a/b", "c/d"]}, old)
        assert one(errs) == ('metadata.finalizers: Forbidden: no new finalizers can be added if the object is being '
                             'deleted, found new finalizers []string{"c/d"}')
        assert validate_object_meta_update({"name": "x", "deletionTimestamp": "t"}, old) == []

    def test_generation_never_decrements(self) -> None:
        assert one(validate_object_meta_update({"name": "x", "generation": 1}, {"name": "x", "generation": 2})) == \
            "metadata.generation: Invalid value: 1: must not be decremented"


# ---------------------------------------------------------------------------------------------
# Pods: defaulting.
# ---------------------------------------------------------------------------------------------


class TestPodDefaults:
    def test_minimal_pod(self) -> None:
        pod = created_pod(container(image="nginx"))
        assert pod["spec"] == {
            "containers": [{
                "name": "app", "image": "nginx", "imagePullPolicy": "Always", "resources": {},
                "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
            }],
            "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
            "schedulerName": "default-scheduler", "securityContext": {}, "enableServiceLinks": True,
        }
        assert pod["status"] == {"phase": "Pending", "qosClass": "BestEffort"}

    @pytest.mark.parametrize(("image", "policy"), [
        ("nginx", "Always"), ("nginx:latest", "Always"), ("nginx:1.25", "IfNotPresent"),
        ("localhost:5000/nginx", "Always"), ("localhost:5000/nginx:v1", "IfNotPresent"),
        ("nginx@sha256:" + "a" * 64, "IfNotPresent"), ("nginx:latest@sha256:" + "a" * 64, "Always"),
        ("", "IfNotPresent"),
    ])
    def test_image_pull_policy(self, image: str, policy: str) -> None:
        assert default_image_pull_policy(image) == policy

    def test_explicit_values_are_kept(self) -> None:
        pod = created_pod(container(imagePullPolicy="Never"), restartPolicy="Never", terminationGracePeriodSeconds=0,
                          dnsPolicy="Default", schedulerName="mine", enableServiceLinks=False)
        spec = pod["spec"]
        assert (spec["restartPolicy"], spec["terminationGracePeriodSeconds"], spec["dnsPolicy"]) == \
            ("Never", 0, "Default")
        assert (spec["schedulerName"], spec["enableServiceLinks"]) == ("mine", False)
        assert spec["containers"][0]["imagePullPolicy"] == "Never"

    def test_ports_probes_and_hooks(self) -> None:
        ctr = container(ports=[{"containerPort": 80}],
                        livenessProbe={"httpGet": {"port": 80}},
                        readinessProbe={"tcpSocket": {"port": "http"}, "periodSeconds": 5},
                        startupProbe={"grpc": {"port": 9000}},
                        lifecycle={"preStop": {"httpGet": {"port": 80, "path": "/stop"}}})
        spec = created_pod(ctr)["spec"]
        c = spec["containers"][0]
        assert c["ports"] == [{"containerPort": 80, "protocol": "TCP"}]
        assert c["livenessProbe"] == {"httpGet": {"port": 80, "path": "/", "scheme": "HTTP"}, "timeoutSeconds": 1,
                                      "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3}
        assert c["readinessProbe"]["periodSeconds"] == 5
        assert c["startupProbe"]["grpc"] == {"port": 9000, "service": ""}
        assert c["lifecycle"]["preStop"]["httpGet"] == {"port": 80, "path": "/stop", "scheme": "HTTP"}

    def test_volumes(self) -> None:
        volumes = [{"name": "a"}, {"name": "b", "hostPath": {"path": "/x"}},
                   {"name": "c", "secret": {"secretName": "s"}},
                   {"name": "d", "configMap": {"name": "c", "defaultMode": 256}}]
        spec = created_pod(volumes=volumes)["spec"]
        assert spec["volumes"] == [
            {"name": "a", "emptyDir": {}}, {"name": "b", "hostPath": {"path": "/x", "type": ""}},
            {"name": "c", "secret": {"secretName": "s", "defaultMode": 420}},
            {"name": "d", "configMap": {"name": "c", "defaultMode": 256}},
        ]

    def test_env_field_ref_api_version(self) -> None:
        env = [{"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]
        c = created_pod(container(env=env))["spec"]["containers"][0]
        assert c["env"][0]["valueFrom"]["fieldRef"] == {"fieldPath": "metadata.name", "apiVersion": "v1"}

    def test_requests_default_to_limits(self) -> None:
        pod = created_pod(container(resources={"limits": {"cpu": "1"}, "requests": {"memory": "1Gi"}}))
        c = pod["spec"]["containers"][0]
        assert c["resources"] == {"limits": {"cpu": "1"}, "requests": {"memory": "1Gi", "cpu": "1"}}

    def test_host_network_ports(self) -> None:
        spec = created_pod(container(ports=[{"containerPort": 8080}]), hostNetwork=True)["spec"]
        assert spec["containers"][0]["ports"][0]["hostPort"] == 8080

    def test_priority_is_left_to_admission(self) -> None:
        """spec.priority comes from the Priority admission plugin (tests/unit/apiserver/test_priority_admission.py),
        not from defaulting: the plugin must see what the client sent."""
        assert "priority" not in created_pod(priorityClassName="system-node-critical")["spec"]
        assert created_pod(priority=7)["spec"]["priority"] == 7

    def test_status_set_by_clients_is_replaced(self) -> None:
        pod = make_pod()
        pod["status"] = {"phase": "Running", "podIP": "1.2.3.4"}
        PodStrategy().prepare_for_create(pod)
        assert pod["status"] == {"phase": "Pending", "qosClass": "BestEffort"}


class TestQoS:
    def test_best_effort(self) -> None:
        assert compute_qos_class({"containers": [{"name": "a"}]}) == "BestEffort"
        assert compute_qos_class({"containers": [{"resources": {"requests": {"cpu": "0"}}}]}) == "BestEffort"
        # only positive cpu and memory count: a negative, a malformed or another resource's quantity does not
        assert compute_qos_class({"containers": [{"resources": {"requests": {"cpu": "-100m", "memory": "x"},
                                                                "limits": {"example.com/gpu": "1"}}}]}) == "BestEffort"
        assert compute_qos_class({"containers": [{"resources": {"limits": {"memory": "1n"}}}]}) == "Burstable"

    def test_burstable(self) -> None:
        assert compute_qos_class({"containers": [{"resources": {"requests": {"cpu": "100m"}}}]}) == "Burstable"
        assert compute_qos_class({"containers": [
            {"resources": {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m", "memory": "1Gi"}}},
        ]}) == "Burstable"
        # one container without limits spoils the pod's guarantee
        assert compute_qos_class({"containers": [
            {"resources": {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1", "memory": "1Gi"}}},
            {"name": "b"},
        ]}) == "Burstable"

    def test_guaranteed(self) -> None:
        res = {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1000m", "memory": "1024Mi"}}
        assert compute_qos_class({"containers": [{"resources": res}], "initContainers": [{"resources": res}]}) == \
            "Guaranteed"

    def test_guaranteed_through_defaulted_requests(self) -> None:
        pod = created_pod(container(resources={"limits": {"cpu": "1", "memory": "1Gi"}}))
        assert pod["status"]["qosClass"] == "Guaranteed"

    def test_other_resources_do_not_count(self) -> None:
        assert compute_qos_class({"containers": [{"resources": {"limits": {"ephemeral-storage": "1Gi"}}}]}) == \
            "BestEffort"


# ---------------------------------------------------------------------------------------------
# Pods: validation.
# ---------------------------------------------------------------------------------------------


class TestPodValidation:
    def test_valid_pod(self) -> None:
        ctr = container(ports=[{"containerPort": 80, "name": "http"}],
                        livenessProbe={"httpGet": {"port": "http"}},
                        volumeMounts=[{"name": "data", "mountPath": "/data"}],
                        env=[{"name": "A", "value": "1"}],
                        resources={"requests": {"cpu": "100m"}, "limits": {"cpu": "1"}})
        assert pod_errors(ctr, volumes=[{"name": "data"}], initContainers=[container("init")]) == []

    def test_containers_required(self) -> None:
        pod = make_pod()
        pod["spec"]["containers"] = []
        PodStrategy().prepare_for_create(pod)
        assert full(PodStrategy().validate(pod)) == ["spec.containers: Required value"]

    def test_image_required(self) -> None:
        assert pod_errors(container(image="")) == ["spec.containers[0].image: Required value"]

    def test_image_whitespace(self) -> None:
        assert pod_errors(container(image=" nginx")) == [
            'spec.containers[0].image: Invalid value: " nginx": must not have leading or trailing whitespace']

    def test_container_name(self) -> None:
        assert pod_errors(container(name="")) == ["spec.containers[0].name: Required value"]
        assert pod_errors(container(name="Web")) == [f'spec.containers[0].name: Invalid value: "Web": {LABEL_MSG}']

    def test_container_names_unique_across_init(self) -> None:
        assert pod_errors(container("a"), container("a"), initContainers=[container("a"), container("b")]) == [
            'spec.containers[1].name: Duplicate value: "a"',
            'spec.initContainers[0].name: Duplicate value: "a"',
        ]

    def test_ports(self) -> None:
        ports = [{"containerPort": 0}, {"containerPort": 70000, "hostPort": -1, "protocol": "ICMP"},
                 {"containerPort": 80, "name": "web"}, {"containerPort": 81, "name": "web"},
                 {"containerPort": 82, "name": "Bad"}]
        assert pod_errors(container(ports=ports)) == [
            "spec.containers[0].ports[0].containerPort: Required value",
            "spec.containers[0].ports[1].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
            "spec.containers[0].ports[1].hostPort: Invalid value: -1: must be between 1 and 65535, inclusive",
            'spec.containers[0].ports[1].protocol: Unsupported value: "ICMP": supported values: "SCTP", "TCP", "UDP"',
            'spec.containers[0].ports[3].name: Duplicate value: "web"',
            'spec.containers[0].ports[4].name: Invalid value: "Bad": must contain only alpha-numeric characters '
            "(a-z, 0-9), and hyphens (-)",
        ]

    def test_host_port_conflicts(self) -> None:
        c1 = container("a", ports=[{"containerPort": 80, "hostPort": 8080}])
        c2 = container("b", ports=[{"containerPort": 81, "hostPort": 8080}])
        assert pod_errors(c1, c2) == ['spec.containers[1].ports[0].hostPort: Duplicate value: "TCP//8080"']

    def test_host_network_needs_matching_ports(self) -> None:
        ctr = container(ports=[{"containerPort": 80, "hostPort": 81}])
        assert pod_errors(ctr, hostNetwork=True) == [
            "spec.containers[0].ports[0].containerPort: Invalid value: 80: must match `hostPort` when `hostNetwork` "
            "is true"]

    def test_restart_and_dns_policy(self) -> None:
        assert pod_errors(restartPolicy="Sometimes", dnsPolicy="Nope") == [
            'spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"',
            'spec.dnsPolicy: Unsupported value: "Nope": supported values: "ClusterFirstWithHostNet", '
            '"ClusterFirst", "Default", "None"',
        ]

    def test_pull_and_termination_message_policy(self) -> None:
        assert pod_errors(container(imagePullPolicy="Sometimes", terminationMessagePolicy="Log")) == [
            'spec.containers[0].terminationMessagePolicy: Unsupported value: "Log": supported values: "File", '
            '"FallbackToLogsOnError"',
            'spec.containers[0].imagePullPolicy: Unsupported value: "Sometimes": supported values: "Always", '
            '"IfNotPresent", "Never"',
        ]

    def test_dns_none_needs_config(self) -> None:
        assert pod_errors(dnsPolicy="None") == [
            "spec.dnsConfig: Required value: must provide `dnsConfig` when `dnsPolicy` is None"]
        assert pod_errors(dnsPolicy="None", dnsConfig={}) == [
            "spec.dnsConfig.nameservers: Required value: must provide at least one DNS nameserver when `dnsPolicy` "
            "is None"]
        assert pod_errors(dnsPolicy="None", dnsConfig={"nameservers": ["1.1.1.1"], "searches": ["svc.local."]}) == []
        assert pod_errors(dnsConfig={"nameservers": ["x"], "options": [{}]}) == [
            'spec.dnsConfig.nameservers[0]: Invalid value: "x": must be a valid IP address, (e.g. 10.9.8.7 or '
            "2001:db8::ffff)",
            "spec.dnsConfig.options[0]: Required value: Option.Name must not be empty",
        ]

    def test_volumes(self) -> None:
        volumes = [{"name": "a"}, {"name": "a"}, {"name": "Bad"}, {"name": "h", "hostPath": {"path": ""}},
                   {"name": "s", "secret": {}, "configMap": {"name": "c"}},
                   {"name": "t", "hostPath": {"path": "/x", "type": "Weird"}},
                   {"name": "c", "configMap": {"name": "", "defaultMode": 1000,
                                               "items": [{"key": "", "path": "../x"}]}},
                   {"name": "p", "persistentVolumeClaim": {}}]
        assert pod_errors(volumes=volumes) == [
            'spec.volumes[1].name: Duplicate value: "a"',
            f'spec.volumes[2].name: Invalid value: "Bad": {LABEL_MSG}',
            "spec.volumes[3].hostPath.path: Required value",
            "spec.volumes[4].configMap: Forbidden: may not specify more than 1 volume type",
            "spec.volumes[4].secret.secretName: Required value",
            'spec.volumes[5].hostPath.type: Unsupported value: "Weird": supported values: "", "BlockDevice", '
            '"CharDevice", "Directory", "DirectoryOrCreate", "File", "FileOrCreate", "Socket"',
            "spec.volumes[6].configMap.name: Required value",
            "spec.volumes[6].configMap.defaultMode: Invalid value: 1000: must be a number between 0 and 0777 "
            "(octal), both inclusive",
            "spec.volumes[6].configMap.items[0].key: Required value",
            "spec.volumes[6].configMap.items[0].path: Invalid value: \"../x\": must not contain '..'",
            "spec.volumes[7].persistentVolumeClaim.claimName: Required value",
        ]

    def test_volume_mounts(self) -> None:
        mounts = [{"name": "data", "mountPath": "/d"}, {"name": "nope", "mountPath": "/d"},
                  {"name": "data", "mountPath": "", "subPath": "/abs"}]
        assert pod_errors(container(volumeMounts=mounts), volumes=[{"name": "data"}]) == [
            'spec.containers[0].volumeMounts[1].name: Not found: "nope"',
            'spec.containers[0].volumeMounts[1].mountPath: Invalid value: "/d": must be unique',
            "spec.containers[0].volumeMounts[2].mountPath: Required value",
            'spec.containers[0].volumeMounts.subPath: Invalid value: "/abs": must be a relative path',
        ]

    def test_mount_of_invalid_volume_is_not_found(self) -> None:
        errs = pod_errors(container(volumeMounts=[{"name": "v", "mountPath": "/v"}]),
                          volumes=[{"name": "v", "hostPath": {"path": ""}}])
        assert errs == ["spec.volumes[0].hostPath.path: Required value",
                        'spec.containers[0].volumeMounts[0].name: Not found: "v"']

    def test_resources(self) -> None:
        res = {"limits": {"cpu": "1", "memory": "abc", "gpu": "1"}, "requests": {"cpu": "2", "memory": "-1"}}
        assert pod_errors(container(resources=res)) == [
            'spec.containers[0].resources.limits[memory]: Invalid value: "abc": quantities must match the regular '
            "expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
            'spec.containers[0].resources.limits[gpu]: Invalid value: "gpu": must be a standard resource for '
            "containers",
            'spec.containers[0].resources.requests: Invalid value: "2": must be less than or equal to cpu limit of 1',
            'spec.containers[0].resources.requests[memory]: Invalid value: "-1": must be greater than or equal to 0',
            # requests were defaulted from limits, so the bad name shows up twice
            'spec.containers[0].resources.requests[gpu]: Invalid value: "gpu": must be a standard resource for '
            "containers",
        ]

    def test_requests_above_limits_in_canonical_form(self) -> None:
        res = {"limits": {"memory": "1Gi"}, "requests": {"memory": "2048Mi"}}
        assert pod_errors(container(resources=res)) == [
            'spec.containers[0].resources.requests: Invalid value: "2Gi": must be less than or equal to memory '
            "limit of 1Gi"]

    def test_extended_resources(self) -> None:
        ok = {"limits": {"example.com/gpu": "2"}, "requests": {"example.com/gpu": "2"}}
        assert pod_errors(container(resources=ok)) == []
        bad = {"limits": {"example.com/gpu": "2"}, "requests": {"example.com/gpu": "1"}}
        assert pod_errors(container(resources=bad)) == [
            'spec.containers[0].resources.requests: Invalid value: "1": must be equal to example.com/gpu limit of 2']
        fractional = {"limits": {"example.com/gpu": "500m"}}
        assert pod_errors(container(resources=fractional)) == [
            'spec.containers[0].resources.limits[example.com/gpu]: Invalid value: "500m": must be an integer',
            'spec.containers[0].resources.requests[example.com/gpu]: Invalid value: "500m": must be an integer',
        ]

    def test_extended_request_without_limit(self) -> None:
        pod = created_pod()
        pod["spec"]["containers"][0]["resources"] = {"requests": {"example.com/gpu": "1"}}
        assert full(PodStrategy().validate(pod)) == [
            "spec.containers[0].resources.limits: Required value: Limit must be set for non overcommitable resources"]

    def test_probe_handlers(self) -> None:
        ctr = container(livenessProbe={}, readinessProbe={"exec": {"command": ["true"]}, "httpGet": {"port": 80}},
                        startupProbe={"exec": {}})
        assert pod_errors(ctr) == [
            "spec.containers[0].livenessProbe: Required value: must specify a handler type",
            "spec.containers[0].readinessProbe.httpGet: Forbidden: may not specify more than 1 handler type",
            "spec.containers[0].startupProbe.exec.command: Required value",
        ]

    def test_probe_fields(self) -> None:
        probe = {"httpGet": {"port": 0, "scheme": "FTP"}, "successThreshold": 2, "initialDelaySeconds": -1}
        assert pod_errors(container(livenessProbe=probe)) == [
            "spec.containers[0].livenessProbe.httpGet.port: Invalid value: 0: must be between 1 and 65535, inclusive",
            'spec.containers[0].livenessProbe.httpGet.scheme: Unsupported value: "FTP": supported values: "HTTP", '
            '"HTTPS"',
            "spec.containers[0].livenessProbe.initialDelaySeconds: Invalid value: -1: must be greater than or "
            "equal to 0",
            "spec.containers[0].livenessProbe.successThreshold: Invalid value: 2: must be 1",
        ]

    def test_readiness_probe_takes_no_grace_period(self) -> None:
        probe = {"tcpSocket": {"port": "8080"}, "terminationGracePeriodSeconds": 5}
        assert pod_errors(container(readinessProbe=probe)) == [
            'spec.containers[0].readinessProbe.tcpSocket.port: Invalid value: "8080": must contain at least one '
            "letter (a-z)",
            "spec.containers[0].readinessProbe.terminationGracePeriodSeconds: Invalid value: 5: must not be set for "
            "readinessProbes",
        ]

    def test_lifecycle(self) -> None:
        ctr = container(lifecycle={"postStart": {}, "preStop": {"sleep": {"seconds": 60}}})
        assert pod_errors(ctr) == [
            "spec.containers[0].lifecycle.postStart: Required value: must specify a handler type",
            "spec.containers[0].lifecycle.preStop.sleep.seconds: Invalid value: 60: must be greater than 0 and less "
            "than terminationGracePeriodSeconds (30)",
        ]

    def test_init_containers_take_no_probes_unless_sidecars(self) -> None:
        init = container("init", livenessProbe={"exec": {"command": ["x"]}}, lifecycle={})
        assert pod_errors(initContainers=[init]) == [
            "spec.initContainers[0].lifecycle: Forbidden: may not be set for init containers without "
            "restartPolicy=Always",
            "spec.initContainers[0].livenessProbe: Forbidden: may not be set for init containers without "
            "restartPolicy=Always",
        ]
        sidecar = container("side", restartPolicy="Always", readinessProbe={"exec": {"command": ["x"]}})
        assert pod_errors(initContainers=[sidecar]) == []
        assert pod_errors(initContainers=[container("x", restartPolicy="Never")]) == [
            'spec.initContainers[0].restartPolicy: Unsupported value: "Never": supported values: "Always"']
        assert pod_errors(container(restartPolicy="Always")) == [
            "spec.containers[0].restartPolicy: Forbidden: may not be set for non-init containers"]

    def test_env(self) -> None:
        env = [{"name": ""}, {"name": "A=B"}, {"name": "C", "valueFrom": {}},
               {"name": "D", "value": "x", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
               {"name": "E", "valueFrom": {"fieldRef": {"fieldPath": "spec.bogus"}}},
               {"name": "F", "valueFrom": {"secretKeyRef": {"name": "s", "key": ""},
                                           "configMapKeyRef": {"name": "c", "key": "k"}}},
               {"name": "G", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}}]
        errs = pod_errors(container(env=env))
        assert errs == [
            "spec.containers[0].env[0].name: Required value",
            'spec.containers[0].env[1].name: Invalid value: "A=B": a valid environment variable name must consist '
            "only of printable ASCII characters other than '='",
            'spec.containers[0].env[2].valueFrom: Invalid value: "": must specify one of: `fieldRef`, '
            "`resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`",
            'spec.containers[0].env[3].valueFrom: Invalid value: "": may not be specified when `value` is not empty',
            'spec.containers[0].env[4].valueFrom.fieldRef.fieldPath: Unsupported value: "spec.bogus": supported '
            'values: "metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName", '
            '"spec.serviceAccountName", "status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs"',
            "spec.containers[0].env[5].valueFrom.secretKeyRef.key: Required value",
            'spec.containers[0].env[5].valueFrom: Invalid value: "": may not have more than one field specified at '
            "a time",
        ]

    def test_env_from(self) -> None:
        env_from = [{"configMapRef": {"name": "c"}}, {}, {"secretRef": {"name": ""}}]
        assert pod_errors(container(envFrom=env_from)) == [
            'spec.containers[0].envFrom[1]: Invalid value: "": must specify one of: `configMapRef` or `secretRef`',
            "spec.containers[0].envFrom[2].secretRef.name: Required value",
        ]

    def test_tolerations(self) -> None:
        tolerations = [{"operator": "Equal", "value": "x"}, {"key": "k", "operator": "Exists", "value": "v"},
                       {"key": "k", "tolerationSeconds": 5, "effect": "NoSchedule"},
                       {"key": "k", "operator": "Like"}, {"key": "k", "effect": "Never"}, {"key": "-k"}]
        assert pod_errors(tolerations=tolerations) == [
            'spec.tolerations[0].operator: Invalid value: "Equal": operator must be Exists when `key` is empty, '
            'which means "match all values and all keys"',
            'spec.tolerations[1].operator: Invalid value: {"key":"k","operator":"Exists","value":"v"}: value must '
            "be empty when `operator` is 'Exists'",
            "spec.tolerations[2].effect: Invalid value: \"NoSchedule\": effect must be 'NoExecute' when "
            "`tolerationSeconds` is set",
            'spec.tolerations[3].operator: Unsupported value: "Like": supported values: "Equal", "Exists"',
            'spec.tolerations[4].effect: Unsupported value: "Never": supported values: "NoSchedule", '
            '"PreferNoSchedule", "NoExecute"',
            f'spec.tolerations[5].key: Invalid value: "-k": {QNAME_NAME_MSG}',
        ]

    def test_names_and_numbers(self) -> None:
        assert pod_errors(nodeName="Node_1", serviceAccountName="A", activeDeadlineSeconds=0, hostname="a.b",
                          nodeSelector={"k": "-"}, preemptionPolicy="Sometimes") == [
            f'spec.nodeSelector: Invalid value: "-": {LABEL_VALUE_MSG}',
            f'spec.serviceAccountName: Invalid value: "A": {SUBDOMAIN_MSG}',
            f'spec.nodeName: Invalid value: "Node_1": {SUBDOMAIN_MSG}',
            "spec.activeDeadlineSeconds: Invalid value: 0: must be between 1 and 2147483647, inclusive",
            'spec.hostname: Invalid value: "a.b": must not contain dots',
            'spec.preemptionPolicy: Unsupported value: "Sometimes": supported values: "PreemptLowerPriority", '
            '"Never"',
        ]

    def test_grace_period_required(self) -> None:
        pod = created_pod()
        del pod["spec"]["terminationGracePeriodSeconds"]
        assert full(PodStrategy().validate(pod)) == ["spec.terminationGracePeriodSeconds: Required value"]

    def test_readiness_gates(self) -> None:
        assert pod_errors(readinessGates=[{"conditionType": "example.com/ready"}]) == []
        assert pod_errors(readinessGates=[{"conditionType": "-x"}]) == [
            f'spec.readinessGates[0].conditionType: Invalid value: "-x": {QNAME_NAME_MSG}']

    def test_template_paths(self) -> None:
        tmpl = template(labels={"-": "x"}, containers=[container(image="")])
        from apiserver.registry.pod import default_pod_spec

        default_pod_spec(tmpl["spec"])
        assert full(validate_pod_template_spec(tmpl, "spec.template")) == [
            f'spec.template.labels: Invalid value: "-": {QNAME_NAME_MSG}',
            "spec.template.spec.containers[0].image: Required value",
        ]
        assert full(validate_pod_template_spec(None, "spec.template")) == ["spec.template: Required value"]


# ---------------------------------------------------------------------------------------------
# Pods: updates, status, deletion, field selectors.
# ---------------------------------------------------------------------------------------------


def pod_update(old: Obj, mutate: Any) -> list[str]:
    new = copy.deepcopy(old)
    mutate(new)
    strategy = PodStrategy()
    strategy.prepare_for_update(new, old)
    return full(strategy.validate(new) + strategy.validate_update(new, old))


class TestPodUpdate:
    def setup_method(self) -> None:
        self.old = created_pod(container(ports=[{"containerPort": 80}]),
                               tolerations=[{"key": "k", "operator": "Exists", "effect": "NoExecute",
                                             "tolerationSeconds": 10}])

    def test_image_may_change(self) -> None:
        assert pod_update(self.old, lambda p: p["spec"]["containers"][0].update(image="nginx:1.26")) == []

    def test_identical_update_is_fine(self) -> None:
        assert pod_update(self.old, lambda p: None) == []

    def test_minimal_manifest_replaces_cleanly(self) -> None:
        """A PUT of the original manifest (no defaults, no priority) gets the same defaults back."""
        def replace(p: Obj) -> None:
            p["spec"] = make_pod(container(ports=[{"containerPort": 80}]),
                                 tolerations=copy.deepcopy(self.old["spec"]["tolerations"]))["spec"]
        assert pod_update(self.old, replace) == []

    def test_other_fields_are_forbidden(self) -> None:
        errs = pod_update(self.old, lambda p: p["spec"]["containers"][0]["ports"][0].update(containerPort=81))
        assert len(errs) == 1
        assert errs[0] == (POD_UPDATE_MSG + "\n- spec.containers[0].ports[0].containerPort: 80\n"
                                            "+ spec.containers[0].ports[0].containerPort: 81")

    def test_node_name_only_through_binding(self) -> None:
        errs = pod_update(self.old, lambda p: p["spec"].update(nodeName="node-1"))
        assert errs[0].startswith(POD_UPDATE_MSG)
        assert errs[0].endswith('+ spec.nodeName: "node-1"')

    def test_containers_may_not_be_added(self) -> None:
        assert pod_update(self.old, lambda p: p["spec"]["containers"].append(container("b"))) == [
            "spec.containers: Forbidden: pod updates may not add or remove containers"]

    def test_image_may_not_be_removed(self) -> None:
        assert pod_update(self.old, lambda p: p["spec"]["containers"][0].update(image="")) == [
            "spec.containers[0].image: Required value", "spec.containers[0].image: Required value"]

    def test_active_deadline(self) -> None:
        assert pod_update(self.old, lambda p: p["spec"].update(activeDeadlineSeconds=100)) == []
        old = copy.deepcopy(self.old)
        old["spec"]["activeDeadlineSeconds"] = 100
        assert pod_update(old, lambda p: p["spec"].update(activeDeadlineSeconds=50)) == []
        assert pod_update(old, lambda p: p["spec"].update(activeDeadlineSeconds=200)) == [
            "spec.activeDeadlineSeconds: Invalid value: 200: must be less than or equal to previous value"]
        assert pod_update(old, lambda p: p["spec"].pop("activeDeadlineSeconds")) == [
            "spec.activeDeadlineSeconds: Invalid value: null: must not update from a positive integer to nil value"]

    def test_tolerations_may_only_be_added(self) -> None:
        add = {"key": "other", "operator": "Exists"}
        assert pod_update(self.old, lambda p: p["spec"]["tolerations"].append(add)) == []
        assert pod_update(self.old, lambda p: p["spec"]["tolerations"][0].update(tolerationSeconds=99)) == []
        assert pod_update(self.old, lambda p: p["spec"].update(tolerations=[])) == [
            "spec.tolerations: Forbidden: existing toleration can not be modified except its tolerationSeconds"]

    def test_negative_grace_period_may_become_one(self) -> None:
        old = copy.deepcopy(self.old)
        old["spec"]["terminationGracePeriodSeconds"] = -1
        assert pod_update(old, lambda p: p["spec"].update(terminationGracePeriodSeconds=1)) == []
        assert pod_update(self.old, lambda p: p["spec"].update(terminationGracePeriodSeconds=1))[0].startswith(
            POD_UPDATE_MSG)

    def test_update_keeps_status(self) -> None:
        old = copy.deepcopy(self.old)
        old["status"] = {"phase": "Running", "qosClass": "BestEffort"}
        new = copy.deepcopy(old)
        new["status"] = {"phase": "Failed"}
        PodStrategy().prepare_for_update(new, old)
        assert new["status"] == {"phase": "Running", "qosClass": "BestEffort"}


class TestPodStatus:
    def test_status_write_changes_only_status(self) -> None:
        old = created_pod()
        new = copy.deepcopy(old)
        new["spec"]["nodeName"] = "sneaky"
        new["metadata"]["labels"] = {"a": "b"}
        new["status"] = {"phase": "Running", "podIP": "10.0.0.5"}
        PodStrategy().prepare_for_status_update(new, old)
        assert new["spec"] == old["spec"]
        assert "labels" not in new["metadata"]
        assert new["status"] == {"phase": "Running", "podIP": "10.0.0.5", "podIPs": [{"ip": "10.0.0.5"}],
                                 "qosClass": "BestEffort"}
        assert full(PodStrategy().validate_update(new, old)) == []

    def test_pod_ips_agree(self) -> None:
        old = created_pod()
        new = copy.deepcopy(old)
        new["status"] = {"podIPs": [{"ip": "10.0.0.7"}], "podIP": "10.0.0.8", "hostIPs": [{"ip": "192.168.1.2"}]}
        PodStrategy().prepare_for_status_update(new, old)
        assert new["status"]["podIPs"] == [{"ip": "10.0.0.8"}]
        assert new["status"]["hostIP"] == "192.168.1.2"

    def test_status_rules(self) -> None:
        old = created_pod(restartPolicy="Never")
        old["status"]["containerStatuses"] = [{"name": "app", "state": {"terminated": {"exitCode": 0}}}]
        new = copy.deepcopy(old)
        new["status"] = {"qosClass": "Guaranteed", "podIPs": [{"ip": "x"}, {"ip": "x"}], "nominatedNodeName": "N",
                         "containerStatuses": [{"name": "app", "state": {"running": {}}}]}
        assert full(PodStrategy().validate_update(new, old)) == [
            'status.qosClass: Invalid value: "Guaranteed": field is immutable',
            f'status.nominatedNodeName: Invalid value: "N": {SUBDOMAIN_MSG}',
            'status.podIPs[0]: Invalid value: "x": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)',
            'status.podIPs[1]: Invalid value: "x": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)',
            'status.podIPs[1]: Duplicate value: {"ip":"x"}',
            "status.containerStatuses[0].state: Forbidden: may not be transitioned to non-terminated state",
        ]

    def test_restart_always_may_leave_terminated(self) -> None:
        old = created_pod()
        old["status"]["containerStatuses"] = [{"name": "app", "state": {"terminated": {"exitCode": 1}}}]
        new = copy.deepcopy(old)
        new["status"]["containerStatuses"] = [{"name": "app", "state": {"running": {}}}]
        assert PodStrategy().validate_update(new, old) == []


class TestPodDeletionAndFields:
    @pytest.mark.parametrize(("node", "phase", "requested", "grace", "expected"), [
        ("n1", "Running", None, 30, 30),
        ("n1", "Running", 5, 30, 5),
        ("n1", "Running", 0, 30, 0),
        ("", "Pending", None, 30, 0),
        ("n1", "Succeeded", None, 30, 0),
        ("n1", "Failed", 10, 30, 0),
        ("n1", "Running", -5, 30, 1),
        ("n1", "Running", None, None, 0),
    ])
    def test_deletion_grace_period(self, node: str, phase: str, requested: int | None, grace: int | None,
                                   expected: int) -> None:
        pod = {"spec": {"nodeName": node, "terminationGracePeriodSeconds": grace}, "status": {"phase": phase}}
        assert PodStrategy().deletion_grace_period(pod, requested) == expected

    def test_field_values(self) -> None:
        pod = created_pod(nodeName="n1", serviceAccountName="sa")
        pod["status"].update(podIPs=[{"ip": "10.0.0.1"}], nominatedNodeName="n2")
        assert PodStrategy().field_values(pod) == {
            "metadata.name": "p", "metadata.namespace": "default", "spec.nodeName": "n1",
            "spec.restartPolicy": "Always", "spec.schedulerName": "default-scheduler",
            "spec.serviceAccountName": "sa", "spec.hostNetwork": "false", "status.phase": "Pending",
            "status.podIP": "10.0.0.1", "status.nominatedNodeName": "n2",
        }


# ---------------------------------------------------------------------------------------------
# Deployments.
# ---------------------------------------------------------------------------------------------


class TestDeployment:
    def test_defaults(self) -> None:
        d = make_deployment()
        DeploymentStrategy().prepare_for_create(d)
        spec = d["spec"]
        assert spec["replicas"] == 1
        assert spec["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%",
                                                                               "maxSurge": "25%"}}
        assert (spec["revisionHistoryLimit"], spec["progressDeadlineSeconds"]) == (10, 600)
        assert "minReadySeconds" not in spec
        tspec = spec["template"]["spec"]
        assert (tspec["restartPolicy"], tspec["dnsPolicy"], tspec["terminationGracePeriodSeconds"]) == \
            ("Always", "ClusterFirst", 30)
        assert tspec["containers"][0]["imagePullPolicy"] == "IfNotPresent"
        assert "enableServiceLinks" not in tspec  # Pod-only default
        assert d["status"] == {}
        assert DeploymentStrategy().validate(d) == []

    def test_partial_rolling_update_and_recreate_defaults(self) -> None:
        d = make_deployment(strategy={"rollingUpdate": {"maxSurge": 1}})
        DeploymentStrategy().prepare_for_create(d)
        assert d["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": "25%"}
        d = make_deployment(strategy={"type": "Recreate"})
        DeploymentStrategy().prepare_for_create(d)
        assert d["spec"]["strategy"] == {"type": "Recreate"}

    def test_negative_replicas(self) -> None:
        assert deployment_errors(replicas=-1) == [
            "spec.replicas: Invalid value: -1: must be greater than or equal to 0"]

    def test_selector_must_match_template(self) -> None:
        assert deployment_errors(template=template(labels={"app": "x"})) == [
            'spec.template.metadata.labels: Invalid value: map[string]string{"app":"x"}: `selector` does not match '
            "template `labels`"]

    def test_selector_expressions_match(self) -> None:
        sel = {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "api"]}]}
        assert deployment_errors(selector=sel) == []
        sel = {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}]}
        assert len(deployment_errors(selector=sel)) == 1

    def test_selector_required(self) -> None:
        d = make_deployment()
        del d["spec"]["selector"]
        DeploymentStrategy().prepare_for_create(d)
        assert full(DeploymentStrategy().validate(d)) == [
            "spec.selector: Required value",
            'spec.template.metadata.labels: Invalid value: map[string]string{"app":"web"}: `selector` does not '
            "match template `labels`",
        ]

    def test_empty_selector(self) -> None:
        assert deployment_errors(selector={}) == ["spec.selector: Invalid value: {}: empty selector is invalid for "
                                                  "deployment"]

    def test_invalid_selector(self) -> None:
        sel = {"matchLabels": {"app": "-"}}
        assert deployment_errors(selector=sel) == [
            f'spec.selector.matchLabels: Invalid value: "-": {LABEL_VALUE_MSG}',
            'spec.selector: Invalid value: {"matchLabels":{"app":"-"}}: invalid label selector',
        ]

    def test_template_is_a_pod_spec(self) -> None:
        assert deployment_errors(template=template(containers=[container(image="")])) == [
            "spec.template.spec.containers[0].image: Required value"]
        assert deployment_errors(template=template(containers=[])) == ["spec.template.spec.containers: Required value"]

    def test_template_must_restart_always(self) -> None:
        assert deployment_errors(template=template(restartPolicy="Never", activeDeadlineSeconds=5)) == [
            'spec.template.spec.restartPolicy: Unsupported value: "Never": supported values: "Always"',
            "spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in ReplicaSet is not "
            "Supported",
        ]

    def test_recreate_takes_no_rolling_update(self) -> None:
        assert deployment_errors(strategy={"type": "Recreate", "rollingUpdate": {}}) == [
            "spec.strategy.rollingUpdate: Forbidden: may not be specified when strategy `type` is 'Recreate'"]

    def test_unknown_strategy(self) -> None:
        assert deployment_errors(strategy={"type": "BlueGreen"}) == [
            'spec.strategy: Unsupported value: "BlueGreen": supported values: "Recreate", "RollingUpdate"']

    def test_rolling_update_parameters(self) -> None:
        assert deployment_errors(strategy={"rollingUpdate": {"maxSurge": 0, "maxUnavailable": "0%"}}) == [
            'spec.strategy.rollingUpdate.maxUnavailable: Invalid value: "0%": may not be 0 when `maxSurge` is 0']
        assert deployment_errors(strategy={"rollingUpdate": {"maxSurge": -1, "maxUnavailable": "120%"}}) == [
            "spec.strategy.rollingUpdate.maxSurge: Invalid value: -1: must be greater than or equal to 0",
            'spec.strategy.rollingUpdate.maxUnavailable: Invalid value: "120%": must not be greater than 100%',
        ]
        assert deployment_errors(strategy={"rollingUpdate": {"maxSurge": "200%", "maxUnavailable": 0}}) == []
        errs = deployment_errors(strategy={"rollingUpdate": {"maxSurge": "x", "maxUnavailable": 1}})
        assert errs == ["spec.strategy.rollingUpdate.maxSurge: Invalid value: \"x\": a valid percent string must be a "
                        "numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation "
                        "is '[0-9]+%')"]

    def test_history_and_deadlines(self) -> None:
        assert deployment_errors(revisionHistoryLimit=-1, minReadySeconds=-2) == [
            "spec.minReadySeconds: Invalid value: -2: must be greater than or equal to 0",
            "spec.revisionHistoryLimit: Invalid value: -1: must be greater than or equal to 0",
        ]
        assert deployment_errors(minReadySeconds=600) == [
            "spec.progressDeadlineSeconds: Invalid value: 600: must be greater than minReadySeconds"]
        assert deployment_errors(revisionHistoryLimit=0, minReadySeconds=599) == []

    def test_selector_is_immutable(self) -> None:
        old = make_deployment()
        DeploymentStrategy().prepare_for_create(old)
        new = copy.deepcopy(old)
        new["spec"]["selector"] = {"matchLabels": {"app": "web", "tier": "x"}}
        new["spec"]["template"]["metadata"]["labels"]["tier"] = "x"
        DeploymentStrategy().prepare_for_update(new, old)
        assert full(DeploymentStrategy().validate_update(new, old)) == [
            'spec.selector: Invalid value: {"matchLabels":{"app":"web","tier":"x"}}: field is immutable']

    def test_update_applies_defaults_and_keeps_status(self) -> None:
        old = make_deployment()
        DeploymentStrategy().prepare_for_create(old)
        old["status"] = {"replicas": 1}
        new = make_deployment(replicas=3)
        new["status"] = {"replicas": 9}
        DeploymentStrategy().prepare_for_update(new, old)
        assert new["status"] == {"replicas": 1}
        assert new["spec"]["revisionHistoryLimit"] == 10
        assert DeploymentStrategy().validate_update(new, old) == []

    def test_status_counts(self) -> None:
        old = make_deployment()
        DeploymentStrategy().prepare_for_create(old)
        old["status"] = {"collisionCount": 2}
        new = copy.deepcopy(old)
        new["status"] = {"replicas": 1, "readyReplicas": 2, "availableReplicas": 3, "updatedReplicas": -1,
                         "collisionCount": 1}
        assert full(DeploymentStrategy().validate_update(new, old)) == [
            "status.updatedReplicas: Invalid value: -1: must be greater than or equal to 0",
            "status.readyReplicas: Invalid value: 2: cannot be greater than status.replicas",
            "status.availableReplicas: Invalid value: 3: cannot be greater than status.replicas",
            "status.availableReplicas: Invalid value: 3: cannot be greater than readyReplicas",
            "status.collisionCount: Invalid value: 1: cannot be decremented",
        ]


# ---------------------------------------------------------------------------------------------
# ReplicaSets.
# ---------------------------------------------------------------------------------------------


class TestReplicaSet:
    def test_defaults(self) -> None:
        rs = make_replicaset()
        ReplicaSetStrategy().prepare_for_create(rs)
        assert rs["spec"]["replicas"] == 1
        assert rs["status"] == {"replicas": 0}
        assert rs["spec"]["template"]["spec"]["schedulerName"] == "default-scheduler"
        assert ReplicaSetStrategy().validate(rs) == []

    def test_validation(self) -> None:
        rs = make_replicaset(replicas=-2, minReadySeconds=-1, template=template(labels={}))
        ReplicaSetStrategy().prepare_for_create(rs)
        assert full(ReplicaSetStrategy().validate(rs)) == [
            "spec.replicas: Invalid value: -2: must be greater than or equal to 0",
            "spec.minReadySeconds: Invalid value: -1: must be greater than or equal to 0",
            "spec.template.metadata.labels: Invalid value: map[string]string{}: `selector` does not match template "
            "`labels`",
        ]

    def test_selector_immutable_and_status(self) -> None:
        old = make_replicaset()
        ReplicaSetStrategy().prepare_for_create(old)
        new = copy.deepcopy(old)
        new["spec"]["selector"] = {"matchLabels": {"app": "other"}}
        assert full(ReplicaSetStrategy().validate_update(new, old)) == [
            'spec.selector: Invalid value: {"matchLabels":{"app":"other"}}: field is immutable']
        new = copy.deepcopy(old)
        new["status"] = {"replicas": 1, "fullyLabeledReplicas": 2}
        assert full(ReplicaSetStrategy().validate_update(new, old)) == [
            "status.fullyLabeledReplicas: Invalid value: 2: cannot be greater than status.replicas"]

    def test_field_values(self) -> None:
        rs = make_replicaset()
        ReplicaSetStrategy().prepare_for_create(rs)
        assert ReplicaSetStrategy().field_values(rs) == {"metadata.name": "rs", "metadata.namespace": "default",
                                                         "status.replicas": "0"}


# ---------------------------------------------------------------------------------------------
# Nodes.
# ---------------------------------------------------------------------------------------------


def make_node(**spec: Any) -> Obj:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1"}, "spec": spec}


class TestNode:
    def test_pod_cidr_sync_and_allocatable(self) -> None:
        node = make_node(podCIDR="10.244.1.0/24")
        node["status"] = {"capacity": {"cpu": "4", "pods": "110"}}
        NodeStrategy().prepare_for_create(node)
        assert node["spec"]["podCIDRs"] == ["10.244.1.0/24"]
        assert node["status"]["allocatable"] == {"cpu": "4", "pods": "110"}
        node = make_node(podCIDRs=["10.244.2.0/24", "fd00::/64"])
        NodeStrategy().prepare_for_create(node)
        assert node["spec"]["podCIDR"] == "10.244.2.0/24"
        assert NodeStrategy().validate(node) == []

    def test_pod_cidrs(self) -> None:
        node = make_node(podCIDRs=["nope", "10.0.0.0/24", "10.1.0.0/24"])
        NodeStrategy().prepare_for_create(node)
        assert full(NodeStrategy().validate(node)) == [
            'spec.podCIDRs[0]: Invalid value: "nope": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)',
            'spec.podCIDRs: Invalid value: []string{"nope", "10.0.0.0/24", "10.1.0.0/24"}: may specify no more than '
            "one CIDR for each IP family",
        ]

    def test_taints(self) -> None:
        taints = [{"key": "k", "effect": "NoSchedule"}, {"key": "k", "effect": "NoSchedule", "value": "v"},
                  {"key": "k2", "effect": "Sometimes"}, {"key": "", "effect": ""}, {"key": "k3", "value": "-",
                                                                                    "effect": "NoExecute"}]
        node = make_node(taints=taints)
        assert full(NodeStrategy().validate(node)) == [
            'metadata.taints[1]: Duplicate value: {"effect":"NoSchedule","key":"k","value":"v"}: taints must be '
            "unique by key and effect pair",
            'metadata.taints[2].effect: Unsupported value: "Sometimes": supported values: "NoSchedule", '
            '"PreferNoSchedule", "NoExecute"',
            'metadata.taints[3].key: Invalid value: "": name part must be non-empty',
            f'metadata.taints[3].key: Invalid value: "": {QNAME_NAME_MSG}',
            "metadata.taints[3].effect: Required value",
            f'metadata.taints[4].value: Invalid value: "-": {LABEL_VALUE_MSG}',
        ]

    def test_capacity_quantities(self) -> None:
        node = make_node()
        node["status"] = {"capacity": {"cpu": "x", "memory": "-1Gi"}}
        NodeStrategy().prepare_for_create(node)
        errs = full(NodeStrategy().validate(node))
        assert errs[0].startswith('status.capacity[cpu]: Invalid value: "x": quantities must match')
        assert 'status.capacity[memory]: Invalid value: "-1Gi": must be greater than or equal to 0' in errs

    def test_update(self) -> None:
        old = make_node(podCIDRs=["10.244.1.0/24"], providerID="a")
        NodeStrategy().prepare_for_create(old)
        new = copy.deepcopy(old)
        new["spec"].update(podCIDR="10.244.9.0/24", podCIDRs=["10.244.9.0/24"], providerID="b")
        new["status"] = {"addresses": [{"type": "InternalIP", "address": "1.1.1.1"}] * 2}
        NodeStrategy().prepare_for_update(new, old)
        assert "status" not in new  # kept from old, which has none
        new["status"] = {"addresses": [{"type": "InternalIP", "address": "1.1.1.1"}] * 2}
        assert full(NodeStrategy().validate_update(new, old)) == [
            'spec.podCIDRs: Forbidden: node updates may not change podCIDR except from "" to valid',
            'spec.providerID: Forbidden: node updates may not change providerID except from "" to valid',
            'status.addresses[1]: Duplicate value: {"address":"1.1.1.1","type":"InternalIP"}',
        ]

    def test_cidr_may_be_assigned_once(self) -> None:
        old = make_node()
        new = make_node(podCIDR="10.244.3.0/24")
        NodeStrategy().prepare_for_update(new, old)
        assert NodeStrategy().validate_update(new, old) == []

    def test_status_write_defaults_allocatable(self) -> None:
        old = make_node(unschedulable=True)
        new = make_node()
        new["status"] = {"capacity": {"cpu": "2"}}
        NodeStrategy().prepare_for_status_update(new, old)
        assert new["spec"] == {"unschedulable": True}
        assert new["status"]["allocatable"] == {"cpu": "2"}

    def test_field_values(self) -> None:
        assert NodeStrategy().field_values(make_node(unschedulable=True)) == {"metadata.name": "node-1",
                                                                             "spec.unschedulable": "true"}
        assert NodeStrategy().field_values(make_node())["spec.unschedulable"] == "false"


# ---------------------------------------------------------------------------------------------
# Namespaces.
# ---------------------------------------------------------------------------------------------


def make_namespace(name: str = "team-a", **spec: Any) -> Obj:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}, "spec": spec}


class TestNamespace:
    def test_create(self) -> None:
        ns = make_namespace(finalizers=["example.com/cleanup"])
        ns["status"] = {"phase": "Terminating"}
        NamespaceStrategy().prepare_for_create(ns)
        assert ns["status"] == {"phase": "Active"}
        assert ns["spec"]["finalizers"] == ["example.com/cleanup", "kubernetes"]
        assert ns["metadata"]["labels"] == {"kubernetes.io/metadata.name": "team-a"}
        assert NamespaceStrategy().validate(ns) == []

    def test_spec_finalizers(self) -> None:
        ns = make_namespace(finalizers=["custom", "-x/y"])
        errs = full(NamespaceStrategy().validate(ns))
        assert errs[0] == ('spec.finalizers: Invalid value: "custom": name is neither a standard finalizer name nor '
                           "is it fully qualified")
        assert errs[1].startswith('spec.finalizers: Invalid value: "-x/y": prefix part a lowercase RFC 1123')

    def test_update_keeps_finalizers_and_status_and_label(self) -> None:
        old = make_namespace()
        NamespaceStrategy().prepare_for_create(old)
        new = make_namespace(finalizers=[])
        new["metadata"]["labels"] = {"kubernetes.io/metadata.name": "forged", "x": "y"}
        new["status"] = {"phase": "Terminating"}
        NamespaceStrategy().prepare_for_update(new, old)
        assert new["spec"]["finalizers"] == ["kubernetes"]
        assert new["status"] == {"phase": "Active"}
        assert new["metadata"]["labels"] == {"kubernetes.io/metadata.name": "team-a", "x": "y"}

    def test_finalize_changes_only_finalizers(self) -> None:
        old = make_namespace()
        NamespaceStrategy().prepare_for_create(old)
        new = make_namespace(finalizers=[])
        new["metadata"]["labels"] = {"x": "y"}
        NamespaceStrategy().prepare_for_finalize(new, old)
        assert new["spec"] == {"finalizers": []}
        assert new["metadata"] == old["metadata"]

    def test_status_phase(self) -> None:
        old = make_namespace()
        NamespaceStrategy().prepare_for_create(old)
        new = copy.deepcopy(old)
        new["status"] = {"phase": "Terminating"}
        assert full(NamespaceStrategy().validate_update(new, old)) == [
            "status.Phase: Invalid value: \"Terminating\": may only be 'Active' if `deletionTimestamp` is empty"]
        new["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
        assert NamespaceStrategy().validate_update(new, old) == []
        deleting = copy.deepcopy(new)
        new["status"] = {"phase": "Active"}
        assert full(NamespaceStrategy().validate_update(new, deleting)) == [
            "status.Phase: Invalid value: \"Active\": may only be 'Terminating' if `deletionTimestamp` is not empty"]

    def test_unchanged_status_is_not_revalidated(self) -> None:
        """A main-resource update of a namespace being deleted keeps whatever status it has."""
        old = make_namespace()
        NamespaceStrategy().prepare_for_create(old)
        old["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
        assert NamespaceStrategy().validate_update(copy.deepcopy(old), old) == []

    def test_field_values(self) -> None:
        ns = make_namespace()
        NamespaceStrategy().prepare_for_create(ns)
        assert NamespaceStrategy().field_values(ns) == {"metadata.name": "team-a", "name": "team-a",
                                                        "status.phase": "Active"}


# ---------------------------------------------------------------------------------------------
# Events and Leases.
# ---------------------------------------------------------------------------------------------


def make_event(namespace: str = "default", **fields: Any) -> Obj:
    fields.setdefault("involvedObject", {"kind": "Pod", "namespace": namespace, "name": "p", "uid": "u1"})
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "p.1", "namespace": namespace}, **fields}


class TestEvent:
    def test_valid(self) -> None:
        assert EventStrategy().validate(make_event(reason="Scheduled")) == []
        node_event = make_event(involvedObject={"kind": "Node", "name": "node-1"})
        assert EventStrategy().validate(node_event) == []

    def test_involved_object_required(self) -> None:
        event = make_event()
        del event["involvedObject"]
        assert full(EventStrategy().validate(event)) == ["involvedObject: Required value"]

    def test_namespace_must_match(self) -> None:
        event = make_event(involvedObject={"kind": "Pod", "namespace": "other", "name": "p"})
        assert full(EventStrategy().validate(event)) == [
            'involvedObject.namespace: Invalid value: "other": does not match event.namespace']
        cluster_scoped_elsewhere = make_event(namespace="team-a", involvedObject={"kind": "Node", "name": "n"})
        assert len(EventStrategy().validate(cluster_scoped_elsewhere)) == 1

    def test_new_style_events(self) -> None:
        event = make_event(eventTime="2024-01-01T00:00:00.000000Z", reason="x" * 129)
        assert full(EventStrategy().validate(event)) == [
            "reportingComponent: Required value",
            'reportingComponent: Invalid value: "": name part must be non-empty',
            f'reportingComponent: Invalid value: "": {QNAME_NAME_MSG}',
            "reportingInstance: Required value",
            "action: Required value",
            'reason: Invalid value: "": can have at most 128 characters',
        ]
        ok = make_event(eventTime="t", reportingComponent="kubelet", reportingInstance="n1", action="Pull",
                        reason="Pulled")
        assert EventStrategy().validate(ok) == []

    def test_field_values(self) -> None:
        event = make_event(reason="Started", type="Normal", source={"component": "kubelet"})
        values = EventStrategy().field_values(event)
        assert values["involvedObject.kind"] == "Pod"
        assert values["involvedObject.uid"] == "u1"
        assert values["involvedObject.fieldPath"] == ""
        assert (values["reason"], values["type"], values["source"]) == ("Started", "Normal", "kubelet")
        assert values["metadata.namespace"] == "default"
        assert EventStrategy().field_values(make_event(reportingComponent="sched"))["source"] == "sched"
        assert not EventStrategy().has_status_subresource


class TestLease:
    def test_valid(self) -> None:
        lease = {"metadata": {"name": "l"}, "spec": {"holderIdentity": "me", "leaseDurationSeconds": 15,
                                                     "leaseTransitions": 0}}
        assert LeaseStrategy().validate(lease) == []
        assert LeaseStrategy().validate({"metadata": {"name": "l"}}) == []

    def test_invalid(self) -> None:
        lease = {"spec": {"leaseDurationSeconds": 0, "leaseTransitions": -1, "preferredHolder": "x"}}
        assert full(LeaseStrategy().validate(lease)) == [
            "spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0",
            "spec.leaseTransitions: Invalid value: -1: must be greater than or equal to 0",
            "spec.preferredHolder: Forbidden: may only be specified if `strategy` is defined",
        ]

    def test_strategy(self) -> None:
        assert LeaseStrategy().validate({"spec": {"strategy": "OldestEmulationVersion", "preferredHolder": "x"}}) == []
        assert LeaseStrategy().validate({"spec": {"strategy": "example.com/mine"}}) == []
        assert full(LeaseStrategy().validate({"spec": {"strategy": "Newest"}})) == [
            'spec.strategy: Unsupported value: "Newest": supported values: "OldestEmulationVersion"']


# ---------------------------------------------------------------------------------------------
# The table.
# ---------------------------------------------------------------------------------------------


class TestRegistry:
    def test_keys(self) -> None:
        assert set(STRATEGIES) == {"/namespaces", "/nodes", "/pods", "/events", "/serviceaccounts", "/services",
                                   "/endpoints", "/configmaps", "/secrets", "/persistentvolumes",
                                   "/persistentvolumeclaims", "storage.k8s.io/storageclasses",
                                   "discovery.k8s.io/endpointslices",
                                   "apps/deployments", "apps/daemonsets", "apps/controllerrevisions",
                                   "apps/statefulsets",
                                   "batch/jobs", "batch/cronjobs", "policy/poddisruptionbudgets",
                                   "apps/replicasets", "coordination.k8s.io/leases",
                                   "rbac.authorization.k8s.io/clusterroles",
                                   "rbac.authorization.k8s.io/clusterrolebindings",
                                   "rbac.authorization.k8s.io/roles", "rbac.authorization.k8s.io/rolebindings",
                                   "admissionregistration.k8s.io/mutatingwebhookconfigurations",
                                   "admissionregistration.k8s.io/validatingwebhookconfigurations",
                                   "authorization.k8s.io/selfsubjectaccessreviews",
                                   "authorization.k8s.io/selfsubjectrulesreviews",
                                   "authorization.k8s.io/subjectaccessreviews",
                                   "autoscaling/horizontalpodautoscalers",
                                   "scheduling.k8s.io/priorityclasses", "/resourcequotas", "/limitranges",
                                   "/replicationcontrollers",
                                   "networking.k8s.io/ingresses", "networking.k8s.io/ingressclasses"}
        assert isinstance(strategy_for("", "pods"), PodStrategy)
        assert type(strategy_for("x", "nothing")) is Strategy

    def test_status_subresources_agree_with_the_resource_table(self) -> None:
        resources = pytest.importorskip("machinery.api.resources")
        for info in resources.RESOURCES:
            strategy = STRATEGIES.get(f"{info.group}/{info.plural}")
            if strategy is None:
                continue
            assert strategy.has_status_subresource == ("status" in info.subresources), info.plural

    def test_cluster_scoped_kinds_select_no_namespace(self) -> None:
        assert "metadata.namespace" not in NodeStrategy().field_values(make_node())
        assert "metadata.namespace" not in NamespaceStrategy().field_values(make_namespace())


def test_a_deleted_namespace_is_looked_up_live_for_the_ttl_after_its_delete() -> None:
    """The watch cache may still show a namespace Active right after its DELETE: creates in it must read
    storage for FORCE_LIVE_LOOKUP_TTL seconds (upstream NamespaceLifecycle's forceLiveLookupCache)."""
    strategy = NamespaceStrategy()
    ns = {"metadata": {"name": "doomed"}, "spec": {"finalizers": ["kubernetes"]}}
    assert not strategy.recently_deleted("doomed")
    strategy.prepare_for_delete(ns)
    assert ns["status"]["phase"] == "Terminating"
    assert strategy.recently_deleted("doomed")
    assert not strategy.recently_deleted("other")
    later = time.monotonic() + FORCE_LIVE_LOOKUP_TTL + 1
    assert not strategy.recently_deleted("doomed", now=later)
    assert not strategy.recently_deleted("doomed")  # forgotten once expired
