"""`mkubectl cordon|uncordon NODE...` and `mkubectl drain NODE...` (upstream kubectl's cmd/drain and
staging/src/k8s.io/kubectl/pkg/drain: cordon.go, filters.go, drain.go).

cordon/uncordon: a strategic merge patch of spec.unschedulable (`node/X cordoned`, `already cordoned`).
drain: cordon, then the node's pods (field selector spec.nodeName, all namespaces, `--pod-selector`)
through kubectl's filters in its order: pods deleted more than `--skip-wait-for-delete-timeout` ago (skipped),
DaemonSet pods (refused, or skipped with `--ignore-daemonsets`;
one whose DaemonSet is gone needs `--force`), mirror pods (skipped), pods with emptyDir volumes
(`--delete-emptydir-data`), pods with no controller (`--force`); finished pods always go. What is
refused is one error, `cannot delete <what>: ns/pod, ...`; what is allowed with a warning is one
`Warning:` line. Then each pod is evicted through pods/eviction (policy/v1; `--disable-eviction`
deletes instead), a 429 retried every 5 s with kubectl's `error when evicting pods/"x" -n "ns" (will
retry after 5s): ...` line, and waited for until it is gone (`pod/x evicted`), all within `--timeout`
(0: no limit): `node/X drained`.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import time
from typing import Any

from kubectl.context import Context
from kubectl.errors import format_error
from kubectl.flags import duration
from machinery.client import ApiError
from machinery.timeutil import format_go_duration, now, parse_rfc3339

NODES = "/api/v1/nodes"
DAEMONSET_FATAL = "DaemonSet-managed Pods (use --ignore-daemonsets to ignore)"
DAEMONSET_WARNING = "ignoring DaemonSet-managed Pods"
LOCAL_STORAGE_FATAL = "Pods with local storage (use --delete-emptydir-data to override)"
LOCAL_STORAGE_WARNING = "deleting Pods with local storage"
UNMANAGED_FATAL = "Pods declare no controller (use --force to override)"
UNMANAGED_WARNING = "deleting Pods that declare no controller"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
RETRY_AFTER = 5.0


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    for name, verb in (("cordon", "mark node as unschedulable"), ("uncordon", "mark node as schedulable")):
        p = sub.add_parser(name, parents=[common], help=verb)
        p.add_argument("nodes", nargs="+", metavar="NODE")
        p.add_argument("--dry-run", default="none", choices=["none", "client", "server"])
        p.set_defaults(run=run_cordon if name == "cordon" else run_uncordon)
    p = sub.add_parser("drain", parents=[common], help="drain node in preparation for maintenance")
    p.add_argument("nodes", nargs="+", metavar="NODE")
    p.add_argument("--force", action="store_true", help="continue even if there are pods that do not declare a "
                   "controller")
    p.add_argument("--ignore-daemonsets", action="store_true", help="ignore DaemonSet-managed pods")
    p.add_argument("--delete-emptydir-data", action="store_true", help="continue even if there are pods using "
                   "emptyDir (local data that will be deleted when the node is drained)")
    p.add_argument("--grace-period", type=int, default=-1, help="period of time in seconds given to each pod to "
                   "terminate gracefully; negative: the pod's own")
    p.add_argument("--timeout", type=duration, default=0.0, help="the length of time to wait before giving up, "
                   "zero means infinite")
    p.add_argument("--pod-selector", default="", help="label selector to filter pods on the node")
    p.add_argument("--disable-eviction", action="store_true", help="delete pods instead of evicting them, "
                   "bypassing PodDisruptionBudgets")
    p.add_argument("--skip-wait-for-delete-timeout", type=int, default=0, help="skip pods whose deletion began "
                   "more than this many seconds ago (0: never)")
    p.set_defaults(run=run_drain)


async def cordon(ctx: Context, node: str, unschedulable: bool) -> None:
    """RunCordonOrUncordon for one node: a patch only when the node is not already so."""
    current = await ctx.client.request("GET", f"{NODES}/{node}")
    word = "cordoned" if unschedulable else "uncordoned"
    if bool((current.get("spec") or {}).get("unschedulable")) == unschedulable:
        ctx.print(f"node/{node} already {word}")
        return
    await ctx.client.request("PATCH", f"{NODES}/{node}", body={"spec": {"unschedulable": True if unschedulable
                                                                        else None}},
                             content_type="application/strategic-merge-patch+json")
    ctx.print(f"node/{node} {word}")


async def _cordon_all(ctx: Context, nodes: list[str], unschedulable: bool) -> int:
    failed = 0
    for node in nodes:
        try:
            await cordon(ctx, node, unschedulable)
        except ApiError as e:
            ctx.warn(format_error(e, ctx.client.server))
            failed += 1
    return 1 if failed else 0


async def run_cordon(ctx: Context, args: argparse.Namespace) -> int:
    return await _cordon_all(ctx, args.nodes, True)


async def run_uncordon(ctx: Context, args: argparse.Namespace) -> int:
    return await _cordon_all(ctx, args.nodes, False)


def _controller(pod: dict[str, Any]) -> dict[str, Any] | None:
    return next((r for r in (pod.get("metadata") or {}).get("ownerReferences") or [] if r.get("controller")), None)


def _finished(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


async def pod_delete_status(ctx: Context, pod: dict[str, Any], args: argparse.Namespace) -> tuple[bool, str, str]:
    """kubectl's filters in order (daemonSet, mirrorPod, localStorage, unreplicated); the last status wins:
    (delete, "warning" | "error" | "", message)."""
    meta = pod.get("metadata") or {}
    status: tuple[bool, str, str] = (True, "", "")
    deleted = parse_rfc3339(meta.get("deletionTimestamp")) if meta.get("deletionTimestamp") else None
    if deleted is not None and args.skip_wait_for_delete_timeout > 0 and \
            deleted + dt.timedelta(seconds=args.skip_wait_for_delete_timeout) < now():
        return False, "", ""  # skipDeletedFilter
    ref = _controller(pod)
    if ref is not None and ref.get("kind") == "DaemonSet" and not _finished(pod):
        try:
            await ctx.client.request("GET", f"/apis/apps/v1/namespaces/{meta.get('namespace')}/daemonsets/"
                                            f"{ref.get('name')}")
        except ApiError as e:
            if e.is_not_found and args.force:
                status = (True, "warning", e.message)
            else:
                return False, "error", e.message
        else:
            if not args.ignore_daemonsets:
                return False, "error", DAEMONSET_FATAL
            return False, "warning", DAEMONSET_WARNING
    if MIRROR_ANNOTATION in (meta.get("annotations") or {}):
        return False, "", ""
    if any("emptyDir" in v for v in (pod.get("spec") or {}).get("volumes") or []) and not _finished(pod):
        if not args.delete_emptydir_data:
            return False, "error", LOCAL_STORAGE_FATAL
        status = (True, "warning", LOCAL_STORAGE_WARNING)
    if not _finished(pod) and _controller(pod) is None:
        if not args.force:
            return False, "error", UNMANAGED_FATAL
        status = (True, "warning", UNMANAGED_WARNING)
    return status


def _grouped(items: list[tuple[str, str]]) -> list[tuple[str, list[str]]]:
    """message -> pods, in order of first appearance."""
    out: dict[str, list[str]] = {}
    for message, pod in items:
        out.setdefault(message, []).append(pod)
    return list(out.items())


async def pods_for_deletion(ctx: Context, node: str, args: argparse.Namespace
                            ) -> tuple[list[dict[str, Any]], list[str], list[str]]:
    """GetPodsForDeletion: (pods to go, warnings, errors)."""
    params = {"fieldSelector": f"spec.nodeName={node}"}
    if args.pod_selector:
        params["labelSelector"] = args.pod_selector
    listed = await ctx.client.request("GET", "/api/v1/pods", params=params)
    chosen, warnings, errors = [], [], []
    for pod in listed.get("items") or []:
        meta = pod.get("metadata") or {}
        delete, kind, message = await pod_delete_status(ctx, pod, args)
        where = f"{meta.get('namespace')}/{meta.get('name')}"
        if kind == "warning":
            warnings.append((message, where))
        elif kind == "error":
            errors.append((message, where))
        if delete:
            chosen.append(pod)
    return (chosen, [f"{m}: {', '.join(p)}" for m, p in _grouped(warnings)],
            [f"cannot delete {m}: {', '.join(p)}" for m, p in _grouped(errors)])


class DrainFailed(Exception):
    """Pods refused by the filters (`cannot delete ...`) or evictions that failed: kubectl's aggregate."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__(errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]")
        self.errors = errors


