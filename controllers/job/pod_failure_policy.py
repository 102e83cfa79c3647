"""podFailurePolicy (upstream pkg/controller/job/pod_failure_policy.go): the first rule matching a
failed pod decides: FailJob, FailIndex, Ignore (not counted against backoffLimit) or Count."""

from __future__ import annotations

from dataclasses import dataclass

from machinery.api.batch_v1 import PodFailurePolicy, PodFailurePolicyOnExitCodesRequirement
from machinery.api.core_v1 import ContainerStatus, Pod


@dataclass(frozen=True)
class Match:
    action: str  # FailJob | FailIndex | Ignore | Count
    message: str


def _exit_code_matches(requirement: PodFailurePolicyOnExitCodesRequirement, code: int) -> bool:
    if requirement.operator == "In":
        return code in requirement.values
    return code not in requirement.values  # NotIn


def _terminated(pod: Pod) -> list[ContainerStatus]:
    status = pod.status
    statuses = [*((status.init_container_statuses or []) if status else []),
                *((status.container_statuses or []) if status else [])]
    return [s for s in statuses if s.state is not None and s.state.terminated is not None]


def match_pod_failure_policy(policy: PodFailurePolicy | None, pod: Pod) -> Match | None:
    """matchPodFailurePolicy: None when no rule matches (the failure counts)."""
    if policy is None:
        return None
    namespace, name = pod.metadata.namespace or "", pod.metadata.name or ""
    for index, rule in enumerate(policy.rules):
        if rule.on_exit_codes is not None:
            requirement = rule.on_exit_codes
            for status in _terminated(pod):
                if requirement.container_name and requirement.container_name != status.name:
                    continue
                assert status.state is not None and status.state.terminated is not None
                code = status.state.terminated.exit_code
                if code != 0 and _exit_code_matches(requirement, code):
                    return Match(rule.action, f"Container {status.name} for pod {namespace}/{name} failed with "
                                              f"exit code {code} matching {rule.action} rule at index {index}")
        for pattern in rule.on_pod_conditions or []:
            for condition in (pod.status.conditions if pod.status else None) or []:
                if condition.type == pattern.type and condition.status == (pattern.status or "True"):
                    return Match(rule.action, f"Pod {namespace}/{name} has condition {pattern.type} matching "
                                              f"{rule.action} rule at index {index}")
    return None
