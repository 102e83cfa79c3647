"""Server-side Table printers: the meta.k8s.io/v1 Table `kubectl get` asks for.

`kubectl get` sends `Accept: application/json;as=Table;v=v1;g=meta.k8s.io` and prints the rows it
gets back, so the columns and cells here are upstream's, from
k8s.io/kubernetes/pkg/printers/internalversion/printers.go: same column names, types and
priorities (priority 1 = shown only with `-o wide`), same cell computation (a pod's STATUS is
the same walk over init containers, container states and deletion as upstream's printPod).

Like upstream's apiserver (which prints with `GenerateOptions{Wide: true}`), every row carries
the wide cells too; kubectl hides the priority-1 columns unless asked for `-o wide`.

Objects are wire-form dicts (camelCase JSON). Each resource's printer is one small pure
function registered with `@_printer(resource, columns)`: adding a resource is one function.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from machinery.quantity import parse_quantity
from machinery.timeutil import human_duration, parse_rfc3339, translate_timestamp_since
from machinery.types import Obj
from machinery.validation import is_qualified_name, is_valid_label_value
from machinery.volumeutil import access_modes_short, claim_class, is_default_class, volume_class

__all__ = ["column_definitions", "table_for"]

Cell = str | int | bool
CellsFn = Callable[[Obj, datetime], list[Cell]]
RowConditionsFn = Callable[[Obj], list[dict[str, str]]]

INCLUDE_NONE = "None"
INCLUDE_METADATA = "Metadata"
INCLUDE_OBJECT = "Object"

# ---------------------------------------------------------------------------------------------
# Durations and timestamps
# ---------------------------------------------------------------------------------------------


def _later(current: datetime | None, candidate: datetime | None) -> datetime | None:
    """`if current.Before(&candidate) { current = candidate }` with zero times as None."""
    if candidate is None:
        return current
    if current is None or current < candidate:
        return candidate
    return current


# ---------------------------------------------------------------------------------------------
# Small accessors
# ---------------------------------------------------------------------------------------------


def _d(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _l(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _s(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _i(value: Any, default: int = 0) -> int:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value)
    return default


def _name(obj: Obj) -> str:
    return _s(_d(obj.get("metadata")).get("name"))


def _age(obj: Obj, now: datetime) -> str:
    return translate_timestamp_since(_d(obj.get("metadata")).get("creationTimestamp"), now)


def _layout_container_cells(containers: list[Any]) -> tuple[str, str]:
    """upstream layoutContainerCells: names and images, comma-joined."""
    cs = [_d(c) for c in containers]
    return ",".join(_s(c.get("name")) for c in cs), ",".join(_s(c.get("image")) for c in cs)


def _template_containers(obj: Obj) -> list[Any]:
    return _l(_d(_d(_d(obj.get("spec")).get("template")).get("spec")).get("containers"))


# ---------------------------------------------------------------------------------------------
# Label selectors (metav1.LabelSelectorAsSelector(...).String() and metav1.FormatLabelSelector)
# ---------------------------------------------------------------------------------------------

_SELECTOR_OPS = {"In": " in ", "NotIn": " notin ", "Exists": "", "DoesNotExist": ""}


def _selector_string(selector: Any) -> str | None:
    """labels.Selector.String() of metav1.LabelSelectorAsSelector(selector); None when upstream
    would return an error. A missing selector selects nothing and an empty one everything:
    both print as ""."""
    if not isinstance(selector, dict):
        return ""
    match_labels = _d(selector.get("matchLabels"))
    expressions = _l(selector.get("matchExpressions"))
    if not match_labels and not expressions:
        return ""
    requirements: list[tuple[str, str]] = []
    for key, value in match_labels.items():
        if is_qualified_name(key) or is_valid_label_value(_s(value)):
            return None
        requirements.append((key, f"{key}={value}"))
    for raw in expressions:
        expr = _d(raw)
        key, op = _s(expr.get("key")), _s(expr.get("operator"))
        values = [_s(v) for v in _l(expr.get("values"))]
        if op not in _SELECTOR_OPS or is_qualified_name(key):
            return None
        if op in ("In", "NotIn"):
            if not values or any(is_valid_label_value(v) for v in values):
                return None
            requirements.append((key, f"{key}{_SELECTOR_OPS[op]}({','.join(sorted(values))})"))
        else:
            if values:
                return None
            requirements.append((key, key if op == "Exists" else f"!{key}"))
    requirements.sort(key=lambda r: r[0])
    return ",".join(text for _, text in requirements)


def _format_label_selector(selector: Any) -> str:
    """metav1.FormatLabelSelector: "<none>" when it selects by nothing, "<error>" when invalid."""
    text = _selector_string(selector)
    if text is None:
        return "<error>"
    return text or "<none>"


# ---------------------------------------------------------------------------------------------
# Column definitions
# ---------------------------------------------------------------------------------------------


def _col(name: str, type_: str, description: str, *, priority: int = 0, fmt: str = "") -> dict[str, Any]:
    return {"name": name, "type": type_, "format": fmt, "description": description, "priority": priority}


_NAME_DOC = (
    "Name must be unique within a namespace. Is required when creating resources, although some "
    "resources may allow a client to request the generation of an appropriate name automatically. "
    "Name is primarily intended for creation idempotence and configuration definition. Cannot be "
    "updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"
)
_CREATION_DOC = (
    "CreationTimestamp is a timestamp representing the server time when this object was created. "
    "It is not guaranteed to be set in happens-before order across separate operations. Clients "
    "may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the "
    "system. Read-only. Null for lists. More info: "
    "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"
)
_CONTAINERS_DOC = "Names of each container in the template."
_IMAGES_DOC = "Images referenced by each container in the template."
_SELECTOR_DOC = (
    "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones "
    "affected by this deployment. It must match the pod template's labels."
)

NAME_COLUMN = _col("Name", "string", _NAME_DOC, fmt="name")
AGE_COLUMN = _col("Age", "string", _CREATION_DOC)


# ---------------------------------------------------------------------------------------------
# Registry
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Printer:
    columns: tuple[dict[str, Any], ...]
    cells: CellsFn
    row_conditions: RowConditionsFn | None = None


_PRINTERS: dict[str, _Printer] = {}


def _printer(
    resource: str, columns: list[dict[str, Any]], *, row_conditions: RowConditionsFn | None = None
) -> Callable[[CellsFn], CellsFn]:
    """Register `fn(obj, now) -> cells` as the printer of `resource` (a plural, e.g. "pods")."""

    def register(fn: CellsFn) -> CellsFn:
        _PRINTERS[resource] = _Printer(tuple(columns), fn, row_conditions)
        return fn

    return register


def _default_cells(obj: Obj, now: datetime) -> list[Cell]:
    return [_name(obj), _age(obj, now)]


_DEFAULT_PRINTER = _Printer((NAME_COLUMN, AGE_COLUMN), _default_cells)


# ---------------------------------------------------------------------------------------------
# Pods
# ---------------------------------------------------------------------------------------------

_POD_COLUMNS = [
    NAME_COLUMN,
    _col("Ready", "string", "The aggregate readiness state of this pod for accepting traffic."),
    _col("Status", "string", "The aggregate status of the containers in this pod."),
    _col(
        "Restarts",
        "string",
        "The number of times the containers in this pod have been restarted and when the last "
        "container in this pod has restarted.",
    ),
    AGE_COLUMN,
    _col(
        "IP",
        "string",
        "podIP address allocated to the pod. Routable at least within the cluster. Empty if not yet "
        "allocated.",
        priority=1,
    ),
    _col(
        "Node",
        "string",
        "NodeName indicates in which node this pod is scheduled. If empty, this pod is a candidate "
        "for scheduling by the scheduler defined in schedulerName.",
        priority=1,
    ),
    _col(
        "Nominated Node",
        "string",
        "nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot "
        "be scheduled right away as preemption victims receive their graceful termination periods.",
        priority=1,
    ),
    _col(
        "Readiness Gates",
        "string",
        "If specified, all readiness gates will be evaluated for pod readiness. A pod is ready when "
        "all its containers are ready AND all conditions specified in the readiness gates have status "
        'equal to "True" More info: https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates',
        priority=1,
    ),
]

# node.NodeUnreachablePodReason: the reason the node lifecycle controller sets on pods of a lost node.
_NODE_UNREACHABLE_POD_REASON = "NodeLost"


def _pod_row_conditions(pod: Obj) -> list[dict[str, str]]:
    phase = _d(pod.get("status")).get("phase")
    if phase == "Succeeded":
        return [
            {
                "type": "Completed",
                "status": "True",
                "reason": "Succeeded",
                "message": "The pod has completed successfully.",
            }
        ]
    if phase == "Failed":
        return [{"type": "Completed", "status": "True", "reason": "Failed", "message": "The pod failed."}]
    return []


def _is_restartable_init_container(container: Any) -> bool:
    """A sidecar: an init container with restartPolicy Always."""
    return isinstance(container, dict) and container.get("restartPolicy") == "Always"


def _has_pod_ready_condition(conditions: list[Any]) -> bool:
    return any(_d(c).get("type") == "Ready" and _d(c).get("status") == "True" for c in conditions)


def _is_pod_initialized_condition_true(conditions: list[Any]) -> bool:
    for c in conditions:
        if _d(c).get("type") == "Initialized":
            return _d(c).get("status") == "True"
    return False


def _last_terminated_at(container_status: Obj) -> datetime | None:
    terminated = _d(container_status.get("lastState")).get("terminated")
    if terminated is None:
        return None
    return parse_rfc3339(_d(terminated).get("finishedAt"))


def _terminated_without_reason(terminated: Obj, prefix: str) -> str:
    signal = _i(terminated.get("signal"))
    if signal != 0:
        return f"{prefix}Signal:{signal}"
    return f"{prefix}ExitCode:{_i(terminated.get('exitCode'))}"


def _readiness_gates(spec: Obj, conditions: list[Any]) -> str:
    gates = _l(spec.get("readinessGates"))
    if not gates:
        return "<none>"
    true_conditions = 0
    for gate in gates:
        condition_type = _d(gate).get("conditionType")
        for c in conditions:
            if _d(c).get("type") == condition_type:
                if _d(c).get("status") == "True":
                    true_conditions += 1
                break
    return f"{true_conditions}/{len(gates)}"


def _pod_ip(status: Obj) -> str:
    # v1 -> internal conversion: podIP is authoritative, podIPs[0] otherwise.
    ip = _s(status.get("podIP"))
    if not ip:
        pod_ips = _l(status.get("podIPs"))
        if pod_ips:
            ip = _s(_d(pod_ips[0]).get("ip"))
    return ip or "<none>"


@_printer("pods", _POD_COLUMNS, row_conditions=_pod_row_conditions)
def _print_pod(pod: Obj, now: datetime) -> list[Cell]:
    meta, spec, status = _d(pod.get("metadata")), _d(pod.get("spec")), _d(pod.get("status"))
    conditions = _l(status.get("conditions"))
    init_specs = _l(spec.get("initContainers"))

    restarts = 0
    restartable_init_restarts = 0
    total_containers = len(_l(spec.get("containers")))
    ready_containers = 0
    last_restart: datetime | None = None
    last_restartable_init_restart: datetime | None = None

    phase = _s(status.get("phase"))
    reason = _s(status.get("reason")) or phase

    # {type: PodScheduled, reason: SchedulingGated} shows as SchedulingGated.
    for c in conditions:
        if _d(c).get("type") == "PodScheduled" and _d(c).get("reason") == "SchedulingGated":
            reason = "SchedulingGated"

    init_containers: dict[str, Obj] = {}
    for c in init_specs:
        init_containers[_s(_d(c).get("name"))] = _d(c)
        if _is_restartable_init_container(c):
            total_containers += 1

    initializing = False
    for i, raw in enumerate(_l(status.get("initContainerStatuses"))):
        cs = _d(raw)
        restarts += _i(cs.get("restartCount"))
        last_restart = _later(last_restart, _last_terminated_at(cs))
        sidecar = _is_restartable_init_container(init_containers.get(_s(cs.get("name"))))
        if sidecar:
            restartable_init_restarts += _i(cs.get("restartCount"))
            last_restartable_init_restart = _later(last_restartable_init_restart, _last_terminated_at(cs))
        state = _d(cs.get("state"))
        terminated, waiting = state.get("terminated"), state.get("waiting")
        if terminated is not None and _i(_d(terminated).get("exitCode")) == 0:
            continue
        if sidecar and cs.get("started") is True:
            if cs.get("ready") is True:
                ready_containers += 1
            continue
        if terminated is not None:
            # initialization failed
            term_reason = _s(_d(terminated).get("reason"))
            if term_reason:
                reason = f"Init:{term_reason}"
            else:
                reason = _terminated_without_reason(_d(terminated), "Init:")
        elif waiting is not None and _s(_d(waiting).get("reason")) not in ("", "PodInitializing"):
            reason = "Init:" + _s(_d(waiting).get("reason"))
        else:
            reason = f"Init:{i}/{len(init_specs)}"
        initializing = True
        break

    if not initializing or _is_pod_initialized_condition_true(conditions):
        restarts = restartable_init_restarts
        last_restart = last_restartable_init_restart
        has_running = False
        for raw in reversed(_l(status.get("containerStatuses"))):
            cs = _d(raw)
            restarts += _i(cs.get("restartCount"))
            last_restart = _later(last_restart, _last_terminated_at(cs))
            state = _d(cs.get("state"))
            terminated, waiting = state.get("terminated"), state.get("waiting")
            if waiting is not None and _s(_d(waiting).get("reason")):
                reason = _s(_d(waiting).get("reason"))
            elif terminated is not None and _s(_d(terminated).get("reason")):
                reason = _s(_d(terminated).get("reason"))
            elif terminated is not None:
                reason = _terminated_without_reason(_d(terminated), "")
            elif cs.get("ready") is True and state.get("running") is not None:
                has_running = True
                ready_containers += 1

        # back to "Running" if at least one container is still reporting as running
        if reason == "Completed" and has_running:
            reason = "Running" if _has_pod_ready_condition(conditions) else "NotReady"

    deleting = meta.get("deletionTimestamp") is not None
    if deleting and status.get("reason") == _NODE_UNREACHABLE_POD_REASON:
        reason = "Unknown"
    elif deleting and phase not in ("Succeeded", "Failed"):
        reason = "Terminating"

    restarts_cell = str(restarts)
    if restarts != 0 and last_restart is not None:
        restarts_cell = f"{restarts} ({translate_timestamp_since(last_restart, now)} ago)"

    return [
        _name(pod),
        f"{ready_containers}/{total_containers}",
        reason,
        restarts_cell,
        _age(pod, now),
        _pod_ip(status),
        _s(spec.get("nodeName")) or "<none>",
        _s(status.get("nominatedNodeName")) or "<none>",
        _readiness_gates(spec, conditions),
    ]


# ---------------------------------------------------------------------------------------------
# Workloads
# ---------------------------------------------------------------------------------------------


@_printer(
    "deployments",
    [
        NAME_COLUMN,
        _col("Ready", "string", "Number of the pod with ready state"),
        _col(
            "Up-to-date",
            "string",
            "Total number of non-terminated pods targeted by this deployment that have the desired "
            "template spec.",
        ),
        _col(
            "Available",
            "string",
            "Total number of available pods (ready for at least minReadySeconds) targeted by this "
            "deployment.",
        ),
        AGE_COLUMN,
        _col("Containers", "string", _CONTAINERS_DOC, priority=1),
        _col("Images", "string", _IMAGES_DOC, priority=1),
        _col("Selector", "string", _SELECTOR_DOC, priority=1),
    ],
)
def _print_deployment(obj: Obj, now: datetime) -> list[Cell]:
    spec, status = _d(obj.get("spec")), _d(obj.get("status"))
    desired = _i(spec.get("replicas"), 1)  # defaulted to 1 by apps/v1
    selector = _selector_string(spec.get("selector"))
    names, images = _layout_container_cells(_template_containers(obj))
    return [
        _name(obj),
        f"{_i(status.get('readyReplicas'))}/{desired}",
        _i(status.get("updatedReplicas")),
        _i(status.get("availableReplicas")),
        _age(obj, now),
        names,
        images,
        "<invalid>" if selector is None else selector,
    ]


@_printer(
    "replicasets",
    [
        NAME_COLUMN,
        _col("Desired", "integer", "Replicas is the number of desired replicas."),
        _col("Current", "integer", "Replicas is the most recently observed number of replicas."),
        _col("Ready", "integer", "The number of ready replicas for this replica set."),
        AGE_COLUMN,
        _col("Containers", "string", _CONTAINERS_DOC, priority=1),
        _col("Images", "string", _IMAGES_DOC, priority=1),
        _col(
            "Selector",
            "string",
            "Selector is a label query over pods that should match the replica count.",
            priority=1,
        ),
    ],
)
def _print_replicaset(obj: Obj, now: datetime) -> list[Cell]:
    spec, status = _d(obj.get("spec")), _d(obj.get("status"))
    names, images = _layout_container_cells(_template_containers(obj))
    return [
        _name(obj),
        _i(spec.get("replicas"), 1),
        _i(status.get("replicas")),
        _i(status.get("readyReplicas")),
        _age(obj, now),
        names,
        images,
        _format_label_selector(spec.get("selector")),
    ]


@_printer(
    "daemonsets",
    [
        NAME_COLUMN,
        _col("Desired", "integer", "The total number of nodes that should be running the daemon pod (including "
             "nodes correctly running the daemon pod)."),
        _col("Current", "integer", "The number of nodes that are running at least 1 daemon pod and are supposed "
             "to run the daemon pod."),
        _col("Ready", "integer", "numberReady is the number of nodes that should be running the daemon pod and "
             "have one or more of the daemon pod running with a Ready Condition."),
        _col("Up-to-date", "integer", "The total number of nodes that are running updated daemon pod"),
        _col("Available", "integer", "The number of nodes that should be running the daemon pod and have one or "
             "more of the daemon pod running and available (ready for at least spec.minReadySeconds)"),
        _col("Node Selector", "string", "NodeSelector is a selector which must be true for the pod to fit on a "
             "node. Selector which must match a node's labels for the pod to be scheduled on that node."),
        AGE_COLUMN,
        _col("Containers", "string", _CONTAINERS_DOC, priority=1),
        _col("Images", "string", _IMAGES_DOC, priority=1),
        _col("Selector", "string", "A label query over pods that are managed by the daemon set.", priority=1),
    ],
)
def _print_daemon_set(obj: Obj, now: datetime) -> list[Cell]:
    """printDaemonSet."""
    spec, status = _d(obj.get("spec")), _d(obj.get("status"))
    names, images = _layout_container_cells(_template_containers(obj))
    return [
        _name(obj),
        _i(status.get("desiredNumberScheduled")),
        _i(status.get("currentNumberScheduled")),
        _i(status.get("numberReady")),
        _i(status.get("updatedNumberScheduled")),
        _i(status.get("numberAvailable")),
        _format_labels(_d(_d(_d(spec.get("template")).get("spec")).get("nodeSelector"))),
        _age(obj, now),
        names,
        images,
        _format_label_selector(spec.get("selector")),
    ]


@_printer(
    "statefulsets",
    [
        NAME_COLUMN,
        _col("Ready", "string", "Number of the pod with ready state"),
        AGE_COLUMN,
        _col("Containers", "string", _CONTAINERS_DOC, priority=1),
        _col("Images", "string", _IMAGES_DOC, priority=1),
    ],
)
def _print_stateful_set(obj: Obj, now: datetime) -> list[Cell]:
    """printStatefulSet: READY as ready/desired."""
    spec, status = _d(obj.get("spec")), _d(obj.get("status"))
    names, images = _layout_container_cells(_template_containers(obj))
    return [_name(obj), f"{_i(status.get('readyReplicas'))}/{_i(spec.get('replicas'))}", _age(obj, now), names,
            images]


@_printer(
    "controllerrevisions",
    [
        NAME_COLUMN,
        _col("Controller", "string", "Controller of the object"),
        _col("Revision", "integer", "Revision indicates the revision of the state represented by Data."),
        AGE_COLUMN,
    ],
)
def _print_controller_revision(obj: Obj, now: datetime) -> list[Cell]:
    """printControllerRevision: the controller as `kind.group/name` (formatResourceName with its kind)."""
    controller = "<none>"
    for ref in _l(_d(obj.get("metadata")).get("ownerReferences")):
        ref = _d(ref)
        if ref.get("controller"):
            api_version = _s(ref.get("apiVersion"))
            group = api_version.rpartition("/")[0] if "/" in api_version else ""
            kind = _s(ref.get("kind")) + (f".{group}" if group else "")
            controller = f"{kind.lower()}/{_s(ref.get('name'))}"
            break
    return [_name(obj), controller, _i(obj.get("revision")), _age(obj, now)]


# ---------------------------------------------------------------------------------------------
# batch/v1
# ---------------------------------------------------------------------------------------------

# printJob's STATUS, first condition that holds wins (deletion ranks after Complete and Failed)
_JOB_STATUS_ORDER = ("Complete", "Failed", "Terminating", "Suspended", "FailureTarget", "SuccessCriteriaMet")


def _job_status(obj: Obj) -> str:
    holding = {_s(_d(c).get("type")) for c in _l(_d(obj.get("status")).get("conditions"))
               if _d(c).get("status") == "True"}
    if _d(obj.get("metadata")).get("deletionTimestamp"):
        holding.add("Terminating")
    return next((s for s in _JOB_STATUS_ORDER if s in holding), "Running")


@_printer(
    "jobs",
    [
        NAME_COLUMN,
        _col("Status", "string", "Status of the job."),
        _col("Completions", "string", "The desired number of successfully finished pods the job should be run "
             "with."),
        _col("Duration", "string", "Time required to complete the job."),
        AGE_COLUMN,
        _col("Containers", "string", _CONTAINERS_DOC, priority=1),
        _col("Images", "string", _IMAGES_DOC, priority=1),
        _col("Selector", "string", "A label query over pods that should match the pod count.", priority=1),
    ],
)
def _print_job(obj: Obj, now: datetime) -> list[Cell]:
    spec, status = _d(obj.get("spec")), _d(obj.get("status"))
    succeeded = _i(status.get("succeeded"))
    if spec.get("completions") is not None:
        completions = f"{succeeded}/{_i(spec.get('completions'))}"
    elif _i(spec.get("parallelism"), 1) > 1:
        completions = f"{succeeded}/1 of {_i(spec.get('parallelism'))}"
    else:
        completions = f"{succeeded}/1"
    start = parse_rfc3339(status.get("startTime"))
    end = parse_rfc3339(status.get("completionTime"))
    duration = "" if start is None else human_duration((end or now) - start)
    names, images = _layout_container_cells(_template_containers(obj))
    return [_name(obj), _job_status(obj), completions, duration, _age(obj, now), names, images,
            _format_label_selector(spec.get("selector"))]


@_printer(
    "cronjobs",
    [
        NAME_COLUMN,
        _col("Schedule", "string", "The schedule in Cron format, see https://en.wikipedia.org/wiki/Cron."),
        _col("Timezone", "string", "The time zone name for the given schedule, see "
             "https://en.wikipedia.org/wiki/List_of_tz_database_time_zones."),
        _col("Suspend", "boolean", "This flag tells the controller to suspend subsequent executions, it does not "
             "apply to already started executions.  Defaults to false."),
        _col("Active", "integer", "A list of pointers to currently running jobs."),
        _col("Last Schedule", "string", "Information when was the last time the job was successfully scheduled."),
        AGE_COLUMN,
        _col("Containers", "string", _CONTAINERS_DOC, priority=1),
        _col("Images", "string", _IMAGES_DOC, priority=1),
        _col("Selector", "string", "A label query over pods that should match the pod count.", priority=1),
    ],
)
def _print_cronjob(obj: Obj, now: datetime) -> list[Cell]:
    spec, status = _d(obj.get("spec")), _d(obj.get("status"))
    suspend = spec.get("suspend")
    last = status.get("lastScheduleTime")
    job_spec = _d(_d(spec.get("jobTemplate")).get("spec"))
    names, images = _layout_container_cells(_l(_d(_d(job_spec.get("template")).get("spec")).get("containers")))
    return [
        _name(obj),
        _s(spec.get("schedule")),
        _s(spec.get("timeZone")) or "<none>",
        "<unset>" if suspend is None else ("True" if suspend else "False"),
        len(_l(status.get("active"))),
        translate_timestamp_since(last, now) if last else "<none>",
        _age(obj, now),
        names,
        images,
        _format_label_selector(job_spec.get("selector")),
    ]


# ---------------------------------------------------------------------------------------------
# Cluster objects
# ---------------------------------------------------------------------------------------------

_NODE_ROLE_PREFIX = "node-role.kubernetes.io/"
_NODE_ROLE_LABEL = "kubernetes.io/role"
_NODE_ADDRESSES_DOC = "List of addresses reachable to the node."


def _node_roles(labels: Obj) -> list[str]:
    roles: set[str] = set()
    for key, value in labels.items():
        if key.startswith(_NODE_ROLE_PREFIX):
            role = key[len(_NODE_ROLE_PREFIX) :]
            if role:
                roles.add(role)
        elif key == _NODE_ROLE_LABEL and value:
            roles.add(_s(value))
    return sorted(roles)


def _node_address(status: Obj, address_type: str) -> str:
    for address in _l(status.get("addresses")):
        if _d(address).get("type") == address_type:
            return _s(_d(address).get("address"))
    return "<none>"


@_printer(
    "nodes",
    [
        NAME_COLUMN,
        _col("Status", "string", "The status of the node"),
        _col("Roles", "string", "The roles of the node"),
        AGE_COLUMN,
        _col("Version", "string", "Kubelet Version reported by the node."),
        _col("Internal-IP", "string", _NODE_ADDRESSES_DOC, priority=1),
        _col("External-IP", "string", _NODE_ADDRESSES_DOC, priority=1),
        _col(
            "OS-Image",
            "string",
            "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).",
            priority=1,
        ),
        _col(
            "Kernel-Version",
            "string",
            "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).",
            priority=1,
        ),
        _col(
            "Container-Runtime",
            "string",
            "ContainerRuntime Version reported by the node through runtime remote API (e.g. "
            "containerd://1.4.2).",
            priority=1,
        ),
    ],
)
def _print_node(obj: Obj, now: datetime) -> list[Cell]:
    meta, spec, status = _d(obj.get("metadata")), _d(obj.get("spec")), _d(obj.get("status"))
    conditions = {_d(c).get("type"): _d(c) for c in _l(status.get("conditions"))}
    states: list[str] = []
    for condition_type in ("Ready",):  # upstream's NodeAllConditions
        if condition_type in conditions:
            is_true = conditions[condition_type].get("status") == "True"
            states.append(condition_type if is_true else "Not" + condition_type)
    if not states:
        states.append("Unknown")
    if spec.get("unschedulable") is True:
        states.append("SchedulingDisabled")
    info = _d(status.get("nodeInfo"))
    return [
        _name(obj),
        ",".join(states),
        ",".join(_node_roles(_d(meta.get("labels")))) or "<none>",
        _age(obj, now),
        _s(info.get("kubeletVersion")),
        _node_address(status, "InternalIP"),
        _node_address(status, "ExternalIP"),
        _s(info.get("osImage")) or "<unknown>",
        _s(info.get("kernelVersion")) or "<unknown>",
        _s(info.get("containerRuntimeVersion")) or "<unknown>",
    ]


@_printer(
    "namespaces",
    [NAME_COLUMN, _col("Status", "string", "The status of the namespace"), AGE_COLUMN],
)
def _print_namespace(obj: Obj, now: datetime) -> list[Cell]:
    return [_name(obj), _s(_d(obj.get("status")).get("phase")), _age(obj, now)]


@_printer(
    "leases",
    [
        NAME_COLUMN,
        _col("Holder", "string", "holderIdentity contains the identity of the holder of a current lease."),
        AGE_COLUMN,
    ],
)
def _print_lease(obj: Obj, now: datetime) -> list[Cell]:
    return [_name(obj), _s(_d(obj.get("spec")).get("holderIdentity")), _age(obj, now)]


@_printer(
    "serviceaccounts",
    [NAME_COLUMN, _col("Secrets", "string", "Secrets is a list of the secrets in the same namespace that pods "
                       "running using this ServiceAccount are allowed to use."), AGE_COLUMN],
)
def _print_service_account(obj: Obj, now: datetime) -> list[Cell]:
    return [_name(obj), len(obj.get("secrets") or []), _age(obj, now)]


@_printer(
    "configmaps",
    [NAME_COLUMN, _col("Data", "string", "Data contains the configuration data. Each key must consist of alphanumeric "
                       "characters, '-', '_' or '.'. Values with non-UTF-8 byte sequences must use the BinaryData "
                       "field. The keys stored in Data must not overlap with the keys in the BinaryData field, this "
                       "is enforced during validation process."), AGE_COLUMN],
)
def _print_config_map(obj: Obj, now: datetime) -> list[Cell]:
    return [_name(obj), len(_d(obj.get("data"))) + len(_d(obj.get("binaryData"))), _age(obj, now)]


@_printer(
    "secrets",
    [
        NAME_COLUMN,
        _col("Type", "string", "Used to facilitate programmatic handling of secret data. More info: "
             "https://kubernetes.io/docs/concepts/configuration/secret/#secret-types"),
        _col("Data", "string", "Data contains the secret data. Each key must consist of alphanumeric characters, "
             "'-', '_' or '.'. The serialized form of the secret data is a base64 encoded string, representing the "
             "arbitrary (possibly non-string) data value here. Described in "
             "https://tools.ietf.org/html/rfc4648#section-4"),
        AGE_COLUMN,
    ],
)
def _print_secret(obj: Obj, now: datetime) -> list[Cell]:
    return [_name(obj), _s(obj.get("type")), len(_d(obj.get("data"))), _age(obj, now)]


def _storage(resources: Any) -> str:
    """resource.Quantity.String() of resources["storage"] ("0" when missing), canonical as upstream."""
    value = _d(resources).get("storage")
    if value is None:
        return "0"
    try:
        return str(parse_quantity(value))
    except (ValueError, TypeError):
        return str(value)


def _phase(obj: Obj) -> str:
    """A deleted volume or claim held by its protection finalizer shows Terminating."""
    if _d(obj.get("metadata")).get("deletionTimestamp"):
        return "Terminating"
    return _s(_d(obj.get("status")).get("phase"))


def _attributes_class(spec: Obj) -> str:
    return spec.get("volumeAttributesClassName") or "<unset>"


@_printer(
    "persistentvolumes",
    [
        NAME_COLUMN,
        _col("Capacity", "string", "capacity is the description of the persistent volume's resources and capacity. "
             "More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#capacity"),
        _col("Access Modes", "string", "accessModes contains all ways the volume can be mounted. More info: "
             "https://kubernetes.io/docs/concepts/storage/persistent-volumes#access-modes"),
        _col("Reclaim Policy", "string", "persistentVolumeReclaimPolicy defines what happens to a persistent volume "
             "when released from its claim. Valid options are Retain (default for manually created "
             "PersistentVolumes), Delete (default for dynamically provisioned PersistentVolumes), and Recycle "
             "(deprecated). Recycle must be supported by the volume plugin underlying this PersistentVolume. More "
             "info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#reclaiming"),
        _col("Status", "string", "phase indicates if a volume is available, bound to a claim, or released by a "
             "claim. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#phase"),
        _col("Claim", "string", "claimRef is part of a bi-directional binding between PersistentVolume and "
             "PersistentVolumeClaim. Expected to be non-nil when bound. claim.VolumeName is the authoritative bind "
             "between PV and PVC. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#binding"),
        _col("StorageClass", "string", "StorageClass of the pv"),
        _col("VolumeAttributesClass", "string", "VolumeAttributesClass of the pv"),
        _col("Reason", "string", "reason is a brief CamelCase string that describes any failure and is meant for "
             "machine parsing and tidy display in the CLI."),
        AGE_COLUMN,
        _col("VolumeMode", "string", "volumeMode defines if a volume is intended to be used with a formatted "
             "filesystem or to remain in raw block state. Value of Filesystem is implied when not included in spec.",
             priority=1),
    ],
)
def _print_persistent_volume(obj: Obj, now: datetime) -> list[Cell]:
    spec = _d(obj.get("spec"))
    claim = _d(spec.get("claimRef"))
    claim_ref = f"{_s(claim.get('namespace'))}/{_s(claim.get('name'))}" if spec.get("claimRef") else ""
    return [_name(obj), _storage(spec.get("capacity")), access_modes_short(spec.get("accessModes")),
            _s(spec.get("persistentVolumeReclaimPolicy")), _phase(obj), claim_ref, volume_class(obj),
            _attributes_class(spec), _s(_d(obj.get("status")).get("reason")), _age(obj, now),
            spec.get("volumeMode") or "<unset>"]


@_printer(
    "persistentvolumeclaims",
    [
        NAME_COLUMN,
        _col("Status", "string", "phase represents the current phase of PersistentVolumeClaim."),
        _col("Volume", "string", "volumeName is the binding reference to the PersistentVolume backing this claim."),
        _col("Capacity", "string", "capacity represents the actual resources of the underlying volume."),
        _col("Access Modes", "string", "accessModes contains the actual access modes the volume backing the PVC "
             "has. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#access-modes-1"),
        _col("StorageClass", "string", "StorageClass of the pvc"),
        _col("VolumeAttributesClass", "string", "VolumeAttributesClass of the pvc"),
        AGE_COLUMN,
        _col("VolumeMode", "string", "volumeMode defines what type of volume is required by the claim. Value of "
             "Filesystem is implied when not included in claim spec.", priority=1),
    ],
)
def _print_persistent_volume_claim(obj: Obj, now: datetime) -> list[Cell]:
    spec, status = _d(obj.get("spec")), _d(obj.get("status"))
    capacity = access_modes = ""
    if spec.get("volumeName"):  # capacity and modes are the bound volume's
        capacity = _storage(status.get("capacity"))
        access_modes = access_modes_short(status.get("accessModes"))
    return [_name(obj), _phase(obj), _s(spec.get("volumeName")), capacity, access_modes, claim_class(obj),
            _attributes_class(spec), _age(obj, now), spec.get("volumeMode") or "<unset>"]


@_printer(
    "storageclasses",
    [
        NAME_COLUMN,
        _col("Provisioner", "string", "provisioner indicates the type of the provisioner."),
        _col("ReclaimPolicy", "string", "reclaimPolicy controls the reclaimPolicy for dynamically provisioned "
             "PersistentVolumes of this storage class. Defaults to Delete."),
        _col("VolumeBindingMode", "string", "volumeBindingMode indicates how PersistentVolumeClaims should be "
             "provisioned and bound.  When unset, VolumeBindingImmediate is used. This field is only honored by "
             "servers that enable the VolumeScheduling feature."),
        _col("AllowVolumeExpansion", "string", "allowVolumeExpansion shows whether the storage class allow volume "
             "expand."),
        AGE_COLUMN,
    ],
)
def _print_storage_class(obj: Obj, now: datetime) -> list[Cell]:
    name = _name(obj) + (" (default)" if is_default_class(obj) else "")
    return [name, _s(obj.get("provisioner")), obj.get("reclaimPolicy") or "Delete",
            obj.get("volumeBindingMode") or "Immediate", bool(obj.get("allowVolumeExpansion")), _age(obj, now)]


# ---------------------------------------------------------------------------------------------
# Events
# ---------------------------------------------------------------------------------------------

# events.k8s.io/v1 field -> core/v1 field (what upstream's conversion to the internal Event does)
_EVENTS_V1_FIELDS = {
    "regarding": "involvedObject",
    "note": "message",
    "deprecatedSource": "source",
    "deprecatedFirstTimestamp": "firstTimestamp",
    "deprecatedLastTimestamp": "lastTimestamp",
    "deprecatedCount": "count",
    "reportingController": "reportingComponent",
}


def _core_event(ev: Obj) -> Obj:
    if "regarding" not in ev and "note" not in ev and "deprecatedSource" not in ev:
        return ev
    out = dict(ev)
    for new, old in _EVENTS_V1_FIELDS.items():
        if new in ev and old not in ev:
            out[old] = ev[new]
    return out


def _event_source(ev: Obj) -> str:
    """upstream formatEventSource: component (or reportingController), then ", host" (or
    reportingInstance) when there is one."""
    source = _d(ev.get("source"))
    component = _s(source.get("component")) or _s(ev.get("reportingComponent"))
    instance = _s(source.get("host")) or _s(ev.get("reportingInstance"))
    return component if not instance else f"{component}, {instance}"


@_printer(
    "events",
    [
        _col(
            "Last Seen",
            "string",
            "The time at which the most recent occurrence of this event was recorded.",
        ),
        _col(
            "Type",
            "string",
            "Type of this event (Normal, Warning), new types could be added in the future",
        ),
        _col(
            "Reason",
            "string",
            "This should be a short, machine understandable string that gives the reason for the "
            "transition into the object's current status.",
        ),
        _col("Object", "string", "The object that this event is about."),
        _col(
            "Subobject",
            "string",
            "If referring to a piece of an object instead of an entire object, this string should "
            "contain a valid JSON/Go field access statement, such as "
            "desiredState.manifest.containers[2].",
            priority=1,
        ),
        _col(
            "Source",
            "string",
            "The component reporting this event. Should be a short machine understandable string.",
            priority=1,
        ),
        _col("Message", "string", "A human-readable description of the status of this operation."),
        _col(
            "First Seen",
            "string",
            "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)",
            priority=1,
        ),
        _col("Count", "string", "The number of times this event has occurred.", priority=1),
        _col("Name", "string", _NAME_DOC, priority=1, fmt="name"),
    ],
)
def _print_event(raw: Obj, now: datetime) -> list[Cell]:
    ev = _core_event(raw)
    first_time = parse_rfc3339(ev.get("firstTimestamp"))
    first_seen = translate_timestamp_since(first_time or ev.get("eventTime"), now)
    last_time = parse_rfc3339(ev.get("lastTimestamp"))
    last_seen = translate_timestamp_since(last_time, now) if last_time else first_seen

    count = _i(ev.get("count"))
    series = ev.get("series")
    if isinstance(series, dict):
        last_seen = translate_timestamp_since(series.get("lastObservedTime"), now)
        count = _i(series.get("count"))
    elif count == 0:
        count = 1  # singleton events don't have a count set in the new API

    involved = _d(ev.get("involvedObject"))
    kind, name = _s(involved.get("kind")).lower(), _s(involved.get("name"))
    target = f"{kind}/{name}" if name else kind
    return [
        last_seen,
        _s(ev.get("type")),
        _s(ev.get("reason")),
        target,
        _s(involved.get("fieldPath")),
        _event_source(ev),
        _s(ev.get("message")).strip(),
        first_seen,
        count,
        _name(ev),
    ]


# ---------------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------------
# Services and their endpoints (upstream printService, printEndpoints, printEndpointSlice)
# ---------------------------------------------------------------------------------------------

_MORE_MAX = 3  # formatEndpoints / listWithMoreString show three, then "+ N more..."


def _list_with_more(items: list[str], count: int, empty: str) -> str:
    text = ",".join(items[:_MORE_MAX])
    if count > _MORE_MAX:
        return f"{text} + {count - _MORE_MAX} more..."
    return text or empty


def _join_host_port(host: str, port: Any) -> str:
    """net.JoinHostPort: IPv6 addresses in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _service_ports(ports: list[Any]) -> str:
    """makePortString: 80/TCP, or 80:30080/TCP with a node port."""
    pieces = []
    for raw in ports:
        port = _d(raw)
        if _i(port.get("nodePort")) > 0:
            pieces.append(f"{_i(port.get('port'))}:{_i(port.get('nodePort'))}/{_s(port.get('protocol'))}")
        else:
            pieces.append(f"{_i(port.get('port'))}/{_s(port.get('protocol'))}")
    return ",".join(pieces)


