"""Streaming benchmark (issue 18): `kubectl port-forward` throughput ÷ the same transfer straight to the pod IP,
and the round-trip latency of a 1-byte echo through a `pods/exec` websocket.

    python -m bench.streaming_bench [--quick] [--mb 50] [--rounds 3] [--echoes 300] [--output FILE]

A fresh etcd, apiserver and one kubelet on the Docker shim (real processes). The pod runs busybox `nc` servers:
port 9000 sends --mb MB of zeros and closes (download), port 9001 reads --mb MB and answers `ok` (upload).
Each round times both directions through kubectl 1.33's port-forward (its SPDY-in-websocket tunnel → apiserver
→ kubelet, which splices the websocket to the shim's streaming server → the shim's socket inside the pod's
network namespace) and straight to the pod IP from the host, the two paths alternating; the figure is the ratio
of the summed throughputs (target ≥ 0.5).

Exec: one websocket (v5.channel.k8s.io) to `pods/exec` running `cat` with stdin, through the apiserver and the
kubelet to the shim; each echo sends one byte on stdin and waits for it on stdout: p50 and p99 over --echoes,
against the same 1-byte echo over a plain TCP connection to a `cat` server in the pod (nc), same run.
The CPU time (user + system, /proc) of kubectl, the apiserver, the kubelet and the shim during the port-forward
transfers, per MB and direction, says what each hop costs whatever the host's load does to throughput.
Not a test: it prints figures and checks only that every byte came back.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from tests.cluster import REPO, ApiServer, Etcd, make_workdir, wait_for
from tests.kubectl import Kubectl, find_kubectl
from tests.node_process import BUSYBOX, KubeletProcess, cleanup, ensure_images, free_pod_cidrs

OUTPUT = REPO / "_output" / "bench"
NS = "default"
JSONDict = dict[str, Any]


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))]


def pod(node: str, size: int) -> JSONDict:
    script = (f"nc -ll -p 9000 -e head -c {size} /dev/zero & "
              f"printf '#!/bin/sh\\nhead -c {size} > /dev/null\\necho ok\\n' > /up.sh && chmod +x /up.sh && "
              "(nc -ll -p 9001 -e /up.sh &) && exec nc -ll -p 9002 -e cat")
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "sink"},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": BUSYBOX, "command": ["sh", "-c", script],
                                                       "readinessProbe": {"tcpSocket": {"port": 9002},
                                                                          "periodSeconds": 1}}]}}


def download(host: str, port: int, size: int) -> float:
    """Seconds to receive `size` bytes."""
    started = time.perf_counter()
    got = 0
    with socket.create_connection((host, port), timeout=60) as s:
        while chunk := s.recv(1 << 20):
            got += len(chunk)
    assert got == size, f"got {got} of {size} bytes from {host}:{port}"
    return time.perf_counter() - started


def upload(host: str, port: int, size: int) -> float:
    """Seconds to send `size` bytes and get the server's `ok` (it read them all)."""
    block = b"\0" * (1 << 20)
    started = time.perf_counter()
    with socket.create_connection((host, port), timeout=60) as s:
        sent = 0
        while sent < size:
            n = min(len(block), size - sent)
            s.sendall(block[:n])
            sent += n
        answer = b""
        while not answer.endswith(b"\n"):
            chunk = s.recv(16)
            if not chunk:
                break
            answer += chunk
    assert answer == b"ok\n", answer
    return time.perf_counter() - started


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (/proc/<pid>/stat utime and stime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def exec_echo_latencies(apiserver: ApiServer, count: int) -> list[float]:
    from websockets.sync.client import connect

    url = (apiserver.url.replace("http://", "ws://") +
           f"/api/v1/namespaces/{NS}/pods/sink/exec?command=cat&stdin=true&stdout=true")
    latencies: list[float] = []
    with connect(url, subprotocols=["v5.channel.k8s.io"], open_timeout=30) as ws:  # type: ignore[list-item]
        for i in range(count + 5):
            byte = bytes([97 + i % 26])
            started = time.perf_counter()
            ws.send(b"\x00" + byte)
            while (message := ws.recv(timeout=30)) != b"\x01" + byte:
                assert isinstance(message, bytes) and message[:1] != b"\x03", message
            if i >= 5:  # the first echoes warm the path up
                latencies.append(time.perf_counter() - started)
    return latencies


def tcp_echo_latencies(host: str, count: int) -> list[float]:
    latencies: list[float] = []
    with socket.create_connection((host, 9002), timeout=30) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for i in range(count + 5):
            byte = bytes([97 + i % 26])
            started = time.perf_counter()
            s.sendall(byte)
            assert s.recv(1) == byte
            if i >= 5:
                latencies.append(time.perf_counter() - started)
    return latencies


def run(mb: int, rounds: int, echoes: int) -> JSONDict:
    kubectl_bin = find_kubectl("1.33")
    if kubectl_bin is None:
        raise SystemExit("kubectl 1.33 is needed (hack/setup.sh installs it)")
    ensure_images()
    workdir = make_workdir("minik8s-bench-streaming-")
    etcd = Etcd(workdir)
    etcd.start()
    apiserver = ApiServer(workdir, etcd)
    kubelet: KubeletProcess | None = None
    forward = None
    try:
        apiserver.start()
        kubelet = KubeletProcess(workdir, apiserver, f"bench-st-{uuid.uuid4().hex[:6]}", free_pod_cidrs(1)[0])
        size = mb * 1024 * 1024
        with httpx.Client(base_url=apiserver.url, timeout=30) as api:
            kubelet.start(api)
            assert api.post(f"/api/v1/namespaces/{NS}/pods", json=pod(kubelet.node, size)).status_code == 201

            def ready() -> bool:
                status = api.get(f"/api/v1/namespaces/{NS}/pods/sink").json().get("status") or {}
                return any(c.get("ready") for c in status.get("containerStatuses") or [])

            wait_for(ready, 120, what="the sink pod ready")
            pod_ip = api.get(f"/api/v1/namespaces/{NS}/pods/sink").json()["status"]["podIP"]
        kubectl = Kubectl(kubectl_bin, "1.33", apiserver.url, workdir / "kubectl", NS)

        forward = subprocess.Popen(kubectl.argv("port-forward", "pod/sink", ":9000", ":9001"), stdout=subprocess.PIPE,
                                   stderr=subprocess.DEVNULL, text=True, env=kubectl.env)
        assert forward.stdout is not None
        local: list[int] = []
        while len(local) < 2:
            line = forward.stdout.readline()
            if not line:
                raise SystemExit("kubectl port-forward ended before forwarding")
            if line.startswith("Forwarding from 127.0.0.1:"):
                local.append(int(line.split(":")[1].split()[0]))
        times = {path: {"down": 0.0, "up": 0.0} for path in ("portforward", "direct")}
        # the CPU each hop spends per MB forwarded: robust where throughput is not (a shared host's load)
        assert kubelet.runtime is not None and kubelet.runtime.process.proc is not None
        assert apiserver.process.proc is not None and kubelet.process.proc is not None
        pids = {"kubectl": forward.pid, "apiserver": apiserver.process.proc.pid,
                "kubelet": kubelet.process.proc.pid, "runtime": kubelet.runtime.process.proc.pid}
        cpu = {d: dict.fromkeys(pids, 0.0) for d in ("down", "up")}
        download("127.0.0.1", local[0], size)  # warm-up: the tunnel's first connection
        for _ in range(rounds):
            for path, (host, down_port, up_port) in (("portforward", ("127.0.0.1", local[0], local[1])),
                                                     ("direct", (pod_ip, 9000, 9001))):
                for direction, transfer, port in (("down", download, down_port), ("up", upload, up_port)):
                    before = {name: cpu_seconds(pid) for name, pid in pids.items()}
                    times[path][direction] += transfer(host, port, size)
                    if path == "portforward":
                        for name, pid in pids.items():
                            cpu[direction][name] += cpu_seconds(pid) - before[name]
        mbps = {path: {d: round(mb * rounds / t, 1) for d, t in ts.items()} for path, ts in times.items()}
        ratio = {d: round(mbps["portforward"][d] / mbps["direct"][d], 3) for d in ("down", "up")}
        total = {path: 2 * mb * rounds / (ts["down"] + ts["up"]) for path, ts in times.items()}
        exec_lat = exec_echo_latencies(apiserver, echoes)
        tcp_lat = tcp_echo_latencies(pod_ip, echoes)
        return {
            "mb": mb, "rounds": rounds, "mb_per_s": mbps, "ratio_by_direction": ratio,
            "cpu_ms_per_mb": {d: {name: round(1000 * t / (mb * rounds), 2) for name, t in by.items()}
                              for d, by in cpu.items()},
            "cpu_ms_per_mb_total": {d: round(1000 * sum(by.values()) / (mb * rounds), 2) for d, by in cpu.items()},
            "portforward_ratio": round(total["portforward"] / total["direct"], 3),
            "portforward_mb_per_s": round(total["portforward"], 1), "direct_mb_per_s": round(total["direct"], 1),
            "echoes": echoes,
            "exec_echo_p50_ms": round(percentile(exec_lat, 50) * 1000, 3),
            "exec_echo_p99_ms": round(percentile(exec_lat, 99) * 1000, 3),
            "tcp_echo_p50_ms": round(percentile(tcp_lat, 50) * 1000, 3),
            "tcp_echo_p99_ms": round(percentile(tcp_lat, 99) * 1000, 3),
        }
    finally:
        if forward is not None:
            forward.terminate()
            forward.wait(10)
        if kubelet is not None:
            cleanup([kubelet])
        apiserver.stop()
        etcd.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="10 MB, 1 round, 50 echoes")
    p.add_argument("--mb", type=int, default=50)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--echoes", type=int, default=300)
    p.add_argument("--output", type=Path, default=OUTPUT / "streaming.json", help="JSON results (%(default)s)")
    args = p.parse_args(argv)
    if args.quick:
        args.mb, args.rounds, args.echoes = 10, 1, 50
    results = run(args.mb, args.rounds, args.echoes)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(results, indent=1))
    print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
