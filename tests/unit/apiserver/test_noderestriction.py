"""NodeRestriction on Node objects without processes (upstream: plugin/pkg/admission/noderestriction/
admission_test.go): which labels a kubelet may set, taints after registration, config source."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from apiserver import errors
from apiserver.admission.interfaces import AdmissionAttributes
from apiserver.admission.noderestriction import forbidden_labels, modified_labels, node_restriction
from machinery.api.resources import resource_for
from machinery.nodelabels import is_kubelet_label

NODES: Any = SimpleNamespace(info=resource_for("", "nodes"))


def node(labels: dict[str, str] | None = None, taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
    spec = {"taints": taints} if taints is not None else {}
    return {"metadata": {"name": "n1", "labels": labels or {}}, "spec": spec}


def admit(operation: str, new: dict[str, Any] | None, old: dict[str, Any] | None, name: str = "n1") -> None:
    node_restriction(AdmissionAttributes(operation, NODES, None, name, None, new, old, None, False), "n1")


def refusal(operation: str, new: dict[str, Any] | None, old: dict[str, Any] | None) -> str:
    with pytest.raises(errors.ApiError) as e:
        admit(operation, new, old)
    assert e.value.code == 403 and e.value.reason == "Forbidden"
    return e.value.message


@pytest.mark.parametrize("label", ["kubernetes.io/hostname", "kubernetes.io/os", "kubernetes.io/arch",
                                   "beta.kubernetes.io/os", "topology.kubernetes.io/zone",
                                   "node.kubernetes.io/instance-type", "node.kubernetes.io/windows-build",
                                   "kubelet.kubernetes.io/anything", "x.node.kubernetes.io/y"])
def test_kubelet_labels(label: str) -> None:
    assert is_kubelet_label(label) and forbidden_labels({label}) == []


@pytest.mark.parametrize("label", ["node-role.kubernetes.io/control-plane", "node-restriction.kubernetes.io/x",
                                   "a.node-restriction.kubernetes.io/x", "kubernetes.io/foo", "k8s.io/bar",
                                   "beta.kubernetes.io/fluentd"])
def test_forbidden_labels(label: str) -> None:
    assert forbidden_labels({label}) == [label]


def test_other_labels_are_the_kubelets_own_business() -> None:
    assert forbidden_labels({"example.com/rack", "plain"}) == []
    assert modified_labels({"a": "1", "b": "2"}, {"a": "1", "b": "3", "c": "4"}) == {"b", "c"}


def test_create() -> None:
    admit("CREATE", node({"kubernetes.io/hostname": "n1"}, [{"key": "k", "effect": "NoSchedule"}]), None)
    assert refusal("CREATE", node({"node-role.kubernetes.io/master": "", "kubernetes.io/x": "1"}), None) == (
        'nodes "n1" is forbidden: node "n1" is not allowed to set the following labels: kubernetes.io/x, '
        "node-role.kubernetes.io/master")
    with_source = node()
    with_source["spec"]["configSource"] = {"configMap": {"name": "c"}}
    assert "configSource" in refusal("CREATE", with_source, None)


def test_update() -> None:
    old = node({"kubernetes.io/hostname": "n1", "node-role.kubernetes.io/worker": ""},
               [{"key": "k", "effect": "NoSchedule"}])
    admit("UPDATE", node({"kubernetes.io/hostname": "n1", "node-role.kubernetes.io/worker": "", "mine": "x"},
                         [{"key": "k", "effect": "NoSchedule"}]), old)
    assert refusal("UPDATE", node({"kubernetes.io/hostname": "n1"}, [{"key": "k", "effect": "NoSchedule"}]),
                   old) == 'nodes "n1" is forbidden: is not allowed to modify labels: node-role.kubernetes.io/worker'
    assert refusal("UPDATE", node(old["metadata"]["labels"], []), old) == (
        'nodes "n1" is forbidden: node "n1" is not allowed to modify taints')
    admit("UPDATE", node(), {"metadata": {"name": "n1"}, "spec": {"taints": []}})  # none and empty are the same


def test_another_node() -> None:
    with pytest.raises(errors.ApiError, match='node "n1" is not allowed to modify node "n2"'):
        admit("UPDATE", node(), node(), name="n2")


def test_kubelet_refuses_node_labels_it_could_not_register_with(capsys: pytest.CaptureFixture[str]) -> None:
    from kubelet.__main__ import parse_args

    args = parse_args(["--node-labels", "kubernetes.io/os=linux,node.kubernetes.io/pool=a,example.com/rack=1"])
    assert args.node_labels["example.com/rack"] == "1"
    with pytest.raises(SystemExit):
        parse_args(["--node-labels", "node-role.kubernetes.io/worker=,kubernetes.io/x=1"])
    assert ("unknown 'kubernetes.io' or 'k8s.io' labels specified with --node-labels: "
            "[kubernetes.io/x node-role.kubernetes.io/worker]") in capsys.readouterr().err
