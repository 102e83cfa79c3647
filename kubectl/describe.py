"""`mkubectl describe`: kubectl's describers for Deployment, ReplicaSet, Pod, Node, Namespace, Service,
Endpoints and EndpointSlice (and its generic one for any other kind), with the Events section.

Each describer writes kubectl's lines, tabs included, through a prefix writer (two spaces per
level) and the text is aligned by Go's tabwriter with describe's settings (0, 8, 2, ' '), so the
columns come out where kubectl puts them: a tab-free line ends a column block, the Events table is
aligned on its own. Timestamps are RFC 1123 with a numeric zone in local time, ages are
HumanDuration, events are those whose involvedObject matches the object (name, namespace, kind and
uid; pods without the kind, as upstream does), sorted by time.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any

from kubectl.context import Context
from kubectl.printers import format_labels
from kubectl.tabwriter import tabbed
from machinery.api.resources import ResourceInfo, resource_for
from machinery.client import ApiError
from machinery.quantity import Quantity, parse_quantity
from machinery.selectors import escape_field_value
from machinery.timeutil import human_duration
from machinery.timeutil import parse_rfc3339 as parse_time
from machinery.timeutil import translate_timestamp_since as since
from machinery.types import Obj
from machinery.volumeutil import access_modes_short, claim_class, is_default_class, pod_claim_names, volume_class

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
MAX_ANNOTATION_LEN = 140
HASH_LABEL = "pod-template-hash"
NODE_ROLE_PREFIX = "node-role.kubernetes.io/"


class PrefixWriter:
    """kubectl's PrefixWriter over a tabwriter: `write(level, text)` indents by two spaces per level;
    `flush()` ends the current alignment (what DescribeEvents does before its table)."""

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._done: list[str] = []

    def write(self, level: int, text: str) -> None:
        self._parts.append("  " * level + text)

    def line(self, text: str = "") -> None:
        self._parts.append(text + "\n")

    def flush(self) -> None:
        if self._parts:
            self._done.append(tabbed("".join(self._parts)))
            self._parts = []

    def raw(self) -> str:
        """What was written, tabs left unaligned (kubectl's printTemplate writes no tabwriter)."""
        return "".join(self._parts)

    def text(self) -> str:
        self.flush()
        return "".join(self._done)


# -- small helpers ---------------------------------------------------------------------------------


def _d(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _l(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def rfc1123z(value: Any) -> str:
    """time.RFC1123Z in local time, as metav1.Time formats itself ("<unset>"-free: empty is Go's zero)."""
    t = parse_time(value)
    if t is None:
        return "Mon, 01 Jan 0001 00:00:00 +0000"
    return t.astimezone().strftime("%a, %d %b %Y %H:%M:%S %z")


def _go(value: Any) -> str:
    """fmt's %v of a JSON value."""
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + " ".join(_go(v) for v in value) + "]"
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{_go(v)}" for k, v in sorted(value.items())) + "]"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def label_selector_string(selector: Any) -> str:
    """metav1.LabelSelectorAsSelector(...).String(): requirements sorted by key; "" selects everything."""
    selector = _d(selector)
    reqs: list[tuple[str, str]] = []
    for key, value in _d(selector.get("matchLabels")).items():
        reqs.append((key, f"{key}={value}"))
    for expr in _l(selector.get("matchExpressions")):
        key, op, values = expr.get("key", ""), expr.get("operator", ""), sorted(_l(expr.get("values")))
        if op == "In":
            reqs.append((key, f"{key} in ({','.join(values)})"))
        elif op == "NotIn":
            reqs.append((key, f"{key} notin ({','.join(values)})"))
        elif op == "Exists":
            reqs.append((key, key))
        elif op == "DoesNotExist":
            reqs.append((key, f"!{key}"))
    reqs.sort(key=lambda r: r[0])
    return ",".join(text for _, text in reqs)


def format_label_selector(selector: Any) -> str:
    """metav1.FormatLabelSelector: like the above, but <none> when it selects everything."""
    text = label_selector_string(selector)
    return text or "<none>"


def _int_or_string(value: Any) -> str:
    return _go(value) if value is not None else "<nil>"


def print_labels_multiline(w: PrefixWriter, title: str, labels: Any, initial_indent: str = "",
                           inner_indent: str = "\t") -> None:
    w.write(0, f"{initial_indent}{title}:{inner_indent}")
    labels = _d(labels)
    if not labels:
        w.line("<none>")
        return
    for i, key in enumerate(sorted(labels)):
        if i:
            w.write(0, initial_indent + inner_indent)
        w.write(0, f"{key}={labels[key]}\n")


def print_annotations_multiline(w: PrefixWriter, title: str, annotations: Any) -> None:
    w.write(0, f"{title}:\t")
    annotations = {k: v for k, v in _d(annotations).items() if k != LAST_APPLIED}
    if not annotations:
        w.line("<none>")
        return
    for i, key in enumerate(sorted(annotations)):
        if i:
            w.write(0, "\t")
        value = str(annotations[key]).removesuffix("\n")
        if len(value) + len(key) + 2 > MAX_ANNOTATION_LEN or "\n" in value:
            w.write(0, f"{key}:\n")
            for part in value.split("\n"):
                short = part if len(part) <= MAX_ANNOTATION_LEN - 2 else part[:MAX_ANNOTATION_LEN - 2] + "..."
                w.write(0, f"\t  {short}\n")
        else:
            w.write(0, f"{key}: {value}\n")


def print_tolerations_multiline(w: PrefixWriter, title: str, tolerations: Any) -> None:
    w.write(0, f"{title}:\t")
    tolerations = sorted(_l(tolerations), key=lambda t: _d(t).get("key") or "")
    if not tolerations:
        w.line("<none>")
        return
    for i, t in enumerate(tolerations):
        if i:
            w.write(0, "\t")
        key, value, effect = t.get("key") or "", t.get("value") or "", t.get("effect") or ""
        text = key + (f"={value}" if value else "") + (f":{effect}" if effect else "")
        if t.get("operator") == "Exists" and not value:
            text += " op=Exists" if key or effect else "op=Exists"
        if t.get("tolerationSeconds") is not None:
            text += f" for {t['tolerationSeconds']}s"
        w.write(0, text + "\n")


def print_taints_multiline(w: PrefixWriter, title: str, taints: Any) -> None:
    w.write(0, f"{title}:\t")
    taints = sorted(_l(taints), key=lambda t: f"{t.get('effect', '')},{t.get('key', '')}")
    if not taints:
        w.line("<none>")
        return
    for i, t in enumerate(taints):
        if i:
            w.write(0, "\t")
        key, value, effect = t.get("key", ""), t.get("value"), t.get("effect", "")
        text = f"{key}={value}:{effect}" if value else f"{key}:{effect}"
        w.write(0, text + "\n")


def controller_of(obj: Obj) -> Obj | None:
    for ref in _l(_d(obj.get("metadata")).get("ownerReferences")):
        if ref.get("controller"):
            return ref
    return None


def print_controller(obj: Obj) -> str:
    ref = controller_of(obj)
    return f"{ref.get('kind')}/{ref.get('name')}" if ref else ""


# -- quantities (just enough for the node's allocated-resources table) ----------------------------

_ZERO = Quantity(Fraction(0))


def quantity(value: Any) -> Quantity:
    """resource.ParseQuantity of a wire value; a missing or malformed one counts as zero."""
    try:
        return parse_quantity(value)
    except (ValueError, TypeError):
        return _ZERO


def pod_requests_and_limits(pod: Obj) -> tuple[dict[str, Quantity], dict[str, Quantity]]:
    """resourcehelper.PodRequestsAndLimits: the containers' sum, at least each init container's."""
    spec = _d(pod.get("spec"))
    reqs: dict[str, Quantity] = {}
    limits: dict[str, Quantity] = {}
    for c in _l(spec.get("containers")):
        res = _d(c.get("resources"))
        for name, value in _d(res.get("requests")).items():
            reqs[name] = reqs.get(name, _ZERO) + quantity(value)
        for name, value in _d(res.get("limits")).items():
            limits[name] = limits.get(name, _ZERO) + quantity(value)
    for c in _l(spec.get("initContainers")):
        res = _d(c.get("resources"))
        for name, value in _d(res.get("requests")).items():
            reqs[name] = max(reqs.get(name, _ZERO), quantity(value))
        for name, value in _d(res.get("limits")).items():
            limits[name] = max(limits.get(name, _ZERO), quantity(value))
    for name, value in _d(spec.get("overhead")).items():
        reqs[name] = reqs.get(name, _ZERO) + quantity(value)
        if name in limits:
            limits[name] += quantity(value)
    return reqs, limits


def qos_class(pod: Obj) -> str:
    given = _d(pod.get("status")).get("qosClass")
    if given:
        return str(given)
    requests: dict[str, Quantity] = {}
    limits: dict[str, Quantity] = {}
    containers = _l(_d(pod.get("spec")).get("containers")) + _l(_d(pod.get("spec")).get("initContainers"))
    guaranteed = True
    for c in containers:
        res = _d(c.get("resources"))
        req = {k: quantity(v) for k, v in _d(res.get("requests")).items() if k in ("cpu", "memory")}
        lim = {k: quantity(v) for k, v in _d(res.get("limits")).items() if k in ("cpu", "memory")}
        requests.update({k: v for k, v in req.items() if not v.is_zero()})
        limits.update({k: v for k, v in lim.items() if not v.is_zero()})
        if set(lim) != {"cpu", "memory"} or any(req.get(k, lim[k]) != lim[k] for k in lim):
            guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


# -- pod templates and containers --------------------------------------------------------------------


def _ports(ports: list[Any], field: str) -> str:
    return ", ".join(f"{p.get(field, 0) or 0}/{p.get('protocol') or 'TCP'}" for p in ports)


def describe_probe(probe: Obj) -> str:
    attrs = (f"delay={probe.get('initialDelaySeconds') or 0}s timeout={probe.get('timeoutSeconds') or 0}s "
             f"period={probe.get('periodSeconds') or 0}s #success={probe.get('successThreshold') or 0} "
             f"#failure={probe.get('failureThreshold') or 0}")
    if probe.get("exec") is not None:
        return f"exec {_go(_l(_d(probe['exec']).get('command')))} {attrs}"
    if probe.get("httpGet") is not None:
        get = _d(probe["httpGet"])
        scheme = str(get.get("scheme") or "HTTP").lower()
        port = str(get.get("port", ""))
        host = str(get.get("host") or "")
        hostport = (f"[{host}]:{port}" if ":" in host else f"{host}:{port}") if port else host
        return f"http-get {scheme}://{hostport}{get.get('path') or ''} {attrs}"
    if probe.get("tcpSocket") is not None:
        tcp = _d(probe["tcpSocket"])
        return f"tcp-socket {tcp.get('host') or ''}:{tcp.get('port', '')} {attrs}"
    if probe.get("grpc") is not None:
        grpc = _d(probe["grpc"])
        return f"grpc <pod>:{grpc.get('port')} {grpc.get('service') or ''} {attrs}"
    return f"unknown {attrs}"


_FIELD_PATHS: dict[str, Callable[[Obj], Any]] = {
    "metadata.name": lambda p: _d(p.get("metadata")).get("name"),
    "metadata.namespace": lambda p: _d(p.get("metadata")).get("namespace"),
    "metadata.uid": lambda p: _d(p.get("metadata")).get("uid"),
    "spec.nodeName": lambda p: _d(p.get("spec")).get("nodeName"),
    "spec.serviceAccountName": lambda p: _d(p.get("spec")).get("serviceAccountName"),
    "status.hostIP": lambda p: _d(p.get("status")).get("hostIP"),
    "status.podIP": lambda p: _d(p.get("status")).get("podIP"),
    "status.podIPs": lambda p: ",".join(i.get("ip", "") for i in _l(_d(p.get("status")).get("podIPs"))),
}


def _field_value(pod: Obj | None, path: str) -> str:
    if pod is None:
        return ""
    match = re.fullmatch(r"metadata\.(labels|annotations)\['(.+)'\]", path)
    if match:
        return str(_d(_d(pod.get("metadata")).get(match.group(1))).get(match.group(2), ""))
    getter = _FIELD_PATHS.get(path)
    value = getter(pod) if getter else None
    return "" if value is None else str(value)


def _describe_status(w: PrefixWriter, name: str, state: Obj) -> None:
    if state.get("running") is not None:
        w.write(2, f"{name}:\tRunning\n")
        w.write(3, f"Started:\t{rfc1123z(_d(state['running']).get('startedAt'))}\n")
    elif state.get("waiting") is not None:
        w.write(2, f"{name}:\tWaiting\n")
        if _d(state["waiting"]).get("reason"):
            w.write(3, f"Reason:\t{state['waiting']['reason']}\n")
    elif state.get("terminated") is not None:
        t = _d(state["terminated"])
        w.write(2, f"{name}:\tTerminated\n")
        if t.get("reason"):
            w.write(3, f"Reason:\t{t['reason']}\n")
        if t.get("message"):
            w.write(3, f"Message:\t{t['message']}\n")
        w.write(3, f"Exit Code:\t{t.get('exitCode', 0)}\n")
        if (t.get("signal") or 0) > 0:
            w.write(3, f"Signal:\t{t['signal']}\n")
        w.write(3, f"Started:\t{rfc1123z(t.get('startedAt'))}\n")
        w.write(3, f"Finished:\t{rfc1123z(t.get('finishedAt'))}\n")
    else:
        w.write(2, f"{name}:\tWaiting\n")


def _describe_resources(w: PrefixWriter, resources: Obj, level: int) -> None:
    for title, key in (("Limits", "limits"), ("Requests", "requests")):
        values = _d(resources.get(key))
        if values:
            w.write(level, f"{title}:\n")
        for name in sorted(values):
            w.write(level + 1, f"{name}:\t{values[name]}\n")


def describe_containers(w: PrefixWriter, label: str, containers: list[Any], statuses: list[Any] | None,
                        pod: Obj | None, space: str) -> None:
    by_name = {s.get("name"): s for s in statuses or []}
    w.write(0, f"{space}{label}:{'' if containers else ' <none>'}\n")
    indent = " " if space else ""
    for c in containers:
        status = by_name.get(c.get("name")) if statuses is not None else None
        ok = status is not None
        w.write(1, f"{indent}{c.get('name')}:\n")
        if ok:
            w.write(2, f"Container ID:\t{status.get('containerID') or ''}\n")  # type: ignore[union-attr]
        w.write(2, f"Image:\t{c.get('image') or ''}\n")
        if ok:
            w.write(2, f"Image ID:\t{status.get('imageID') or ''}\n")  # type: ignore[union-attr]
        ports = _l(c.get("ports"))
        port_text = _ports(ports, "containerPort")
        if "," in port_text:
            w.write(2, f"Ports:\t{port_text}\n")
        else:
            w.write(2, f"Port:\t{port_text or '<none>'}\n")
        host_text = _ports(ports, "hostPort")
        if "," in host_text:
            w.write(2, f"Host Ports:\t{host_text}\n")
        else:
            w.write(2, f"Host Port:\t{host_text or '<none>'}\n")
        for title, key in (("Command", "command"), ("Args", "args")):
            if _l(c.get(key)):
                w.write(2, f"{title}:\n")
                for item in c[key]:
                    for part in str(item).split("\n"):
                        w.write(3, f"{part}\n")
        if ok:
            _describe_status(w, "State", _d(status.get("state")))  # type: ignore[union-attr]
            last = _d(status.get("lastState"))  # type: ignore[union-attr]
            if last.get("terminated") is not None:
                _describe_status(w, "Last State", last)
            w.write(2, f"Ready:\t{'True' if status.get('ready') else 'False'}\n")  # type: ignore[union-attr]
            w.write(2, f"Restart Count:\t{status.get('restartCount') or 0}\n")  # type: ignore[union-attr]
        _describe_resources(w, _d(c.get("resources")), 2)
        for title, key in (("Liveness", "livenessProbe"), ("Readiness", "readinessProbe"),
                           ("Startup", "startupProbe")):
            if c.get(key) is not None:
                w.write(2, f"{title}:\t{describe_probe(_d(c[key]))}\n")
        env_from = _l(c.get("envFrom"))
        if env_from:
            w.write(2, "Environment Variables from:\n")
            for e in env_from:
                if e.get("configMapRef") is not None:
                    kind, ref = "ConfigMap", _d(e["configMapRef"])
                else:
                    kind, ref = "Secret", _d(e.get("secretRef"))
                optional = "true" if ref.get("optional") else "false"
                prefix = f" with prefix '{e['prefix']}'" if e.get("prefix") else ""
                w.write(3, f"{ref.get('name', '')}\t{kind}{prefix}\tOptional: {optional}\n")
        env = _l(c.get("env"))
        w.write(2, f"Environment:{'' if env else chr(9) + '<none>'}\n")
        for e in env:
            source = e.get("valueFrom")
            if source is None:
                for i, part in enumerate(str(e.get("value") or "").split("\n")):
                    w.write(3, f"{e.get('name')}:\t{part}\n" if i == 0 else f"\t{part}\n")
                continue
            source = _d(source)
            if source.get("fieldRef") is not None:
                ref = _d(source["fieldRef"])
                value = _field_value(pod, str(ref.get("fieldPath", "")))
                w.write(3, f"{e.get('name')}:\t{value} ({ref.get('apiVersion', 'v1')}:{ref.get('fieldPath')})\n")
            elif source.get("resourceFieldRef") is not None:
                ref = _d(source["resourceFieldRef"])
                resource = str(ref.get("resource", ""))
                kind, _, name = resource.partition(".")
                value = str(_d(_d(c.get("resources")).get(kind)).get(name, "0"))
                if value == "0" and resource in ("limits.cpu", "limits.memory"):
                    value = "node allocatable"
                w.write(3, f"{e.get('name')}:\t{value} ({resource})\n")
            elif source.get("secretKeyRef") is not None:
                ref = _d(source["secretKeyRef"])
                optional = "true" if ref.get("optional") else "false"
                w.write(3, f"{e.get('name')}:\t<set to the key '{ref.get('key')}' in secret '{ref.get('name')}'>\t"
                           f"Optional: {optional}\n")
            elif source.get("configMapKeyRef") is not None:
                ref = _d(source["configMapKeyRef"])
                optional = "true" if ref.get("optional") else "false"
                w.write(3, f"{e.get('name')}:\t<set to the key '{ref.get('key')}' of config map "
                           f"'{ref.get('name')}'>\tOptional: {optional}\n")
        mounts = sorted(_l(c.get("volumeMounts")), key=lambda m: m.get("mountPath", ""))
        w.write(2, f"Mounts:{'' if mounts else chr(9) + '<none>'}\n")
        for m in mounts:
            flags = ["ro" if m.get("readOnly") else "rw"]
            if m.get("subPath"):
                flags.append(f'path="{m["subPath"]}"')
            w.write(3, f"{m.get('mountPath')} from {m.get('name')} ({','.join(flags)})\n")
        devices = sorted(_l(c.get("volumeDevices")), key=lambda d: d.get("devicePath", ""))
        if devices:
            w.write(2, "Devices:\n")
            for dev in devices:
                w.write(3, f"{dev.get('devicePath')} from {dev.get('name')}\n")


def describe_volumes(w: PrefixWriter, volumes: list[Any], space: str) -> None:
    if not volumes:
        w.write(0, f"{space}Volumes:\t<none>\n")
        return
    w.write(0, f"{space}Volumes:\n")
    indent = " " if space else ""
    for v in volumes:
        w.write(1, f"{indent}{v.get('name')}:\n")
        if v.get("hostPath") is not None:
            hp = _d(v["hostPath"])
            w.write(2, f"Type:\tHostPath (bare host directory volume)\n    Path:\t{hp.get('path', '')}\n"
                       f"    HostPathType:\t{hp.get('type') or '<none>'}\n")
        elif v.get("emptyDir") is not None:
            ed = _d(v["emptyDir"])
            size = ed.get("sizeLimit")
            w.write(2, "Type:\tEmptyDir (a temporary directory that shares a pod's lifetime)\n"
                       f"    Medium:\t{ed.get('medium') or ''}\n"
                       f"    SizeLimit:\t{size if size and quantity(size).value > 0 else '<unset>'}\n")
        elif v.get("secret") is not None:
            s = _d(v["secret"])
            w.write(2, f"Type:\tSecret (a volume populated by a Secret)\n    SecretName:\t{s.get('secretName', '')}\n"
                       f"    Optional:\t{'true' if s.get('optional') else 'false'}\n")
        elif v.get("configMap") is not None:
            cm = _d(v["configMap"])
            w.write(2, f"Type:\tConfigMap (a volume populated by a ConfigMap)\n    Name:\t{cm.get('name', '')}\n"
                       f"    Optional:\t{'true' if cm.get('optional') else 'false'}\n")
        elif v.get("persistentVolumeClaim") is not None:
            pvc = _d(v["persistentVolumeClaim"])
            w.write(2, "Type:\tPersistentVolumeClaim (a reference to a PersistentVolumeClaim in the same namespace)\n"
                       f"    ClaimName:\t{pvc.get('claimName', '')}\n"
                       f"    ReadOnly:\t{'true' if pvc.get('readOnly') else 'false'}\n")
        elif v.get("nfs") is not None:
            nfs = _d(v["nfs"])
            w.write(2, "Type:\tNFS (an NFS mount that lasts the lifetime of a pod)\n"
                       f"    Server:\t{nfs.get('server', '')}\n    Path:\t{nfs.get('path', '')}\n"
                       f"    ReadOnly:\t{'true' if nfs.get('readOnly') else 'false'}\n")
        elif v.get("downwardAPI") is not None:
            w.write(2, "Type:\tDownwardAPI (a volume populated by information about the pod)\n    Items:\n")
            for item in _l(_d(v["downwardAPI"]).get("items")):
                if item.get("fieldRef") is not None:
                    w.write(3, f"{_d(item['fieldRef']).get('fieldPath')} -> {item.get('path')}\n")
                if item.get("resourceFieldRef") is not None:
                    w.write(3, f"{_d(item['resourceFieldRef']).get('resource')} -> {item.get('path')}\n")
        elif v.get("projected") is not None:
            w.write(2, "Type:\tProjected (a volume that contains injected data from multiple sources)\n")
            for source in _l(_d(v["projected"]).get("sources")):
                if source.get("secret") is not None:
                    s = _d(source["secret"])
                    w.write(2, f"SecretName:\t{s.get('name', '')}\n    Optional:\t"
                               f"{'true' if s.get('optional') else 'false'}\n")
                elif source.get("downwardAPI") is not None:
                    w.write(2, "DownwardAPI:\ttrue\n")
                elif source.get("configMap") is not None:
                    cm = _d(source["configMap"])
                    w.write(2, f"ConfigMapName:\t{cm.get('name', '')}\n    Optional:\t"
                               f"{'true' if cm.get('optional') else 'false'}\n")
                elif source.get("serviceAccountToken") is not None:
                    seconds = _d(source["serviceAccountToken"]).get("expirationSeconds")
                    w.write(2, f"TokenExpirationSeconds:\t{seconds}\n")
        else:
            w.write(1, "<unknown>\n")


def describe_pod_template(w: PrefixWriter, template: Obj | None) -> None:
    w.write(0, "Pod Template:\n")
    if template is None:
        w.write(1, "<unset>")
        return
    meta, spec = _d(template.get("metadata")), _d(template.get("spec"))
    print_labels_multiline(w, "  Labels", meta.get("labels"))
    if meta.get("annotations"):
        print_annotations_multiline(w, "  Annotations", meta.get("annotations"))
    if spec.get("serviceAccountName"):
        w.write(1, f"Service Account:\t{spec['serviceAccountName']}\n")
    if _l(spec.get("initContainers")):
        describe_containers(w, "Init Containers", spec["initContainers"], None, None, "  ")
    describe_containers(w, "Containers", _l(spec.get("containers")), None, None, "  ")
    describe_volumes(w, _l(spec.get("volumes")), "  ")
    if spec.get("priorityClassName"):
        w.write(1, f"Priority Class Name:\t{spec['priorityClassName']}\n")
    print_labels_multiline(w, "  Node-Selectors", spec.get("nodeSelector"))
    print_tolerations_multiline(w, "  Tolerations", spec.get("tolerations"))


def describe_events(w: PrefixWriter, events: list[Obj] | None) -> None:
    if events is None:
        return
    if not events:
        w.write(0, "Events:\t<none>\n")
        return
    w.flush()

    def event_time(e: Obj) -> datetime:
        series = _d(e.get("series"))
        for value in (series.get("lastObservedTime"), e.get("lastTimestamp"), e.get("eventTime")):
            t = parse_time(value)
            if t is not None:
                return t
        return datetime.min.replace(tzinfo=UTC)

    w.write(0, "Events:\n  Type\tReason\tAge\tFrom\tMessage\n")
    w.write(1, "----\t------\t----\t----\t-------\n")
    for e in sorted(events, key=event_time):
        first = since(e.get("eventTime")) if parse_time(e.get("eventTime")) else since(e.get("firstTimestamp"))
        series = e.get("series")
        if series:
            interval = f"{since(_d(series).get('lastObservedTime'))} (x{_d(series).get('count', 0)} over {first})"
        elif (e.get("count") or 0) > 1:
            interval = f"{since(e.get('lastTimestamp'))} (x{e['count']} over {first})"
        else:
            interval = first
        source = _d(e.get("source")).get("component") or e.get("reportingComponent") or ""
        w.write(1, f"{e.get('type', '')}\t{e.get('reason', '')}\t{interval}\t{source}\t"
                   f"{str(e.get('message') or '').strip()}\n")


# -- fetching what describers need -------------------------------------------------------------------


EVENTS = resource_for("", "events")
PODS = resource_for("", "pods")
REPLICASETS = resource_for("apps", "replicasets")
LEASES = resource_for("coordination.k8s.io", "leases")


async def search_events(ctx: Context, obj: Obj, kind: str | None, uid: str | None = None) -> list[Obj] | None:
    """Events about `obj` (involvedObject name, namespace, kind, uid), or None if they cannot be read."""
    meta = _d(obj.get("metadata"))
    namespace = meta.get("namespace") or ""
    terms = {"involvedObject.name": meta.get("name", ""), "involvedObject.namespace": namespace}
    if kind:
        terms["involvedObject.kind"] = kind
    uid = meta.get("uid") if uid is None else uid
    if uid:
        terms["involvedObject.uid"] = uid
    selector = ",".join(f"{k}={escape_field_value(str(v))}" for k, v in sorted(terms.items()))
    assert EVENTS is not None
    try:
        listed = await ctx.client.request("GET", EVENTS.collection_path(namespace or None),
                                          params={"fieldSelector": selector, "limit": 500})
    except Exception:
        return None
    return list(listed.get("items") or [])


async def _list(ctx: Context, info: ResourceInfo | None, namespace: str | None, **params: Any) -> list[Obj]:
    assert info is not None
    items: list[Obj] = []
    token = ""
    while True:
        page = await ctx.client.request("GET", info.collection_path(namespace),
                                        params={**params, "limit": 500, "continue": token or None})
        items.extend(page.get("items") or [])
        token = (page.get("metadata") or {}).get("continue") or ""
        if not token:
            return items


async def pod_status_for_controller(ctx: Context, namespace: str, selector: Any, uid: str) -> tuple[int, ...]:
    running = waiting = succeeded = failed = 0
    for pod in await _list(ctx, PODS, namespace, labelSelector=label_selector_string(selector) or None):
        ref = controller_of(pod)
        if ref is None or ref.get("uid") != uid:
            continue
        phase = _d(pod.get("status")).get("phase")
        if phase == "Running":
            running += 1
        elif phase == "Pending":
            waiting += 1
        elif phase == "Succeeded":
            succeeded += 1
        elif phase == "Failed":
            failed += 1
    return running, waiting, succeeded, failed


def equal_ignore_hash(t1: Obj, t2: Obj) -> bool:
    """deploymentutil.EqualIgnoreHash: templates equal apart from the pod-template-hash label."""
    l1 = dict(_d(_d(t1.get("metadata")).get("labels")))
    l2 = dict(_d(_d(t2.get("metadata")).get("labels")))
    l1.pop(HASH_LABEL, None)
    l2.pop(HASH_LABEL, None)
    if l1 != l2:
        return False

    def without_labels(t: Obj) -> Obj:
        meta = {k: v for k, v in _d(t.get("metadata")).items() if k != "labels" and v not in (None, {}, [])}
        return {**{k: v for k, v in t.items() if k != "metadata"}, "metadata": meta}

    return without_labels(t1) == without_labels(t2)


async def replica_sets_of(ctx: Context, deployment: Obj) -> tuple[list[Obj], Obj | None]:
    """(old ReplicaSets, the new one) controlled by the deployment, as deploymentutil finds them."""
    meta, spec = _d(deployment.get("metadata")), _d(deployment.get("spec"))
    selector = label_selector_string(spec.get("selector"))
    owned = [rs for rs in await _list(ctx, REPLICASETS, meta.get("namespace"), labelSelector=selector or None)
             if (controller_of(rs) or {}).get("uid") == meta.get("uid")]
    by_age = sorted(owned, key=lambda rs: (_d(rs.get("metadata")).get("creationTimestamp") or "",
                                           _d(rs.get("metadata")).get("name") or ""))
    new = next((rs for rs in by_age if equal_ignore_hash(_d(_d(rs.get("spec")).get("template")),
                                                         _d(spec.get("template")))), None)
    old = [rs for rs in owned if rs is not new]
    return old, new


# -- describers ------------------------------------------------------------------------------------------


async def describe_pod(ctx: Context, pod: Obj) -> str:
    events = await search_events(ctx, pod, None)
    meta, spec, status = _d(pod.get("metadata")), _d(pod.get("spec")), _d(pod.get("status"))
    w = PrefixWriter()
    w.write(0, f"Name:\t{meta.get('name', '')}\n")
    w.write(0, f"Namespace:\t{meta.get('namespace', '')}\n")
    if spec.get("priority") is not None:
        w.write(0, f"Priority:\t{spec['priority']}\n")
    if spec.get("priorityClassName"):
        w.write(0, f"Priority Class Name:\t{spec['priorityClassName']}\n")
    if spec.get("runtimeClassName"):
        w.write(0, f"Runtime Class Name:\t{spec['runtimeClassName']}\n")
    if spec.get("serviceAccountName"):
        w.write(0, f"Service Account:\t{spec['serviceAccountName']}\n")
    if not spec.get("nodeName"):
        w.write(0, "Node:\t<none>\n")
    else:
        w.write(0, f"Node:\t{spec['nodeName']}/{status.get('hostIP') or ''}\n")
    if status.get("startTime"):
        w.write(0, f"Start Time:\t{rfc1123z(status['startTime'])}\n")
    print_labels_multiline(w, "Labels", meta.get("labels"))
    print_annotations_multiline(w, "Annotations", meta.get("annotations"))
    phase = status.get("phase") or ""
    if meta.get("deletionTimestamp") and phase not in ("Failed", "Succeeded"):
        w.write(0, f"Status:\tTerminating (lasts {since(meta['deletionTimestamp'])})\n")
        w.write(0, f"Termination Grace Period:\t{meta.get('deletionGracePeriodSeconds') or 0}s\n")
    else:
        w.write(0, f"Status:\t{phase}\n")
    if status.get("reason"):
        w.write(0, f"Reason:\t{status['reason']}\n")
    if status.get("message"):
        w.write(0, f"Message:\t{status['message']}\n")
    w.write(0, f"IP:\t{status.get('podIP') or ''}\n")
    ips = _l(status.get("podIPs"))
    if not ips:
        w.write(0, "IPs:\t<none>\n")
    else:
        w.write(0, "IPs:\n")
        for ip in ips:
            w.write(1, f"IP:\t{ip.get('ip', '')}\n")
    controlled_by = print_controller(pod)
    if controlled_by:
        w.write(0, f"Controlled By:\t{controlled_by}\n")
    if status.get("nominatedNodeName"):
        w.write(0, f"NominatedNodeName:\t{status['nominatedNodeName']}\n")
    if _l(spec.get("initContainers")):
        describe_containers(w, "Init Containers", spec["initContainers"], _l(status.get("initContainerStatuses")),
                            pod, "")
    describe_containers(w, "Containers", _l(spec.get("containers")), _l(status.get("containerStatuses")), pod, "")
    gates = _l(spec.get("readinessGates"))
    conditions = _l(status.get("conditions"))
    if gates:
        w.write(0, "Readiness Gates:\n  Type\tStatus\n")
        for gate in gates:
            value = next((c.get("status") for c in conditions if c.get("type") == gate.get("conditionType")), "<none>")
            w.write(1, f"{gate.get('conditionType')} \t{value} \n")
    if conditions:
        w.write(0, "Conditions:\n  Type\tStatus\n")
        for c in conditions:
            w.write(1, f"{c.get('type')} \t{c.get('status')} \n")
    describe_volumes(w, _l(spec.get("volumes")), "")
    w.write(0, f"QoS Class:\t{qos_class(pod)}\n")
    print_labels_multiline(w, "Node-Selectors", spec.get("nodeSelector"))
    print_tolerations_multiline(w, "Tolerations", spec.get("tolerations"))
    describe_events(w, events)
    return w.text()


async def describe_deployment(ctx: Context, d: Obj) -> str:
    events = await search_events(ctx, d, "Deployment")
    old, new = await replica_sets_of(ctx, d)
    meta, spec, status = _d(d.get("metadata")), _d(d.get("spec")), _d(d.get("status"))
    w = PrefixWriter()
    w.write(0, f"Name:\t{meta.get('name', '')}\n")
    w.write(0, f"Namespace:\t{meta.get('namespace', '')}\n")
    w.write(0, f"CreationTimestamp:\t{rfc1123z(meta.get('creationTimestamp'))}\n")
    print_labels_multiline(w, "Labels", meta.get("labels"))
    print_annotations_multiline(w, "Annotations", meta.get("annotations"))
    w.write(0, f"Selector:\t{label_selector_string(spec.get('selector'))}\n")
    w.write(0, f"Replicas:\t{spec.get('replicas', 1)} desired | {status.get('updatedReplicas') or 0} updated | "
               f"{status.get('replicas') or 0} total | {status.get('availableReplicas') or 0} available | "
               f"{status.get('unavailableReplicas') or 0} unavailable\n")
    strategy = _d(spec.get("strategy"))
    w.write(0, f"StrategyType:\t{strategy.get('type') or ''}\n")
    w.write(0, f"MinReadySeconds:\t{spec.get('minReadySeconds') or 0}\n")
    if strategy.get("rollingUpdate") is not None:
        ru = _d(strategy["rollingUpdate"])
        w.write(0, f"RollingUpdateStrategy:\t{_int_or_string(ru.get('maxUnavailable'))} max unavailable, "
                   f"{_int_or_string(ru.get('maxSurge'))} max surge\n")
    describe_pod_template(w, _d(spec.get("template")))
    conditions = _l(status.get("conditions"))
    if conditions:
        w.write(0, "Conditions:\n  Type\tStatus\tReason\n")
        w.write(1, "----\t------\t------\n")
        for c in conditions:
            w.write(1, f"{c.get('type')} \t{c.get('status')}\t{c.get('reason') or ''}\n")
    if old or new:
        w.write(0, f"OldReplicaSets:\t{_replica_sets_text(old)}\n")
        w.write(0, f"NewReplicaSet:\t{_replica_sets_text([new] if new else [])}\n")
    describe_events(w, events)
    return w.text()


def _replica_sets_text(sets: list[Obj]) -> str:
    parts = [f"{_d(rs.get('metadata')).get('name')} ({_d(rs.get('status')).get('replicas') or 0}/"
             f"{_d(rs.get('spec')).get('replicas', 1)} replicas created)" for rs in sets]
    return ", ".join(parts) or "<none>"


async def describe_replicaset(ctx: Context, rs: Obj) -> str:
    meta, spec, status = _d(rs.get("metadata")), _d(rs.get("spec")), _d(rs.get("status"))
    pods_error = ""
    counts: tuple[int, ...] = (0, 0, 0, 0)
    try:
        counts = await pod_status_for_controller(ctx, meta.get("namespace", ""), spec.get("selector"),
                                                 meta.get("uid", ""))
    except Exception as e:
        pods_error = str(e)
    events = await search_events(ctx, rs, "ReplicaSet")
    w = PrefixWriter()
    w.write(0, f"Name:\t{meta.get('name', '')}\n")
    w.write(0, f"Namespace:\t{meta.get('namespace', '')}\n")
    w.write(0, f"Selector:\t{format_label_selector(spec.get('selector'))}\n")
    print_labels_multiline(w, "Labels", meta.get("labels"))
    print_annotations_multiline(w, "Annotations", meta.get("annotations"))
    controlled_by = print_controller(rs)
    if controlled_by:
        w.write(0, f"Controlled By:\t{controlled_by}\n")
    w.write(0, f"Replicas:\t{status.get('replicas') or 0} current / {spec.get('replicas', 1)} desired\n")
    w.write(0, "Pods Status:\t")
    if pods_error:
        w.write(0, f"error in fetching pods: {pods_error}\n")
    else:
        running, waiting, succeeded, failed = counts
        w.write(0, f"{running} Running / {waiting} Waiting / {succeeded} Succeeded / {failed} Failed\n")
    describe_pod_template(w, _d(spec.get("template")))
    conditions = _l(status.get("conditions"))
    if conditions:
        w.write(0, "Conditions:\n  Type\tStatus\tReason\n")
        w.write(1, "----\t------\t------\n")
        for c in conditions:
            w.write(1, f"{c.get('type')} \t{c.get('status')}\t{c.get('reason') or ''}\n")
    describe_events(w, events)
    return w.text()


def _node_roles(labels: Obj) -> list[str]:
    roles = set()
    for key, value in labels.items():
        if key.startswith(NODE_ROLE_PREFIX) and key[len(NODE_ROLE_PREFIX):]:
            roles.add(key[len(NODE_ROLE_PREFIX):])
        elif key == "kubernetes.io/role" and value:
            roles.add(value)
    return sorted(roles)


async def describe_node(ctx: Context, node: Obj) -> str:
    meta, spec, status = _d(node.get("metadata")), _d(node.get("spec")), _d(node.get("status"))
    name = meta.get("name", "")
    selector = f"spec.nodeName={escape_field_value(name)},status.phase!=Succeeded,status.phase!=Failed"
    pods: list[Obj] | None
    try:
        pods = await _list(ctx, PODS, None, fieldSelector=selector)
    except ApiError as e:
        if not e.is_forbidden:
            raise
        pods = None
    events = await search_events(ctx, node, "Node")
    by_name = await search_events(ctx, node, "Node", uid=name)
    if events is not None and by_name:
        events = events + by_name
    lease: Obj | None = None
    lease_error = ""
    try:
        assert LEASES is not None
        lease = await ctx.client.request("GET", LEASES.object_path(name, "kube-node-lease"))
    except Exception as e:
        lease_error = e.message if isinstance(e, ApiError) else str(e)
    w = PrefixWriter()
    w.write(0, f"Name:\t{name}\n")
    roles = _node_roles(_d(meta.get("labels")))
    w.write(0, f"Roles:\t{','.join(roles) if roles else '<none>'}\n")
    print_labels_multiline(w, "Labels", meta.get("labels"))
    print_annotations_multiline(w, "Annotations", meta.get("annotations"))
    w.write(0, f"CreationTimestamp:\t{rfc1123z(meta.get('creationTimestamp'))}\n")
    print_taints_multiline(w, "Taints", spec.get("taints"))
    w.write(0, f"Unschedulable:\t{'true' if spec.get('unschedulable') else 'false'}\n")
    if lease is not None:
        lspec = _d(lease.get("spec"))
        w.write(0, "Lease:\n")
        w.write(1, f"HolderIdentity:\t{lspec.get('holderIdentity') or '<unset>'}\n")
        w.write(1, f"AcquireTime:\t{rfc1123z(lspec['acquireTime']) if lspec.get('acquireTime') else '<unset>'}\n")
        w.write(1, f"RenewTime:\t{rfc1123z(lspec['renewTime']) if lspec.get('renewTime') else '<unset>'}\n")
    else:
        w.write(0, f"Lease:\tFailed to get lease: {lease_error}\n")
    conditions = _l(status.get("conditions"))
    if conditions:
        w.write(0, "Conditions:\n  Type\tStatus\tLastHeartbeatTime\tLastTransitionTime\tReason\tMessage\n")
        w.write(1, "----\t------\t-----------------\t------------------\t------\t-------\n")
        for c in conditions:
            w.write(1, f"{c.get('type')} \t{c.get('status')} \t{rfc1123z(c.get('lastHeartbeatTime'))} \t"
                       f"{rfc1123z(c.get('lastTransitionTime'))} \t{c.get('reason') or ''} \t"
                       f"{c.get('message') or ''}\n")
    w.write(0, "Addresses:\n")
    for address in _l(status.get("addresses")):
        w.write(1, f"{address.get('type')}:\t{address.get('address')}\n")
    for title, key in (("Capacity", "capacity"), ("Allocatable", "allocatable")):
        values = _d(status.get(key))
        if values:
            w.write(0, f"{title}:\n")
            for resource in sorted(values):
                w.write(0, f"  {resource}:\t{values[resource]}\n")
    info = _d(status.get("nodeInfo"))
    w.write(0, "System Info:\n")
    for title, key in (("Machine ID", "machineID"), ("System UUID", "systemUUID"), ("Boot ID", "bootID"),
                       ("Kernel Version", "kernelVersion"), ("OS Image", "osImage"),
                       ("Operating System", "operatingSystem"), ("Architecture", "architecture"),
                       ("Container Runtime Version", "containerRuntimeVersion"),
                       ("Kubelet Version", "kubeletVersion"), ("Kube-Proxy Version", "kubeProxyVersion")):
        w.write(0, f"  {title}:\t{info.get(key) or ''}\n")
    if spec.get("podCIDR"):
        w.write(0, f"PodCIDR:\t{spec['podCIDR']}\n")
    if _l(spec.get("podCIDRs")):
        w.write(0, f"PodCIDRs:\t{','.join(spec['podCIDRs'])}\n")
    if spec.get("providerID"):
        w.write(0, f"ProviderID:\t{spec['providerID']}\n")
    if pods is not None:
        _describe_node_resources(w, pods, status)
    else:
        w.write(0, "Pods:\tnot authorized\n")
    describe_events(w, events)
    return w.text()


def _percent(part: Quantity, whole: Quantity) -> int:
    return int(part.value / whole.value * 100) if whole.value else 0


def _describe_node_resources(w: PrefixWriter, pods: list[Obj], status: Obj) -> None:
    allocatable = _d(status.get("allocatable")) or _d(status.get("capacity"))
    alloc_cpu, alloc_mem = quantity(allocatable.get("cpu", 0)), quantity(allocatable.get("memory", 0))
    w.write(0, f"Non-terminated Pods:\t({len(pods)} in total)\n")
    w.write(1, "Namespace\tName\t\tCPU Requests\tCPU Limits\tMemory Requests\tMemory Limits\tAge\n")
    w.write(1, "---------\t----\t\t------------\t----------\t---------------\t-------------\t---\n")
    total_req: dict[str, Quantity] = {}
    total_lim: dict[str, Quantity] = {}
    for pod in pods:
        req, lim = pod_requests_and_limits(pod)
        for name, value in req.items():
            total_req[name] = total_req.get(name, _ZERO) + value
        for name, value in lim.items():
            total_lim[name] = total_lim.get(name, _ZERO) + value
        cells = []
        for amounts, resource, whole in ((req, "cpu", alloc_cpu), (lim, "cpu", alloc_cpu),
                                         (req, "memory", alloc_mem), (lim, "memory", alloc_mem)):
            amount = amounts.get(resource, _ZERO)
            cells.append(f"{amount} ({_percent(amount, whole)}%)")
        meta = _d(pod.get("metadata"))
        w.write(1, f"{meta.get('namespace', '')}\t{meta.get('name', '')}\t\t{cells[0]}\t{cells[1]}\t{cells[2]}\t"
                   f"{cells[3]}\t{since(meta.get('creationTimestamp'))}\n")
    w.write(0, "Allocated resources:\n  (Total limits may be over 100 percent, i.e., overcommitted.)\n")
    w.write(1, "Resource\tRequests\tLimits\n")
    w.write(1, "--------\t--------\t------\n")
    alloc_eph = quantity(allocatable.get("ephemeral-storage", 0))
    for resource, whole in (("cpu", alloc_cpu), ("memory", alloc_mem), ("ephemeral-storage", alloc_eph)):
        r, limit = total_req.get(resource, _ZERO), total_lim.get(resource, _ZERO)
        w.write(1, f"{resource}\t{r} ({_percent(r, whole)}%)\t"
                   f"{limit} ({_percent(limit, whole)}%)\n")
    standard = {"cpu", "memory", "ephemeral-storage", "pods", "storage"}
    for resource in sorted(k for k in allocatable if k.startswith("hugepages-")):
        r, limit = total_req.get(resource, _ZERO), total_lim.get(resource, _ZERO)
        whole = quantity(allocatable[resource])
        w.write(1, f"{resource}\t{r} ({_percent(r, whole)}%)\t"
                   f"{limit} ({_percent(limit, whole)}%)\n")
    for resource in sorted(k for k in allocatable if k not in standard and not k.startswith("hugepages-")):
        w.write(1, f"{resource}\t{total_req.get(resource, _ZERO)}\t"
                   f"{total_lim.get(resource, _ZERO)}\n")


async def describe_namespace(ctx: Context, ns: Obj) -> str:
    meta, status = _d(ns.get("metadata")), _d(ns.get("status"))
    w = PrefixWriter()
    w.write(0, f"Name:\t{meta.get('name', '')}\n")
    print_labels_multiline(w, "Labels", meta.get("labels"))
    print_annotations_multiline(w, "Annotations", meta.get("annotations"))
    w.write(0, f"Status:\t{status.get('phase') or ''}\n")
    conditions = _l(status.get("conditions"))
    if conditions:
        w.write(0, "Conditions:\n")
        w.write(1, "Type\tStatus\tLastTransitionTime\tReason\tMessage\n")
        w.write(1, "----\t------\t------------------\t------\t-------\n")
        for c in conditions:
            w.write(1, f"{c.get('type')}\t{c.get('status')}\t{rfc1123z(c.get('lastTransitionTime'))}\t"
                       f"{c.get('reason') or ''}\t{c.get('message') or ''}\n")
    quotas = await _optional_list(ctx, QUOTAS, meta.get("name", ""))
    if quotas is not None:
        w.write(0, "\n")
        describe_resource_quotas(w, quotas)
    ranges = await _optional_list(ctx, LIMIT_RANGES, meta.get("name", ""))
    if ranges is not None:
        w.write(0, "\n")
        describe_limit_ranges(w, ranges)
    return w.text()


SERVICE_NAME_LABEL = "kubernetes.io/service-name"
ENDPOINT_SLICES = resource_for("discovery.k8s.io", "endpointslices")
SERVICES = resource_for("", "services")
MAX_ENDPOINTS_SHOWN = 3


def _port_text(port: Any) -> str:
    """%d of a port number (a named target port prints as its name)."""
    return _go(port) if port is not None else "0"


def format_endpoint_slices(slices: list[Obj], port_name: str | None) -> str:
    """formatEndpointSlices: `ip:port` of the ready endpoints on the Service port's slice port (bare IPs for
    slices without ports), the first three and `+ N more...`, or <none>."""
    if not slices:
        return "<none>"
    shown: list[str] = []
    count = 0

    def add(text: str) -> None:
        nonlocal count
        if len(shown) < MAX_ENDPOINTS_SHOWN:
            shown.append(text)
        count += 1

    for eps in slices:
        endpoints = [e for e in _l(eps.get("endpoints")) if _d(_d(e).get("conditions")).get("ready") is not False
                     and _l(_d(e).get("addresses"))]
        ports = _l(eps.get("ports"))
        if not ports:
            for e in endpoints:
                add(str(e["addresses"][0]))
            continue
        for port in ports:
            if port_name is not None and (_d(port).get("name") or "") != port_name:
                continue
            for e in endpoints:
                address = str(e["addresses"][0])
                host = f"[{address}]" if ":" in address else address  # net.JoinHostPort
                add(f"{host}:{_port_text(_d(port).get('port'))}")
    text = ",".join(shown)
    if count > MAX_ENDPOINTS_SHOWN:
        return f"{text} + {count - MAX_ENDPOINTS_SHOWN} more..."
    return text


def service_description(service: Obj, slices: list[Obj], events: list[Obj] | None) -> str:
    """describeService (kubectl 1.33: the endpoints come from the Service's EndpointSlices)."""
    meta, spec = _d(service.get("metadata")), _d(service.get("spec"))
    status = _d(service.get("status"))
    w = PrefixWriter()
    w.write(0, f"Name:\t{meta.get('name', '')}\n")
    w.write(0, f"Namespace:\t{meta.get('namespace', '')}\n")
    print_labels_multiline(w, "Labels", meta.get("labels"))
    print_annotations_multiline(w, "Annotations", meta.get("annotations"))
    w.write(0, f"Selector:\t{format_labels(_d(spec.get('selector')))}\n")
    w.write(0, f"Type:\t{spec.get('type') or ''}\n")
    if spec.get("ipFamilyPolicy"):
        w.write(0, f"IP Family Policy:\t{spec['ipFamilyPolicy']}\n")
    families = _l(spec.get("ipFamilies"))
    w.write(0, f"IP Families:\t{','.join(str(f) for f in families) if families else '<none>'}\n")
    w.write(0, f"IP:\t{spec.get('clusterIP') or ''}\n")
    ips = _l(spec.get("clusterIPs"))
    w.write(0, f"IPs:\t{','.join(str(ip) for ip in ips) if ips else '<none>'}\n")
    if _l(spec.get("externalIPs")):
        w.write(0, f"External IPs:\t{','.join(spec['externalIPs'])}\n")
    if spec.get("loadBalancerIP"):
        w.write(0, f"Desired LoadBalancer IP:\t{spec['loadBalancerIP']}\n")
    ingress = _l(_d(status.get("loadBalancer")).get("ingress"))
    if ingress:
        text = ", ".join(str(_d(i).get("ip") or _d(i).get("hostname") or "") for i in ingress)
        w.write(0, f"LoadBalancer Ingress:\t{text}\n")
    if spec.get("externalName"):
        w.write(0, f"External Name:\t{spec['externalName']}\n")
    for sp in _l(spec.get("ports")):
        sp = _d(sp)
        name = sp.get("name") or "<unset>"
        protocol = sp.get("protocol") or ""
        w.write(0, f"Port:\t{name}\t{_port_text(sp.get('port'))}/{protocol}\n")
        target = sp.get("targetPort")
        w.write(0, f"TargetPort:\t{_port_text(target if target is not None else 0)}/{protocol}\n")
        if sp.get("nodePort"):
            w.write(0, f"NodePort:\t{name}\t{sp['nodePort']}/{protocol}\n")
        w.write(0, f"Endpoints:\t{format_endpoint_slices(slices, sp.get('name') or '')}\n")
    w.write(0, f"Session Affinity:\t{spec.get('sessionAffinity') or ''}\n")
    if spec.get("externalTrafficPolicy"):
        w.write(0, f"External Traffic Policy:\t{spec['externalTrafficPolicy']}\n")
    if spec.get("internalTrafficPolicy"):
        w.write(0, f"Internal Traffic Policy:\t{spec['internalTrafficPolicy']}\n")
    if spec.get("healthCheckNodePort"):
        w.write(0, f"HealthCheck NodePort:\t{spec['healthCheckNodePort']}\n")
    if _l(spec.get("loadBalancerSourceRanges")):
        w.write(0, f"LoadBalancer Source Ranges:\t{','.join(spec['loadBalancerSourceRanges'])}\n")
    describe_events(w, events)
    return w.text()


async def describe_service(ctx: Context, service: Obj) -> str:
    meta = _d(service.get("metadata"))
    try:
        slices = await _list(ctx, ENDPOINT_SLICES, meta.get("namespace") or ctx.namespace,
                             labelSelector=f"{SERVICE_NAME_LABEL}={meta.get('name', '')}")
    except ApiError:
        slices = []
    events = await search_events(ctx, service, "Service")
    return service_description(service, slices, events)


def endpoints_description(ep: Obj, events: list[Obj] | None) -> str:
    """describeEndpoints: each subset's ready and not-ready addresses and its ports."""
    meta = _d(ep.get("metadata"))
    w = PrefixWriter()
    w.write(0, f"Name:\t{meta.get('name', '')}\n")
    w.write(0, f"Namespace:\t{meta.get('namespace', '')}\n")
    print_labels_multiline(w, "Labels", meta.get("labels"))
    print_annotations_multiline(w, "Annotations", meta.get("annotations"))
    w.write(0, "Subsets:\n")
    for subset in _l(ep.get("subsets")):
        subset = _d(subset)
        ready = ",".join(str(_d(a).get("ip") or "") for a in _l(subset.get("addresses")))
        not_ready = ",".join(str(_d(a).get("ip") or "") for a in _l(subset.get("notReadyAddresses")))
        w.write(1, f"Addresses:\t{ready or '<none>'}\n")
        w.write(1, f"NotReadyAddresses:\t{not_ready or '<none>'}\n")
        ports = _l(subset.get("ports"))
        if ports:
            w.write(1, "Ports:\n")
            w.write(2, "Name\tPort\tProtocol\n")
            w.write(2, "----\t----\t--------\n")
            for port in ports:
                port = _d(port)
                w.write(2, f"{port.get('name') or '<unset>'}\t{_port_text(port.get('port'))}\t"
                           f"{port.get('protocol') or ''}\n")
        w.write(0, "\n")
    describe_events(w, events)
    return w.text()


async def describe_endpoints(ctx: Context, ep: Obj) -> str:
    return endpoints_description(ep, await search_events(ctx, ep, "Endpoints"))


def endpoint_slice_description(eps: Obj, events: list[Obj] | None) -> str:
    """describeEndpointSliceV1: address type, ports, and each endpoint's addresses, readiness, hostname,
    target, node and zone."""
    meta = _d(eps.get("metadata"))
    w = PrefixWriter()
    w.write(0, f"Name:\t{meta.get('name', '')}\n")
    w.write(0, f"Namespace:\t{meta.get('namespace', '')}\n")
    print_labels_multiline(w, "Labels", meta.get("labels"))
    print_annotations_multiline(w, "Annotations", meta.get("annotations"))
    w.write(0, f"AddressType:\t{eps.get('addressType') or ''}\n")
    ports = _l(eps.get("ports"))
    if not ports:
        w.write(0, "Ports: <unset>\n")
    else:
        w.write(0, "Ports:\n")
        w.write(1, "Name\tPort\tProtocol\n")
        w.write(1, "----\t----\t--------\n")
        for port in ports:
            port = _d(port)
            number = port.get("port")
            w.write(1, f"{port.get('name') or '<unset>'}\t{'<unset>' if number is None else number}\t"
                       f"{port.get('protocol') or ''}\n")
    endpoints = _l(eps.get("endpoints"))
    if not endpoints:
        w.write(0, "Endpoints: <none>\n")
    else:
        w.write(0, "Endpoints:\n")
        for e in endpoints:
            e = _d(e)
            addresses = ", ".join(str(a) for a in _l(e.get("addresses")))
            w.write(1, f"- Addresses:\t{addresses or '<none>'}\n")
            w.write(2, "Conditions:\n")
            ready = _d(e.get("conditions")).get("ready")
            w.write(3, f"Ready:\t{'<unset>' if ready is None else _go(ready)}\n")
            hostname = e.get("hostname")
            w.write(2, f"Hostname:\t{'<unset>' if hostname is None else hostname}\n")
            ref = e.get("targetRef")
            if ref is not None:
                w.write(2, f"TargetRef:\t{_d(ref).get('kind', '')}/{_d(ref).get('name', '')}\n")
            node = e.get("nodeName")
            w.write(2, f"NodeName:\t{'<unset>' if node is None else node}\n")
            zone = e.get("zone")
            w.write(2, f"Zone:\t{'<unset>' if zone is None else zone}\n")
    describe_events(w, events)
    return w.text()


async def describe_endpoint_slice(ctx: Context, eps: Obj) -> str:
    return endpoint_slice_description(eps, await search_events(ctx, eps, "EndpointSlice"))


def secret_description(secret: Obj) -> str:
    """upstream describeSecret: each key with its size, never its value (only a service-account token's
    `token` is shown, as upstream does)."""
    meta = _d(secret.get("metadata"))
    w = PrefixWriter()
    w.write(0, f"Name:\t{meta.get('name', '')}\n")
    w.write(0, f"Namespace:\t{meta.get('namespace', '')}\n")
    print_labels_multiline(w, "Labels", meta.get("labels"))
    print_annotations_multiline(w, "Annotations", meta.get("annotations"))
    w.write(0, f"\nType:\t{secret.get('type') or ''}\n")
    w.write(0, "\nData\n====\n")
    for key, value in sorted(_d(secret.get("data")).items()):
        raw = base64.b64decode(value or "")
        if key == "token" and secret.get("type") == "kubernetes.io/service-account-token":
            w.write(0, f"{key}:\t{raw.decode(errors='replace')}\n")
        else:
            w.write(0, f"{key}:\t{len(raw)} bytes\n")
    return w.text()


def configmap_description(cm: Obj, events: list[Obj] | None) -> str:
    """upstream describeConfigMap: data values in full, binaryData by size."""
    meta = _d(cm.get("metadata"))
    w = PrefixWriter()
    w.write(0, f"Name:\t{meta.get('name', '')}\n")
    w.write(0, f"Namespace:\t{meta.get('namespace', '')}\n")
    print_labels_multiline(w, "Labels", meta.get("labels"))
    print_annotations_multiline(w, "Annotations", meta.get("annotations"))
    w.write(0, "\nData\n====\n")
    for key, value in sorted(_d(cm.get("data")).items()):
        w.write(0, f"{key}:\n----\n")
        w.write(0, f"{value}\n")
    w.write(0, "\nBinaryData\n====\n")
    for key, value in sorted(_d(cm.get("binaryData")).items()):
        w.write(0, f"{key}: {len(base64.b64decode(value or ''))} bytes\n")
    w.write(0, "\n")
    if events is not None:
        describe_events(w, events)
    return w.text()


async def describe_secret(ctx: Context, secret: Obj) -> str:
    return secret_description(secret)


async def describe_configmap(ctx: Context, cm: Obj) -> str:
    return configmap_description(cm, await search_events(ctx, cm, "ConfigMap"))


# ---------------------------------------------------------------------------------------------
# Storage (upstream describe.go: PersistentVolumeDescriber, PersistentVolumeClaimDescriber,
# StorageClassDescriber)
# ---------------------------------------------------------------------------------------------


def _finalizers(meta: Obj) -> str:
    return "[" + " ".join(_l(meta.get("finalizers"))) + "]"  # Go's %v of a []string


def _phase_line(obj: Obj) -> str:
    deleted = _d(obj.get("metadata")).get("deletionTimestamp")
    if deleted:
        return f"Status:\tTerminating (lasts {since(deleted)})\n"
    return f"Status:\t{_d(obj.get('status')).get('phase') or ''}\n"


def _storage_string(resources: Any) -> str:
    value = _d(resources).get("storage")
    return str(quantity(value)) if value is not None else "0"


def _print_volume_node_affinity(w: PrefixWriter, affinity: Any) -> None:
    required = _d(affinity).get("required")
    w.write(0, "Node Affinity:\t")
    if not required:
        w.write(0, "<none>\n")
        return
    w.write(0, "\n")
    w.write(1, "Required Terms:\t")
    terms = _l(_d(required).get("nodeSelectorTerms"))
    if not terms:
        w.write(0, "<none>\n")
        return
    w.write(0, "\n")
    for i, term in enumerate(terms):
        w.write(2, f"Term {i}:\t")
        expressions = _l(_d(term).get("matchExpressions"))
        if not expressions:
            w.write(0, "<none>\n")
        for j, req in enumerate(expressions):
            if j:
                w.write(2, "\t")
            text = f"{req.get('key', '')} {str(req.get('operator', '')).lower()}"
            if req.get("values"):
                text += f" [{', '.join(req['values'])}]"
            w.write(0, f"{text}\n")


def persistent_volume_description(pv: Obj, events: list[Obj] | None) -> str:
    meta, spec, status = _d(pv.get("metadata")), _d(pv.get("spec")), _d(pv.get("status"))
    w = PrefixWriter()
    w.write(0, f"Name:\t{meta.get('name', '')}\n")
    print_labels_multiline(w, "Labels", meta.get("labels"))
    print_annotations_multiline(w, "Annotations", meta.get("annotations"))
    w.write(0, f"Finalizers:\t{_finalizers(meta)}\n")
    w.write(0, f"StorageClass:\t{volume_class(pv)}\n")
    w.write(0, _phase_line(pv))
    ref = _d(spec.get("claimRef"))
    w.write(0, f"Claim:\t{ref.get('namespace', '')}/{ref.get('name', '')}\n" if ref else "Claim:\t\n")
    w.write(0, f"Reclaim Policy:\t{spec.get('persistentVolumeReclaimPolicy') or ''}\n")
    w.write(0, f"Access Modes:\t{access_modes_short(spec.get('accessModes'))}\n")
    if spec.get("volumeMode"):
        w.write(0, f"VolumeMode:\t{spec['volumeMode']}\n")
    w.write(0, f"Capacity:\t{_storage_string(spec.get('capacity'))}\n")
    _print_volume_node_affinity(w, spec.get("nodeAffinity"))
    w.write(0, f"Message:\t{status.get('message') or ''}\n")
    w.write(0, "Source:\n")
    if spec.get("hostPath") is not None:
        host = _d(spec["hostPath"])
        w.write(2, f"Type:\tHostPath (bare host directory volume)\n    Path:\t{host.get('path', '')}\n"
                   f"    HostPathType:\t{host.get('type') or ''}\n")
    elif spec.get("local") is not None:
        w.write(2, "Type:\tLocalVolume (a persistent volume backed by local storage on a node)\n"
                   f"    Path:\t{_d(spec['local']).get('path', '')}\n")
    if events is not None:
        describe_events(w, events)
    return w.text()


def persistent_volume_claim_description(pvc: Obj, pods: list[Obj], events: list[Obj] | None) -> str:
    meta, spec, status = _d(pvc.get("metadata")), _d(pvc.get("spec")), _d(pvc.get("status"))
    w = PrefixWriter()
    w.write(0, f"Name:\t{meta.get('name', '')}\n")
    w.write(0, f"Namespace:\t{meta.get('namespace', '')}\n")
    w.write(0, f"StorageClass:\t{claim_class(pvc)}\n")
    w.write(0, _phase_line(pvc))
    w.write(0, f"Volume:\t{spec.get('volumeName') or ''}\n")
    print_labels_multiline(w, "Labels", meta.get("labels"))
    print_annotations_multiline(w, "Annotations", meta.get("annotations"))
    w.write(0, f"Finalizers:\t{_finalizers(meta)}\n")
    capacity = modes = ""
    if spec.get("volumeName"):
        capacity = _storage_string(status.get("capacity"))
        modes = access_modes_short(status.get("accessModes"))
    w.write(0, f"Capacity:\t{capacity}\n")
    w.write(0, f"Access Modes:\t{modes}\n")
    if spec.get("volumeMode"):
        w.write(0, f"VolumeMode:\t{spec['volumeMode']}\n")
    names = sorted(_d(p.get("metadata")).get("name", "") for p in pods)
    w.write(0, "Used By:\t" + ("\n\t".join(names) if names else "<none>") + "\n")
    if events is not None:
        describe_events(w, events)
    return w.text()


def storage_class_description(sc: Obj, events: list[Obj] | None) -> str:
    meta = _d(sc.get("metadata"))
    w = PrefixWriter()
    w.write(0, f"Name:\t{meta.get('name', '')}\n")
    w.write(0, f"IsDefaultClass:\t{'Yes' if is_default_class(sc) else 'No'}\n")
    w.write(0, f"Annotations:\t{format_labels(meta.get('annotations'))}\n")
    w.write(0, f"Provisioner:\t{sc.get('provisioner') or ''}\n")
    w.write(0, f"Parameters:\t{format_labels(sc.get('parameters'))}\n")
    expansion = sc.get("allowVolumeExpansion")
    w.write(0, f"AllowVolumeExpansion:\t{'<unset>' if expansion is None else str(bool(expansion))}\n")
    options = _l(sc.get("mountOptions"))
    w.write(0, f"MountOptions:\t{'<none>' if not options else ''}\n")
    for option in options:
        w.write(1, f"{option}\n")
    if sc.get("reclaimPolicy"):
        w.write(0, f"ReclaimPolicy:\t{sc['reclaimPolicy']}\n")
    if sc.get("volumeBindingMode"):
        w.write(0, f"VolumeBindingMode:\t{sc['volumeBindingMode']}\n")
    if events is not None:
        describe_events(w, events)
    return w.text()


async def describe_persistent_volume(ctx: Context, pv: Obj) -> str:
    return persistent_volume_description(pv, await search_events(ctx, pv, "PersistentVolume"))


async def describe_persistent_volume_claim(ctx: Context, pvc: Obj) -> str:
    meta = _d(pvc.get("metadata"))
    try:
        pods = await _list(ctx, PODS, meta.get("namespace") or ctx.namespace)
    except ApiError:
        pods = []
    users = [p for p in pods if meta.get("name") in pod_claim_names(p)]
    return persistent_volume_claim_description(pvc, users, await search_events(ctx, pvc, "PersistentVolumeClaim"))


async def describe_storage_class(ctx: Context, sc: Obj) -> str:
    return storage_class_description(sc, await search_events(ctx, sc, "StorageClass"))


_ACRONYMS = {"API", "URL", "UID", "OSB", "GUID", "IP", "CIDR"}


def smart_label(field: str) -> str:
    """describe's smartLabelFor: `creationTimestamp` → `Creation Timestamp`, `apiVersion` → `API Version`."""
    if re.search(r"[^A-Za-z-]", field):
        return field
    parts = re.findall(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|-", field)
    words = []
    for part in parts:
        if part == "_":
            continue
        words.append(part.upper() if part.upper() in _ACRONYMS - {"IP", "CIDR"} else part[:1].upper() + part[1:])
    return " ".join(words)


def _print_unstructured(w: PrefixWriter, level: int, content: Obj, prefix: str, skip: set[str]) -> None:
    for field in sorted(content):
        value = content[field]
        path = f"{prefix}.{field}"
        if path in skip:
            continue
        if isinstance(value, dict):
            w.write(level, f"{smart_label(field)}:\n")
            _print_unstructured(w, level + 1, value, path, skip)
        elif isinstance(value, list):
            w.write(level, f"{smart_label(field)}:\n")
            for child in value:
                if isinstance(child, dict):
                    _print_unstructured(w, level + 1, child, path, skip)
                else:
                    w.write(level + 1, f"{_go(child)}\n")
        else:
            w.write(level, f"{smart_label(field)}:\t{_go(value)}\n")


async def describe_generic(ctx: Context, obj: Obj, info: ResourceInfo) -> str:
    events = await search_events(ctx, obj, info.kind)
    meta = _d(obj.get("metadata"))
    w = PrefixWriter()
    w.write(0, f"Name:\t{meta.get('name', '')}\n")
    w.write(0, f"Namespace:\t{meta.get('namespace', '')}\n")
    print_labels_multiline(w, "Labels", meta.get("labels"))
    print_annotations_multiline(w, "Annotations", meta.get("annotations"))
    full = {"apiVersion": info.api_version, "kind": info.kind, **obj}
    _print_unstructured(w, 0, full, "", {".metadata.managedFields", ".metadata.name", ".metadata.namespace",
                                         ".metadata.labels", ".metadata.annotations"})
    describe_events(w, events)
    return w.text()


# -- batch/v1 (describeJob, describeCronJob) ------------------------------------------------------


def _cap_indexes(indexes: Any, limit: int = 50) -> str:
    """capIndexesListOrNone: `<none>`, or the list cut after `limit` characters at a comma, with `...`."""
    text = indexes if isinstance(indexes, str) else ""
    if not text:
        return "<none>"
    if len(text) <= limit:
        return text
    cut = text[:limit].rfind(",")
    return (text[:cut] if cut > 0 else text[:limit]) + ",..."


def job_description(job: Obj, events: list[Obj] | None) -> str:
    meta, spec, status = _d(job.get("metadata")), _d(job.get("spec")), _d(job.get("status"))
    w = PrefixWriter()
    w.write(0, f"Name:\t{meta.get('name', '')}\n")
    w.write(0, f"Namespace:\t{meta.get('namespace', '')}\n")
    w.write(0, f"Selector:\t{label_selector_string(spec.get('selector'))}\n")
    print_labels_multiline(w, "Labels", meta.get("labels"))
    print_annotations_multiline(w, "Annotations", meta.get("annotations"))
    if controlled_by := print_controller(job):
        w.write(0, f"Controlled By:\t{controlled_by}\n")
    if spec.get("parallelism") is not None:
        w.write(0, f"Parallelism:\t{spec['parallelism']}\n")
    w.write(0, f"Completions:\t{spec['completions'] if spec.get('completions') is not None else '<unset>'}\n")
    if spec.get("completionMode"):
        w.write(0, f"Completion Mode:\t{spec['completionMode']}\n")
    if spec.get("suspend") is not None:
        w.write(0, f"Suspend:\t{_go(spec['suspend'])}\n")
    if spec.get("backoffLimit") is not None:
        w.write(0, f"Backoff Limit:\t{spec['backoffLimit']}\n")
    if spec.get("ttlSecondsAfterFinished") is not None:
        w.write(0, f"TTL Seconds After Finished:\t{spec['ttlSecondsAfterFinished']}\n")
    if status.get("startTime"):
        w.write(0, f"Start Time:\t{rfc1123z(status['startTime'])}\n")
    if status.get("completionTime"):
        w.write(0, f"Completed At:\t{rfc1123z(status['completionTime'])}\n")
    start, end = parse_time(status.get("startTime")), parse_time(status.get("completionTime"))
    if start is not None and end is not None:
        w.write(0, f"Duration:\t{human_duration(end - start)}\n")
    if spec.get("activeDeadlineSeconds") is not None:
        w.write(0, f"Active Deadline Seconds:\t{spec['activeDeadlineSeconds']}s\n")
    counts = (status.get("active") or 0, status.get("succeeded") or 0, status.get("failed") or 0)
    if status.get("ready") is None:
        w.write(0, f"Pods Statuses:\t{counts[0]} Active / {counts[1]} Succeeded / {counts[2]} Failed\n")
    else:
        w.write(0, f"Pods Statuses:\t{counts[0]} Active ({status['ready']} Ready) / {counts[1]} Succeeded / "
                   f"{counts[2]} Failed\n")
    if spec.get("completionMode") == "Indexed":
        w.write(0, f"Completed Indexes:\t{_cap_indexes(status.get('completedIndexes'))}\n")
    describe_pod_template(w, _d(spec.get("template")))
    describe_events(w, events)
    return w.text()


async def describe_job(ctx: Context, job: Obj) -> str:
    return job_description(job, await search_events(ctx, job, "Job"))


def cronjob_description(cronjob: Obj, events: list[Obj] | None) -> str:
    meta, spec, status = _d(cronjob.get("metadata")), _d(cronjob.get("spec")), _d(cronjob.get("status"))

    def unset(value: Any, suffix: str = "") -> str:
        return "<unset>" if value is None else f"{value}{suffix}"

    w = PrefixWriter()
    w.write(0, f"Name:\t{meta.get('name', '')}\n")
    w.write(0, f"Namespace:\t{meta.get('namespace', '')}\n")
    print_labels_multiline(w, "Labels", meta.get("labels"))
    print_annotations_multiline(w, "Annotations", meta.get("annotations"))
    w.write(0, f"Schedule:\t{spec.get('schedule', '')}\n")
    w.write(0, f"Concurrency Policy:\t{spec.get('concurrencyPolicy', '')}\n")
    suspend = spec.get("suspend")
    w.write(0, f"Suspend:\t{'<unset>' if suspend is None else ('True' if suspend else 'False')}\n")
    w.write(0, f"Successful Job History Limit:\t{unset(spec.get('successfulJobsHistoryLimit'))}\n")
    w.write(0, f"Failed Job History Limit:\t{unset(spec.get('failedJobsHistoryLimit'))}\n")
    w.write(0, f"Starting Deadline Seconds:\t{unset(spec.get('startingDeadlineSeconds'), 's')}\n")
    job_spec = _d(_d(spec.get("jobTemplate")).get("spec"))
    selector = job_spec.get("selector")
    w.write(0, f"Selector:\t{'<unset>' if selector is None else label_selector_string(selector)}\n")
    w.write(0, f"Parallelism:\t{unset(job_spec.get('parallelism'))}\n")
    w.write(0, f"Completions:\t{unset(job_spec.get('completions'))}\n")
    if job_spec.get("activeDeadlineSeconds") is not None:
        w.write(0, f"Active Deadline Seconds:\t{job_spec['activeDeadlineSeconds']}s\n")
    describe_pod_template(w, _d(job_spec.get("template")))
    last = status.get("lastScheduleTime")
    w.write(0, f"Last Schedule Time:\t{rfc1123z(last) if last else '<unset>'}\n")
    active = [_d(a).get("name", "") for a in _l(status.get("active"))]
    w.write(0, f"Active Jobs:\t{', '.join(active) if active else '<none>'}\n")
    describe_events(w, events)
    return w.text()


async def describe_cronjob(ctx: Context, cronjob: Obj) -> str:
    return cronjob_description(cronjob, await search_events(ctx, cronjob, "CronJob"))


def stateful_set_description(sts: Obj, events: list[Obj] | None, counts: tuple[int, ...]) -> str:
    """describeStatefulSet (kubectl 1.33), with describeVolumeClaimTemplates."""
    meta, spec, status = _d(sts.get("metadata")), _d(sts.get("spec")), _d(sts.get("status"))
    w = PrefixWriter()
    w.write(0, f"Name:\t{meta.get('name', '')}\n")
    w.write(0, f"Namespace:\t{meta.get('namespace', '')}\n")
    w.write(0, f"CreationTimestamp:\t{rfc1123z(meta.get('creationTimestamp'))}\n")
    w.write(0, f"Selector:\t{label_selector_string(spec.get('selector'))}\n")
    print_labels_multiline(w, "Labels", meta.get("labels"))
    print_annotations_multiline(w, "Annotations", meta.get("annotations"))
    w.write(0, f"Replicas:\t{spec.get('replicas', 1)} desired | {status.get('replicas') or 0} total\n")
    strategy = _d(spec.get("updateStrategy"))
    w.write(0, f"Update Strategy:\t{strategy.get('type') or ''}\n")
    rolling = strategy.get("rollingUpdate")
    if isinstance(rolling, dict) and rolling.get("partition") is not None:
        w.write(1, f"Partition:\t{rolling['partition']}\n")
        if rolling.get("maxUnavailable") is not None:
            w.write(1, f"MaxUnavailable:\t{_int_or_string(rolling['maxUnavailable'])}\n")
    running, waiting, succeeded, failed = counts
    w.write(0, f"Pods Status:\t{running} Running / {waiting} Waiting / {succeeded} Succeeded / {failed} Failed\n")
    describe_pod_template(w, _d(spec.get("template")))
    templates = _l(spec.get("volumeClaimTemplates"))
    if not templates:
        w.write(0, "Volume Claims:\t<none>\n")
    else:
        w.write(0, "Volume Claims:\n")
        for pvc in templates:
            pvc_meta, pvc_spec = _d(_d(pvc).get("metadata")), _d(_d(pvc).get("spec"))
            w.write(1, f"Name:\t{pvc_meta.get('name', '')}\n")
            storage_class = _d(pvc_meta.get("annotations")).get("volume.beta.kubernetes.io/storage-class")
            if storage_class is None:
                storage_class = pvc_spec.get("storageClassName") or ""
            w.write(1, f"StorageClass:\t{storage_class}\n")
            print_labels_multiline(w, "Labels", pvc_meta.get("labels"), "  ")
            print_labels_multiline(w, "Annotations", pvc_meta.get("annotations"), "  ")
            capacity = _d(_d(pvc_spec.get("resources")).get("requests")).get("storage")
            w.write(1, f"Capacity:\t{quantity(capacity) if capacity is not None else '<default>'}\n")
            w.write(1, f"Access Modes:\t[{' '.join(str(m) for m in _l(pvc_spec.get('accessModes')))}]\n")
    describe_events(w, events)
    return w.text()
# ---------------------------------------------------------------------------------------------
# Policy (upstream describe.go: ResourceQuotaDescriber, LimitRangeDescriber, and the namespace's
# DescribeResourceQuotas / DescribeLimitRanges sections)
# ---------------------------------------------------------------------------------------------

QUOTAS = resource_for("", "resourcequotas")
LIMIT_RANGES = resource_for("", "limitranges")
QUOTA_SCOPE_HELP = {
    "Terminating": "Matches all pods that have an active deadline. These pods have a limited lifespan on a node "
                   "before being actively terminated by the system.",
    "NotTerminating": "Matches all pods that do not have an active deadline. These pods usually include long "
                      "running pods whose container command is not expected to terminate.",
    "BestEffort": "Matches all pods that do not have resource requirements set. These pods have a best effort "
                  "quality of service.",
    "NotBestEffort": "Matches all pods that have at least one resource requirement set. These pods have a burstable "
                     "or guaranteed quality of service.",
}


async def _optional_list(ctx: Context, info: ResourceInfo | None, namespace: str) -> list[Obj] | None:
    """A list kubectl shows a section for only when it can read it (a server without the resource, or
    a user who may not list it: no section)."""
    try:
        return await _list(ctx, info, namespace)
    except ApiError:
        return None


def _quantity_text(value: Any) -> str:
    try:
        return str(parse_quantity(value))
    except ValueError:
        return str(value)


def _print_direction_behavior(w: PrefixWriter, direction: str, rules: Any) -> None:
    """printDirectionBehavior."""
    if rules is None:
        return
    rules = _d(rules)
    w.write(1, f"{direction}:\n")
    if rules.get("stabilizationWindowSeconds") is not None:
        w.write(2, f"Stabilization Window: {rules['stabilizationWindowSeconds']} seconds\n")
    policies = _l(rules.get("policies"))
    if policies:
        w.write(2, f"Select Policy: {rules.get('selectPolicy') or 'Max'}\n")
        w.write(2, "Policies:\n")
        for p in policies:
            p = _d(p)
            w.write(3, f"- Type: {p.get('type', '')}\tValue: {p.get('value', 0)}\tPeriod: {p.get('periodSeconds', 0)} "
                       "seconds\n")


def hpa_description(hpa: Obj, events: list[Obj] | None) -> str:
    """describeHorizontalPodAutoscalerV2 (kubectl 1.33), for the resource metrics this cluster serves."""
    meta, spec, status = _d(hpa.get("metadata")), _d(hpa.get("spec")), _d(hpa.get("status"))
    ref = _d(spec.get("scaleTargetRef"))
    current_metrics = _l(status.get("currentMetrics"))
    w = PrefixWriter()
    w.write(0, f"Name:\t{meta.get('name', '')}\n")
    w.write(0, f"Namespace:\t{meta.get('namespace', '')}\n")
    print_labels_multiline(w, "Labels", meta.get("labels"))
    print_annotations_multiline(w, "Annotations", meta.get("annotations"))
    w.write(0, f"CreationTimestamp:\t{rfc1123z(meta.get('creationTimestamp'))}\n")
    w.write(0, f"Reference:\t{ref.get('kind', '')}/{ref.get('name', '')}\n")
    w.write(0, "Metrics:\t( current / target )\n")
    for i, metric in enumerate(_l(spec.get("metrics"))):
        metric = _d(metric)
        kind = metric.get("type")
        field = {"Resource": "resource", "ContainerResource": "containerResource"}.get(str(kind))
        if field is None:
            w.write(1, f'<unknown metric type "{kind}">\n')
            continue
        source = _d(metric.get(field))
        target = _d(source.get("target"))
        current_status = _d(_d(current_metrics[i]).get(field)) if i < len(current_metrics) else {}
        current = _d(current_status.get("current"))
        if field == "resource":
            w.write(1, f"resource {source.get('name', '')} on pods")
        else:
            w.write(1, f'resource {source.get("name", "")} of container "{source.get("container", "")}" on pods')
        if target.get("averageValue") is not None:
            now = _quantity_text(current["averageValue"]) if current_status and current.get("averageValue") \
                is not None else "<unknown>"
            w.write(0, f":\t{now} / {_quantity_text(target['averageValue'])}\n")
        else:
            now = "<unknown>"
            if current_status and current.get("averageUtilization") is not None:
                now = f"{current['averageUtilization']}% ({_quantity_text(current.get('averageValue', 0))})"
            goal = f"{target['averageUtilization']}%" if target.get("averageUtilization") is not None else "<auto>"
            w.write(1, f"(as a percentage of request):\t{now} / {goal}\n")
    min_replicas = spec.get("minReplicas")
    w.write(0, f"Min replicas:\t{'<unset>' if min_replicas is None else min_replicas}\n")
    w.write(0, f"Max replicas:\t{spec.get('maxReplicas', 0)}\n")
    behavior = spec.get("behavior")
    if behavior is not None:
        w.write(0, "Behavior:\n")
        _print_direction_behavior(w, "Scale Up", _d(behavior).get("scaleUp"))
        _print_direction_behavior(w, "Scale Down", _d(behavior).get("scaleDown"))
    w.write(0, f"{ref.get('kind', '')} pods:\t")
    w.write(0, f"{status.get('currentReplicas', 0)} current / {status.get('desiredReplicas', 0)} desired\n")
    conditions = _l(status.get("conditions"))
    if conditions:
        w.write(0, "Conditions:\n")
        w.write(1, "Type\tStatus\tReason\tMessage\n")
        w.write(1, "----\t------\t------\t-------\n")
        for c in conditions:
            c = _d(c)
            w.write(1, f"{c.get('type', '')}\t{c.get('status', '')}\t{c.get('reason', '')}\t{c.get('message', '')}\n")
    describe_events(w, events)
    return w.text()


def pod_disruption_budget_description(pdb: Obj, events: list[Obj] | None) -> str:
    """describePodDisruptionBudgetV1: the bound that is set, the selector, the controller's counts."""
    meta, spec, status = _d(pdb.get("metadata")), _d(pdb.get("spec")), _d(pdb.get("status"))
    w = PrefixWriter()
    w.write(0, f"Name:\t{meta.get('name', '')}\n")
    w.write(0, f"Namespace:\t{meta.get('namespace', '')}\n")
    if spec.get("minAvailable") is not None:
        w.write(0, f"Min available:\t{_int_or_string(spec['minAvailable'])}\n")
    elif spec.get("maxUnavailable") is not None:
        w.write(0, f"Max unavailable:\t{_int_or_string(spec['maxUnavailable'])}\n")
    selector = spec.get("selector")
    w.write(0, f"Selector:\t{'<unset>' if selector is None else format_label_selector(selector)}\n")
    w.write(0, "Status:\n")
    w.write(2, f"Allowed disruptions:\t{status.get('disruptionsAllowed') or 0}\n")
    w.write(2, f"Current:\t{status.get('currentHealthy') or 0}\n")
    w.write(2, f"Desired:\t{status.get('desiredHealthy') or 0}\n")
    w.write(2, f"Total:\t{status.get('expectedPods') or 0}\n")
    describe_events(w, events)
    return w.text()


async def describe_stateful_set(ctx: Context, sts: Obj) -> str:
    meta, spec = _d(sts.get("metadata")), _d(sts.get("spec"))
    counts = await pod_status_for_controller(ctx, meta.get("namespace", ""), spec.get("selector"), meta.get("uid", ""))
    return stateful_set_description(sts, await search_events(ctx, sts, "StatefulSet"), counts)


async def describe_pod_disruption_budget(ctx: Context, pdb: Obj) -> str:
    return pod_disruption_budget_description(pdb, await search_events(ctx, pdb, "PodDisruptionBudget"))


async def describe_hpa(ctx: Context, hpa: Obj) -> str:
    return hpa_description(hpa, await search_events(ctx, hpa, "HorizontalPodAutoscaler"))


def _quota_used(used: Any, hard: Any) -> str:
    """describeQuota: a used amount in another format than the hard limit is printed in the limit's
    format, as whole units (resource.NewQuantity(used.Value(), hard.Format))."""
    try:
        h = parse_quantity(hard)
        u = parse_quantity(used) if used is not None else Quantity(Fraction(0), h.format)
    except ValueError:
        return str(used)
    if u.format != h.format:
        u = Quantity(Fraction(u.int_value()), h.format)
    return str(u)


def _scopes(w: PrefixWriter, level: int, spec: Obj, bullet: str) -> None:
    scopes = sorted(_l(spec.get("scopes")))
    if not scopes:
        return
    w.write(level, f"Scopes:\t{', '.join(scopes)}\n")
    for scope in scopes:
        if scope in QUOTA_SCOPE_HELP:
            w.write(level, f"{bullet}{QUOTA_SCOPE_HELP[scope]}\n")


def quota_description(quota: Obj) -> str:
    meta, status = _d(quota.get("metadata")), _d(quota.get("status"))
    w = PrefixWriter()
    w.write(0, f"Name:\t{meta.get('name', '')}\n")
    w.write(0, f"Namespace:\t{meta.get('namespace', '')}\n")
    _scopes(w, 0, _d(quota.get("spec")), " * ")
    w.write(0, "Resource\tUsed\tHard\n")
    w.write(0, "--------\t----\t----\n")
    hard, used = _d(status.get("hard")), _d(status.get("used"))
    for name in sorted(hard):
        w.write(0, f"{name}\t{_quota_used(used.get(name), hard[name])}\t{_quantity_text(hard[name])}\n")
    return w.text()


def describe_resource_quotas(w: PrefixWriter, quotas: list[Obj]) -> None:
    if not quotas:
        w.write(0, "No resource quota.\n")
        return
    w.write(0, "Resource Quotas\n")
    for quota in sorted(quotas, key=lambda q: _d(q.get("metadata")).get("name", "")):
        status = _d(quota.get("status"))
        w.write(1, f"Name:\t{_d(quota.get('metadata')).get('name', '')}\n")
        _scopes(w, 1, _d(quota.get("spec")), "* ")
        w.write(1, "Resource\tUsed\tHard\n")
        w.write(1, "--------\t---\t---\n")
        hard, used = _d(status.get("hard")), _d(status.get("used"))
        for name in sorted(hard):
            w.write(1, f"{name}\t{_quantity_text(used.get(name, '0'))}\t{_quantity_text(hard[name])}\n")


def _limit_range_rows(w: PrefixWriter, spec: Obj, prefix: str) -> None:
    """describeLimitRangeSpec: one row per resource of each item, `-` where the item says nothing (Go
    walks a map there, in no order; sorted here)."""
    for item in _l(spec.get("limits")):
        item = _d(item)
        parts = [_d(item.get(k)) for k in ("min", "max", "defaultRequest", "default", "maxLimitRequestRatio")]
        for name in sorted({k for part in parts for k in part}):
            cells = [_quantity_text(part[name]) if name in part else "-" for part in parts]
            w.write(0, f"{prefix}{item.get('type', '')}\t{name}\t" + "\t".join(cells) + "\n")


def limit_range_description(lr: Obj) -> str:
    meta = _d(lr.get("metadata"))
    w = PrefixWriter()
    w.write(0, f"Name:\t{meta.get('name', '')}\n")
    w.write(0, f"Namespace:\t{meta.get('namespace', '')}\n")
    w.write(0, "Type\tResource\tMin\tMax\tDefault Request\tDefault Limit\tMax Limit/Request Ratio\n")
    w.write(0, "----\t--------\t---\t---\t---------------\t-------------\t-----------------------\n")
    _limit_range_rows(w, _d(lr.get("spec")), "")
    return w.text()


def describe_limit_ranges(w: PrefixWriter, ranges: list[Obj]) -> None:
    if not ranges:
        w.write(0, "No LimitRange resource.\n")
        return
    w.write(0, "Resource Limits\n Type\tResource\tMin\tMax\tDefault Request\tDefault Limit\t"
               "Max Limit/Request Ratio\n")
    w.write(0, " ----\t--------\t---\t---\t---------------\t-------------\t-----------------------\n")
    for lr in ranges:
        _limit_range_rows(w, _d(lr.get("spec")), " ")


async def describe_quota(ctx: Context, quota: Obj) -> str:
    return quota_description(quota)


async def describe_limit_range(ctx: Context, lr: Obj) -> str:
    return limit_range_description(lr)


# -- Ingress, IngressClass (describeIngressV1, describeIngressClassV1) ---------------------------------------


def _service_backend_text(service: Obj) -> str:
    """serviceBackendStringer: name:port-name, else name:port-number."""
    port = _d(service.get("port"))
    return f"{service.get('name', '')}:{port['name'] if port.get('name') else port.get('number') or 0}"


def ingress_backend_text(namespace: str, backend: Obj, services: dict[str, Obj],
                         slices: dict[str, list[Obj]]) -> str:
    """describeBackendV1: `svc:port (endpoints)` from the Service's EndpointSlices, or the resource's reference."""
    service = _d(backend.get("service"))
    if service:
        text = _service_backend_text(service)
        svc = services.get(service.get("name") or "")
        if svc is None:
            return f'{text} (<error: services "{service.get("name", "")}" not found>)'
        port, port_name = _d(service.get("port")), ""
        for sp in map(_d, _l(_d(svc.get("spec")).get("ports"))):
            if (port.get("number") and port["number"] == sp.get("port")) or \
                    (port.get("name") and port["name"] == sp.get("name")):
                port_name = sp.get("name") or ""
        return f"{text} ({format_endpoint_slices(slices.get(service.get('name') or '', []), port_name)})"
    resource = _d(backend.get("resource"))
    if resource:
        group = resource.get("apiGroup") if resource.get("apiGroup") is not None else "<none>"
        return f"APIGroup: {group}, Kind: {resource.get('kind', '')}, Name: {resource.get('name', '')}"
    return ""


def ingress_description(ingress: Obj, services: dict[str, Obj], slices: dict[str, list[Obj]],
                        events: list[Obj] | None) -> str:
    meta, spec = _d(ingress.get("metadata")), _d(ingress.get("spec"))
    namespace = meta.get("namespace") or ""
    w = PrefixWriter()
    w.write(0, f"Name:\t{meta.get('name', '')}\n")
    print_labels_multiline(w, "Labels", meta.get("labels"))
    w.write(0, f"Namespace:\t{namespace}\n")
    lb = _l(_d(_d(ingress.get("status")).get("loadBalancer")).get("ingress"))
    address = ",".join(sorted({str(_d(i).get("ip") or _d(i).get("hostname") or "") for i in lb} - {""}))
    w.write(0, f"Address:\t{address}\n")
    class_name = spec.get("ingressClassName")
    w.write(0, f"Ingress Class:\t{'<none>' if class_name is None else class_name}\n")
    default = "<default>"
    if spec.get("defaultBackend") is not None:
        default = ingress_backend_text(namespace, _d(spec["defaultBackend"]), services, slices)
    w.write(0, f"Default backend:\t{default}\n")
    if _l(spec.get("tls")):
        w.write(0, "TLS:\n")
        for tls in map(_d, _l(spec.get("tls"))):
            hosts = ",".join(str(h) for h in _l(tls.get("hosts")))
            if tls.get("secretName"):
                w.write(1, f"{tls['secretName']} terminates {hosts}\n")
            else:
                w.write(1, f"SNI routes {hosts}\n")
    w.write(0, "Rules:\n  Host\tPath\tBackends\n")
    w.write(1, "----\t----\t--------\n")
    count = 0
    for rule in map(_d, _l(spec.get("rules"))):
        if rule.get("http") is None:
            continue
        count += 1
        w.write(1, f"{rule.get('host') or '*'}\t\n")
        for path in map(_d, _l(_d(rule.get("http")).get("paths"))):
            backend = ingress_backend_text(namespace, _d(path.get("backend")), services, slices)
            w.write(2, f"\t{path.get('path') or ''} \t{backend}\n")
    if count == 0:
        w.write(1, f"*\t*\t{default}\n")
    print_annotations_multiline(w, "Annotations", meta.get("annotations"))
    describe_events(w, events)
    return w.text()


def _ingress_service_names(spec: Obj) -> set[str]:
    backends = [_d(spec.get("defaultBackend"))] + [
        _d(_d(p).get("backend")) for r in _l(spec.get("rules")) for p in _l(_d(_d(r).get("http")).get("paths"))]
    return {str(_d(b.get("service")).get("name")) for b in backends if _d(b.get("service")).get("name")}


async def describe_ingress(ctx: Context, ingress: Obj) -> str:
    namespace = _d(ingress.get("metadata")).get("namespace") or ctx.namespace
    services: dict[str, Obj] = {}
    slices: dict[str, list[Obj]] = {}
    assert SERVICES is not None
    for name in sorted(_ingress_service_names(_d(ingress.get("spec")))):
        try:
            services[name] = await ctx.client.request("GET", SERVICES.object_path(name, namespace))
            slices[name] = await _list(ctx, ENDPOINT_SLICES, namespace, labelSelector=f"{SERVICE_NAME_LABEL}={name}")
        except ApiError:
            continue
    events = await search_events(ctx, ingress, "Ingress")
    return ingress_description(ingress, services, slices, events)


def ingress_class_description(klass: Obj, events: list[Obj] | None) -> str:
    meta, spec = _d(klass.get("metadata")), _d(klass.get("spec"))
    w = PrefixWriter()
    w.write(0, f"Name:\t{meta.get('name', '')}\n")
    print_labels_multiline(w, "Labels", meta.get("labels"))
    print_annotations_multiline(w, "Annotations", meta.get("annotations"))
    w.write(0, f"Controller:\t{spec.get('controller') or ''}\n")
    params = spec.get("parameters")
    if isinstance(params, dict):
        w.write(0, "Parameters:\n")
        if params.get("apiGroup") is not None:
            w.write(1, f"APIGroup:\t{params['apiGroup']}\n")
        w.write(1, f"Kind:\t{params.get('kind', '')}\n")
        w.write(1, f"Name:\t{params.get('name', '')}\n")
    if events is not None:
        describe_events(w, events)
    return w.text()


async def describe_ingress_class(ctx: Context, klass: Obj) -> str:
    return ingress_class_description(klass, await search_events(ctx, klass, "IngressClass"))


Describer = Callable[[Context, Obj], Awaitable[str]]
DESCRIBERS: dict[tuple[str, str], Describer] = {
    ("", "Pod"): describe_pod,
    ("apps", "Deployment"): describe_deployment,
    ("apps", "ReplicaSet"): describe_replicaset,
    ("", "Node"): describe_node,
    ("", "Namespace"): describe_namespace,
    ("", "Service"): describe_service,
    ("", "Endpoints"): describe_endpoints,
    ("discovery.k8s.io", "EndpointSlice"): describe_endpoint_slice,
    ("", "Secret"): describe_secret,
    ("", "ConfigMap"): describe_configmap,
    ("", "PersistentVolume"): describe_persistent_volume,
    ("", "PersistentVolumeClaim"): describe_persistent_volume_claim,
    ("storage.k8s.io", "StorageClass"): describe_storage_class,
    ("batch", "Job"): describe_job,
    ("batch", "CronJob"): describe_cronjob,
    ("apps", "StatefulSet"): describe_stateful_set,
    ("policy", "PodDisruptionBudget"): describe_pod_disruption_budget,
    ("autoscaling", "HorizontalPodAutoscaler"): describe_hpa,
    ("", "ResourceQuota"): describe_quota,
    ("", "LimitRange"): describe_limit_range,
    ("networking.k8s.io", "Ingress"): describe_ingress,
    ("networking.k8s.io", "IngressClass"): describe_ingress_class,
}


async def describe(ctx: Context, info: ResourceInfo, obj: Obj) -> str:
    describer = DESCRIBERS.get((info.group, info.kind))
    if describer is None:
        return await describe_generic(ctx, obj, info)
    return await describer(ctx, obj)


__all__ = ["describe", "describe_pod_template", "format_labels"]
