"""Pod Security admission's pure parts (apiserver/admission/podsecurity): each check with upstream's reason and
detail, the order of a level's checks, namespace labels to a policy, the admission configuration,
which pod updates are evaluated, and the warning recorder's header form."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from apiserver.admission.podsecurity import policy as p
from apiserver.admission.podsecurity.admission import is_significant_pod_update
from apiserver.admission.podsecurity.api import (
    LATEST,
    PRIVILEGED_POLICY,
    LevelVersion,
    Policy,
    Version,
    policy_to_evaluate,
)
from apiserver.admission.podsecurity.config import ConfigError, load_admission_config, parse_pod_security_configuration
from apiserver.warning import Recorder, header_value
from tests.cluster import REPO

RESTRICTED = LevelVersion("restricted", LATEST)
BASELINE = LevelVersion("baseline", LATEST)


def spec(*containers: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"containers": list(containers) or [{"name": "c", "image": "x"}], **extra}


def c(name: str = "c", **sc: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "image": "x"}
    if sc:
        out["securityContext"] = sc
    return out


GOOD_SC = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, "runAsNonRoot": True,
           "seccompProfile": {"type": "RuntimeDefault"}}


# -- one check at a time ---------------------------------------------------------------------------------

CASES: list[tuple[Any, dict[str, Any], dict[str, Any], tuple[str, str] | None]] = [
    (p.check_host_namespaces, {}, spec(hostNetwork=True, hostPID=True, hostIPC=True),
     ("host namespaces", "hostNetwork=true, hostPID=true, hostIPC=true")),
    (p.check_host_namespaces, {}, spec(hostNetwork=False), None),
    (p.check_privileged, {}, spec(c("a", privileged=True), c("b", privileged=True)),
     ("privileged", 'containers "a", "b" must not set securityContext.privileged=true')),
    (p.check_privileged, {}, spec(c("a", privileged=False)), None),
    (p.check_host_path_volumes, {},
     spec(volumes=[{"name": "root", "hostPath": {"path": "/"}}, {"name": "e", "emptyDir": {}}]),
     ("hostPath volumes", 'volume "root"')),
    (p.check_host_ports, {}, spec({"name": "web", "image": "x", "ports": [{"containerPort": 80, "hostPort": 8080}]}),
     ("hostPort", 'container "web" uses hostPort 8080')),
    (p.check_host_ports, {}, spec({"name": "web", "image": "x", "ports": [{"containerPort": 80}]}), None),
    (p.check_capabilities_baseline, {}, spec(c(capabilities={"add": ["NET_ADMIN", "CHOWN", "SYS_ADMIN"]})),
     ("non-default capabilities",
      'container "c" must not include "NET_ADMIN", "SYS_ADMIN" in securityContext.capabilities.add')),
    (p.check_capabilities_baseline, {}, spec(c(capabilities={"add": ["CHOWN", "KILL"]})), None),
    (p.check_proc_mount, {}, spec(c(procMount="Unmasked")),
     ("procMount", 'container "c" must not set securityContext.procMount to "Unmasked"')),
    (p.check_proc_mount, {}, spec(c(procMount="Default")), None),
    (p.check_selinux_options, {}, spec(c(seLinuxOptions={"type": "spc_t", "user": "root"})),
     ("seLinuxOptions",
      'container "c" set forbidden securityContext.seLinuxOptions: type "spc_t"; user may not be set')),
    (p.check_selinux_options, {}, spec(c(seLinuxOptions={"type": "container_t", "level": "s0"})), None),
    (p.check_seccomp_baseline, {}, spec(c(seccompProfile={"type": "Unconfined"}),
                                        securityContext={"seccompProfile": {"type": "Unconfined"}}),
     ("seccompProfile", 'pod and container "c" must not set securityContext.seccompProfile.type to "Unconfined"')),
    (p.check_sysctls, {}, spec(securityContext={"sysctls": [{"name": "kernel.msgmax", "value": "1"},
                                                            {"name": "net.ipv4.tcp_syncookies", "value": "1"}]}),
     ("forbidden sysctls", "kernel.msgmax")),
    (p.check_apparmor_profile, {"annotations": {"container.apparmor.security.beta.kubernetes.io/c": "unconfined"}},
     spec(), ("forbidden AppArmor profile", 'annotation must not set AppArmor profile type to '
                                            '"container.apparmor.security.beta.kubernetes.io/c=\\"unconfined\\""')),
    (p.check_apparmor_profile, {}, spec(c("bar", appArmorProfile={"type": "Unconfined"})),
     ("forbidden AppArmor profile", 'container "bar" must not set AppArmor profile type to "Unconfined"')),
    (p.check_apparmor_profile, {"annotations": {"container.apparmor.security.beta.kubernetes.io/c": "localhost/x"}},
     spec(c(appArmorProfile={"type": "RuntimeDefault"})), None),
    (p.check_windows_host_process, {}, spec(c(windowsOptions={"hostProcess": True})),
     ("hostProcess", 'container "c" must not set securityContext.windowsOptions.hostProcess=true')),
    (p.check_allow_privilege_escalation, {}, spec(c("a"), c("b", allowPrivilegeEscalation=False)),
     ("allowPrivilegeEscalation != false", 'container "a" must set securityContext.allowPrivilegeEscalation=false')),
    (p.check_capabilities_restricted, {}, spec(c("a"), c("b", capabilities={"drop": ["ALL"], "add": ["NET_RAW"]})),
     ("unrestricted capabilities", 'container "a" must set securityContext.capabilities.drop=["ALL"]; '
                                   'container "b" must not include "NET_RAW" in securityContext.capabilities.add')),
    (p.check_capabilities_restricted, {}, spec(c(capabilities={"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]})), None),
    (p.check_restricted_volumes, {}, spec(volumes=[{"name": "h", "hostPath": {"path": "/"}}, {"name": "n", "nfs": {}},
                                                   {"name": "ok", "configMap": {"name": "x"}}]),
     ("restricted volume types", 'volumes "h", "n" use restricted volume types "hostPath", "nfs"')),
    (p.check_run_as_non_root, {}, spec(c("a")),
     ("runAsNonRoot != true", 'pod or container "a" must set securityContext.runAsNonRoot=true')),
    (p.check_run_as_non_root, {}, spec(c("a", runAsNonRoot=False), securityContext={"runAsNonRoot": False}),
     ("runAsNonRoot != true", 'pod and container "a" must not set securityContext.runAsNonRoot=false')),
    (p.check_run_as_non_root, {}, spec(c("a"), securityContext={"runAsNonRoot": True}), None),
    (p.check_run_as_user, {}, spec(c("a", runAsUser=0), securityContext={"runAsUser": 0}),
     ("runAsUser=0", 'pod and container "a" must not set runAsUser=0')),
    (p.check_run_as_user, {}, spec(c("a", runAsUser=1000)), None),
    (p.check_seccomp_restricted, {}, spec(c("a")),
     ("seccompProfile", 'pod or container "a" must set securityContext.seccompProfile.type to "RuntimeDefault" '
                        'or "Localhost"')),
    (p.check_seccomp_restricted, {}, spec(c("a", seccompProfile={"type": "Unconfined"})),
     ("seccompProfile", 'container "a" must not set securityContext.seccompProfile.type to "Unconfined"')),
    (p.check_seccomp_restricted, {}, spec(c("a"), securityContext={"seccompProfile": {"type": "Localhost"}}), None),
    (p.check_host_probes_and_lifecycle, {},
     spec({"name": "c", "image": "x", "livenessProbe": {"httpGet": {"host": "10.0.0.1", "port": 80}}}),
     ("probe or lifecycle host", 'container "c" uses probe or lifecycle host "10.0.0.1"')),
]


@pytest.mark.parametrize(("check", "meta", "pod_spec", "want"), CASES,
                         ids=[f"{fn.__name__}-{i}" for i, (fn, *_rest) in enumerate(CASES)])
def test_check(check: Any, meta: dict[str, Any], pod_spec: dict[str, Any], want: tuple[str, str] | None) -> None:
    assert check(meta, pod_spec, 99) == want


def test_init_and_ephemeral_containers_are_checked_too() -> None:
    pod_spec = spec(c("main", **GOOD_SC), initContainers=[c("init", privileged=True)],
                    ephemeralContainers=[c("debug", privileged=True)])
    assert p.check_privileged({}, pod_spec, 30) == (
        "privileged", 'containers "init", "debug" must not set securityContext.privileged=true')


# -- levels ------------------------------------------------------------------------------------------------


def test_a_bare_pod_violates_restricted_in_upstreams_order() -> None:
    result = p.evaluate_pod(RESTRICTED, {}, spec(c("x")))
    assert result.forbidden_detail() == (
        'allowPrivilegeEscalation != false (container "x" must set securityContext.allowPrivilegeEscalation=false), '
        'unrestricted capabilities (container "x" must set securityContext.capabilities.drop=["ALL"]), '
        'runAsNonRoot != true (pod or container "x" must set securityContext.runAsNonRoot=true), '
        'seccompProfile (pod or container "x" must set securityContext.seccompProfile.type to "RuntimeDefault" or '
        '"Localhost")')
    assert result.forbidden_reason() == \
        "allowPrivilegeEscalation != false, unrestricted capabilities, runAsNonRoot != true, seccompProfile"


def test_restricted_checks_replace_the_baseline_ones_they_supersede() -> None:
    host = spec(c("x", **GOOD_SC), volumes=[{"name": "root", "hostPath": {"path": "/"}}], hostNetwork=True)
    assert p.evaluate_pod(BASELINE, {}, host).forbidden_detail() == \
        'host namespaces (hostNetwork=true), hostPath volumes (volume "root")'
    assert p.evaluate_pod(RESTRICTED, {}, host).forbidden_detail() == \
        ('host namespaces (hostNetwork=true), '
         'restricted volume types (volume "root" uses restricted volume type "hostPath")')


def test_a_compliant_pod_passes_every_level_and_privileged_allows_anything() -> None:
    assert p.evaluate_pod(RESTRICTED, {}, spec(c("x", **GOOD_SC))).allowed
    assert p.evaluate_pod(LevelVersion("privileged", LATEST), {}, spec(c("x", privileged=True), hostPID=True)).allowed


def test_checks_apply_from_their_minimum_version() -> None:
    root = spec(c("x", **GOOD_SC, runAsUser=0))
    assert not p.evaluate_pod(RESTRICTED, {}, root).allowed
    assert p.evaluate_pod(LevelVersion("restricted", Version(22)), {}, root).allowed  # runAsUser came in v1.23
    # a version newer than this apiserver knows is evaluated as latest
    assert not p.evaluate_pod(LevelVersion("restricted", Version(99)), {}, root).allowed


# -- namespace labels ------------------------------------------------------------------------------------


def test_labels_make_the_policy_and_warn_follows_a_stricter_enforce() -> None:
    policy, error = policy_to_evaluate({"pod-security.kubernetes.io/enforce": "baseline",
                                        "pod-security.kubernetes.io/enforce-version": "v1.25",
                                        "pod-security.kubernetes.io/audit": "restricted"}, PRIVILEGED_POLICY)
    assert error is None
    assert str(policy.enforce) == "baseline:v1.25"
    assert str(policy.audit) == "restricted:latest"
    assert str(policy.warn) == "baseline:v1.25"
    policy, _ = policy_to_evaluate({"pod-security.kubernetes.io/enforce": "baseline",
                                    "pod-security.kubernetes.io/warn": "privileged"}, PRIVILEGED_POLICY)
    assert str(policy.warn) == "privileged:latest"
    assert policy_to_evaluate({}, PRIVILEGED_POLICY) == (PRIVILEGED_POLICY, None)


def test_invalid_labels_evaluate_as_restricted_and_say_why() -> None:
    policy, error = policy_to_evaluate({"pod-security.kubernetes.io/enforce": "strict",
                                        "pod-security.kubernetes.io/warn-version": "1.25"}, PRIVILEGED_POLICY)
    assert policy.enforce.level == "restricted"
    assert error is not None
    assert str(error) == (
        'metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "strict": must be one of privileged, '
        'baseline, restricted, metadata.labels[pod-security.kubernetes.io/warn-version]: Invalid value: "1.25": '
        'must be "latest" or "v1.x"')


# -- the admission configuration --------------------------------------------------------------------------


def test_admission_configuration_file(tmp_path: Path) -> None:
    path = tmp_path / "admission.yaml"
    path.write_text("""
apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: PodSecurity
  configuration:
    apiVersion: pod-security.admission.config.k8s.io/v1
    kind: PodSecurityConfiguration
    defaults: {enforce: baseline, enforce-version: v1.29, warn: restricted}
    exemptions: {usernames: [ci], runtimeClasses: [kata], namespaces: [kube-system]}
""")
    config = load_admission_config(path)
    assert config.defaults == Policy(LevelVersion("baseline", Version(29)), LevelVersion("privileged", LATEST),
                                     LevelVersion("restricted", LATEST))
    assert config.exempt_usernames == {"ci"} and config.exempt_runtime_classes == {"kata"}
    assert config.exempt_namespaces == {"kube-system"}
    assert load_admission_config(None).defaults == PRIVILEGED_POLICY


def test_admission_configuration_by_path(tmp_path: Path) -> None:
    (tmp_path / "podsecurity.yaml").write_text(
        "apiVersion: pod-security.admission.config.k8s.io/v1\nkind: PodSecurityConfiguration\n"
        "defaults: {audit: restricted}\n")
    (tmp_path / "admission.yaml").write_text(
        "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\n"
        "plugins: [{name: PodSecurity, path: podsecurity.yaml}]\n")
    assert str(load_admission_config(tmp_path / "admission.yaml").defaults.audit) == "restricted:latest"


@pytest.mark.parametrize(("raw", "why"), [
    ({"kind": "PodSecurityConfiguration", "apiVersion": "v1"}, "want kind PodSecurityConfiguration"),
    ({"kind": "PodSecurityConfiguration", "apiVersion": "pod-security.admission.config.k8s.io/v1",
      "defaults": {"enforce": "strict"}}, 'defaults.enforce: Invalid value: "strict"'),
    ({"kind": "PodSecurityConfiguration", "apiVersion": "pod-security.admission.config.k8s.io/v1",
      "defaults": {"audit-version": "1.2"}}, 'must be "latest" or "v1.x"'),
    ({"kind": "PodSecurityConfiguration", "apiVersion": "pod-security.admission.config.k8s.io/v1",
      "exemptions": {"usernames": ["a", "a"]}}, "exemptions.usernames: must not contain duplicates"),
    ({"kind": "PodSecurityConfiguration", "apiVersion": "pod-security.admission.config.k8s.io/v1",
      "exemptions": {"namespaces": "kube-system"}}, "exemptions.namespaces: must be a list of strings"),
])
def test_bad_configuration_is_refused(raw: dict[str, Any], why: str) -> None:
    with pytest.raises(ConfigError, match=None) as e:
        parse_pod_security_configuration(raw)
    assert why in str(e.value)


def test_an_unreadable_admission_configuration_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="reading admission configuration"):
        load_admission_config(tmp_path / "missing.yaml")
    (tmp_path / "wrong.yaml").write_text("kind: Policy\n")
    with pytest.raises(ConfigError, match="want an AdmissionConfiguration"):
        load_admission_config(tmp_path / "wrong.yaml")


# -- which updates are evaluated -------------------------------------------------------------------------


def test_only_updates_that_change_what_runs_are_significant() -> None:
    old = {"metadata": {"labels": {"a": "1"}}, "spec": spec(c("x"))}
    relabelled = {"metadata": {"labels": {"a": "2"}}, "spec": spec(c("x"))}
    new_image = {"metadata": {}, "spec": spec({"name": "x", "image": "y"})}
    debug = {"metadata": {}, "spec": spec(c("x"), ephemeralContainers=[c("debug")])}
    assert not is_significant_pod_update(relabelled, old)
    assert is_significant_pod_update(new_image, old)
    assert is_significant_pod_update(debug, old)


# -- the warning recorder --------------------------------------------------------------------------------


def test_warnings_are_deduplicated_one_line_each_and_quoted() -> None:
    recorder = Recorder(None)
    recorder.add_warning('would violate "x"')
    recorder.add_warning('would violate "x"')
    recorder.add_warning("two\nlines")
    assert recorder.warnings == ['would violate "x"', "two lines"]
    assert header_value('would violate "x"') == b'299 - "would violate \\"x\\""'


def test_warnings_are_bounded() -> None:
    recorder = Recorder(None)
    for i in range(100):
        recorder.add_warning(f"{i} " + "w" * 10_000)
    assert all(len(w) <= 4096 for w in recorder.warnings)
    assert sum(len(w) for w in recorder.warnings) <= 64 * 1024


def test_the_local_up_and_compose_configuration_keeps_privileged_and_exempts_kube_system() -> None:
    config = load_admission_config(REPO / "hack" / "admission-config.yaml")
    assert config.defaults == PRIVILEGED_POLICY
    assert config.exempt_namespaces == {"kube-system"}


# -- the plugin on its own (no server): truncation, and namespaces whose labels no longer parse ----------------

class _Store:
    def __init__(self, plural: str) -> None:
        from machinery.api.resources import RESOURCES

        self.info = next(i for i in RESOURCES if i.group == "" and i.plural == plural)


class _Audit:
    def __init__(self) -> None:
        self.event: dict[str, Any] = {}


def _run_plugin(plugin: Any, attrs: Any) -> tuple[Recorder, BaseException | None]:
    import asyncio

    from apiserver.warning import _current

    recorder = Recorder(_Audit())
    token = _current.set(recorder)
    try:
        asyncio.run(plugin.validate(attrs))
        error = None
    except Exception as e:
        error = e
    finally:
        _current.reset(token)
    return recorder, error


def _plugin(labels: dict[str, str], pods: list[dict[str, Any]]) -> Any:
    import orjson

    from apiserver.admission.podsecurity.admission import PodSecurity
    from apiserver.admission.podsecurity.config import PodSecurityConfiguration

    async def namespace_labels(_: str) -> dict[str, str]:
        return labels

    return PodSecurity(PodSecurityConfiguration(), namespace_labels=namespace_labels,
                       pods_in_namespace=lambda _: [orjson.dumps(p) for p in pods])


def test_a_namespace_whose_labels_no_longer_parse_is_evaluated_as_restricted() -> None:
    from apiserver.admission.interfaces import AdmissionAttributes

    plugin = _plugin({"pod-security.kubernetes.io/enforce": "strict"}, [])
    obj = {"metadata": {"name": "p"}, "spec": spec(c("main"))}
    recorder, error = _run_plugin(plugin, AdmissionAttributes("CREATE", _Store("pods"), "ns", "p", None, obj, None,
                                                              "jane", False))
    assert error is not None and getattr(error, "code", None) == 403
    assert 'violates PodSecurity "restricted:latest"' in str(error)
    assert recorder.audit.event["annotations"]["pod-security.kubernetes.io/error"].startswith(
        'Failed to parse policy: metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "strict"')


def test_tightening_checks_at_most_the_first_pods(monkeypatch: pytest.MonkeyPatch) -> None:
    from apiserver.admission.interfaces import AdmissionAttributes
    from apiserver.admission.podsecurity import admission

    monkeypatch.setattr(admission, "NAMESPACE_MAX_PODS_TO_CHECK", 2)
    pods = [{"metadata": {"name": f"p{i}"}, "spec": spec(c("main"), hostPID=True)} for i in range(3)]
    plugin = _plugin({}, pods)
    old = {"metadata": {"name": "ns", "labels": {}}}
    new = {"metadata": {"name": "ns", "labels": {"pod-security.kubernetes.io/enforce": "baseline"}}}
    recorder, error = _run_plugin(plugin, AdmissionAttributes("UPDATE", _Store("namespaces"), None, "ns", None, new,
                                                              old, "jane", False))
    assert error is None
    assert recorder.warnings == [
        "new PodSecurity enforce level only checked against the first 2 of 3 existing pods",
        'existing pods in namespace "ns" violate the new PodSecurity enforce level "baseline:latest"',
        "p0 (and 1 other pod): host namespaces"]


def _count_evaluations(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The levels PodSecurity evaluates a pod at, in order, from now on (its verdict cache's misses)."""
    from apiserver.admission.podsecurity import admission

    evaluated: list[Any] = []
    real = admission.evaluate_pod

    def counting(lv: Any, meta: Any, pod_spec: Any) -> Any:
        evaluated.append(lv)
        return real(lv, meta, pod_spec)

    monkeypatch.setattr(admission, "evaluate_pod", counting)
    return evaluated


