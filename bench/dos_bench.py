"""An unauthenticated denial-of-service attack on the apiserver while 64 clients do GETs (issue 10,
finding 1): what it costs the other clients and whether the control plane's components keep their leases.

    python -m bench.dos_bench [--quick] [--seconds S] [--clients N] [--slow N] [--keep]

One etcd, the apiserver on TLS (the cluster PKI, the full gate), and the controller-manager and the
scheduler as processes with leader election on, each authenticating with its kubeconfig. 64 keep-alive
TLS clients (kubernetes-admin) GET a namespace in a closed loop for S seconds without an attack, then
for S seconds during one: a separate process opens one TLS connection without credentials that sends
one 100 MB header as fast as it can, and 100 slow-header connections that send half a request and
then a byte every 2 s (opened again when the server closes them). Figures: client GET p50/p99/max in
each phase and the p99 ratio (target ≤ 2x), the attack's answers, the apiserver's memory growth, and
whether a component lost its lease (holderIdentity or leaseTransitions changed, or the process exited;
target: none). Traffic only to 127.0.0.1. Writes _output/bench/dos.json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import multiprocessing.queues
import shutil
import ssl
import sys
import time
from typing import Any

import httpx
import uvloop

from bench.apiserver_bench import render_table, summarize
from bench.auth_bench import TlsConn
from tests.auth_cluster import SecureApiServer
from tests.cluster import REPO, Etcd, Process, make_workdir, wait_for

OUTPUT = REPO / "_output" / "bench"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"
COMPONENTS = {"controller-manager": "kube-controller-manager", "scheduler": "kube-scheduler"}
BIG_HEADER = 100 << 20
GET_PATH = "/api/v1/namespaces/default"


# -- the attacker: its own process, so its CPU does not stall the measuring clients' loop -------------------


async def _big_header(port: int, cafile: str) -> dict[str, Any]:
    """One 100 MB header without credentials, sent as fast as the connection takes it."""
    started = time.monotonic()
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ssl.create_default_context(cafile=cafile))
    writer.write(b"GET /api/v1/pods HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ")
    answer = asyncio.ensure_future(reader.read(4096))
    sent, piece = 0, b"a" * (64 << 10)
    try:
        while sent < BIG_HEADER and not answer.done():
            writer.write(piece)
            sent += len(piece)
            await writer.drain()
        if not answer.done():
            writer.write(b"\r\n\r\n")
            await writer.drain()
    except (ConnectionError, ssl.SSLError):
        pass
    first = b""
    with contextlib.suppress(ConnectionError, ssl.SSLError, TimeoutError):
        first = await asyncio.wait_for(answer, 60)
    answer.cancel()
    writer.close()
    return {"sent_mb": round(sent / (1 << 20), 1), "answer": first.split(b"\r\n", 1)[0].decode(errors="replace"),
            "seconds": round(time.monotonic() - started, 3)}


async def _slow_header(port: int, cafile: str, until: float, stats: dict[str, Any]) -> None:
    """Half a request, then a byte every 2 s; again on a new connection when the server closes it."""
    context = ssl.create_default_context(cafile=cafile)
    while time.monotonic() < until:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context)
        except (OSError, ssl.SSLError):
            stats["connect_errors"] += 1
            await asyncio.sleep(1)
            continue
        opened = time.monotonic()
        stats["opened"] += 1
        writer.write(b"GET /api/v1/namespaces/default HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        try:
            while time.monotonic() < until:
                writer.write(b"s")
                await writer.drain()
                with contextlib.suppress(TimeoutError):
                    if await asyncio.wait_for(reader.read(4096), 2.0) == b"":
                        raise ConnectionResetError
            writer.close()
            return
        except (ConnectionError, ssl.SSLError):
            stats["closed_by_server"] += 1
            stats["held_s"].append(round(time.monotonic() - opened, 1))
            writer.close()


async def _attack(port: int, cafile: str, seconds: float, slow: int) -> dict[str, Any]:
    until = time.monotonic() + seconds
    stats: dict[str, Any] = {"opened": 0, "closed_by_server": 0, "connect_errors": 0, "held_s": []}
    slow_tasks = [asyncio.ensure_future(_slow_header(port, cafile, until, stats)) for _ in range(slow)]
    big = await _big_header(port, cafile)
    await asyncio.gather(*slow_tasks, return_exceptions=True)
    held = stats.pop("held_s")
    return {"big_header": big, "slow": {**stats, "count": slow,
                                        "held_until_closed_s": summarize(held) if held else None}}


def attacker(port: int, cafile: str, seconds: float, slow: int, out: multiprocessing.queues.Queue[Any]) -> None:
    out.put(uvloop.run(_attack(port, cafile, seconds, slow)))


# -- the measuring side ------------------------------------------------------------------------------------


async def get_loop(port: int, context: ssl.SSLContext, clients: int, seconds: float) -> dict[str, Any]:
    """`clients` keep-alive TLS connections doing GETs back to back for `seconds`."""
    latencies: list[float] = []
    errors: list[str] = []
    until = time.monotonic() + seconds

    async def client() -> None:
        conn = TlsConn("127.0.0.1", port, context)
        while time.monotonic() < until:
            started = time.monotonic()
            try:
                status, _ = await conn.request("GET", GET_PATH)
            except (OSError, ssl.SSLError, asyncio.IncompleteReadError) as e:
                errors.append(repr(e))
                conn.close()
                continue
            if status == 200:
                latencies.append(time.monotonic() - started)
            else:
                errors.append(str(status))
        conn.close()

    started = time.monotonic()
    await asyncio.gather(*(client() for _ in range(clients)))
    elapsed = time.monotonic() - started
    return {"latency_ms": summarize(latencies, 1000), "gets_per_s": round(len(latencies) / elapsed),
            "errors": len(errors), "error_examples": sorted(set(errors))[:5]}


def leases(admin: httpx.Client) -> dict[str, dict[str, Any]]:
    out = {}
    for component, lease in COMPONENTS.items():
        r = admin.get(f"{LEASES}/{lease}")
        out[component] = r.json().get("spec", {}) if r.status_code == 200 else {}
    return out


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


async def run(args: argparse.Namespace) -> dict[str, Any]:
    workdir = make_workdir("minik8s-dos-bench-")
    etcd = Etcd(workdir)
    processes: list[Process] = []
    server: SecureApiServer | None = None
    try:
        etcd.start()
        server = SecureApiServer(workdir, etcd).start()
        pki = server.pki
        processes = [
            Process("controller-manager", [sys.executable, "-m", "controllers", "--secure-port=0", "--kubeconfig",
                                           str(pki.kubeconfig("controller-manager")),
                                           "--service-account-private-key-file", str(pki.sa_key)],
                    workdir / "controller-manager.log"),
            Process("scheduler", [sys.executable, "-m", "scheduler", "--kubeconfig", str(pki.kubeconfig("scheduler")),
                                  "--secure-port=0"],
                    workdir / "scheduler.log"),
        ]
        for p in processes:
            p.start()
        with server.client("admin") as admin:
            wait_for(lambda: all(s.get("holderIdentity") for s in leases(admin).values()), 60,
                     what="the controller-manager and the scheduler to hold their leases")
            before = leases(admin)
            context = server.ssl_context("admin")
            api_pid = server.process.proc.pid  # type: ignore[union-attr]

            baseline = await get_loop(server.secure_port, context, args.clients, args.seconds)
            rss_before = rss_mb(api_pid)
            queue: multiprocessing.queues.Queue[Any] = multiprocessing.get_context("spawn").Queue()
            attack_proc = multiprocessing.get_context("spawn").Process(
                target=attacker, args=(server.secure_port, server.ca, args.seconds, args.slow, queue), daemon=True)
            attack_proc.start()
            # the attacker's 100 slow connections and its 100 MB start while the clients run
            attacked = await get_loop(server.secure_port, context, args.clients, args.seconds)
            attack = await asyncio.to_thread(queue.get, True, args.seconds + 120)
            attack_proc.join(30)
            if attack_proc.is_alive():
                attack_proc.kill()
            rss_peak = rss_mb(api_pid, "VmHWM")
            after = leases(admin)

        lost = {}
        for component, p in zip(COMPONENTS, processes, strict=True):
            b, a = before[component], after[component]
            reasons = []
            if not p.alive():
                reasons.append("process exited")
            if a.get("holderIdentity") != b.get("holderIdentity"):
                reasons.append(f"holder {b.get('holderIdentity')} → {a.get('holderIdentity')}")
            if a.get("leaseTransitions", 0) != b.get("leaseTransitions", 0):
                reasons.append(f"leaseTransitions {b.get('leaseTransitions')} → {a.get('leaseTransitions')}")
            if a.get("renewTime") == b.get("renewTime"):
                reasons.append("not renewed during the attack")
            lost[component] = reasons
        p99_ratio = (attacked["latency_ms"]["p99"] / baseline["latency_ms"]["p99"]
                     if baseline["latency_ms"].get("p99") and attacked["latency_ms"].get("p99") else None)
        return {"benchmark": "dos", "quick": args.quick, "clients": args.clients, "seconds": args.seconds,
                "slow_connections": args.slow, "baseline": baseline, "attacked": attacked, "attack": attack,
                "p99_ratio": round(p99_ratio, 2) if p99_ratio else None,
                "leases_before": before, "leases_after": after, "lost_leases": lost,
                "components_losing_lease": sum(1 for reasons in lost.values() if reasons),
                "apiserver_rss_mb": {"before_attack": rss_before, "peak": rss_peak,
                                     "growth": round(rss_peak - rss_before, 1)}}
    finally:
        for p in processes:
            p.stop()
        if server is not None:
            server.stop()
        etcd.stop()
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            print(f"kept {workdir}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.dos_bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="8 s per phase (default 40 s: past the 32 s header timeout)")
    p.add_argument("--seconds", type=float, default=None, help="length of each phase")
    p.add_argument("--clients", type=int, default=64)
    p.add_argument("--slow", type=int, default=100, help="slow-header connections")
    p.add_argument("--keep", action="store_true", help="keep the work directory")
    args = p.parse_args(argv)
    if args.seconds is None:
        args.seconds = 8.0 if args.quick else 40.0
    result = uvloop.run(run(args))
    rows = [[name, f"{d['latency_ms'].get('p50', 0):.1f}", f"{d['latency_ms'].get('p99', 0):.1f}",
             f"{d['latency_ms'].get('max', 0):.1f}", str(d["gets_per_s"]), str(d["errors"])]
            for name, d in (("no attack", result["baseline"]), ("under attack", result["attacked"]))]
    print(render_table(["phase", "GET p50 ms", "p99 ms", "max ms", "GETs/s", "errors"], rows))
    print(f"p99 ratio {result['p99_ratio']} (target ≤ 2); 100 MB header: {result['attack']['big_header']}; "
          f"slow: {result['attack']['slow']}")
    print(f"apiserver RSS {result['apiserver_rss_mb']}; components losing their lease: "
          f"{result['components_losing_lease']} {result['lost_leases']} (target 0)")
    OUTPUT.mkdir(parents=True, exist_ok=True)
    (OUTPUT / "dos.json").write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
