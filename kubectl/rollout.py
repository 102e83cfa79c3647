"""`mkubectl rollout status|history|undo|restart|pause|resume` for Deployments (and status, history, undo,
restart for DaemonSets and StatefulSets), as kubectl does them.

- status: the deployment is listed and watched by name; every state it goes through is judged by
  kubectl's DeploymentStatusViewer and its line printed (`Waiting for deployment "x" rollout to
  finish: 1 of 3 updated replicas are available...`) until `deployment "x" successfully rolled out`
  (exit 0), the progress deadline is exceeded, the object is deleted, or `--timeout` passes
  (`error: timed out waiting for the condition`, exit 1).
- history: the revisions of the ReplicaSets the deployment controls
  (`deployment.kubernetes.io/revision`), with their change-cause annotations.
- undo: kubectl's JSON patch replacing /spec/template (the revision's template without its
  pod-template-hash label) and /metadata/annotations.
- restart: a strategic merge patch setting the template annotation kubectl.kubernetes.io/restartedAt.

DaemonSets (kubectl's DaemonSetStatusViewer, DaemonSetHistoryViewer, DaemonSetRollbacker): status only for
RollingUpdate; history and undo read the ControllerRevisions the DaemonSet controls, and undo applies the
chosen revision's data (a strategic merge patch replacing spec.template) as it is. StatefulSets the same
way (StatefulSetStatusViewer, StatefulSetHistoryViewer, StatefulSetRollbacker), their status by partition.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from kubectl.context import Context
from kubectl.describe import (
    PrefixWriter,
    controller_of,
    describe_pod_template,
    equal_ignore_hash,
    label_selector_string,
    replica_sets_of,
)
from kubectl.errors import CommandError
from kubectl.printers import kind_name, resource_name
from kubectl.resources import Target, targets_from_args
from kubectl.waiting import watch_object
from machinery.api.resources import ResourceInfo, resource_for
from machinery.timeutil import now_rfc3339_local
from machinery.types import Obj

REVISION = "deployment.kubernetes.io/revision"
REVISION_HISTORY = "deployment.kubernetes.io/revision-history"
CHANGE_CAUSE = "kubernetes.io/change-cause"
RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"
HASH_LABEL = "pod-template-hash"
ANNOTATIONS_TO_SKIP = frozenset({
    "kubectl.kubernetes.io/last-applied-configuration", REVISION, REVISION_HISTORY,
    "deployment.kubernetes.io/desired-replicas", "deployment.kubernetes.io/max-replicas",
    "deprecated.deployment.rollback.to",
})


def _d(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def revision_of(obj: Obj) -> int | None:
    value = _d(_d(obj.get("metadata")).get("annotations")).get(REVISION)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def deployment_status(d: Obj, revision: int = 0) -> tuple[str, bool]:
    """kubectl's DeploymentStatusViewer.Status: (the line to print, whether the rollout is done)."""
    meta, spec, status = _d(d.get("metadata")), _d(d.get("spec")), _d(d.get("status"))
    name = meta.get("name", "")
    if revision > 0:
        current = revision_of(d)
        if current is None:
            raise CommandError(f'cannot get the revision of deployment "{name}"')
        if current != revision:
            raise CommandError(f"desired revision ({revision}) is different from the running revision ({current})")
    if (meta.get("generation") or 0) <= (status.get("observedGeneration") or 0):
        for c in status.get("conditions") or []:
            if c.get("type") == "Progressing" and c.get("reason") == "ProgressDeadlineExceeded":
                raise CommandError(f'deployment "{name}" exceeded its progress deadline')
        replicas = spec.get("replicas", 1)
        updated = status.get("updatedReplicas") or 0
        total = status.get("replicas") or 0
        available = status.get("availableReplicas") or 0
        if replicas is not None and updated < replicas:
            return (f'Waiting for deployment "{name}" rollout to finish: {updated} out of {replicas} new replicas '
                    "have been updated...", False)
        if total > updated:
            return (f'Waiting for deployment "{name}" rollout to finish: {total - updated} old replicas are pending '
                    "termination...", False)
        if available < updated:
            return (f'Waiting for deployment "{name}" rollout to finish: {available} of {updated} updated replicas '
                    "are available...", False)
        return f'deployment "{name}" successfully rolled out', True
    return "Waiting for deployment spec update to be observed...", False


