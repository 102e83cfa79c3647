"""What PodSecurity admission costs a pod create: the same secure apiserver chain (TLS, x509 authn,
RBAC, admission, audit at Metadata) with the plugin off and on, in one run, on one etcd.

    python -m bench.podsecurity_bench [--quick] [--rounds N] [--keep]

- without: an apiserver with `--disable-admission-plugins PodSecurity`;
- privileged: the plugin on, the namespace unlabelled (the cluster default, privileged: what every
  cluster pays by having the plugin);
- restricted: the plugin on, the namespace labelled enforce, audit and warn = restricted, every pod
  compliant (every check of the level runs three ways: enforce, audit and warn share one result).

Each round runs the three with the same closed loop of 64 keep-alive clients creating a pod that
meets restricted; rounds alternate to spread machine noise. The table gives medians and the ratios
to `without`. Writes _output/bench/podsecurity.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import ssl
import sys
import time
from typing import Any

import httpx
import orjson
import uvloop

from bench.apiserver_bench import CpuMeter, render_table
from bench.auth_bench import closed_loop
from bench.closed_loop_summary import busy_caution, medians_and_rows
from tests.auth_cluster import SecureApiServer
from tests.cluster import REPO, Etcd, make_workdir, wait_for

OUTPUT = REPO / "_output" / "bench"
RESTRICTED = {f"pod-security.kubernetes.io/{mode}": "restricted" for mode in ("enforce", "audit", "warn")}
MODES = ("without", "privileged", "restricted")


def restricted_pod(name: str, namespace: str) -> bytes:
    """A pod as a ReplicaSet would write it, meeting restricted:latest."""
    return orjson.dumps({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": "bench", "tier": "web"}},
        "spec": {"securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                 "containers": [{"name": "web", "image": "nginx:1.25",
                                 "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                                 "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                                 "securityContext": {"allowPrivilegeEscalation": False,
                                                     "capabilities": {"drop": ["ALL"]}}}]},
    })


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.podsecurity_bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="1,000 creates per closed loop, 2 rounds")
    p.add_argument("--rounds", type=int, default=None, help="rounds (default 3, quick 2)")
    p.add_argument("--clients", type=int, default=64)
    p.add_argument("--keep", action="store_true", help="keep the work directory")
    args = p.parse_args(argv)
    rounds = args.rounds or (2 if args.quick else 3)
    total = 1000 if args.quick else 3000

    workdir = make_workdir("minik8s-podsecurity-bench-")
    etcd = Etcd(workdir)
    etcd.start()
    servers = {"without": SecureApiServer(workdir, etcd, "--port", "0", "--etcd-compaction-interval", "0",
                                          "--disable-admission-plugins", "PodSecurity"),
               "with": SecureApiServer(workdir, etcd, "--port", "0", "--etcd-compaction-interval", "0")}
    results: dict[str, list[dict[str, Any]]] = {mode: [] for mode in MODES}
    try:
        for server in servers.values():
            server.process.start()
        for server in servers.values():
            wait_for(lambda s=server: httpx.get(f"{s.secure_url}/readyz", verify=s.ssl_context(),  # type: ignore[misc]
                                                timeout=1).status_code == 200, 30, what="the secure apiserver")
        with servers["with"].client("admin") as admin:
            for ns, labels in (("bench-psa-without", {}), ("bench-psa-privileged", {}),
                               ("bench-psa-restricted", RESTRICTED)):
                assert admin.post("/api/v1/namespaces", json={"metadata": {"name": ns, "labels": labels}}
                                  ).status_code == 201
                # the pods' service account (no controller-manager here to make it): ServiceAccount admission checks it
                assert admin.post(f"/api/v1/namespaces/{ns}/serviceaccounts", json={"metadata": {"name": "default"}}
                                  ).status_code == 201
            probe = restricted_pod("probe", "bench-psa-restricted")
            r = admin.post("/api/v1/namespaces/bench-psa-restricted/pods", content=probe,
                           headers={"content-type": "application/json"})
            assert r.status_code == 201 and "warning" not in r.headers, (r.status_code, r.text)
        targets = {mode: (servers["without" if mode == "without" else "with"], f"bench-psa-{mode}") for mode in MODES}
        for r_i in range(rounds):
            for mode in MODES:
                server, ns = targets[mode]
                pid = server.process.proc.pid  # type: ignore[union-attr]
                ctx = server.ssl_context("admin")
                print(f"[{time.strftime('%H:%M:%S')}] round {r_i + 1}/{rounds}, {mode} …", file=sys.stderr)

                def run(prefix: str, count: int, server: SecureApiServer = server, ns: str = ns,
                        ctx: ssl.SSLContext = ctx, pid: int = pid) -> dict[str, Any]:
                    meter = CpuMeter({"apiserver": pid, "etcd": etcd.process.proc.pid})  # type: ignore[union-attr]
                    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                        return runner.run(closed_loop(server.secure_port, ctx, ns, prefix, count, args.clients,
                                                      meter, body=restricted_pod))

                run(f"w{r_i}", 200)
                result = run(f"c{r_i}", total)
                if result["ok"] != total:  # a refused create is no create: the figures would time refusals
                    raise SystemExit(f"{mode}: {total - result['ok']} of {total} creates failed: {result['statuses']}")
                results[mode].append(result)
    finally:
        for server in servers.values():
            server.stop()
        etcd.stop()
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)

    summary, rows = medians_and_rows(results, MODES)
    print()
    print(f"PodSecurity admission benchmark ({'quick' if args.quick else 'full'}, {rounds} rounds, medians)")
    print()
    print(render_table(("figure", *MODES, "privileged/without", "restricted/without"), rows))
    if caution := busy_caution(results):
        print(caution)
    rate = summary["creates/s, 64 clients"]
    costs = {m: round((1 - rate[m] / rate["without"]) * 100, 1) if rate["without"] else None for m in MODES[1:]}
    print(f"throughput cost: privileged namespace {costs['privileged']}%, restricted namespace {costs['restricted']}%")
    OUTPUT.mkdir(parents=True, exist_ok=True)
    out = OUTPUT / "podsecurity.json"
    out.write_text(json.dumps({"benchmark": "podsecurity", "quick": args.quick, "rounds": results,
                               "summary": summary, "throughput_cost_percent": costs}, indent=2))
    print(f"JSON: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
