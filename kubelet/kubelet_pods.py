"""A container's environment (upstream pkg/kubelet/kubelet_pods.go makeEnvironmentVariables,
podFieldSelectorRuntimeValue; resourceFieldRef as pkg/api/v1/resource ExtractResourceValueByContainerName).
Pure: no I/O (the ConfigMaps and Secrets come read, kubelet/configmap_secret_manager.py).

Env values may come from the pod's own fields (fieldRef) and resources (resourceFieldRef), ConfigMap
and Secret keys (valueFrom, and envFrom for all of an object's keys, the env entries winning), and
`$(VAR)` references in values expand against the entries before them (kubelet/container/helpers.py).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from kubelet.configmap_secret_manager import PodObjects
from kubelet.container.helpers import expand
from kubelet.container.runtime import ConfigError
from machinery.api.core_v1 import Container, Pod
from machinery.quantity import parse_quantity


@dataclass(frozen=True)
class PodContext:
    """What env fieldRefs and the runtime need to know about the pod beyond its spec."""

    pod_ip: str = ""
    host_ip: str = ""
    node_name: str = ""
    node_allocatable_cpu_millis: int = 0
    node_allocatable_memory: int = 0
    # the Services as environment variables (kubelet/service_env.py); the container's own env wins
    service_env: Mapping[str, str] = field(default_factory=dict)


def field_ref_value(pod: Pod, path: str, ctx: PodContext) -> str:
    meta = pod.metadata
    spec = pod.spec
    simple = {
        "metadata.name": meta.name or "",
        "metadata.namespace": meta.namespace or "",
        "metadata.uid": meta.uid or "",
        "spec.nodeName": (spec.node_name if spec else None) or ctx.node_name,
        "spec.serviceAccountName": (spec.service_account_name if spec else None) or "",
        "status.podIP": ctx.pod_ip,
        "status.podIPs": ctx.pod_ip,
        "status.hostIP": ctx.host_ip,
        "status.hostIPs": ctx.host_ip,
    }
    if path in simple:
        return simple[path]
    m = re.fullmatch(r"metadata\.(labels|annotations)\['([^']*)'\]", path)
    if m:
        source = (meta.labels if m.group(1) == "labels" else meta.annotations) or {}
        return source.get(m.group(2), "")
    if path in ("metadata.labels", "metadata.annotations"):
        source = (meta.labels if path == "metadata.labels" else meta.annotations) or {}
        return "\n".join(f'{k}="{v}"' for k, v in sorted(source.items()))
    raise ConfigError(f"unsupported fieldRef fieldPath {path!r}")


def resource_field_value(container: Container, resource: str, divisor: Any, ctx: PodContext) -> str:
    res = container.resources
    limits = (res.limits if res else None) or {}
    requests = (res.requests if res else None) or {}
    kind, _, name = resource.partition(".")
    source = limits if kind == "limits" else requests
    if name == "cpu":
        value = parse_quantity(source["cpu"]).value if "cpu" in source else (
            Fraction(ctx.node_allocatable_cpu_millis, 1000) if kind == "limits" else Fraction(0))
        div = parse_quantity(divisor).value if divisor not in (None, "", 0) else Fraction(1)
        return str(math.ceil(value / div))
    if name in ("memory", "ephemeral-storage"):
        value = parse_quantity(source[name]).value if name in source else (
            Fraction(ctx.node_allocatable_memory) if kind == "limits" and name == "memory" else Fraction(0))
        div = parse_quantity(divisor).value if divisor not in (None, "", 0) else Fraction(1)
        return str(math.ceil(value / div))
    raise ConfigError(f"unsupported resourceFieldRef resource {resource!r}")


# upstream validation.IsEnvVarName: what envFrom takes from an object's keys (others are skipped)
_ENV_VAR_NAME = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")


def _env_from(container: Container, objects: PodObjects, warnings: list[tuple[str, str]]) -> dict[str, str]:
    """envFrom: every key of each ConfigMap (its data) and Secret, with the source's prefix, later sources
    winning; keys that are no env var names are skipped, and said so in `warnings` (upstream's
    InvalidEnvironmentVariableNames event)."""
    out: dict[str, str] = {}
    for source in container.env_from or []:
        values: dict[str, str] | None
        if source.config_map_ref is not None:
            name, optional, kind = source.config_map_ref.name or "", source.config_map_ref.optional, "configmap"
            cm = objects.configmaps.get(name)
            values = dict(cm.get("data") or {}) if cm is not None else None
        elif source.secret_ref is not None:
            name, optional, kind = source.secret_ref.name or "", source.secret_ref.optional, "secret"
            secret = objects.secret_data(name)
            values = {k: v.decode(errors="replace") for k, v in secret.items()} if secret is not None else None
        else:
            continue
        if values is None:
            if optional:
                continue
            raise ConfigError(f'{kind} "{name}" not found')
        invalid = []
        for key, value in values.items():
            if _ENV_VAR_NAME.fullmatch((source.prefix or "") + key):
                out[(source.prefix or "") + key] = value
            else:
                invalid.append(key)
        if invalid:
            what = "configMap" if kind == "configmap" else "secret"
            warnings.append(("InvalidEnvironmentVariableNames",
                             f"Keys [{', '.join(sorted(invalid))}] from the EnvFrom {what} {objects.namespace}/{name} "
                             "were skipped since they are considered invalid environment variable names."))
    return out


def container_env(pod: Pod, container: Container, ctx: PodContext, objects: PodObjects | None = None,
                  warnings: list[tuple[str, str]] | None = None) -> list[tuple[str, str]]:
    """The container's environment, in order, with $(VAR) expanded against the earlier entries; what deserves
    a Warning event goes to `warnings` as (reason, message)."""
    objects = objects or PodObjects(pod.metadata.namespace or "")
    namespace = pod.metadata.namespace or ""
    out: list[tuple[str, str]] = []
    seen: dict[str, str] = dict(ctx.service_env)  # $(VAR) may name a Service's variables
    from_objects = _env_from(container, objects, warnings if warnings is not None else [])
    overridden = {var.name for var in container.env or []}
    for name, value in from_objects.items():
        seen[name] = value
        if name not in overridden:
            out.append((name, value))
    for var in container.env or []:
        if var.value_from is None:
            value = expand(var.value or "", seen)
        else:
            source = var.value_from
            if source.field_ref is not None:
                value = field_ref_value(pod, source.field_ref.field_path, ctx)
            elif source.resource_field_ref is not None:
                ref = source.resource_field_ref
                target = container
                if ref.container_name:
                    found = [c for c in (pod.spec.containers if pod.spec else []) if c.name == ref.container_name]
                    if not found:
                        raise ConfigError(f"resourceFieldRef: no container {ref.container_name!r}")
                    target = found[0]
                value = resource_field_value(target, ref.resource, ref.divisor, ctx)
            elif source.config_map_key_ref is not None:
                ref_cm = source.config_map_key_ref
                cm = objects.configmaps.get(ref_cm.name or "")
                if cm is None:
                    if ref_cm.optional:
                        continue
                    raise ConfigError(f'configmap "{ref_cm.name}" not found')
                cm_value = (cm.get("data") or {}).get(ref_cm.key)
                if cm_value is None:
                    if ref_cm.optional:
                        continue
                    raise ConfigError(f"couldn't find key {ref_cm.key} in ConfigMap {namespace}/{ref_cm.name}")
                value = cm_value
            elif source.secret_key_ref is not None:
                ref_s = source.secret_key_ref
                secret = objects.secret_data(ref_s.name or "")
                if secret is None:
                    if ref_s.optional:
                        continue
                    raise ConfigError(f'secret "{ref_s.name}" not found')
                if ref_s.key not in secret:
                    if ref_s.optional:
                        continue
                    raise ConfigError(f"couldn't find key {ref_s.key} in Secret {namespace}/{ref_s.name}")
                value = secret[ref_s.key].decode(errors="replace")
            else:
                raise ConfigError(f"env {var.name}: valueFrom names no source")
        seen[var.name] = value
        out.append((var.name, value))
    defined = {name for name, _ in out}
    out += [(name, value) for name, value in sorted(ctx.service_env.items()) if name not in defined]
    return out
