"""`python -m scheduler`: the kube-scheduler of minik8s, with upstream's flag names.

    python -m scheduler --kubeconfig /etc/minik8s/scheduler.conf
    python -m scheduler --master http://127.0.0.1:8080

`--master` overrides the kubeconfig's server (or stands alone). Calls carry the identity
system:kube-scheduler in the User-Agent. SIGTERM/SIGINT stop it gracefully: in-flight bindings
get a few seconds to finish.

Leader election (--leader-elect, on by default, as upstream): replicas campaign for the Lease
kube-system/kube-scheduler (--leader-elect-resource-name). Every replica fills its caches first (a
standby keeps its informers warm, as upstream's does); only the holder schedules and binds. A leader
that loses the Lease exits at once with status 1 ("leaderelection lost"); a stopped one releases it.

The secure port (--secure-port 10259, 0 for none) serves /healthz and, to whom the apiserver allows, /metrics
(machinery/delegated_auth.py).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Coroutine
from typing import Any

from machinery import delegated_auth, leaderelection, logs, memtrim, tracing
from machinery.client import ApiClient
from machinery.kubeconfig import ClientConfig, build_config_from_flags
from scheduler.queue import DEFAULT_POD_INITIAL_BACKOFF, DEFAULT_POD_MAX_BACKOFF
from scheduler.scheduler import DEFAULT_BIND_CONCURRENCY, DEFAULT_SCHEDULER_NAME, Scheduler, user_agent

log = logging.getLogger("scheduler")
SECURE_PORT = 10259  # upstream's kube-scheduler port


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="scheduler", description="minik8s scheduler (kube-scheduler)")
    p.add_argument("--kubeconfig", default=None, help="kubeconfig with the apiserver and credentials")
    p.add_argument("--master", default=None, help="apiserver URL; overrides the kubeconfig's server")
    p.add_argument("--scheduler-name", default=DEFAULT_SCHEDULER_NAME,
                   help="schedule pods whose spec.schedulerName is this (default %(default)s)")
    leaderelection.add_flags(p, "kube-scheduler")
    p.add_argument("--pod-initial-backoff-seconds", type=float, default=DEFAULT_POD_INITIAL_BACKOFF,
                   help="backoff of a pod after its first failed attempt (default %(default)s)")
    p.add_argument("--pod-max-backoff-seconds", type=float, default=DEFAULT_POD_MAX_BACKOFF,
                   help="cap of the doubling backoff (default %(default)s)")
    p.add_argument("--bind-concurrency", type=int, default=DEFAULT_BIND_CONCURRENCY,
                   help="bindings in flight at once (default %(default)s)")
    delegated_auth.add_serving_flags(p, SECURE_PORT)
    tracing.add_flag(p)
    logs.add_flags(p)
    args = p.parse_args(argv)
    if not args.kubeconfig and not args.master:
        p.error("one of --kubeconfig or --master is required")
    if args.pod_initial_backoff_seconds < 0 or args.pod_max_backoff_seconds < args.pod_initial_backoff_seconds:
        p.error("need 0 <= --pod-initial-backoff-seconds <= --pod-max-backoff-seconds")
    leaderelection.check_flags(p, args)
    return args


def client_config(args: argparse.Namespace) -> ClientConfig:
    return build_config_from_flags(args.master, args.kubeconfig, user_agent())


async def _until_stopped(work: Coroutine[Any, Any, None], stop: asyncio.Event) -> bool:
    """Run `work` until it ends or `stop` is set (then cancel it); True if it ran to its end."""
    task = asyncio.create_task(work)
    stopped = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({task, stopped}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for t in (task, stopped):
            t.cancel()
        await asyncio.gather(task, stopped, return_exceptions=True)
    if task.cancelled():
        return False
    error = task.exception()
    if error is not None:
        raise error
    return True


async def _run_elected(args: argparse.Namespace, config: ClientConfig, scheduler: Scheduler,
                       stop: asyncio.Event) -> None:
    """Warm the caches, then campaign; schedule only while holding the Lease."""
    if not await _until_stopped(scheduler.sync(), stop):
        return
    # its own connection, so renewals never queue behind a burst of bindings (upstream's "leader-election" client)
    client = ApiClient(config, user_agent=f"{user_agent()}/leader-election")
    await leaderelection.run_leader_elected(client, args, args.scheduler_name, scheduler.run, stop)


async def run(args: argparse.Namespace) -> None:
    config = client_config(args)
    client = ApiClient(config, user_agent=user_agent())
    scheduler = Scheduler(
        client,
        scheduler_name=args.scheduler_name,
        pod_initial_backoff=args.pod_initial_backoff_seconds,
        pod_max_backoff=args.pod_max_backoff_seconds,
        bind_concurrency=args.bind_concurrency,
    )
    log.info("scheduler %s starting against %s", args.scheduler_name, config.server)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    # serving starts first, on a standby too (upstream's healthz and metrics do not wait for the lease)
    server, _ = await delegated_auth.start_serving(args, client)
    trimmer = asyncio.create_task(memtrim.run())  # freed cache versions back to the system (issue 19)
    try:
        if args.leader_elect:
            await _run_elected(args, config, scheduler, stop)
        else:
            await _until_stopped(scheduler.run(), stop)
    finally:
        trimmer.cancel()
        await scheduler.factory.shutdown()  # a standby that never led still runs its informers
        if server is not None:
            await server.stop()
        await client.close()
        log.info("scheduler stopped: %d bound, %d unschedulable attempts, %d binding errors",
                 scheduler.scheduled, scheduler.unschedulable, scheduler.bind_errors)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logs.setup(args.v)
    tracing.setup_or_exit(args.tracing_config_file, "kube-scheduler")
    asyncio.run(run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
