"""`python -m apiserver`: the kube-apiserver of minik8s, with upstream's flag names."""

from __future__ import annotations

import argparse
import logging

import uvicorn

from apiserver.app import ApiServerConfig, create_app


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="apiserver", description="minik8s API server (FastAPI on etcd)")
    p.add_argument("--etcd-servers", default="http://127.0.0.1:2379",
                   help="comma-separated etcd endpoints (default %(default)s)")
    p.add_argument("--bind-address", default="127.0.0.1", help="address to listen on (default %(default)s)")
    p.add_argument("--port", type=int, default=8080, help="plain HTTP port (default %(default)s)")
    p.add_argument("--advertise-address", default=None, help="address:port clients are told to use")
    p.add_argument("--etcd-compaction-interval", type=float, default=300.0,
                   help="seconds between etcd compactions; 0 disables (default %(default)s)")
    p.add_argument("--watch-bookmark-interval", type=float, default=10.0,
                   help="seconds between BOOKMARK events to watchers that allow them (default %(default)s)")
    p.add_argument("--watch-cache-window", type=int, default=4096,
                   help="events per resource the watch cache keeps for resuming watches (default %(default)s)")
    p.add_argument("-v", "--v", type=int, default=1, help="log verbosity (0-4)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.v >= 4 else logging.INFO if args.v >= 1 else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    config = ApiServerConfig(
        etcd_servers=[s.strip() for s in args.etcd_servers.split(",") if s.strip()],
        advertise_address=args.advertise_address or f"{args.bind_address}:{args.port}",
        compaction_interval=args.etcd_compaction_interval,
        bookmark_interval=args.watch_bookmark_interval,
        watch_window=args.watch_cache_window,
    )
    uvicorn.run(create_app(config), host=args.bind_address, port=args.port, log_level="warning",
                access_log=False, timeout_graceful_shutdown=2,
                timeout_keep_alive=90)  # longer than clients keep idle connections (60 s)


if __name__ == "__main__":
    main()
