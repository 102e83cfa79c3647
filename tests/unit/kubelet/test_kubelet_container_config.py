"""From a container spec to a Docker create request (kubelet.container_config), and the CNI pieces
that are pure (config lists, stdin, results, errors)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cni.config import NodeNetwork, bridge_name, port_mappings
from cni.invoke import CniError, CniResult, CniRuntime, RuntimeConf, parse_output
from kubelet.container_config import (
    ConfigError,
    PodContext,
    build_create_config,
    container_env,
    cpu_millis,
    expand,
    memory_bytes,
    spec_hash,
)
from kubelet.docker_client import FrameDecoder, split_image
from machinery.api.core_v1 import Pod


def make_pod(container: dict[str, Any], **spec: Any) -> Pod:
    return Pod.model_validate({"apiVersion": "v1", "kind": "Pod",
                               "metadata": {"name": "web", "namespace": "prod", "uid": "u-1",
                                            "labels": {"app": "web"}},
                               "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "img:1",
                                                                               **container}], **spec}})


def test_memory_and_cpu_helpers() -> None:
    assert memory_bytes("20Mi") == 20971520
    assert cpu_millis("500m") == 500 and cpu_millis(2) == 2000 and cpu_millis("0.1") == 100
    with pytest.raises(ValueError):
        memory_bytes("lots")


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


def create_config(container: dict[str, Any], **spec: Any) -> dict[str, Any]:
    pod = make_pod(container, **spec)
    assert pod.spec is not None
    c = pod.spec.containers[0]
    return build_create_config(pod, c, image="img:1", sandbox_id="sb", env=container_env(pod, c, PodContext()),
                               binds=["/host:/data:ro"], labels={"l": "v"})


def test_command_replaces_entrypoint_and_args_replace_cmd() -> None:
    both = create_config({"command": ["sh", "-c"], "args": ["echo $(GREETING)"],
                          "env": [{"name": "GREETING", "value": "hi"}]})
    assert both["Entrypoint"] == ["sh", "-c"] and both["Cmd"] == ["echo hi"]
    only_command = create_config({"command": ["sleep", "1"]})
    assert only_command["Entrypoint"] == ["sleep", "1"] and only_command["Cmd"] == []  # the image's CMD is dropped
    only_args = create_config({"args": ["-v"]})
    assert "Entrypoint" not in only_args and only_args["Cmd"] == ["-v"]
    neither = create_config({})
    assert "Entrypoint" not in neither and "Cmd" not in neither


def test_host_config_joins_the_sandbox_and_applies_limits_and_user() -> None:
    config = create_config({"resources": {"limits": {"memory": "128Mi", "cpu": "250m"}, "requests": {"cpu": "100m"}},
                            "workingDir": "/work", "securityContext": {"runAsUser": 1000, "runAsGroup": 2000,
                                                                       "readOnlyRootFilesystem": True},
                            "ports": [{"containerPort": 80}]}, shareProcessNamespace=True)
    hc = config["HostConfig"]
    assert hc["NetworkMode"] == "container:sb" and hc["IpcMode"] == "container:sb" and hc["PidMode"] == "container:sb"
    assert hc["Memory"] == hc["MemorySwap"] == 128 * 2**20
    assert hc["CpuQuota"] == 25000 and hc["CpuPeriod"] == 100000 and hc["CpuShares"] == 102
    assert hc["Binds"] == ["/host:/data:ro"] and hc["ReadonlyRootfs"] is True
    assert config["User"] == "1000:2000" and config["WorkingDir"] == "/work" and config["Labels"] == {"l": "v"}
    assert "ExposedPorts" not in config  # Docker refuses them with network mode container:


def test_host_pid_and_host_ipc_join_the_nodes_namespaces() -> None:
    hc = create_config({}, hostPID=True, hostIPC=True, shareProcessNamespace=True)["HostConfig"]
    assert hc["PidMode"] == "host" and hc["IpcMode"] == "host"
    hc = create_config({})["HostConfig"]
    assert "PidMode" not in hc and hc["IpcMode"] == "container:sb"


def test_pod_security_context_is_the_default_user() -> None:
    assert create_config({}, securityContext={"runAsUser": 7})["User"] == "7"
    assert create_config({"securityContext": {"runAsUser": 8}}, securityContext={"runAsUser": 7})["User"] == "8"
    assert "User" not in create_config({})


def test_spec_hash_changes_with_the_spec() -> None:
    a = make_pod({"image": "img:1"})
    b = make_pod({"image": "img:2"})
    assert a.spec is not None and b.spec is not None
    assert spec_hash(a.spec.containers[0]) == spec_hash(make_pod({"image": "img:1"}).spec.containers[0])  # type: ignore[union-attr]
    assert spec_hash(a.spec.containers[0]) != spec_hash(b.spec.containers[0])


def test_image_references_for_pulls() -> None:
    assert split_image("busybox") == ("busybox", "latest")
    assert split_image("minik8s/httpd:1") == ("minik8s/httpd", "1")
    assert split_image("registry:5000/app") == ("registry:5000/app", "latest")
    assert split_image("app@sha256:abc") == ("app", "sha256:abc")


def test_frame_decoder_handles_split_frames() -> None:
    frame = bytes([1, 0, 0, 0, 0, 0, 0, 3]) + b"abc" + bytes([2, 0, 0, 0, 0, 0, 0, 2]) + b"de"
    d = FrameDecoder()
    assert d.feed(frame[:5]) == []
    assert d.feed(frame[5:12]) == [(1, b"abc")]
    assert d.feed(frame[12:]) == [(2, b"de")]


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
