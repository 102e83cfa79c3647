"""The Pod Security Standards' checks (upstream: staging/src/k8s.io/pod-security-admission/policy,
one check_*.go per check, registry.go, checks.go).

Each check is a small pure function of a pod's metadata and spec (plain dicts, as the API holds
them) that answers None (allowed) or (forbidden reason, forbidden detail) with upstream's words.
A level is the checks of that level and below at a policy version: a check applies from its
minimum version on, and a restricted check that supersedes a baseline one (capabilities,
seccomp, volume types) replaces it at restricted. The order of the checks is upstream's
registration order (its file names), which is the order of the reasons in a refusal.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from apiserver.admission.podsecurity.api import LEVEL_BASELINE, LEVEL_PRIVILEGED, LEVEL_RESTRICTED, LevelVersion
from machinery.types import Obj

Result = tuple[str, str] | None
CheckFn = Callable[[Obj, Obj, int], Result]


# -- helpers (upstream helpers.go, visitor.go) ------------------------------------------------------


def pluralize(singular: str, plural: str, n: int) -> str:
    return singular if n == 1 else plural


def quote(s: str) -> str:
    """Go's %q for the names and values that appear here."""
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def join_quote(items: list[str] | tuple[str, ...]) -> str:
    return ", ".join(quote(i) for i in items)


def _d(v: Any) -> Obj:
    return v if isinstance(v, dict) else {}


def _l(v: Any) -> list[Any]:
    return v if isinstance(v, list) else []


# the containers of the spec evaluate_pod is checking, listed once for all its checks
_listed: list[Any] = [None, None]


def containers(spec: Obj) -> list[Obj]:
    """Every container of the pod: init containers, containers, ephemeral containers (visitor.go)."""
    if _listed[0] is spec:
        return _listed[1]  # type: ignore[no-any-return]
    return [c for key in ("initContainers", "containers", "ephemeralContainers") for c in _l(spec.get(key))
            if isinstance(c, dict)]


def _name(c: Obj) -> str:
    return str(c.get("name") or "")


def _sc(c: Obj) -> Obj:
    return _d(c.get("securityContext"))


def _pod_sc(spec: Obj) -> Obj:
    return _d(spec.get("securityContext"))


def _containers_phrase(names: list[str]) -> str:
    return f"{pluralize('container', 'containers', len(names))} {join_quote(names)}"


# -- baseline ----------------------------------------------------------------------------------------

_APPARMOR_PREFIX = "container.apparmor.security.beta.kubernetes.io/"


def _apparmor_annotation_allowed(profile: str) -> bool:
    return not profile or profile == "runtime/default" or profile.startswith("localhost/")


def check_apparmor_profile(meta: Obj, spec: Obj, minor: int) -> Result:
    """check_appArmorProfile.go: no Unconfined profile, by field or by the beta annotations."""
    setters: list[str] = []
    values: set[str] = set()
    if _d(_pod_sc(spec).get("appArmorProfile")).get("type") == "Unconfined":
        setters.append("pod")
        values.add(quote("Unconfined"))
    bad = [_name(c) for c in containers(spec) if _d(_sc(c).get("appArmorProfile")).get("type") == "Unconfined"]
    if bad:
        setters.append(_containers_phrase(bad))
        values.add(quote("Unconfined"))
    annotations = [quote(f"{k}={quote(str(v))}") for k, v in _d(meta.get("annotations")).items()
                   if k.startswith(_APPARMOR_PREFIX) and not _apparmor_annotation_allowed(str(v))]
    if annotations:
        setters.append(pluralize("annotation", "annotations", len(annotations)))
        values.update(annotations)
    if not setters:
        return None
    return (pluralize("forbidden AppArmor profile", "forbidden AppArmor profiles", len(values)),
            f"{' and '.join(setters)} must not set AppArmor profile type to {', '.join(sorted(values))}")


