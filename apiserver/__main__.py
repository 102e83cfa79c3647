"""`python -m apiserver`: the kube-apiserver of minik8s, with upstream's flag names.

    python -m apiserver --etcd-servers https://127.0.0.1:2379 --pki-dir _output/local-up \\
        --etcd-cafile _output/local-up/pki/etcd/ca.crt \\
        --etcd-certfile _output/local-up/pki/apiserver-etcd-client.crt \\
        --etcd-keyfile _output/local-up/pki/apiserver-etcd-client.key \\
        --secure-port 6443 --port 0 --audit-log-path _output/local-up/audit.log

Serving: HTTPS on --secure-port (6443) when it has a certificate — --tls-cert-file and
--tls-private-key-file, or --pki-dir, which generates the cluster PKI there on first start (see
apiserver.auth.pki) and takes the serving certificate, the client CA and the service-account
key from it. The plain --port (8080; 0 turns it off) is for development and tests: whatever
arrives there is "system:unsecured" in system:masters, as upstream's insecure port was.
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import sys

from apiserver.admission.chain import ALL_PLUGINS
from apiserver.admission.podsecurity.config import ConfigError, load_admission_config
from apiserver.app import ApiServerConfig, create_app
from apiserver.auth.serviceaccount import DEFAULT_ISSUER
from apiserver.serving import Listener, run
from apiserver.storage.encryptionconfig import EncryptionConfigError
from apiserver.storage.encryptionconfig import load as load_encryption_config
from apiserver.storage.etcd import EtcdTLS
from machinery import logs, tracing
from machinery.timeutil import duration_flag, parse_go_duration
from machinery.tls import server_ssl_context


def _names(text: str) -> list[str]:
    return [s.strip() for s in text.split(",") if s.strip()]


def _duration(text: str) -> float:
    """A Go duration ("60s", "1m0s"), as upstream's flag takes it."""
    try:
        return parse_go_duration(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="apiserver", description="minik8s API server (FastAPI on etcd)")
    p.add_argument("--etcd-servers", default="http://127.0.0.1:2379",
                   help="comma-separated etcd endpoints, http:// or https:// (default %(default)s)")
    p.add_argument("--etcd-cafile", default=None,
                   help="SSL Certificate Authority file used to secure etcd communication")
    p.add_argument("--etcd-certfile", default=None, help="SSL certification file used to secure etcd communication")
    p.add_argument("--etcd-keyfile", default=None, help="SSL key file used to secure etcd communication")
    p.add_argument("--disable-etcd-retry", action="store_true",
                   help="one attempt per etcd request, on one member (no failover retries): the baseline of "
                        "bench/etcd_failover_bench.py, not for clusters")
    p.add_argument("--disable-request-metrics", action="store_true",
                   help="count and time no request for /metrics: the baseline of bench/metrics_bench.py, not for "
                        "clusters")
    p.add_argument("--bind-address", default="127.0.0.1", help="address to listen on (default %(default)s)")
    p.add_argument("--port", type=int, default=8080,
                   help="plain HTTP port for development, no authentication (default %(default)s; 0 disables)")
    p.add_argument("--secure-port", type=int, default=6443,
                   help="HTTPS port (default %(default)s; 0 disables); needs a certificate, see --pki-dir")
    p.add_argument("--pki-dir", default=None,
                   help="cluster PKI directory: generated on first start, reused after; supplies the serving "
                        "certificate, --client-ca-file and --service-account-key-file")
    p.add_argument("--tls-cert-file", default=None, help="serving certificate (PEM)")
    p.add_argument("--tls-private-key-file", default=None, help="serving key (PEM)")
    p.add_argument("--client-ca-file", default=None, help="CA bundle that signs client certificates")
    p.add_argument("--disable-http2-serving", action="store_true",
                   help="If true, HTTP2 serving will be disabled [default=false]")
    p.add_argument("--http2-max-streams-per-connection", type=int, default=0,
                   help="The limit that the server gives to clients for the maximum number of streams in an HTTP/2 "
                        "connection. Zero means to use golang's default.")
    p.add_argument("--token-auth-file", default=None, help='static tokens, CSV: token,user,uid,"group1,group2"')
    p.add_argument("--service-account-key-file", action="append", default=[],
                   help="public (or private) key verifying service-account tokens (repeatable)")
    p.add_argument("--service-account-issuer", default=DEFAULT_ISSUER)
    p.add_argument("--service-account-signing-key-file", default=None,
                   help="private key that signs TokenRequest tokens (serviceaccounts/NAME/token)")
    p.add_argument("--api-audiences", default="",
                   help="comma-separated audiences tokens must name (default: --service-account-issuer)")
    p.add_argument("--service-account-max-token-expiration", type=duration_flag, default=0.0,
                   help="longest a TokenRequest token may live (e.g. 24h); 0: no limit. Upstream refuses "
                        "values under 1h; minik8s takes any, so tests can watch tokens expire and be refreshed")
    p.add_argument("--service-account-extend-token-expiration", type=_bool_flag, nargs="?", const=True,
                   default=True,
                   help="pod-bound tokens asked for 3607 s (the kube-api-access volume's) live a year, warned of "
                        "after 3607 s, as upstream's safe transition to bound tokens (default true)")
    p.add_argument("--authorization-mode", default="Node,RBAC",
                   help="ordered authorizers: Node, RBAC, AlwaysAllow (default %(default)s)")
    p.add_argument("--enable-admission-plugins", default=",".join(ALL_PLUGINS),
                   help="admission plugins (default: all of %(default)s)")
    p.add_argument("--disable-admission-plugins", default="", help="admission plugins to turn off")
    p.add_argument("--admission-control-config-file", default=None,
                   help="AdmissionConfiguration (apiserver.config.k8s.io/v1): PodSecurity's defaults and exemptions")
    p.add_argument("--encryption-provider-config", default=None,
                   help="file with an apiserver.config.k8s.io/v1 EncryptionConfiguration: how resources are "
                        "encrypted in etcd")
    p.add_argument("--audit-log-path", default=None, help="write audit events here as JSON lines ('-' = stdout)")
    p.add_argument("--audit-policy-file", default=None,
                   help="audit.k8s.io/v1 Policy (default without one: every request at Metadata)")
    p.add_argument("--kubelet-client-certificate", default=None,
                   help="client certificate towards kubelets (logs, exec): kubelets are then reached over HTTPS")
    p.add_argument("--kubelet-client-key", default=None, help="the kubelet client certificate's key")
    p.add_argument("--kubelet-certificate-authority", default=None,
                   help="CA that signs kubelets' serving certificates (without it they are not verified)")
    p.add_argument("--metrics-server-url", default=None,
                   help="where metrics.k8s.io is served (a metrics-server: python -m metrics_server); its "
                        "requests are passed on there with the user in X-Remote-User/X-Remote-Group")
    p.add_argument("--proxy-client-cert-file", default=None,
                   help="client certificate the apiserver presents to the metrics-server (front proxy)")
    p.add_argument("--proxy-client-key-file", default=None, help="the front-proxy client certificate's key")
    p.add_argument("--metrics-server-certificate-authority", default=None,
                   help="CA of the metrics-server's serving certificate (without it, it is not verified)")
    p.add_argument("--road-server-url", default=None,
                   help="where road.minik8s.io is served (the road server: python -m road); its requests are "
                        "passed on there as metrics.k8s.io's, with the same front-proxy client certificate")
    p.add_argument("--road-server-certificate-authority", default=None,
                   help="CA of the road server's serving certificate (without it, it is not verified)")
    p.add_argument("--advertise-address", default=None,
                   help="address (or address:port) clients are told to use; its IP is the `kubernetes` Service's "
                        "endpoint (default: --bind-address, or the host's default-route address when that is a "
                        "loopback or unspecified address)")
    p.add_argument("--service-cluster-ip-range", default="10.96.0.0/12",
                   help="CIDR Service ClusterIPs are allocated from (default %(default)s)")
    p.add_argument("--service-node-port-range", default="30000-32767",
                   help="ports NodePort Services are allocated from (default %(default)s)")
    p.add_argument("--service-allocation-repair-interval", type=float, default=180.0,
                   help="seconds between runs of the ClusterIP and NodePort repair loop, which gives back what no "
                        "Service holds after it was seen so three runs in a row (upstream: fixed 3 minutes; "
                        "0 disables; default %(default)s)")
    p.add_argument("--etcd-compaction-interval", type=float, default=300.0,
                   help="seconds between etcd compactions; 0 disables (default %(default)s)")
    p.add_argument("--watch-bookmark-interval", type=float, default=10.0,
                   help="seconds between BOOKMARK events to watchers that allow them (default %(default)s)")
    p.add_argument("--watch-cache-window", type=int, default=4096,
                   help="events per resource the watch cache keeps for resuming watches (default %(default)s)")
    p.add_argument("--max-requests-inflight", type=int, default=400,
                   help="read-only requests served at once, long-running ones apart; past it 429 (default "
                        "%(default)s; 0 disables)")
    p.add_argument("--max-mutating-requests-inflight", type=int, default=200,
                   help="mutating requests served at once; past it 429 (default %(default)s; 0 disables)")
    p.add_argument("--request-timeout", type=_duration, default=60.0,
                   help="the longest a request that is not long-running may take, as a Go duration; past it 504 "
                        "Timeout (default 1m0s)")
    p.add_argument("--min-request-timeout", type=int, default=1800,
                   help="seconds a watch without timeoutSeconds lasts at least; it ends at a random time "
                        "between this and twice this (default %(default)s)")
    p.add_argument("--feature-gates", default="",
                   help="key=value pairs of feature gates; known: AggregatedDiscoveryEndpoint (default true: "
                        "/api and /apis answer aggregated discovery to clients that ask for it)")
    tracing.add_flag(p)
    logs.add_flags(p)
    args = p.parse_args(argv)
    args.feature_gates = _feature_gates(args.feature_gates)
    if args.pki_dir:
        from apiserver.auth import pki

        # upstream's serving certificate also names the `kubernetes` Service's ClusterIP, which in-cluster
        # clients (KUBERNETES_SERVICE_HOST) connect to and verify against the CA of their kube-root-ca.crt
        hosts = [args.bind_address, *_kubernetes_service_ip(args.service_cluster_ip_range)]
        layout = pki.ensure_pki(args.pki_dir, f"https://{args.bind_address}:{args.secure_port}",
                                server_hosts=hosts, log=True)
        args.tls_cert_file = args.tls_cert_file or str(layout.serving_cert)
        args.tls_private_key_file = args.tls_private_key_file or str(layout.serving_key)
        args.client_ca_file = args.client_ca_file or str(layout.ca_cert)
        if not args.service_account_key_file:
            args.service_account_key_file = [str(layout.sa_pub)]
        args.service_account_signing_key_file = args.service_account_signing_key_file or str(layout.sa_key)
    if bool(args.tls_cert_file) != bool(args.tls_private_key_file):
        p.error("--tls-cert-file and --tls-private-key-file go together")
    if args.http2_max_streams_per_connection < 0:
        p.error("--http2-max-streams-per-connection must be >= 0")
    if bool(args.kubelet_client_certificate) != bool(args.kubelet_client_key):
        p.error("--kubelet-client-certificate and --kubelet-client-key go together")
    if args.kubelet_client_certificate or args.kubelet_certificate_authority:
        from apiserver.endpoints.proxy import client_tls

        try:  # unreadable files end the start, not a log request later
            client_tls(args.kubelet_client_certificate, args.kubelet_client_key, args.kubelet_certificate_authority)
        except (OSError, ValueError) as e:
            p.error(f"kubelet client TLS: {e}")
    if bool(args.proxy_client_cert_file) != bool(args.proxy_client_key_file):
        p.error("--proxy-client-cert-file and --proxy-client-key-file go together")
    args.etcd_tls = None
    if args.etcd_cafile or args.etcd_certfile or args.etcd_keyfile:
        try:  # unreadable files end the start, not the first request
            args.etcd_tls = EtcdTLS(args.etcd_cafile, args.etcd_certfile, args.etcd_keyfile)
            args.etcd_tls.check()
        except (OSError, ValueError) as e:
            p.error(f"etcd client TLS: {e}")
    args.secure = bool(args.secure_port and args.tls_cert_file)
    if not args.secure and not args.port:
        p.error("nothing to serve: --port is 0 and there is no secure port (give --pki-dir or --tls-cert-file)")
    return args