def daemon_set_status(ds: Obj) -> tuple[str, bool]:
    """kubectl's DaemonSetStatusViewer.Status."""
    meta, spec, status = _d(ds.get("metadata")), _d(ds.get("spec")), _d(ds.get("status"))
    if _d(spec.get("updateStrategy")).get("type") != "RollingUpdate":
        raise CommandError("rollout status is only available for RollingUpdate strategy type")
    name = meta.get("name", "")
    if (meta.get("generation") or 0) <= (status.get("observedGeneration") or 0):
        desired = status.get("desiredNumberScheduled") or 0
        updated = status.get("updatedNumberScheduled") or 0
        available = status.get("numberAvailable") or 0
        if updated < desired:
            return (f'Waiting for daemon set "{name}" rollout to finish: {updated} out of {desired} new pods have '
                    "been updated...", False)
        if available < desired:
            return (f'Waiting for daemon set "{name}" rollout to finish: {available} of {desired} updated pods are '
                    "available...", False)
        return f'daemon set "{name}" successfully rolled out', True
    return "Waiting for daemon set spec update to be observed...", False


def stateful_set_status(sts: Obj) -> tuple[str, bool]:
    """kubectl's StatefulSetStatusViewer.Status."""
    meta, spec, status = _d(sts.get("metadata")), _d(sts.get("spec")), _d(sts.get("status"))
    strategy = _d(spec.get("updateStrategy"))
    if strategy.get("type") != "RollingUpdate":
        raise CommandError("rollout status is only available for RollingUpdate strategy type")
    observed = status.get("observedGeneration") or 0
    if observed == 0 or (meta.get("generation") or 0) > observed:
        return "Waiting for statefulset spec update to be observed...", False
    replicas = spec.get("replicas")
    ready = status.get("readyReplicas") or 0
    if replicas is not None and ready < replicas:
        return f"Waiting for {replicas - ready} pods to be ready...", False
    updated = status.get("updatedReplicas") or 0
    rolling = strategy.get("rollingUpdate")
    if isinstance(rolling, dict):
        partition = rolling.get("partition")
        if replicas is not None and partition is not None and updated < replicas - partition:
            return (f"Waiting for partitioned roll out to finish: {updated} out of {replicas - partition} new pods "
                    "have been updated...", False)
        return f"partitioned roll out complete: {updated} new pods have been updated...", True
    if status.get("updateRevision") != status.get("currentRevision"):
        return (f"waiting for statefulset rolling update to complete {updated} pods at revision "
                f"{status.get('updateRevision') or ''}...", False)
    return (f"statefulset rolling update complete {status.get('currentReplicas') or 0} pods at revision "
            f"{status.get('currentRevision') or ''}...", True)


def _is_daemon_set(info: ResourceInfo) -> bool:
    """A kind whose history is ControllerRevisions (DaemonSet, StatefulSet)."""
    return (info.group, info.kind) in (("apps", "DaemonSet"), ("apps", "StatefulSet"))


def _workload_status(info: ResourceInfo, obj: Obj) -> tuple[str, bool]:
    return stateful_set_status(obj) if info.kind == "StatefulSet" else daemon_set_status(obj)


async def daemon_set_history(ctx: Context, ds: Obj) -> dict[int, Obj]:
    """controlledHistories: the ControllerRevisions the DaemonSet controls, by revision."""
    meta, spec = _d(ds.get("metadata")), _d(ds.get("spec"))
    info = resource_for("apps", "controllerrevisions")
    assert info is not None
    page = await ctx.client.request("GET", info.collection_path(meta.get("namespace")),
                                    params={"labelSelector": label_selector_string(spec.get("selector")) or None})
    return {int(r.get("revision") or 0): r for r in page.get("items") or []
            if (controller_of(r) or {}).get("uid") == meta.get("uid")}


def _revision_template(revision: Obj) -> Obj:
    """The pod template a DaemonSet revision puts back (its patch's spec.template, without the directive)."""
    template = dict(_d(_d(_d(revision.get("data")).get("spec")).get("template")))
    template.pop("$patch", None)
    return template


def _only_deployments(targets: list[Target], verb: str, daemon_sets: bool = False) -> list[tuple[ResourceInfo, str]]:
    pairs: list[tuple[ResourceInfo, str]] = []
    for target in targets:
        if not target.names:
            raise CommandError("you must provide one or more resources by argument or filename")
        if daemon_sets and _is_daemon_set(target.info):
            pairs.extend((target.info, n) for n in target.names)
            continue
        if (target.info.group, target.info.kind) != ("apps", "Deployment"):
            group_kind = f"{target.info.kind}.{target.info.group}" if target.info.group else target.info.kind
            raise CommandError(f"no {verb} has been implemented for {group_kind}")
        pairs.extend((target.info, n) for n in target.names)
    return pairs


