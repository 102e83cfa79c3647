"""Pods (upstream: pkg/apis/core/v1/defaults.go, pkg/apis/core/validation, pkg/registry/core/pod).

The pod-spec defaulting and validation here also serve pod templates (Deployments, ReplicaSets):
`default_pod_spec` / `validate_pod_template_spec` take a path prefix so errors read
`spec.template.spec.containers[0].image: Required value`.
"""

from __future__ import annotations

import copy
import posixpath
import re
from typing import Any

import orjson

from apiserver.registry.strategy import Strategy
from apiserver.validation import (
    FieldError,
    duplicate,
    forbidden,
    invalid,
    not_found,
    not_supported,
    required,
    semantic_equal,
    validate_annotations,
    validate_dns1123_label,
    validate_dns1123_subdomain,
    validate_immutable,
    validate_ip,
    validate_labels,
    validate_nonnegative,
    validate_port_num_or_name,
    validate_qualified_name,
    validate_quantity,
)
from machinery.quantity import Quantity
from machinery.types import Obj
from machinery.validation import (
    is_http_header_name,
    is_label_key,
    is_valid_label_value,
    is_valid_port_name,
    is_valid_port_num,
    name_is_dns_subdomain,
    regex_error,
)

MAX_INT32 = 2**31 - 1
MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"

RESTART_POLICIES = ["Always", "OnFailure", "Never"]
DNS_POLICIES = ["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"]
PULL_POLICIES = ["Always", "IfNotPresent", "Never"]
PROTOCOLS = ["SCTP", "TCP", "UDP"]
TERMINATION_MESSAGE_POLICIES = ["File", "FallbackToLogsOnError"]
HTTP_SCHEMES = ["HTTP", "HTTPS"]
TAINT_EFFECTS = ["NoSchedule", "PreferNoSchedule", "NoExecute"]
TOLERATION_OPERATORS = ["Equal", "Exists"]
PREEMPTION_POLICIES = ["PreemptLowerPriority", "Never"]
HOST_PATH_TYPES = ["", "BlockDevice", "CharDevice", "Directory", "DirectoryOrCreate", "File", "FileOrCreate",
                   "Socket"]
MOUNT_PROPAGATION_MODES = ["None", "HostToContainer", "Bidirectional"]
ENV_FIELD_PATHS = ["metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName",
                   "spec.serviceAccountName", "status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs"]
ENV_RESOURCE_FIELDS = ["limits.cpu", "limits.ephemeral-storage", "limits.memory", "requests.cpu",
                       "requests.ephemeral-storage", "requests.memory"]
STANDARD_CONTAINER_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage"})
QOS_RESOURCES = ("cpu", "memory")
# The PriorityClasses every cluster has (upstream scheduling.SystemPriorityClasses()).

DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS = 30
FILE_MODE_ERROR = "must be a number between 0 and 0777 (octal), both inclusive"
MAX_DNS_NAMESERVERS = 3
MAX_DNS_SEARCH_PATHS = 32
MAX_DNS_SEARCH_LIST_CHARS = 2048

UPDATABLE_POD_SPEC_FIELDS = ",".join([
    "`spec.containers[*].image`",
    "`spec.initContainers[*].image`",
    "`spec.activeDeadlineSeconds`",
    "`spec.tolerations` (only additions to existing tolerations)",
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
])

_CONFIG_MAP_KEY_FMT = "[-._a-zA-Z0-9]+"
_CONFIG_MAP_KEY_RE = re.compile(f"^{_CONFIG_MAP_KEY_FMT}$")
_HANDLER_TYPES = ("exec", "httpGet", "tcpSocket", "grpc", "sleep")
_RELAXED_ENV_RE = re.compile(r"^[\x20-\x3c\x3e-\x7e]+$")  # printable ASCII but '='


# ---------------------------------------------------------------------------------------------
# Defaulting (SetDefaults_PodSpec, SetDefaults_Pod, SetDefaults_Container, ...).
# ---------------------------------------------------------------------------------------------


def default_image_pull_policy(image: str) -> str:
    """Always for `:latest` or an untagged, undigested image; IfNotPresent otherwise."""
    if not image:
        return "IfNotPresent"
    name, _, digest = image.partition("@")
    last = name.rsplit("/", 1)[-1]
    tag = last.rpartition(":")[2] if ":" in last else ""
    if not tag and not digest:
        tag = "latest"
    return "Always" if tag == "latest" else "IfNotPresent"


def _default_http_get(action: Obj | None) -> None:
    if action is None:
        return
    action.setdefault("path", "/")
    action.setdefault("scheme", "HTTP")
    if action.get("path") == "":
        action["path"] = "/"
    if action.get("scheme") == "":
        action["scheme"] = "HTTP"


def default_probe(probe: Obj | None) -> None:
    """Zero or missing thresholds take upstream's defaults (1s timeout, 10s period, 1 success, 3 failures)."""
    if probe is None:
        return
    for key, value in (("timeoutSeconds", 1), ("periodSeconds", 10), ("successThreshold", 1),
                       ("failureThreshold", 3)):
        if not probe.get(key):
            probe[key] = value
    _default_http_get(probe.get("httpGet"))
    grpc = probe.get("grpc")
    if grpc is not None and grpc.get("service") is None:
        grpc["service"] = ""


def default_container(container: Obj) -> None:
    """Pull policy from the tag, termination message defaults, TCP ports, probe defaults."""
    if not container.get("imagePullPolicy"):
        container["imagePullPolicy"] = default_image_pull_policy(container.get("image") or "")
    if not container.get("terminationMessagePath"):
        container["terminationMessagePath"] = "/dev/termination-log"
    if not container.get("terminationMessagePolicy"):
        container["terminationMessagePolicy"] = "File"
    container.setdefault("resources", {})
    for port in container.get("ports") or []:
        if not port.get("protocol"):
            port["protocol"] = "TCP"
    for key in ("livenessProbe", "readinessProbe", "startupProbe"):
        default_probe(container.get(key))
    for hook in ((container.get("lifecycle") or {}).get(k) for k in ("postStart", "preStop")):
        if hook is not None:
            _default_http_get(hook.get("httpGet"))
    for env in container.get("env") or []:
        field_ref = (env.get("valueFrom") or {}).get("fieldRef")
        if field_ref is not None and not field_ref.get("apiVersion"):
            field_ref["apiVersion"] = "v1"


def default_ephemeral_container(container: Obj) -> None:
    """The container defaults an ephemeral container gets too (zz_generated.defaults.go walks
    spec.ephemeralContainers[*].ephemeralContainerCommon as it walks containers)."""
    had_resources = "resources" in container
    default_container(container)
    if not had_resources:
        container.pop("resources", None)


def default_volume(volume: Obj) -> None:
    """A volume with no source is an emptyDir; file-projecting sources get mode 0644."""
    if not any(k != "name" for k in volume):
        volume["emptyDir"] = {}
    host_path = volume.get("hostPath")
    if host_path is not None and host_path.get("type") is None:
        host_path["type"] = ""
    for key in ("secret", "configMap", "downwardAPI", "projected"):
        source = volume.get(key)
        if source is not None and source.get("defaultMode") is None:
            source["defaultMode"] = 0o644
    _default_projections(volume)


