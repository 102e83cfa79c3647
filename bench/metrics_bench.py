"""What the apiserver's request metrics cost (issue 15: ≤ 5% of creates/s): the same secure apiserver chain
(TLS, x509 authn, RBAC, admission, audit at Metadata) with `--disable-request-metrics` and without, in one run, on
one etcd.

    python -m bench.metrics_bench [--quick] [--rounds N] [--keep]

Each round runs both with the same closed loop of 64 keep-alive clients creating a small ConfigMap; rounds
alternate to spread machine noise. The table gives medians and the ratio on/off. The figure is only honest if
the measured server counted: its /metrics must show every create. Writes _output/bench/metrics.json.
"""

from __future__ import annotations

import sys

import orjson
from prometheus_client.parser import text_string_to_metric_families

from bench.closed_loop_summary import report_ratio, round_args, run_rounds, stop_all
from tests.auth_cluster import SecureApiServer
from tests.cluster import REPO, Etcd, make_workdir

OUTPUT = REPO / "_output" / "bench"
MODES = ("off", "on")
NAMESPACE = "bench-metrics"


def configmap_body(name: str, namespace: str) -> bytes:
    return orjson.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace},
                         "data": {"settings": "x" * 200}})


def counted_creates(server: SecureApiServer) -> float:
    """The POSTs of ConfigMaps with code 201 the server's /metrics shows."""
    with server.client("admin") as admin:
        text = admin.get("/metrics").text
    return sum(s.value for family in text_string_to_metric_families(text) for s in family.samples
               if s.name == "apiserver_request_total" and s.labels.get("verb") == "POST"
               and s.labels.get("resource") == "configmaps" and s.labels.get("code") == "201")


def main(argv: list[str] | None = None) -> int:
    args, rounds, total = round_args("python -m bench.metrics_bench", __doc__, argv)

    workdir = make_workdir("minik8s-metrics-bench-")
    etcd = Etcd(workdir)
    etcd.start()
    common = ("--port", "0", "--etcd-compaction-interval", "0")
    servers = {"off": SecureApiServer(workdir, etcd, *common, "--disable-request-metrics"),
               "on": SecureApiServer(workdir, etcd, *common)}
    try:
        results = run_rounds(servers, etcd, namespace_prefix=NAMESPACE, rounds=rounds, total=total,
                             clients=args.clients, body=configmap_body, resource="configmaps")
        counted = counted_creates(servers["on"])
        expected = rounds * (total + 200)  # the warm-ups count too
        if counted < expected:
            raise SystemExit(f"the measured server counted {counted:.0f} creates, not {expected}")
        if counted_creates(servers["off"]) != 0:
            raise SystemExit("the baseline server counted requests: it was not a baseline")
    finally:
        stop_all(servers, etcd, workdir, args.keep)

    report_ratio("metrics", "ConfigMap creates, request metrics off vs on", results, MODES, args, rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
