"""Every benchmark of the project in one command: one table and one JSON of all figures, with their
targets, verdicts and ratios against the baseline each was measured with, and PNG plots of how pod
startup time and scheduler throughput grow with the number of pods.

    python -m bench.report [--quick] [--only NAME,...] [--from-json] [--timeout S]

Each benchmark runs as its own subprocess, one after the other (they would disturb each other's
figures on this 2-core machine), with its own flags (BENCHMARKS below); its output goes to
_output/bench/logs/NAME.log and its results to its JSON in _output/bench/. The report is rebuilt from
those JSON files: the markdown table goes to stdout and _output/bench/report.md, everything to
_output/bench/report.json, the plots to _output/bench/*.png. See bench/README.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from bench.apiserver_bench import verdict

REPO = Path(__file__).resolve().parent.parent
OUTPUT = REPO / "_output" / "bench"
JSONDict = dict[str, Any]


# -- the benchmarks and their flags ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Benchmark:
    name: str
    module: str
    json_name: str
    args: tuple[str, ...] = ()  # full run
    quick_args: tuple[str, ...] = ("--quick",)  # smoke run
    what: str = ""


BENCHMARKS: tuple[Benchmark, ...] = (
    Benchmark("apiserver", "bench.apiserver_bench", "apiserver.json",
              what="raw etcd vs apiserver creates/gets/lists, paced latency, watch delivery, RSS (issue 2)"),
    Benchmark("auth", "bench.auth_bench", "auth.json",
              what="creates with the full request chain (PodSecurity enforce=baseline incl.) on vs off (issues 6, 10)"),
    Benchmark("podsecurity", "bench.podsecurity_bench", "podsecurity.json",
              what="creates with PodSecurity off, on (privileged namespace) and enforcing restricted (issue 10)"),
    Benchmark("secrets", "bench.secrets_bench", "secrets.json",
              what="Secret creates with encryption at rest (aescbc) on vs off, same run (issue 12)"),
    Benchmark("metrics", "bench.metrics_bench", "metrics.json",
              what="ConfigMap creates with the apiserver's request metrics on vs off, same run (issue 15)"),
    Benchmark("tracing", "bench.tracing_bench", "tracing.json", quick_args=("--quick", "--pods", "5"),
              what="ConfigMap creates and pod start-up with OpenTelemetry tracing on vs off, same run (issue 15)"),
    # (a) of the control-plane bench is the scheduler bench at 100x1000, which the sweep below runs
    Benchmark("control_plane", "bench.control_plane_bench", "control_plane.json", ("--skip-scheduler",),
              ("--skip-scheduler", "--nodes", "10", "--replicas", "100", "--verb-requests", "200"),
              what="1,000-replica Deployment to all bound, controller-manager/scheduler RSS (issue 3)"),
    Benchmark("scheduler", "bench.scheduler_bench", "scheduler.json",
              ("--config", "100x10", "--config", "100x100", "--config", "100x1000", "--repeat", "3"),
              what="pods bound per second by the scheduler, 10/100/1,000 pending pods on 100 Node objects (issue 3)"),
    Benchmark("pod_startup", "bench.pod_startup_bench", "pod_startup.json",
              ("--counts", "1,10,30,100", "--reps", "5,3,2,1"), ("--quick",),
              what="create → Running on two real kubelets vs raw docker run; Deployment; kubelet RSS (issue 4)"),
    Benchmark("pod_startup_dns", "bench.pod_startup_bench", "pod_startup_dns.json",
              ("--cluster-dns", "10.96.0.10", "--pods-only", "--counts", "1,10,30", "--reps", "5,3,2"),
              ("--cluster-dns", "10.96.0.10", "--pods-only", "--quick"),
              what="create → Running on two real kubelets run with --cluster-dns as local-up runs them vs raw docker "
                   "run (issues 16 and 19)"),
    Benchmark("pod_startup_containerd", "bench.pod_startup_bench", "pod_startup_containerd.json",
              ("--runtime", "containerd", "--counts", "1,10,30", "--reps", "5,3,2"),
              ("--runtime", "containerd", "--quick"),
              what="the same on two kubelets whose nodes run a containerd of their own (containerd's CRI plugin) "
                   "vs raw docker run; kubelet RSS with 30 pods (issue 16)"),
    Benchmark("cri_startup", "bench.cri_startup_bench", "cri_startup.json",
              what="pod start-up through CRI (RunPodSandbox → Create → Start) on the Docker shim and on containerd "
                   "vs raw docker run, 1/10/30 pods (issue 16)"),
    Benchmark("pod_startup_hollow", "bench.pod_startup_bench", "pod_startup_hollow.json",
              ("--hollow", "10"), ("--hollow", "10", "--quick"),
              what="create → Running for 10/100/1,000 pods on 10 hollow kubelets (bench/hollow_node.py)"),
    Benchmark("watch_memory", "bench.watch_memory_bench", "watch_memory.json",
              what="apiserver RSS per concurrent HTTPS watch at 200 and 1,000, and per idle connection; the same "
                   "watches multiplexed on HTTP/2 (issue 10)"),
    Benchmark("dos", "bench.dos_bench", "dos.json",
              what="64 clients' GET p99 under a 100 MB header + 100 slow-header attack; leases kept (issue 10)"),
    Benchmark("proxy", "bench.proxy_bench", "proxy.json", ("--sizes", "10,100,1000"), ("--quick",),
              what="kube-proxy: Service/endpoint change → first connection through the ClusterIP at 10/100/1,000 "
                   "Services vs the watch; one full sync; ClusterIP ÷ direct throughput; proxy RSS (issue 11)"),
    Benchmark("etcd_failover", "bench.etcd_failover_bench", "etcd_failover.json", ("--rounds", "3"), ("--quick",),
              what="write stall when the etcd leader the apiserver talks to is killed, retries on vs off (issue 10)"),
    Benchmark("dns", "bench.dns_bench", "dns.json",
              what="cluster DNS: queries/s and p99 for a Service name vs a static dnslib server, Service create → "
                   "resolvable, RSS with 1,000 Services (issue 11)"),
    Benchmark("daemonset", "bench.daemonset_bench", "daemonset.json",
              what="DaemonSet create → available on 100 hollow nodes, rolling update at maxUnavailable 10%, "
                   "controller-manager RSS (issue 13)"),
    Benchmark("job", "bench.job_bench", "job.json",
              what="Job of 100 completions at parallelism 10 create → Complete ÷ the pods' own run time spread over "
                   "10, two real kubelets on Docker (issue 13)"),
    Benchmark("statefulset", "bench.statefulset_bench", "statefulset.json",
              what="StatefulSet of 10 to all Ready (OrderedReady and Parallel) vs a Deployment of 10, two real "
                   "kubelets on Docker (issue 13)"),
    Benchmark("controller_manager", "bench.controller_manager_bench", "controller_manager.json",
              what="controller-manager peak RSS with every controller on vs deployment+replicaset alone, same "
                   "workload (issue 13)"),
    Benchmark("pod_volumes", "bench.pod_volumes_bench", "pod_volumes.json",
              what="pod start with the service-account volume, and with configMap/secret/downwardAPI/projected "
                   "volumes, vs none; ConfigMap update → mounted file vs label → downwardAPI file (issue 12)"),
    Benchmark("storage", "bench.storage_bench", "storage.json",
              what="pod start with 3 configMap/secret volumes and a PVC vs none, claim → bound → pod Running "
                   "through the local-path provisioner (issue 12)"),
    Benchmark("hpa", "bench.hpa_bench", "hpa.json",
              what="HPA reaction from CPU load in a real pod to the new replicas Running (metrics every 10 s, sync "
                   "15 s) vs the metrics delay plus pod start-up; metrics-server RSS (issue 13)"),
    Benchmark("preemption", "bench.preemption_bench", "preemption.json",
              what="high-priority pod create → bound by preempting a low-priority one vs the same pod on a free "
                   "node, same run (issue 18)"),
    Benchmark("streaming", "bench.streaming_bench", "streaming.json",
              what="kubectl port-forward throughput ÷ straight to the pod IP (same run), exec 1-byte echo "
                   "round trip p50/p99 vs a TCP echo to the pod (issue 18)"),
    Benchmark("crd", "bench.crd_bench", "crd.json",
              what="custom-object creates/s ÷ ConfigMap and ÷ Pod creates/s, CRD create → served, kubectl "
                   "cold-cache discovery with aggregated discovery ÷ without (issue 14)"),
    Benchmark("guestbook", "bench.guestbook_bench", "guestbook.json",
              what="the guestbook on local-up: apply -k → all Ready p50 of 3, NodePort req/s and p99 with 3 "
                   "frontends ÷ one frontend pod IP, success rate during a rollout restart (issue 17)"),
    Benchmark("exec", "bench.exec_bench", "exec.json",
              what="one-byte `kubectl exec -i … cat` round trip p50/p99, kubectl 1.27 (SPDY, bridged to the "
                   "kubelet's websocket) ÷ 1.33 (websocket), same run (issue 18)"),
    Benchmark("ingress", "bench.ingress_bench", "ingress.json",
              what="requests/s through an Ingress (the host's nginx, python -m ingress_nginx) ÷ straight to the pod, "
                   "same run; EndpointSlice change → routed through nginx (issue 18)"),
    Benchmark("resource_proxy", "bench.resource_proxy_bench", "resource_proxy.json",
              what="pods/proxy: apiserver CPU per GET of a 110 KiB page of 2,000 links as text/html (links rewritten) "
                   "÷ as text/plain (streamed), websocket echo throughput through the splice ÷ straight (issue 18)"),
    Benchmark("road", "bench.road_bench", "road.json",
              what="road latency: a span ends in a component → its step in `mkubectl road --follow`, p99; baseline "
                   "a watch straight on the road server, same samples (issue 15)"),
    Benchmark("informer_memory", "bench.informer_memory_bench", "informer_memory.json",
              what="KB per Pod in one informer cache (tracemalloc) and CPU per watch event: as decoded vs "
                   "managedFields stripped, shared fields sets, interned strings, shared sub-objects, unique values "
                   "left alone, same run (issue 19)"),
    Benchmark("density", "bench.density_bench", "density.json", ("--sizes", "20,60,100,200,300,500,1000"),
              ("--quick",),
              what="density, kubemark-style: 20 to 1,000 hollow nodes (bench/hollow_nodes.py; a fifth and five times "
                   "of 100, 300 and 1,000 where it fits), 30 pods per node "
                   "through Deployments of 100 at 100 pods/s: pod start-up p50/p99, API p99 per verb and "
                   "resource, scheduler throughput, CPU and RSS per component, etcd size (issue 19)"),
)
BY_NAME = {b.name: b for b in BENCHMARKS}


# -- targets, from the issues: one declarative table ----------------------------------------------------------


@dataclass(frozen=True)
class Target:
    issue: int
    higher_is_better: bool
    value: float
    unit: str
    text: str  # as the issue says it


TARGETS: dict[str, Target] = {
    "apiserver.creates": Target(2, True, 1000, "/s", "≥ 1,000 pod creates/s"),
    # issue 2 asked ≥ 20% of the raw put rate and ≤ 150 MB; issue 19 asks ≥ 40% and ≤ 120 MB
    "apiserver.create_ratio": Target(19, True, 0.40, "ratio", "≥ 40% of the raw etcd put rate"),
    "apiserver.paced_p99": Target(2, False, 50, "ms", "p99 create ≤ 50 ms at 200 creates/s"),
    "apiserver.watch_p99": Target(2, False, 100, "ms", "100 watchers get a write within p99 ≤ 100 ms"),
    "apiserver.rss_held": Target(19, False, 120, "MB", "apiserver RSS ≤ 120 MB holding 10,000 pods"),
    "scheduler.100x1000.window": Target(3, True, 500, "pods/s", "≥ 500 pods/s bound, 100 nodes, 1,000 pods"),
    "control_plane.deployment": Target(3, False, 10, "s", "1,000-replica Deployment apply → all bound ≤ 10 s"),
    "control_plane.rss.controller-manager": Target(3, False, 100, "MB", "controller-manager RSS ≤ 100 MB"),
    "control_plane.rss.scheduler": Target(3, False, 100, "MB", "scheduler RSS ≤ 100 MB"),
    "pod_startup.deployment": Target(4, False, 1.0, "s", "3-replica Deployment apply → all Running p50 ≤ 1.0 s"),
    # issue 4 asked ≤ 1.5x with the kubelet on Docker directly; through CRI and the Docker shim issue 16 asks ≤ 1.35x,
    # and issue 19 ≤ 1.2x at 10 and 30 pods; the same with --cluster-dns set, as local-up runs the kubelets
    **{f"{run}.{count}.{kind}_ratio": Target(16, False, 1.35, "x", "startup via CRI (Docker shim) ≤ 1.35x raw Docker")
       for run in ("pod_startup", "pod_startup_dns") for count in (1,) for kind in ("per_pod", "batch")},
    **{f"{run}.{count}.{kind}_ratio": Target(19, False, 1.2, "x", "startup via CRI (Docker shim) ≤ 1.2x raw Docker at "
                                                                  "10 and 30 pods")
       for run in ("pod_startup", "pod_startup_dns") for count in (10, 30) for kind in ("per_pod", "batch")},
    "pod_startup.kubelet_rss": Target(4, False, 100, "MB", "kubelet RSS ≤ 100 MB with 30 pods"),
    **{f"pod_startup_containerd.{count}.{kind}_ratio": Target(16, False, 1.35, "x",
                                                              "startup via CRI ≤ 1.35x raw Docker")
       for count in (1, 10, 30) for kind in ("per_pod", "batch")},
    "pod_startup_containerd.kubelet_rss": Target(16, False, 100, "MB",
                                                 "kubelet RSS ≤ 100 MB with 30 pods (containerd)"),
    "compose.bring_up": Target(5, False, 10, "s", "compose bring-up, images cached, ≤ 10 s to Ready nodes"),
    "auth.throughput_cost": Target(10, False, 10, "%", "the chain (PodSecurity enforcing baseline incl.) costs ≤ 10% "
                                                       "of throughput"),
    "secrets.create_ratio": Target(12, True, 0.8, "ratio", "Secret creates/s with encryption on ÷ off ≥ 0.8"),
    "road.latency_p99": Target(15, False, 0.5, "s", "a step happens → it appears in mkubectl road --follow: "
                                                   "p99 ≤ 500 ms"),
    "metrics.create_ratio": Target(15, True, 0.95, "ratio", "creates/s with tracing and metrics on ÷ off: cost ≤ 5%"),
    "tracing.create_ratio_default": Target(15, True, 0.95, "ratio", "creates/s with tracing on (default sampling) "
                                                                    "÷ off: cost ≤ 5%"),
    "tracing.create_ratio": Target(15, True, 0.95, "ratio", "creates/s with tracing on (every request sampled) ÷ "
                                                            "off: cost ≤ 5%"),
    "tracing.startup_ratio": Target(15, False, 1.05, "x", "pod start-up p50 with tracing on ÷ off: cost ≤ 5%"),
    "storage.volumes_ratio": Target(12, False, 1.3, "x", "pod start with 3 configMap/secret volumes and a PVC "
                                                        "≤ 1.3x the same pod without volumes"),
    "storage.claim_to_running": Target(12, False, 2.0, "s", "claim created → bound and pod Running p50 ≤ 2 s "
                                                           "on a warm node"),
    "watch_memory.kb_per_watch": Target(10, False, 20, "KB", "RSS per watch at 1,000 concurrent watches ≤ 20 KB"),
    "watch_memory.h2_kb_per_watch": Target(10, False, 20, "KB", "RSS per watch at 1,000 concurrent watches ≤ 20 KB"),
    "dos.p99": Target(10, False, 2.0, "x", "GET p99 under the attack ≤ 2x without it"),
    "dos.leases_lost": Target(10, False, 0, "components", "no component loses its lease"),
    "etcd_failover.stall": Target(10, False, 1.0, "s", "write stall when the apiserver's etcd leader is killed ≤ 1 s"),
    "dns.p99": Target(11, False, 5, "ms", "DNS p99 for a Service name ≤ 5 ms"),
    "dns.p99_loaded": Target(11, False, 5, "ms", "DNS p99 for a Service name ≤ 5 ms"),
    "dns.create_to_resolvable": Target(11, False, 1000, "ms", "Service create → resolvable p99 ≤ 1 s"),
    "dns.rss": Target(11, False, 100, "MB", "DNS RSS with 1,000 Services ≤ 100 MB"),
    "proxy.1000.latency_p99": Target(11, False, 1.0, "s", "network programming p99 ≤ 1 s at 1,000 Services"),
    "proxy.throughput_ratio": Target(11, True, 0.9, "ratio", "throughput through a ClusterIP ≥ 0.9x direct"),
    "proxy.rss": Target(11, False, 100, "MB", "kube-proxy RSS ≤ 100 MB with 1,000 Services"),
    "streaming.portforward_ratio": Target(18, True, 0.5, "ratio", "port-forward throughput ≥ 0.5x straight to "
                                                                  "the pod IP"),
    "controller_manager.rss_all": Target(13, False, 120, "MB", "controller-manager RSS with every controller on "
                                                                "≤ 120 MB"),
    # issue 12 bounds a pod with volumes at 1.3x one without (its own figure counts a PVC: the storage benchmark's)
    "pod_volumes.sa_ratio": Target(12, False, 1.3, "x", "pod start with the kube-api-access volume ≤ 1.3x without"),
    "pod_volumes.all_ratio": Target(12, False, 1.3, "x", "pod start with configMap/secret/downwardAPI/projected "
                                                         "volumes ≤ 1.3x without"),
    "hpa.reaction": Target(13, False, 15, "s", "HPA reaction load → new replicas Running ≤ 15 s (default sync)"),
    "hpa.decision": Target(13, False, 15, "s", "the HPA's share (metrics show the load → scale written) ≤ one "
                                                "15 s sync period"),
    "crd.cr_vs_pod": Target(14, True, 0.8, "x", "custom-object creates/s ÷ Pod creates/s ≥ 0.8"),
    "guestbook.rollout_success": Target(17, True, 100, "%", "request success rate during the frontend's rolling "
                                                            "update = 100%"),
    # issue 19: upstream's SLOs and thresholds, at 1,000 nodes / 30,000 pods (smaller sizes: "n/a")
    "density.startup_p99": Target(19, False, 5.0, "s", "pod start-up p99 ≤ 5 s at 1,000 nodes / 30,000 pods"),
    "density.mutating_p99": Target(19, False, 1.0, "s", "mutating API call p99 ≤ 1 s (every verb and resource) "
                                                        "at 1,000 nodes"),
    "density.scheduler": Target(19, True, 1000, "pods/s", "scheduler ≥ 1,000 pods/s at 1,000 nodes"),
    "density.rss.apiserver": Target(19, False, 400, "MB", "apiserver RSS ≤ 400 MB at 30,000 pods"),
    "density.rss.controller-manager": Target(19, False, 200, "MB", "controller-manager RSS ≤ 200 MB at 30,000 pods"),
    "density.rss.scheduler": Target(19, False, 200, "MB", "scheduler RSS ≤ 200 MB at 30,000 pods"),
}


# -- figures ---------------------------------------------------------------------------------------------------


@dataclass
class Figure:
    key: str  # TARGETS key when it has a target
    area: str
    label: str
    value: float | None
    unit: str
    baseline_label: str = ""
    baseline: float | None = None
    ratio: float | None = None  # value / baseline
    note: str = ""
    full_size: bool = True  # measured at the size the target is set for
    target: JSONDict | None = None
    verdict: str = "—"

    def judge(self) -> Figure:
        target = TARGETS.get(self.key)
        if target is not None:
            self.target = asdict(target)
            if self.value is None and not self.full_size:
                self.verdict = "not measured"
            elif self.full_size:  # a target in "x" is on the ratio to the baseline, not on the value itself
                judged = self.ratio if target.unit == "x" else self.value
                self.verdict = verdict(judged, target.value, target.higher_is_better)
            else:
                self.verdict = "n/a (smaller size)"
        return self


def _get(d: Any, *path: str | int) -> Any:
    for part in path:
        if isinstance(d, dict):
            d = d.get(part)  # type: ignore[call-overload]
        elif isinstance(d, list) and isinstance(part, int) and -len(d) <= part < len(d):
            d = d[part]
        else:
            return None
    return d


def _ratio(value: float | None, baseline: float | None) -> float | None:
    return value / baseline if value is not None and baseline else None


def apiserver_figures(d: JSONDict) -> list[Figure]:
    out = []
    held = _get(d, "sizes", "pods_held")
    for key, f in (d.get("figures") or {}).items():
        baseline = f.get("baseline")
        out.append(Figure(
            f"apiserver.{key}", "apiserver", f["label"].strip(), f.get("value"), f.get("unit", ""),
            "raw etcd (EtcdStorage, same run)" if baseline is not None else "", baseline, f.get("vs_raw_etcd"),
            f.get("note", ""), full_size=key != "rss_held" or held == 10_000))
    return out


def auth_figures(d: JSONDict) -> list[Figure]:
    out = []
    for label, s in (d.get("summary") or {}).items():
        out.append(Figure(f"auth.{label}", "auth", f"{label}, full chain", s.get("on"), _unit_of(label),
                          "chain off (same run)", s.get("off"), _ratio(s.get("on"), s.get("off")),
                          f"{s.get('change_percent'):+.1f}%" if s.get("change_percent") is not None else ""))
    cost = d.get("throughput_cost_percent")
    out.append(Figure("auth.throughput_cost", "auth", "throughput cost of the chain", cost, "%",
                      note=f"CPU capacity cost {d.get('cpu_capacity_cost_percent')}%; "
                           f"median of {len(d.get('rounds') or [])} off/on rounds; negative = faster with the chain"))
    return out


def watch_memory_figures(d: JSONDict) -> list[Figure]:
    steps = d.get("steps") or []
    if not steps:
        return []
    base, top, idle = d.get("baseline_rss_kb"), steps[-1], d.get("idle") or {}
    out = [Figure("watch_memory.kb_per_watch", "watch memory",
                  f"apiserver RSS per watch, {top['watches']:,} concurrent HTTPS watches", d.get("kb_per_watch"), "KB",
                  note=f"over the same apiserver with no watch (same run): RSS {(base or 0) / 1024:.1f} → "
                       f"{top['rss_kb'] / 1024:.1f} MB; each watch on its own TLS connection (HTTP/1.1)",
                  full_size=top["watches"] == 1000)]
    if len(steps) > 1:
        out.append(Figure("watch_memory.slope", "watch memory",
                          f"slope {steps[0]['watches']:,} → {top['watches']:,} watches", d.get("slope_kb_per_watch"),
                          "KB", note=f"{steps[0]['kb_per_watch']:.1f} KB per watch at {steps[0]['watches']:,}"))
    if idle:
        out.append(Figure("watch_memory.idle_connection", "watch memory",
                          "apiserver RSS per idle keep-alive HTTPS connection (one GET done)",
                          idle.get("kb_per_connection"), "KB",
                          note="a second, fresh apiserver: the floor each watch pays for its own connection"))
        out.append(Figure("watch_memory.own", "watch memory", "what a watch adds over its idle connection",
                          d.get("own_kb_per_watch"), "KB"))
    if d.get("openssl_kb_per_connection") is not None:
        out.append(Figure("watch_memory.openssl", "watch memory",
                          "OpenSSL's own memory per server-side TLS connection (client certificate, handshake done)",
                          d.get("openssl_kb_per_connection"), "KB",
                          note="in the bench's process, glibc mallinfo2 over 300 connections on memory BIOs: the part "
                               "of each connection's floor outside the apiserver's Python"))
    h2 = d.get("http2") or {}
    h2_steps = h2.get("steps") or []
    if h2_steps:
        h2_top, h2_base = h2_steps[-1], h2.get("baseline_rss_kb") or 0
        out.append(Figure("watch_memory.h2_kb_per_watch", "watch memory",
                          f"apiserver RSS per watch, {h2_top['watches']:,} concurrent watches on HTTP/2",
                          h2.get("kb_per_watch"), "KB", baseline_label="the same watches over HTTP/1.1",
                          baseline=d.get("kb_per_watch"),
                          ratio=(h2["kb_per_watch"] / d["kb_per_watch"]) if d.get("kb_per_watch") else None,
                          note=f"a third, fresh apiserver: RSS {h2_base / 1024:.1f} → "
                               f"{h2_top['rss_kb'] / 1024:.1f} MB; "
                               f"the watches multiplexed on {h2.get('connections')} TLS connections (h2 by ALPN, 250 "
                               f"streams each), as client-go multiplexes them",
                          full_size=h2_top["watches"] == 1000))
    return out


def podsecurity_figures(d: JSONDict) -> list[Figure]:
    out = []
    for label, s in (d.get("summary") or {}).items():
        for mode in ("privileged", "restricted"):
            out.append(Figure(f"podsecurity.{mode}.{label}", "podsecurity", f"{label}, {mode} namespace", s.get(mode),
                              _unit_of(label), "PodSecurity off (same run)", s.get("without"),
                              _ratio(s.get(mode), s.get("without"))))
    costs = d.get("throughput_cost_percent") or {}
    for mode in ("privileged", "restricted"):
        out.append(Figure(f"podsecurity.{mode}.throughput_cost", "podsecurity",
                          f"throughput cost of PodSecurity, {mode} namespace", costs.get(mode), "%"))
    return out


def secrets_figures(d: JSONDict) -> list[Figure]:
    out = []
    for label, s in (d.get("summary") or {}).items():
        out.append(Figure(f"secrets.aescbc.{label}", "secrets", f"{label}, Secrets encrypted (aescbc)",
                          s.get("aescbc"), _unit_of(label), "encryption off (same run)", s.get("off"),
                          _ratio(s.get("aescbc"), s.get("off"))))
    out.append(Figure("secrets.create_ratio", "secrets", "Secret creates/s, encryption on ÷ off",
                      d.get("create_ratio"), "ratio"))
    return out


def informer_memory_figures(d: JSONDict) -> list[Figure]:
    variants = d.get("variants") or {}
    base = variants.get(d.get("baseline") or "") or {}
    out = []
    for name, v in variants.items():
        if name == d.get("baseline"):
            continue
        out.append(Figure(f"informer_memory.{name}", "informer memory",
                          f"KB per Pod in one informer cache, {name}", v.get("kb_per_pod"), "KB",
                          f"{d.get('baseline')} (same run)", base.get("kb_per_pod"),
                          _ratio(v.get("kb_per_pod"), base.get("kb_per_pod")),
                          f"{d.get('pods'):,} density pods; CPU per watch event {v.get('us_per_event')} µs vs "
                          f"{base.get('us_per_event')} µs ({v.get('cpu_ratio')}x)"))
    return out


def metrics_figures(d: JSONDict) -> list[Figure]:
    out = []
    for label, s in (d.get("summary") or {}).items():
        out.append(Figure(f"metrics.on.{label}", "metrics", f"{label}, request metrics on", s.get("on"),
                          _unit_of(label), "request metrics off (same run)", s.get("off"),
                          _ratio(s.get("on"), s.get("off"))))
    out.append(Figure("metrics.create_ratio", "metrics", "ConfigMap creates/s, request metrics on ÷ off",
                      d.get("create_ratio"), "ratio"))
    return out


def tracing_figures(d: JSONDict) -> list[Figure]:
    out = []
    for label, s in ((d.get("creates") or {}).get("summary") or {}).items():
        for mode in ("on-default", "on-all"):
            out.append(Figure(f"tracing.{mode}.{label}", "tracing", f"{label}, tracing {mode}", s.get(mode),
                              _unit_of(label), "tracing off (same run)", s.get("off"),
                              _ratio(s.get(mode), s.get("off"))))
    out.append(Figure("tracing.create_ratio_default", "tracing",
                      "ConfigMap creates/s, tracing on (samplingRatePerMillion 0) ÷ off",
                      d.get("create_ratio_default"), "ratio"))
    out.append(Figure("tracing.create_ratio", "tracing",
                      "ConfigMap creates/s, tracing on (every request sampled) ÷ off", d.get("create_ratio"), "ratio"))
    startup = d.get("startup") or {}
    p50 = startup.get("p50_s") or {}
    out.append(Figure("tracing.startup_ratio", "tracing", "pod start-up (POST → Running) p50, tracing on (every span)",
                      p50.get("on"), "s", "tracing off (same run)", p50.get("off"), d.get("startup_ratio"),
                      note=f"{startup.get('rounds')} rounds of {startup.get('pods')} pods"))
    return out


def storage_figures(d: JSONDict) -> list[Figure]:
    volumes, claims = d.get("volumes") or {}, d.get("claims") or {}
    plain, with_volumes = _get(volumes, "plain_s", "p50"), _get(volumes, "volumes_s", "p50")
    return [
        Figure("storage.volumes_ratio", "storage", "pod create → Running p50, 3 configMap/secret volumes + a PVC",
               with_volumes, "s", "the same pod without volumes (same run)", plain, _ratio(with_volumes, plain),
               note=f"{volumes.get('reps')} pods of each, alternating, one warm node; fastest of each: "
                    f"{volumes.get('ratio_min')}x"),
        Figure("storage.claim_bound", "storage", "claim (local-path, WaitForFirstConsumer) created → Bound p50",
               _get(claims, "bound_s", "p50"), "s"),
        Figure("storage.claim_to_running", "storage", "claim created → its pod Running p50 (provisioned on the way)",
               _get(claims, "running_s", "p50"), "s", note=f"{claims.get('reps')} claims, one warm node"),
    ]


def _unit_of(label: str) -> str:
    return "/s" if "/s" in label.split(",")[0] else "ms" if " ms" in label else ""


def control_plane_figures(d: JSONDict) -> list[Figure]:
    out = []
    dep = d.get("deployment") or {}
    full = dep.get("replicas") == 1000 and dep.get("nodes") == 100
    if dep:
        out.append(Figure("control_plane.deployment", "control plane",
                          f"{dep.get('replicas'):,}-replica Deployment: create → all pods bound",
                          dep.get("create_to_all_bound_s"), "s",
                          note=f"{dep.get('nodes')} hollow Node objects; last pod created after "
                               f"{dep.get('create_to_last_pod_created_s')} s; events written after "
                               f"{dep.get('create_to_all_events_s')} s", full_size=full))
    for name, mem in (d.get("memory") or {}).items():
        out.append(Figure(f"control_plane.rss.{name}", "control plane", f"{name} peak RSS (VmHWM) at that size",
                          mem.get("VmHWM"), "MB", full_size=full))
    for verb, v in (d.get("apiserver_verbs") or {}).items():
        out.append(Figure(f"control_plane.verb.{verb}", "control plane", f"apiserver {verb}, 16 clients",
                          v.get("rate_per_s"), "/s",
                          note=f"apiserver {v.get('apiserver_cpu_ms')} CPU ms each, etcd {v.get('etcd_cpu_ms')}"))
    return out


def scheduler_figures(d: JSONDict) -> list[Figure]:
    out = []
    for c in d.get("configs") or []:
        m = c["median"]
        name = f"{c['nodes']}x{c['pods']}"
        rates = c.get("window_rates") or []
        spread = f"; runs {', '.join(f'{r:.0f}' for r in rates)}" if len(rates) > 1 else ""
        out.append(Figure(f"scheduler.{name}.window", "scheduler",
                          f"{c['pods']:,} pending pods on {c['nodes']} nodes: bound/s (binding window)",
                          m.get("pods_per_s_window"), "pods/s", "scheduling cycles alone, no API (same run)",
                          c.get("algorithm_pods_per_s"),
                          _ratio(m.get("pods_per_s_window"), c.get("algorithm_pods_per_s")),
                          f"median of {len(rates)}{spread}; from process start "
                          f"{m.get('pods_per_s_from_start') or 0:.0f}/s; scheduler RSS {m.get('rss_mb') or 0:.1f} MB"))
    return out


def pod_startup_figures(d: JSONDict, prefix: str = "pod_startup") -> list[Figure]:
    out = []
    group = "pod startup (real, --cluster-dns)" if prefix == "pod_startup_dns" else "pod startup (real)"
    for count, ours in sorted((d.get("pods") or {}).items(), key=lambda kv: int(kv[0])):
        raw = (d.get("raw_docker") or {}).get(count) or {}
        bare = (d.get("raw_docker_plain") or {}).get(count) or {}
        for kind, what in (("per_pod", "create → Running, p50 per pod"), ("batch", "all Running (batch), p50")):
            if kind == "batch" and count == "1":
                continue
            value, base = _get(ours, kind, "p50"), _get(raw, kind, "p50")
            no_net = _ratio(value, _get(bare, kind, "p50"))
            out.append(Figure(f"{prefix}.{count}.{kind}_ratio", group,
                              f"{count} pod{'' if count == '1' else 's'}: {what}",
                              value, "s", "raw docker pause+app, a pod's network and CPU weight (same run)", base,
                              _ratio(value, base), f"n={_get(ours, kind, 'n')}" +
                              (f"; {no_net:.2f}x plain docker run (issue 4's baseline)" if no_net is not None else "")))
    for key, label in (("api_apply", "Deployment 3 replicas: apply → all Running, p50"),
                       ("kubectl_apply", "the same with real kubectl apply -f, p50")):
        dep = (d.get("deployment") or {}).get(key) or {}
        out.append(Figure("pod_startup.deployment" if key == "api_apply" else "pod_startup.deployment_kubectl",
                          "pod startup (real)", label, dep.get("p50"), "s",
                          note=dep.get("skipped") or (f"n={dep['n']}, min {dep['min']} s, max {dep['max']} s"
                                                      if dep.get("n") else "")))
    mem = d.get("kubelet_memory_mb") or {}
    holder = _get(mem, "kubelets", mem.get("node", "")) or {}
    if mem:
        out.append(Figure("pod_startup.kubelet_rss", "pod startup (real)",
                          f"kubelet RSS with {mem.get('pods_on_node')} pods on its node", holder.get("rss_mb"), "MB",
                          note=f"peak {holder.get('hwm_mb')} MB", full_size=mem.get("pods_on_node") == 30))
    return out


def pod_startup_containerd_figures(d: JSONDict, docker_run: JSONDict | None) -> list[Figure]:
    """The real-kubelet figures on containerd nodes (keys pod_startup_containerd.*), and containerd ÷ Docker shim
    per count against pod_startup's run (two runs: the note says so)."""
    out = []
    for f in pod_startup_figures(d):
        if f.key.startswith("pod_startup.") and not f.key.startswith("pod_startup.deployment"):
            f.key = "pod_startup_containerd." + f.key.removeprefix("pod_startup.")
            f.area = "pod startup (real, containerd)"
            out.append(f)
    for count, ours in sorted((d.get("pods") or {}).items(), key=lambda kv: int(kv[0])):
        shim = _get(docker_run, "pods", count) if docker_run else None
        for kind in ("per_pod", "batch"):
            if kind == "batch" and count == "1":
                continue
            value, base = _get(ours, kind, "p50"), _get(shim, kind, "p50")
            if base is None:
                continue
            out.append(Figure(f"pod_startup_containerd.{count}.vs_docker.{kind}", "pod startup (real, containerd)",
                              f"{count} pod{'' if count == '1' else 's'}: containerd ÷ Docker shim, {kind} p50", value,
                              "s", "Docker shim nodes (pod_startup's run)", base, _ratio(value, base),
                              "across two runs: compare with each run's ratio to raw docker"))
    return out


