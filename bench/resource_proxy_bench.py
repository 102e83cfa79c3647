"""pods/proxy benchmark (issue 18 gaps): what rewriting an HTML answer's links costs the apiserver, and a websocket's
throughput through the proxy's splice ÷ straight to the server.

    python -m bench.resource_proxy_bench [--quick] [--requests 60] [--mb 20] [--output FILE]

A fresh etcd and apiserver (real processes) and, in this process, an aiohttp server on this host's outward address
(which the apiserver may dial) standing in for a pod: one Pod object whose status.podIP is that address. It serves
the same 110 KiB page of 2,000 links as text/html (`/page.html`: its links are rewritten) and as text/plain
(`/page.txt`: streamed through untouched), and echoes websocket messages (`/ws`).

- HTML: the apiserver's CPU time (user + system, /proc) per GET of the page through pods/proxy, text/html ÷
  text/plain, alternating blocks A/B/B/A in the same run; and the wall time per GET of each.
- Websocket: --mb MB of 64 KiB messages echoed through pods/proxy, then straight to the server, alternating; the
  throughput ratio (proxy ÷ direct) and the apiserver's CPU per MB spliced.
Not a test: it prints figures and checks only that every page came back rewritten and every byte echoed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from aiohttp import WSMsgType, web
from websockets.sync.client import connect

from tests.cluster import REPO, ApiServer, Etcd, make_workdir

OUTPUT = REPO / "_output" / "bench"
NS = "default"
ROW = ('<tr><td><a href="/item/{i}">item {i}</a></td><td><img src="/img/{i}.png" alt="x"></td>'
       "<td>text &amp; more</td></tr>\n")
PAGE = ("<html><body><table>\n" + "".join(ROW.format(i=i) for i in range(1000)) + "</table></body></html>\n").encode()
MESSAGE = 64 << 10


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (/proc/<pid>/stat utime and stime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def host_address() -> str:
    route = subprocess.run(["ip", "-4", "route", "get", "192.0.2.1"], capture_output=True, text=True, check=True,
                           timeout=10).stdout.split()
    return route[route.index("src") + 1]


class Backend:
    """The stand-in pod: aiohttp on its own event loop in a thread."""

    def __init__(self, host: str) -> None:
        self.host = host
        self.port = 0
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.runner: web.AppRunner | None = None

    async def _start(self) -> None:
        async def page(request: web.Request) -> web.Response:
            kind = "text/html" if request.path.endswith(".html") else "text/plain"
            return web.Response(body=PAGE, content_type=kind)

        async def echo(request: web.Request) -> web.WebSocketResponse:
            ws = web.WebSocketResponse(max_msg_size=0, compress=False)
            await ws.prepare(request)
            async for msg in ws:
                if msg.type == WSMsgType.BINARY:
                    await ws.send_bytes(msg.data)
            return ws

        app = web.Application()
        app.router.add_get("/page.html", page)
        app.router.add_get("/page.txt", page)
        app.router.add_get("/ws", echo)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, self.host, 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    def start(self) -> None:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(30)

    def stop(self) -> None:
        if self.runner is not None:
            asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def html_figures(api: httpx.Client, pid: int, base: str, requests: int) -> dict[str, Any]:
    prefix = f"/api/v1/namespaces/{NS}/pods/bench:{base}/proxy"
    cpu = {"html": 0.0, "plain": 0.0}
    wall = {"html": 0.0, "plain": 0.0}
    count = {"html": 0, "plain": 0}
    for kind in ("html", "plain"):  # warm-up
        api.get(f"{prefix}/page.{'html' if kind == 'html' else 'txt'}").raise_for_status()
    block = max(1, requests // 4)
    for kind in ("html", "plain", "plain", "html"):
        path = f"{prefix}/page.{'html' if kind == 'html' else 'txt'}"
        c0, t0 = cpu_seconds(pid), time.monotonic()
        for _ in range(block):
            r = api.get(path)
            r.raise_for_status()
            if kind == "html":
                assert f'<a href="{prefix}/item/999">' in r.text, "the page came back without its links rewritten"
            else:
                assert r.content == PAGE
        wall[kind] += time.monotonic() - t0
        cpu[kind] += cpu_seconds(pid) - c0
        count[kind] += block
    ms = {k: round(cpu[k] / count[k] * 1000, 2) for k in cpu}
    return {"page_bytes": len(PAGE), "links": 2000, "requests_each": count["html"],
            "apiserver_cpu_ms_per_get": ms, "cpu_ratio": round(ms["html"] / ms["plain"], 2) if ms["plain"] else None,
            "wall_ms_per_get": {k: round(wall[k] / count[k] * 1000, 2) for k in wall}}


def echo_through(url: str, total: int) -> float:
    """Seconds to echo `total` bytes in MESSAGE-sized messages, a window of 8 in flight."""
    payload = os.urandom(MESSAGE)
    n = max(1, total // MESSAGE)
    with connect(url, max_size=None, compression=None, open_timeout=30) as ws:
        start = time.monotonic()
        sent = received = 0
        while received < n:
            while sent < n and sent - received < 8:
                ws.send(payload)
                sent += 1
            assert ws.recv(timeout=60) == payload
            received += 1
        return time.monotonic() - start


def websocket_figures(pid: int, proxied: str, direct: str, mb: int) -> dict[str, Any]:
    total = mb * 1024 * 1024
    seconds = {"proxy": 0.0, "direct": 0.0}
    cpu = 0.0
    echo_through(proxied, MESSAGE * 8)  # warm-up
    for kind in ("proxy", "direct", "direct", "proxy"):
        c0 = cpu_seconds(pid)
        seconds[kind] += echo_through(proxied if kind == "proxy" else direct, total // 2)
        if kind == "proxy":
            cpu += cpu_seconds(pid) - c0
    mb_each = total / 1024 / 1024  # per kind, both directions echoed
    rate = {k: round(mb_each / v, 1) for k, v in seconds.items()}
    return {"mb_each": mb_each, "mb_per_s": rate, "ratio": round(rate["proxy"] / rate["direct"], 2),
            "apiserver_cpu_ms_per_mb": round(cpu * 1000 / mb_each, 2)}


def run(requests: int, mb: int) -> dict[str, Any]:
    workdir = make_workdir("minik8s-bench-resource-proxy-")
    etcd = Etcd(workdir)
    etcd.start()
    apiserver = ApiServer(workdir, etcd)
    backend = Backend(host_address())
    try:
        apiserver.start()
        backend.start()
        with httpx.Client(base_url=apiserver.url, timeout=60) as api:
            api.post(f"/api/v1/namespaces/{NS}/pods", json={
                "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bench"},
                "spec": {"nodeName": "nowhere", "containers": [{"name": "c", "image": "busybox"}]}}).raise_for_status()
            api.patch(f"/api/v1/namespaces/{NS}/pods/bench/status",
                      headers={"content-type": "application/merge-patch+json"},
                      json={"status": {"phase": "Running", "podIP": backend.host,
                                       "podIPs": [{"ip": backend.host}]}}).raise_for_status()
            proc = apiserver.process.proc
            assert proc is not None
            pid = proc.pid
            html = html_figures(api, pid, str(backend.port), requests)
        ws_base = apiserver.url.replace("http://", "ws://")
        websocket = websocket_figures(pid, f"{ws_base}/api/v1/namespaces/{NS}/pods/bench:{backend.port}/proxy/ws",
                                      f"ws://{backend.host}:{backend.port}/ws", mb)
    finally:
        backend.stop()
        apiserver.stop()
        etcd.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return {"html": html, "websocket": websocket}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench.resource_proxy_bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="20 requests and 4 MB")
    p.add_argument("--requests", type=int, default=60, help="GETs of the page per kind (%(default)s)")
    p.add_argument("--mb", type=int, default=20, help="MB echoed per kind (%(default)s)")
    p.add_argument("--output", type=Path, default=OUTPUT / "resource_proxy.json", help="JSON results (%(default)s)")
    args = p.parse_args(argv)
    requests, mb = (20, 4) if args.quick else (args.requests, args.mb)
    results = {"benchmark": "resource_proxy", "quick": args.quick, "cpus": os.cpu_count(), **run(requests, mb)}
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(results, indent=1))
    print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