def _load_balancer_addresses(status: Obj) -> str:
    """loadBalancerStatusStringer (wide, as the apiserver prints it): each ingress's IP or else hostname,
    sorted and unique."""
    found = set()
    for raw in _l(_d(status.get("loadBalancer")).get("ingress")):
        ingress = _d(raw)
        if ingress.get("ip"):
            found.add(_s(ingress["ip"]))
        elif ingress.get("hostname"):
            found.add(_s(ingress["hostname"]))
    return ",".join(sorted(found))


def _service_external_ip(obj: Obj) -> str:
    """getServiceExternalIP."""
    spec = _d(obj.get("spec"))
    external = [_s(ip) for ip in _l(spec.get("externalIPs"))]
    kind = spec.get("type")
    if kind in ("ClusterIP", "NodePort"):
        return ",".join(external) or "<none>"
    if kind == "LoadBalancer":
        balancers = _load_balancer_addresses(_d(obj.get("status")))
        joined = ",".join([*(balancers.split(",") if balancers else []), *external])
        return joined or "<pending>"
    if kind == "ExternalName":
        return _s(spec.get("externalName"))
    return "<unknown>"


def _format_labels(labels: Any) -> str:
    """labels.FormatLabels: sorted key=value pairs, "<none>" for none."""
    pairs = sorted(_d(labels).items())
    return ",".join(f"{k}={v}" for k, v in pairs) or "<none>"