def cri_startup_figures(d: JSONDict) -> list[Figure]:
    """Each CRI runtime ÷ raw docker run, and containerd ÷ the Docker shim (same run, same pods)."""
    out = []
    runtimes = {"docker": "Docker shim", "containerd": "containerd"}
    counts = sorted({int(c) for name in runtimes for c in (d.get(name) or {})})
    for count in map(str, counts):
        raw = (d.get("raw_docker") or {}).get(count) or {}
        for kind, what in (("per_pod", "sandbox+create+start, p50 per pod"), ("batch", "all started (batch), p50")):
            if kind == "batch" and count == "1":
                continue
            pods = f"{count} pod{'' if count == '1' else 's'}"
            for name, label in runtimes.items():
                ours = (d.get(name) or {}).get(count)
                if ours is None:
                    continue
                value, base = _get(ours, kind, "p50"), _get(raw, kind, "p50")
                out.append(Figure(f"cri_startup.{count}.{name}.{kind}_ratio", "pod startup via CRI (runtime alone)",
                                  f"{pods} on {label}: {what}", value, "s", "raw docker pause+app (same run)", base,
                                  _ratio(value, base), f"n={_get(ours, kind, 'n')}; no kubelet, no API"))
            c, dk = _get(d, "containerd", count, kind, "p50"), _get(d, "docker", count, kind, "p50")
            if c is not None and dk is not None:
                out.append(Figure(f"cri_startup.{count}.containerd_vs_docker.{kind}",
                                  "pod startup via CRI (runtime alone)", f"{pods}: containerd ÷ Docker shim, {what}",
                                  c, "s", "Docker shim (same run)", dk, _ratio(c, dk)))
    return out


