"""What the apiserver's gate costs: pod creates against the same apiserver code with the chain off
and with the full chain on, in one run, on one etcd.

    python -m bench.auth_bench [--quick] [--rounds N] [--keep]

- chain off: `--port P --secure-port 0 --authorization-mode AlwaysAllow --enable-admission-plugins ""`,
  plain HTTP, no audit (what the apiserver was before the gate);
- full chain: HTTPS with the cluster PKI, a client certificate of a user that is *not* in
  system:masters (so RBAC really decides, through a ClusterRoleBinding), Node+RBAC
  authorization, every admission plugin (no webhook configured) with PodSecurity enforcing `baseline` on the
  namespace (label pod-security.kubernetes.io/enforce=baseline: the level that refuses the host-owning pods of
  issue 10; the bench pod, a plain ReplicaSet-like pod, meets it, so every baseline check runs and passes), and
  the audit log at Metadata.

Each round runs both, off then on, with the same load: a closed loop of 64 keep-alive clients
(throughput, p50/p99 under load, apiserver CPU ms per create), then an open loop at a paced
200 creates/s (p99 without queueing). Rounds alternate to spread machine noise over both; the
table gives medians over rounds and the on/off ratios. The load generator runs on uvloop, as the apiserver
does, so the client's own TLS does not starve the apiserver of the machine's CPU. Target (issue 10): the chain,
PodSecurity included, costs ≤ 10% of throughput.
Writes _output/bench/auth.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import ssl
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import httpx
import uvloop

from bench.apiserver_bench import CpuMeter, HttpConn, pod_body, render_table, summarize
from tests.auth_cluster import SecureApiServer
from tests.cluster import ALL_ADMISSION, REPO, ApiServer, Etcd, make_workdir, wait_for

OUTPUT = REPO / "_output" / "bench"
TARGET_PERCENT = 10
# the level PodSecurity enforces on the full chain's namespace (the off namespace carries it too, unread)
ENFORCE = {"pod-security.kubernetes.io/enforce": "baseline"}
T = TypeVar("T")


class TlsConn(HttpConn):
    def __init__(self, host: str, port: int, context: ssl.SSLContext | None):
        super().__init__(host, port)
        self.context = context

    async def connect(self) -> TlsConn:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port, ssl=self.context,
                                                                 limit=1 << 20)
        return self


async def closed_loop(port: int, context: ssl.SSLContext | None, namespace: str, prefix: str, total: int,
                      clients: int, meter: CpuMeter,
                      body: Callable[[str, str], bytes] = pod_body, resource: str = "pods") -> dict[str, Any]:
    """`total` creates (pods unless `resource` says otherwise) by `clients` keep-alive connections;
    `body(name, namespace)` is each object."""
    latencies: list[float] = []
    statuses: Counter[str] = Counter()
    counter = iter(range(total))
    path = f"/api/v1/namespaces/{namespace}/{resource}"

    async def worker() -> None:
        conn = await TlsConn("127.0.0.1", port, context).connect()
        try:
            for i in counter:
                pod = body(f"{prefix}-{i:06d}", namespace)
                t = time.perf_counter()
                status, _ = await conn.request("POST", path, pod)
                statuses[str(status)] += 1
                if status == 201:
                    latencies.append(time.perf_counter() - t)
        finally:
            conn.close()

    with meter:
        await asyncio.gather(*(worker() for _ in range(clients)))
    cpu = meter.report(total)
    return {"ok": len(latencies), "statuses": dict(statuses), "rate": len(latencies) / meter.wall,
            "latency_ms": summarize(latencies, 1000), "cpu_ms_per_create": cpu["apiserver"]["cpu_ms_per_request"],
            "apiserver_cores": cpu["apiserver"]["cores"], "others_cores": cpu["others"]["cores"]}


async def paced(port: int, context: ssl.SSLContext | None, namespace: str, prefix: str, per_second: float,
                count: int, meter: CpuMeter) -> dict[str, Any]:
    idle = [await TlsConn("127.0.0.1", port, context).connect() for _ in range(16)]
    latencies: list[float] = []
    statuses: Counter[str] = Counter()
    path = f"/api/v1/namespaces/{namespace}/pods"

    async def one(i: int, scheduled: float) -> None:
        conn = idle.pop() if idle else TlsConn("127.0.0.1", port, context)
        status, _ = await conn.request("POST", path, pod_body(f"{prefix}-{i:06d}", namespace))
        idle.append(conn)
        statuses[str(status)] += 1
        if status == 201:
            latencies.append(time.perf_counter() - scheduled)

    tasks = []
    with meter:
        start = time.perf_counter() + 0.02
        for i in range(count):
            scheduled = start + i / per_second
            while (delay := scheduled - time.perf_counter()) > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(i, scheduled)))
        await asyncio.gather(*tasks)
    for conn in idle:
        conn.close()
    return {"ok": len(latencies), "statuses": dict(statuses), "latency_ms": summarize(latencies, 1000),
            "cpu_ms_per_create": meter.report(count)["apiserver"]["cpu_ms_per_request"]}


def _run(coro: Coroutine[Any, Any, T]) -> T:
    """The load generator on uvloop, as the apiserver runs: asyncio's pure-Python TLS in the client would take
    the CPU the apiserver needs on a small machine and charge the client's TLS to the chain."""
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coro)


