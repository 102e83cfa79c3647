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

import base64
import os
import sys
from pathlib import Path

import orjson

from apiserver.storage.encryptionconfig import default_config
from bench.closed_loop_summary import report_ratio, round_args, run_rounds, stop_all
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
    args, rounds, total = round_args("python -m bench.secrets_bench", __doc__, argv)

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
        stop_all(servers, etcd, workdir, args.keep)

    report_ratio("secrets", "Secret creates, encryption at rest off vs aescbc", results, MODES, args, rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
