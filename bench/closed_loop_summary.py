"""Closed-loop create benchmarks that compare secure apiserver set-ups round by round (encryption at rest off vs
on, request metrics off vs on, ...): the alternating rounds themselves (`run_rounds`), and their summary, the
medians of each set-up's rounds and each set-up's ratio to the first one, as one table."""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import ssl
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import uvloop

from bench.apiserver_bench import CpuMeter, render_table
from bench.auth_bench import closed_loop
from tests.auth_cluster import SecureApiServer
from tests.cluster import REPO, Etcd, wait_for

OUTPUT = REPO / "_output" / "bench"

# (label, path into a closed_loop() result, format)
FIGURES = (("creates/s, 64 clients", ("rate",), "{:,.0f}"),
           ("apiserver CPU ms per create", ("cpu_ms_per_create",), "{:.3f}"),
           ("create p50 ms, 64 clients", ("latency_ms", "p50"), "{:.1f}"),
           ("create p99 ms, 64 clients", ("latency_ms", "p99"), "{:.1f}"))


def _dig(row: dict[str, Any], key: tuple[str, ...]) -> Any:
    value: Any = row
    for k in key:
        value = value[k]
    return value


def medians_and_rows(results: dict[str, list[dict[str, Any]]],
                     modes: tuple[str, ...]) -> tuple[dict[str, dict[str, float]], list[tuple[str, ...]]]:
    """Per figure, each mode's median over its rounds, and the table's rows: the figure, the medians, then
    each later mode ÷ the first (the baseline)."""
    summary: dict[str, dict[str, float]] = {}
    rows = []
    base_mode = modes[0]
    for label, key, fmt in FIGURES:
        medians = {mode: statistics.median(float(_dig(row, key)) for row in results[mode]) for mode in modes}
        summary[label] = medians
        base = medians[base_mode]
        rows.append((label, *(fmt.format(medians[m]) for m in modes),
                     *(f"{medians[m] / base:.3f}x" if base else "—" for m in modes[1:])))
    return summary, rows


def busy_caution(results: dict[str, list[dict[str, Any]]]) -> str | None:
    """A warning when other processes took CPU during the closed loops (the figures are then unfair)."""
    others = [row["others_cores"] for rounds in results.values() for row in rounds]
    if others and max(others) > 0.3:
        return f"CAUTION: other processes were busy (up to {max(others):.2f} cores) during the closed loops"
    return None


def run_rounds(servers: dict[str, SecureApiServer], etcd: Etcd, *, namespace_prefix: str, rounds: int, total: int,
               clients: int, body: Callable[[str, str], bytes], resource: str) -> dict[str, list[dict[str, Any]]]:
    """Start the servers (one etcd), make a namespace on each, then per round a warm-up and `total` creates on
    each server in turn, so machine noise spreads over every set-up. Each set-up's rounds, in order."""
    results: dict[str, list[dict[str, Any]]] = {mode: [] for mode in servers}
    for server in servers.values():
        server.process.start()
    for server in servers.values():
        wait_for(lambda s=server: httpx.get(f"{s.secure_url}/readyz", verify=s.ssl_context(),  # type: ignore[misc]
                                            timeout=1).status_code == 200, 30, what="the secure apiserver")
    for mode, server in servers.items():
        with server.client("admin") as admin:
            r = admin.post("/api/v1/namespaces", json={"metadata": {"name": f"{namespace_prefix}-{mode}"}})
            assert r.status_code == 201, r.text
    for r_i in range(rounds):
        for mode, server in servers.items():
            ns = f"{namespace_prefix}-{mode}"
            pid = server.process.proc.pid  # type: ignore[union-attr]
            ctx = server.ssl_context("admin")
            print(f"[{time.strftime('%H:%M:%S')}] round {r_i + 1}/{rounds}, {mode} …", file=sys.stderr)

            def run(prefix: str, count: int, server: SecureApiServer = server, ns: str = ns,
                    ctx: ssl.SSLContext = ctx, pid: int = pid) -> dict[str, Any]:
                meter = CpuMeter({"apiserver": pid, "etcd": etcd.process.proc.pid})  # type: ignore[union-attr]
                with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                    return runner.run(closed_loop(server.secure_port, ctx, ns, prefix, count, clients, meter,
                                                  body=body, resource=resource))

            run(f"w{r_i}", 200)
            result = run(f"c{r_i}", total)
            if result["ok"] != total:
                raise SystemExit(f"{mode}: {total - result['ok']} of {total} creates failed: {result['statuses']}")
            results[mode].append(result)
    return results


def stop_all(servers: dict[str, SecureApiServer], etcd: Etcd, workdir: Path, keep: bool) -> None:
    """Stop the set-ups' apiservers and their etcd; remove the work directory unless kept."""
    for server in servers.values():
        server.stop()
    etcd.stop()
    if not keep:
        shutil.rmtree(workdir, ignore_errors=True)


def round_args(prog: str, doc: str, argv: list[str] | None) -> tuple[argparse.Namespace, int, int]:
    """The flags every such bench takes, and the rounds and creates per closed loop they mean."""
    p = argparse.ArgumentParser(prog=prog, description=doc.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="1,000 creates per closed loop, 2 rounds")
    p.add_argument("--rounds", type=int, default=None, help="rounds (default 3, quick 2)")
    p.add_argument("--clients", type=int, default=64)
    p.add_argument("--keep", action="store_true", help="keep the work directory")
    args = p.parse_args(argv)
    return args, args.rounds or (2 if args.quick else 3), 1000 if args.quick else 3000


def report_ratio(name: str, title: str, results: dict[str, list[dict[str, Any]]], modes: tuple[str, str],
                 args: argparse.Namespace, rounds: int) -> float | None:
    """Print the table of the two set-ups and the creates/s ratio of the second to the first; write
    _output/bench/NAME.json with the rounds, the summary and `create_ratio`."""
    base, measured = modes
    summary, rows = medians_and_rows(results, modes)
    print()
    print(f"{title} ({'quick' if args.quick else 'full'}, {rounds} rounds, medians)")
    print()
    print(render_table(("figure", *modes, f"{measured}/{base}"), rows))
    if caution := busy_caution(results):
        print(caution)
    rate = summary["creates/s, 64 clients"]
    create_ratio = round(rate[measured] / rate[base], 3) if rate[base] else None
    print(f"creates/s, {measured} ÷ {base}: {create_ratio}")
    OUTPUT.mkdir(parents=True, exist_ok=True)
    out = OUTPUT / f"{name}.json"
    out.write_text(json.dumps({"benchmark": name, "quick": args.quick, "rounds": results, "summary": summary,
                               "create_ratio": create_ratio}, indent=2))
    print(f"JSON: {out}")
    return create_ratio