def _median(rows: list[dict[str, Any]], *keys: str) -> float:
    values = []
    for row in rows:
        value: Any = row
        for key in keys:
            value = value[key]
        values.append(float(value))
    return statistics.median(values)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.auth_bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="1,500 creates per closed loop, 2 rounds")
    p.add_argument("--rounds", type=int, default=None, help="off/on rounds (default 3, quick 2)")
    p.add_argument("--clients", type=int, default=64)
    p.add_argument("--keep", action="store_true", help="keep the work directory")
    p.add_argument("--on-arg", action="append", default=[], metavar="ARG",
                   help="an extra argument of the full-chain apiserver, to weigh one part of the chain "
                        "(e.g. --on-arg=--disable-admission-plugins=PodSecurity); repeatable")
    args = p.parse_args(argv)
    rounds = args.rounds or (2 if args.quick else 3)
    total = 1500 if args.quick else 4000
    paced_count = 400 if args.quick else 1000

    workdir = make_workdir("minik8s-auth-bench-")
    etcd = Etcd(workdir)
    etcd.start()
    off = ApiServer(workdir, etcd, "--secure-port", "0", "--authorization-mode", "AlwaysAllow",
                    "--enable-admission-plugins", "", "--etcd-compaction-interval", "0")
    on = SecureApiServer(workdir, etcd, "--port", "0", "--etcd-compaction-interval", "0", *ALL_ADMISSION,
                         *args.on_arg)
    results: dict[str, list[dict[str, Any]]] = {"off": [], "on": []}
    try:
        off.start()
        on.process.start()
        wait_for(lambda: httpx.get(f"{on.secure_url}/readyz", verify=on.ssl_context(), timeout=1).status_code == 200,
                 30, what="the secure apiserver")
        # a writer that is not in system:masters: RBAC decides each create
        on.issue("bench-writer", "bench-writer")
        with on.client("admin") as admin:
            for ns in ("bench-auth-off", "bench-auth-on"):
                admin.post("/api/v1/namespaces", json={"metadata": {"name": ns, "labels": ENFORCE}})
            # the pods' service account (no controller-manager here to make it): ServiceAccount admission checks it
            admin.post("/api/v1/namespaces/bench-auth-on/serviceaccounts", json={"metadata": {"name": "default"}})
            admin.post("/apis/rbac.authorization.k8s.io/v1/clusterroles", json={
                "metadata": {"name": "bench:pod-writer"},
                "rules": [{"verbs": ["create"], "apiGroups": [""], "resources": ["pods"]}]})
            admin.post("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", json={
                "metadata": {"name": "bench:pod-writer"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "bench:pod-writer"},
                "subjects": [{"kind": "User", "name": "bench-writer"}]})
        writer_ctx = on.ssl_context("bench-writer")
        with httpx.Client(base_url=on.secure_url, verify=writer_ctx) as writer:
            wait_for(lambda: writer.post("/api/v1/namespaces/bench-auth-on/pods",
                                         content=pod_body("probe", "bench-auth-on"),
                                         headers={"content-type": "application/json"}).status_code in (201, 409),
                     10, what="the writer's binding")

        targets = {
            "off": (off.port, None, "bench-auth-off", off.process.proc.pid),  # type: ignore[union-attr]
            "on": (on.secure_port, writer_ctx, "bench-auth-on", on.process.proc.pid),  # type: ignore[union-attr]
        }
        for r in range(rounds):
            for mode in ("off", "on"):
                port, ctx, ns, pid = targets[mode]
                print(f"[{time.strftime('%H:%M:%S')}] round {r + 1}/{rounds}, chain {mode} …", file=sys.stderr)
                warm = _run(closed_loop(port, ctx, ns, f"w{r}", 200, args.clients,
                                               CpuMeter({"apiserver": pid, "etcd": etcd.process.proc.pid})))  # type: ignore[union-attr]
                loop = _run(closed_loop(port, ctx, ns, f"c{r}", total, args.clients,
                                               CpuMeter({"apiserver": pid, "etcd": etcd.process.proc.pid})))  # type: ignore[union-attr]
                slow = _run(paced(port, ctx, ns, f"p{r}", 200.0, paced_count,
                                         CpuMeter({"apiserver": pid, "etcd": etcd.process.proc.pid})))  # type: ignore[union-attr]
                results[mode].append({"warmup_ok": warm["ok"], "closed": loop, "paced": slow})
        audit_lines = sum(1 for _ in on.audit_log.open("rb")) if on.audit_log.exists() else 0
    finally:
        on.stop()
        off.stop()
        etcd.stop()
        if not args.keep:
            import shutil

            shutil.rmtree(workdir, ignore_errors=True)

    rows = []
    summary: dict[str, Any] = {}
    figures = [("creates/s, 64 clients", ("closed", "rate"), "{:,.0f}"),
               ("apiserver CPU ms per create", ("closed", "cpu_ms_per_create"), "{:.3f}"),
               ("create p50 ms, 64 clients", ("closed", "latency_ms", "p50"), "{:.1f}"),
               ("create p99 ms, 64 clients", ("closed", "latency_ms", "p99"), "{:.1f}"),
               ("create p50 ms, paced 200/s", ("paced", "latency_ms", "p50"), "{:.2f}"),
               ("create p99 ms, paced 200/s", ("paced", "latency_ms", "p99"), "{:.1f}")]
    for label, keys, fmt in figures:
        a, b = _median(results["off"], *keys), _median(results["on"], *keys)
        change = (b / a - 1) * 100 if a else 0.0
        summary[label] = {"off": a, "on": b, "change_percent": round(change, 1)}
        rows.append((label, fmt.format(a), fmt.format(b), f"{change:+.1f}%"))
    cpu = summary["apiserver CPU ms per create"]
    capacity_cost = (1 - cpu["off"] / cpu["on"]) * 100 if cpu["on"] else 0.0
    rows.append(("creates/s per apiserver core (1000/CPU ms)", f"{1000 / cpu['off']:,.0f}", f"{1000 / cpu['on']:,.0f}",
                 f"{-capacity_cost:+.1f}%"))
    cost = -summary["creates/s, 64 clients"]["change_percent"]
    print()
    print(f"apiserver gate benchmark ({'quick' if args.quick else 'full'}, {rounds} rounds, medians; "
          f"chain on = TLS + x509 authn + Node,RBAC (non-master user) + admission with PodSecurity enforce=baseline "
          f"+ audit at Metadata)")
    print()
    print(render_table(("figure", "chain off", "full chain", "change"), rows))
    print()
    verdict = "met" if cost <= TARGET_PERCENT else "NOT MET"
    print(f"throughput cost of the chain: {cost:.1f}% measured (target ≤ {TARGET_PERCENT}%: {verdict}); "
          f"{capacity_cost:.1f}% of the apiserver's CPU-bound capacity "
          f"(its single event loop is the limit on a quiet machine); "
          f"audit log lines: {audit_lines:,}")
    others = [row["closed"]["others_cores"] for mode in results for row in results[mode]]
    if max(others) > 0.3:
        print(f"CAUTION: other processes were busy (up to {max(others):.2f} cores) during the closed loops")
    OUTPUT.mkdir(parents=True, exist_ok=True)
    out = OUTPUT / "auth.json"
    out.write_text(json.dumps({"benchmark": "auth", "quick": args.quick, "rounds": results, "summary": summary,
                               "podsecurity_enforce": ENFORCE["pod-security.kubernetes.io/enforce"],
                               "throughput_cost_percent": round(cost, 1),
                               "cpu_capacity_cost_percent": round(capacity_cost, 1), "audit_lines": audit_lines},
                              indent=2))
    print(f"JSON: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
