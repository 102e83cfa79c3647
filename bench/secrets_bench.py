"""What encryption at rest costs a Secret create: the same secure apiserver chain (TLS, x509 authn,
RBAC, admission, audit at Metadata) with --encryption-provider-config off and on (aescbc, as local-up
and compose run it), in one run, on one etcd.

    python -m bench.secrets_bench [--quick] [--rounds N] [--keep]

Each round runs both with the same closed loop of 64 keep-alive clients creating an Opaque Secret of
three keys (about 1 KB of data, as a TLS pair or a small credentials file); rounds alternate to spread
machine noise. The table gives medians and the ratio on/off (issue 12: creates/s ≥ 0.8 of off).
Writes _output/bench/secrets.json.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import sys
from pathlib import Path

import orjson

from apiserver.storage.encryptionconfig import default_config
from bench.apiserver_bench import render_table
from bench.closed_loop_summary import busy_caution, medians_and_rows, run_rounds
from tests.auth_cluster import SecureApiServer
from tests.cluster import REPO, Etcd, make_workdir

OUTPUT = REPO / "_output" / "bench"
MODES = ("off", "aescbc")
_PAYLOAD = {key: base64.b64encode(os.urandom(size)).decode()
            for key, size in (("tls.crt", 600), ("tls.key", 200), ("ca.crt", 64))}


def secret_body(name: str, namespace: str) -> bytes:
    return orjson.dumps({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": namespace},
                         "type": "Opaque", "data": _PAYLOAD})


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.secrets_bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="1,000 creates per closed loop, 2 rounds")
    p.add_argument("--rounds", type=int, default=None, help="rounds (default 3, quick 2)")
    p.add_argument("--clients", type=int, default=64)
    p.add_argument("--keep", action="store_true", help="keep the work directory")
    args = p.parse_args(argv)
    rounds = args.rounds or (2 if args.quick else 3)
    total = 1000 if args.quick else 3000

    workdir = make_workdir("minik8s-secrets-bench-")
    config = Path(workdir) / "encryption-config.yaml"
    config.write_text(default_config())
    etcd = Etcd(workdir)
    etcd.start()
    common = ("--port", "0", "--etcd-compaction-interval", "0")
    servers = {"off": SecureApiServer(workdir, etcd, *common),
               "aescbc": SecureApiServer(workdir, etcd, *common, "--encryption-provider-config", str(config))}
    try:
        results = run_rounds(servers, etcd, namespace_prefix="bench-secrets", rounds=rounds, total=total,
                             clients=args.clients, body=secret_body, resource="secrets")
        # the figures are only honest if the encrypted server really encrypted
        from tests.conftest import etcd_keys

        stored = etcd_keys(etcd, "/registry/secrets/bench-secrets-aescbc/")
        plain = etcd_keys(etcd, "/registry/secrets/bench-secrets-off/")
        assert stored and all(v.startswith(b"k8s:enc:aescbc:v1:key1:") for v in stored.values())
        assert plain and all(v.startswith(b"{") for v in plain.values())
    finally:
        for server in servers.values():
            server.stop()
        etcd.stop()
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)

    summary, rows = medians_and_rows(results, MODES)
    print()
    print(f"Secret creates, encryption at rest off vs aescbc ({'quick' if args.quick else 'full'}, {rounds} rounds, "
          "medians)")
    print()
    print(render_table(("figure", *MODES, "aescbc/off"), rows))
    if caution := busy_caution(results):
        print(caution)
    rate = summary["creates/s, 64 clients"]
    create_ratio = round(rate["aescbc"] / rate["off"], 3) if rate["off"] else None
    print(f"creates/s with encryption ÷ without: {create_ratio}")
    OUTPUT.mkdir(parents=True, exist_ok=True)
    out = OUTPUT / "secrets.json"
    out.write_text(json.dumps({"benchmark": "secrets", "quick": args.quick, "rounds": results, "summary": summary,
                               "create_ratio": create_ratio}, indent=2))
    print(f"JSON: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