@_printer(
    "services",
    [
        NAME_COLUMN,
        _col("Type", "string", "type determines how the Service is exposed. Defaults to ClusterIP. Valid options "
             "are ExternalName, ClusterIP, NodePort, and LoadBalancer."),
        _col("Cluster-IP", "string", "clusterIP is the IP address of the service and is usually assigned randomly."),
        _col("External-IP", "string", "externalIPs is a list of IP addresses for which nodes in the cluster will "
             "also accept traffic for this service."),
        _col("Port(s)", "string", "The list of ports that are exposed by this service."),
        AGE_COLUMN,
        _col("Selector", "string", "Route service traffic to pods with label keys and values matching this "
             "selector.", priority=1),
    ],
)
def _print_service(obj: Obj, now: datetime) -> list[Cell]:
    spec = _d(obj.get("spec"))
    cluster_ips = _l(spec.get("clusterIPs"))
    return [
        _name(obj),
        _s(spec.get("type")),
        _s(cluster_ips[0]) if cluster_ips else "<none>",
        _service_external_ip(obj),
        _service_ports(_l(spec.get("ports"))) or "<none>",
        _age(obj, now),
        _format_labels(spec.get("selector")),
    ]


@_printer(
    "endpoints",
    [
        NAME_COLUMN,
        _col("Endpoints", "string", "The set of all endpoints is the union of all subsets."),
        AGE_COLUMN,
    ],
)
def _print_endpoints(obj: Obj, now: datetime) -> list[Cell]:
    """formatEndpoints: ip:port per ready address and port (a subset without ports: the bare ips)."""
    subsets = _l(obj.get("subsets"))
    if not subsets:
        return [_name(obj), "<none>", _age(obj, now)]
    shown: list[str] = []
    count = 0
    for raw in subsets:
        subset = _d(raw)
        addresses = [_s(_d(a).get("ip")) for a in _l(subset.get("addresses"))]
        ports = _l(subset.get("ports"))
        if not ports:
            count += len(addresses)
            shown += addresses
            continue
        for port in ports:
            count += len(addresses)
            shown += [_join_host_port(ip, _i(_d(port).get("port"))) for ip in addresses]
    return [_name(obj), _list_with_more(shown, count, "<none>"), _age(obj, now)]