def hollow_figures(d: JSONDict, real: JSONDict | None) -> list[Figure]:
    out = []
    nodes = _get(d, "nodes", "count")
    for count, ours in sorted((d.get("pods") or {}).items(), key=lambda kv: int(kv[0])):
        real_pods = _get(real, "pods", count) if real else None
        for kind, what in (("per_pod", "create → Running, p50 per pod"), ("batch", "all Running (batch), p50")):
            value, base = _get(ours, kind, "p50"), _get(real_pods, kind, "p50")
            out.append(Figure(f"hollow.{count}.{kind}", "pod startup (hollow)",
                              f"{int(count):,} pods on {nodes} hollow nodes: {what}", value, "s",
                              "real kubelets, same count (pod_startup's run)" if base is not None else "", base,
                              _ratio(value, base),
                              f"bound after {_get(ours, 'create_to_bound', 'p50')} s (p50)" if kind == "per_pod"
                              else ""))
    largest = str(max((int(c) for c in d.get("pods") or {}), default=0))
    held = [m["rss_mb"] for r in _get(d, "pods", largest, "runs") or []
            for m in (r.get("kubelet_memory_mb") or {}).values()]
    if held:
        out.append(Figure("hollow.kubelet_rss", "pod startup (hollow)",
                          f"hollow kubelet RSS, largest of {nodes}, holding {int(largest):,} pods over them",
                          max(held), "MB",
                          note="the kubelet without Docker and CNI: its own state, workers, informer cache"))
    return out


