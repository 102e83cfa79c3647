"""What a pod's own volumes cost and how fast they follow their sources (issue 12), on a real secured cluster
(tests/secure_cluster.py: HTTPS apiserver with every admission plugin, Node,RBAC, the serviceaccount and
root-ca-cert-publisher controllers, one kubelet on the Docker shim).

    python -m bench.pod_volumes_bench [--quick] [--rounds N] [--updates N]

1. Pod create → Running (the first container running, as the apiserver reports it) for three pods in one
   run, one at a time, rounds alternating their order:
   - bare: `automountServiceAccountToken: false`, no volume (the baseline);
   - sa: what every pod now gets, the kube-api-access projected volume (a TokenRequest by the kubelet, a
     tmpfs, the kube-root-ca.crt ConfigMap watched);
   - all: the same plus a configMap, a secret and a downwardAPI volume and a projected configMap+secret one.
   Ratios sa ÷ bare and all ÷ bare of the medians.
2. Propagation, read on the node's disk where the container's bind mount shows it: a ConfigMap's update
   → its mounted file changed (the kubelet's watch of that one object), against a pod label's update → its
   downwardAPI file changed (the kubelet's pod informer), same pod, same run. Without the watch the update
   would wait for the kubelet's periodic sync (60 s).

Writes _output/bench/pod_volumes.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from bench.apiserver_bench import render_table
from tests.cluster import REPO, wait_for
from tests.node_process import BUSYBOX
from tests.secure_cluster import SecureCluster

OUTPUT = REPO / "_output" / "bench"
VARIANTS = ("bare", "sa", "all")
MERGE = {"Content-Type": "application/merge-patch+json"}


def pod_body(name: str, node: str, variant: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"nodeName": node, "terminationGracePeriodSeconds": 0,
                            "containers": [{"name": "c", "image": BUSYBOX, "command": ["sleep", "3600"]}]}
    if variant == "bare":
        spec["automountServiceAccountToken"] = False
    if variant == "all":
        spec["volumes"] = [
            {"name": "cfg", "configMap": {"name": "bench-cfg"}},
            {"name": "sec", "secret": {"secretName": "bench-sec"}},
            {"name": "info", "downwardAPI": {"items": [{"path": "labels",
                                                        "fieldRef": {"fieldPath": "metadata.labels"}}]}},
            {"name": "both", "projected": {"sources": [{"configMap": {"name": "bench-cfg"}},
                                                       {"secret": {"name": "bench-sec"}}]}}]
        spec["containers"][0]["volumeMounts"] = [{"name": v["name"], "mountPath": f"/v/{v['name']}"}
                                                 for v in spec["volumes"]]
    return {"metadata": {"name": name, "labels": {"bench": variant}}, "spec": spec}


def running(api: httpx.Client, ns: str, name: str) -> bool:
    status = api.get(f"/api/v1/namespaces/{ns}/pods/{name}").json().get("status") or {}
    return any("running" in (cs.get("state") or {}) for cs in status.get("containerStatuses") or [])


def start_once(api: httpx.Client, ns: str, node: str, variant: str) -> float:
    name = f"{variant}-{uuid.uuid4().hex[:6]}"
    began = time.monotonic()
    r = api.post(f"/api/v1/namespaces/{ns}/pods", json=pod_body(name, node, variant))
    assert r.status_code == 201, r.text
    wait_for(lambda: running(api, ns, name), 120, 0.01, what=f"{name} running")
    took = time.monotonic() - began
    api.delete(f"/api/v1/namespaces/{ns}/pods/{name}", params={"gracePeriodSeconds": "0"})
    wait_for(lambda: api.get(f"/api/v1/namespaces/{ns}/pods/{name}").status_code == 404, 120, 0.05,
             what=f"{name} gone")
    return took


def changed_after(path: Path, old: str, since: float, timeout: float = 90.0) -> float:
    """Seconds from `since` (before the update was sent) until the file no longer reads `old`."""
    wait_for(lambda: path.exists() and path.read_text() != old, timeout, 0.002, what=f"{path} to change")
    return time.monotonic() - since


def propagation(cluster: SecureCluster, api: httpx.Client, ns: str, updates: int) -> dict[str, list[float]]:
    node = cluster.nodes[0]
    created = api.post(f"/api/v1/namespaces/{ns}/pods", json=pod_body("follow", node, "all")).json()
    wait_for(lambda: running(api, ns, "follow"), 120, 0.05, what="the propagation pod running")
    volumes = cluster.kubelets[0].root_dir / "pods" / created["metadata"]["uid"] / "volumes"
    cm_file = volumes / "kubernetes.io~configmap" / "cfg" / "value"
    label_file = volumes / "kubernetes.io~downward-api" / "info" / "labels"
    out: dict[str, list[float]] = {"configmap": [], "label": []}
    for i in range(updates):
        old, sent = cm_file.read_text(), time.monotonic()
        api.patch(f"/api/v1/namespaces/{ns}/configmaps/bench-cfg", json={"data": {"value": f"v{i}"}}, headers=MERGE)
        out["configmap"].append(changed_after(cm_file, old, sent))
        old, sent = label_file.read_text(), time.monotonic()
        api.patch(f"/api/v1/namespaces/{ns}/pods/follow", json={"metadata": {"labels": {"round": str(i)}}},
                  headers=MERGE)
        out["label"].append(changed_after(label_file, old, sent))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.pod_volumes_bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="3 rounds, 3 updates")
    p.add_argument("--rounds", type=int, default=None, help="pods per variant (default 10, quick 3)")
    p.add_argument("--updates", type=int, default=None, help="ConfigMap and label updates (default 10, quick 3)")
    args = p.parse_args(argv)
    rounds = args.rounds or (3 if args.quick else 10)
    updates = args.updates or (3 if args.quick else 10)
    cluster = SecureCluster(node_count=1, prefix="pvb", proxy=False)
    starts: dict[str, list[float]] = {v: [] for v in VARIANTS}
    try:
        cluster.start()
        with cluster.client(timeout=30) as api:
            ns = "bench-volumes"
            assert api.post("/api/v1/namespaces", json={"metadata": {"name": ns}}).status_code == 201
            wait_for(lambda: api.get(f"/api/v1/namespaces/{ns}/serviceaccounts/default").status_code == 200, 30)
            wait_for(lambda: api.get(f"/api/v1/namespaces/{ns}/configmaps/kube-root-ca.crt").status_code == 200, 30)
            api.post(f"/api/v1/namespaces/{ns}/configmaps", json={"metadata": {"name": "bench-cfg"},
                                                                   "data": {"value": "start"}})
            api.post(f"/api/v1/namespaces/{ns}/secrets", json={"metadata": {"name": "bench-sec"},
                                                                "stringData": {"password": "pw"}})
            node = cluster.nodes[0]
            for variant in VARIANTS:  # warm-up: images, the first token, the first watches
                start_once(api, ns, node, variant)
            for r_i in range(rounds):
                order = VARIANTS[r_i % 3:] + VARIANTS[:r_i % 3]
                print(f"[{time.strftime('%H:%M:%S')}] round {r_i + 1}/{rounds} ({', '.join(order)})", file=sys.stderr)
                for variant in order:
                    starts[variant].append(start_once(api, ns, node, variant))
            follow = propagation(cluster, api, ns, updates)
    finally:
        cluster.stop()

    p50 = {v: statistics.median(starts[v]) for v in VARIANTS}
    sa_ratio = round(p50["sa"] / p50["bare"], 3)
    all_ratio = round(p50["all"] / p50["bare"], 3)
    cm_p50, label_p50 = statistics.median(follow["configmap"]), statistics.median(follow["label"])
    rows = [(f"create → Running p50 s, {v}", f"{p50[v]:.3f}", f"{p50[v] / p50['bare']:.3f}x") for v in VARIANTS]
    rows.append(("ConfigMap update → mounted file p50 s", f"{cm_p50:.3f}", f"{cm_p50 / label_p50:.3f}x"))
    rows.append(("pod label update → downwardAPI file p50 s", f"{label_p50:.3f}", "1.000x"))
    print()
    print(f"Pod volumes ({'quick' if args.quick else 'full'}: {rounds} pods per variant, {updates} updates, medians)")
    print()
    print(render_table(("figure", "value", "÷ baseline"), rows))
    OUTPUT.mkdir(parents=True, exist_ok=True)
    out = OUTPUT / "pod_volumes.json"
    out.write_text(json.dumps({
        "benchmark": "pod_volumes", "quick": args.quick, "rounds": rounds, "updates": updates,
        "starts_s": starts, "start_p50_s": p50, "sa_ratio": sa_ratio, "all_ratio": all_ratio,
        "propagation_s": follow, "configmap_p50_s": cm_p50, "label_p50_s": label_p50,
        "configmap_vs_label": round(cm_p50 / label_p50, 3) if label_p50 else None}, indent=2))
    print(f"JSON: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
