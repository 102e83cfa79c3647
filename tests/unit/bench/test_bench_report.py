"""bench/report.py's table building from canned benchmark JSON: figures, targets, verdicts, ratios, plot series."""

from __future__ import annotations

from typing import Any

from bench.report import TARGETS, build_figures, markdown_table, plot_points, summary_line


def pods(batch: float, per_pod: float) -> dict[str, Any]:
    return {"batch": {"n": 1, "p50": batch}, "per_pod": {"n": 10, "p50": per_pod},
            "create_to_bound": {"p50": 0.05}, "runs": [{"kubelet_memory_mb": {"n1": {"rss_mb": 70.0}}}]}


RESULTS: dict[str, dict[str, Any]] = {
    "apiserver": {"sizes": {"pods_held": 10_000}, "figures": {
        "etcd_put": {"label": "raw etcd puts", "value": 3000.0, "unit": "/s"},
        "creates": {"label": "apiserver pod creates", "value": 900.0, "unit": "/s", "baseline": 3000.0,
                    "vs_raw_etcd": 0.3},
        "create_ratio": {"label": "apiserver create / raw etcd put", "value": 0.3, "unit": "ratio"},
        "rss_held": {"label": "apiserver RSS holding 10,000 pods", "value": 140.0, "unit": "MB"}}},
    "auth": {"summary": {"creates/s, 64 clients": {"off": 1000.0, "on": 900.0, "change_percent": -10.0}},
             "throughput_cost_percent": 10.0, "cpu_capacity_cost_percent": 9.0, "rounds": [{}, {}, {}]},
    "podsecurity": {"summary": {"creates/s, 64 clients": {"without": 1000.0, "privileged": 990.0,
                                                          "restricted": 950.0}},
                    "throughput_cost_percent": {"privileged": 1.0, "restricted": 5.0}},
    "secrets": {"summary": {"creates/s, 64 clients": {"off": 600.0, "aescbc": 450.0}}, "create_ratio": 0.75},
    "metrics": {"summary": {"creates/s, 64 clients": {"off": 1000.0, "on": 970.0}}, "create_ratio": 0.97},
    "control_plane": {"deployment": {"replicas": 100, "nodes": 10, "create_to_all_bound_s": 1.5},
                      "memory": {"scheduler": {"VmHWM": 60.0}}},
    "scheduler": {"configs": [
        {"nodes": 100, "pods": 1000, "median": {"pods_per_s_window": 450.0, "pods_per_s_from_start": 300.0},
         "window_rates": [440.0, 450.0, 460.0], "algorithm_pods_per_s": 4500.0},
        {"nodes": 100, "pods": 10, "median": {"pods_per_s_window": 200.0, "pods_per_s_from_start": 20.0},
         "window_rates": [200.0], "algorithm_pods_per_s": 5000.0}]},
    "pod_startup": {"pods": {"10": pods(2.0, 1.8)}, "raw_docker": {"10": pods(1.6, 1.5)},
                    "deployment": {"api_apply": {"n": 7, "p50": 0.9, "min": 0.8, "max": 1.0}},
                    "kubelet_memory_mb": {"pods_on_node": 30, "node": "n1", "kubelets": {"n1": {"rss_mb": 120.0}}}},
    "pod_startup_hollow": {"nodes": {"kind": "hollow", "count": 10},
                           "pods": {"10": pods(0.5, 0.4), "1000": pods(8.0, 4.0)}},
    "watch_memory": {"baseline_rss_kb": 90_000, "kb_per_watch": 45.0, "slope_kb_per_watch": 44.0,
                     "own_kb_per_watch": 10.0,
                     "steps": [{"watches": 200, "rss_kb": 99_000, "kb_per_watch": 45.0},
                               {"watches": 1000, "rss_kb": 135_000, "kb_per_watch": 45.0}],
                     "idle": {"connections": 1000, "kb_per_connection": 35.0}},
}


def by_key() -> dict[str, Any]:
    return {f.key: f for f in build_figures(RESULTS)}