def _bool_flag(value: str) -> bool:
    if value.lower() in ("true", "1", "t", "yes"):
        return True
    if value.lower() in ("false", "0", "f", "no"):
        return False
    raise argparse.ArgumentTypeError(f"invalid boolean {value!r}")


def _kubernetes_service_ip(ranges: str) -> list[str]:
    """The first address of the first Service range (the `kubernetes` Service's), if it parses."""
    try:
        return [str(ipaddress.ip_network(ranges.split(",")[0].strip(), strict=False)[1])]
    except (ValueError, IndexError):
        return []


def _with_port(address: str, port: int) -> str:
    """--advertise-address is an IP upstream; minik8s also takes address:port (a proxy in front)."""
    try:
        ip = ipaddress.ip_address(address.strip("[]"))
    except ValueError:
        return address  # host:port (or a name)
    return f"[{ip}]:{port}" if ip.version == 6 else f"{ip}:{port}"


_FEATURE_GATES = ("AggregatedDiscoveryEndpoint",)


def _feature_gates(value: str) -> dict[str, bool]:
    """`--feature-gates A=true,B=false`, as upstream's flag; an unknown gate or value ends the process."""
    gates: dict[str, bool] = {}
    for pair in filter(None, (p.strip() for p in value.split(","))):
        name, _, setting = pair.partition("=")
        if name not in _FEATURE_GATES:
            sys.exit(f'--feature-gates: unrecognized feature gate: {name}')
        if setting.lower() not in ("true", "false"):
            sys.exit(f"--feature-gates: invalid value of {name}={setting}, err: strconv.ParseBool: parsing "
                     f'"{setting}": invalid syntax')
        gates[name] = setting.lower() == "true"
    return gates


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    logs.setup(args.v)
    disabled = set(_names(args.disable_admission_plugins))
    try:
        load_admission_config(args.admission_control_config_file)
    except ConfigError as e:
        sys.exit(f"--admission-control-config-file: {e}")
    encryption = None
    if args.encryption_provider_config:
        try:
            encryption = load_encryption_config(args.encryption_provider_config)
        except EncryptionConfigError as e:
            sys.exit(f"--encryption-provider-config: {e}")
    port = args.secure_port if args.secure else args.port
    tracing.setup_or_exit(args.tracing_config_file, "kube-apiserver")
    config = ApiServerConfig(
        etcd_servers=_names(args.etcd_servers),
        etcd_tls=args.etcd_tls,
        encryption=encryption,
        etcd_retry=not args.disable_etcd_retry,
        request_metrics=not args.disable_request_metrics,
        advertise_address=_with_port(args.advertise_address or args.bind_address, port),
        compaction_interval=args.etcd_compaction_interval,
        bookmark_interval=args.watch_bookmark_interval,
        aggregated_discovery=args.feature_gates.get("AggregatedDiscoveryEndpoint", True),
        watch_window=args.watch_cache_window,
        client_ca_file=args.client_ca_file,
        token_auth_file=args.token_auth_file,
        service_account_key_files=args.service_account_key_file,
        service_account_issuer=args.service_account_issuer,
        service_account_signing_key_file=args.service_account_signing_key_file,
        api_audiences=_names(args.api_audiences),
        service_account_max_token_expiration=int(args.service_account_max_token_expiration),
        service_account_extend_token_expiration=args.service_account_extend_token_expiration,
        authorization_modes=_names(args.authorization_mode),
        admission_plugins=[name for name in _names(args.enable_admission_plugins) if name not in disabled],
        audit_log_path=args.audit_log_path,
        audit_policy_file=args.audit_policy_file,
        admission_control_config_file=args.admission_control_config_file,
        kubelet_client_certificate=args.kubelet_client_certificate,
        kubelet_client_key=args.kubelet_client_key,
        kubelet_certificate_authority=args.kubelet_certificate_authority,
        metrics_server_url=args.metrics_server_url,
        proxy_client_cert_file=args.proxy_client_cert_file,
        proxy_client_key_file=args.proxy_client_key_file,
        metrics_server_certificate_authority=args.metrics_server_certificate_authority,
        road_server_url=args.road_server_url,
        road_server_certificate_authority=args.road_server_certificate_authority,
        max_requests_inflight=args.max_requests_inflight,
        max_mutating_requests_inflight=args.max_mutating_requests_inflight,
        request_timeout=args.request_timeout,
        min_request_timeout=args.min_request_timeout,
        service_cluster_ip_range=args.service_cluster_ip_range,
        service_node_port_range=args.service_node_port_range,
        service_repair_interval=args.service_allocation_repair_interval,
    )
    listeners = []
    if args.secure:
        context = server_ssl_context(args.tls_cert_file, args.tls_private_key_file, args.client_ca_file,
                                     http2=not args.disable_http2_serving)
        listeners.append(Listener(args.bind_address, args.secure_port, context,
                                  http2_max_streams=args.http2_max_streams_per_connection))
    if args.port:
        listeners.append(Listener(args.bind_address, args.port))
    try:
        app = create_app(config)
    except (OSError, ValueError) as e:
        logging.getLogger("apiserver").error("%s", e)
        sys.exit(1)
    logging.getLogger("apiserver").info("serving on %s", ", ".join(
        f"{'https' if item.ssl_context else 'http'}://{item.host}:{item.port}" for item in listeners))
    run(app, listeners)


if __name__ == "__main__":
    main()