async def status(ctx: Context, args: argparse.Namespace) -> int:
    targets = await targets_from_args(ctx.resolver, args.resources)
    for target in targets:  # as kubectl: the objects must exist before their kind is judged
        for name in target.names:
            await ctx.client.request("GET", target.info.object_path(name, ctx.ns_for(target.info)))
    pairs = _only_deployments(targets, "status viewer", daemon_sets=True)
    for info, name in pairs:
        namespace = ctx.ns_for(info)

        def judge(etype: str, obj: Obj | None, info: ResourceInfo = info) -> bool:
            if etype == "DELETED" or obj is None:
                raise CommandError("object has been deleted")
            line, done = _workload_status(info, obj) if _is_daemon_set(info) else deployment_status(obj, args.revision)
            ctx.print(line)
            return done or not args.watch

        try:
            async with asyncio.timeout(args.timeout or None):
                await watch_object(ctx, info, namespace, name, judge)
        except TimeoutError:
            raise CommandError("timed out waiting for the condition") from None
    return 0


async def _history_of(ctx: Context, deployment: Obj) -> dict[int, Obj]:
    old, new = await replica_sets_of(ctx, deployment)
    history: dict[int, Obj] = {}
    for rs in [*old, *([new] if new else [])]:
        revision = revision_of(rs)
        if revision is None:
            continue
        template = dict(_d(_d(rs.get("spec")).get("template")))
        meta = dict(_d(template.get("metadata")))
        annotations = dict(_d(meta.get("annotations")))
        cause = _d(_d(rs.get("metadata")).get("annotations")).get(CHANGE_CAUSE)
        if cause:
            annotations[CHANGE_CAUSE] = cause
        meta["annotations"] = annotations
        template["metadata"] = meta
        history[revision] = template
    return history


def template_text(template: Obj) -> str:
    """printTemplate: the pod template as describe writes it, tabs left as they are."""
    w = PrefixWriter()
    describe_pod_template(w, template)
    return w.raw()


async def history(ctx: Context, args: argparse.Namespace) -> int:
    pairs = _only_deployments(await targets_from_args(ctx.resolver, args.resources), "history viewer",
                              daemon_sets=True)
    for info, name in pairs:
        deployment = await ctx.client.request("GET", info.object_path(name, ctx.ns_for(info)))
        if _is_daemon_set(info):
            # printHistory: the change-cause of each revision is the revision's own annotation; its template
            # is the revision's patch applied (no change-cause in it)
            controlled = await daemon_set_history(ctx, deployment)
            revisions = {number: _revision_template(r) for number, r in controlled.items()}
            causes = {number: _d(_d(r.get("metadata")).get("annotations")).get(CHANGE_CAUSE)
                      for number, r in controlled.items()}
        else:
            revisions = await _history_of(ctx, deployment)
            causes = {number: _d(_d(t.get("metadata")).get("annotations")).get(CHANGE_CAUSE)
                      for number, t in revisions.items()}
        if args.revision > 0:
            chosen = revisions.get(args.revision)
            if chosen is None:
                raise CommandError("unable to find the specified revision")
            ctx.out.write(f"{resource_name(info, name)} with revision #{args.revision}\n{template_text(chosen)}\n")
            continue
        if not revisions:
            ctx.print(f"{resource_name(info, name)} \nNo rollout history found.")
            continue
        from kubectl.tabwriter import tabbed

        lines = "REVISION\tCHANGE-CAUSE\n" + "".join(
            f"{r}\t{causes.get(r) or '<none>'}\n"
            for r in sorted(revisions))
        ctx.out.write(f"{resource_name(info, name)} \n{tabbed(lines)}\n")
    ctx.out.flush()
    return 0


async def undo(ctx: Context, args: argparse.Namespace) -> int:
    if args.to_revision < 0:
        raise CommandError(f"unable to find specified revision {args.to_revision} in history")
    pairs = _only_deployments(await targets_from_args(ctx.resolver, args.resources), "rollbacker", daemon_sets=True)
    for info, name in pairs:
        path = info.object_path(name, ctx.ns_for(info))
        deployment = await ctx.client.request("GET", path)
        if _is_daemon_set(info):
            await _undo_daemon_set(ctx, info, name, path, deployment, args.to_revision)
            continue
        old, new = await replica_sets_of(ctx, deployment)
        target = _revision_to(deployment, [*old, *([new] if new else [])], args.to_revision)
        if _d(deployment.get("spec")).get("paused"):
            raise CommandError("you cannot rollback a paused deployment; resume it first with 'kubectl rollout "
                               "resume' and try again")
        template = _d(_d(target.get("spec")).get("template"))
        if equal_ignore_hash(template, _d(_d(deployment.get("spec")).get("template"))):
            ctx.print(f"{resource_name(info, name)} skipped rollback (current template already matches revision "
                      f"{revision_of(target)})")
            continue
        template = dict(template)
        meta = dict(_d(template.get("metadata")))
        labels = {k: v for k, v in _d(meta.get("labels")).items() if k != HASH_LABEL}
        meta["labels"] = labels
        template["metadata"] = meta
        current = _d(_d(deployment.get("metadata")).get("annotations"))
        annotations = {k: current[k] for k in ANNOTATIONS_TO_SKIP if k in current}
        annotations.update({k: v for k, v in _d(_d(target.get("metadata")).get("annotations")).items()
                            if k not in ANNOTATIONS_TO_SKIP})
        patch = [
            {"op": "replace", "path": "/spec/template", "value": template},
            {"op": "replace", "path": "/metadata/annotations", "value": annotations},
        ]
        await ctx.client.request("PATCH", path, body=patch, content_type="application/json-patch+json")
        ctx.print(f"{resource_name(info, name)} rolled back")
    return 0


