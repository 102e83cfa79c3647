"""Jobs (upstream: pkg/apis/batch/v1/defaults.go, pkg/apis/batch/validation, pkg/registry/batch/job/strategy.go).

On create the selector is generated (unless spec.manualSelector): the template gets the
controller-uid and job-name labels (new and legacy spellings) and the selector matches the uid, so a
Job never claims another's pods.
"""

from __future__ import annotations

from typing import Any

from apiserver.registry.pod import default_pod_spec, validate_pod_template_spec
from apiserver.registry.strategy import Strategy
from apiserver.validation import (
    FieldError,
    StringMap,
    invalid,
    not_supported,
    required,
    semantic_equal,
    validate_immutable,
    validate_label_selector,
    validate_nonnegative,
)
from machinery.api.batch_v1 import (
    CONTROLLER_UID_LABEL,
    JOB_NAME_LABEL,
    LEGACY_CONTROLLER_UID_LABEL,
    LEGACY_JOB_NAME_LABEL,
)
from machinery.selectors import SelectorError, selector_from_label_selector
from machinery.types import Obj

COMPLETION_MODES = ["NonIndexed", "Indexed"]
RESTART_POLICIES = ["OnFailure", "Never"]
POD_REPLACEMENT_POLICIES = ["TerminatingOrFailed", "Failed"]
POD_FAILURE_ACTIONS = ["Count", "FailIndex", "FailJob", "Ignore"]
MAX_PARALLELISM_FOR_INDEXED_JOB = 100_000
MAX_INT32 = 2**31 - 1
# the pod conditions a podFailurePolicy rule may name (upstream allows any; these are the usual ones)
EXIT_CODE_OPERATORS = ["In", "NotIn"]


def default_job_spec(spec: Obj) -> None:
    """SetDefaults_Job: one completion and one pod when neither is given, backoffLimit 6,
    NonIndexed, not suspended, pods replaced once terminating or failed."""
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
        spec["parallelism"] = 1
    if spec.get("parallelism") is None:
        spec["parallelism"] = 1
    if spec.get("backoffLimit") is None:
        spec["backoffLimit"] = MAX_INT32 if spec.get("backoffLimitPerIndex") is not None else 6
    if not spec.get("completionMode"):
        spec["completionMode"] = "NonIndexed"
    if spec.get("suspend") is None:
        spec["suspend"] = False
    if not spec.get("podReplacementPolicy"):
        spec["podReplacementPolicy"] = "Failed" if spec.get("podFailurePolicy") else "TerminatingOrFailed"
    if spec.get("manualSelector") is None:
        spec["manualSelector"] = False
    for rule in (spec.get("podFailurePolicy") or {}).get("rules") or []:
        for pattern in rule.get("onPodConditions") or []:
            if not pattern.get("status"):
                pattern["status"] = "True"
    template = spec.get("template")
    if isinstance(template, dict):
        default_pod_spec(template.setdefault("spec", {}))


def generate_selector(obj: Obj) -> None:
    """generateSelector: label the template with the Job's uid and name; select by the uid."""
    spec = obj.setdefault("spec", {})
    if spec.get("manualSelector"):
        return
    meta = obj.get("metadata") or {}
    uid, name = meta.get("uid") or "", meta.get("name") or ""
    template = spec.setdefault("template", {})
    tmeta = template.get("metadata")
    if tmeta is None:
        tmeta = template["metadata"] = {}
    labels = tmeta.get("labels")
    if labels is None:
        labels = tmeta["labels"] = {}
    labels.setdefault(LEGACY_CONTROLLER_UID_LABEL, uid)
    labels.setdefault(CONTROLLER_UID_LABEL, uid)
    labels.setdefault(LEGACY_JOB_NAME_LABEL, name)
    labels.setdefault(JOB_NAME_LABEL, name)
    if spec.get("selector") is None:
        spec["selector"] = {"matchLabels": {CONTROLLER_UID_LABEL: uid}}


