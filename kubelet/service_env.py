"""Services as environment variables (upstream: pkg/kubelet/envvars/envvars.go FromServices, and
pkg/kubelet/kubelet_pods.go getServiceEnvVarMap).

Every container gets the master service (`kubernetes` in `default`: KUBERNETES_SERVICE_HOST,
KUBERNETES_SERVICE_PORT, ..., what in-cluster clients such as the official Python client's
`load_incluster_config()` read) and, with the pod's enableServiceLinks (true by default), the Services
of its own namespace, each as `<NAME>_SERVICE_HOST`, `<NAME>_SERVICE_PORT`, a `<NAME>_SERVICE_PORT_<PORT
NAME>` per named port, and Docker's link variables (`<NAME>_PORT=tcp://IP:PORT`, `<NAME>_PORT_<PORT>_TCP`
with _PROTO, _PORT, _ADDR). Services without a ClusterIP (headless, ExternalName) give none. The
container's own env wins over these, and its $(VAR) references may name them.
"""

from __future__ import annotations

from collections.abc import Iterable

from machinery.api.core_v1 import Service

MASTER_SERVICES = frozenset({"kubernetes"})
DEFAULT_NAMESPACE = "default"


def _env_name(name: str) -> str:
    return name.replace("-", "_").upper()


def _ip_set(service: Service) -> bool:
    ip = service.spec.cluster_ip if service.spec else None
    return bool(ip) and ip != "None"


def _host_port(ip: str, port: int) -> str:
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


def from_services(services: Iterable[Service]) -> dict[str, str]:
    """upstream FromServices, as name -> value."""
    out: dict[str, str] = {}
    for service in services:
        if not _ip_set(service) or service.spec is None:
            continue
        ip = service.spec.cluster_ip or ""
        ports = service.spec.ports or []
        prefix = _env_name(service.metadata.name or "")
        out[f"{prefix}_SERVICE_HOST"] = ip
        if not ports:
            continue
        out[f"{prefix}_SERVICE_PORT"] = str(ports[0].port)
        for sp in ports:
            if sp.name:
                out[f"{prefix}_SERVICE_PORT_{_env_name(sp.name)}"] = str(sp.port)
        for i, sp in enumerate(ports):  # Docker-compatible link variables
            protocol = sp.protocol or "TCP"
            url = f"{protocol.lower()}://{_host_port(ip, sp.port)}"
            if i == 0:
                out[f"{prefix}_PORT"] = url
            port_prefix = f"{prefix}_PORT_{sp.port}_{protocol.upper()}"
            out[port_prefix] = url
            out[f"{port_prefix}_PROTO"] = protocol.lower()
            out[f"{port_prefix}_PORT"] = str(sp.port)
            out[f"{port_prefix}_ADDR"] = ip
    return out


def service_env(services: Iterable[Service], namespace: str, enable_service_links: bool) -> dict[str, str]:
    """upstream getServiceEnvVarMap: the master services of `default` always, the namespace's own when
    enableServiceLinks; a namespace's own service of a master service's name wins over the master's."""
    chosen: dict[str, Service] = {}
    for service in services:
        if not _ip_set(service):
            continue
        name = service.metadata.name or ""
        if service.metadata.namespace == DEFAULT_NAMESPACE and name in MASTER_SERVICES:
            chosen.setdefault(name, service)
        elif service.metadata.namespace == namespace and enable_service_links:
            chosen[name] = service
    return from_services(chosen.values())