@_printer(
    "endpointslices",
    [
        NAME_COLUMN,
        _col("AddressType", "string", "addressType specifies the type of address carried by this EndpointSlice."),
        _col("Ports", "string", "ports specifies the list of network ports exposed by each endpoint in this slice."),
        _col("Endpoints", "string", "endpoints is a list of unique endpoints in this slice."),
        AGE_COLUMN,
    ],
)
def _print_endpoint_slice(obj: Obj, now: datetime) -> list[Cell]:
    ports = []
    for raw in _l(obj.get("ports")):
        port = _d(raw)
        ports.append(str(port["port"]) if port.get("port") is not None
                     else _s(port["name"]) if port.get("name") is not None else "*")
    addresses = [_s(a) for e in _l(obj.get("endpoints")) for a in _l(_d(e).get("addresses"))]
    return [
        _name(obj),
        _s(obj.get("addressType")),
        _list_with_more(ports, len(ports), "<unset>"),
        _list_with_more(addresses, len(addresses), "<unset>"),
        _age(obj, now),
    ]


@_printer(
    "customresourcedefinitions",
    [NAME_COLUMN, _col("Created At", "date", _CREATION_DOC)],
)
def _print_custom_resource_definition(obj: Obj, now: datetime) -> list[Cell]:
    """apiextensions-apiserver's default table: the name and the creation time as written (CREATED AT)."""
    return [_name(obj), _s(_d(obj.get("metadata")).get("creationTimestamp"))]


