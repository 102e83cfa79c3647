"""The PodSecurity plugin's configuration (upstream: staging/src/k8s.io/pod-security-admission/admission/api
(PodSecurityConfiguration, pod-security.admission.config.k8s.io/v1) and its validation, read from the
apiserver's --admission-control-config-file, an AdmissionConfiguration apiserver.config.k8s.io/v1):

    apiVersion: apiserver.config.k8s.io/v1
    kind: AdmissionConfiguration
    plugins:
    - name: PodSecurity
      configuration:                      # or path: a file holding it (relative to this file)
        apiVersion: pod-security.admission.config.k8s.io/v1
        kind: PodSecurityConfiguration
        defaults: {enforce: baseline, enforce-version: latest, audit: restricted, warn: restricted}
        exemptions: {usernames: [], runtimeClasses: [], namespaces: [kube-system]}

Without a file, or without a PodSecurity entry: privileged:latest in every mode, no exemptions.
A configuration that does not validate stops the apiserver from starting, as upstream's does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from apiserver.admission.podsecurity.api import (
    LATEST,
    PRIVILEGED_POLICY,
    LevelVersion,
    Policy,
    parse_level,
    parse_version,
)

ADMISSION_CONFIG_VERSIONS = ("apiserver.config.k8s.io/v1", "apiserver.k8s.io/v1alpha1")
POD_SECURITY_VERSIONS = ("pod-security.admission.config.k8s.io/v1", "pod-security.admission.config.k8s.io/v1beta1")


class ConfigError(ValueError):
    pass


@dataclass(frozen=True)
class PodSecurityConfiguration:
    defaults: Policy = PRIVILEGED_POLICY
    exempt_usernames: frozenset[str] = field(default_factory=frozenset)
    exempt_runtime_classes: frozenset[str] = field(default_factory=frozenset)
    exempt_namespaces: frozenset[str] = field(default_factory=frozenset)


def _strings(raw: Any, where: str) -> frozenset[str]:
    if raw is None:
        return frozenset()
    if not isinstance(raw, list) or not all(isinstance(s, str) for s in raw):
        raise ConfigError(f"{where}: must be a list of strings")
    if any(not s for s in raw):
        raise ConfigError(f"{where}: must not contain empty values")
    if len(set(raw)) != len(raw):
        raise ConfigError(f"{where}: must not contain duplicates")
    return frozenset(raw)


def parse_pod_security_configuration(raw: Any) -> PodSecurityConfiguration:
    if not isinstance(raw, dict):
        raise ConfigError("PodSecurity configuration: must be an object")
    if raw.get("kind") != "PodSecurityConfiguration" or raw.get("apiVersion") not in POD_SECURITY_VERSIONS:
        raise ConfigError(f"PodSecurity configuration: want kind PodSecurityConfiguration, apiVersion "
                          f"{POD_SECURITY_VERSIONS[0]}; got {raw.get('kind')!r}, {raw.get('apiVersion')!r}")
    defaults = raw.get("defaults") or {}
    if not isinstance(defaults, dict):
        raise ConfigError("defaults: must be an object")
    modes: dict[str, LevelVersion] = {}
    for mode in ("enforce", "audit", "warn"):
        level, version = "privileged", LATEST
        if mode in defaults:
            level, why = parse_level(str(defaults[mode]))
            if why is not None:
                raise ConfigError(f'defaults.{mode}: Invalid value: "{defaults[mode]}": {why}')
        if f"{mode}-version" in defaults:
            version, why = parse_version(str(defaults[f"{mode}-version"]))
            if why is not None:
                raise ConfigError(f'defaults.{mode}-version: Invalid value: "{defaults[f"{mode}-version"]}": {why}')
        modes[mode] = LevelVersion(level, version)
    exemptions = raw.get("exemptions") or {}
    if not isinstance(exemptions, dict):
        raise ConfigError("exemptions: must be an object")
    return PodSecurityConfiguration(
        Policy(modes["enforce"], modes["audit"], modes["warn"]),
        _strings(exemptions.get("usernames"), "exemptions.usernames"),
        _strings(exemptions.get("runtimeClasses"), "exemptions.runtimeClasses"),
        _strings(exemptions.get("namespaces"), "exemptions.namespaces"))


def load_admission_config(path: str | Path | None) -> PodSecurityConfiguration:
    """The PodSecurity entry of an AdmissionConfiguration file (the defaults without one)."""
    if not path:
        return PodSecurityConfiguration()
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise ConfigError(f"reading admission configuration {path}: {e}") from None
    if not isinstance(raw, dict) or raw.get("kind") != "AdmissionConfiguration" \
            or raw.get("apiVersion") not in ADMISSION_CONFIG_VERSIONS:
        raise ConfigError(f"{path}: want an AdmissionConfiguration ({ADMISSION_CONFIG_VERSIONS[0]})")
    for plugin in raw.get("plugins") or ():
        if not isinstance(plugin, dict) or plugin.get("name") != "PodSecurity":
            continue
        if plugin.get("configuration") is not None:
            return parse_pod_security_configuration(plugin["configuration"])
        if plugin.get("path"):
            inner = Path(plugin["path"])
            inner = inner if inner.is_absolute() else path.parent / inner
            try:
                return parse_pod_security_configuration(yaml.safe_load(inner.read_text()))
            except (OSError, yaml.YAMLError) as e:
                raise ConfigError(f"reading PodSecurity configuration {inner}: {e}") from None
    return PodSecurityConfiguration()
