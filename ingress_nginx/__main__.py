"""`python -m ingress_nginx`: the ingress controller of minik8s (upstream ingress-nginx's
cmd/nginx/main.go and flags.go), one per host or several for availability.

    python -m ingress_nginx --kubeconfig _output/local-up/ingress-nginx.conf --http-port 8880 --https-port 8443

Serves the Ingresses whose IngressClass names `--controller-class` (default k8s.io/ingress-nginx), or whose
deprecated kubernetes.io/ingress.class annotation is `--ingress-class` (default nginx), through a host nginx
(Debian's nginx-light) listening on `--bind-address`:`--http-port` and `--https-port` (not 80/443: the host's
own; not in the NodePort range either). nginx's files live in `--run-dir` (default
/run/minik8s/ingress-<ingress-class>). With `--election-id` the replicas campaign for that Lease in
`--leader-elect-resource-namespace`; the leader writes status.loadBalancer (`--publish-status-address`, default
this host's address). `--healthz-port` serves /healthz (nginx runs the current configuration) and /metrics.
SIGTERM/SIGINT stop nginx gracefully and exit.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import logging
import signal
import sys
from pathlib import Path

from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

from ingress_nginx.controller import IngressController, Options
from ingress_nginx.nginx import Nginx, NginxError
from ingress_nginx.template import Settings
from machinery import logs
from machinery.client import ApiClient, default_user_agent
from machinery.events import EventRecorder
from machinery.kubeconfig import build_config_from_flags
from machinery.leaderelection import LeaderElector
from machinery.netutil import default_node_ip
from machinery.timeutil import duration_flag

log = logging.getLogger("ingress_nginx")
COMPONENT = "nginx-ingress-controller"
FAKE_CERTIFICATE_CN = "Kubernetes Ingress Controller Fake Certificate"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="ingress_nginx", description="minik8s ingress controller (nginx)")
    p.add_argument("--kubeconfig", default=None, help="kubeconfig with the apiserver and credentials")
    p.add_argument("--master", default=None, help="apiserver URL; overrides the kubeconfig's server")
    p.add_argument("--ingress-class", default="nginx",
                   help="the class name in the deprecated kubernetes.io/ingress.class annotation (default nginx)")
    p.add_argument("--controller-class", default="k8s.io/ingress-nginx",
                   help="the IngressClass spec.controller served (default %(default)s)")
    p.add_argument("--watch-ingress-without-class", action="store_true",
                   help="also serve Ingresses that name no class")
    p.add_argument("--bind-address", default="0.0.0.0", help="address nginx listens on (default %(default)s)")
    p.add_argument("--http-port", type=int, default=8880, help="HTTP port (default %(default)s)")
    p.add_argument("--https-port", type=int, default=8443, help="HTTPS port (default %(default)s)")
    p.add_argument("--healthz-port", type=int, default=10254,
                   help="port of /healthz and /metrics, 0 for any, -1 to disable (default %(default)s)")
    p.add_argument("--run-dir", default=None, help="nginx's files (default /run/minik8s/ingress-<ingress-class>)")
    p.add_argument("--publish-status-address", default=None,
                   help="the address written to the Ingresses' status (default this host's address)")
    p.add_argument("--update-status", type=_bool, default=True, help="write Ingress status (default true)")
    p.add_argument("--update-status-on-shutdown", type=_bool, default=True,
                   help="clear the status when the leader stops (default true)")
    p.add_argument("--election-id", default="ingress-nginx-leader", help="the leader Lease (default %(default)s)")
    p.add_argument("--leader-elect-resource-namespace", default="kube-system",
                   help="namespace of the leader Lease (default %(default)s)")
    p.add_argument("--allow-snippet-annotations", type=_bool, default=False,
                   help="honour nginx.ingress.kubernetes.io/configuration-snippet (default false, as upstream)")
    p.add_argument("--sync-period-min", type=duration_flag, default=0.1,
                   help="least time between two reloads (default 100ms)")
    p.add_argument("--no-access-log", action="store_true", help="turn nginx's access log off")
    logs.add_flags(p)
    args = p.parse_args(argv)
    if not args.kubeconfig and not args.master:
        p.error("one of --kubeconfig or --master is required")
    for flag in ("http_port", "https_port"):
        if not 1 <= getattr(args, flag) <= 65535:
            p.error(f"--{flag.replace('_', '-')} must be within 1-65535")
    if args.http_port == args.https_port:
        p.error("--http-port and --https-port must differ")
    return args


def _bool(text: str) -> bool:
    if text.lower() in ("true", "1", "yes"):
        return True
    if text.lower() in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"invalid boolean {text!r}")


def fake_certificate(path: Path) -> None:
    """The self-signed fallback certificate ingress-nginx serves when a host has none (ssl.GetFakeSSLCert)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Acme Co"),
                      x509.NameAttribute(NameOID.COMMON_NAME, FAKE_CERTIFICATE_CN)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=365))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("ingress.local")]), critical=False)
            .sign(key, hashes.SHA256()))
    pem = cert.public_bytes(serialization.Encoding.PEM) + key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption())
    path.touch(mode=0o600)
    path.write_bytes(pem)