def dos_figures(d: JSONDict) -> list[Figure]:
    base, attacked = _get(d, "baseline", "latency_ms", "p99"), _get(d, "attacked", "latency_ms", "p99")
    big, slow = _get(d, "attack", "big_header") or {}, _get(d, "attack", "slow") or {}
    rss = d.get("apiserver_rss_mb") or {}
    lost = {name: reasons for name, reasons in (d.get("lost_leases") or {}).items() if reasons}
    return [
        Figure("dos.p99", "denial of service", f"{d.get('clients')} clients' GET p99 during the attack", attacked,
               "ms", "the same GETs without the attack (same run)", base, _ratio(attacked, base),
               f"100 MB header answered {big.get('answer')!r} after {big.get('sent_mb')} MB; "
               f"{slow.get('count')} slow-header connections, {slow.get('closed_by_server')} closed by the server; "
               f"{d.get('seconds')} s per phase; max {_get(d, 'attacked', 'latency_ms', 'max'):.0f} ms"),
        Figure("dos.leases_lost", "denial of service", "components losing their lease during the attack",
               d.get("components_losing_lease"), "components",
               note="; ".join(f"{n}: {', '.join(r)}" for n, r in lost.items()) or
                    "controller-manager and scheduler kept holder, transitions and renewals"),
        Figure("dos.rss_growth", "denial of service", "apiserver peak RSS growth during the attack",
               rss.get("growth"), "MB", note=f"{rss.get('before_attack')} MB before, peak {rss.get('peak')} MB"),
    ]


def etcd_failover_figures(d: JSONDict) -> list[Figure]:
    on, off = _get(d, "summary", "retry") or {}, _get(d, "summary", "no_retry") or {}
    rounds = len(_get(d, "rounds", "retry") or [])
    return [Figure("etcd_failover.stall", "etcd failover",
                   "write stall, the apiserver's etcd member (the leader) killed -9, 3 members",
                   on.get("stall_s"), "s", "retries off: --disable-etcd-retry (same run)", off.get("stall_s"),
                   _ratio(on.get("stall_s"), off.get("stall_s")),
                   f"median of {rounds}; new leader after {on.get('election_s')} s (etcd --election-timeout "
                   f"{_get(d, 'setup', 'election_timeout_ms')} ms), "
                   f"stall beyond it {on.get('after_election_s')} s; failed writes {on.get('failed')} "
                   f"(off: {off.get('failed')})")]


def dns_figures(d: JSONDict) -> list[Figure]:
    one, loaded = d.get("single_client") or {}, d.get("loaded") or {}
    services = _get(d, "sizes", "services")
    created = d.get("create_to_resolvable") or {}
    static_note = "baseline: dnslib's stock threaded server answering one fixed A (same run); UDP on loopback"
    out = []
    for key, run, who in (("dns.p99", one, "1 client"), ("dns.p99_loaded", loaded,
                                                          f"{_get(loaded, 'dns', 'clients')} clients")):
        out.append(Figure(key, "dns", f"A query for a Service name, {who}: p99", _get(run, "dns", "p99_ms"), "ms",
                          "static dnslib server", _get(run, "static_dnslib", "p99_ms"),
                          _ratio(_get(run, "dns", "p99_ms"), _get(run, "static_dnslib", "p99_ms")),
                          f"p50 {_get(run, 'dns', 'p50_ms')} ms; {static_note}"))
        out.append(Figure(f"{key}.qps", "dns", f"queries/s for a Service name, {who}", _get(run, "dns", "qps"), "/s",
                          "static dnslib server", _get(run, "static_dnslib", "qps"),
                          _ratio(_get(run, "dns", "qps"), _get(run, "static_dnslib", "qps"))))
    out.append(Figure("dns.create_to_resolvable", "dns", "Service create → first answer: p99",
                      created.get("p99_ms"), "ms", note=f"p50 {created.get('p50_ms')} ms over {created.get('samples')}"
                                                        " creates, polled every ms"))
    out.append(Figure("dns.rss", "dns", f"DNS RSS holding {services:,} Services (10 endpoints each)" if services else
                      "DNS RSS", d.get("rss_services_mb"), "MB", "the same process with no Service",
                      d.get("rss_empty_mb"), _ratio(d.get("rss_services_mb"), d.get("rss_empty_mb")),
                      f"filled in {d.get('fill_seconds')} s; p99 then {_get(d, 'with_services', 'dns', 'p99_ms')} ms",
                      full_size=services == 1000))
    return out


