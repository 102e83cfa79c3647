"""`python -m local_path_provisioner [start]`: the local-path provisioner (rancher's `local-path-provisioner
start`), and `python -m local_path_provisioner install`: apply its namespace, account, RBAC, default
StorageClass and ConfigMap once, as an admin (local_path_provisioner/manifests.py).

    python -m local_path_provisioner install --kubeconfig _output/local-up/admin.conf --path /var/lib/minik8s/local-path
    python -m local_path_provisioner --kubeconfig _output/local-up/local-path-provisioner.conf --health-port 8089

`--path` is the base directory on every node (rancher's nodePathMap DEFAULT_PATH_FOR_NON_LISTED_NODES);
without it the `config.json` of the ConfigMap `local-path-config` says (rancher's default), else
/opt/local-path-provisioner. Replicas elect a leader on the Lease local-path-storage/rancher.io-local-path
(`--leader-elect`, on by default); only the holder provisions. `--health-port` serves /health and /ready
(caches synced; rancher's HEALTH_PORT endpoints). SIGTERM/SIGINT stop it (releasing the Lease).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys

from aiohttp import web

from local_path_provisioner import manifests
from local_path_provisioner.provisioner import Config, LocalPathProvisioner
from machinery import leaderelection, logs
from machinery.api.core_v1 import ConfigMap
from machinery.client import ApiClient, ApiError, default_user_agent
from machinery.informer import SharedInformerFactory
from machinery.kubeconfig import build_config_from_flags

log = logging.getLogger("local-path-provisioner")
DEFAULT_HELPER_IMAGE = "minik8s/busybox:1.35"  # hack/images.sh (rancher: rancher/library-busybox)


def user_agent() -> str:
    return default_user_agent("local-path-provisioner")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = "start"
    if argv and argv[0] in ("start", "install"):
        command = argv.pop(0)
    p = argparse.ArgumentParser(prog=f"local_path_provisioner {command}",
                                description="minik8s local-path provisioner (rancher.io/local-path)")
    p.add_argument("--kubeconfig", default=None, help="kubeconfig with the apiserver and credentials")
    p.add_argument("--master", default=None, help="apiserver URL; overrides the kubeconfig's server")
    p.add_argument("--namespace", default=manifests.NAMESPACE, help="where helper pods run (default %(default)s)")
    p.add_argument("--path", default=None, help="base directory of the volumes on every node")
    logs.add_flags(p)
    if command == "install":
        p.add_argument("--no-default-class", action="store_true",
                       help="do not mark the StorageClass local-path as the cluster's default")
        p.add_argument("--write-kubeconfig", default=None, metavar="FILE",
                       help="then write the provisioner's kubeconfig (a TokenRequest token of its account) here")
        p.add_argument("--token-expiration", type=leaderelection.parse_duration, default=None,
                       help="lifetime of that token (default 8760h)")
    else:
        p.add_argument("--provisioner-name", default=manifests.PROVISIONER_NAME,
                       help="the provisioner classes name (default %(default)s)")
        p.add_argument("--helper-image", default=DEFAULT_HELPER_IMAGE, help="helper pods' image (%(default)s)")
        p.add_argument("--service-account-name", default=manifests.SERVICE_ACCOUNT,
                       help="helper pods' service account (default %(default)s)")
        p.add_argument("--configmap-name", default=manifests.CONFIG_MAP,
                       help="ConfigMap with config.json and the setup/teardown scripts (default %(default)s)")
        p.add_argument("--config", default=None, help="a config.json (rancher's format) instead of the ConfigMap's")
        p.add_argument("--health-port", type=int, default=0, help="/health and /ready port (0: none)")
        p.add_argument("--worker-threads", type=int, default=4, help="reconciles at once (default %(default)s)")
        leaderelection.add_flags(p, manifests.PROVISIONER_NAME.replace("/", "-"))
        p.set_defaults(leader_elect_resource_namespace=manifests.NAMESPACE)
    args = p.parse_args(argv)
    args.command = command
    if not args.kubeconfig and not args.master:
        p.error("one of --kubeconfig or --master is required")
    if args.path is not None and not args.path.startswith("/"):
        p.error(f"--path {args.path!r} must be absolute")
    if command == "start":
        if args.worker_threads < 1:
            p.error("--worker-threads must be at least 1")
        leaderelection.check_flags(p, args)
    return args


async def load_config(client: ApiClient, args: argparse.Namespace) -> Config:
    if args.path:
        return Config({manifests.DEFAULT_NODE_KEY: [args.path.rstrip("/") or "/"]})
    if args.config:
        with open(args.config) as f:
            return Config.parse(f.read())
    try:
        cm = await client.get_raw(ConfigMap, args.configmap_name, args.namespace)
    except ApiError as e:
        if not e.is_not_found:
            raise
        log.warning("no ConfigMap %s/%s: volumes go under %s", args.namespace, args.configmap_name,
                    manifests.DEFAULT_PATH)
        return Config()
    text = (cm.get("data") or {}).get("config.json")
    return Config.parse(text) if text else Config()


async def install(args: argparse.Namespace) -> int:
    config = build_config_from_flags(args.master, args.kubeconfig, user_agent())
    client = ApiClient(config, user_agent=user_agent())
    try:
        for line in await manifests.install(client, args.path or manifests.DEFAULT_PATH,
                                            default_class=not args.no_default_class):
            print(line)
        if args.write_kubeconfig:
            seconds = int(args.token_expiration) if args.token_expiration else manifests.TOKEN_EXPIRATION
            await manifests.write_token_kubeconfig(client, config, args.write_kubeconfig, seconds)
            print(f"kubeconfig: wrote {args.write_kubeconfig} ({manifests.user()}, token for {seconds}s)")
    finally:
        await client.close()
    return 0


async def health_server(port: int, provisioner: LocalPathProvisioner) -> web.AppRunner:
    async def health(_: web.Request) -> web.Response:
        return web.Response(text="OK")

    async def ready(_: web.Request) -> web.Response:
        synced = all(i.has_synced for i in provisioner.informers)
        return web.Response(text="OK") if synced else web.Response(status=503, text="caches not synced")

    app = web.Application()
    app.router.add_get("/health", health)
    app.router.add_get("/healthz", health)
    app.router.add_get("/ready", ready)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner


async def start(args: argparse.Namespace) -> int:
    config = build_config_from_flags(args.master, args.kubeconfig, user_agent())
    client = ApiClient(config, user_agent=user_agent())
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    factory = SharedInformerFactory(client)
    identity = leaderelection.new_identity()
    provisioner = LocalPathProvisioner(
        client, factory, config=await load_config(client, args), namespace=args.namespace,
        helper_image=args.helper_image, service_account=args.service_account_name,
        provisioner_name=args.provisioner_name, config_map=args.configmap_name, identity=identity,
        workers=args.worker_threads)
    log.info("local-path provisioner %s starting against %s; volumes under %s", args.provisioner_name,
             config.server, provisioner.config.node_paths)
    runner = await health_server(args.health_port, provisioner) if args.health_port else None
    factory.start()
    try:
        if args.leader_elect:
            elector_client = ApiClient(config, user_agent=f"{user_agent()}/leader-election")
            task = asyncio.create_task(leaderelection.run_leader_elected(
                elector_client, args, args.provisioner_name, provisioner.run, stop))
        else:
            task = asyncio.create_task(provisioner.run())
        stopped = asyncio.create_task(stop.wait())
        await asyncio.wait({task, stopped}, return_when=asyncio.FIRST_COMPLETED)
        if not stop.is_set() and task.done() and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]
        if not args.leader_elect:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        stopped.cancel()
    finally:
        await factory.shutdown()
        if runner is not None:
            await runner.cleanup()
        provisioner.recorder.close()
        await client.close()
        log.info("local-path provisioner stopped: %d volumes provisioned, %d deleted", provisioner.provisioned,
                 provisioner.deleted)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logs.setup(args.v)
    return asyncio.run(install(args) if args.command == "install" else start(args))


if __name__ == "__main__":
    sys.exit(main())
