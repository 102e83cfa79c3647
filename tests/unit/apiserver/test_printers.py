"""Table printers: columns and cells as upstream's pkg/printers/internalversion renders them."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from apiserver.printers import column_definitions, table_for

NOW = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)


def ago(seconds: float) -> str:
    return (NOW - timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def cells(resource: str, obj: dict[str, Any]) -> list[Any]:
    table = table_for(resource, [obj], now=NOW)
    (row,) = table["rows"]
    assert len(row["cells"]) == len(table["columnDefinitions"])
    return row["cells"]


def names(resource: str) -> list[tuple[str, int]]:
    return [(c["name"], c["priority"]) for c in column_definitions(resource)]


# --------------------------------------------------------------------------------------------
# Pods
# --------------------------------------------------------------------------------------------


def pod(
    name: str = "nginx-7c5ddbdf54-x8f2k",
    *,
    phase: str = "Running",
    created: float = 300,
    containers: list[dict[str, Any]] | None = None,
    statuses: list[dict[str, Any]] | None = None,
    init_containers: list[dict[str, Any]] | None = None,
    init_statuses: list[dict[str, Any]] | None = None,
    conditions: list[dict[str, Any]] | None = None,
    node: str | None = "node-1",
    ip: str | None = "10.244.1.5",
    **extra: Any,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": containers or [{"name": "nginx", "image": "nginx:1.25"}]}
    if init_containers:
        spec["initContainers"] = init_containers
    if node:
        spec["nodeName"] = node
    status: dict[str, Any] = {"phase": phase}
    if statuses is not None:
        status["containerStatuses"] = statuses
    if init_statuses is not None:
        status["initContainerStatuses"] = init_statuses
    if conditions is not None:
        status["conditions"] = conditions
    if ip:
        status["podIP"] = ip
        status["podIPs"] = [{"ip": ip}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": "6a3b1e5c-0000-4000-8000-000000000001",
            "resourceVersion": "1234",
            "creationTimestamp": ago(created),
            "labels": {"app": "nginx"},
        },
        "spec": spec,
        "status": status,
    }


def running(name: str = "nginx", *, ready: bool = True, restarts: int = 0, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "image": "nginx:1.25",
        "ready": ready,
        "started": True,
        "restartCount": restarts,
        "state": {"running": {"startedAt": ago(290)}},
        **extra,
    }


def waiting(name: str, reason: str, *, restarts: int = 0, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "image": "busybox",
        "ready": False,
        "restartCount": restarts,
        "state": {"waiting": {"reason": reason}},
        **extra,
    }


def terminated(
    name: str, *, exit_code: int = 0, reason: str = "", signal: int = 0, restarts: int = 0
) -> dict[str, Any]:
    term: dict[str, Any] = {"exitCode": exit_code, "startedAt": ago(100), "finishedAt": ago(90)}
    if reason:
        term["reason"] = reason
    if signal:
        term["signal"] = signal
    return {
        "name": name,
        "image": "busybox",
        "ready": False,
        "restartCount": restarts,
        "state": {"terminated": term},
    }


READY_CONDITIONS = [
    {"type": "Initialized", "status": "True"},
    {"type": "Ready", "status": "True"},
    {"type": "ContainersReady", "status": "True"},
    {"type": "PodScheduled", "status": "True"},
]


def test_pod_columns() -> None:
    assert names("pods") == [
        ("Name", 0),
        ("Ready", 0),
        ("Status", 0),
        ("Restarts", 0),
        ("Age", 0),
        ("IP", 1),
        ("Node", 1),
        ("Nominated Node", 1),
        ("Readiness Gates", 1),
    ]
    name, _ready, _status, restarts, *_ = column_definitions("pods")
    assert name["format"] == "name" and name["type"] == "string"
    assert restarts["type"] == "string"
    assert all(
        set(c) == {"name", "type", "format", "description", "priority"} for c in column_definitions("pods")
    )


def test_running_pod() -> None:
    p = pod(statuses=[running()], conditions=READY_CONDITIONS)
    assert cells("pods", p) == [
        "nginx-7c5ddbdf54-x8f2k",
        "1/1",
        "Running",
        "0",
        "5m",
        "10.244.1.5",
        "node-1",
        "<none>",
        "<none>",
    ]


def test_crashloop_pod_with_restarts() -> None:
    status = waiting(
        "app",
        "CrashLoopBackOff",
        restarts=5,
        lastState={"terminated": {"exitCode": 1, "reason": "Error", "finishedAt": ago(125)}},
    )
    p = pod("crashy-5d8f7b9c4-abcde", created=600, statuses=[status])
    assert cells("pods", p)[:5] == [
        "crashy-5d8f7b9c4-abcde",
        "0/1",
        "CrashLoopBackOff",
        "5 (2m5s ago)",
        "10m",
    ]


def test_restarts_without_last_termination_time_is_bare_count() -> None:
    p = pod(statuses=[running(restarts=2)])
    assert cells("pods", p)[3] == "2"


def test_restart_ago_uses_the_most_recent_termination_over_containers() -> None:
    c1 = running("a", restarts=1, lastState={"terminated": {"exitCode": 1, "finishedAt": ago(3 * 3600)}})
    c2 = running("b", restarts=2, lastState={"terminated": {"exitCode": 1, "finishedAt": ago(40)}})
    p = pod(containers=[{"name": "a"}, {"name": "b"}], statuses=[c1, c2], conditions=READY_CONDITIONS)
    assert cells("pods", p)[1:4] == ["2/2", "Running", "3 (40s ago)"]


def test_image_pull_and_container_creating() -> None:
    assert (
        cells("pods", pod(phase="Pending", statuses=[waiting("nginx", "ErrImagePull")]))[2] == "ErrImagePull"
    )
    assert (
        cells("pods", pod(phase="Pending", statuses=[waiting("nginx", "ImagePullBackOff")]))[2]
        == "ImagePullBackOff"
    )
    p = pod(phase="Pending", statuses=[waiting("nginx", "ContainerCreating")], ip=None)
    assert cells("pods", p) == [
        "nginx-7c5ddbdf54-x8f2k",
        "0/1",
        "ContainerCreating",
        "0",
        "5m",
        "<none>",
        "node-1",
        "<none>",
        "<none>",
    ]


def test_first_container_reason_wins() -> None:
    # upstream walks container statuses from last to first, so the first one's reason sticks
    p = pod(
        containers=[{"name": "a"}, {"name": "b"}],
        statuses=[waiting("a", "CrashLoopBackOff"), waiting("b", "ErrImagePull")],
    )
    assert cells("pods", p)[1:3] == ["0/2", "CrashLoopBackOff"]


def test_terminated_containers() -> None:
    assert (
        cells("pods", pod(phase="Failed", statuses=[terminated("nginx", exit_code=1, reason="Error")]))[2]
        == "Error"
    )
    assert (
        cells("pods", pod(phase="Failed", statuses=[terminated("nginx", exit_code=137, signal=9)]))[2]
        == "Signal:9"
    )
    assert cells("pods", pod(phase="Failed", statuses=[terminated("nginx", exit_code=2)]))[2] == "ExitCode:2"
    assert (
        cells("pods", pod(phase="Succeeded", statuses=[terminated("nginx", reason="Completed")]))[2]
        == "Completed"
    )


def test_completed_container_alongside_running_one() -> None:
    containers = [{"name": "job"}, {"name": "web"}]
    statuses = [terminated("job", reason="Completed"), running("web")]
    ready = pod(containers=containers, statuses=statuses, conditions=READY_CONDITIONS)
    assert cells("pods", ready)[1:3] == ["1/2", "Running"]
    not_ready = pod(
        containers=containers,
        statuses=statuses,
        conditions=[{"type": "Ready", "status": "False", "reason": "ContainersNotReady"}],
    )
    assert cells("pods", not_ready)[1:3] == ["1/2", "NotReady"]


def test_pod_status_reason_shows_when_no_container_overrides() -> None:
    p = pod(phase="Failed", statuses=[], **{})
    p["status"]["reason"] = "Evicted"
    assert cells("pods", p)[2] == "Evicted"


def test_terminating_pod() -> None:
    p = pod(statuses=[running()], conditions=READY_CONDITIONS)
    p["metadata"]["deletionTimestamp"] = ago(3)
    p["metadata"]["deletionGracePeriodSeconds"] = 30
    assert cells("pods", p)[:5] == ["nginx-7c5ddbdf54-x8f2k", "1/1", "Terminating", "0", "5m"]


def test_deleted_pod_in_terminal_phase_keeps_its_status() -> None:
    p = pod(phase="Succeeded", statuses=[terminated("nginx", reason="Completed")])
    p["metadata"]["deletionTimestamp"] = ago(3)
    assert cells("pods", p)[2] == "Completed"


def test_node_lost_pod() -> None:
    p = pod(statuses=[running()], conditions=READY_CONDITIONS)
    p["status"]["reason"] = "NodeLost"
    assert cells("pods", p)[2] == "NodeLost"
    p["metadata"]["deletionTimestamp"] = ago(1)
    assert cells("pods", p)[2] == "Unknown"


def test_pending_unscheduled_pod() -> None:
    p = pod(
        "web-0",
        phase="Pending",
        created=3,
        node=None,
        ip=None,
        conditions=[
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": "0/1 nodes are available: 1 Insufficient cpu.",
            }
        ],
    )
    assert cells("pods", p) == ["web-0", "0/1", "Pending", "0", "3s", "<none>", "<none>", "<none>", "<none>"]


def test_nominated_node_and_scheduling_gated() -> None:
    p = pod("prio", phase="Pending", node=None, ip=None)
    p["status"]["nominatedNodeName"] = "node-2"
    assert cells("pods", p)[5:] == ["<none>", "<none>", "node-2", "<none>"]
    gated = pod(
        "gated",
        phase="Pending",
        node=None,
        ip=None,
        conditions=[{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}],
    )
    assert cells("pods", gated)[2] == "SchedulingGated"


def test_init_container_pod() -> None:
    inits = [{"name": "init-db", "image": "busybox"}, {"name": "init-cache", "image": "busybox"}]
    first_running = pod(
        "myapp",
        phase="Pending",
        init_containers=inits,
        init_statuses=[
            {
                "name": "init-db",
                "ready": False,
                "restartCount": 0,
                "state": {"running": {"startedAt": ago(10)}},
            },
            waiting("init-cache", "PodInitializing"),
        ],
        statuses=[waiting("nginx", "PodInitializing")],
        conditions=[{"type": "Initialized", "status": "False", "reason": "ContainersNotInitialized"}],
    )
    assert cells("pods", first_running)[:4] == ["myapp", "0/1", "Init:0/2", "0"]

    second = copy.deepcopy(first_running)
    second["status"]["initContainerStatuses"][0] = terminated("init-db", reason="Completed")
    second["status"]["initContainerStatuses"][1] = {
        "name": "init-cache",
        "ready": False,
        "restartCount": 0,
        "state": {"running": {"startedAt": ago(5)}},
    }
    assert cells("pods", second)[2] == "Init:1/2"

    crashing = copy.deepcopy(first_running)
    crashing["status"]["initContainerStatuses"][0] = waiting(
        "init-db",
        "CrashLoopBackOff",
        restarts=3,
        lastState={"terminated": {"exitCode": 1, "reason": "Error", "finishedAt": ago(30)}},
    )
    assert cells("pods", crashing)[1:4] == ["0/1", "Init:CrashLoopBackOff", "3 (30s ago)"]

    failed = copy.deepcopy(first_running)
    failed["status"]["initContainerStatuses"][0] = terminated("init-db", exit_code=1, reason="Error")
    assert cells("pods", failed)[2] == "Init:Error"
    failed["status"]["initContainerStatuses"][0] = terminated("init-db", exit_code=3)
    assert cells("pods", failed)[2] == "Init:ExitCode:3"
    failed["status"]["initContainerStatuses"][0] = terminated("init-db", exit_code=137, signal=9)
    assert cells("pods", failed)[2] == "Init:Signal:9"

    done = copy.deepcopy(first_running)
    done["status"]["initContainerStatuses"] = [
        terminated("init-db", reason="Completed"),
        terminated("init-cache", reason="Completed"),
    ]
    done["status"]["conditions"] = [{"type": "Initialized", "status": "True"}]
    assert cells("pods", done)[2] == "PodInitializing"
    done["status"]["containerStatuses"] = [running()]
    assert cells("pods", done)[1:4] == ["1/1", "Pending", "0"]  # the phase, until the kubelet says Running
    done["status"]["phase"] = "Running"
    done["status"]["conditions"] = READY_CONDITIONS
    assert cells("pods", done)[1:4] == ["1/1", "Running", "0"]


def test_sidecar_init_container_counts_toward_ready() -> None:
    p = pod(
        "with-sidecar",
        init_containers=[{"name": "proxy", "image": "envoy", "restartPolicy": "Always"}],
        init_statuses=[
            running(
                "proxy",
                restarts=1,
                lastState={"terminated": {"exitCode": 1, "finishedAt": ago(60)}},
            )
        ],
        statuses=[running()],
        conditions=READY_CONDITIONS,
    )
    assert cells("pods", p)[1:4] == ["2/2", "Running", "1 (60s ago)"]


def test_readiness_gates() -> None:
    p = pod(
        statuses=[running()], conditions=[*READY_CONDITIONS, {"type": "example.com/lb", "status": "True"}]
    )
    p["spec"]["readinessGates"] = [{"conditionType": "example.com/lb"}, {"conditionType": "example.com/dns"}]
    assert cells("pods", p)[8] == "1/2"


def test_pod_ip_from_pod_ips() -> None:
    p = pod(statuses=[running()], ip=None)
    p["status"]["podIPs"] = [{"ip": "fd00::5"}, {"ip": "10.0.0.5"}]
    assert cells("pods", p)[5] == "fd00::5"


def test_pod_row_conditions() -> None:
    table = table_for(
        "pods",
        [
            pod("ok", phase="Succeeded", statuses=[terminated("nginx", reason="Completed")]),
            pod("bad", phase="Failed", statuses=[terminated("nginx", exit_code=1, reason="Error")]),
            pod("run", statuses=[running()]),
        ],
        now=NOW,
    )
    ok, bad, run = table["rows"]
    assert ok["conditions"] == [
        {
            "type": "Completed",
            "status": "True",
            "reason": "Succeeded",
            "message": "The pod has completed successfully.",
        }
    ]
    assert bad["conditions"] == [
        {"type": "Completed", "status": "True", "reason": "Failed", "message": "The pod failed."}
    ]
    assert "conditions" not in run


def test_missing_creation_timestamp_is_unknown_age() -> None:
    p = pod(statuses=[running()])
    del p["metadata"]["creationTimestamp"]
    assert cells("pods", p)[4] == "<unknown>"


def test_fractional_and_nanosecond_timestamps() -> None:
    p = pod(statuses=[running()])
    p["metadata"]["creationTimestamp"] = "2024-05-01T11:56:39.999999999Z"
    assert cells("pods", p)[4] == "3m20s"


# --------------------------------------------------------------------------------------------
# Deployments and ReplicaSets
# --------------------------------------------------------------------------------------------


def deployment(**spec_extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "nginx",
            "namespace": "default",
            "creationTimestamp": ago(2 * 86400 + 3 * 3600 + 59),
        },
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "nginx"}},
            "template": {
                "metadata": {"labels": {"app": "nginx"}},
                "spec": {
                    "containers": [
                        {"name": "nginx", "image": "nginx:1.25"},
                        {"name": "sidecar", "image": "busybox:1.36"},
                    ]
                },
            },
            **spec_extra,
        },
        "status": {"replicas": 3, "updatedReplicas": 3, "readyReplicas": 2, "availableReplicas": 2},
    }


def test_deployment_columns() -> None:
    assert names("deployments") == [
        ("Name", 0),
        ("Ready", 0),
        ("Up-to-date", 0),
        ("Available", 0),
        ("Age", 0),
        ("Containers", 1),
        ("Images", 1),
        ("Selector", 1),
    ]


def test_deployment() -> None:
    assert cells("deployments", deployment()) == [
        "nginx",
        "2/3",
        3,
        2,
        "2d3h",
        "nginx,sidecar",
        "nginx:1.25,busybox:1.36",
        "app=nginx",
    ]


def test_deployment_fresh_without_status() -> None:
    d = deployment()
    d["status"] = {}
    assert cells("deployments", d)[1:4] == ["0/3", 0, 0]


def test_deployment_selector_expressions() -> None:
    d = deployment(
        selector={
            "matchLabels": {"tier": "web", "app": "nginx"},
            "matchExpressions": [
                {"key": "env", "operator": "In", "values": ["prod", "canary"]},
                {"key": "track", "operator": "NotIn", "values": ["legacy"]},
                {"key": "owner", "operator": "Exists"},
                {"key": "debug", "operator": "DoesNotExist"},
            ],
        }
    )
    assert (
        cells("deployments", d)[7]
        == "app=nginx,!debug,env in (canary,prod),owner,tier=web,track notin (legacy)"
    )


def test_deployment_invalid_and_empty_selector() -> None:
    bad = deployment(selector={"matchExpressions": [{"key": "app", "operator": "Like", "values": ["x"]}]})
    assert cells("deployments", bad)[7] == "<invalid>"
    assert cells("deployments", deployment(selector={}))[7] == ""


def replicaset(selector: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": "nginx-7c5ddbdf54", "namespace": "default", "creationTimestamp": ago(45)},
        "spec": {
            "replicas": 3,
            "selector": selector,
            "template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:1.25"}]}},
        },
        "status": {"replicas": 3, "readyReplicas": 1, "availableReplicas": 1},
    }


def test_replicaset() -> None:
    assert names("replicasets") == [
        ("Name", 0),
        ("Desired", 0),
        ("Current", 0),
        ("Ready", 0),
        ("Age", 0),
        ("Containers", 1),
        ("Images", 1),
        ("Selector", 1),
    ]
    rs = replicaset({"matchLabels": {"app": "nginx", "pod-template-hash": "7c5ddbdf54"}})
    assert cells("replicasets", rs) == [
        "nginx-7c5ddbdf54",
        3,
        3,
        1,
        "45s",
        "nginx",
        "nginx:1.25",
        "app=nginx,pod-template-hash=7c5ddbdf54",
    ]
    assert column_definitions("replicasets")[1]["type"] == "integer"


def test_replicaset_selector_none_and_error() -> None:
    assert cells("replicasets", replicaset({}))[7] == "<none>"
    assert cells("replicasets", replicaset(None))[7] == "<none>"
    bad = {"matchExpressions": [{"key": "app", "operator": "In", "values": []}]}
    assert cells("replicasets", replicaset(bad))[7] == "<error>"
    assert cells("replicasets", replicaset({"matchLabels": {"bad key": "x"}}))[7] == "<error>"


# --------------------------------------------------------------------------------------------
# Nodes, namespaces, leases
# --------------------------------------------------------------------------------------------


def node(
    name: str, *, ready: str | None, unschedulable: bool = False, labels: dict[str, str] | None = None
) -> dict[str, Any]:
    conditions = [
        {"type": "MemoryPressure", "status": "False"},
        {"type": "DiskPressure", "status": "False"},
    ]
    if ready is not None:
        conditions.append({"type": "Ready", "status": ready, "reason": "KubeletReady"})
    obj: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "creationTimestamp": ago(12 * 86400),
            "labels": {"kubernetes.io/hostname": name, **(labels or {})},
        },
        "spec": {"podCIDR": "10.244.1.0/24"},
        "status": {
            "conditions": conditions,
            "addresses": [
                {"type": "InternalIP", "address": "172.18.0.3"},
                {"type": "Hostname", "address": name},
            ],
            "nodeInfo": {
                "kubeletVersion": "v1.30.0",
                "osImage": "Debian GNU/Linux 12 (bookworm)",
                "kernelVersion": "6.1.0-18-amd64",
                "containerRuntimeVersion": "docker://25.0.3",
            },
        },
    }
    if unschedulable:
        obj["spec"]["unschedulable"] = True
    return obj


def test_node_columns() -> None:
    assert names("nodes") == [
        ("Name", 0),
        ("Status", 0),
        ("Roles", 0),
        ("Age", 0),
        ("Version", 0),
        ("Internal-IP", 1),
        ("External-IP", 1),
        ("OS-Image", 1),
        ("Kernel-Version", 1),
        ("Container-Runtime", 1),
    ]


def test_ready_node() -> None:
    n = node("control", ready="True", labels={"node-role.kubernetes.io/control-plane": ""})
    assert cells("nodes", n) == [
        "control",
        "Ready",
        "control-plane",
        "12d",
        "v1.30.0",
        "172.18.0.3",
        "<none>",
        "Debian GNU/Linux 12 (bookworm)",
        "6.1.0-18-amd64",
        "docker://25.0.3",
    ]


def test_not_ready_unschedulable_node() -> None:
    n = node("worker-1", ready="False", unschedulable=True)
    n["status"]["addresses"].append({"type": "ExternalIP", "address": "203.0.113.7"})
    n["status"]["nodeInfo"] = {"kubeletVersion": "v1.30.0"}
    assert cells("nodes", n) == [
        "worker-1",
        "NotReady,SchedulingDisabled",
        "<none>",
        "12d",
        "v1.30.0",
        "172.18.0.3",
        "203.0.113.7",
        "<unknown>",
        "<unknown>",
        "<unknown>",
    ]


def test_node_status_unknown_and_roles() -> None:
    assert cells("nodes", node("n", ready="Unknown"))[1] == "NotReady"
    assert cells("nodes", node("n", ready=None))[1] == "Unknown"
    assert cells("nodes", node("n", ready=None, unschedulable=True))[1] == "Unknown,SchedulingDisabled"
    labels = {
        "node-role.kubernetes.io/worker": "",
        "node-role.kubernetes.io/ingress": "true",
        "node-role.kubernetes.io/": "",
        "kubernetes.io/role": "gpu",
    }
    assert cells("nodes", node("n", ready="True", labels=labels))[2] == "gpu,ingress,worker"


def test_namespace() -> None:
    assert names("namespaces") == [("Name", 0), ("Status", 0), ("Age", 0)]
    ns = {"metadata": {"name": "kube-system", "creationTimestamp": ago(90000)}, "status": {"phase": "Active"}}
    assert cells("namespaces", ns) == ["kube-system", "Active", "25h"]
    ns["status"]["phase"] = "Terminating"
    assert cells("namespaces", ns)[1] == "Terminating"


def test_lease() -> None:
    assert names("leases") == [("Name", 0), ("Holder", 0), ("Age", 0)]
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "kube-scheduler", "namespace": "kube-system", "creationTimestamp": ago(7200)},
        "spec": {"holderIdentity": "scheduler-1_8f1c", "leaseDurationSeconds": 15},
    }
    assert cells("leases", lease) == ["kube-scheduler", "scheduler-1_8f1c", "120m"]
    del lease["spec"]["holderIdentity"]
    assert cells("leases", lease)[1] == ""


# --------------------------------------------------------------------------------------------
# Events
# --------------------------------------------------------------------------------------------


def event(**extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": "nginx-abc.17c9a3f2b1e4d5f6",
            "namespace": "default",
            "creationTimestamp": ago(600),
        },
        "involvedObject": {
            "kind": "Pod",
            "namespace": "default",
            "name": "nginx-abc",
            "fieldPath": "spec.containers{nginx}",
        },
        "reason": "BackOff",
        "message": "Back-off restarting failed container nginx in pod nginx-abc_default\n",
        "source": {"component": "kubelet", "host": "node-1"},
        "firstTimestamp": ago(600),
        "lastTimestamp": ago(30),
        "count": 7,
        "type": "Warning",
        **extra,
    }


def test_event_columns_in_upstream_order() -> None:
    assert names("events") == [
        ("Last Seen", 0),
        ("Type", 0),
        ("Reason", 0),
        ("Object", 0),
        ("Subobject", 1),
        ("Source", 1),
        ("Message", 0),
        ("First Seen", 1),
        ("Count", 1),
        ("Name", 1),
    ]
    assert column_definitions("events")[9]["format"] == "name"


def test_event() -> None:
    assert cells("events", event()) == [
        "30s",
        "Warning",
        "BackOff",
        "pod/nginx-abc",
        "spec.containers{nginx}",
        "kubelet, node-1",
        "Back-off restarting failed container nginx in pod nginx-abc_default",
        "10m",
        7,
        "nginx-abc.17c9a3f2b1e4d5f6",
    ]


def test_new_style_event_with_event_time_and_series() -> None:
    ev = event(
        eventTime="2024-05-01T11:55:00.123456Z",
        reportingComponent="default-scheduler",
        reportingInstance="default-scheduler-node-1",
        involvedObject={"kind": "Pod", "namespace": "default", "name": "web-0"},
        reason="FailedScheduling",
        message="0/1 nodes are available: 1 Insufficient cpu.",
        series={"count": 4, "lastObservedTime": "2024-05-01T11:59:50.000000Z"},
    )
    for key in ("firstTimestamp", "lastTimestamp", "count", "source"):
        del ev[key]
    assert cells("events", ev)[:9] == [
        "10s",
        "Warning",
        "FailedScheduling",
        "pod/web-0",
        "",
        "default-scheduler, default-scheduler-node-1",
        "0/1 nodes are available: 1 Insufficient cpu.",
        "4m59s",
        4,
    ]


def test_singleton_event_without_count_or_last_timestamp() -> None:
    ev = event(involvedObject={"kind": "Node", "name": ""}, source={"component": "kubelet"}, type="Normal")
    del ev["count"]
    del ev["lastTimestamp"]
    assert cells("events", ev)[:9] == [
        "10m",
        "Normal",
        "BackOff",
        "node",
        "",
        "kubelet",
        "Back-off restarting failed container nginx in pod nginx-abc_default",
        "10m",
        1,
    ]


def test_events_k8s_io_shape() -> None:
    ev = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "web.1", "namespace": "default", "creationTimestamp": ago(20)},
        "eventTime": "2024-05-01T11:59:40.000000Z",
        "regarding": {"kind": "Deployment", "name": "web"},
        "reportingController": "deployment-controller",
        "reason": "ScalingReplicaSet",
        "note": "Scaled up replica set web-5d8f to 3",
        "type": "Normal",
    }
    assert cells("events", ev) == [
        "20s",
        "Normal",
        "ScalingReplicaSet",
        "deployment/web",
        "",
        "deployment-controller",
        "Scaled up replica set web-5d8f to 3",
        "20s",
        1,
        "web.1",
    ]


# --------------------------------------------------------------------------------------------
# Default printer and the Table envelope
# --------------------------------------------------------------------------------------------


def test_default_printer() -> None:
    assert names("widgets") == [("Name", 0), ("Age", 0)]
    assert column_definitions("widgets")[0]["format"] == "name"
    widget = {"metadata": {"name": "w1", "creationTimestamp": ago(400)}, "spec": {"size": 1}}
    assert cells("widgets", widget) == ["w1", "6m40s"]
    assert cells("widgets", {"metadata": {"name": "w"}}) == ["w", "<unknown>"]


def test_configmap_and_secret_columns() -> None:
    """upstream printConfigMap (NAME DATA AGE: data and binaryData keys) and printSecret (NAME TYPE DATA AGE)."""
    assert names("configmaps") == [("Name", 0), ("Data", 0), ("Age", 0)]
    cm = {"metadata": {"name": "kube-root-ca.crt", "creationTimestamp": ago(400)}, "data": {"ca.crt": "x"},
          "binaryData": {"blob": "AAE="}}
    assert cells("configmaps", cm) == ["kube-root-ca.crt", 2, "6m40s"]
    assert cells("configmaps", {"metadata": {"name": "empty", "creationTimestamp": ago(5)}}) == ["empty", 0, "5s"]
    assert names("secrets") == [("Name", 0), ("Type", 0), ("Data", 0), ("Age", 0)]
    secret = {"metadata": {"name": "tls", "creationTimestamp": ago(90)}, "type": "kubernetes.io/tls",
              "data": {"tls.crt": "eA==", "tls.key": "eQ=="}}
    assert cells("secrets", secret) == ["tls", "kubernetes.io/tls", 2, "90s"]


def test_table_envelope_with_metadata_objects() -> None:
    p = pod(statuses=[running()])
    p["metadata"]["managedFields"] = [{"manager": "kubectl", "operation": "Update"}]
    table = table_for("pods", [p], resource_version="4711", continue_token="abc", now=NOW)
    assert table["kind"] == "Table"
    assert table["apiVersion"] == "meta.k8s.io/v1"
    assert table["metadata"] == {"resourceVersion": "4711", "continue": "abc"}
    assert table["columnDefinitions"] == column_definitions("pods")
    (row,) = table["rows"]
    assert row["object"] == {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": p["metadata"],
    }
    row["object"]["metadata"]["labels"]["app"] = "changed"
    assert p["metadata"]["labels"]["app"] == "nginx"


def test_include_object_none_and_object() -> None:
    p = pod(statuses=[running()])
    none = table_for("pods", [p], include_object="None", now=NOW)
    assert "object" not in none["rows"][0]
    assert none["metadata"] == {}
    full = table_for("events", [event()], include_object="Object", now=NOW)
    assert full["rows"][0]["object"] == event()
    assert (
        table_for("pods", [p], include_object="", now=NOW)["rows"][0]["object"]["kind"]
        == "PartialObjectMetadata"
    )
    with pytest.raises(ValueError, match="includeObject"):
        table_for("pods", [p], include_object="Everything", now=NOW)


def test_empty_list_and_default_now() -> None:
    table = table_for("deployments", [])
    assert table["rows"] == []
    assert len(table["columnDefinitions"]) == 8
    fresh = pod(statuses=[running()])
    fresh["metadata"]["creationTimestamp"] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert table_for("pods", [fresh])["rows"][0]["cells"][4] in ("0s", "1s", "2s")


def test_column_definitions_are_copies() -> None:
    cols = column_definitions("pods")
    cols[0]["name"] = "Mutated"
    assert column_definitions("pods")[0]["name"] == "Name"
