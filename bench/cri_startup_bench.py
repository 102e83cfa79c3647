"""Pod start-up through CRI, on each runtime, against raw `docker run` in the same run: what a runtime costs
the kubelet, without the kubelet (critest's benchmark mode, `critest --benchmark`, measures the same calls).

    python -m bench.cri_startup_bench [--quick] [--counts N,N,..] [--reps N,N,..] [--runtimes docker,containerd]
                                      [--timeout S] [--output FILE]

Starts, on this host, the two CRI runtimes a node can have: the Docker shim (`python -m dockershim`, the
default runtime) and a containerd of the node's own (containerd_node: containerd's CRI plugin, images
imported from Docker), each handed a podCIDR with UpdateRuntimeConfig as a kubelet does. Per N = 1, 10, 30
pods (5, 3, 2 repetitions), N pods are started at once, each as the kubelet's SyncPod starts a new pod:
RunPodSandbox (pause + CNI network) → CreateContainer (minik8s/httpd:1) → StartContainer, timed per pod and
per batch; the container gets the CPU weight the kubelet gives a BestEffort pod's (cpu_shares 2, as the
shim gives every sandbox). The baseline, interleaved with them in the same repetitions: raw Docker, the
pause container on Docker's default bridge (a veth and an address, as CNI gives a sandbox) then httpd in
its namespaces, both at that weight (bench.pod_startup_bench's raw pod), and plain `docker run` (no
network, Docker's default weight: less than a pod), whose ratio is in the JSON beside.

Ratios: each runtime ÷ raw Docker, and containerd ÷ Docker shim. Everything made is removed at the end,
also on failure, SIGTERM or the time limit. Results to _output/bench/cri_startup.json.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import json
import os
import shutil
import signal
import sys
import time
import uuid
from pathlib import Path
from types import FrameType
from typing import Any

import docker
import grpc

from bench.apiserver_bench import background_load, render_table
from bench.pod_startup_bench import (
    BEST_EFFORT_CPU_SHARES,
    RAW_LABEL,
    Deadline,
    int_list,
    ratio,
    raw_docker_pod,
    remove_raw_docker_pods,
    summary,
)
from containerd_node.cleanup import cleanup_node
from containerd_node.launcher import ContainerdNode
from machinery.cri import api_pb2 as pb
from machinery.cri import api_pb2_grpc as rpc
from tests.cluster import REPO, make_workdir
from tests.node_process import HTTPD, PAUSE, ensure_images, free_pod_cidrs, release_cidr

OUTPUT = REPO / "_output" / "bench"

RUNTIMES = ("docker", "containerd")
JSONDict = dict[str, Any]


class CriRuntime:
    """One CRI runtime on its socket, with a podCIDR handed over."""

    def __init__(self, name: str, endpoint: str) -> None:
        self.name = name
        self.endpoint = endpoint
        self.channel = grpc.aio.insecure_channel(endpoint)
        self.runtime = rpc.RuntimeServiceStub(self.channel)
        self.node = f"bench-{name}"

    async def configure(self, pod_cidr: str, timeout: float = 30.0) -> None:
        await self.runtime.UpdateRuntimeConfig(pb.UpdateRuntimeConfigRequest(runtime_config=pb.RuntimeConfig(
            network_config=pb.NetworkConfig(pod_cidr=pod_cidr))), timeout=10)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status = await self.runtime.Status(pb.StatusRequest(), timeout=10)
            if all(c.status for c in status.status.conditions):
                return
            await asyncio.sleep(0.05)
        raise TimeoutError(f"{self.name}: network not ready {timeout}s after UpdateRuntimeConfig")

    async def start_pod(self, name: str, log_dir: Path) -> float:
        """RunPodSandbox → CreateContainer → StartContainer, as SyncPod for a new pod; seconds taken."""
        uid = uuid.uuid4().hex
        sandbox = pb.PodSandboxConfig(
            metadata=pb.PodSandboxMetadata(name=name, namespace="bench", uid=uid), hostname=name[-63:],
            log_directory=str(log_dir / uid),
            labels={"io.minik8s.managed": "true", "io.minik8s.node": self.node, RAW_LABEL: "cri"})
        started = time.monotonic()
        sandbox_id = (await self.runtime.RunPodSandbox(pb.RunPodSandboxRequest(config=sandbox), timeout=120)
                      ).pod_sandbox_id
        created = await self.runtime.CreateContainer(pb.CreateContainerRequest(
            pod_sandbox_id=sandbox_id, sandbox_config=sandbox, config=pb.ContainerConfig(
                metadata=pb.ContainerMetadata(name="web"), image=pb.ImageSpec(image=HTTPD), log_path="web/0.log",
                labels={"io.minik8s.managed": "true"},
                linux=pb.LinuxContainerConfig(resources=pb.LinuxContainerResources(
                    cpu_shares=BEST_EFFORT_CPU_SHARES)))), timeout=120)
        await self.runtime.StartContainer(pb.StartContainerRequest(container_id=created.container_id), timeout=120)
        return time.monotonic() - started

    async def remove_all(self) -> None:
        listed = await self.runtime.ListPodSandbox(pb.ListPodSandboxRequest(), timeout=30)

        async def remove(sandbox_id: str) -> None:
            await self.runtime.StopPodSandbox(pb.StopPodSandboxRequest(pod_sandbox_id=sandbox_id), timeout=120)
            await self.runtime.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=sandbox_id), timeout=120)

        await asyncio.gather(*(remove(s.id) for s in listed.items if s.labels.get(RAW_LABEL) == "cri"))

    async def close(self) -> None:
        await self.channel.close()


class Bench:
    def __init__(self, args: argparse.Namespace, workdir: Path) -> None:
        self.args = args
        self.workdir = workdir
        self.tag = uuid.uuid4().hex[:6]
        self.docker = docker.APIClient()
        self.pool = concurrent.futures.ThreadPoolExecutor(32)
        self.runtimes: dict[str, CriRuntime] = {}
        self.results: JSONDict = {"raw_docker": {}, "raw_docker_plain": {},
                                  **{name: {} for name in args.runtimes}}
        self.errors: dict[str, str] = {}

    # -- raw docker, as bench.pod_startup_bench measures it

    def raw_pod(self, name: str, like_a_pod: bool = True) -> float:
        return raw_docker_pod(self.docker, name, self.tag, like_a_pod)

    def raw_cleanup(self) -> None:
        remove_raw_docker_pods(self.docker, self.pool, self.tag)

    async def raw_batch(self, count: int, run: str, like_a_pod: bool = True) -> tuple[list[float], float]:
        loop = asyncio.get_running_loop()
        started = time.monotonic()
        per_pod = await asyncio.gather(*(loop.run_in_executor(self.pool, self.raw_pod, f"{run}-{i}", like_a_pod)
                                         for i in range(count)))
        batch = time.monotonic() - started
        await loop.run_in_executor(self.pool, self.raw_cleanup)
        return list(per_pod), batch

    async def cri_batch(self, runtime: CriRuntime, count: int, run: str) -> tuple[list[float], float]:
        started = time.monotonic()
        per_pod = await asyncio.gather(*(runtime.start_pod(f"{run}-{i}", self.workdir / "logs")
                                         for i in range(count)))
        batch = time.monotonic() - started
        await runtime.remove_all()
        return list(per_pod), batch

    # -- the run

    async def warm_up(self) -> None:
        """One pod each, not counted: first-use costs (image unpacking, the bridge, caches) out of the figures."""
        await self.raw_batch(1, f"mk8s-bench-warm-{self.tag}")
        for runtime in self.runtimes.values():
            await self.cri_batch(runtime, 1, f"warm-{self.tag}")

    async def run(self) -> None:
        await self.warm_up()
        for count, reps in zip(self.args.counts, self.args.reps, strict=True):
            runs: dict[str, list[JSONDict]] = {k: [] for k in self.results}
            for rep in range(reps):
                # interleaved, so drifting machine load touches every runtime alike
                per_pod, batch = await self.raw_batch(count, f"mk8s-bench-raw-{self.tag}-{count}-{rep}")
                runs["raw_docker"].append({"per_pod_s": [round(v, 4) for v in per_pod], "batch_s": round(batch, 4)})
                per_pod, batch = await self.raw_batch(count, f"mk8s-bench-raw-{self.tag}-{count}-{rep}n", False)
                runs["raw_docker_plain"].append({"per_pod_s": [round(v, 4) for v in per_pod],
                                                      "batch_s": round(batch, 4)})
                for name, runtime in self.runtimes.items():
                    try:
                        per_pod, batch = await self.cri_batch(runtime, count, f"p{self.tag}-{count}-{rep}")
                    except grpc.aio.AioRpcError as e:
                        self.errors[f"{name}.{count}"] = f"{e.code().name}: {e.details()}"
                        continue
                    runs[name].append({"per_pod_s": [round(v, 4) for v in per_pod], "batch_s": round(batch, 4)})
            for name, measured in runs.items():
                self.results[name][str(count)] = {
                    "per_pod": summary([v for r in measured for v in r["per_pod_s"]]),
                    "batch": summary([r["batch_s"] for r in measured]), "runs": measured}

    def figures(self) -> list[JSONDict]:
        """Per count: each runtime's per-pod p50 and batch p50, ÷ raw Docker; containerd ÷ Docker shim."""
        out = []
        for count in map(str, self.args.counts):
            raw = self.results["raw_docker"].get(count, {})
            bare = self.results["raw_docker_plain"].get(count, {})
            for name in self.args.runtimes:
                mine = self.results[name].get(count, {})
                for kind in ("per_pod", "batch"):
                    value = mine.get(kind, {}).get("p50")
                    base = raw.get(kind, {}).get("p50")
                    out.append({"count": int(count), "runtime": name, "kind": kind, "p50_s": value,
                                "raw_docker_p50_s": base, "ratio_vs_raw": _round(ratio(value, base)),
                                "ratio_vs_raw_plain": _round(ratio(value, bare.get(kind, {}).get("p50")))})
            if {"docker", "containerd"} <= set(self.args.runtimes):
                for kind in ("per_pod", "batch"):
                    c = self.results["containerd"].get(count, {}).get(kind, {}).get("p50")
                    d = self.results["docker"].get(count, {}).get(kind, {}).get("p50")
                    out.append({"count": int(count), "runtime": "containerd/docker", "kind": kind,
                                "ratio": _round(ratio(c, d))})
        return out

    def table(self) -> str:
        rows = []
        for f in self.figures():
            if f["runtime"] == "containerd/docker":
                rows.append([str(f["count"]), "containerd ÷ Docker shim", f["kind"], "", "", _fmt_x(f["ratio"])])
            else:
                rows.append([str(f["count"]), f["runtime"], f["kind"], _fmt_s(f["p50_s"]),
                             _fmt_s(f["raw_docker_p50_s"]), _fmt_x(f["ratio_vs_raw"])])
        return render_table(["pods", "runtime", "p50 of", "via CRI", "raw docker run", "ratio"], rows)