def _default_projections(volume: Obj) -> None:
    """SetDefaults_ObjectFieldSelector (apiVersion v1) in downwardAPI items, SetDefaults_ServiceAccountTokenProjection
    (expirationSeconds 3600)."""
    downward = [volume.get("downwardAPI") or {}]
    for source in (volume.get("projected") or {}).get("sources") or []:
        downward.append(source.get("downwardAPI") or {})
        token = source.get("serviceAccountToken")
        if token is not None and token.get("expirationSeconds") is None:
            token["expirationSeconds"] = 3600
    for item in (i for d in downward for i in d.get("items") or []):
        field_ref = item.get("fieldRef")
        if field_ref is not None and not field_ref.get("apiVersion"):
            field_ref["apiVersion"] = "v1"


def default_pod_spec(spec: Obj) -> None:
    """SetDefaults_PodSpec and everything nested (what a pod template gets as well)."""
    if not spec.get("dnsPolicy"):
        spec["dnsPolicy"] = "ClusterFirst"
    if not spec.get("restartPolicy"):
        spec["restartPolicy"] = "Always"
    if spec.get("securityContext") is None:
        spec["securityContext"] = {}
    if spec.get("terminationGracePeriodSeconds") is None:
        spec["terminationGracePeriodSeconds"] = DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS
    if not spec.get("schedulerName"):
        spec["schedulerName"] = "default-scheduler"
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        default_container(container)
    for ephemeral in spec.get("ephemeralContainers") or []:
        default_ephemeral_container(ephemeral)
    for volume in spec.get("volumes") or []:
        default_volume(volume)


def default_pod(pod: Obj) -> None:
    """SetDefaults_Pod: the pod-spec defaults plus what only a Pod (not a template) gets."""
    spec = pod.setdefault("spec", {})
    default_pod_spec(spec)
    if spec.get("enableServiceLinks") is None:
        spec["enableServiceLinks"] = True
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        resources = container.get("resources") or {}
        limits = resources.get("limits")
        if limits:
            requests = resources.setdefault("requests", {})
            for name, value in limits.items():
                requests.setdefault(name, value)
            container["resources"] = resources
        if spec.get("hostNetwork"):
            for port in container.get("ports") or []:
                if not port.get("hostPort"):
                    port["hostPort"] = port.get("containerPort")


def _quantity(value: Any) -> Quantity | None:
    q, errs = validate_quantity(value, "")
    return None if errs else q


def compute_qos_class(spec: Obj) -> str:
    """qos.GetPodQOS: Guaranteed when every container limits cpu and memory and requests equal limits;
    BestEffort when nothing is requested or limited; Burstable otherwise."""
    requests: dict[str, Quantity] = {}
    limits: dict[str, Quantity] = {}
    guaranteed = True
    # positive: the numerator's sign (a Fraction keeps its denominator positive), not Fraction's slow comparison
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        resources = container.get("resources") or {}
        for name, raw in (resources.get("requests") or {}).items():
            if name in QOS_RESOURCES and (q := _quantity(raw)) is not None and q.value.numerator > 0:
                requests[name] = requests[name] + q if name in requests else q
        found: set[str] = set()
        for name, raw in (resources.get("limits") or {}).items():
            if name in QOS_RESOURCES and (q := _quantity(raw)) is not None and q.value.numerator > 0:
                found.add(name)
                limits[name] = limits[name] + q if name in limits else q
        if not found.issuperset(QOS_RESOURCES):
            guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    if guaranteed and all(name in limits and limits[name] == q for name, q in requests.items()) \
            and len(requests) == len(limits):
        return "Guaranteed"
    return "Burstable"


# ---------------------------------------------------------------------------------------------
# Validation of a pod spec (ValidatePodSpec and friends).
# ---------------------------------------------------------------------------------------------


def validate_pod_spec(spec: Obj, path: str) -> list[FieldError]:
    """Everything upstream's ValidatePodSpec checks that minik8s models (no affinity, security context,
    topology spread, overhead or resource claims)."""
    errs: list[FieldError] = []
    grace = spec.get("terminationGracePeriodSeconds")
    if grace is None:
        errs.append(required(f"{path}.terminationGracePeriodSeconds"))
    volumes, volume_errs = validate_volumes(spec.get("volumes") or [], f"{path}.volumes")
    errs += volume_errs
    errs += validate_containers(spec.get("containers") or [], volumes, grace, f"{path}.containers")
    errs += validate_init_containers(spec.get("initContainers") or [], spec.get("containers") or [], volumes,
                                     grace, f"{path}.initContainers")
    errs += validate_ephemeral_containers(spec.get("ephemeralContainers") or [], spec.get("containers") or [],
                                          spec.get("initContainers") or [], volumes, f"{path}.ephemeralContainers")
    errs += _validate_host_network(spec, path)
    errs += _validate_enum(spec.get("restartPolicy"), f"{path}.restartPolicy", RESTART_POLICIES)
    errs += _validate_enum(spec.get("dnsPolicy"), f"{path}.dnsPolicy", DNS_POLICIES)
    errs += validate_labels(spec.get("nodeSelector"), f"{path}.nodeSelector")
    errs += _validate_dns_config(spec.get("dnsConfig"), spec.get("dnsPolicy"), f"{path}.dnsConfig")
    for i, gate in enumerate(spec.get("readinessGates") or []):
        errs += validate_qualified_name(gate.get("conditionType") or "", f"{path}.readinessGates[{i}].conditionType")
    for key in ("serviceAccountName", "nodeName", "priorityClassName"):
        if spec.get(key):
            errs += [invalid(f"{path}.{key}", spec[key], m) for m in name_is_dns_subdomain(spec[key], False)]
    deadline = spec.get("activeDeadlineSeconds")
    if deadline is not None and not 1 <= deadline <= MAX_INT32:
        errs.append(invalid(f"{path}.activeDeadlineSeconds", deadline, f"must be between 1 and {MAX_INT32}, inclusive"))
    for key in ("hostname", "subdomain"):
        if spec.get(key):
            errs += validate_dns1123_label(spec[key], f"{path}.{key}")
    errs += validate_tolerations(spec.get("tolerations") or [], f"{path}.tolerations")
    if spec.get("preemptionPolicy") is not None:
        errs += _validate_enum(spec["preemptionPolicy"], f"{path}.preemptionPolicy", PREEMPTION_POLICIES)
    return errs


def _validate_enum(value: str | None, path: str, supported: list[str]) -> list[FieldError]:
    """"" is Required, anything not listed is NotSupported (upstream's switch statements)."""
    if not value:
        return [required(path)]
    if value not in supported:
        return [not_supported(path, value, supported)]
    return []


def validate_pod_template_spec(template: Obj | None, path: str) -> list[FieldError]:
    """ValidatePodTemplateSpec: template labels and annotations (reported, as upstream does, at
    `<path>.labels`), then the pod spec."""
    if template is None:
        return [required(path)]
    meta = template.get("metadata") or {}
    errs = validate_labels(meta.get("labels"), f"{path}.labels")
    errs += validate_annotations(meta.get("annotations"), f"{path}.annotations")
    errs += validate_pod_spec(template.get("spec") or {}, f"{path}.spec")
    if (template.get("spec") or {}).get("ephemeralContainers"):
        errs.append(forbidden(f"{path}.spec.ephemeralContainers", "ephemeral containers not allowed in pod template"))
    return errs


def validate_containers(containers: list[Obj], volumes: set[str], grace: int | None,
                        path: str) -> list[FieldError]:
    """At least one container; names unique; probes and hooks valid; no host port used twice."""
    if not containers:
        return [required(path)]
    errs: list[FieldError] = []
    names: set[str] = set()
    for i, ctr in enumerate(containers):
        idx = f"{path}[{i}]"
        errs += _validate_container_common(ctr, volumes, idx)
        name = ctr.get("name") or ""
        if name in names:
            errs.append(duplicate(f"{idx}.name", name))
        else:
            names.add(name)
        if ctr.get("lifecycle") is not None:
            errs += _validate_lifecycle(ctr["lifecycle"], grace, f"{idx}.lifecycle")
        errs += _validate_probes(ctr, grace, idx)
        if ctr.get("restartPolicy") is not None:
            errs.append(forbidden(f"{idx}.restartPolicy", "may not be set for non-init containers"))
    errs += _check_host_port_conflicts(containers, path, 0)
    return errs


