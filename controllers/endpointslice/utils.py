"""What the Service endpoint controllers share about pods and Services (upstream
staging/src/k8s.io/endpointslice/utils.go, pkg/api/v1/pod FindPort, pkg/controller/util/endpoint
trigger_time_tracker.go and endpointslice's ShouldPodBeInEndpoints / ShouldSetHostname).

All of it is pure: a pod, its node and its Service in, endpoints, ports and labels out.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from controllers.controller_utils import is_pod_ready, pod_ready_condition
from machinery import timeutil
from machinery.api.core_v1 import Node, ObjectReference, Pod, Service, ServicePort
from machinery.api.discovery_v1 import Endpoint, EndpointConditions, EndpointPort, EndpointSlice
from machinery.selectors import selector_from_set

# discovery/v1 well-known labels and annotations
LABEL_SERVICE_NAME = "kubernetes.io/service-name"
LABEL_MANAGED_BY = "endpointslice.kubernetes.io/managed-by"
LABEL_SKIP_MIRROR = "endpointslice.kubernetes.io/skip-mirror"
LABEL_HEADLESS = "service.kubernetes.io/headless"
LABEL_TOPOLOGY_ZONE = "topology.kubernetes.io/zone"
LAST_CHANGE_TRIGGER_TIME = "endpoints.kubernetes.io/last-change-trigger-time"
LAST_APPLIED_CONFIG = "kubectl.kubernetes.io/last-applied-configuration"
CLUSTER_IP_NONE = "None"
ADDRESS_TYPE_IPV4 = "IPv4"
ADDRESS_TYPE_IPV6 = "IPv6"


class PortNotFound(ValueError):
    """FindPort found no container port for a named targetPort."""


def find_port(pod: Pod, port: ServicePort) -> int:
    """podutil.FindPort: a numeric targetPort as is (the port itself when unset); a named one looked up
    among the pod's container ports with the Service port's protocol."""
    target = port.target_port
    if target is None or target == 0 or target == "":
        return port.port
    if isinstance(target, int):
        return target
    protocol = port.protocol or "TCP"
    for container in pod.spec.containers if pod.spec else []:
        for cport in container.ports or []:
            if cport.name == target and (cport.protocol or "TCP") == protocol:
                return cport.container_port
    raise PortNotFound(f"no suitable port for manifest: {pod.metadata.uid}")


def is_pod_terminal(pod: Pod) -> bool:
    return (pod.status.phase if pod.status else None) in ("Succeeded", "Failed")


def pod_ips(pod: Pod) -> list[str]:
    status = pod.status
    if status is None:
        return []
    ips = [p.ip for p in status.pod_ips or [] if p.ip]
    if not ips and status.pod_ip:
        ips = [status.pod_ip]
    return ips


def should_pod_be_in_endpoints(pod: Pod, include_terminating: bool) -> bool:
    """endpointsliceutil.ShouldPodBeInEndpoints: not finished, has an IP; a terminating pod only when
    asked for (the EndpointSlice controller keeps them, with terminating=true)."""
    if is_pod_terminal(pod) or not pod_ips(pod):
        return False
    return include_terminating or pod.metadata.deletion_timestamp is None


def should_set_hostname(pod: Pod, service: Service) -> bool:
    """A pod with spec.hostname whose spec.subdomain names the Service in its namespace."""
    spec = pod.spec
    return (spec is not None and bool(spec.hostname) and spec.subdomain == service.metadata.name
            and pod.metadata.namespace == service.metadata.namespace)


def services_selecting(services: Iterable[Service], pod: Pod) -> list[Service]:
    """The Services (of the pod's namespace, as given) whose selector matches the pod."""
    labels = pod.metadata.labels or {}
    return [svc for svc in services
            if svc.spec is not None and svc.spec.selector is not None
            and selector_from_set(svc.spec.selector).matches(labels)]


def address_type_of(ip: str) -> str | None:
    try:
        return ADDRESS_TYPE_IPV6 if ipaddress.ip_address(ip).version == 6 else ADDRESS_TYPE_IPV4
    except ValueError:
        return None


def _family(ip: str) -> str:
    """The family of an address the apiserver validated (a pod IP): no parsing needed."""
    return ADDRESS_TYPE_IPV6 if ":" in ip else ADDRESS_TYPE_IPV4


def pod_reference(pod: Pod) -> ObjectReference:
    return ObjectReference(kind="Pod", namespace=pod.metadata.namespace, name=pod.metadata.name,
                           uid=pod.metadata.uid)


def pod_to_endpoint(pod: Pod, node: Node | None, service: Service, address_type: str = ADDRESS_TYPE_IPV4) -> Endpoint:
    """podToEndpoint: serving is the pod's readiness, terminating its deletion; ready = serving and not
    terminating, or always with publishNotReadyAddresses."""
    serving = is_pod_ready(pod)
    terminating = pod.metadata.deletion_timestamp is not None
    publish = bool(service.spec and service.spec.publish_not_ready_addresses)
    ready = publish or (serving and not terminating)
    zone = ((node.metadata.labels or {}).get(LABEL_TOPOLOGY_ZONE) if node is not None else None) or None
    return Endpoint(
        addresses=[ip for ip in pod_ips(pod) if _family(ip) == address_type][:1],
        conditions=EndpointConditions(ready=ready, serving=serving, terminating=terminating),
        hostname=pod.spec.hostname if pod.spec and should_set_hostname(pod, service) else None,
        target_ref=pod_reference(pod),
        node_name=pod.spec.node_name if pod.spec else None,
        zone=zone,
    )


def endpoint_ports(service: Service, pod: Pod) -> list[EndpointPort]:
    """getEndpointPorts: one per Service port the pod can serve (a named targetPort it lacks is left out)."""
    out: list[EndpointPort] = []
    for port in service.spec.ports or [] if service.spec else []:
        try:
            number = find_port(pod, port)
        except PortNotFound:
            continue
        out.append(EndpointPort(name=port.name or "", protocol=port.protocol or "TCP", port=number,
                                app_protocol=port.app_protocol))
    return out


PortKey = tuple[tuple[str, str, int, str], ...]


def port_key(ports: Sequence[EndpointPort] | None) -> PortKey:
    """The identity of a port set (upstream's portMapKey, a hash of the sorted ports)."""
    return tuple(sorted((p.name or "", p.protocol or "TCP", p.port or 0, p.app_protocol or "") for p in ports or []))


EndpointKey = tuple[tuple[str, ...], str, str]


def endpoint_key(endpoint: Endpoint) -> EndpointKey:
    """Which endpoint this is, whatever its conditions (upstream's endpointHash: addresses and target)."""
    ref = endpoint.target_ref
    return (tuple(sorted(endpoint.addresses)), (ref.namespace or "") if ref else "", (ref.name or "") if ref else "")


def service_labels(service: Service, managed_by: str) -> dict[str, str]:
    """setEndpointSliceLabels: the Service's own labels, the service-name and managed-by labels, and
    the headless label for a Service with clusterIP None."""
    labels = {k: v for k, v in (service.metadata.labels or {}).items()
              if k not in (LABEL_SERVICE_NAME, LABEL_MANAGED_BY, LABEL_HEADLESS)}
    labels[LABEL_SERVICE_NAME] = service.metadata.name or ""
    labels[LABEL_MANAGED_BY] = managed_by
    if service.spec is not None and service.spec.cluster_ip == CLUSTER_IP_NONE:
        labels[LABEL_HEADLESS] = ""
    return labels


def owned_by(slice_: EndpointSlice, uid: str | None) -> bool:
    return any(ref.controller and ref.uid == uid for ref in slice_.metadata.owner_references or [])


# -- last-change-trigger-time -------------------------------------------------------------------


@dataclass
class _TriggerState:
    last_pod_times: dict[str, str] = field(default_factory=dict)
    last_service_time: str = ""


@dataclass
class TriggerTimeTracker:
    """endpointutil.TriggerTimeTracker: the time of the earliest change (a pod's Ready transition, the
    Service's creation) not yet written to the Service's endpoints, for the last-change-trigger-time
    annotation from which network-programming latency is measured."""

    states: dict[str, _TriggerState] = field(default_factory=dict)

    def compute(self, key: str, service: Service, pods: Sequence[Pod]) -> str | None:
        state = self.states.setdefault(key, _TriggerState())
        changed: list[str] = []
        pod_times: dict[str, str] = {}
        for pod in pods:
            condition = pod_ready_condition(pod)
            when = condition.last_transition_time if condition is not None else None
            if not when:
                continue
            pod_times[pod.metadata.name or ""] = when
            if _later(when, state.last_pod_times.get(pod.metadata.name or "", "")):
                changed.append(when)
        service_time = service.metadata.creation_timestamp or ""
        if service_time and _later(service_time, state.last_service_time):
            changed.append(service_time)
        state.last_pod_times = pod_times
        state.last_service_time = service_time
        return min(changed, key=_instant) if changed else None

    def delete(self, key: str) -> None:
        self.states.pop(key, None)


def _instant(value: str) -> float:
    t = timeutil.parse_rfc3339(value)
    return t.timestamp() if t is not None else 0.0


def _later(a: str, b: str) -> bool:
    return not b or _instant(a) > _instant(b)


def merged_annotations(existing: Mapping[str, str] | None, trigger_time: str | None) -> dict[str, str] | None:
    """The slice's annotations with the trigger time set (or dropped when there is none)."""
    out = dict(existing or {})
    if trigger_time:
        out[LAST_CHANGE_TRIGGER_TIME] = trigger_time
    else:
        out.pop(LAST_CHANGE_TRIGGER_TIME, None)
    return out or None
