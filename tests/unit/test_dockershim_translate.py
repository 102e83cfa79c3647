"""dockershim's pure CRI ↔ Docker translation (dockershim/translate.py): names, labels, the create bodies of
sandboxes and containers, and Docker's state read back as CRI's."""

from __future__ import annotations

import pytest

from dockershim import translate as tr
from dockershim.network import port_mappings
from machinery.cri import api_pb2 as cri

NODE = "node-1"
SANDBOX_ID = "f" * 64


def sandbox_config(**kwargs: object) -> cri.PodSandboxConfig:
    return cri.PodSandboxConfig(metadata=cri.PodSandboxMetadata(name="web", namespace="default", uid="u1", attempt=2),
                                hostname="web", **kwargs)


def test_names_are_dockershims_and_read_back() -> None:
    config = sandbox_config()
    assert tr.sandbox_name(config.metadata) == "k8s_POD_web_default_u1_2"
    name = tr.container_name(cri.ContainerMetadata(name="app", attempt=3), config.metadata)
    assert name == "k8s_app_web_default_u1_3"
    assert tr.container_metadata("/" + name) == cri.ContainerMetadata(name="app", attempt=3)
    assert tr.sandbox_metadata("/k8s_POD_web_default_u1_2") == config.metadata
    assert tr.parse_name("/someone-elses") is None and tr.parse_name("k8s_a_b_c_d_notanumber") is None


@pytest.mark.parametrize("meta", [None, cri.PodSandboxMetadata(name="web", namespace="default"),
                                  cri.PodSandboxMetadata(name="we_b", namespace="default", uid="u")])
def test_sandbox_metadata_must_be_complete_and_name_safe(meta: cri.PodSandboxMetadata | None) -> None:
    config = cri.PodSandboxConfig(metadata=meta) if meta is not None else cri.PodSandboxConfig()
    with pytest.raises(tr.InvalidArgument):
        tr.sandbox_create_body(config, node=NODE, image="pause")


def test_labels_carry_annotations_and_the_nodes_own_and_split_back() -> None:
    labels = tr.make_labels({"app": "web"}, {"note": "x"}, NODE, tr.TYPE_CONTAINER)
    assert labels == {"app": "web", "annotation.note": "x", "io.minik8s.managed": "true", "io.minik8s.node": NODE,
                      "io.kubernetes.docker.type": "container"}
    assert tr.split_labels({**labels, tr.LABEL_SANDBOX_ID: "s"}) == ({"app": "web"}, {"note": "x"})


def test_sandbox_body_pod_network_none_and_dns_and_host_namespaces() -> None:
    config = sandbox_config(dns_config=cri.DNSConfig(servers=["10.0.0.10"], searches=["svc"], options=["ndots:5"]),
                            labels={"app": "web"})
    body = tr.sandbox_create_body(config, node=NODE, image="minik8s/pause:3.9")
    assert body["Image"] == "minik8s/pause:3.9" and body["Hostname"] == "web"
    hc = body["HostConfig"]
    assert (hc["NetworkMode"], hc["IpcMode"]) == ("none", "shareable")
    # DNS goes into the resolv.conf the shim rewrites after start, not to Docker (refused with the host network)
    assert not {"Dns", "DnsSearch", "DnsOptions"} & set(hc)
    assert tr.resolv_conf_content(config.dns_config) == "nameserver 10.0.0.10\nsearch svc\noptions ndots:5\n"
    assert tr.resolv_conf_content(cri.DNSConfig()) is None  # nothing asked: Docker's file stays
    assert "PidMode" not in hc and body["Labels"][tr.LABEL_TYPE] == tr.TYPE_SANDBOX

    host = sandbox_config()
    host.linux.security_context.namespace_options.CopyFrom(cri.NamespaceOption(network=cri.NODE, pid=cri.NODE,
                                                                               ipc=cri.NODE))
    body = tr.sandbox_create_body(host, node=NODE, image="pause")
    hc = body["HostConfig"]
    assert (hc["NetworkMode"], hc["PidMode"], hc["IpcMode"]) == ("host", "host", "host")
    assert "Hostname" not in body and body["Labels"][tr.LABEL_HOST_NETWORK] == "true"
    assert tr.is_host_network(host) and not tr.is_host_network(config)