def validate_init_containers(containers: list[Obj], regular: list[Obj], volumes: set[str],
                             grace: int | None, path: str) -> list[FieldError]:
    """Names unique across init and regular containers; probes and hooks only for sidecars
    (restartPolicy: Always)."""
    errs: list[FieldError] = []
    names = {c.get("name") or "" for c in regular}
    for i, ctr in enumerate(containers):
        idx = f"{path}[{i}]"
        errs += _validate_container_common(ctr, volumes, idx)
        sidecar = False
        if ctr.get("restartPolicy") is not None:
            if ctr["restartPolicy"] != "Always":
                errs.append(not_supported(f"{idx}.restartPolicy", ctr["restartPolicy"], ["Always"]))
            sidecar = ctr["restartPolicy"] == "Always"
        name = ctr.get("name") or ""
        if name in names:
            errs.append(duplicate(f"{idx}.name", name))
        elif name:
            names.add(name)
        errs += _check_host_port_conflicts([ctr], path, i)
        if sidecar:
            if ctr.get("lifecycle") is not None:
                errs += _validate_lifecycle(ctr["lifecycle"], grace, f"{idx}.lifecycle")
            errs += _validate_probes(ctr, grace, idx)
        else:
            for key in ("lifecycle", "livenessProbe", "readinessProbe", "startupProbe"):
                if ctr.get(key) is not None:
                    errs.append(forbidden(f"{idx}.{key}", "may not be set for init containers without "
                                                          "restartPolicy=Always"))
    return errs


# upstream allowedEphemeralContainerFields: what an ephemeral container may set; everything else
# (ports, probes, lifecycle, resources, resizePolicy, restartPolicy) "cannot be set"
ALLOWED_EPHEMERAL_CONTAINER_FIELDS = frozenset({
    "name", "image", "command", "args", "workingDir", "envFrom", "env", "volumeMounts", "volumeDevices",
    "terminationMessagePath", "terminationMessagePolicy", "imagePullPolicy", "securityContext", "stdin",
    "stdinOnce", "tty", "targetContainerName"})
EPHEMERAL_CONTAINER_FORBIDDEN = "cannot be set for an Ephemeral Container"


def validate_ephemeral_containers(ephemeral: list[Obj], containers: list[Obj], inits: list[Obj], volumes: set[str],
                                  path: str) -> list[FieldError]:
    """upstream validateEphemeralContainers: the common container checks; a name unique across all
    the pod's containers; a targetContainerName naming a regular or init container; only the
    allowed fields (validateFieldAllowList); no subPath mounts."""
    errs: list[FieldError] = []
    others = {c.get("name") or "" for c in [*containers, *inits]}
    names = set(others)
    for i, ctr in enumerate(ephemeral):
        idx = f"{path}[{i}]"
        errs += _validate_container_common(ctr, volumes, idx)
        name = ctr.get("name") or ""
        if name in names:
            errs.append(duplicate(f"{idx}.name", name))
        else:
            names.add(name)
        target = ctr.get("targetContainerName")
        if target and target not in others:
            errs.append(not_found(f"{idx}.targetContainerName", target))
        for key, value in ctr.items():
            if key not in ALLOWED_EPHEMERAL_CONTAINER_FIELDS and not semantic_equal(value, None):
                errs.append(forbidden(f"{idx}.{key}", EPHEMERAL_CONTAINER_FORBIDDEN))
        for j, mount in enumerate(ctr.get("volumeMounts") or []):
            for key in ("subPath", "subPathExpr"):
                if mount.get(key):
                    errs.append(forbidden(f"{idx}.volumeMounts[{j}].{key}", EPHEMERAL_CONTAINER_FORBIDDEN))
    return errs


def validate_ephemeral_containers_update(new: Obj, old: Obj) -> list[FieldError]:
    """upstream ValidatePodEphemeralContainersUpdate, part 2 (the new pod itself is validated by
    the store): existing ephemeral containers may be neither removed nor changed; static pods take
    none."""
    if MIRROR_POD_ANNOTATION in ((old.get("metadata") or {}).get("annotations") or {}):
        return [forbidden("", "static pods do not support ephemeral containers")]
    errs: list[FieldError] = []
    path = "spec.ephemeralContainers"
    current = {c.get("name"): c for c in (new.get("spec") or {}).get("ephemeralContainers") or []}
    for was in (old.get("spec") or {}).get("ephemeralContainers") or []:
        name = was.get("name")
        now = current.get(name)
        if now is None:
            errs.append(forbidden(path, f'existing ephemeral containers "{name}" may not be removed\n'))
        elif not semantic_equal(was, now):
            diff = "\n".join(_diff(was, now, "EphemeralContainer"))
            errs.append(forbidden(f"{path}[{name}]", f'existing ephemeral containers "{name}" may not be changed\n'
                                                     f"{diff}"))
    return errs


