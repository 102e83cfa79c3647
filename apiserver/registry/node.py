"""Nodes (upstream: pkg/apis/core/v1/defaults.go, pkg/apis/core/validation, pkg/registry/core/node).

Kubelets register their node and report through /status; the node controller assigns podCIDR once.
"""

from __future__ import annotations

import ipaddress

from apiserver.registry.pod import TAINT_EFFECTS
from apiserver.registry.strategy import Strategy
from apiserver.validation import (
    FieldError,
    duplicate,
    forbidden,
    invalid,
    not_supported,
    required,
    validate_cidr,
    validate_qualified_name,
    validate_quantity,
)
from machinery.types import Obj
from machinery.validation import is_valid_label_value

_PODCIDR_CHANGE = 'node updates may not change podCIDR except from "" to valid'


def sync_pod_cidrs(spec: Obj) -> None:
    """The v1 round trip: podCIDR is podCIDRs[0]; a podCIDR alone becomes the one-item podCIDRs."""
    cidrs = spec.get("podCIDRs") or []
    if cidrs:
        spec["podCIDR"] = cidrs[0]
    elif spec.get("podCIDR"):
        spec["podCIDRs"] = [spec["podCIDR"]]


def default_node_status(obj: Obj) -> None:
    """SetDefaults_NodeStatus: allocatable defaults to capacity."""
    status = obj.get("status")
    if status and status.get("allocatable") is None and status.get("capacity") is not None:
        status["allocatable"] = dict(status["capacity"])


def validate_taints(taints: list[Obj], path: str) -> list[FieldError]:
    """Key a label key, value a label value, effect one of the three, (key, effect) unique."""
    errs: list[FieldError] = []
    seen: set[tuple[str, str]] = set()
    for i, taint in enumerate(taints):
        idx = f"{path}[{i}]"
        key, effect = taint.get("key") or "", taint.get("effect") or ""
        errs += validate_qualified_name(key, f"{idx}.key")
        msgs = is_valid_label_value(taint.get("value") or "")
        if msgs:
            errs.append(invalid(f"{idx}.value", taint.get("value") or "", ";".join(msgs)))
        if not effect:
            errs.append(required(f"{idx}.effect"))
        elif effect not in TAINT_EFFECTS:
            errs.append(not_supported(f"{idx}.effect", effect, TAINT_EFFECTS))
        if (key, effect) in seen:
            err = duplicate(idx, taint)
            err.detail = "taints must be unique by key and effect pair"
            errs.append(err)
            continue
        seen.add((key, effect))
    return errs


def _is_dual_stack(cidrs: list[str]) -> bool:
    try:
        versions = [ipaddress.ip_network(c, strict=False).version for c in cidrs]
    except ValueError:
        return False
    return len(set(versions)) == 2


class NodeStrategy(Strategy):
    """Nodes: taints and podCIDRs validated; podCIDRs and providerID set once; status via /status."""

    has_status_subresource = True

    def prepare_for_create(self, obj: Obj) -> None:
        sync_pod_cidrs(obj.setdefault("spec", {}))
        default_node_status(obj)

    def validate(self, obj: Obj) -> list[FieldError]:
        spec = obj.get("spec") or {}
        # upstream reports taints under metadata (ValidateNode passes the metadata path); kept verbatim
        errs = validate_taints(spec.get("taints") or [], "metadata.taints")
        cidrs = spec.get("podCIDRs") or []
        for i, cidr in enumerate(cidrs):
            errs += validate_cidr(cidr, f"spec.podCIDRs[{i}]")
        if len(cidrs) > 1:
            if len(cidrs) > 2 or not _is_dual_stack(cidrs):
                errs.append(invalid("spec.podCIDRs", cidrs, "may specify no more than one CIDR for each IP family"))
            seen: set[str] = set()
            for i, cidr in enumerate(cidrs):
                if cidr in seen:
                    errs.append(duplicate(f"spec.podCIDRs[{i}]", cidr))
                seen.add(cidr)
        errs += self._validate_resources(obj)
        return errs

    def _validate_resources(self, obj: Obj) -> list[FieldError]:
        """Capacity and allocatable are quantities, never negative (ValidateNodeResources)."""
        errs: list[FieldError] = []
        status = obj.get("status") or {}
        for key in ("capacity", "allocatable"):
            for name, raw in (status.get(key) or {}).items():
                path = f"status.{key}[{name}]"
                q, q_errs = validate_quantity(raw, path)
                errs += q_errs
                if q is not None and q.value < 0:
                    errs.append(invalid(path, str(q), "must be greater than or equal to 0"))
        return errs

    def prepare_for_update(self, new: Obj, old: Obj) -> None:
        sync_pod_cidrs(new.setdefault("spec", {}))
        super().prepare_for_update(new, old)

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        """podCIDRs only from unset to set; providerID likewise; no address reported twice."""
        errs: list[FieldError] = []
        spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
        old_cidrs = old_spec.get("podCIDRs") or []
        if old_cidrs and list(spec.get("podCIDRs") or []) != list(old_cidrs):
            errs.append(forbidden("spec.podCIDRs", _PODCIDR_CHANGE))
        if old_spec.get("providerID") and old_spec.get("providerID") != spec.get("providerID"):
            errs.append(forbidden("spec.providerID", 'node updates may not change providerID except from "" to valid'))
        seen: list[Obj] = []
        for i, address in enumerate((new.get("status") or {}).get("addresses") or []):
            if address in seen:
                errs.append(duplicate(f"status.addresses[{i}]", address))
            seen.append(address)
        return errs

    def prepare_for_status_update(self, new: Obj, old: Obj) -> None:
        super().prepare_for_status_update(new, old)
        default_node_status(new)

    def field_values(self, obj: Obj) -> dict[str, str]:
        return {
            "metadata.name": (obj.get("metadata") or {}).get("name") or "",
            "spec.unschedulable": "true" if (obj.get("spec") or {}).get("unschedulable") else "false",
        }