def proxy_figures(d: JSONDict) -> list[Figure]:
    out = []
    sizes = d.get("sizes") or {}
    for size, e in sorted(sizes.items(), key=lambda kv: int(kv[0])):
        n = int(size)
        samples = len(e.get("samples_s") or [])
        for q in ("p50", "p99"):
            out.append(Figure(f"proxy.{size}.latency_{q}", "kube-proxy",
                              f"network programming {q} (endpoint change → first connection), {n:,} Services",
                              e.get(f"{q}_s"), "s", "the change on an API watch (same samples)",
                              e.get(f"watch_{q}_s"), _ratio(e.get(f"{q}_s"), e.get(f"watch_{q}_s")),
                              f"{samples} samples, 10 hollow endpoints per Service, --min-sync-period "
                              f"{_get(d, 'setup', 'min_sync_period_s')} s"))
        out.append(Figure(f"proxy.{size}.full_sync", "kube-proxy", f"one full sync at {n:,} Services",
                          e.get("full_sync_s"), "s", "a partial sync (mean, same run)", e.get("partial_sync_mean_s"),
                          _ratio(e.get("full_sync_s"), e.get("partial_sync_mean_s")),
                          f"{e.get('rules')} iptables-save lines of its chains"))
    largest = max(sizes, key=int) if sizes else None
    if largest is not None:
        out.append(Figure("proxy.rss", "kube-proxy", f"kube-proxy RSS with {int(largest):,} Services",
                          sizes[largest].get("rss_mb"), "MB", full_size=int(largest) >= 1000))
    t = d.get("throughput") or {}
    direct, via = t.get("direct_mb_s"), t.get("cluster_ip_mb_s")
    out.append(Figure("proxy.throughput_ratio", "kube-proxy", "throughput through a ClusterIP ÷ direct to the pod IP",
                      t.get("ratio"), "ratio", note=(f"same run: direct {direct:.0f} MB/s, ClusterIP {via:.0f} MB/s; "
                                                     if direct and via else "")
                      + "median ratio of 9 back-to-back pairs of 200 MB downloads"))
    return out


def compose_figures() -> list[Figure]:
    return [Figure("compose.bring_up", "compose", "compose bring-up, images cached → Ready nodes", None, "s",
                   note="not run by bench.report: hack/compose-up.sh prints it ('nodes Ready Ns after "
                        "docker-compose up')", full_size=False)]


def daemonset_figures(d: JSONDict) -> list[Figure]:
    nodes = d.get("nodes")
    hollow = "Node objects; the bench writes their kubelets' status and delete confirmations, no container runs"
    return [
        Figure("daemonset.rollout", "daemonset", f"DaemonSet create → available on {nodes} hollow nodes",
               d.get("rollout_s"), "s", note=hollow),
        Figure("daemonset.rolling_update", "daemonset",
               f"rolling update of {nodes} daemon pods, maxUnavailable {d.get('max_unavailable')}",
               d.get("rolling_update_s"), "s", note=hollow),
        Figure("daemonset.rss", "daemonset", "controller-manager RSS, daemonset controller alone",
               d.get("controller_manager_rss_mb"), "MB"),
    ]


def job_figures(d: JSONDict) -> list[Figure]:
    n, p = d.get("completions"), d.get("parallelism")
    return [Figure("job.complete", "job", f"Job of {n} completions, parallelism {p}: create → Complete",
                   d.get("wall_s"), "s", f"the pods' own run time ÷ {p} (`sleep {d.get('pod_seconds')}` pods)",
                   d.get("baseline_s"), d.get("ratio"),
                   note=f"two real kubelets on Docker; {d.get('overhead_per_wave_s')} s added per wave of {p} pods",
                   full_size=(n, p) == (100, 10))]


def statefulset_figures(d: JSONDict) -> list[Figure]:
    replicas = d.get("replicas")
    real = f"two real kubelets on Docker, median of {d.get('reps')}; busybox pods Ready when their container runs"
    base = d.get("deployment_s")
    return [
        Figure("statefulset.ordered", "statefulset", f"StatefulSet of {replicas} (OrderedReady) create → all Ready",
               d.get("ordered_s"), "s", f"Deployment of {replicas}", base, d.get("ordered_ratio"),
               note=f"{real}; {d.get('ordered_per_pod_s')} s per pod in turn"),
        Figure("statefulset.parallel", "statefulset", f"StatefulSet of {replicas} (Parallel) create → all Ready",
               d.get("parallel_s"), "s", f"Deployment of {replicas}", base, d.get("parallel_ratio"), note=real),
    ]


def controller_manager_figures(d: JSONDict) -> list[Figure]:
    work, base, every = d.get("workload") or {}, d.get("baseline") or {}, d.get("all") or {}
    size = (f"{work.get('deployments')} Deployments x {work.get('replicas')} (+ a Service and a PDB each), a "
            f"DaemonSet, {work.get('jobs')} Jobs, 2 CronJobs, {work.get('nodes')} hollow nodes")
    return [Figure("controller_manager.rss_all", "controller-manager",
                   f"controller-manager peak RSS, every controller ({d.get('controllers')}) on", every.get("rss_mb"),
                   "MB", "deployment+replicaset alone, same workload", base.get("rss_mb"),
                   _ratio(every.get("rss_mb"), base.get("rss_mb")), note=size,
                   full_size=not d.get("quick"))]


def pod_volumes_figures(d: JSONDict) -> list[Figure]:
    p50 = d.get("start_p50_s") or {}
    bare = "pod without volumes (automount off), same run"
    return [
        Figure("pod_volumes.sa_ratio", "pod volumes", "pod create → Running p50, with the kube-api-access volume",
               p50.get("sa"), "s", bare, p50.get("bare"), d.get("sa_ratio")),
        Figure("pod_volumes.all_ratio", "pod volumes",
               "pod create → Running p50, kube-api-access + configMap, secret, downwardAPI, projected volumes",
               p50.get("all"), "s", bare, p50.get("bare"), d.get("all_ratio")),
        Figure("pod_volumes.configmap_propagation", "pod volumes", "ConfigMap update → mounted file changed p50",
               d.get("configmap_p50_s"), "s", "pod label update → downwardAPI file (same run)", d.get("label_p50_s"),
               d.get("configmap_vs_label"), "without the kubelet's watch: up to its 60 s periodic sync"),
    ]


def hpa_figures(d: JSONDict) -> list[Figure]:
    runs = len(d.get("runs") or [])
    starved = d.get("starved") or 0
    setting = (f"metrics every {d.get('resolution_s')} s, HPA sync {d.get('sync_period_s')} s, median of "
               f"{runs - starved}" + (f" ({starved} of {runs} starved of CPU, left out)" if starved else "")
               + (f", load avg {d['load_avg']:.0f}" if d.get("load_avg") is not None else ""))

    def worst(key: str, design: str = "") -> str:
        value = d.get(key)
        return (f"; worst {value:.1f} s" if isinstance(value, (int, float)) else "") + design

    by_design = (f" (upstream's periods alone: median {d['by_design_median_s']:.1f} s, worst "
                 f"{d['by_design_worst_s']:.0f} s)" if d.get("by_design_median_s") is not None else "")
    hops = ("metrics_wait_s", "metrics_scrape_s", "metrics_seen_s")
    if all(isinstance(d.get(k), (int, float)) for k in (*hops, "metrics_s")):
        by_design += (f"; metrics delay {d['metrics_s']:.1f} s: the scrape showing the load after "
                      f"{d['metrics_wait_s']:.1f} s, scraped in {d['metrics_scrape_s']:.2f} s, seen "
                      f"{d['metrics_seen_s']:.2f} s later (medians)")
    return [
        Figure("hpa.reaction", "hpa", "CPU load in a pod → the HPA's new replicas Running", d.get("reaction_s"), "s",
               "metrics delay + pod start-up", d.get("baseline_s"), _ratio(d.get("reaction_s"), d.get("baseline_s")),
               note=setting + worst("reaction_worst_s", by_design)),
        Figure("hpa.decision", "hpa", "metrics show the load → the HPA writes the scale", d.get("decision_s"), "s",
               note=setting + worst("decision_worst_s")),
        Figure("hpa.metrics_server_rss", "hpa", "metrics-server RSS, one node", d.get("metrics_server_rss_mb"), "MB",
               "an idle Python with the same imports", d.get("idle_python_rss_mb"),
               _ratio(d.get("metrics_server_rss_mb"), d.get("idle_python_rss_mb"))),
    ]


def preemption_figures(d: JSONDict) -> list[Figure]:
    base, value = d.get("baseline_p50_ms"), d.get("preemption_p50_ms")
    return [Figure("preemption.create_to_bound", "preemption",
                   "high-priority pod create → bound, by preempting a low-priority pod (p50)", value, "ms",
                   "the same pod on a free node (p50)", base, _ratio(value, base),
                   note="one hollow node; most of it is the scheduling queue's 1 s back-off before the second "
                        "attempt, as upstream's podInitialBackoffSeconds")]


def streaming_figures(d: JSONDict) -> list[Figure]:
    size = f"{d.get('mb')} MB x {d.get('rounds')} rounds each way"
    return [
        Figure("streaming.portforward_ratio", "streaming", "kubectl 1.33 port-forward throughput ÷ straight to the "
               "pod IP (down + up)", d.get("portforward_ratio"), "ratio", note=size),
        Figure("streaming.portforward_mb_s", "streaming", "kubectl port-forward throughput (down + up)",
               d.get("portforward_mb_per_s"), "MB/s", "straight to the pod IP (same run)", d.get("direct_mb_per_s"),
               _ratio(d.get("portforward_mb_per_s"), d.get("direct_mb_per_s")),
               note=f"per direction: {d.get('ratio_by_direction')}"),
        *[Figure(f"streaming.portforward_cpu_{direction}", "streaming", f"CPU per MB forwarded {direction} (kubectl, "
                 "apiserver, kubelet, shim together)", (d.get("cpu_ms_per_mb_total") or {}).get(direction), "ms/MB",
                 note=f"per process: {(d.get('cpu_ms_per_mb') or {}).get(direction)}") for direction in ("down", "up")],
        Figure("streaming.exec_echo_p50", "streaming", "exec 1-byte echo round trip (websocket v5), p50",
               d.get("exec_echo_p50_ms"), "ms", "TCP echo to the pod (p50, same run)", d.get("tcp_echo_p50_ms"),
               _ratio(d.get("exec_echo_p50_ms"), d.get("tcp_echo_p50_ms"))),
        Figure("streaming.exec_echo_p99", "streaming", "exec 1-byte echo round trip (websocket v5), p99",
               d.get("exec_echo_p99_ms"), "ms", "TCP echo to the pod (p99, same run)", d.get("tcp_echo_p99_ms"),
               _ratio(d.get("exec_echo_p99_ms"), d.get("tcp_echo_p99_ms"))),
    ]