async def health_app(controller: IngressController) -> web.AppRunner:
    async def healthz(_: web.Request) -> web.Response:
        ok = controller.nginx.running() and controller.synced
        return web.Response(status=200 if ok else 500, text="ok" if ok else "nginx is not serving yet")

    async def metrics(_: web.Request) -> web.Response:
        n = controller.nginx
        text = (f"nginx_ingress_controller_success {n.reloads}\n"
                f"nginx_ingress_controller_config_last_reload_successful {0 if controller.last_error else 1}\n"
                f"nginx_ingress_controller_config_test_failures {n.failed_tests}\n"
                f"nginx_ingress_controller_reload_in_progress {1 if controller.reloading else 0}\n"
                f"nginx_ingress_controller_leader_election_status {1 if controller.leading else 0}\n")
        return web.Response(text=text)

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    return runner


async def watch_nginx(nginx: Nginx, stop: asyncio.Event) -> None:
    """nginx gone without being asked to: exit (upstream's controller does too; a supervisor starts both again)."""
    assert nginx.process is not None
    code = await nginx.process.wait()
    if not stop.is_set():
        raise NginxError(f"NGINX process has stopped (exit status {code})")


async def campaign(client: ApiClient, controller: IngressController, args: argparse.Namespace,
                   recorder: EventRecorder, stop: asyncio.Event) -> None:
    """Campaign again whenever leadership is lost: a replica that lost the Lease keeps serving traffic."""
    while not stop.is_set():
        elector = LeaderElector(client, name=args.election_id, namespace=args.leader_elect_resource_namespace,
                                on_started_leading=lambda: controller.run_status(stop), recorder=recorder)
        await elector.run(stop)
        if not stop.is_set():
            log.warning("lost the leader Lease %s; campaigning again", elector.describe)


async def run(args: argparse.Namespace) -> int:
    run_dir = Path(args.run_dir or f"/run/minik8s/ingress-{args.ingress_class}")
    nginx = Nginx(run_dir)
    nginx.prepare()
    fallback = run_dir / "ssl" / "default-fake-certificate.pem"
    if not fallback.exists():
        fake_certificate(fallback)
    address = args.publish_status_address or default_node_ip()
    settings = Settings(str(run_dir), args.http_port, args.https_port, args.bind_address, str(fallback),
                        access_log=not args.no_access_log)
    options = Options(controller_class=args.controller_class, ingress_class=args.ingress_class,
                      watch_ingress_without_class=args.watch_ingress_without_class,
                      publish_status_address=address, update_status=args.update_status,
                      update_status_on_shutdown=args.update_status_on_shutdown,
                      allow_snippet_annotations=args.allow_snippet_annotations, sync_period_min=args.sync_period_min)
    config = build_config_from_flags(args.master, args.kubeconfig, default_user_agent(COMPONENT))
    client = ApiClient(config)
    recorder = EventRecorder(client, COMPONENT)
    controller = IngressController(client, nginx, settings, options, recorder)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    runner = None
    if args.healthz_port >= 0:
        runner = await health_app(controller)
        site = web.TCPSite(runner, "0.0.0.0", args.healthz_port)
        await site.start()
    tasks: list[asyncio.Task[None]] = []
    try:
        controller.factory.start()
        while not await controller.factory.wait_for_cache_sync(timeout=30):
            log.warning("waiting for the informers' caches to sync")
            if stop.is_set():
                return 0
        if not await controller.sync():
            log.error("the first configuration failed nginx's test; exiting")
            return 1
        controller.synced = True
        log.info("serving Ingresses of class %s (%s) on %s:%d/%d; status address %s", args.ingress_class,
                 args.controller_class, args.bind_address, args.http_port, args.https_port, address)
        tasks.append(asyncio.create_task(controller.run_sync(stop)))
        tasks.append(asyncio.create_task(watch_nginx(nginx, stop)))
        if args.update_status:
            tasks.append(asyncio.create_task(campaign(client, controller, args, recorder, stop)))
        waiter = asyncio.create_task(stop.wait())
        done, _ = await asyncio.wait([*tasks, waiter], return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            if task is not waiter and not task.cancelled() and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]  # checked just above
        return 0  # the rest winds down below (watch_nginx ends only once nginx is stopped)
    except NginxError as e:
        log.error("%s", e)
        return 1
    finally:
        stop.set()
        # nginx first (its graceful stop), while the tasks wind down (the leader clears the status, releases
        # the Lease): a supervisor that loses patience kills this process, not nginx, which has a session of its own
        for task in tasks:
            task.cancel()
        await asyncio.gather(nginx.stop(), *tasks, return_exceptions=True)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(recorder.flush(), 2.0)
        recorder.close()
        await controller.factory.shutdown()
        if runner is not None:
            await runner.cleanup()
        await client.close()


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    logs.setup(args.v)
    sys.exit(asyncio.run(run(args)))


if __name__ == "__main__":
    main()