def test_verdicts_follow_the_declared_targets() -> None:
    f = by_key()
    assert f["apiserver.creates"].verdict == "NOT MET"  # 900 < 1,000
    assert f["apiserver.create_ratio"].verdict == "met"  # 30% >= 20%
    assert f["apiserver.rss_held"].verdict == "met"  # 140 <= 150 MB at the target's 10,000 pods
    assert f["scheduler.100x1000.window"].verdict == "NOT MET"  # 450 < 500
    assert f["pod_startup.10.batch_ratio"].verdict == "met"  # on the ratio: 2.0 / 1.6 = 1.25 <= 1.5, not on 2.0 s
    assert f["pod_startup.10.per_pod_ratio"].verdict == "met"  # 1.8 / 1.5 = 1.2
    assert f["pod_startup.deployment"].verdict == "met"
    assert f["pod_startup.kubelet_rss"].verdict == "NOT MET"  # 120 > 100 MB
    assert f["auth.throughput_cost"].verdict == "met"
    assert f["secrets.create_ratio"].verdict == "NOT MET"  # 0.75 < 0.8
    assert f["metrics.create_ratio"].verdict == "met"  # 0.97 ≥ 0.95
    assert f["scheduler.100x10.window"].verdict == "—"  # no target at 10 pods
    assert f["compose.bring_up"].verdict == "not measured"
    assert f["watch_memory.kb_per_watch"].verdict == "NOT MET"  # 45 > 20 KB at 1,000 watches
    assert (f["watch_memory.idle_connection"].value, f["watch_memory.own"].value) == (35.0, 10.0)
    assert f["apiserver.creates"].target == {**TARGETS["apiserver.creates"].__dict__}


def test_a_figure_below_its_target_size_is_not_judged() -> None:
    f = by_key()
    assert f["control_plane.deployment"].verdict == "n/a (smaller size)"  # 100 replicas, the target is for 1,000
    assert f["control_plane.rss.scheduler"].verdict == "n/a (smaller size)"


def test_ratios_against_the_baseline_of_the_same_run() -> None:
    f = by_key()
    assert f["pod_startup.10.batch_ratio"].ratio == 2.0 / 1.6
    assert f["pod_startup.10.per_pod_ratio"].baseline == 1.5
    assert f["apiserver.creates"].ratio == 0.3
    assert f["auth.creates/s, 64 clients"].ratio == 0.9
    assert f["podsecurity.restricted.creates/s, 64 clients"].ratio == 0.95
    assert f["podsecurity.privileged.throughput_cost"].value == 1.0
    assert f["secrets.aescbc.creates/s, 64 clients"].ratio == 0.75
    assert f["scheduler.100x1000.window"].ratio == 0.1
    assert f["hollow.10.batch"].ratio == 0.25  # hollow vs real kubelets at the same count
    assert f["hollow.1000.batch"].ratio is None  # no real run at 1,000 pods


def test_markdown_has_one_row_per_figure_and_a_summary() -> None:
    figures = build_figures(RESULTS)
    table = markdown_table(figures).splitlines()
    assert len(table) == 2 + len(figures)
    assert table[1] == "|" + "---|" * 8
    assert all(line.startswith("| ") and line.endswith(" |") and line.count(" | ") >= 7 for line in table[2:])
    row = next(line for line in table if "apiserver pod creates" in line)
    assert "**NOT MET**" in row and "≥ 1,000 pod creates/s (#2)" in row and "0.30x" in row
    assert summary_line(figures) == "targets: 7 met, 5 not met, 3 not measured at their size"


def test_missing_benchmarks_leave_their_figures_out() -> None:
    figures = build_figures({"scheduler": RESULTS["scheduler"]})
    assert {f.area for f in figures} == {"scheduler", "compose"}


def test_plot_series() -> None:
    points = plot_points(RESULTS)
    assert points["startup"]["real_batch"] == [(10, 2.0)]
    assert points["startup"]["raw_batch"] == [(10, 1.6)]
    assert points["startup"]["hollow_batch"] == [(10, 0.5), (1000, 8.0)]
    assert points["startup"]["hollow_nodes"] == 10
    assert points["scheduler"] == [(10, 200.0, 20.0, 200.0, 200.0, 5000.0), (1000, 450.0, 300.0, 440.0, 460.0, 4500.0)]