def test_container_body_command_args_env_mounts_resources_security() -> None:
    sc = cri.LinuxContainerSecurityContext(
        run_as_user=cri.Int64Value(value=1000), run_as_group=cri.Int64Value(value=3000), privileged=True,
        readonly_rootfs=True, no_new_privs=True, supplemental_groups=[4000],
        capabilities=cri.Capability(add_capabilities=["NET_ADMIN"], drop_capabilities=["ALL"]),
        namespace_options=cri.NamespaceOption(pid=cri.POD))
    config = cri.ContainerConfig(
        metadata=cri.ContainerMetadata(name="app"), image=cri.ImageSpec(image="busybox"), command=["sh", "-c"],
        args=["echo $A"], working_dir="/w", envs=[cri.KeyValue(key="A", value=b"1")],
        mounts=[cri.Mount(container_path="/data", host_path="/h", readonly=True),
                cri.Mount(container_path="/p", host_path="/hp", propagation=cri.PROPAGATION_HOST_TO_CONTAINER)],
        labels={"io.kubernetes.container.name": "app"}, annotations={"hash": "1"}, tty=True, stdin=True,
        stop_signal=cri.SIGNAL_SIGINT,
        linux=cri.LinuxContainerConfig(resources=cri.LinuxContainerResources(
            memory_limit_in_bytes=64 << 20, cpu_shares=256, cpu_period=100000, cpu_quota=50000, oom_score_adj=-997),
            security_context=sc))
    body = tr.container_create_body(config, sandbox_config(), sandbox_id=SANDBOX_ID, node=NODE, log_path="/l/0.log")
    assert (body["Entrypoint"], body["Cmd"], body["Env"], body["WorkingDir"]) == (
        ["sh", "-c"], ["echo $A"], ["A=1"], "/w")
    assert (body["User"], body["Tty"], body["OpenStdin"], body["StopSignal"]) == ("1000:3000", True, True, "SIGINT")
    assert body["Labels"][tr.LABEL_SANDBOX_ID] == SANDBOX_ID and body["Labels"][tr.LABEL_LOG_PATH] == "/l/0.log"
    assert body["Labels"]["annotation.hash"] == "1"
    hc = body["HostConfig"]
    assert hc["Binds"] == ["/h:/data:ro", "/hp:/p:rslave"]
    assert (hc["NetworkMode"], hc["IpcMode"], hc["PidMode"]) == (f"container:{SANDBOX_ID}",) * 3
    assert (hc["Memory"], hc["MemorySwap"], hc["CpuShares"], hc["CpuPeriod"], hc["CpuQuota"], hc["OomScoreAdj"]) == (
        64 << 20, 64 << 20, 256, 100000, 50000, -997)
    assert (hc["Privileged"], hc["ReadonlyRootfs"], hc["SecurityOpt"], hc["GroupAdd"]) == (
        True, True, ["no-new-privileges"], ["4000"])
    assert (hc["CapAdd"], hc["CapDrop"]) == (["NET_ADMIN"], ["ALL"])
    assert hc["LogConfig"]["Type"] == "json-file"


def test_container_body_defaults_keep_the_images_entrypoint() -> None:
    config = cri.ContainerConfig(metadata=cri.ContainerMetadata(name="app"), image=cri.ImageSpec(image="busybox"))
    body = tr.container_create_body(config, sandbox_config(), sandbox_id=SANDBOX_ID, node=NODE)
    assert "Entrypoint" not in body and "Cmd" not in body and "User" not in body
    # CRI's zero value of a namespace mode is POD: the kubelet asks for CONTAINER to get a pid namespace of its own
    assert body["HostConfig"]["PidMode"] == f"container:{SANDBOX_ID}"
    config.linux.security_context.namespace_options.pid = cri.CONTAINER
    body = tr.container_create_body(config, sandbox_config(), sandbox_id=SANDBOX_ID, node=NODE)
    assert "PidMode" not in body["HostConfig"]
    only_args = cri.ContainerConfig(metadata=cri.ContainerMetadata(name="app"), image=cri.ImageSpec(image="b"),
                                    args=["x"])
    assert tr.container_create_body(only_args, sandbox_config(), sandbox_id=SANDBOX_ID, node=NODE)["Cmd"] == ["x"]
    named = cri.LinuxContainerSecurityContext(run_as_username="nobody")
    assert tr.user_of(named) == "nobody"
    assert tr.user_of(cri.LinuxContainerSecurityContext(run_as_group=cri.Int64Value(value=5))) == "0:5"