async def _undo_daemon_set(ctx: Context, info: ResourceInfo, name: str, path: str, ds: Obj, to_revision: int) -> None:
    """DaemonSetRollbacker.Rollback: the previous (or the named) revision's patch, applied as it is."""
    history = await daemon_set_history(ctx, ds)
    if to_revision == 0 and len(history) <= 1:
        if info.kind == "StatefulSet":  # findHistory finds none: revisionNotFoundErr(0)
            raise CommandError("unable to find specified revision 0 in history")
        raise CommandError("no last revision to roll back to")
    if to_revision == 0:
        target = history[sorted(history)[-2]]
    elif to_revision in history:
        target = history[to_revision]
    else:
        raise CommandError(f"unable to find specified revision {to_revision} in history")
    if _revision_template(target) == _d(_d(ds.get("spec")).get("template")):
        ctx.print(f"{resource_name(info, name)} skipped rollback (current template already matches revision "
                  f"{to_revision})")
        return
    await ctx.client.request("PATCH", path, body=_d(target.get("data")),
                             content_type="application/strategic-merge-patch+json")
    ctx.print(f"{resource_name(info, name)} rolled back")


def _revision_to(deployment: Obj, sets: list[Obj], to_revision: int) -> Obj:
    """deploymentRevision: the ReplicaSet of `to_revision`, or the previous one for 0."""
    latest: tuple[int, Obj | None] = (-1, None)
    previous: tuple[int, Obj | None] = (-1, None)
    for rs in sets:
        v = revision_of(rs)
        if v is None:
            continue
        if to_revision == 0:
            if latest[0] < v:
                previous, latest = latest, (v, rs)
            elif previous[0] < v:
                previous = (v, rs)
        elif v == to_revision:
            return rs
    if to_revision > 0:
        raise CommandError(f"unable to find specified revision {to_revision} in history")
    if previous[1] is None:
        raise CommandError(f'no rollout history found for deployment "{_d(deployment.get("metadata")).get("name")}"')
    return previous[1]


async def restart(ctx: Context, args: argparse.Namespace) -> int:
    pairs = _only_deployments(await targets_from_args(ctx.resolver, args.resources), "restarter", daemon_sets=True)
    for info, name in pairs:
        path = info.object_path(name, ctx.ns_for(info))
        deployment = await ctx.client.request("GET", path)
        if not _is_daemon_set(info) and _d(deployment.get("spec")).get("paused"):
            raise CommandError("can't restart paused deployment (run rollout resume first)")
        patch = {"spec": {"template": {"metadata": {"annotations": {RESTARTED_AT: now_rfc3339_local()}}}}}
        await ctx.client.request("PATCH", path, body=patch, content_type="application/strategic-merge-patch+json")
        ctx.print(f"{resource_name(info, name)} restarted")
    return 0


async def pause_or_resume(ctx: Context, args: argparse.Namespace, paused: bool) -> int:
    verb = "paused" if paused else "resumed"
    pairs = _only_deployments(await targets_from_args(ctx.resolver, args.resources), "pauser" if paused else "resumer")
    for info, name in pairs:
        path = info.object_path(name, ctx.ns_for(info))
        deployment = await ctx.client.request("GET", path)
        if bool(_d(deployment.get("spec")).get("paused")) == paused:
            raise CommandError(f'{kind_name(info).replace("deployment", "deployments", 1)} "{name}" is '
                               f"{'already paused' if paused else 'not paused'}")
        await ctx.client.request("PATCH", path, body={"spec": {"paused": paused}},
                                 content_type="application/strategic-merge-patch+json")
        ctx.print(f"{resource_name(info, name)} {verb}")
    return 0
