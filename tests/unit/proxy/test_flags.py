"""kube-proxy's flags (proxy/__main__.py): upstream's names and durations; bad values refused at start."""

from __future__ import annotations

from pathlib import Path

import pytest

import proxy.__main__ as proxy_main
from proxy.__main__ import parse_args, proxier_config


def test_upstream_flags_and_durations() -> None:
    args = parse_args(["--master", "http://127.0.0.1:8080", "--sync-period", "1m0s", "--min-sync-period", "100ms",
                       "--hostname-override", "node-1, node-2", "--masquerade-all", "--cluster-cidr", "10.0.0.0/8"])
    assert args.sync_period == 60 and args.min_sync_period == 0.1
    config = proxier_config(args)
    assert config.local_nodes == {"node-1", "node-2"} and config.masquerade_all
    assert config.cluster_cidr == "10.0.0.0/8" and config.chains.prefix == "KUBE"
    assert config.masquerade_mark == "0x4000"
    assert parse_args(["--cleanup"]).cleanup  # --cleanup needs no apiserver


@pytest.mark.parametrize(("argv", "message"), [
    ([], "one of --kubeconfig or --master is required"),
    (["--master", "x", "--iptables-chain-prefix", "kube"], "--iptables-chain-prefix must match"),
    (["--master", "x", "--iptables-chain-prefix", "TOOLONG1"], "--iptables-chain-prefix must match"),
    (["--master", "x", "--min-sync-period", "1m", "--sync-period", "30s"], "--min-sync-period"),
    (["--master", "x", "--iptables-masquerade-bit", "32"], "--iptables-masquerade-bit"),
    (["--master", "x", "--sync-period", "soon"], "time: invalid duration \"soon\""),
    (["--master", "x", "--proxy-mode", "ipvs"], "invalid choice"),
])
def test_bad_flags_are_refused(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        parse_args(argv)
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_bridge_netfilter_off_is_warned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        caplog: pytest.LogCaptureFixture) -> None:
    sysctl = tmp_path / "bridge-nf-call-iptables"
    monkeypatch.setattr(proxy_main, "BRIDGE_NF_CALL_IPTABLES", sysctl)
    proxy_main.check_bridge_netfilter()  # missing: no br_netfilter module
    sysctl.write_text("0\n")
    proxy_main.check_bridge_netfilter()
    assert [r.message.startswith("missing br_netfilter") for r in caplog.records] == [True, True]
    caplog.clear()
    sysctl.write_text("1\n")
    proxy_main.check_bridge_netfilter()
    assert caplog.records == []