def _validate_pod_failure_policy(policy: Obj, path: str, restart_policy: str) -> list[FieldError]:
    errs: list[FieldError] = []
    if restart_policy != "Never":
        errs.append(invalid(f"{path.rsplit('.', 1)[0]}.template.spec.restartPolicy", restart_policy,
                            "only \"Never\" is supported when podFailurePolicy is specified"))
    for i, rule in enumerate(policy.get("rules") or []):
        rpath = f"{path}.rules[{i}]"
        action = rule.get("action") or ""
        if action not in POD_FAILURE_ACTIONS:
            errs.append(not_supported(f"{rpath}.action", action, POD_FAILURE_ACTIONS))
        on_codes, on_conditions = rule.get("onExitCodes"), rule.get("onPodConditions")
        if on_codes is not None and on_conditions is not None:
            errs.append(invalid(rpath, "", "specifying both OnExitCodes and OnPodConditions is not supported"))
        elif on_codes is None and on_conditions is None:
            errs.append(invalid(rpath, "", "specifying one of OnExitCodes and OnPodConditions is required"))
        if on_codes is not None:
            cpath = f"{rpath}.onExitCodes"
            if on_codes.get("operator") not in EXIT_CODE_OPERATORS:
                errs.append(not_supported(f"{cpath}.operator", on_codes.get("operator") or "", EXIT_CODE_OPERATORS))
            values = on_codes.get("values") or []
            if not values:
                errs.append(required(f"{cpath}.values", "at least one value is required"))
            seen: set[int] = set()
            for j, value in enumerate(values):
                if value in seen:
                    errs.append(invalid(f"{cpath}.values[{j}]", value, "duplicated values are not allowed"))
                seen.add(value)
                if on_codes.get("operator") == "In" and value == 0:
                    errs.append(invalid(f"{cpath}.values[{j}]", value,
                                        "must not be 0 for the In operator"))
            if values != sorted(values):
                errs.append(invalid(f"{cpath}.values", values, "must be ordered"))
    return errs


def validate_job_spec(spec: Obj, path: str, job_meta: Obj | None = None) -> list[FieldError]:
    """ValidateJobSpec (and the selector rules of ValidateJob)."""
    errs: list[FieldError] = []
    for key in ("parallelism", "completions", "activeDeadlineSeconds", "backoffLimit", "ttlSecondsAfterFinished",
                "backoffLimitPerIndex", "maxFailedIndexes"):
        errs += validate_nonnegative(spec.get(key), f"{path}.{key}")
    mode = spec.get("completionMode") or "NonIndexed"
    if mode not in COMPLETION_MODES:
        errs.append(not_supported(f"{path}.completionMode", mode, COMPLETION_MODES))
    if mode == "Indexed":
        if spec.get("completions") is None:
            errs.append(required(f"{path}.completions", "when completion mode is Indexed"))
        elif spec["completions"] > MAX_PARALLELISM_FOR_INDEXED_JOB:
            errs.append(invalid(f"{path}.completions", spec["completions"],
                                f"must be less than or equal to {MAX_PARALLELISM_FOR_INDEXED_JOB} when completion "
                                "mode is Indexed"))
        if (spec.get("parallelism") or 0) > MAX_PARALLELISM_FOR_INDEXED_JOB:
            errs.append(invalid(f"{path}.parallelism", spec["parallelism"],
                                f"must be less than or equal to {MAX_PARALLELISM_FOR_INDEXED_JOB} when completion "
                                "mode is Indexed"))
    elif spec.get("backoffLimitPerIndex") is not None:
        errs.append(required(f"{path}.completionMode",
                             "when backoffLimitPerIndex is specified, only completionMode=Indexed is supported"))
    replacement = spec.get("podReplacementPolicy")
    if replacement is not None and replacement not in POD_REPLACEMENT_POLICIES:
        errs.append(not_supported(f"{path}.podReplacementPolicy", replacement, POD_REPLACEMENT_POLICIES))
    selector = spec.get("selector")
    template = spec.get("template")
    if selector is None:
        errs.append(required(f"{path}.selector"))
    else:
        errs += validate_label_selector(selector, f"{path}.selector")
        try:
            parsed = selector_from_label_selector(selector)
        except (SelectorError, ValueError):
            parsed = None
        labels: dict[str, Any] = ((template or {}).get("metadata") or {}).get("labels") or {}
        if parsed is not None and not parsed.matches(labels):
            errs.append(invalid(f"{path}.template.metadata.labels", StringMap(labels),
                                "`selector` does not match template `labels`"))
    if template is None:
        return [*errs, required(f"{path}.template")]
    errs += validate_pod_template_spec(template, f"{path}.template")
    tspec = template.get("spec") or {}
    restart = tspec.get("restartPolicy") or ""
    if restart not in RESTART_POLICIES:
        errs.append(not_supported(f"{path}.template.spec.restartPolicy", restart, RESTART_POLICIES))
    if spec.get("podFailurePolicy") is not None:
        errs += _validate_pod_failure_policy(spec["podFailurePolicy"], f"{path}.podFailurePolicy", restart)
    return errs