CAPABILITIES_BASELINE = frozenset({"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                                   "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"})


def check_capabilities_baseline(meta: Obj, spec: Obj, minor: int) -> Result:
    """check_capabilities_baseline.go: add only the container runtime's default capabilities."""
    bad: list[str] = []
    caps: set[str] = set()
    for c in containers(spec):
        added = [str(x) for x in _l(_d(_sc(c).get("capabilities")).get("add")) if str(x) not in CAPABILITIES_BASELINE]
        if added:
            bad.append(_name(c))
            caps.update(added)
    if not bad:
        return None
    return ("non-default capabilities",
            f"{_containers_phrase(bad)} must not include {join_quote(sorted(caps))} "
            f"in securityContext.capabilities.add")


def check_host_namespaces(meta: Obj, spec: Obj, minor: int) -> Result:
    """check_hostNamespaces.go: no host network, PID or IPC namespace."""
    used = [f"{field}=true" for field in ("hostNetwork", "hostPID", "hostIPC") if spec.get(field) is True]
    return ("host namespaces", ", ".join(used)) if used else None


def check_host_path_volumes(meta: Obj, spec: Obj, minor: int) -> Result:
    """check_hostPathVolumes.go: no hostPath volume."""
    names = [str(v.get("name") or "") for v in _l(spec.get("volumes")) if isinstance(v, dict) and "hostPath" in v]
    if not names:
        return None
    return "hostPath volumes", f"{pluralize('volume', 'volumes', len(names))} {join_quote(names)}"


def check_host_ports(meta: Obj, spec: Obj, minor: int) -> Result:
    """check_hostPorts.go: no hostPort."""
    bad: list[str] = []
    ports: set[str] = set()
    for c in containers(spec):
        used = [str(p.get("hostPort")) for p in _l(c.get("ports")) if isinstance(p, dict) and p.get("hostPort")]
        if used:
            bad.append(_name(c))
            ports.update(used)
    if not bad:
        return None
    return ("hostPort", f"{_containers_phrase(bad)} {pluralize('uses', 'use', len(bad))} "
                        f"{pluralize('hostPort', 'hostPorts', len(ports))} {', '.join(sorted(ports))}")


def _forbidden_hosts(handler: Any) -> list[str]:
    handler = _d(handler)
    return [str(_d(handler.get(k)).get("host")) for k in ("httpGet", "tcpSocket") if _d(handler.get(k)).get("host")]


def check_host_probes_and_lifecycle(meta: Obj, spec: Obj, minor: int) -> Result:
    """check_hostProbesAndhostLifecycle.go (v1.34+): probes and lifecycle handlers may not name a host."""
    bad: set[str] = set()
    hosts: set[str] = set()
    for c in containers(spec):
        lifecycle = _d(c.get("lifecycle"))
        found = [h for handler in (c.get("livenessProbe"), c.get("readinessProbe"), c.get("startupProbe"),
                                   lifecycle.get("postStart"), lifecycle.get("preStop"))
                 for h in _forbidden_hosts(handler)]
        if found:
            bad.add(_name(c))
            hosts.update(found)
    if not bad:
        return None
    names = sorted(bad)
    return ("probe or lifecycle host",
            f"{_containers_phrase(names)} {pluralize('uses', 'use', len(names))} "
            f"{pluralize('probe or lifecycle host', 'probe or lifecycle hosts', len(hosts))} "
            f"{join_quote(sorted(hosts))}")


def check_privileged(meta: Obj, spec: Obj, minor: int) -> Result:
    """check_privileged.go: no privileged container."""
    bad = [_name(c) for c in containers(spec) if _sc(c).get("privileged") is True]
    if not bad:
        return None
    return "privileged", f"{_containers_phrase(bad)} must not set securityContext.privileged=true"


def check_proc_mount(meta: Obj, spec: Obj, minor: int) -> Result:
    """check_procMount.go: the default (masked) /proc only."""
    bad: list[str] = []
    kinds: set[str] = set()
    for c in containers(spec):
        mount = _sc(c).get("procMount")
        if mount is not None and mount != "Default":
            bad.append(_name(c))
            kinds.add(str(mount))
    if not bad:
        return None
    return ("procMount",
            f"{_containers_phrase(bad)} must not set securityContext.procMount to {join_quote(sorted(kinds))}")


_SELINUX_TYPES = frozenset({"", "container_t", "container_init_t", "container_kvm_t"})


def check_selinux_options(meta: Obj, spec: Obj, minor: int) -> Result:
    """check_seLinuxOptions.go: only the container SELinux types; no user or role."""
    allowed = _SELINUX_TYPES | {"container_engine_t"} if minor >= 31 else _SELINUX_TYPES
    bad_types: set[str] = set()
    flags = {"user": False, "role": False}

    def valid(opts: Obj) -> bool:
        ok = True
        if str(opts.get("type") or "") not in allowed:
            ok = False
            bad_types.add(str(opts.get("type")))
        for key in ("user", "role"):
            if opts.get(key):
                ok, flags[key] = False, True
        return ok

    setters: list[str] = []
    pod_opts = _pod_sc(spec).get("seLinuxOptions")
    if isinstance(pod_opts, dict) and not valid(pod_opts):
        setters.append("pod")
    bad = [_name(c) for c in containers(spec)
           if isinstance(_sc(c).get("seLinuxOptions"), dict) and not valid(_sc(c)["seLinuxOptions"])]
    if bad:
        setters.append(_containers_phrase(bad))
    if not setters:
        return None
    data: list[str] = []
    if bad_types:
        data.append(f"{pluralize('type', 'types', len(bad_types))} {join_quote(sorted(bad_types))}")
    if flags["user"]:
        data.append("user may not be set")
    if flags["role"]:
        data.append("role may not be set")
    return "seLinuxOptions", f"{' and '.join(setters)} set forbidden securityContext.seLinuxOptions: {'; '.join(data)}"


def check_seccomp_baseline(meta: Obj, spec: Obj, minor: int) -> Result:
    """check_seccompProfile_baseline.go: seccomp may not be switched off."""
    setters: list[str] = []
    if _d(_pod_sc(spec).get("seccompProfile")).get("type") == "Unconfined":
        setters.append("pod")
    bad = [_name(c) for c in containers(spec) if _d(_sc(c).get("seccompProfile")).get("type") == "Unconfined"]
    if bad:
        setters.append(_containers_phrase(bad))
    if not setters:
        return None
    return "seccompProfile", f'{" and ".join(setters)} must not set securityContext.seccompProfile.type to "Unconfined"'


SAFE_SYSCTLS = frozenset({"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.tcp_syncookies",
                          "net.ipv4.ping_group_range", "net.ipv4.ip_unprivileged_port_start"})


def check_sysctls(meta: Obj, spec: Obj, minor: int) -> Result:
    """check_sysctls.go: only the safe, namespaced sysctls."""
    bad = [str(s.get("name")) for s in _l(_pod_sc(spec).get("sysctls"))
           if isinstance(s, dict) and s.get("name") not in SAFE_SYSCTLS]
    return ("forbidden sysctls", ", ".join(bad)) if bad else None


def check_windows_host_process(meta: Obj, spec: Obj, minor: int) -> Result:
    """check_windowsHostProcess.go: no Windows HostProcess containers."""
    setters: list[str] = []
    if _d(_pod_sc(spec).get("windowsOptions")).get("hostProcess") is True:
        setters.append("pod")
    bad = [_name(c) for c in containers(spec) if _d(_sc(c).get("windowsOptions")).get("hostProcess") is True]
    if bad:
        setters.append(_containers_phrase(bad))
    if not setters:
        return None
    return "hostProcess", f"{' and '.join(setters)} must not set securityContext.windowsOptions.hostProcess=true"


# -- restricted --------------------------------------------------------------------------------------


def _windows(spec: Obj) -> bool:
    return _d(spec.get("os")).get("name") == "windows"


def check_allow_privilege_escalation(meta: Obj, spec: Obj, minor: int) -> Result:
    """check_allowPrivilegeEscalation.go: every container sets allowPrivilegeEscalation=false
    (not asked of Windows pods from v1.25)."""
    if minor >= 25 and _windows(spec):
        return None
    bad = [_name(c) for c in containers(spec) if _sc(c).get("allowPrivilegeEscalation") is not False]
    if not bad:
        return None
    return ("allowPrivilegeEscalation != false",
            f"{_containers_phrase(bad)} must set securityContext.allowPrivilegeEscalation=false")


def check_capabilities_restricted(meta: Obj, spec: Obj, minor: int) -> Result:
    """check_capabilities_restricted.go: drop ALL; add nothing but NET_BIND_SERVICE (not asked of
    Windows pods from v1.25)."""
    if minor >= 25 and _windows(spec):
        return None
    missing_drop: list[str] = []
    adding: list[str] = []
    caps: set[str] = set()
    for c in containers(spec):
        capabilities = _sc(c).get("capabilities")
        if not isinstance(capabilities, dict):
            missing_drop.append(_name(c))
            continue
        if "ALL" not in [str(x) for x in _l(capabilities.get("drop"))]:
            missing_drop.append(_name(c))
        added = [str(x) for x in _l(capabilities.get("add")) if str(x) != "NET_BIND_SERVICE"]
        if added:
            adding.append(_name(c))
            caps.update(added)
    details: list[str] = []
    if missing_drop:
        details.append(f'{_containers_phrase(missing_drop)} must set securityContext.capabilities.drop=["ALL"]')
    if adding:
        details.append(f"{_containers_phrase(adding)} must not include {join_quote(sorted(caps))} "
                       f"in securityContext.capabilities.add")
    return ("unrestricted capabilities", "; ".join(details)) if details else None


RESTRICTED_VOLUME_SOURCES = frozenset({"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
                                       "persistentVolumeClaim", "projected", "secret"})


def volume_name_read(volume: Obj) -> bool:
    """Can this volume's name appear in a check's answer? Only a hostPath volume's (hostPathVolumes) or one of a
    type restricted refuses (restrictedVolumes) can: no check reads any other volume's name, nor a container's
    volumeMounts (verdict keys leave them out; the token volume's name is random per pod)."""
    return "hostPath" in volume or any(k != "name" and k not in RESTRICTED_VOLUME_SOURCES for k in volume)


def check_restricted_volumes(meta: Obj, spec: Obj, minor: int) -> Result:
    """check_restrictedVolumes.go: only the volume types that cannot reach the host."""
    bad: list[str] = []
    kinds: set[str] = set()
    for v in _l(spec.get("volumes")):
        if not isinstance(v, dict):
            continue
        sources = [k for k in v if k != "name"]
        if not sources or any(s in RESTRICTED_VOLUME_SOURCES for s in sources):
            continue  # no source is an emptyDir by default
        bad.append(str(v.get("name") or ""))
        kinds.update(sources)
    if not bad:
        return None
    return ("restricted volume types",
            f"{pluralize('volume', 'volumes', len(bad))} {join_quote(bad)} {pluralize('uses', 'use', len(bad))} "
            f"{pluralize('restricted volume type', 'restricted volume types', len(kinds))} {join_quote(sorted(kinds))}")


def check_run_as_non_root(meta: Obj, spec: Obj, minor: int) -> Result:
    """check_runAsNonRoot.go: runAsNonRoot=true on the pod or on every container."""
    setters: list[str] = []
    pod_value = _pod_sc(spec).get("runAsNonRoot")
    if pod_value is False:
        setters.append("pod")
    explicit: list[str] = []
    implicit: list[str] = []
    for c in containers(spec):
        value = _sc(c).get("runAsNonRoot")
        if value is False:
            explicit.append(_name(c))
        elif value is None and pod_value is not True:
            implicit.append(_name(c))
    if explicit:
        setters.append(_containers_phrase(explicit))
    if setters:
        return "runAsNonRoot != true", f"{' and '.join(setters)} must not set securityContext.runAsNonRoot=false"
    if implicit:
        return ("runAsNonRoot != true",
                f"pod or {_containers_phrase(implicit)} must set securityContext.runAsNonRoot=true")
    return None


def check_run_as_user(meta: Obj, spec: Obj, minor: int) -> Result:
    """check_runAsUser.go (v1.23+): nothing runs as uid 0 by explicit choice."""
    setters: list[str] = []
    if _pod_sc(spec).get("runAsUser") == 0:
        setters.append("pod")
    bad = [_name(c) for c in containers(spec) if _sc(c).get("runAsUser") == 0]
    if bad:
        setters.append(_containers_phrase(bad))
    return ("runAsUser=0", f"{' and '.join(setters)} must not set runAsUser=0") if setters else None


def _valid_seccomp(kind: Any) -> bool:
    return kind in ("RuntimeDefault", "Localhost")


def check_seccomp_restricted(meta: Obj, spec: Obj, minor: int) -> Result:
    """check_seccompProfile_restricted.go (v1.19+): RuntimeDefault or Localhost on the pod or on
    every container (not asked of Windows pods from v1.25)."""
    if minor >= 25 and _windows(spec):
        return None
    setters: list[str] = []
    values: set[str] = set()
    pod_set = False
    pod_profile = _pod_sc(spec).get("seccompProfile")
    if isinstance(pod_profile, dict):
        if _valid_seccomp(pod_profile.get("type")):
            pod_set = True
        else:
            setters.append("pod")
            values.add(str(pod_profile.get("type")))
    explicit: list[str] = []
    implicit: list[str] = []
    for c in containers(spec):
        profile = _sc(c).get("seccompProfile")
        if isinstance(profile, dict):
            if not _valid_seccomp(profile.get("type")):
                explicit.append(_name(c))
                values.add(str(profile.get("type")))
        elif not pod_set:
            implicit.append(_name(c))
    if explicit:
        setters.append(_containers_phrase(explicit))
    if setters:
        return ("seccompProfile", f"{' and '.join(setters)} must not set securityContext.seccompProfile.type to "
                                  f"{join_quote(sorted(values))}")
    if implicit:
        return ("seccompProfile", f"pod or {_containers_phrase(implicit)} must set securityContext.seccompProfile.type "
                                  f'to "RuntimeDefault" or "Localhost"')
    return None


# -- the registry (registry.go) ----------------------------------------------------------------------


@dataclass(frozen=True)
class Check:
    id: str
    level: str
    minimum_minor: int
    fn: CheckFn
    overrides: tuple[str, ...] = ()


# upstream's registration order (its check_*.go file names, sorted)
CHECKS: tuple[Check, ...] = (
    Check("allowPrivilegeEscalation", LEVEL_RESTRICTED, 8, check_allow_privilege_escalation),
    Check("appArmorProfile", LEVEL_BASELINE, 0, check_apparmor_profile),
    Check("capabilities_baseline", LEVEL_BASELINE, 0, check_capabilities_baseline),
    Check("capabilities_restricted", LEVEL_RESTRICTED, 22, check_capabilities_restricted,
          ("capabilities_baseline",)),
    Check("hostNamespaces", LEVEL_BASELINE, 0, check_host_namespaces),
    Check("hostPathVolumes", LEVEL_BASELINE, 0, check_host_path_volumes),
    Check("hostPorts", LEVEL_BASELINE, 0, check_host_ports),
    Check("hostProbesAndHostLifecycle", LEVEL_BASELINE, 34, check_host_probes_and_lifecycle),
    Check("privileged", LEVEL_BASELINE, 0, check_privileged),
    Check("procMount", LEVEL_BASELINE, 0, check_proc_mount),
    Check("restrictedVolumes", LEVEL_RESTRICTED, 0, check_restricted_volumes, ("hostPathVolumes",)),
    Check("runAsNonRoot", LEVEL_RESTRICTED, 0, check_run_as_non_root),
    Check("runAsUser", LEVEL_RESTRICTED, 23, check_run_as_user),
    Check("seLinuxOptions", LEVEL_BASELINE, 0, check_selinux_options),
    Check("seccompProfile_baseline", LEVEL_BASELINE, 19, check_seccomp_baseline),
    Check("seccompProfile_restricted", LEVEL_RESTRICTED, 19, check_seccomp_restricted,
          ("seccompProfile_baseline",)),
    Check("sysctls", LEVEL_BASELINE, 0, check_sysctls),
    Check("windowsHostProcess", LEVEL_BASELINE, 0, check_windows_host_process),
)

_LEVEL_CHECKS: dict[tuple[str, int], tuple[Check, ...]] = {}


def checks_for(level: str, minor: int) -> tuple[Check, ...]:
    """The checks of a level at a version: baseline's first, then restricted's, each in registration order."""
    key = (level, minor)
    found = _LEVEL_CHECKS.get(key)
    if found is None:
        if level == LEVEL_PRIVILEGED:
            found = ()
        else:
            applicable = [c for c in CHECKS if c.minimum_minor <= minor]
            baseline = [c for c in applicable if c.level == LEVEL_BASELINE]
            if level == LEVEL_BASELINE:
                found = tuple(baseline)
            else:
                restricted = [c for c in applicable if c.level == LEVEL_RESTRICTED]
                overridden = {o for c in restricted for o in c.overrides}
                found = tuple([c for c in baseline if c.id not in overridden] + restricted)
        _LEVEL_CHECKS[key] = found
    return found


@dataclass(frozen=True, slots=True)
class Aggregate:
    """AggregateCheckResults: the reasons and details of every check that failed."""

    failures: tuple[tuple[str, str], ...]

    @property
    def allowed(self) -> bool:
        return not self.failures

    def forbidden_reason(self) -> str:
        return ", ".join(reason for reason, _ in self.failures)

    def forbidden_detail(self) -> str:
        return ", ".join(f"{reason} ({detail})" if detail else reason for reason, detail in self.failures)


def evaluate_pod(lv: LevelVersion, meta: Obj, spec: Obj) -> Aggregate:
    minor = lv.version.effective()
    failures = []
    _listed[0], _listed[1] = spec, containers(spec)
    try:
        for check in checks_for(lv.level, minor):
            result = check.fn(meta, spec, minor)
            if result is not None:
                failures.append(result)
    finally:
        _listed[0] = _listed[1] = None
    return Aggregate(tuple(failures))