def crd_figures(d: JSONDict) -> list[Figure]:
    s = d.get("summary") or {}
    rate = {k: (s.get(k) or {}).get("rate") for k in ("configmaps", "pods", "widgets")}
    return [
        Figure("crd.cr_vs_configmap", "crd", "custom-object creates/s (schema, default, enum, CEL rule)",
               rate["widgets"], "/s", "ConfigMap creates/s (same run)", rate["configmaps"],
               _ratio(rate["widgets"], rate["configmaps"])),
        Figure("crd.cr_vs_pod", "crd", "custom-object creates/s, against Pods", rate["widgets"], "/s",
               "Pod creates/s (same run)", rate["pods"], _ratio(rate["widgets"], rate["pods"])),
        Figure("crd.served_p50", "crd", "CRD create → Established and a custom object created, p50",
               d.get("served_p50_ms"), "ms", note=f"max {d.get('served_max_ms') or 0:.0f} ms"),
        Figure("crd.discovery_ratio", "crd", "kubectl 1.33 get, cold discovery cache, aggregated discovery, p50",
               (d.get("discovery_ms") or {}).get("aggregated"), "ms", "without (feature gate off, same run)",
               (d.get("discovery_ms") or {}).get("unaggregated"), d.get("discovery_ratio")),
    ]


def guestbook_figures(d: JSONDict) -> list[Figure]:
    node, pod, rollout = d.get("nodeport") or {}, d.get("pod") or {}, d.get("rollout") or {}
    load = f"{d.get('clients')} client processes, GET /entries on a new connection each, {d.get('seconds')} s"
    return [
        Figure("guestbook.apply_ready", "guestbook", f"kubectl apply -k examples/guestbook → all Ready, p50 of "
               f"{d.get('reps')}", d.get("apply_ready_p50_s"), "s",
               note="local-up (node-1 Docker shim, node-2 containerd), images built; runs: "
                    + ", ".join(f"{t:.1f}" for t in d.get("apply_ready_s") or []), full_size=not d.get("quick")),
        Figure("guestbook.nodeport_rps", "guestbook", "requests/s through the NodePort, 3 frontends",
               node.get("rps"), "/s", "one frontend pod IP (same run)", pod.get("rps"),
               _ratio(node.get("rps"), pod.get("rps")), note=load),
        Figure("guestbook.nodeport_p99", "guestbook", "p99 through the NodePort, 3 frontends", node.get("p99_ms"),
               "ms", "one frontend pod IP (same run)", pod.get("p99_ms"),
               _ratio(node.get("p99_ms"), pod.get("p99_ms")), note=load),
        Figure("guestbook.rollout_success", "guestbook", "requests answered during a rollout restart of the frontend",
               rollout.get("success_pct"), "%",
               note=f"{rollout.get('ok')} of {rollout.get('requests')} over {rollout.get('seconds') or 0:.0f} s"),
    ]


def exec_figures(d: JSONDict) -> list[Figure]:
    spdy, ws = d.get("spdy") or {}, d.get("websocket") or {}
    return [Figure(f"exec.round_trip_{q}", "exec", f"1-byte exec round trip {q}, kubectl 1.27 (SPDY/3.1)",
                   spdy.get(f"{q}_ms"), "ms", "kubectl 1.33, websocket (same run)", ws.get(f"{q}_ms"),
                   _ratio(spdy.get(f"{q}_ms"), ws.get(f"{q}_ms")),
                   note="one long-lived `kubectl exec -i POD -- cat` each, rounds alternating")
            for q in ("p50", "p99")]




def resource_proxy_figures(d: JSONDict) -> list[Figure]:
    h, w = d.get("html") or {}, d.get("websocket") or {}
    cpu, wall = h.get("apiserver_cpu_ms_per_get") or {}, h.get("wall_ms_per_get") or {}
    return [
        Figure("resource_proxy.html_cpu", "resource_proxy", "apiserver CPU per GET through pods/proxy, text/html "
               "(links rewritten)", cpu.get("html"), "ms", "the same page as text/plain (streamed, same run)",
               cpu.get("plain"), _ratio(cpu.get("html"), cpu.get("plain")),
               note=f"{h.get('page_bytes')} bytes, {h.get('links')} links; wall ms per GET {wall}"),
        Figure("resource_proxy.websocket_ratio", "resource_proxy", "websocket echo throughput through pods/proxy",
               (w.get("mb_per_s") or {}).get("proxy"), "MB/s", "straight to the server (same run)",
               (w.get("mb_per_s") or {}).get("direct"), w.get("ratio"),
               note=f"apiserver CPU {w.get('apiserver_cpu_ms_per_mb')} ms per MB spliced"),
    ]


def ingress_figures(d: JSONDict) -> list[Figure]:
    t, e = d.get("throughput") or {}, d.get("endpoint_change") or {}
    return [
        Figure("ingress.throughput_ratio", "ingress", "requests/s through the Ingress (nginx)", t.get("ingress_rps"),
               "/s", "the same requests straight to the pod IP", t.get("direct_rps"), t.get("ratio"),
               f"median of {len(t.get('pairs') or [])} back-to-back pairs, {_get(d, 'setup', 'concurrency')} clients, "
               f"a connection per request; p99 {t.get('ingress_p99_ms') or 0:.1f} ms vs "
               f"{t.get('direct_p99_ms') or 0:.1f} ms; {t.get('errors')} errors"),
        Figure("ingress.endpoint_change", "ingress", "EndpointSlice change → first answer through nginx: p99",
               e.get("p99_s"), "s", note=f"p50 {e.get('p50_s') or 0:.3f} s over {e.get('samples')} changes "
                                         "(watch, render, nginx -t, graceful reload)"),
    ]


def road_figures(d: JSONDict) -> list[Figure]:
    m, direct = d.get("mkubectl") or {}, d.get("direct") or {}
    return [Figure("road.latency_p99", "road", "span ended in a component → its step in `mkubectl road --follow`, p99",
                   m.get("p99_s"), "s", "a watch straight on the road server (same samples), p99", direct.get("p99_s"),
                   d.get("p99_ratio"),
                   f"p50 {m.get('p50_s') or 0:.3f} s vs {direct.get('p50_s') or 0:.3f} s; {d.get('seen_mkubectl')}/"
                   f"{d.get('samples')} samples seen; the exporter's schedule delay is {d.get('schedule_delay_s')} s")]


DENSITY_FULL_NODES = 1000  # the size issue 19's targets are set for


def density_figures(d: JSONDict) -> list[Figure]:
    out = []
    for r in d.get("sizes") or []:
        nodes, pods = r["nodes"], r["pods"]
        full = nodes >= DENSITY_FULL_NODES
        size = f"{nodes:,} nodes / {pods:,} pods"
        busy = _get(r, "cpu_s", "others on the machine")
        load = f"others' processes used {busy} CPU s during the {r.get('wall_s')} s run" if busy is not None else ""
        running = f"{r.get('running'):,}/{pods:,} Running" + (", TIMED OUT" if r.get("timed_out") else "")
        out.append(Figure("density.startup_p99", "density", f"{size}: pod start-up p99 (seen → Running)",
                          _get(r, "startup_s", "p99"), "s", note=f"p50 {_get(r, 'startup_s', 'p50')} s; "
                          f"{running}; {load}", full_size=full))
        mutating = [a for a in r.get("api") or [] if a["mutating"] and a["count"] >= 10]
        worst = max(mutating, key=lambda a: a["p99_s"], default=None)
        out.append(Figure("density.mutating_p99", "density", f"{size}: mutating API p99, worst verb/resource",
                          round(worst["p99_s"], 3) if worst else None, "s",
                          note=(f"{worst['verb']} {worst['resource']}"
                                f"{'/' + worst['subresource'] if worst['subresource'] else ''} "
                                f"(n={worst['count']:,}); apiserver histogram") if worst else "", full_size=full))
        reads = [a for a in r.get("api") or [] if not a["mutating"] and a["count"] >= 10]
        worst_read = max(reads, key=lambda a: a["p99_s"], default=None)
        if worst_read:
            out.append(Figure(f"density.{nodes}.read_p99", "density", f"{size}: read-only API p99, worst",
                              round(worst_read["p99_s"], 3), "s",
                              note=f"{worst_read['verb']} {worst_read['resource']} (n={worst_read['count']:,})"))
        delivery = r.get("watch_delivery") or {}
        if delivery.get("p99_s") is not None:
            out.append(Figure(f"density.{nodes}.watch_p99", "density",
                              f"{size}: watch delivery p99, {delivery['watchers']:,} watchers",
                              delivery["p99_s"], "s", note=f"p50 {delivery['p50_s']} s; {delivery['delivered']:,}/"
                              f"{delivery['expected']:,} delivered; create request → event read by each watcher"))
        burst = r.get("burst") or {}
        during = (f"during the run: {_get(r, 'scheduler', 'pods_per_s')} overall, best 5 s window "
                  f"{_get(r, 'scheduler', 'best_5s_window_pods_per_s')} ({_get(r, 'scheduler', 'note')})")
        if burst.get("window_pods_per_s") is not None:  # scheduler_perf's way: many pods pending at once
            out.append(Figure("density.scheduler", "density",
                              f"{size}: scheduler pods bound/s, {burst.get('pods'):,} pending at once",
                              burst["window_pods_per_s"], "pods/s", note=f"first → last binding; {during}",
                              full_size=full))
        else:
            out.append(Figure("density.scheduler", "density", f"{size}: scheduler pods bound/s, best 5 s window",
                              _get(r, "scheduler", "best_5s_window_pods_per_s"), "pods/s", note=during,
                              full_size=full))
        for name in ("apiserver", "controller-manager", "scheduler", "etcd", "hollow (all)"):
            rss = _get(r, "memory_mb", name, "VmHWM")
            key = f"density.rss.{name}" if f"density.rss.{name}" in TARGETS else f"density.{nodes}.rss.{name}"
            out.append(Figure(key, "density", f"{size}: {name} peak RSS", rss, "MB",
                              note=f"CPU {_get(r, 'cpu_ms_per_pod', name) or _get(r, 'cpu_s', name)} "
                                   f"{'ms per pod' if _get(r, 'cpu_ms_per_pod', name) else 's'}, "
                                   f"{_get(r, 'steady_cores', name)} cores in steady state", full_size=full))
        out.append(Figure(f"density.{nodes}.etcd_db", "density", f"{size}: etcd database size",
                          _get(r, "etcd", "etcd_mvcc_db_total_size_in_bytes"), "MB"))
    return out