# ---------------------------------------------------------------------------------------------


def _printer_for(resource: str) -> _Printer:
    return _PRINTERS.get(resource.lower(), _DEFAULT_PRINTER)


def column_definitions(resource: str) -> list[dict[str, Any]]:
    """The meta.k8s.io/v1 TableColumnDefinitions for `resource` (a plural: "pods"); NAME, AGE
    for resources without a printer of their own."""
    return [dict(c) for c in _printer_for(resource).columns]


def _row_object(obj: Obj, include_object: str) -> Obj | None:
    if include_object == INCLUDE_NONE:
        return None
    if include_object == INCLUDE_OBJECT:
        return copy.deepcopy(obj)
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": copy.deepcopy(_d(obj.get("metadata"))),
    }


def table_for(
    resource: str,
    objects: list[dict[str, Any]],
    *,
    include_object: str = INCLUDE_METADATA,
    resource_version: str = "",
    continue_token: str = "",
    now: datetime | None = None,
) -> dict[str, Any]:
    """The meta.k8s.io/v1 Table for `objects` of `resource` (a plural: "pods").

    include_object is the request's `includeObject`: "None" (rows carry no object),
    "Metadata" (the default: a PartialObjectMetadata) or "Object" (the full object).
    """
    include = include_object or INCLUDE_METADATA
    if include not in (INCLUDE_NONE, INCLUDE_METADATA, INCLUDE_OBJECT):
        raise ValueError(
            f"includeObject: unsupported value {include_object!r}: supported values: None, Metadata, Object"
        )
    if now is None:
        now = datetime.now(UTC)
    elif now.tzinfo is None:
        now = now.replace(tzinfo=UTC)

    printer = _printer_for(resource)
    rows: list[dict[str, Any]] = []
    for obj in objects:
        row: dict[str, Any] = {"cells": printer.cells(obj, now)}
        if printer.row_conditions is not None:
            conditions = printer.row_conditions(obj)
            if conditions:
                row["conditions"] = conditions
        embedded = _row_object(obj, include)
        if embedded is not None:
            row["object"] = embedded
        rows.append(row)

    metadata: dict[str, Any] = {}
    if resource_version:
        metadata["resourceVersion"] = resource_version
    if continue_token:
        metadata["continue"] = continue_token
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": column_definitions(resource),
        "rows": rows,
    }


