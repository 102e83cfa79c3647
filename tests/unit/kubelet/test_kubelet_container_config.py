"""From a pod spec to CRI sandbox and container configs (kubelet.kuberuntime.container_config), the
environment (kubelet.kubelet_pods, kubelet.container.helpers), and the CNI pieces that are pure (config lists,
stdin, results, errors)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cni.config import NodeNetwork, bridge_name, port_mappings
from cni.invoke import CniError, CniResult, CniRuntime, RuntimeConf, parse_output
from kubelet.container.helpers import expand, hash_container
from kubelet.container.runtime import ConfigError
from kubelet.kubelet_pods import PodContext, container_env
from kubelet.kuberuntime.container_config import (
    MountSpec,
    RunContainerOptions,
    generate_container_config,
    generate_pod_sandbox_config,
)
from kubelet.types import labels
from machinery.api.core_v1 import Pod
from machinery.cri import api_pb2 as pb


def make_pod(container: dict[str, Any], **spec: Any) -> Pod:
    return Pod.model_validate({"apiVersion": "v1", "kind": "Pod",
                               "metadata": {"name": "web", "namespace": "prod", "uid": "u-1",
                                            "labels": {"app": "web"}},
                               "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "img:1",
                                                                               **container}], **spec}})


def test_dollar_paren_expansion() -> None:
    env = {"A": "x", "B": "y"}
    assert expand("$(A)-$(B)", env) == "x-y"
    assert expand("$(MISSING) stays", env) == "$(MISSING) stays"
    assert expand("$$(A) is escaped, $$ is a dollar", env) == "$(A) is escaped, $ is a dollar"


def test_env_with_field_refs_and_expansion() -> None:
    pod = make_pod({"env": [
        {"name": "NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {"name": "HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}},
        {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
        {"name": "MEM", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}}},
        {"name": "URL", "value": "http://$(IP):80/$(NAME)"},
    ], "resources": {"limits": {"memory": "64Mi"}}})
    assert pod.spec is not None
    env = dict(container_env(pod, pod.spec.containers[0], PodContext(pod_ip="10.244.1.7", host_ip="192.0.2.2")))
    assert env == {"NAME": "web", "NS": "prod", "IP": "10.244.1.7", "NODE": "node-1", "HOST": "192.0.2.2",
                   "APP": "web", "MEM": "64", "URL": "http://10.244.1.7:80/web"}


def test_env_from_missing_sources_is_a_config_error() -> None:
    pod = make_pod({"env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "k"}}}]})
    assert pod.spec is not None
    with pytest.raises(ConfigError, match='configmap "cm" not found'):
        container_env(pod, pod.spec.containers[0], PodContext())
    optional = make_pod({"env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k",
                                                                              "optional": True}}}]})
    assert optional.spec is not None
    assert container_env(optional, optional.spec.containers[0], PodContext()) == []


def create_config(container: dict[str, Any], **spec: Any) -> pb.ContainerConfig:
    pod = make_pod(container, **spec)
    assert pod.spec is not None
    c = pod.spec.containers[0]
    options = RunContainerOptions(envs=container_env(pod, c, PodContext()), mounts=[MountSpec("/data", "/host", True)])
    return generate_container_config(pod, c, 2, options)


def test_command_and_args_are_expanded_and_passed_as_given() -> None:
    both = create_config({"command": ["sh", "-c"], "args": ["echo $(GREETING)"],
                          "env": [{"name": "GREETING", "value": "hi"}]})
    assert list(both.command) == ["sh", "-c"] and list(both.args) == ["echo hi"]
    assert [(e.key, e.value) for e in both.envs] == [("GREETING", b"hi")]
    neither = create_config({})
    assert not neither.command and not neither.args  # the runtime keeps the image's entrypoint and cmd


def test_container_config_carries_limits_user_mounts_labels_and_the_log_path() -> None:
    config = create_config({"resources": {"limits": {"memory": "128Mi", "cpu": "250m"}, "requests": {"cpu": "100m"}},
                            "workingDir": "/work", "securityContext": {"runAsUser": 1000, "runAsGroup": 2000,
                                                                       "readOnlyRootFilesystem": True},
                            "terminationMessagePath": "/dev/termination-log"}, shareProcessNamespace=True)
    res = config.linux.resources
    assert res.memory_limit_in_bytes == res.memory_swap_limit_in_bytes == 128 * 2**20
    assert res.cpu_quota == 25000 and res.cpu_period == 100000 and res.cpu_shares == 102
    sc = config.linux.security_context
    assert sc.run_as_user.value == 1000 and sc.run_as_group.value == 2000 and sc.readonly_rootfs
    assert sc.namespace_options.pid == pb.POD and sc.namespace_options.network == pb.POD
    assert [(m.container_path, m.host_path, m.readonly) for m in config.mounts] == [("/data", "/host", True)]
    assert config.working_dir == "/work" and config.metadata.attempt == 2 and config.log_path == "c/2.log"
    assert config.labels[labels.POD_UID] == "u-1" and config.labels[labels.CONTAINER_NAME] == "c"
    assert config.annotations[labels.CONTAINER_RESTART_COUNT] == "2"
    assert config.annotations[labels.TERMINATION_MESSAGE_PATH] == "/dev/termination-log"


def test_host_pid_ipc_and_network_are_the_nodes_namespaces() -> None:
    ns = create_config({}, hostPID=True, hostIPC=True, hostNetwork=True).linux.security_context.namespace_options
    assert ns.pid == pb.NODE and ns.ipc == pb.NODE and ns.network == pb.NODE
    ns = create_config({}).linux.security_context.namespace_options
    assert ns.pid == pb.CONTAINER and ns.ipc == pb.POD and ns.network == pb.POD


def test_pod_security_context_is_the_default_user() -> None:
    assert create_config({}, securityContext={"runAsUser": 7}).linux.security_context.run_as_user.value == 7
    sc = create_config({"securityContext": {"runAsUser": 8}}, securityContext={"runAsUser": 7}).linux.security_context
    assert sc.run_as_user.value == 8
    assert not create_config({}).linux.security_context.HasField("run_as_user")


def test_sandbox_config_has_metadata_hostname_dns_and_host_ports() -> None:
    pod = make_pod({"ports": [{"containerPort": 80, "hostPort": 8080}, {"containerPort": 53, "protocol": "UDP"}]},
                   hostname="web")
    config = generate_pod_sandbox_config(pod, 1, "/logs/prod_web_u-1", pb.DNSConfig(servers=["10.96.0.10"]))
    assert (config.metadata.name, config.metadata.uid, config.metadata.namespace, config.metadata.attempt) == \
        ("web", "u-1", "prod", 1)
    assert config.hostname == "web" and list(config.dns_config.servers) == ["10.96.0.10"]
    assert config.log_directory == "/logs/prod_web_u-1" and config.labels[labels.POD_UID] == "u-1"
    assert config.labels["app"] == "web"  # the pod's own labels too
    assert [(m.container_port, m.host_port, m.protocol) for m in config.port_mappings] == [(80, 8080, pb.TCP)]
    host = generate_pod_sandbox_config(make_pod({}, hostNetwork=True), 0, "/logs/x")
    assert host.hostname == "" and host.linux.security_context.namespace_options.network == pb.NODE


def test_hash_container_changes_with_the_spec() -> None:
    a = make_pod({"image": "img:1"})
    b = make_pod({"image": "img:2"})
    assert a.spec is not None and b.spec is not None
    assert hash_container(a.spec.containers[0]) == hash_container(make_pod({"image": "img:1"}).spec.containers[0])  # type: ignore[union-attr]
    assert hash_container(a.spec.containers[0]) != hash_container(b.spec.containers[0])


# -- CNI, the pure parts ------------------------------------------------------------------------------


def test_bridge_names_fit_in_fifteen_characters() -> None:
    assert bridge_name("node-1") == "mk8s-node-1"
    long = bridge_name("a-very-long-node-name.example.com")
    assert len(long) <= 15 and long.startswith("mk8s-")
    assert long != bridge_name("a-very-long-node-name.example.org")


def test_node_config_list(tmp_path: Path) -> None:
    net = NodeNetwork("node-1", "10.244.3.0/24", tmp_path)
    conf = net.config_list()
    assert conf["cniVersion"] == "1.0.0" and conf["name"] == "minik8s-node-1"
    bridge, portmap = conf["plugins"]
    assert bridge["type"] == "bridge" and bridge["bridge"] == "mk8s-node-1" and bridge["isGateway"] is True
    ipam = bridge["ipam"]
    assert ipam["type"] == "host-local" and ipam["ranges"] == [[{"subnet": "10.244.3.0/24", "gateway": "10.244.3.1"}]]
    assert ipam["dataDir"] == str(tmp_path / "cni" / "ipam")
    assert portmap == {"type": "portmap", "capabilities": {"portMappings": True}, "snat": True}
    with pytest.raises(ValueError):
        NodeNetwork("n", "10.244.3.1/24", tmp_path)  # not a network address


def test_plugin_stdin_carries_name_version_prev_result_and_wanted_capabilities(tmp_path: Path) -> None:
    net = NodeNetwork("node-1", "10.244.3.0/24", tmp_path)
    conf = net.config_list()
    rt = RuntimeConf("cid", "/proc/1/ns/net", capability_args={"portMappings": [{"hostPort": 8080}], "other": 1})
    prev = {"cniVersion": "1.0.0", "ips": []}
    bridge = CniRuntime.plugin_stdin(conf, conf["plugins"][0], rt, None)
    assert bridge["name"] == "minik8s-node-1" and bridge["cniVersion"] == "1.0.0"
    assert "prevResult" not in bridge and "runtimeConfig" not in bridge
    portmap = CniRuntime.plugin_stdin(conf, conf["plugins"][1], rt, prev)
    assert portmap["prevResult"] == prev and portmap["runtimeConfig"] == {"portMappings": [{"hostPort": 8080}]}


def test_results_and_errors_are_parsed() -> None:
    result = CniResult({"cniVersion": "1.0.0",
                        "interfaces": [{"name": "mk8s-n"}, {"name": "veth1"}, {"name": "eth0", "sandbox": "/x"}],
                        "ips": [{"interface": 2, "address": "10.244.3.4/24", "gateway": "10.244.3.1"}]})
    assert result.ip == "10.244.3.4" and result.gateway == "10.244.3.1"
    ok = parse_output(0, b'{"cniVersion":"1.0.0","ips":[]}', b"")
    assert ok == {"cniVersion": "1.0.0", "ips": []}
    assert parse_output(0, b"", b"") is None
    with pytest.raises(CniError) as e:
        parse_output(1, b'{"cniVersion":"1.0.0","code":7,"msg":"bad config","details":"no subnet"}', b"", "bridge",
                     "ADD")
    assert (e.value.code, e.value.msg, e.value.details, e.value.plugin) == (7, "bad config", "no subnet", "bridge")
    with pytest.raises(CniError) as raw:
        parse_output(2, b"", b"panic: boom")
    assert raw.value.msg == "panic: boom"


def test_host_ports_become_port_mappings() -> None:
    pod = make_pod({"ports": [{"containerPort": 80, "hostPort": 8080}, {"containerPort": 81, "protocol": "UDP"}]})
    assert pod.spec is not None
    assert port_mappings(list(pod.spec.containers)) == [{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}]