def _validate_container_common(ctr: Obj, volumes: set[str], path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    name = ctr.get("name") or ""
    if not name:
        errs.append(required(f"{path}.name"))
    else:
        errs += validate_dns1123_label(name, f"{path}.name")
    if not ctr.get("image"):
        errs.append(required(f"{path}.image"))
    errs += _validate_enum(ctr.get("terminationMessagePolicy"), f"{path}.terminationMessagePolicy",
                           TERMINATION_MESSAGE_POLICIES)
    errs += _validate_ports(ctr.get("ports") or [], f"{path}.ports")
    errs += _validate_env(ctr.get("env") or [], f"{path}.env")
    errs += _validate_env_from(ctr.get("envFrom") or [], f"{path}.envFrom")
    errs += _validate_volume_mounts(ctr.get("volumeMounts") or [], volumes, f"{path}.volumeMounts")
    errs += _validate_enum(ctr.get("imagePullPolicy"), f"{path}.imagePullPolicy", PULL_POLICIES)
    errs += validate_resource_requirements(ctr.get("resources") or {}, f"{path}.resources")
    return errs


def _validate_ports(ports: list[Obj], path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    names: set[str] = set()
    for i, port in enumerate(ports):
        idx = f"{path}[{i}]"
        name = port.get("name") or ""
        if name:
            msgs = is_valid_port_name(name)
            if msgs:
                errs += [invalid(f"{idx}.name", name, m) for m in msgs]
            elif name in names:
                errs.append(duplicate(f"{idx}.name", name))
            else:
                names.add(name)
        container_port = port.get("containerPort") or 0
        if container_port == 0:
            errs.append(required(f"{idx}.containerPort"))
        else:
            errs += [invalid(f"{idx}.containerPort", container_port, m) for m in is_valid_port_num(container_port)]
        host_port = port.get("hostPort") or 0
        if host_port:
            errs += [invalid(f"{idx}.hostPort", host_port, m) for m in is_valid_port_num(host_port)]
        if not port.get("protocol"):
            errs.append(required(f"{idx}.protocol"))
        elif port["protocol"] not in PROTOCOLS:
            errs.append(not_supported(f"{idx}.protocol", port["protocol"], PROTOCOLS))
        if port.get("hostIP"):
            errs += validate_ip(port["hostIP"], f"{idx}.hostIP")
    return errs


def _check_host_port_conflicts(containers: list[Obj], path: str, offset: int) -> list[FieldError]:
    """A (protocol, hostIP, hostPort) triple may be claimed once (AccumulateUniqueHostPorts)."""
    errs: list[FieldError] = []
    seen: set[str] = set()
    for ci, ctr in enumerate(containers):
        for pi, port in enumerate(ctr.get("ports") or []):
            host_port = port.get("hostPort") or 0
            if not host_port:
                continue
            key = f"{port.get('protocol') or ''}/{port.get('hostIP') or ''}/{host_port}"
            if key in seen:
                errs.append(duplicate(f"{path}[{ci + offset}].ports[{pi}].hostPort", key))
            else:
                seen.add(key)
    return errs


def _validate_host_network(spec: Obj, path: str) -> list[FieldError]:
    """With hostNetwork the container port is the host port; a different hostPort cannot work."""
    errs: list[FieldError] = []
    if not spec.get("hostNetwork"):
        return errs
    for i, ctr in enumerate(spec.get("containers") or []):
        for j, port in enumerate(ctr.get("ports") or []):
            if port.get("hostPort") and port.get("hostPort") != port.get("containerPort"):
                errs.append(invalid(f"{path}.containers[{i}].ports[{j}].containerPort", port.get("containerPort"),
                                    "must match `hostPort` when `hostNetwork` is true"))
    return errs


def _is_env_var_name(name: str) -> list[str]:
    """IsRelaxedEnvVarName (RelaxedEnvironmentVariableValidation is on by default)."""
    if not _RELAXED_ENV_RE.match(name):
        return ["a valid environment variable name must consist only of printable ASCII characters other than '='"]
    return []


def _is_config_map_key(key: str) -> list[str]:
    errs: list[str] = []
    if len(key) > 253:
        errs.append("must be no more than 253 characters")
    if not _CONFIG_MAP_KEY_RE.match(key):
        errs.append(regex_error("a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
                                _CONFIG_MAP_KEY_FMT, "key.name", "KEY_NAME", "key-name"))
    if key == ".":
        errs.append("must not be '.'")
    elif key == "..":
        errs.append("must not be '..'")
    elif key.startswith(".."):
        errs.append("must not start with '..'")
    return errs


def _validate_key_selector(selector: Obj, path: str) -> list[FieldError]:
    """configMapKeyRef / secretKeyRef: a valid object name and a valid key."""
    name = selector.get("name") or ""
    errs = [invalid(f"{path}.name", name, m) for m in name_is_dns_subdomain(name, False)]
    key = selector.get("key") or ""
    if not key:
        errs.append(required(f"{path}.key"))
    else:
        errs += [invalid(f"{path}.key", key, m) for m in _is_config_map_key(key)]
    return errs


def _validate_env(env: list[Obj], path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    for i, var in enumerate(env):
        idx = f"{path}[{i}]"
        name = var.get("name") or ""
        if not name:
            errs.append(required(f"{idx}.name"))
        else:
            errs += [invalid(f"{idx}.name", name, m) for m in _is_env_var_name(name)]
        value_from = var.get("valueFrom")
        if value_from is None:
            continue
        vpath = f"{idx}.valueFrom"
        sources = [k for k in ("fieldRef", "resourceFieldRef", "configMapKeyRef", "secretKeyRef")
                   if value_from.get(k) is not None]
        if "fieldRef" in sources:
            errs += _validate_field_ref(value_from["fieldRef"], f"{vpath}.fieldRef")
        if "resourceFieldRef" in sources:
            resource = value_from["resourceFieldRef"].get("resource") or ""
            if not resource:
                errs.append(required(f"{vpath}.resourceFieldRef.resource"))
            elif resource not in ENV_RESOURCE_FIELDS and not resource.split(".", 1)[-1].startswith("hugepages-"):
                errs.append(not_supported(f"{vpath}.resourceFieldRef.resource", resource, ENV_RESOURCE_FIELDS))
        for key in ("configMapKeyRef", "secretKeyRef"):
            if key in sources:
                errs += _validate_key_selector(value_from[key], f"{vpath}.{key}")
        if not sources:
            errs.append(invalid(vpath, "", "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` "
                                           "or `secretKeyRef`"))
        elif var.get("value"):
            errs.append(invalid(vpath, "", "may not be specified when `value` is not empty"))
        elif len(sources) > 1:
            errs.append(invalid(vpath, "", "may not have more than one field specified at a time"))
    return errs


_SUBSCRIPT = re.compile(r"^(.*)\['(.*)'\]$")  # metadata.labels['key']


def _validate_field_ref(ref: Obj, path: str, field_paths: list[str] = ENV_FIELD_PATHS) -> list[FieldError]:
    """The downward API: a supported field, or one label or annotation by key."""
    if not ref.get("apiVersion"):
        return [required(f"{path}.apiVersion")]
    field_path = ref.get("fieldPath") or ""
    if not field_path:
        return [required(f"{path}.fieldPath")]
    m = _SUBSCRIPT.match(field_path) if "[" in field_path else None
    if m:
        base, subscript = m.groups()
        if base == "metadata.annotations":
            return validate_qualified_name(subscript.lower(), path)
        if base == "metadata.labels":
            return validate_qualified_name(subscript, path)
        return [invalid(path, base, "does not support subscript")]
    if field_path not in field_paths:
        return [not_supported(f"{path}.fieldPath", field_path, field_paths)]
    return []


def _validate_env_from(sources: list[Obj], path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    for i, source in enumerate(sources):
        idx = f"{path}[{i}]"
        if source.get("prefix"):
            errs += [invalid(f"{idx}.prefix", source["prefix"], m) for m in _is_env_var_name(source["prefix"])]
        refs = [k for k in ("configMapRef", "secretRef") if source.get(k) is not None]
        for key in refs:
            name = source[key].get("name") or ""
            if not name:
                errs.append(required(f"{idx}.{key}.name"))
            else:
                errs += [invalid(f"{idx}.{key}.name", name, m) for m in name_is_dns_subdomain(name, False)]
        if not refs:
            errs.append(invalid(idx, "", "must specify one of: `configMapRef` or `secretRef`"))
        elif len(refs) > 1:
            errs.append(invalid(idx, "", "may not have more than one field specified at a time"))
    return errs


def _validate_local_descending_path(target: str, path: str) -> list[FieldError]:
    if target[:1] != "/" and ".." not in target:
        return []  # the usual relative path without a parent step: nothing below can object (every pod's token volume)
    errs: list[FieldError] = []
    if posixpath.isabs(target):
        errs.append(invalid(path, target, "must be a relative path"))
    if ".." in target.replace("\\", "/").split("/"):
        errs.append(invalid(path, target, "must not contain '..'"))
    return errs


def _validate_local_non_reserved_path(target: str, path: str) -> list[FieldError]:
    if target[:1] != "/" and ".." not in target:
        return []  # as in _validate_local_descending_path: no check below can object
    errs = _validate_local_descending_path(target, path)
    if target.startswith("..") and not target.startswith("../"):
        errs.append(invalid(path, target, "must not start with '..'"))
    return errs


def _validate_volume_mounts(mounts: list[Obj], volumes: set[str], path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    mount_points: set[str] = set()
    for i, mount in enumerate(mounts):
        idx = f"{path}[{i}]"
        name = mount.get("name") or ""
        if not name:
            errs.append(required(f"{idx}.name"))
        if name not in volumes:
            errs.append(not_found(f"{idx}.name", name))
        mount_path = mount.get("mountPath") or ""
        if not mount_path:
            errs.append(required(f"{idx}.mountPath"))
        if mount_path in mount_points:
            errs.append(invalid(f"{idx}.mountPath", mount_path, "must be unique"))
        mount_points.add(mount_path)
        if mount.get("subPath"):
            errs += _validate_local_descending_path(mount["subPath"], f"{path}.subPath")
        if mount.get("subPathExpr"):
            if mount.get("subPath"):
                errs.append(invalid(f"{idx}.subPathExpr", mount["subPathExpr"],
                                    "subPathExpr and subPath are mutually exclusive"))
            errs += _validate_local_descending_path(mount["subPathExpr"], f"{path}.subPathExpr")
        if mount.get("mountPropagation") is not None and mount["mountPropagation"] not in MOUNT_PROPAGATION_MODES:
            errs.append(not_supported(f"{path}.mountPropagation", mount["mountPropagation"], MOUNT_PROPAGATION_MODES))
    return errs


def validate_volumes(volumes: list[Obj], path: str) -> tuple[set[str], list[FieldError]]:
    """Names DNS labels and unique, exactly one source each; returns the names mounts may use."""
    errs: list[FieldError] = []
    names: set[str] = set()
    for i, volume in enumerate(volumes):
        idx = f"{path}[{i}]"
        volume_errs = _validate_volume_source(volume, idx)
        name = volume.get("name") or ""
        if not name:
            volume_errs.append(required(f"{idx}.name"))
        else:
            volume_errs += validate_dns1123_label(name, f"{idx}.name")
        if name in names:
            volume_errs.append(duplicate(f"{idx}.name", name))
        if not volume_errs:
            names.add(name)
        errs += volume_errs
    return names, errs


def _validate_mode(mode: int | None, path: str) -> list[FieldError]:
    if mode is not None and not 0 <= mode <= 0o777:
        return [invalid(path, mode, FILE_MODE_ERROR)]
    return []


def _validate_items(items: list[Obj], path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    for i, item in enumerate(items):
        idx = f"{path}[{i}]"
        if not item.get("key"):
            errs.append(required(f"{idx}.key"))
        if not item.get("path"):
            errs.append(required(f"{idx}.path"))
        errs += _validate_local_non_reserved_path(item.get("path") or "", f"{idx}.path")
        errs += _validate_mode(item.get("mode"), f"{idx}.mode")
    return errs


# the volume sources (each as canonical JSON, its name left out) found valid: the ServiceAccount plugin gives every
# pod the same kube-api-access projected volume, whose validation cost as much as the rest of a small pod's spec
_VALID_VOLUME_SOURCES: set[bytes] = set()
_VALID_VOLUME_SOURCES_MAX = 1024


def _validate_volume_source(volume: Obj, path: str) -> list[FieldError]:
    """upstream validateVolumeSource. Valid sources are remembered (validity does not depend on the path or the
    volume's name, the errors' paths do: only a valid source is remembered)."""
    try:
        key = orjson.dumps({k: v for k, v in volume.items() if k != "name"}, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # not the wire form (no JSON for it): validated as it is
        return _check_volume_source(volume, path)
    if key in _VALID_VOLUME_SOURCES:
        return []
    errs = _check_volume_source(volume, path)
    if not errs:
        if len(_VALID_VOLUME_SOURCES) >= _VALID_VOLUME_SOURCES_MAX:
            _VALID_VOLUME_SOURCES.clear()
        _VALID_VOLUME_SOURCES.add(key)
    return errs


def _check_volume_source(volume: Obj, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    sources = [k for k in volume if k != "name" and volume[k] is not None]
    for extra in sources[1:]:
        errs.append(forbidden(f"{path}.{extra}", "may not specify more than 1 volume type"))
    if not sources:
        return [required(path, "must specify a volume type")]
    kind = sources[0]
    source = volume[kind] or {}
    spath = f"{path}.{kind}"
    if kind == "hostPath":
        if not source.get("path"):
            errs.append(required(f"{spath}.path"))
        else:
            if ".." in source["path"].split("/"):
                errs.append(invalid(f"{spath}.path", source["path"], "must not contain '..'"))
            if source.get("type") is not None and source["type"] not in HOST_PATH_TYPES:
                errs.append(not_supported(f"{spath}.type", source["type"], HOST_PATH_TYPES))
    elif kind == "emptyDir":
        if source.get("sizeLimit") is not None:
            q, q_errs = validate_quantity(source["sizeLimit"], f"{spath}.sizeLimit")
            errs += q_errs
            if q is not None and q.value < 0:
                errs.append(forbidden(f"{spath}.sizeLimit", "SizeLimit field must be a valid resource quantity"))
    elif kind in ("secret", "configMap"):
        name_key = "secretName" if kind == "secret" else "name"
        if not source.get(name_key):
            errs.append(required(f"{spath}.{name_key}"))
        errs += _validate_mode(source.get("defaultMode"), f"{spath}.defaultMode")
        errs += _validate_items(source.get("items") or [], f"{spath}.items")
    elif kind == "persistentVolumeClaim":
        if not source.get("claimName"):
            errs.append(required(f"{spath}.claimName"))
    elif kind == "downwardAPI":
        errs += _validate_mode(source.get("defaultMode"), f"{spath}.defaultMode")
        for item in source.get("items") or []:
            errs += _validate_downward_api_file(item, spath)  # upstream passes the source's path, not the item's
    elif kind == "projected":
        errs += _validate_mode(source.get("defaultMode"), f"{spath}.defaultMode")
        errs += _validate_projection_sources(source, spath)
    return errs


VOLUME_FIELD_PATHS = ["metadata.annotations", "metadata.labels", "metadata.name", "metadata.namespace",
                      "metadata.uid"]  # upstream validVolumeDownwardAPIFieldPathExpressions


def _validate_downward_api_file(item: Obj, path: str) -> list[FieldError]:
    """upstream validateDownwardAPIVolumeFile."""
    errs: list[FieldError] = []
    if not item.get("path"):
        errs.append(required(f"{path}.path"))
    errs += _validate_local_non_reserved_path(item.get("path") or "", f"{path}.path")
    if item.get("fieldRef") is not None:
        errs += _validate_field_ref(item["fieldRef"], f"{path}.fieldRef", VOLUME_FIELD_PATHS)
        if item.get("resourceFieldRef") is not None:
            errs.append(invalid(path, "resource", "fieldRef and resourceFieldRef can not be specified simultaneously"))
    elif item.get("resourceFieldRef") is not None:
        ref, rpath = item["resourceFieldRef"], f"{path}.resourceFieldRef"
        resource = ref.get("resource") or ""
        if not ref.get("containerName"):
            errs.append(required(f"{rpath}.containerName"))
        elif not resource:
            errs.append(required(f"{rpath}.resource"))
        elif resource not in ENV_RESOURCE_FIELDS and not resource.split(".", 1)[-1].startswith("hugepages-"):
            errs.append(not_supported(f"{rpath}.resource", resource, ENV_RESOURCE_FIELDS))
    else:
        errs.append(required(path, "one of fieldRef and resourceFieldRef is required"))
    errs += _validate_mode(item.get("mode"), f"{path}.mode")
    return errs


def _validate_projection_sources(projection: Obj, path: str) -> list[FieldError]:
    """upstream validateProjectionSources: one kind per source, paths unique across sources, tokens of 10 minutes
    to 2^32 seconds at a local path."""
    errs: list[FieldError] = []
    all_paths: set[str] = set()

    def claim(p: str, value: str) -> None:
        if p in all_paths:
            errs.append(invalid(path, value, "conflicting duplicate paths"))
        all_paths.add(p)

    for i, source in enumerate(projection.get("sources") or []):
        spath = f"{path}.sources[{i}]"
        kinds = 0
        for kind in ("secret", "configMap"):
            obj = source.get(kind)
            if obj is None:
                continue
            kinds += 1
            if not obj.get("name"):
                errs.append(required(f"{spath}.{kind}.name"))
            items = obj.get("items") or []
            errs += _validate_items(items, f"{spath}.{kind}.items")
            for item in items:
                if item.get("path"):
                    claim(item["path"], obj.get("name") or "")
        if source.get("downwardAPI") is not None:
            kinds += 1
            for item in source["downwardAPI"].get("items") or []:
                errs += _validate_downward_api_file(item, f"{spath}.downwardAPI")
                if item.get("path"):
                    claim(item["path"], item["path"])
        token = source.get("serviceAccountToken")
        if token is not None:
            kinds += 1
            tpath = f"{spath}.serviceAccountToken"
            seconds = token.get("expirationSeconds") or 0
            if seconds < 600:
                errs.append(invalid(f"{tpath}.expirationSeconds", seconds, "may not specify a duration less than 10 "
                                    "minutes"))
            if seconds > 1 << 32:
                errs.append(invalid(f"{tpath}.expirationSeconds", seconds, "may not specify a duration larger than "
                                    "2^32 seconds"))
            if not token.get("path"):
                errs.append(required(f"{path}.path"))
            else:
                errs += _validate_local_non_reserved_path(token["path"], f"{path}.path")
        kinds += sum(1 for k in ("clusterTrustBundle", "podCertificate") if source.get(k) is not None)
        if kinds > 1:
            errs.append(forbidden(spath, "may not specify more than 1 volume type per source"))
    return errs


def validate_resource_requirements(resources: Obj, path: str) -> list[FieldError]:
    """Names are container resources, quantities valid and non-negative, requests ≤ limits (equal for
    resources that cannot be overcommitted)."""
    errs: list[FieldError] = []
    limits_raw: dict[str, Any] = resources.get("limits") or {}
    limits: dict[str, Quantity] = {}
    for name, raw in limits_raw.items():
        fpath = f"{path}.limits[{name}]"
        errs += _validate_container_resource_name(name, fpath)
        q, q_errs = validate_quantity(raw, fpath)
        errs += q_errs
        if q is not None:
            errs += _validate_resource_quantity_value(name, q, fpath)
            limits[name] = q
    for name, raw in (resources.get("requests") or {}).items():
        fpath = f"{path}.requests[{name}]"
        errs += _validate_container_resource_name(name, fpath)
        q, q_errs = validate_quantity(raw, fpath)
        errs += q_errs
        if q is None:
            continue
        errs += _validate_resource_quantity_value(name, q, fpath)
        if name in limits:
            limit = limits[name]
            if q != limit and not _overcommit_allowed(name):
                errs.append(invalid(f"{path}.requests", str(q), f"must be equal to {name} limit of {limit}"))
            elif q > limit:
                errs.append(invalid(f"{path}.requests", str(q),
                                    f"must be less than or equal to {name} limit of {limit}"))
        elif name not in limits_raw and not _overcommit_allowed(name):
            errs.append(required(f"{path}.limits", "Limit must be set for non overcommitable resources"))
    return errs


def _is_native_resource(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def _is_huge_pages(name: str) -> bool:
    return name.startswith("hugepages-")


def _overcommit_allowed(name: str) -> bool:
    return _is_native_resource(name) and not _is_huge_pages(name)


def _validate_container_resource_name(name: str, path: str) -> list[FieldError]:
    errs = [invalid(path, name, m) for m in is_label_key(name)]
    if "/" not in name:
        if name not in STANDARD_CONTAINER_RESOURCES and not _is_huge_pages(name):
            errs.append(invalid(path, name, "must be a standard resource for containers"))
    elif not _is_native_resource(name) and (name.startswith("requests.") or is_label_key("requests." + name)):
        errs.append(invalid(path, name, "doesn't follow extended resource name standard"))
    return errs


def _validate_resource_quantity_value(name: str, q: Quantity, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    if q.value < 0:
        errs.append(invalid(path, str(q), "must be greater than or equal to 0"))
    if not _is_native_resource(name) and q.milli_value() % 1000 != 0:
        errs.append(invalid(path, str(q), "must be an integer"))
    return errs


def _validate_probes(ctr: Obj, grace: int | None, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    for key in ("livenessProbe", "readinessProbe", "startupProbe"):
        probe = ctr.get(key)
        if probe is None:
            continue
        ppath = f"{path}.{key}"
        errs += _validate_probe(probe, grace, ppath)
        if key == "readinessProbe" and probe.get("terminationGracePeriodSeconds") is not None:
            errs.append(invalid(f"{ppath}.terminationGracePeriodSeconds", probe["terminationGracePeriodSeconds"],
                                "must not be set for readinessProbes"))
        if key != "readinessProbe" and probe.get("successThreshold") != 1:
            errs.append(invalid(f"{ppath}.successThreshold", probe.get("successThreshold"), "must be 1"))
    return errs


def _validate_probe(probe: Obj, grace: int | None, path: str) -> list[FieldError]:
    errs = _validate_handler(probe, grace, path, ("exec", "httpGet", "tcpSocket", "grpc"))
    for key in ("initialDelaySeconds", "timeoutSeconds", "periodSeconds", "successThreshold", "failureThreshold"):
        errs += validate_nonnegative(probe.get(key), f"{path}.{key}")
    tgps = probe.get("terminationGracePeriodSeconds")
    if tgps is not None and tgps <= 0:
        errs.append(invalid(f"{path}.terminationGracePeriodSeconds", tgps, "must be greater than 0"))
    return errs


def _validate_lifecycle(lifecycle: Obj, grace: int | None, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    for key in ("postStart", "preStop"):
        if lifecycle.get(key) is not None:
            errs += _validate_handler(lifecycle[key], grace, f"{path}.{key}", ("exec", "httpGet", "tcpSocket", "sleep"))
    return errs


def _validate_handler(handler: Obj, grace: int | None, path: str, allowed: tuple[str, ...]) -> list[FieldError]:
    """Exactly one handler type (exec, httpGet, tcpSocket, grpc, sleep), and that one valid."""
    errs: list[FieldError] = []
    count = 0
    for kind in _HANDLER_TYPES:
        action = handler.get(kind)
        if action is None or kind not in allowed:
            continue
        hpath = f"{path}.{kind}"
        if count > 0:
            errs.append(forbidden(hpath, "may not specify more than 1 handler type"))
            continue
        count += 1
        if kind == "exec":
            if not action.get("command"):
                errs.append(required(f"{hpath}.command"))
        elif kind == "httpGet":
            if not action.get("path"):
                errs.append(required(f"{hpath}.path"))
            errs += validate_port_num_or_name(action.get("port"), f"{hpath}.port")
            if action.get("scheme") not in HTTP_SCHEMES:
                errs.append(not_supported(f"{hpath}.scheme", action.get("scheme") or "", HTTP_SCHEMES))
            for header in action.get("httpHeaders") or []:
                errs += [invalid(f"{hpath}.httpHeaders", header.get("name") or "", m)
                         for m in is_http_header_name(header.get("name") or "")]
        elif kind in ("tcpSocket", "grpc"):
            errs += validate_port_num_or_name(action.get("port"), f"{hpath}.port")
        elif kind == "sleep":
            seconds = action.get("seconds") or 0
            if seconds <= 0 or (grace is not None and seconds > grace):
                errs.append(invalid(f"{hpath}.seconds", seconds, "must be greater than 0 and less than "
                                                                 f"terminationGracePeriodSeconds ({grace})"))
    if count == 0:
        errs.append(required(path, "must specify a handler type"))
    return errs


def validate_tolerations(tolerations: list[Obj], path: str) -> list[FieldError]:
    """Keys are label keys; an empty key needs Exists; Exists takes no value; tolerationSeconds only
    with NoExecute."""
    errs: list[FieldError] = []
    for i, tol in enumerate(tolerations):
        idx = f"{path}[{i}]"
        key = tol.get("key") or ""
        operator = tol.get("operator") or ""
        effect = tol.get("effect") or ""
        if key:
            errs += validate_qualified_name(key, f"{idx}.key")
        if not key and operator != "Exists":
            errs.append(invalid(f"{idx}.operator", operator, "operator must be Exists when `key` is empty, which "
                                                             'means "match all values and all keys"'))
        if tol.get("tolerationSeconds") is not None and effect != "NoExecute":
            errs.append(invalid(f"{idx}.effect", effect, "effect must be 'NoExecute' when `tolerationSeconds` is set"))
        if operator in ("Equal", ""):
            msgs = is_valid_label_value(tol.get("value") or "")
            if msgs:
                errs.append(invalid(f"{idx}.operator", tol.get("value") or "", ";".join(msgs)))
        elif operator == "Exists":
            if tol.get("value"):
                errs.append(invalid(f"{idx}.operator", tol, "value must be empty when `operator` is 'Exists'"))
        else:
            errs.append(not_supported(f"{idx}.operator", operator, TOLERATION_OPERATORS))
        if effect and effect not in TAINT_EFFECTS:
            errs.append(not_supported(f"{idx}.effect", effect, TAINT_EFFECTS))
    return errs


def _validate_dns_config(config: Obj | None, policy: str | None, path: str) -> list[FieldError]:
    if policy == "None":
        if config is None:
            return [required(path, "must provide `dnsConfig` when `dnsPolicy` is None")]
        if not config.get("nameservers"):
            return [required(f"{path}.nameservers", "must provide at least one DNS nameserver when `dnsPolicy` "
                                                    "is None")]
    if config is None:
        return []
    errs: list[FieldError] = []
    nameservers = config.get("nameservers") or []
    if len(nameservers) > MAX_DNS_NAMESERVERS:
        errs.append(invalid(f"{path}.nameservers", nameservers,
                            f"must not have more than {MAX_DNS_NAMESERVERS} nameservers"))
    for i, ns in enumerate(nameservers):
        errs += validate_ip(ns, f"{path}.nameservers[{i}]")
    searches = config.get("searches") or []
    if len(searches) > MAX_DNS_SEARCH_PATHS:
        errs.append(invalid(f"{path}.searches", searches,
                            f"must not have more than {MAX_DNS_SEARCH_PATHS} search paths"))
    if len(" ".join(searches)) > MAX_DNS_SEARCH_LIST_CHARS:
        errs.append(invalid(f"{path}.searches", searches, f"must not have more than {MAX_DNS_SEARCH_LIST_CHARS} "
                                                          "characters (including spaces) in the search list"))
    for i, search in enumerate(searches):
        errs += validate_dns1123_subdomain(search.removesuffix("."), f"{path}.searches[{i}]")
    for i, option in enumerate(config.get("options") or []):
        if not option.get("name"):
            errs.append(required(f"{path}.options[{i}]", "Option.Name must not be empty"))
    return errs


# ---------------------------------------------------------------------------------------------
# Pod updates (ValidatePodUpdate) and status updates (ValidatePodStatusUpdate).
# ---------------------------------------------------------------------------------------------


def validate_pod_update(new: Obj, old: Obj) -> list[FieldError]:
    """Only images, activeDeadlineSeconds (lowered), tolerations (added) and a negative grace period
    (to 1) may change in a running pod's spec."""
    new_spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
    errs: list[FieldError] = []
    for key in ("containers", "initContainers"):
        new_ctrs, old_ctrs = new_spec.get(key) or [], old_spec.get(key) or []
        if len(new_ctrs) != len(old_ctrs):
            errs.append(forbidden(f"spec.{key}", "pod updates may not add or remove containers"))
            return errs
        for i, ctr in enumerate(new_ctrs):
            image = ctr.get("image") or ""
            if not image:
                errs.append(required(f"spec.{key}[{i}].image"))
            if image.strip() != image:
                errs.append(invalid(f"spec.{key}[{i}].image", image, "must not have leading or trailing whitespace"))
    new_deadline, old_deadline = new_spec.get("activeDeadlineSeconds"), old_spec.get("activeDeadlineSeconds")
    if new_deadline is not None:
        if not 0 <= new_deadline <= MAX_INT32:
            errs.append(invalid("spec.activeDeadlineSeconds", new_deadline,
                                f"must be between 0 and {MAX_INT32}, inclusive"))
            return errs
        if old_deadline is not None and old_deadline < new_deadline:
            errs.append(invalid("spec.activeDeadlineSeconds", new_deadline, "must be less than or equal to "
                                                                             "previous value"))
            return errs
    elif old_deadline is not None:
        errs.append(invalid("spec.activeDeadlineSeconds", None, "must not update from a positive integer to nil "
                                                                "value"))
    errs += _validate_only_added_tolerations(new_spec.get("tolerations") or [], old_spec.get("tolerations") or [])
    if semantic_equal(new_spec, old_spec):
        return errs
    munged = copy.deepcopy(new_spec)
    for key in ("containers", "initContainers"):
        for ctr, old_ctr in zip(munged.get(key) or [], old_spec.get(key) or [], strict=True):
            ctr["image"] = old_ctr.get("image")
    _set_or_pop(munged, "activeDeadlineSeconds", old_deadline)
    _set_or_pop(munged, "tolerations", old_spec.get("tolerations"))
    old_grace = old_spec.get("terminationGracePeriodSeconds")
    if old_grace is not None and old_grace < 0 and munged.get("terminationGracePeriodSeconds") == 1:
        munged["terminationGracePeriodSeconds"] = old_grace
    if not semantic_equal(munged, old_spec):
        diff = "\n".join(_diff(old_spec, munged, "spec"))
        errs.append(forbidden("spec", f"pod updates may not change fields other than {UPDATABLE_POD_SPEC_FIELDS}"
                                      f"\n{diff}"))
    return errs


def _set_or_pop(obj: Obj, key: str, value: Any) -> None:
    if value is None:
        obj.pop(key, None)
    else:
        obj[key] = value


def _validate_only_added_tolerations(new: list[Obj], old: list[Obj]) -> list[FieldError]:
    """Every old toleration must still be there (its tolerationSeconds may change)."""
    for old_tol in old:
        if not any(semantic_equal({**old_tol, "tolerationSeconds": t.get("tolerationSeconds")}, t) for t in new):
            return [forbidden("spec.tolerations", "existing toleration can not be modified except its "
                                                  "tolerationSeconds")]
    return validate_tolerations(new, "spec.tolerations")


def _diff(old: Any, new: Any, path: str) -> list[str]:
    """A line per changed leaf, `- path: old` / `+ path: new`, in place of upstream's cmp.Diff."""
    if semantic_equal(old, new):
        return []
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[str] = []
        for key in sorted(set(old) | set(new)):
            out += _diff(old.get(key), new.get(key), f"{path}.{key}")
        return out
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        out = []
        for i, (a, b) in enumerate(zip(old, new, strict=True)):
            out += _diff(a, b, f"{path}[{i}]")
        return out
    lines = []
    if old is not None:
        lines.append(f"- {path}: {_render(old)}")
    if new is not None:
        lines.append(f"+ {path}: {_render(new)}")
    return lines


def _render(value: Any) -> str:
    return invalid("", value, "").message().removeprefix("Invalid value: ").removesuffix(": ")


def sync_pod_ips(status: Obj) -> None:
    """The v1 round trip: podIP is podIPs[0] (podIP wins when they differ), likewise hostIP/hostIPs."""
    for single, plural in (("podIP", "podIPs"), ("hostIP", "hostIPs")):
        one, many = status.get(single), status.get(plural) or []
        if one and (not many or many[0].get("ip") != one):
            status[plural] = [{"ip": one}]
        elif many and not one:
            status[single] = many[0].get("ip")


def validate_pod_status_update(new: Obj, old: Obj) -> list[FieldError]:
    """qosClass is fixed at creation; IPs valid and not repeated; a container that terminated under
    restartPolicy Never (or succeeded under OnFailure) stays terminated."""
    status, old_status = new.get("status") or {}, old.get("status") or {}
    errs: list[FieldError] = []
    if old_status.get("qosClass"):
        errs += validate_immutable(status.get("qosClass") or "", old_status["qosClass"], "status.qosClass")
    if status.get("nominatedNodeName"):
        errs += [invalid("status.nominatedNodeName", status["nominatedNodeName"], m)
                 for m in name_is_dns_subdomain(status["nominatedNodeName"], False)]
    for plural in ("podIPs", "hostIPs"):
        seen: set[str] = set()
        for i, entry in enumerate(status.get(plural) or []):
            ip = entry.get("ip") or ""
            errs += validate_ip(ip, f"status.{plural}[{i}]")
            if ip in seen:
                errs.append(duplicate(f"status.{plural}[{i}]", entry))
            seen.add(ip)
    policy = (old.get("spec") or {}).get("restartPolicy")
    if policy != "Always":
        for key in ("containerStatuses", "initContainerStatuses"):
            news = {s.get("name"): s for s in status.get(key) or []}
            for i, old_cs in enumerate(old_status.get(key) or []):
                terminated = (old_cs.get("state") or {}).get("terminated")
                if terminated is None or (policy == "OnFailure" and terminated.get("exitCode")):
                    continue
                new_cs = news.get(old_cs.get("name"))
                if new_cs is not None and (new_cs.get("state") or {}).get("terminated") is None:
                    errs.append(forbidden(f"status.{key}[{i}].state", "may not be transitioned to non-terminated "
                                                                      "state"))
    return errs


# ---------------------------------------------------------------------------------------------
# The strategy.
# ---------------------------------------------------------------------------------------------


class PodStrategy(Strategy):
    """Pods: defaulted like upstream's decoder + admission (priority), validated like ValidatePod; a
    running pod's spec is nearly immutable; status goes through /status, nodeName through /binding."""

    has_status_subresource = True

    def prepare_for_create(self, obj: Obj) -> None:
        """Defaults and a fresh status: Pending with its QoS class."""
        default_pod(obj)
        spec = obj["spec"]  # priority and preemptionPolicy: the Priority admission plugin's (admission/priority.py)
        obj["status"] = {"phase": "Pending", "qosClass": compute_qos_class(spec)}

    def validate(self, obj: Obj) -> list[FieldError]:
        spec = obj.get("spec") or {}
        errs = validate_pod_spec(spec, "spec")
        for key in ("containers", "initContainers"):
            for i, ctr in enumerate(spec.get(key) or []):
                image = ctr.get("image") or ""
                if image.strip() != image:
                    errs.append(invalid(f"spec.{key}[{i}].image", image,
                                        "must not have leading or trailing whitespace"))
        return errs

    def prepare_for_update(self, new: Obj, old: Obj) -> None:
        """Decoder defaults apply to the new object too; fields admission filled on create (priority)
        are kept when a client leaves them out."""
        default_pod(new)
        spec, old_spec = new["spec"], old.get("spec") or {}
        for key in ("priority", "preemptionPolicy"):
            if spec.get(key) is None and old_spec.get(key) is not None:
                spec[key] = old_spec[key]
        super().prepare_for_update(new, old)

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        errs = validate_pod_update(new, old)
        if not semantic_equal(new.get("status"), old.get("status")):
            errs += validate_pod_status_update(new, old)
        return errs

    def validate_create(self, obj: Obj) -> list[FieldError]:
        """ValidatePodCreate: ephemeral containers come only through their subresource."""
        if (obj.get("spec") or {}).get("ephemeralContainers"):
            return [forbidden("spec.ephemeralContainers", "cannot be set on create")]
        return []

    def prepare_for_subresource_update(self, subresource: str, new: Obj, old: Obj) -> None:
        """pods/ephemeralcontainers (upstream podEphemeralContainersStrategy.PrepareForUpdate,
        dropNonEphemeralContainerUpdates): the stored pod with the new spec.ephemeralContainers."""
        if subresource != "ephemeralcontainers":
            super().prepare_for_subresource_update(subresource, new, old)
            return
        ephemeral = (new.get("spec") or {}).get("ephemeralContainers")
        meta = new.get("metadata") or {}
        kept = copy.deepcopy(old)
        for key in ("name", "namespace", "resourceVersion", "uid"):
            if key in meta:
                kept["metadata"][key] = meta[key]
        spec = kept.setdefault("spec", {})
        if ephemeral:
            spec["ephemeralContainers"] = ephemeral
            for container in ephemeral:
                default_ephemeral_container(container)
        else:
            spec.pop("ephemeralContainers", None)
        new.clear()
        new.update(kept)

    def validate_subresource_update(self, subresource: str, new: Obj, old: Obj) -> list[FieldError]:
        if subresource == "ephemeralcontainers":
            return validate_ephemeral_containers_update(new, old)
        return self.validate_update(new, old)

    def prepare_for_status_update(self, new: Obj, old: Obj) -> None:
        """Only .status changes; podIP/podIPs agree; a kubelet that drops qosClass gets it back."""
        super().prepare_for_status_update(new, old)
        status = new.setdefault("status", {})
        sync_pod_ips(status)
        old_qos = (old.get("status") or {}).get("qosClass")
        if not status.get("qosClass") and old_qos:
            status["qosClass"] = old_qos

    def deletion_grace_period(self, obj: Obj, requested: int | None) -> int:
        """The requested period, else the pod's terminationGracePeriodSeconds; 0 for a pod never
        scheduled or already finished (no kubelet to wait for); a negative period means 1."""
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        period = requested if requested is not None else spec.get("terminationGracePeriodSeconds") or 0
        if not spec.get("nodeName") or status.get("phase") in ("Succeeded", "Failed"):
            period = 0
        return 1 if period < 0 else period

    def field_values(self, obj: Obj) -> dict[str, str]:
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        pod_ips = status.get("podIPs") or []
        values = super().field_values(obj)
        values.update({
            "spec.nodeName": spec.get("nodeName") or "",
            "spec.restartPolicy": spec.get("restartPolicy") or "",
            "spec.schedulerName": spec.get("schedulerName") or "",
            "spec.serviceAccountName": spec.get("serviceAccountName") or "",
            "spec.hostNetwork": "true" if spec.get("hostNetwork") else "false",
            "status.phase": status.get("phase") or "",
            "status.podIP": (pod_ips[0].get("ip") if pod_ips else status.get("podIP")) or "",
            "status.nominatedNodeName": status.get("nominatedNodeName") or "",
        })
        return values