# ---------------------------------------------------------------------------------------------
# policy
# ---------------------------------------------------------------------------------------------


@_printer(
    "poddisruptionbudgets",
    [
        NAME_COLUMN,
        _col("Min Available", "string", "The minimum number of pods that must be available."),
        _col("Max Unavailable", "string", "The maximum number of pods that may be unavailable."),
        _col("Allowed Disruptions", "integer", "Calculated number of pods that may be disrupted at this time."),
        AGE_COLUMN,
    ],
)
def _print_pod_disruption_budget(obj: Obj, now: datetime) -> list[Cell]:
    """printPodDisruptionBudget: N/A for the bound that is not set."""
    spec = _d(obj.get("spec"))
    min_available, max_unavailable = spec.get("minAvailable"), spec.get("maxUnavailable")
    return [_name(obj), "N/A" if min_available is None else str(min_available),
            "N/A" if max_unavailable is None else str(max_unavailable),
            _i(_d(obj.get("status")).get("disruptionsAllowed")), _age(obj, now)]
# HorizontalPodAutoscalers (upstream formatHPAMetrics, printHorizontalPodAutoscaler)
# ---------------------------------------------------------------------------------------------


def _quantity_string(value: Any) -> str:
    try:
        return str(parse_quantity(value))
    except ValueError:
        return _s(value)


