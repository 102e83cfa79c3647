"""Pod Security levels, versions and namespace labels (upstream:
staging/src/k8s.io/pod-security-admission/api/{constants,helpers}.go).

A namespace says which level applies in which mode with `pod-security.kubernetes.io/<mode>` and,
optionally, at which policy version with `pod-security.kubernetes.io/<mode>-version`; modes are
enforce, audit and warn. Whatever a namespace does not say comes from the cluster defaults (the
admission configuration's `defaults`, privileged:latest without one).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import NamedTuple

LEVEL_PRIVILEGED, LEVEL_BASELINE, LEVEL_RESTRICTED = "privileged", "baseline", "restricted"
LEVELS = (LEVEL_PRIVILEGED, LEVEL_BASELINE, LEVEL_RESTRICTED)
_RANK = {level: i for i, level in enumerate(LEVELS)}

LABEL_PREFIX = "pod-security.kubernetes.io/"
ENFORCE_LEVEL_LABEL = LABEL_PREFIX + "enforce"
ENFORCE_VERSION_LABEL = LABEL_PREFIX + "enforce-version"
AUDIT_LEVEL_LABEL = LABEL_PREFIX + "audit"
AUDIT_VERSION_LABEL = LABEL_PREFIX + "audit-version"
WARN_LEVEL_LABEL = LABEL_PREFIX + "warn"
WARN_VERSION_LABEL = LABEL_PREFIX + "warn-version"

# "latest" is the newest policy this apiserver knows: the Kubernetes version it serves (/version)
LATEST_MINOR = 30
_VERSION = re.compile(r"^v1\.(0|[1-9][0-9]*)$")


class PolicyError(ValueError):
    """Namespace labels (or configuration defaults) that do not parse; each cause is (field, value, why)."""

    def __init__(self, causes: list[tuple[str, str, str]]):
        self.causes = causes
        super().__init__("; ".join(f"{f}: Invalid value: {v!r}: {why}" for f, v, why in causes))

    def __str__(self) -> str:
        return ", ".join(f'{f}: Invalid value: "{v}": {why}' for f, v, why in self.causes)


class Version(NamedTuple):
    """A policy version: v1.X, or latest (minor None). Tuples: hashed and compared at C speed, as
    every pod write looks its policy up."""

    minor: int | None = None

    @property
    def latest(self) -> bool:
        return self.minor is None

    def effective(self) -> int:
        """The minor whose checks apply: a version newer than this apiserver's evaluates as latest."""
        return LATEST_MINOR if self.minor is None or self.minor > LATEST_MINOR else self.minor

    def __str__(self) -> str:
        return "latest" if self.minor is None else f"v1.{self.minor}"


LATEST = Version()


class LevelVersion(NamedTuple):
    level: str
    version: Version

    def __str__(self) -> str:
        return f"{self.level}:{self.version}"


class Policy(NamedTuple):
    enforce: LevelVersion
    audit: LevelVersion
    warn: LevelVersion


PRIVILEGED_POLICY = Policy(*(LevelVersion(LEVEL_PRIVILEGED, LATEST),) * 3)


def compare_levels(a: str, b: str) -> int:
    return _RANK[a] - _RANK[b]


def parse_level(value: str) -> tuple[str, str | None]:
    """The level, or restricted and why not (upstream evaluates an invalid level as restricted)."""
    if value in _RANK:
        return value, None
    return LEVEL_RESTRICTED, f"must be one of {', '.join(LEVELS)}"


def parse_version(value: str) -> tuple[Version, str | None]:
    if value == "latest":
        return LATEST, None
    match = _VERSION.match(value)
    if match is None:
        return LATEST, 'must be "latest" or "v1.x"'
    return Version(int(match.group(1))), None


LABELS = (ENFORCE_LEVEL_LABEL, ENFORCE_VERSION_LABEL, AUDIT_LEVEL_LABEL, AUDIT_VERSION_LABEL, WARN_LEVEL_LABEL,
          WARN_VERSION_LABEL)


def policy_to_evaluate(labels: Mapping[str, str], defaults: Policy) -> tuple[Policy, PolicyError | None]:
    causes: list[tuple[str, str, str]] = []
    modes = {"enforce": defaults.enforce, "audit": defaults.audit, "warn": defaults.warn}
    has_enforce_level = has_warn_level = has_warn_version = False
    for mode in ("enforce", "audit", "warn"):
        lv = modes[mode]
        level_label, version_label = LABEL_PREFIX + mode, LABEL_PREFIX + mode + "-version"
        if level_label in labels:
            level, why = parse_level(labels[level_label])
            if why is not None:
                causes.append((f"metadata.labels[{level_label}]", labels[level_label], why))
            elif mode == "enforce":
                has_enforce_level = True
            if mode == "warn":
                has_warn_level = True
            lv = lv._replace(level=level)
        if version_label in labels:
            version, why = parse_version(labels[version_label])
            if why is not None:
                causes.append((f"metadata.labels[{version_label}]", labels[version_label], why))
            if mode == "warn":
                has_warn_version = True
            lv = lv._replace(version=version)
        modes[mode] = lv
    enforce, warn = modes["enforce"], modes["warn"]
    if not has_warn_level and has_enforce_level and compare_levels(enforce.level, warn.level) > 0:
        warn = LevelVersion(enforce.level, warn.version if has_warn_version else enforce.version)
    return Policy(enforce, modes["audit"], warn), (PolicyError(causes) if causes else None)
