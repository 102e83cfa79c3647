"""The density benchmark's pure parts: the apiserver histogram's quantiles between two scrapes, the best window
rate, the report's figures and plot series; and the hollow node's address book."""

from __future__ import annotations

import math

import pytest

from bench.density_bench import api_latency, best_window_rate, histogram_quantile
from bench.hollow_nodes import HollowNode
from bench.report import build_figures, plot_points
from machinery.client import ApiClient
from machinery.kubeconfig import ClientConfig

LABELS = 'verb="{verb}",dry_run="",group="",version="v1",resource="{resource}",subresource="{sub}",' \
         'scope="namespace",component="apiserver"'


def scrape(rows: dict[tuple[str, str, str], list[int]]) -> str:
    """A /metrics text with apiserver_request_duration_seconds buckets le=0.1, 1, +Inf (cumulative counts)."""
    lines = ["# HELP apiserver_request_duration_seconds x", "# TYPE apiserver_request_duration_seconds histogram"]
    for (verb, resource, sub), counts in rows.items():
        labels = LABELS.format(verb=verb, resource=resource, sub=sub)
        for le, count in zip(("0.1", "1.0", "+Inf"), counts, strict=True):
            lines.append(f'apiserver_request_duration_seconds_bucket{{{labels},le="{le}"}} {count}')
        lines.append(f"apiserver_request_duration_seconds_count{{{labels}}} {counts[-1]}")
        lines.append(f"apiserver_request_duration_seconds_sum{{{labels}}} 1.0")
    return "\n".join(lines) + "\n"


def test_histogram_quantile_interpolates_within_the_bucket_as_prometheus() -> None:
    buckets = {0.1: 50.0, 1.0: 100.0, math.inf: 100.0}
    assert histogram_quantile(0.5, buckets) == pytest.approx(0.1)
    assert histogram_quantile(0.99, buckets) == pytest.approx(0.1 + 0.9 * 49 / 50)
    # the rank in +Inf: the highest finite bound
    assert histogram_quantile(0.99, {0.1: 10.0, 1.0: 10.0, math.inf: 20.0}) == 1.0
    assert histogram_quantile(0.99, {0.1: 0.0, math.inf: 0.0}) is None


def test_api_latency_is_the_difference_between_two_scrapes() -> None:
    before = scrape({("POST", "pods", ""): [100, 100, 100], ("GET", "pods", ""): [5, 5, 5]})
    after = scrape({("POST", "pods", ""): [100, 200, 200], ("GET", "pods", ""): [5, 5, 5],
                    ("PATCH", "pods", "status"): [10, 10, 10]})
    rows = {(r["verb"], r["resource"], r["subresource"]): r for r in api_latency(before, after)}
    assert set(rows) == {("POST", "pods", ""), ("PATCH", "pods", "status")}  # GET: no call in between
    post = rows[("POST", "pods", "")]
    assert post["count"] == 100 and post["mutating"]
    assert post["p99_s"] == pytest.approx(0.1 + 0.9 * 0.99)  # the 100 new calls all fell in (0.1, 1]


def test_best_window_rate() -> None:
    assert best_window_rate([]) is None
    assert best_window_rate([0.0, 0.5, 1.0, 2.0]) == pytest.approx(2.0)  # all within one window: over their span
    stamps = [i * 0.1 for i in range(100)] + [20.0 + i for i in range(10)]  # 100 in 10 s, then 1/s
    assert best_window_rate(stamps, window=5.0) == pytest.approx(51 / 5)


def size(nodes: int, startup_p99: float, binding_p99: float, apiserver_rss: float) -> dict[str, object]:
    return {"nodes": nodes, "pods": nodes * 30, "running": nodes * 30, "timed_out": False, "wall_s": 10.0,
            "startup_s": {"p50": startup_p99 / 2, "p99": startup_p99},
            "api": [{"verb": "POST", "resource": "pods", "subresource": "binding", "count": 100, "mutating": True,
                     "p50_s": 0.01, "p99_s": binding_p99},
                    {"verb": "PUT", "resource": "leases", "subresource": "", "count": 5, "mutating": True,
                     "p50_s": 0.01, "p99_s": 9.0},  # too few calls to count
                    {"verb": "LIST", "resource": "pods", "subresource": "", "count": 20, "mutating": False,
                     "p50_s": 0.01, "p99_s": 0.3}],
            "scheduler": {"pods_per_s": 90.0, "best_5s_window_pods_per_s": 100.0, "note": "bounded"},
            "cpu_s": {"apiserver": 3.0, "others on the machine": 1.0},
            "cpu_ms_per_pod": {"apiserver": 3.0 / (nodes * 30) * 1000},
            "steady_cores": {"apiserver": 0.1},
            "memory_mb": {"apiserver": {"VmRSS": apiserver_rss, "VmHWM": apiserver_rss}},
            "etcd": {"etcd_mvcc_db_total_size_in_bytes": 10.0}}


def test_density_figures_are_judged_at_1000_nodes_only() -> None:
    figures = build_figures({"density": {"sizes": [size(100, 2.0, 0.5, 200.0), size(1000, 7.0, 0.8, 350.0)]}})
    by = {(f.key, f.label.split(":")[0]): f for f in figures if f.area == "density"}
    small = by[("density.startup_p99", "100 nodes / 3,000 pods")]
    assert (small.value, small.verdict) == (2.0, "n/a (smaller size)")
    full = by[("density.startup_p99", "1,000 nodes / 30,000 pods")]
    assert (full.value, full.verdict) == (7.0, "NOT MET")
    mutating = by[("density.mutating_p99", "1,000 nodes / 30,000 pods")]
    assert mutating.value == 0.8 and mutating.verdict == "met" and "POST pods/binding" in mutating.note
    assert by[("density.rss.apiserver", "1,000 nodes / 30,000 pods")].verdict == "met"


def test_density_plot_series() -> None:
    points = plot_points({"density": {"sizes": [size(1000, 7.0, 0.8, 350.0), size(100, 2.0, 0.5, 200.0)]}})
    series = points["density"]
    assert [p["nodes"] for p in series] == [100, 1000]
    assert series[1]["startup_p99"] == 7.0 and series[1]["mutating_p99"] == 0.8 and series[1]["read_p99"] == 0.3
    assert series[0]["rss_mb"] == {"apiserver": 200.0}
    assert series[0]["cpu_ms_per_pod"]["apiserver"] == pytest.approx(1.0)


def test_hollow_node_addresses_come_from_its_pod_cidr_and_are_reused() -> None:
    node = HollowNode(ApiClient(ClientConfig(server="http://127.0.0.1:1")), "n", "100.96.0.1", 4000, 2**30, {},
                      lease_duration=40, update_frequency=10, report_frequency=60)
    assert node.address("a") is None  # no podCIDR yet
    node.set_pod_cidr("100.64.3.0/30")  # .0 network, .1 the bridge, .2 the one pod address, .3 broadcast
    assert node.status.network_ready and node.status.facts.pod_cidr == "100.64.3.0/30"
    assert node.address("a") == "100.64.3.2"
    assert node.address("a") == "100.64.3.2"  # the same pod, the same address
    assert node.address("b") is None  # full
    node.release("a")
    assert node.address("b") == "100.64.3.2"