@pytest.mark.parametrize("config", [
    cri.ContainerConfig(image=cri.ImageSpec(image="b")),
    cri.ContainerConfig(metadata=cri.ContainerMetadata(name="a_b"), image=cri.ImageSpec(image="b")),
    cri.ContainerConfig(metadata=cri.ContainerMetadata(name="a")),
    cri.ContainerConfig(metadata=cri.ContainerMetadata(name="a"), image=cri.ImageSpec(image="b"),
                        mounts=[cri.Mount(container_path="/x")]),
])
def test_container_body_refuses_incomplete_configs(config: cri.ContainerConfig) -> None:
    with pytest.raises(tr.InvalidArgument):
        tr.container_create_body(config, sandbox_config(), sandbox_id=SANDBOX_ID, node=NODE)


T0 = "2026-11-24T00:00:01.123456789Z"
T1 = "2026-11-24T00:00:02.5Z"
ZERO = "0001-01-01T00:00:00Z"


def test_docker_times_become_unix_nanoseconds() -> None:
    assert tr.parse_docker_time(T0) == 1795478401123456789
    assert tr.parse_docker_time(T1) == 1795478402500000000
    assert tr.parse_docker_time(ZERO) == 0 and tr.parse_docker_time(None) == 0
    assert tr.parse_docker_time("2026-11-24T01:00:01+01:00") == 1795478401 * 10**9


@pytest.mark.parametrize(("state", "expected"), [
    ({"Running": True, "StartedAt": T0, "FinishedAt": ZERO}, (cri.CONTAINER_RUNNING, "", "")),
    ({"Status": "exited", "StartedAt": T0, "FinishedAt": T1, "ExitCode": 0}, (cri.CONTAINER_EXITED, "Completed", "")),
    ({"Status": "exited", "StartedAt": T0, "FinishedAt": T1, "ExitCode": 3}, (cri.CONTAINER_EXITED, "Error", "")),
    ({"Status": "exited", "StartedAt": T0, "FinishedAt": T1, "ExitCode": 137, "OOMKilled": True},
     (cri.CONTAINER_EXITED, "OOMKilled", "")),
    ({"Status": "created", "StartedAt": ZERO, "FinishedAt": ZERO, "ExitCode": 127, "Error": "exec: not found"},
     (cri.CONTAINER_EXITED, "ContainerCannotRun", "exec: not found")),
    ({"Status": "created", "StartedAt": ZERO, "FinishedAt": ZERO, "ExitCode": 0}, (cri.CONTAINER_CREATED, "", "")),
])
def test_container_state_and_reason(state: dict[str, object], expected: tuple[int, str, str]) -> None:
    assert tr.container_state(state) == expected


def test_container_status_from_inspect() -> None:
    inspect = {"Id": "c1", "Name": "/k8s_app_web_default_u1_1", "Created": T0, "Image": "sha256:abc",
               "Config": {"Image": "busybox", "Labels": {"app": "web", "annotation.a": "b", tr.LABEL_LOG_PATH: "/l",
                                                         tr.LABEL_MANAGED: "true"}},
               "State": {"Status": "exited", "StartedAt": T0, "FinishedAt": T1, "ExitCode": 2},
               "Mounts": [{"Type": "bind", "Source": "/h", "Destination": "/d", "RW": False},
                          {"Type": "volume", "Source": "/v", "Destination": "/v", "RW": True}]}
    status = tr.container_status(inspect)
    assert (status.id, status.metadata.name, status.metadata.attempt, status.state, status.exit_code,
            status.reason) == ("c1", "app", 1, cri.CONTAINER_EXITED, 2, "Error")
    assert (status.image.image, status.image_ref, status.log_path) == ("busybox", "sha256:abc", "/l")
    assert dict(status.labels) == {"app": "web"} and dict(status.annotations) == {"a": "b"}
    assert [(m.container_path, m.host_path, m.readonly) for m in status.mounts] == [("/d", "/h", True)]
    assert status.finished_at > status.started_at > 0


def test_a_container_never_finishes_before_it_started() -> None:
    inspect = {"Id": "c1", "Name": "/k8s_app_web_default_u1_0", "Config": {},
               "State": {"Status": "exited", "StartedAt": T1, "FinishedAt": T0, "ExitCode": 0}}
    status = tr.container_status(inspect)
    assert status.finished_at == status.started_at == tr.parse_docker_time(T1)