EXTRACTORS: dict[str, Callable[[JSONDict], list[Figure]]] = {
    "apiserver": apiserver_figures, "auth": auth_figures, "podsecurity": podsecurity_figures,
    "secrets": secrets_figures,
    "metrics": metrics_figures,
    "tracing": tracing_figures,
    "control_plane": control_plane_figures,
    "scheduler": scheduler_figures, "pod_startup": pod_startup_figures, "watch_memory": watch_memory_figures,
    "pod_startup_dns": lambda d: pod_startup_figures(d, "pod_startup_dns"),
    "dos": dos_figures, "etcd_failover": etcd_failover_figures, "cri_startup": cri_startup_figures,
    "dns": dns_figures,
    "proxy": proxy_figures,
    "daemonset": daemonset_figures,
    "job": job_figures,
    "statefulset": statefulset_figures,
    "controller_manager": controller_manager_figures,
    "pod_volumes": pod_volumes_figures,
    "storage": storage_figures,
    "hpa": hpa_figures,
    "preemption": preemption_figures,
    "streaming": streaming_figures,
    "crd": crd_figures,
    "guestbook": guestbook_figures,
    "exec": exec_figures,
    "resource_proxy": resource_proxy_figures,
    "ingress": ingress_figures,
    "road": road_figures,
    "density": density_figures,
    "informer_memory": informer_memory_figures,
}


def build_figures(results: dict[str, JSONDict]) -> list[Figure]:
    """Every figure of the benchmarks' JSON, judged against TARGETS."""
    figures: list[Figure] = []
    for bench in BENCHMARKS:
        data = results.get(bench.name)
        if data is None:
            continue
        if bench.name == "pod_startup_hollow":
            figures += hollow_figures(data, results.get("pod_startup"))
        elif bench.name == "pod_startup_containerd":
            figures += pod_startup_containerd_figures(data, results.get("pod_startup"))
        else:
            figures += EXTRACTORS[bench.name](data)
    figures += compose_figures()
    return [f.judge() for f in figures]


# -- the table -----------------------------------------------------------------------------------------------


def fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    if unit in ("/s", "pods/s"):
        return f"{value:,.0f} {unit}"
    if unit == "ratio":
        return f"{value:.0%}"
    if unit == "x":
        return f"{value:.2f}x"
    if unit == "%":
        return f"{value:+.1f}%"
    if unit == "s":
        return f"{value:.3f} s"
    if unit == "ms":
        return f"{value:.2f} ms" if value < 10 else f"{value:.1f} ms"
    if unit == "us":
        return f"{value:,.0f} µs"
    return f"{value:,.1f} {unit}".rstrip()


def markdown_table(figures: list[Figure]) -> str:
    header = ["area", "figure", "value", "target (issue)", "verdict", "baseline (same run unless noted)", "ratio",
              "note"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for f in figures:
        target = f"{f.target['text']} (#{f.target['issue']})" if f.target else ""
        baseline = f"{f.baseline_label}: {fmt(f.baseline, f.unit)}" if f.baseline is not None else ""
        ratio = f"{f.ratio:.2f}x" if f.ratio is not None else ""
        verdict_cell = {"met": "met", "NOT MET": "**NOT MET**"}.get(f.verdict, f.verdict if f.target else "")
        cells = [f.area, f.label, fmt(f.value, f.unit), target, verdict_cell, baseline, ratio, f.note]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)


def summary_line(figures: list[Figure]) -> str:
    judged = [f for f in figures if f.target]
    counts = {v: sum(1 for f in judged if f.verdict == v) for v in ("met", "NOT MET")}
    other = len(judged) - counts["met"] - counts["NOT MET"]
    return f"targets: {counts['met']} met, {counts['NOT MET']} not met, {other} not measured at their size"


# -- plots -----------------------------------------------------------------------------------------------------


def plot_points(results: dict[str, JSONDict]) -> JSONDict:
    """The series of the two plots, from the benchmarks' JSON (pure: the unit test checks it)."""
    def series(d: JSONDict | None, section: str, kind: str) -> list[tuple[int, float]]:
        pods = (d or {}).get(section) or {}
        return sorted((int(c), v[kind]["p50"]) for c, v in pods.items()
                      if int(c) >= 10 and _get(v, kind, "p50") is not None)

    real, hollow = results.get("pod_startup"), results.get("pod_startup_hollow")
    sched = [(c["pods"], c["median"].get("pods_per_s_window"), c["median"].get("pods_per_s_from_start"),
              min(c.get("window_rates") or [0]), max(c.get("window_rates") or [0]), c.get("algorithm_pods_per_s"))
             for c in (results.get("scheduler") or {}).get("configs") or [] if c["nodes"] == 100]
    return {
        "startup": {"real_batch": series(real, "pods", "batch"), "real_per_pod": series(real, "pods", "per_pod"),
                    "raw_batch": series(real, "raw_docker", "batch"),
                    "hollow_batch": series(hollow, "pods", "batch"),
                    "hollow_per_pod": series(hollow, "pods", "per_pod"),
                    "hollow_nodes": _get(hollow, "nodes", "count")},
        "scheduler": sorted(sched),
        "density": density_points(results.get("density")),
    }


DENSITY_COMPONENTS = ("apiserver", "etcd", "controller-manager", "scheduler", "hollow (all)")


def density_points(d: JSONDict | None) -> list[JSONDict]:
    """Per size (by nodes): start-up p50/p99, API p99s, scheduler rate, CPU ms per pod and RSS per component."""
    out = []
    for r in sorted((d or {}).get("sizes") or [], key=lambda r: r["nodes"]):
        api = [a for a in r.get("api") or [] if a["count"] >= 10]
        out.append({
            "nodes": r["nodes"], "pods": r["pods"],
            "startup_p50": _get(r, "startup_s", "p50"), "startup_p99": _get(r, "startup_s", "p99"),
            "mutating_p99": max((a["p99_s"] for a in api if a["mutating"]), default=None),
            "read_p99": max((a["p99_s"] for a in api if not a["mutating"]), default=None),
            "watch_p99": _get(r, "watch_delivery", "p99_s"),
            "scheduler": _get(r, "scheduler", "best_5s_window_pods_per_s"),
            "cpu_ms_per_pod": {c: _get(r, "cpu_ms_per_pod", c) for c in DENSITY_COMPONENTS
                               if _get(r, "cpu_ms_per_pod", c) is not None},
            "rss_mb": {c: _get(r, "memory_mb", c, "VmHWM") for c in DENSITY_COMPONENTS
                       if _get(r, "memory_mb", c, "VmHWM") is not None},
            "etcd_db_mb": _get(r, "etcd", "etcd_mvcc_db_total_size_in_bytes"),
        })
    return out