def test_the_replicas_of_one_template_share_a_verdict_and_what_differs_is_evaluated(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from apiserver.admission.interfaces import AdmissionAttributes
    from apiserver.admission.podsecurity import admission

    evaluated = _count_evaluations(monkeypatch)
    plugin = _plugin({"pod-security.kubernetes.io/enforce": "baseline",
                      "pod-security.kubernetes.io/warn": "restricted"}, [])

    def create(name: str, pod_spec: dict[str, Any], annotations: dict[str, str] | None = None) -> Any:
        meta: dict[str, Any] = {"name": name, **({"annotations": annotations} if annotations else {})}
        obj = {"metadata": meta, "spec": pod_spec}
        return _run_plugin(plugin, AdmissionAttributes("CREATE", _Store("pods"), "ns", name, None, obj, None, "jane",
                                                       False))

    for i in range(3):  # three replicas: baseline and restricted evaluated once each
        recorder, error = create(f"web-{i}", spec(c("main")))
        assert error is None
        assert recorder.warnings and recorder.warnings[0].startswith('would violate PodSecurity "restricted:latest"')
    assert evaluated == [BASELINE, RESTRICTED]
    # another spec is evaluated, and refused on its own merits
    recorder, error = create("host", spec(c("main"), hostPID=True))
    assert error is not None and "host namespaces" in str(error)
    # the same spec with an AppArmor annotation that baseline forbids is not the cached verdict
    recorder, error = create("aa", spec(c("main")),
                             {"container.apparmor.security.beta.kubernetes.io/main": "unconfined"})
    assert error is not None and "AppArmor" in str(error)
    # a spec larger than a key may be is evaluated each time (nothing of it is kept)
    big = spec({"name": "main", "image": "x", "env": [{"name": "BLOB", "value": "x" * (16 << 10)}]})
    evaluated.clear()
    create("big-0", big)
    create("big-1", big)
    assert evaluated == [BASELINE, RESTRICTED] * 2
    # a full cache starts again: the first spec is evaluated anew
    monkeypatch.setattr(admission, "VERDICT_CACHE_SIZE", 1)
    create("other", spec(c("main", privileged=False)))
    evaluated.clear()
    create("web-3", spec(c("main")))
    assert BASELINE in evaluated


def test_replicas_with_their_own_token_volume_share_a_verdict_and_named_volumes_keep_their_names(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The ServiceAccount plugin gives every new pod a token volume of a random name, mounted in each container:
    the replicas of one template still share a verdict (no check reads that name or a mount); a volume an answer
    names (hostPath, a type restricted refuses) keeps its name in the key, so each refusal names its own."""
    from apiserver.admission.interfaces import AdmissionAttributes
    from apiserver.admission.serviceaccount import mount_service_account_token

    evaluated = _count_evaluations(monkeypatch)
    plugin = _plugin({"pod-security.kubernetes.io/enforce": "baseline",
                      "pod-security.kubernetes.io/warn": "restricted"}, [])

    def create(name: str, pod_spec: dict[str, Any]) -> Any:
        obj = {"metadata": {"name": name}, "spec": pod_spec}
        mount_service_account_token(obj)
        return _run_plugin(plugin, AdmissionAttributes("CREATE", _Store("pods"), "ns", name, None, obj, None, "jane",
                                                       False))

    names = set()
    for i in range(3):
        pod_spec = spec(c("main"), c("side"))
        recorder, error = create(f"web-{i}", pod_spec)
        names.add(pod_spec["volumes"][0]["name"])
        assert error is None and recorder.warnings[0].startswith('would violate PodSecurity "restricted:latest"')
    assert len(names) == 3 and all(n.startswith("kube-api-access-") for n in names)
    assert evaluated == [BASELINE, RESTRICTED]
    # hostPath volumes of two names, beside the token volume: each refusal names its own volume
    for volume in ("root", "etc"):
        recorder, error = create(volume, spec(c("main"), volumes=[{"name": volume, "hostPath": {"path": "/"}}]))
        assert error is not None and f'hostPath volumes (volume "{volume}")' in str(error)
    # a type restricted refuses: its name is in the warning, each time
    for volume in ("nfs-a", "nfs-b"):
        nfs = {"name": volume, "nfs": {"server": "s", "path": "/"}}
        recorder, error = create(volume, spec(c("main"), volumes=[nfs]))
        assert error is None and f'volume "{volume}" uses restricted volume type "nfs"' in recorder.warnings[0]


def test_which_volume_names_a_verdict_reads() -> None:
    assert p.volume_name_read({"name": "h", "hostPath": {"path": "/"}})
    assert p.volume_name_read({"name": "n", "nfs": {"server": "s", "path": "/"}})
    assert not p.volume_name_read({"name": "t", "projected": {"sources": []}})
    assert not p.volume_name_read({"name": "e", "emptyDir": {}})
    assert not p.volume_name_read({"name": "bare"})