def test_the_etcd_failover_stall_against_its_baseline_and_one_second() -> None:
    summary = {"retry": {"stall_s": 1.5, "election_s": 1.4, "after_election_s": 0.1, "failed": 0},
               "no_retry": {"stall_s": 7.0, "election_s": 1.3, "after_election_s": 5.7, "failed": 3}}
    figures = {f.key: f for f in build_figures({"etcd_failover": {"summary": summary,
                                                                  "rounds": {"retry": [{}, {}, {}]}}})}
    stall = figures["etcd_failover.stall"]
    assert (stall.value, stall.baseline, stall.ratio) == (1.5, 7.0, 1.5 / 7.0)
    assert stall.verdict == "NOT MET"  # 1.5 s > 1 s
    assert "median of 3" in stall.note and "stall beyond it 0.1 s" in stall.note


def test_cri_startup_ratios_per_runtime_and_containerd_over_docker() -> None:
    run = {"raw_docker": {"1": pods(0.4, 0.4), "10": pods(2.0, 1.9)},
           "docker": {"1": pods(0.5, 0.5), "10": pods(2.2, 2.0)},
           "containerd": {"1": pods(0.2, 0.2), "10": pods(1.1, 1.0)}}
    figures = {f.key: f for f in build_figures({"cri_startup": run})}
    shim = figures["cri_startup.10.docker.per_pod_ratio"]
    assert (shim.value, shim.baseline) == (2.0, 1.9) and abs((shim.ratio or 0) - 2.0 / 1.9) < 1e-9
    assert abs((figures["cri_startup.10.containerd.batch_ratio"].ratio or 0) - 1.1 / 2.0) < 1e-9
    versus = figures["cri_startup.10.containerd_vs_docker.per_pod"]
    assert (versus.value, versus.baseline, versus.ratio) == (1.0, 2.0, 0.5)
    assert "cri_startup.1.docker.batch_ratio" not in figures  # one pod: the batch is the pod
    assert "cri_startup.1.containerd.per_pod_ratio" in figures
    assert build_figures({"cri_startup": {"raw_docker": {}, "docker": {"1": pods(0.5, 0.5)}}})[0].ratio is None


def test_pod_startup_on_containerd_has_its_own_keys_targets_and_the_ratio_to_the_docker_run() -> None:
    containerd = {"pods": {"10": pods(1.0, 0.9)}, "raw_docker": {"10": pods(2.0, 1.8)},
                  "kubelet_memory_mb": {"pods_on_node": 30, "node": "n1", "kubelets": {"n1": {"rss_mb": 93.0}}}}
    docker_run = {"pods": {"10": pods(2.5, 1.8)}, "raw_docker": {"10": pods(2.0, 1.8)}}
    figures = {f.key: f for f in build_figures({"pod_startup": docker_run, "pod_startup_containerd": containerd})}
    mine = figures["pod_startup_containerd.10.per_pod_ratio"]
    assert (mine.value, mine.baseline, mine.ratio, mine.verdict) == (0.9, 1.8, 0.5, "met")
    assert figures["pod_startup_containerd.kubelet_rss"].verdict == "met"
    versus = figures["pod_startup_containerd.10.vs_docker.batch"]
    assert (versus.value, versus.baseline, versus.ratio) == (1.0, 2.5, 0.4)
    assert "pod_startup.10.per_pod_ratio" in figures  # the Docker run's own figures stay as they were
    alone = {f.key for f in build_figures({"pod_startup_containerd": containerd})}
    assert not any(".vs_docker." in k for k in alone)