def write_plots(results: dict[str, JSONDict], out_dir: Path) -> list[str]:
    try:
        import matplotlib
    except ImportError:
        print("plots skipped: matplotlib is missing (hack/setup.sh installs it with the test extras)",
              file=sys.stderr)
        return []
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    points = plot_points(results)
    written = []
    thousands = FuncFormatter(lambda v, _: f"{v:,.0f}")
    s = points["startup"]
    if any(s[k] for k in ("real_batch", "hollow_batch")):
        fig, axes = plt.subplots(1, 2, figsize=(12, 6.2))
        for ax, kind, title in ((axes[0], "batch", "all pods Running (first create → last Running)"),
                                (axes[1], "per_pod", "each pod, create → Running (median)")):
            for key, label, style in ((f"real_{kind}", "minik8s, 2 real kubelets (Docker + CNI)", "o-"),
                                      (f"hollow_{kind}", f"minik8s, {s['hollow_nodes']} hollow kubelets "
                                                         "(no containers)", "^--"),
                                      ("raw_batch" if kind == "batch" else "", "raw docker run, pause + app", "s:")):
                if key and s[key]:
                    xs, ys = zip(*s[key], strict=True)
                    ax.plot(xs, ys, style, label=label, markersize=7)
                    for x, y in s[key]:
                        offset = (-46, 4) if key == "raw_batch" else (6, -12)  # raw Docker's labels above-left
                        ax.annotate(f"{y:.2f} s", (x, y), textcoords="offset points", xytext=offset, fontsize=8)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.xaxis.set_major_formatter(thousands)
            ax.set_xlabel("pods created at once")
            ax.set_ylabel("seconds")
            ax.set_title(title)
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.13))
        fig.suptitle("Pod startup vs number of pods created at once (p50 over repetitions; one 2-core machine)")
        fig.text(0.5, 0.01, "hollow kubelet = the real kubelet (informer, pod workers, PLEG, status, events) whose "
                 "container runtime records containers as started without running them, as kubemark's hollow-node",
                 ha="center", fontsize=8, style="italic")
        fig.tight_layout(rect=(0, 0.04, 1, 1))
        path = out_dir / "pod_startup_scaling.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(str(path))
    sched = points["scheduler"]
    if sched:
        fig, ax = plt.subplots(figsize=(7.5, 6.5))
        pods = [p[0] for p in sched]
        window = [p[1] for p in sched]
        err = [[max(0.0, p[1] - p[3]) for p in sched], [max(0.0, p[4] - p[1]) for p in sched]]  # rates are rounded
        ax.errorbar(pods, window, yerr=err, fmt="o-", capsize=4,
                    label="bound/s over the binding window (median; bars: min to max of the runs)")
        ax.plot(pods, [p[2] for p in sched], "s--", label="bound/s from scheduler start (incl. start-up, lists)")
        if all(p[5] for p in sched):
            ax.plot(pods, [p[5] for p in sched], "^:", label="scheduling cycles alone, no API calls (one core)")
        target = TARGETS["scheduler.100x1000.window"]
        ax.axhline(target.value, color="red", linestyle="-.", linewidth=1,
                   label=f"target ≥ {target.value:.0f} pods/s at 1,000 pods (issue {target.issue})")
        for x, y in zip(pods, window, strict=True):
            ax.annotate(f"{y:,.0f}", (x, y), textcoords="offset points", xytext=(6, 6), fontsize=8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.xaxis.set_major_formatter(thousands)
        ax.yaxis.set_major_formatter(thousands)
        ax.set_xlabel("pending pods")
        ax.set_ylabel("pods bound per second")
        ax.set_title("Scheduler throughput vs pending pods\n"
                     "(100 hollow nodes: Node objects only; real apiserver + etcd)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=1)
        fig.tight_layout()
        path = out_dir / "scheduler_scaling.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(str(path))
    if points["density"]:
        path = out_dir / "density_scaling.png"
        plot_density(plt, points["density"], path)
        written.append(str(path))
    return written


def plot_density(plt: Any, density: list[JSONDict], path: Path) -> None:
    """Four panels against the number of hollow nodes (30 pods each): start-up, API p99, CPU per pod, RSS."""
    from matplotlib.ticker import NullFormatter

    nodes = [p["nodes"] for p in density]
    fig, axes = plt.subplots(2, 2, figsize=(13, 10))
    (a, b), (c, e) = axes

    def line(ax: Any, key: str, label: str, style: str) -> None:
        pts = [(p["nodes"], p[key]) for p in density if p.get(key) is not None]
        if pts:
            xs, ys = zip(*pts, strict=True)
            ax.plot(xs, ys, style, label=label, markersize=6)
            for x, y in pts:
                ax.annotate(f"{y:.2f}", (x, y), textcoords="offset points", xytext=(5, 4), fontsize=7)

    line(a, "startup_p50", "p50", "o-")
    line(a, "startup_p99", "p99", "s--")
    a.axhline(TARGETS["density.startup_p99"].value, color="red", linestyle="-.", linewidth=1,
              label="upstream SLO: p99 ≤ 5 s (target at 1,000 nodes)")
    a.set_title("pod start-up, first seen → Running (watch)")
    a.set_ylabel("seconds")
    line(b, "mutating_p99", "mutating p99, worst verb/resource", "o-")
    line(b, "read_p99", "read-only p99, worst verb/resource", "s--")
    line(b, "watch_p99", "watch delivery p99, 1,000 watchers", "^:")
    b.axhline(TARGETS["density.mutating_p99"].value, color="red", linestyle="-.", linewidth=1,
              label="upstream SLO: mutating p99 ≤ 1 s")
    b.set_title("API call latency p99 (apiserver histogram, ≥ 10 calls); watch delivery p99")
    b.set_ylabel("seconds")
    for comp, style in zip(DENSITY_COMPONENTS, ("o-", "s-", "^-", "v-", "d--"), strict=True):
        pts = [(p["nodes"], p["cpu_ms_per_pod"][comp]) for p in density if comp in p["cpu_ms_per_pod"]]
        if pts:
            xs, ys = zip(*pts, strict=True)
            c.plot(xs, ys, style, label=comp, markersize=6)
        pts = [(p["nodes"], p["rss_mb"][comp]) for p in density if comp in p["rss_mb"]]
        if pts:
            xs, ys = zip(*pts, strict=True)
            e.plot(xs, ys, style, label=comp, markersize=6)
    c.set_title("CPU per pod started (flat = cost grows linearly)")
    c.set_ylabel("CPU ms per pod")
    line(e, "etcd_db_mb", "etcd database", "x:")
    for comp in ("apiserver", "controller-manager", "scheduler"):
        e.axhline(TARGETS[f"density.rss.{comp}"].value, linestyle="-.", linewidth=0.8, color="gray")
    e.set_title("peak RSS; gray: targets 400 MB (apiserver), 200 MB (cm, scheduler)")
    e.set_ylabel("MB")
    for ax in (a, b, c, e):
        ax.set_xscale("log")
        ax.set_xticks(nodes)
        ax.xaxis.set_major_formatter(nodes_formatter(density))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("hollow nodes (pods = 30 per node)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("Density (kubemark-style): hollow nodes, 30 pods each through Deployments of 100 at 100 pods/s\n"
                 "real etcd, apiserver, controller-manager, scheduler; one shared 2-core machine")
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    fig.savefig(path, dpi=100)
    plt.close(fig)


def nodes_formatter(density: list[JSONDict]) -> Any:
    from matplotlib.ticker import FuncFormatter

    pods = {p["nodes"]: p["pods"] for p in density}
    return FuncFormatter(lambda v, _: f"{v:,.0f}\n({pods[int(v)]:,} pods)" if int(v) in pods else f"{v:,.0f}")


# -- running -------------------------------------------------------------------------------------------------


def load_average() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


@dataclass
class Run:
    name: str
    argv: list[str]
    exit_code: int | None = None
    duration_s: float = 0.0
    log: str = ""
    json_fresh: bool = False
    load_before: str = ""
    load_after: str = ""
    error: str = ""
    extra: JSONDict = field(default_factory=dict)


def run_benchmark(bench: Benchmark, quick: bool, timeout: float, out_dir: Path) -> Run:
    argv = [sys.executable, "-m", bench.module, *(bench.quick_args if quick else bench.args)]
    logs = out_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    log_path = logs / f"{bench.name}.log"
    json_path = out_dir / bench.json_name
    before = json_path.stat().st_mtime if json_path.exists() else 0.0
    run = Run(bench.name, argv[1:], log=str(log_path), load_before=load_average())
    print(f"[{time.strftime('%H:%M:%S')}] {bench.name}: {' '.join(argv[2:])} (log {log_path}) ...", file=sys.stderr,
          flush=True)
    started = time.monotonic()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=REPO, start_new_session=True)
        try:
            run.exit_code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            run.error = f"stopped after the {timeout:.0f} s limit"
            os.killpg(proc.pid, signal.SIGTERM)  # the benchmarks clean up on SIGTERM
            try:
                run.exit_code = proc.wait(120)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                run.exit_code = proc.wait()
        except KeyboardInterrupt:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(120)
            raise
    run.duration_s = round(time.monotonic() - started, 1)
    run.load_after = load_average()
    run.json_fresh = json_path.exists() and json_path.stat().st_mtime > before
    if not run.json_fresh:
        run.error = run.error or "wrote no JSON"
    print(f"[{time.strftime('%H:%M:%S')}] {bench.name}: exit {run.exit_code} after {run.duration_s:.0f} s"
          f"{f' — {run.error}' if run.error else ''}", file=sys.stderr, flush=True)
    return run


def read_results(out_dir: Path) -> tuple[dict[str, JSONDict], dict[str, str]]:
    results, stamps = {}, {}
    for bench in BENCHMARKS:
        path = out_dir / bench.json_name
        if path.exists():
            try:
                results[bench.name] = json.loads(path.read_text())
            except ValueError as e:
                print(f"{path}: unreadable ({e}); left out", file=sys.stderr)
                continue
            stamps[bench.name] = dt.datetime.fromtimestamp(path.stat().st_mtime).isoformat(timespec="seconds")
    return results, stamps


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.report", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="pass --quick (or small sizes) to every benchmark: a smoke run")
    p.add_argument("--only", default="", metavar="NAME,...",
                   help=f"run only these ({', '.join(BY_NAME)}); the others' figures come from their existing JSON")
    p.add_argument("--from-json", action="store_true", help="run nothing: rebuild the report from the existing JSON")
    p.add_argument("--timeout", type=float, default=1800, help="seconds each benchmark may take (default %(default)s)")
    p.add_argument("--output-dir", type=Path, default=OUTPUT,
                   help="with --from-json: where the JSON is read and the report written (default %(default)s, "
                        "where the benchmarks write)")
    args = p.parse_args(argv)
    if args.output_dir.resolve() != OUTPUT.resolve() and not args.from_json:
        p.error("--output-dir needs --from-json: the benchmarks write their JSON to _output/bench")
    args.selected = [n.strip() for n in args.only.split(",") if n.strip()] or list(BY_NAME)
    unknown = [n for n in args.selected if n not in BY_NAME]
    if unknown:
        p.error(f"--only: unknown benchmark {', '.join(unknown)} (known: {', '.join(BY_NAME)})")
    return args


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # the running benchmark gets SIGTERM and cleans up


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)
    out_dir: Path = args.output_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    started = dt.datetime.now()
    load_start = load_average()
    runs: list[Run] = []
    if not args.from_json:
        for name in args.selected:
            runs.append(run_benchmark(BY_NAME[name], args.quick, args.timeout, out_dir))
    results, stamps = read_results(out_dir)
    ran = {r.name for r in runs if r.json_fresh}
    figures = build_figures(results)
    plots = write_plots(results, out_dir)
    load_end = load_average()
    head = [f"# minik8s benchmark report — {started:%Y-%m-%d %H:%M}",
            "",
            f"{'rebuilt from the JSON' if args.from_json else 'quick (smoke) run' if args.quick else 'full run'} "
            f"on {os.cpu_count()} CPUs; load average "
            f"(1/5/15 min) {load_start} at the start, {load_end} at the end. The machine is shared: absolute "
            "figures move with its load, ratios against a baseline of the same run much less.",
            "",
            "| benchmark | source | exit | duration | load before → after |",
            "|---|---|---|---|---|"]
    by_run = {r.name: r for r in runs}
    for bench in BENCHMARKS:
        r = by_run.get(bench.name)
        if r is not None:
            head.append(f"| {bench.name} | this run{'' if r.json_fresh else ' (no JSON: ' + r.error + ')'} | "
                        f"{r.exit_code} | {r.duration_s:.0f} s | {r.load_before} → {r.load_after} |")
        elif bench.name in stamps:
            head.append(f"| {bench.name} | JSON of {stamps[bench.name]} | | | |")
        else:
            head.append(f"| {bench.name} | not run, no JSON | | | |")
    text = "\n".join([*head, "", summary_line(figures), "", markdown_table(figures), ""]
                     + ([f"Plots: {', '.join(Path(p).name for p in plots)}", ""] if plots else []))
    print(text)
    (out_dir / "report.md").write_text(text)
    (out_dir / "report.json").write_text(json.dumps({
        "generated": started.isoformat(timespec="seconds"), "quick": args.quick, "cpus": os.cpu_count(),
        "load_average": {"start": load_start, "end": load_end},
        "benchmarks": {b.name: {"module": b.module, "json": b.json_name, "what": b.what,
                                "run": asdict(by_run[b.name]) if b.name in by_run else None,
                                "json_written": stamps.get(b.name), "from_this_run": b.name in ran}
                       for b in BENCHMARKS},
        "targets": {k: asdict(t) for k, t in TARGETS.items()},
        "figures": [asdict(f) for f in figures],
        "plots": plots, "plot_points": plot_points(results),
    }, indent=2, ensure_ascii=False) + "\n")
    print(f"report: {out_dir / 'report.md'}, {out_dir / 'report.json'}", file=sys.stderr)
    failed = [r.name for r in runs if r.exit_code != 0 or not r.json_fresh]
    if failed:
        print(f"benchmarks that failed or wrote no JSON: {', '.join(failed)} (see their logs)", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