def _round(value: float | None) -> float | None:
    return round(value, 3) if value is not None else None


def _fmt_s(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f} s"


def _fmt_x(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}x"


async def start_runtimes(bench: Bench, stack: contextlib.ExitStack) -> None:
    """The runtimes asked for, each on a free podCIDR, removed with all they made when `stack` closes."""
    cidrs = free_pod_cidrs(len(bench.args.runtimes))
    for cidr in cidrs:
        stack.callback(release_cidr, cidr)
    for name, cidr in zip(bench.args.runtimes, cidrs, strict=True):
        node = f"bench-{name}-{bench.tag}"
        if name == "containerd":
            containerd = ContainerdNode(node, bench.workdir / "containerd")
            def remove_containerd(c: ContainerdNode = containerd) -> None:
                print(cleanup_node(c.layout.base_dir).summary(), file=sys.stderr)

            stack.callback(remove_containerd)
            await asyncio.to_thread(containerd.start, (PAUSE, HTTPD))
            runtime = CriRuntime(name, containerd.endpoint)
        else:
            from tests.node_process import DockershimProcess

            root = bench.workdir / f"dockershim-{node}"
            shim = DockershimProcess(bench.workdir, node, root)

            def stop_shim(s: DockershimProcess = shim, n: str = node, r: Path = root) -> None:
                from dockershim.cleanup import cleanup_host_rules_if_unused
                from dockershim.cleanup import cleanup_node as shim_cleanup

                s.kill()
                asyncio.run(shim_cleanup(n, r))
                asyncio.run(cleanup_host_rules_if_unused())
                s.remove_socket_dir()

            stack.callback(stop_shim)
            await asyncio.to_thread(shim.start)
            runtime = CriRuntime(name, shim.endpoint)
        runtime.node = node
        await runtime.configure(cidr)
        bench.runtimes[name] = runtime


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _deadline(signum: int, frame: FrameType | None) -> None:
    raise Deadline


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.cri_startup_bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="one repetition per pod count")
    p.add_argument("--counts", type=int_list, default=[1, 10, 30], metavar="N,N,...")
    p.add_argument("--reps", type=int_list, default=None, metavar="N,N,...", help="default 5,3,2")
    p.add_argument("--runtimes", default=",".join(RUNTIMES), help="docker,containerd (default: both)")
    p.add_argument("--timeout", type=float, default=900, help="overall time limit in seconds")
    p.add_argument("--output", type=Path, default=OUTPUT / "cri_startup.json")
    args = p.parse_args(argv)
    args.runtimes = [r.strip() for r in args.runtimes.split(",") if r.strip()]
    if not args.runtimes or set(args.runtimes) - set(RUNTIMES):
        p.error(f"--runtimes: choose among {', '.join(RUNTIMES)}")
    args.reps = [1] * len(args.counts) if args.quick else args.reps or (
        [5, 3, 2] if args.counts == [1, 10, 30] else [1] * len(args.counts))
    if len(args.reps) != len(args.counts):
        p.error("--reps needs one repetition count per --counts entry")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGALRM, _deadline)
    signal.setitimer(signal.ITIMER_REAL, args.timeout)
    ensure_images()
    started = time.time()
    busy_before = background_load()
    workdir = make_workdir("minik8s-cribench-")
    bench = Bench(args, workdir)
    status = "completed"

    async def go() -> None:
        try:
            await start_runtimes(bench, stack)
            await bench.run()
        finally:
            for runtime in bench.runtimes.values():
                with contextlib.suppress(Exception):
                    await runtime.remove_all()
                await runtime.close()

    with contextlib.ExitStack() as stack:
        try:
            asyncio.run(go())
        except KeyboardInterrupt:
            status = "interrupted"
        except Deadline:
            status = f"stopped by --timeout {args.timeout:.0f}s"
        except Exception as e:
            status = f"failed: {type(e).__name__}: {e}"
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            with contextlib.suppress(Exception):
                bench.raw_cleanup()
    bench.pool.shutdown()
    shutil.rmtree(workdir, ignore_errors=True)
    results = {"status": status, "duration_s": round(time.time() - started, 1), "counts": args.counts,
               "reps": args.reps, "runtimes": args.runtimes,
               "machine": {"cpus": os.cpu_count(), "busy_cores_before_start": round(busy_before, 2)},
               "figures": bench.figures(), **bench.results, "errors": bench.errors}
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    print(f"\npod start-up through CRI vs raw docker run ({status}, {os.cpu_count()} CPUs, "
          f"{results['duration_s']:.0f}s; one run: compare ratios, not absolutes)\n")
    print(bench.table())
    if busy_before > 0.25:
        print(f"\nCAUTION: other processes were busy before the start ({busy_before:.2f} cores)")
    for name, error in bench.errors.items():
        print(f"  {name}: {error}")
    print(f"\nJSON: {args.output}")
    return 0 if status == "completed" and not bench.errors else 1


if __name__ == "__main__":
    sys.exit(main())