def _timed_out(deadline: float | None) -> bool:
    return deadline is not None and time.monotonic() >= deadline


async def _evict_one(ctx: Context, pod: dict[str, Any], args: argparse.Namespace, deadline: float | None) -> None:
    """evictPods' goroutine for one pod: evict (429: say so, retry after 5 s) until done or the global timeout,
    then waitForDelete. Raises DrainFailed with kubectl's words."""
    meta = pod["metadata"]
    name, namespace = meta["name"], meta["namespace"]
    path = f"/api/v1/namespaces/{namespace}/pods/{name}"
    timeout = format_go_duration(args.timeout)
    options: dict[str, Any] = {}
    if args.grace_period >= 0:
        options["gracePeriodSeconds"] = args.grace_period
    while True:
        if not args.disable_eviction:  # kubectl says so for evictions only
            ctx.print(f"evicting pod {namespace}/{name}")
        if _timed_out(deadline):
            raise DrainFailed([f'error when evicting pods/"{name}" -n "{namespace}": global timeout reached: '
                               f"{timeout}"])
        try:
            if args.disable_eviction:
                await ctx.client.request("DELETE", path, body={"apiVersion": "v1", "kind": "DeleteOptions", **options})
            else:
                body: dict[str, Any] = {"apiVersion": "policy/v1", "kind": "Eviction",
                                        "metadata": {"name": name, "namespace": namespace}}
                if options:
                    body["deleteOptions"] = options
                await ctx.client.request("POST", f"{path}/eviction", body=body)
            break
        except ApiError as e:
            if e.is_not_found:
                return
            if e.code != 429:
                raise DrainFailed([f'error when evicting pods/"{name}" -n "{namespace}": {e.message}']) from None
            ctx.warn(f'error when evicting pods/"{name}" -n "{namespace}" (will retry after 5s): {e.message}')
            await asyncio.sleep(RETRY_AFTER)
    while True:  # waitForDelete: gone, or a new pod of the same name
        try:
            current = await ctx.client.request("GET", path)
        except ApiError as e:
            if e.is_not_found:
                break
            raise
        if (current.get("metadata") or {}).get("uid") != meta.get("uid"):
            break
        if _timed_out(deadline):
            raise DrainFailed([f'error when waiting for pod "{name}" in namespace "{namespace}" to terminate: '
                               f"global timeout reached: {timeout}"])
        await asyncio.sleep(1.0)
    ctx.print(f"pod/{name} {'deleted' if args.disable_eviction else 'evicted'}")


