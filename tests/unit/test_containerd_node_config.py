"""containerd_node.config: the per-node containerd config v2 and the CNI conf_template (pure; no containerd)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from cni.config import CONTAINERD_POD_CIDR, NodeNetwork
from containerd_node.config import PAUSE_IMAGE, ConfigError, NodeLayout, render_toml


def test_config_is_toml_containerd_reads_with_the_node_s_own_paths(tmp_path: Path) -> None:
    layout = NodeLayout("cd-1", tmp_path / "cd-1")
    doc = tomllib.loads(layout.config_toml())
    assert doc["version"] == 2
    assert doc["root"] == str(tmp_path / "cd-1" / "root") and doc["state"] == str(tmp_path / "cd-1" / "state")
    assert doc["grpc"]["address"] == str(layout.socket)
    assert doc["ttrpc"]["address"] == f"{layout.socket}.ttrpc"
    cri = doc["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["sandbox_image"] == PAUSE_IMAGE
    assert cri["stream_server_address"] == "127.0.0.1"
    assert cri["restrict_oom_score_adj"] is True and cri["netns_mounts_under_state_dir"] is True
    assert cri["cni"] == {"bin_dir": "/usr/lib/cni", "conf_dir": str(layout.cni_conf_dir),
                          "conf_template": str(layout.cni_template), "max_conf_num": 1}
    runc = cri["containerd"]["runtimes"]["runc"]
    assert runc["runtime_type"] == "io.containerd.runc.v2"
    assert runc["options"]["Root"] == str(layout.runc_root)
    assert layout.endpoint == f"unix://{tmp_path}/cd-1/containerd.sock"


def test_conf_template_rendered_with_a_pod_cidr_is_the_docker_side_network(tmp_path: Path) -> None:
    """What containerd renders from the template equals cni.config's list for the same node and CIDR."""
    layout = NodeLayout("cd-2", tmp_path / "cd-2")
    template = layout.conf_template()
    assert CONTAINERD_POD_CIDR in template
    rendered = json.loads(template.replace(CONTAINERD_POD_CIDR, "10.244.7.0/24"))
    expected = NodeNetwork("cd-2", "10.244.7.0/24", tmp_path / "cd-2").config_list()
    # host-local's default gateway is the range's first address, which the Docker side names explicitly
    expected["plugins"][0]["ipam"]["ranges"][0][0].pop("gateway")
    assert rendered == expected
    assert rendered["name"] == "minik8s-cd-2" and rendered["plugins"][0]["bridge"] == "mk8s-cd-2"
    assert [p["type"] for p in rendered["plugins"]] == ["bridge", "portmap"]


def test_a_socket_path_too_long_for_unix_sockets_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="too long for a unix socket"):
        NodeLayout("n", tmp_path / ("x" * 120))


def test_a_relative_directory_or_empty_node_name_is_refused() -> None:
    with pytest.raises(ConfigError, match="absolute"):
        NodeLayout("n", Path("relative/dir"))
    with pytest.raises(ConfigError, match="node name"):
        NodeLayout("", Path("/tmp/x"))


def test_render_toml_quotes_dotted_keys_and_escapes_strings() -> None:
    text = render_toml({"a": 1, "s": 'q"x', "t": {"io.containerd.x": {"on": True, "l": ["u", "v"]}}})
    assert tomllib.loads(text) == {"a": 1, "s": 'q"x', "t": {"io.containerd.x": {"on": True, "l": ["u", "v"]}}}
    with pytest.raises(ConfigError):
        render_toml({"f": 1.5})