def _hpa_metric(spec: Obj, status: Obj | None) -> str:
    kind = spec.get("type")
    field = {"Resource": "resource", "ContainerResource": "containerResource", "Pods": "pods",
             "Object": "object", "External": "external"}.get(_s(kind))
    if field is None:
        return "<unknown type>"
    source, current_status = _d(spec.get(field)), _d(_d(status).get(field))
    target = _d(source.get("target"))
    current = _d(current_status.get("current"))
    if field in ("resource", "containerResource"):
        name = _s(source.get("name"))
        if target.get("averageValue") is not None:
            now = _quantity_string(current["averageValue"]) if current.get("averageValue") is not None \
                else "<unknown>"
            return f"{name}: {now}/{_quantity_string(target['averageValue'])}"
        now = f"{current['averageUtilization']}%" if current.get("averageUtilization") is not None else "<unknown>"
        goal = f"{target['averageUtilization']}%" if target.get("averageUtilization") is not None else "<auto>"
        return f"{name}: {now}/{goal}"
    if field == "pods":
        now = _quantity_string(current["averageValue"]) if current.get("averageValue") is not None else "<unknown>"
        return f"{now}/{_quantity_string(target.get('averageValue'))}"
    if target.get("averageValue") is not None:
        now = _quantity_string(current["averageValue"]) if current.get("averageValue") is not None else "<unknown>"
        return f"{now}/{_quantity_string(target['averageValue'])} (avg)"
    now = _quantity_string(current["value"]) if current.get("value") is not None else "<unknown>"
    return f"{now}/{_quantity_string(target.get('value'))}"


def format_hpa_metrics(specs: list[Any], statuses: list[Any]) -> str:
    if not specs:
        return "<none>"
    shown = [_hpa_metric(_d(spec), _d(statuses[i]) if i < len(statuses) else None) for i, spec in enumerate(specs)]
    if len(shown) > 2:
        return f"{', '.join(shown[:2])} + {len(shown) - 2} more..."
    return ", ".join(shown)


@_printer(
    "horizontalpodautoscalers",
    [
        NAME_COLUMN,
        _col("Reference", "string", "scaleTargetRef points to the target resource to scale, and is used to the pods "
             "for which metrics should be collected, as well as to actually change the replica count."),
        _col("Targets", "string", "metrics contains the specifications for which to use to calculate the desired "
             "replica count (the maximum replica count across all metrics will be used)."),
        _col("MinPods", "string", "minReplicas is the lower limit for the number of replicas to which the "
             "autoscaler can scale down.  It defaults to 1 pod."),
        _col("MaxPods", "integer", "maxReplicas is the upper limit for the number of replicas to which the "
             "autoscaler can scale up. It cannot be less that minReplicas."),
        _col("Replicas", "integer", "current number of replicas of pods managed by this autoscaler, as last seen "
             "by the autoscaler."),
        AGE_COLUMN,
    ],
)
def _print_hpa(obj: Obj, now: datetime) -> list[Cell]:
    spec, status = _d(obj.get("spec")), _d(obj.get("status"))
    ref = _d(spec.get("scaleTargetRef"))
    min_replicas = spec.get("minReplicas")
    return [_name(obj), f"{_s(ref.get('kind'))}/{_s(ref.get('name'))}",
            format_hpa_metrics(_l(spec.get("metrics")), _l(status.get("currentMetrics"))),
            "<unset>" if min_replicas is None else str(min_replicas), _i(spec.get("maxReplicas")),
            _i(status.get("currentReplicas")), _age(obj, now)]


