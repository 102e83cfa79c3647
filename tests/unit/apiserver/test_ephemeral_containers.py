"""pods/ephemeralcontainers: the strategy's preparation and upstream's validation
(pkg/apis/core/validation ValidatePodEphemeralContainersUpdate, validateEphemeralContainers;
pkg/registry/core/pod/strategy.go podEphemeralContainersStrategy), as pure logic."""

from __future__ import annotations

import copy
from typing import Any

from apiserver.registry.pod import PodStrategy, default_pod, validate_pod_template_spec
from machinery.types import Obj

STRATEGY = PodStrategy()


def pod(*ephemeral: Obj, annotations: dict[str, str] | None = None) -> Obj:
    obj: Obj = {"metadata": {"name": "web", "namespace": "default", "uid": "u1", "resourceVersion": "7",
                             "annotations": annotations or {}},
                "spec": {"containers": [{"name": "app", "image": "nginx"}],
                         "initContainers": [{"name": "setup", "image": "busybox"}]},
                "status": {"phase": "Running"}}
    if ephemeral:
        obj["spec"]["ephemeralContainers"] = list(ephemeral)
    default_pod(obj)
    return obj


def debugger(name: str = "debugger", **extra: Any) -> Obj:
    return {"name": name, "image": "busybox:1.35", "stdin": True, "tty": True, **extra}


def update(new: Obj, old: Obj) -> list[str]:
    """The subresource write as the store runs it: prepare, then validate(new) and the subresource check."""
    new = copy.deepcopy(new)
    STRATEGY.prepare_for_subresource_update("ephemeralcontainers", new, old)
    errs = STRATEGY.validate(new) + STRATEGY.validate_subresource_update("ephemeralcontainers", new, old)
    return [e.full() for e in errs]


def test_adding_one_is_valid_and_defaulted() -> None:
    old = pod()
    new = copy.deepcopy(old)
    new["spec"]["ephemeralContainers"] = [debugger(targetContainerName="app")]
    assert update(new, old) == []
    STRATEGY.prepare_for_subresource_update("ephemeralcontainers", new, old)
    added = new["spec"]["ephemeralContainers"][0]
    assert added["imagePullPolicy"] == "IfNotPresent"
    assert added["terminationMessagePolicy"] == "File"
    assert "resources" not in added


def test_only_ephemeral_containers_change_through_the_subresource() -> None:
    old = pod()
    new = copy.deepcopy(old)
    new["spec"]["ephemeralContainers"] = [debugger()]
    new["spec"]["containers"][0]["image"] = "evil"
    new["metadata"]["labels"] = {"x": "y"}
    new["status"] = {"phase": "Failed"}
    STRATEGY.prepare_for_subresource_update("ephemeralcontainers", new, old)
    assert new["spec"]["containers"][0]["image"] == "nginx"
    assert "labels" not in new["metadata"]
    assert new["status"] == old["status"]
    assert new["spec"]["ephemeralContainers"][0]["name"] == "debugger"


def test_removing_one_is_forbidden() -> None:
    old = pod(debugger())
    new = pod()
    assert update(new, old) == ['spec.ephemeralContainers: Forbidden: existing ephemeral containers "debugger" '
                                'may not be removed\n']


def test_changing_one_is_forbidden() -> None:
    old = pod(debugger())
    new = copy.deepcopy(old)
    new["spec"]["ephemeralContainers"][0]["image"] = "busybox:1.36"
    errs = update(new, old)
    assert len(errs) == 1
    assert errs[0].startswith('spec.ephemeralContainers[debugger]: Forbidden: existing ephemeral containers '
                              '"debugger" may not be changed\n')
    assert "busybox:1.36" in errs[0]


def test_names_are_unique_across_every_kind_of_container() -> None:
    old = pod()
    for clash in ("app", "setup"):
        new = copy.deepcopy(old)
        new["spec"]["ephemeralContainers"] = [debugger(clash)]
        assert update(new, old) == [f'spec.ephemeralContainers[0].name: Duplicate value: "{clash}"']
    new = copy.deepcopy(old)
    new["spec"]["ephemeralContainers"] = [debugger("d"), debugger("d")]
    assert update(new, old) == ['spec.ephemeralContainers[1].name: Duplicate value: "d"']


def test_target_must_be_a_regular_or_init_container() -> None:
    old = pod(debugger("first"))
    new = copy.deepcopy(old)
    new["spec"]["ephemeralContainers"].append(debugger("second", targetContainerName="nope"))
    assert update(new, old) == ['spec.ephemeralContainers[1].targetContainerName: Not found: "nope"']
    new["spec"]["ephemeralContainers"][1]["targetContainerName"] = "first"  # another ephemeral one
    assert update(new, old) == ['spec.ephemeralContainers[1].targetContainerName: Not found: "first"']


def test_ports_probes_resources_lifecycle_cannot_be_set() -> None:
    old = pod()
    new = copy.deepcopy(old)
    new["spec"]["ephemeralContainers"] = [debugger(
        ports=[{"containerPort": 80}], readinessProbe={"exec": {"command": ["true"]}},
        resources={"limits": {"cpu": "1"}}, lifecycle={"preStop": {"exec": {"command": ["true"]}}},
        volumeMounts=[{"name": "v", "mountPath": "/v", "subPath": "x"}])]
    new["spec"]["volumes"] = old["spec"]["volumes"] = [{"name": "v", "emptyDir": {}}]
    fields = [e.split(": Forbidden")[0] for e in update(new, old) if "Forbidden: cannot be set for an Ephemeral "
              "Container" in e]
    assert sorted(fields) == ["spec.ephemeralContainers[0].lifecycle", "spec.ephemeralContainers[0].ports",
                              "spec.ephemeralContainers[0].readinessProbe", "spec.ephemeralContainers[0].resources",
                              "spec.ephemeralContainers[0].volumeMounts[0].subPath"]


def test_empty_resources_are_allowed() -> None:
    old = pod()
    new = copy.deepcopy(old)
    new["spec"]["ephemeralContainers"] = [debugger(resources={})]
    assert update(new, old) == []


def test_static_pods_take_none() -> None:
    old = pod(annotations={"kubernetes.io/config.mirror": "abc"})
    new = copy.deepcopy(old)
    new["spec"]["ephemeralContainers"] = [debugger()]
    assert update(new, old) == [": Forbidden: static pods do not support ephemeral containers"]


def test_not_on_create_nor_in_templates_nor_through_a_plain_update() -> None:
    created = pod(debugger())
    assert [e.full() for e in STRATEGY.validate_create(created)] == \
        ["spec.ephemeralContainers: Forbidden: cannot be set on create"]
    template = {"metadata": {}, "spec": copy.deepcopy(created["spec"])}
    assert "spec.template.spec.ephemeralContainers: Forbidden: ephemeral containers not allowed in pod template" in \
        [e.full() for e in validate_pod_template_spec(template, "spec.template")]
    old = pod()
    errs = [e.full() for e in STRATEGY.validate_update(created, old)]
    assert errs and errs[0].startswith("spec: Forbidden: pod updates may not change fields other than")
