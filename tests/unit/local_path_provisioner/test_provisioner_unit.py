"""The provisioner's pure parts: rancher's config, the helper pod it runs, where a volume's node and path are,
and its parse of the command line."""

from __future__ import annotations

import pytest

from local_path_provisioner import helper_pod as hp
from local_path_provisioner.__main__ import parse_args
from local_path_provisioner.manifests import objects, user
from local_path_provisioner.provisioner import Config, ProvisioningError, volume_node, volume_path


def test_config_parses_rancher_node_path_map() -> None:
    config = Config.parse('{"nodePathMap": [{"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": ["/a/"]},'
                          ' {"node": "n2", "paths": ["/b", "/c"]}], "cmdTimeoutSeconds": 30}')
    assert config.path_on_node("n1") == "/a"
    assert config.path_on_node("n2") == "/b"
    assert config.path_on_node("n2", "/c") == "/c"
    assert config.cmd_timeout == 30
    with pytest.raises(ProvisioningError, match="config doesn't contain path /d on node n2"):
        config.path_on_node("n2", "/d")


def test_config_without_a_default_refuses_unlisted_nodes() -> None:
    config = Config.parse('{"nodePathMap": [{"node": "n2", "paths": ["/b"]}]}')
    with pytest.raises(ProvisioningError, match="config doesn't contain node n1, and no "
                                                "DEFAULT_PATH_FOR_NON_LISTED_NODES available"):
        config.path_on_node("n1")
    with pytest.raises(ValueError, match="must be absolute"):
        Config.parse('{"nodePathMap": [{"node": "n2", "paths": ["rel"]}]}')


def test_helper_pod_is_rancher_s() -> None:
    pod = hp.helper_pod(action="create", volume="pvc-1", path="/base/pvc-1_ns_data/", node="n1",
                        namespace="local-path-storage", image="img", service_account="sa",
                        config_map="local-path-config", size_bytes=1024, claim=("ns", "data", "u1"))
    assert pod["metadata"]["name"] == "helper-pod-create-pvc-1"
    spec = pod["spec"]
    assert (spec["nodeName"], spec["restartPolicy"], spec["serviceAccountName"]) == ("n1", "Never", "sa")
    container = spec["containers"][0]
    assert container["command"] == ["/bin/sh", "/script/setup"]
    assert container["args"] == ["-p", "/base/pvc-1_ns_data", "-s", "1024", "-m", "Filesystem", "-a", "create"]
    assert {"name": "VOL_DIR", "value": "/base/pvc-1_ns_data"} in container["env"]
    assert {"name": "data", "mountPath": "/base"} in container["volumeMounts"]
    assert {"name": "data", "hostPath": {"path": "/base", "type": "DirectoryOrCreate"}} in spec["volumes"]
    assert pod["metadata"]["annotations"][hp.ANN_CLAIM] == "ns/data"
    teardown = hp.helper_pod(action="delete", volume="pvc-1", path="/base/x", node="n1", namespace="n",
                             image="i", service_account="s", config_map="c", size_bytes=0)
    assert teardown["spec"]["containers"][0]["command"] == ["/bin/sh", "/script/teardown"]
    assert len(hp.helper_pod_name("create", "v" * 200)) == 128


@pytest.mark.parametrize("path", ["relative/dir", "/", "/top"])
def test_helper_pod_refuses_paths_without_a_parent(path: str) -> None:
    with pytest.raises(ValueError):
        hp.helper_pod(action="create", volume="v", path=path, node="n", namespace="n", image="i",
                      service_account="s", config_map="c", size_bytes=0)


def test_volume_node_and_path() -> None:
    volume = {"spec": {"hostPath": {"path": "/base/v"}, "nodeAffinity": {"required": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}]}]}}}}
    assert (volume_node(volume), volume_path(volume)) == ("n1", "/base/v")
    assert volume_node({"spec": {"local": {"path": "/x"}}}) == ""
    assert volume_path({"spec": {"local": {"path": "/x"}}}) == "/x"


def test_manifests_are_rancher_s_with_the_default_class() -> None:
    kinds = [obj["kind"] for _, obj in objects("/base")]
    assert kinds == ["Namespace", "ServiceAccount", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding",
                     "StorageClass", "ConfigMap"]
    storage_class = next(obj for _, obj in objects("/base") if obj["kind"] == "StorageClass")
    assert storage_class["metadata"]["annotations"] == {"storageclass.kubernetes.io/is-default-class": "true"}
    assert "annotations" not in next(obj for _, obj in objects("/b", default_class=False)
                                     if obj["kind"] == "StorageClass")["metadata"]
    assert user() == "system:serviceaccount:local-path-storage:local-path-provisioner-service-account"


def test_command_line() -> None:
    args = parse_args(["--master", "http://x", "--path", "/base"])
    assert (args.command, args.leader_elect, args.leader_elect_resource_name,
            args.leader_elect_resource_namespace) == ("start", True, "rancher.io-local-path", "local-path-storage")
    assert parse_args(["install", "--master", "http://x"]).command == "install"
    with pytest.raises(SystemExit):
        parse_args(["--master", "http://x", "--path", "relative"])
    with pytest.raises(SystemExit):
        parse_args(["--path", "/base"])


def test_shared_file_system_config() -> None:
    config = Config.parse('{"sharedFileSystemPath": "/shared/"}')
    assert config.shared and config.path_on_node("any") == "/shared" and config.path_on_node("") == "/shared"
    with pytest.raises(ValueError, match="both nodePathMap and sharedFileSystemPath are defined"):
        Config.parse('{"sharedFileSystemPath": "/s", "nodePathMap": [{"node": "n", "paths": ["/p"]}]}')
    with pytest.raises(ValueError, match="both nodePathMap and sharedFileSystemPath are unconfigured"):
        Config.parse("{}")
    unscheduled = hp.helper_pod(action="create", volume="v", path="/shared/v", node="", namespace="n", image="i",
                                service_account="s", config_map="c", size_bytes=0, provisioner="example.com/p")
    assert "nodeName" not in unscheduled["spec"]
    assert unscheduled["metadata"]["annotations"][hp.ANN_PROVISIONER] == "example.com/p"