# ---------------------------------------------------------------------------------------------
# Policy: PriorityClass, ResourceQuota, LimitRange
# ---------------------------------------------------------------------------------------------


@_printer(
    "priorityclasses",
    [
        NAME_COLUMN,
        _col("Value", "integer", "value represents the integer value of this priority class. This is the actual "
             "priority that pods receive when they have the name of this class in their pod spec."),
        _col("Global-Default", "boolean", "globalDefault specifies whether this PriorityClass should be considered "
             "as the default priority for pods that do not have any priority class. Only one PriorityClass can be "
             "marked as `globalDefault`. However, if more than one PriorityClasses exists with their `globalDefault` "
             "field set to true, the smallest value of such global default PriorityClasses will be used as the "
             "default priority."),
        AGE_COLUMN,
        _col("PreemptionPolicy", "string", "preemptionPolicy is the Policy for preempting pods with lower priority. "
             "One of Never, PreemptLowerPriority. Defaults to PreemptLowerPriority if unset."),
    ],
)
def _print_priority_class(obj: Obj, now: datetime) -> list[Cell]:
    return [_name(obj), _i(obj.get("value")), bool(obj.get("globalDefault")), _age(obj, now),
            obj.get("preemptionPolicy") or "<unset>"]


@_printer(
    "resourcequotas",
    [
        NAME_COLUMN,
        AGE_COLUMN,
        _col("Request", "string", "Request represents a minimum amount of cpu/memory that a container may consume."),
        _col("Limit", "string", "Limits control the maximum amount of cpu/memory that a container may use independent "
             "of contention on the node."),
    ],
)
def _print_resource_quota(obj: Obj, now: datetime) -> list[Cell]:
    """printResourceQuota: `used/hard` per resource of status.hard, sorted; limits.* in the Limit column."""
    status = _d(obj.get("status"))
    hard, used = _d(status.get("hard")), _d(status.get("used"))
    requests: list[str] = []
    limits: list[str] = []
    for name in sorted(hard):
        cell = f"{name}: {_quantity_string(used.get(name, '0'))}/{_quantity_string(hard[name])}"
        pieces = name.split(".")
        (limits if len(pieces) > 1 and pieces[0] == "limits" else requests).append(cell)
    return [_name(obj), _age(obj, now), ", ".join(requests), ", ".join(limits)]


@_printer(
    "limitranges",
    [NAME_COLUMN, _col("Created At", "date", _CREATION_DOC)],
)
def _print_limit_range(obj: Obj, now: datetime) -> list[Cell]:
    return [_name(obj), _s(_d(obj.get("metadata")).get("creationTimestamp"))]


@_printer(
    "replicationcontrollers",
    [
        NAME_COLUMN,
        _col("Desired", "integer", "Replicas is the number of desired replicas. This is a pointer to distinguish "
             "between explicit zero and unspecified. Defaults to 1."),
        _col("Current", "integer", "Replicas is the most recently observed number of replicas."),
        _col("Ready", "integer", "The number of ready replicas for this replication controller."),
        AGE_COLUMN,
        _col("Containers", "string", _CONTAINERS_DOC, priority=1),
        _col("Images", "string", _IMAGES_DOC, priority=1),
        _col("Selector", "string", "Selector is a label query over pods that should match the Replicas count. If "
             "Selector is empty, it is defaulted to the labels present on the Pod template.", priority=1),
    ],
)
def _print_replication_controller(obj: Obj, now: datetime) -> list[Cell]:
    """printReplicationController: the selector a plain label map, printed as labels are."""
    spec, status = _d(obj.get("spec")), _d(obj.get("status"))
    names, images = _layout_container_cells(_template_containers(obj))
    selector = ",".join(f"{k}={v}" for k, v in sorted(_d(spec.get("selector")).items())) or "<none>"
    return [_name(obj), _i(spec.get("replicas"), 1), _i(status.get("replicas")), _i(status.get("readyReplicas")),
            _age(obj, now), names, images, selector]


# ---------------------------------------------------------------------------------------------
# Networking: Ingress, IngressClass (printIngress, printIngressClass)
# ---------------------------------------------------------------------------------------------

_LOAD_BALANCER_WIDTH = 16


def _ingress_hosts(rules: list[Any]) -> str:
    """formatHosts: the first three hosts, `+ N more...`, `*` when no rule names one."""
    hosts: list[str] = []
    more = False
    for rule in rules:
        if len(hosts) == 3:
            more = True
        if not more and _d(rule).get("host"):
            hosts.append(_s(_d(rule)["host"]))
    if not hosts:
        return "*"
    return f"{','.join(hosts)} + {len(rules) - 3} more..." if more else ",".join(hosts)


def _ingress_address(obj: Obj) -> str:
    """ingressLoadBalancerStatusStringer (not wide): sorted unique IPs or hostnames, cut at 16 characters."""
    found = {_s(e.get("ip")) or _s(e.get("hostname"))
             for e in map(_d, _l(_d(_d(obj.get("status")).get("loadBalancer")).get("ingress")))}
    joined = ",".join(sorted(found - {""}))
    return joined[:_LOAD_BALANCER_WIDTH - 3] + "..." if len(joined) > _LOAD_BALANCER_WIDTH else joined


@_printer(
    "ingresses",
    [
        NAME_COLUMN,
        _col("Class", "string", "The name of the IngressClass resource that should be used for ingress."),
        _col("Hosts", "string", "Hosts that incoming requests are matched against before the ingress rule"),
        _col("Address", "string", "Address is a list containing ingress points for the load-balancer"),
        _col("Ports", "string", "Ports of TLS configurations that open"),
        AGE_COLUMN,
    ],
)
def _print_ingress(obj: Obj, now: datetime) -> list[Cell]:
    spec = _d(obj.get("spec"))
    class_name = spec.get("ingressClassName")
    return [_name(obj), "<none>" if class_name is None else _s(class_name), _ingress_hosts(_l(spec.get("rules"))),
            _ingress_address(obj), "80, 443" if _l(spec.get("tls")) else "80", _age(obj, now)]


@_printer(
    "ingressclasses",
    [
        NAME_COLUMN,
        _col("Controller", "string", "Controller that is responsible for handling this class"),
        _col("Parameters", "string", "A reference to a resource with additional parameters"),
        AGE_COLUMN,
    ],
)
def _print_ingress_class(obj: Obj, now: datetime) -> list[Cell]:
    spec = _d(obj.get("spec"))
    params = spec.get("parameters")
    shown = "<none>"
    if isinstance(params, dict):
        shown = _s(params.get("kind")) + (f".{params['apiGroup']}" if params.get("apiGroup") is not None else "")
        shown += "/" + _s(params.get("name"))
    return [_name(obj), _s(spec.get("controller")), shown, _age(obj, now)]