def test_proxy_figures_judge_latency_at_1000_throughput_and_rss() -> None:
    entry = {"p50_s": 0.12, "p99_s": 0.4, "watch_p50_s": 0.005, "watch_p99_s": 0.02, "samples_s": [0.1] * 20,
             "full_sync_s": 2.0, "partial_sync_mean_s": 0.5, "rss_mb": 70.0, "rules": 40000}
    small = {**entry, "p99_s": 3.0}
    data = {"proxy": {"setup": {"min_sync_period_s": 0.1}, "sizes": {"10": small, "1000": entry},
                      "throughput": {"direct_mb_s": 1000.0, "cluster_ip_mb_s": 850.0, "ratio": 0.85}}}
    figures = {f.key: f for f in build_figures(data)}
    assert figures["proxy.1000.latency_p99"].verdict == "met"
    assert figures["proxy.1000.latency_p99"].ratio == 0.4 / 0.02
    assert figures["proxy.10.latency_p99"].verdict == "—"  # the target is set at 1,000 Services
    assert figures["proxy.throughput_ratio"].verdict == "NOT MET"
    assert figures["proxy.rss"].verdict == "met" and figures["proxy.1000.full_sync"].ratio == 4.0


def test_pod_volumes_judges_the_start_ratios_and_reports_propagation() -> None:
    data = {"pod_volumes": {"start_p50_s": {"bare": 1.0, "sa": 1.2, "all": 1.4}, "sa_ratio": 1.2, "all_ratio": 1.4,
                            "configmap_p50_s": 0.01, "label_p50_s": 0.008, "configmap_vs_label": 1.25}}
    figures = {f.key: f for f in build_figures(data)}
    assert figures["pod_volumes.sa_ratio"].verdict == "met" and figures["pod_volumes.sa_ratio"].baseline == 1.0
    assert figures["pod_volumes.all_ratio"].verdict == "NOT MET"  # 1.4x > 1.3x
    assert figures["pod_volumes.configmap_propagation"].value == 0.01
    assert figures["pod_volumes.configmap_propagation"].verdict == "—"  # no target: a figure with its baseline


def test_storage_figures_judge_the_volume_ratio_and_the_claim_to_running_p50() -> None:
    data = {"storage": {"volumes": {"plain_s": {"p50": 0.8}, "volumes_s": {"p50": 1.2}, "ratio": 1.5,
                                    "ratio_min": 1.1, "reps": 15},
                        "claims": {"bound_s": {"p50": 0.9}, "running_s": {"p50": 1.8}, "reps": 15}}}
    figures = {f.key: f for f in build_figures(data)}
    assert round(figures["storage.volumes_ratio"].ratio or 0, 3) == 1.5  # 1.2 / 0.8, of the same run
    assert figures["storage.volumes_ratio"].verdict == "NOT MET"  # judged on the ratio: 1.5 > 1.3, not on 1.2 s
    assert "fastest of each: 1.1x" in figures["storage.volumes_ratio"].note
    assert figures["storage.claim_to_running"].verdict == "met"  # 1.8 <= 2 s
    assert figures["storage.claim_bound"].value == 0.9 and figures["storage.claim_bound"].verdict == "—"


def test_preemption_against_the_free_node_of_the_same_run() -> None:
    from bench.report import build_figures

    [figure] = [f for f in build_figures({"preemption": {"baseline_p50_ms": 20.0, "preemption_p50_ms": 1020.0}})
                if f.area == "preemption"]
    assert figure.key == "preemption.create_to_bound" and figure.value == 1020.0 and figure.baseline == 20.0
    assert figure.ratio == 51.0 and figure.verdict == "—"  # the issue sets no target


def test_exec_round_trip_spdy_over_websocket_of_the_same_run() -> None:
    data = {"spdy": {"p50_ms": 1.2, "p99_ms": 8.0}, "websocket": {"p50_ms": 1.0, "p99_ms": 4.0}}
    figures = {f.key: f for f in build_figures({"exec": data}) if f.area == "exec"}
    assert (figures["exec.round_trip_p50"].value, figures["exec.round_trip_p50"].baseline) == (1.2, 1.0)
    assert figures["exec.round_trip_p50"].ratio == 1.2 and figures["exec.round_trip_p99"].ratio == 2.0
    assert figures["exec.round_trip_p99"].verdict == "—"  # the issue sets no target