def _manual_selector_checks(obj: Obj) -> list[FieldError]:
    """With a generated selector, the template must carry this Job's uid (validateGeneratedSelector)."""
    spec = obj.get("spec") or {}
    if spec.get("manualSelector"):
        return []
    uid = (obj.get("metadata") or {}).get("uid") or ""
    labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    if labels.get(CONTROLLER_UID_LABEL) not in (None, uid):
        return [invalid("spec.template.metadata.labels", StringMap(labels),
                        f"`selector` not auto-generated: {CONTROLLER_UID_LABEL} must be {uid}")]
    return []


def validate_job_status(status: Obj) -> list[FieldError]:
    errs: list[FieldError] = []
    for key in ("active", "succeeded", "failed", "ready", "terminating"):
        errs += validate_nonnegative(status.get(key), f"status.{key}")
    return errs


# fields of a Job's pod template that may change while the Job is suspended and never started
# (upstream: mutable scheduling directives)
_SCHEDULING_DIRECTIVES = ("nodeSelector", "affinity", "tolerations", "schedulingGates")


class JobStrategy(Strategy):
    has_status_subresource = True

    def prepare_for_create(self, obj: Obj) -> None:
        default_job_spec(obj.setdefault("spec", {}))
        generate_selector(obj)
        obj["status"] = {}  # a fresh status, written as `status: {}` as upstream's

    def validate(self, obj: Obj) -> list[FieldError]:
        return validate_job_spec(obj.get("spec") or {}, "spec") + _manual_selector_checks(obj)

    def prepare_for_update(self, new: Obj, old: Obj) -> None:
        default_job_spec(new.setdefault("spec", {}))
        super().prepare_for_update(new, old)

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        """ValidateJobSpecUpdate: selector, completionMode, podFailurePolicy and the template are
        immutable; completions too (unless an Indexed Job scales completions with parallelism);
        the template's scheduling directives may change while the Job is suspended and not started."""
        nspec, ospec = new.get("spec") or {}, old.get("spec") or {}
        errs = validate_immutable(nspec.get("selector"), ospec.get("selector"), "spec.selector")
        errs += validate_immutable(nspec.get("completionMode"), ospec.get("completionMode"), "spec.completionMode")
        errs += validate_immutable(nspec.get("podFailurePolicy"), ospec.get("podFailurePolicy"),
                                   "spec.podFailurePolicy")
        errs += validate_immutable(nspec.get("backoffLimitPerIndex"), ospec.get("backoffLimitPerIndex"),
                                   "spec.backoffLimitPerIndex")
        elastic = (nspec.get("completionMode") == "Indexed" and nspec.get("completions") == nspec.get("parallelism")
                   and ospec.get("completions") == ospec.get("parallelism"))
        if not elastic:
            errs += validate_immutable(nspec.get("completions"), ospec.get("completions"), "spec.completions")
        ntemplate, otemplate = nspec.get("template") or {}, ospec.get("template") or {}
        if not semantic_equal(ntemplate, otemplate):
            started = ((old.get("status") or {}).get("startTime")) is not None
            if ospec.get("suspend") and not started:
                stripped_new = _without_directives(ntemplate)
                stripped_old = _without_directives(otemplate)
                errs += validate_immutable(stripped_new, stripped_old, "spec.template")
            else:
                errs += validate_immutable(ntemplate, otemplate, "spec.template")
        if not semantic_equal(new.get("status"), old.get("status")):
            errs += validate_job_status(new.get("status") or {})
        return errs

    def field_values(self, obj: Obj) -> dict[str, str]:
        values = super().field_values(obj)
        values["status.successful"] = str((obj.get("status") or {}).get("succeeded") or 0)
        return values


def _without_directives(template: Obj) -> Obj:
    spec = {k: v for k, v in (template.get("spec") or {}).items() if k not in _SCHEDULING_DIRECTIVES}
    meta = {k: v for k, v in (template.get("metadata") or {}).items() if k not in ("labels", "annotations")}
    return {**template, "spec": spec, "metadata": meta}