async def drain_node(ctx: Context, node: str, args: argparse.Namespace) -> None:
    """deleteOrEvictPodsSimple: the filters' errors refuse the drain; evictions that fail name the pods left."""
    pods, warnings, errors = await pods_for_deletion(ctx, node, args)
    if errors:
        raise DrainFailed(errors)
    if warnings:
        ctx.warn("Warning: " + "; ".join(warnings))
    deadline = time.monotonic() + args.timeout if args.timeout > 0 else None
    results = await asyncio.gather(*(_evict_one(ctx, p, args, deadline) for p in pods), return_exceptions=True)
    failed: list[str] = []
    for result in results:
        if isinstance(result, DrainFailed):
            failed.extend(result.errors)
        elif isinstance(result, ApiError):
            failed.append(format_error(result, ctx.client.server).removeprefix("error: "))
        elif isinstance(result, BaseException):
            raise result
    if failed:
        error = DrainFailed(failed)
        pending, _, _ = await pods_for_deletion(ctx, node, args)
        if pending:
            ctx.warn(f'There are pending pods in node "{node}" when an error occurred: {error}')
            for pod in pending:
                ctx.warn(f"pod/{pod['metadata']['name']}")
        raise error


async def run_drain(ctx: Context, args: argparse.Namespace) -> int:
    if await _cordon_all(ctx, args.nodes, True):
        return 1
    for node in args.nodes:
        try:
            await drain_node(ctx, node, args)
        except DrainFailed as e:
            ctx.warn(f'error: unable to drain node "{node}" due to error: {e}, continuing command...')
            ctx.warn("There are pending nodes to be drained:")
            ctx.warn(f" {node}")
            for line in e.errors:
                ctx.warn(line)
            return 1
        except ApiError as e:
            ctx.warn(format_error(e, ctx.client.server))
            return 1
        ctx.print(f"node/{node} drained")
    return 0
