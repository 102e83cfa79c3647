"""The kubelet's own part of a node's cleanup (kubelet.cleanup): its pods' directories and container
logs go, the rest of the root (the runtime's) stays; bad arguments are refused. And the kubelet's runtime
flags (kubelet.__main__)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubelet.cleanup import cleanup_kubelet_state, main


def test_the_kubelets_directories_go_and_the_runtimes_stay(tmp_path: Path) -> None:
    root = tmp_path / "node-1"
    (root / "pods" / "uid-1" / "volumes").mkdir(parents=True)
    (root / "logs" / "ns_p_uid-1" / "c").mkdir(parents=True)
    (root / "cni").mkdir()  # the runtime's: dockershim.cleanup removes it
    cleanup_kubelet_state("node-1", root)
    assert sorted(p.name for p in root.iterdir()) == ["cni"]
    (root / "cni").rmdir()
    cleanup_kubelet_state("node-1", root)  # again, on nothing: the empty root goes too
    assert not root.exists()


def test_root_dir_goes_with_one_node_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--node", "a", "--node", "b", "--root-dir", str(tmp_path)])
    assert "--root-dir goes with one --node" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([])


def test_runtime_flags_are_checked(capsys: pytest.CaptureFixture[str]) -> None:
    from kubelet.__main__ import config_from_args, parse_args

    args = parse_args(["--node-name", "n1", "--container-runtime-endpoint", "unix:///run/x/cri.sock",
                       "--runtime-request-timeout", "30s"])
    config = config_from_args(args)
    assert config.container_runtime_endpoint == config.image_service_endpoint == "unix:///run/x/cri.sock"
    assert config.runtime_request_timeout == 30.0
    assert config_from_args(parse_args(["--node-name", "n2"])).container_runtime_endpoint == \
        "unix:///run/minik8s/n2/dockershim.sock"
    for bad in (["--container-runtime-endpoint", "tcp://127.0.0.1:1"], ["--image-service-endpoint", "cri.sock"],
                ["--runtime-request-timeout", "0s"], ["--runtime-request-timeout", "soon"]):
        with pytest.raises(SystemExit):
            parse_args(["--node-name", "n1", *bad])
    err = capsys.readouterr().err
    assert "is not a unix socket" in err and "must be positive" in err