def test_list_entries_need_no_inspect() -> None:
    item = {"Id": "s1", "Names": ["/k8s_POD_web_default_u1_0"], "State": "running", "Created": 1700000000,
            "Labels": {"app": "web", tr.LABEL_TYPE: tr.TYPE_SANDBOX}}
    sandbox = tr.sandbox_from_list(item)
    assert (sandbox.state, sandbox.metadata.uid, sandbox.created_at, dict(sandbox.labels)) == (
        cri.SANDBOX_READY, "u1", 1700000000 * 10**9, {"app": "web"})
    container = tr.container_from_list({"Id": "c1", "Names": ["/k8s_app_web_default_u1_4"], "State": "exited",
                                        "Image": "busybox", "ImageID": "sha256:x",
                                        "Labels": {tr.LABEL_SANDBOX_ID: "s1"}})
    assert (container.pod_sandbox_id, container.metadata.attempt, container.state, container.image_ref) == (
        "s1", 4, cri.CONTAINER_EXITED, "sha256:x")
    assert tr.labels_match({"app": "web"}, {"app": "web", "x": "y"}) and not tr.labels_match({"app": "db"}, {})


def test_port_mappings_with_a_host_port_go_to_portmap() -> None:
    mappings = [cri.PortMapping(container_port=80, host_port=8080), cri.PortMapping(container_port=53),
                cri.PortMapping(protocol=cri.UDP, container_port=53, host_port=5353, host_ip="127.0.0.1")]
    assert port_mappings(mappings) == [
        {"hostPort": 8080, "containerPort": 80, "protocol": "tcp"},
        {"hostPort": 5353, "containerPort": 53, "protocol": "udp", "hostIP": "127.0.0.1"}]


def test_image_user_is_a_uid_or_a_name() -> None:
    assert tr.image_from_inspect({"Id": "sha256:1", "Config": {"User": "1000:1000"}}).uid.value == 1000
    named = tr.image_from_inspect({"Id": "sha256:1", "RepoTags": ["a:1"], "Config": {"User": "nginx"}})
    assert named.username == "nginx" and not named.HasField("uid") and list(named.repo_tags) == ["a:1"]


def test_an_ephemeral_container_joins_its_targets_pid_namespace() -> None:
    config = cri.ContainerConfig(metadata=cri.ContainerMetadata(name="debugger"), image=cri.ImageSpec(image="b"))
    config.linux.security_context.namespace_options.CopyFrom(cri.NamespaceOption(pid=cri.TARGET, target_id="c0ffee"))
    body = tr.container_create_body(config, sandbox_config(), sandbox_id=SANDBOX_ID, node=NODE)
    assert body["HostConfig"]["PidMode"] == "container:c0ffee"
    assert body["HostConfig"]["NetworkMode"] == f"container:{SANDBOX_ID}"


def test_pod_cgroup_parent_goes_to_sandbox_and_containers_on_cgroupfs_only() -> None:
    """cri-dockerd: the kubelet's pod cgroup (LinuxPodSandboxConfig.cgroup_parent) is HostConfig.CgroupParent of
    the sandbox and of every container; a systemd-driver Docker takes only slices: Docker's default parent."""
    config = sandbox_config(linux=cri.LinuxPodSandboxConfig(cgroup_parent="/kubepods/burstable/podu1"))
    container = cri.ContainerConfig(metadata=cri.ContainerMetadata(name="app"), image=cri.ImageSpec(image="busybox"))
    assert tr.sandbox_create_body(config, node=NODE, image="pause")["HostConfig"]["CgroupParent"] == \
        "/kubepods/burstable/podu1"
    body = tr.container_create_body(container, config, sandbox_id=SANDBOX_ID, node=NODE)
    assert body["HostConfig"]["CgroupParent"] == "/kubepods/burstable/podu1"
    assert "CgroupParent" not in tr.sandbox_create_body(config, node=NODE, image="pause",
                                                        cgroup_driver="systemd")["HostConfig"]
    assert "CgroupParent" not in tr.sandbox_create_body(sandbox_config(), node=NODE, image="pause")["HostConfig"]
    assert "CgroupParent" not in tr.container_create_body(container, sandbox_config(), sandbox_id=SANDBOX_ID,
                                                          node=NODE)["HostConfig"]
