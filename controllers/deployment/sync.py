"""The Deployment controller's sync steps (upstream pkg/controller/deployment/sync.go): the new
ReplicaSet found or created with its revision synced (a hash collision bumps collisionCount),
scaling (the only active ReplicaSet takes the whole size; during a rollout, the active ones
proportionally), paused Deployments and scaling events (resize, no rollout), cleanup of old
ReplicaSets past revisionHistoryLimit, and the status computation and write.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
from collections.abc import Sequence
from typing import Protocol

from controllers.controller_ref_manager import controller_ref, new_controller_ref
from controllers.controller_utils import namespace_terminating
from controllers.deployment.rollback import set_new_replicaset_annotations
from controllers.deployment.util import (
    AVAILABLE,
    FAILED_RS_CREATE,
    FOUND_NEW_REPLICASET,
    MINIMUM_REPLICAS_AVAILABLE,
    MINIMUM_REPLICAS_UNAVAILABLE,
    NEW_REPLICASET_CREATED,
    PAUSED,
    PROGRESSING,
    RESUMED,
    REVISION_ANNOTATION,
    TIMED_OUT,
    active,
    actual_replica_count,
    available_replica_count,
    by_revision,
    by_size_newer,
    by_size_older,
    desired_replicas_annotation,
    equal_ignore_hash,
    find_active_or_latest,
    find_new_replicaset,
    find_old_replicasets,
    get_condition,
    has_progress_deadline,
    is_rolling_update,
    is_saturated,
    max_revision,
    max_surge,
    max_unavailable,
    new_condition,
    new_replicaset_template,
    new_rs_new_replicas,
    ready_replica_count,
    replicas,
    replicas_annotations_need_update,
    replicaset_proportion,
    selector_with_hash,
    set_condition,
    set_replicas_annotations,
    spec_replica_count,
    status_equal,
    status_int,
)
from controllers.hashing import compute_hash
from machinery.api.apps_v1 import Deployment, DeploymentStatus, ReplicaSet, ReplicaSetSpec
from machinery.api.core_v1 import Pod
from machinery.api.meta import ObjectMeta
from machinery.client import ApiClient, ApiError
from machinery.events import EventRecorder
from machinery.informer import Informer

log = logging.getLogger(__name__)


def proportional_scale(d: Deployment, rss: Sequence[ReplicaSet | None]) -> tuple[list[tuple[ReplicaSet, int]], str]:
    """The proportional part of `scale`: new sizes of the active ReplicaSets when the Deployment
    is resized in the middle of a rollout, and the direction ("up", "down" or "")."""
    live = active(rss)
    allowed = replicas(d) + max_surge(d) if replicas(d) > 0 else 0
    to_add = allowed - spec_replica_count(live)
    operation = ""
    if to_add > 0:
        live = by_size_newer(live)
        operation = "up"
    elif to_add < 0:
        live = by_size_older(live)
        operation = "down"
    sizes: dict[str, int] = {}
    added = 0
    for rs in live:
        if to_add != 0:
            share = replicaset_proportion(rs, d, to_add, added)
            sizes[rs.metadata.name or ""] = replicas(rs) + share
            added += share
        else:
            sizes[rs.metadata.name or ""] = replicas(rs)
    plan: list[tuple[ReplicaSet, int]] = []
    for i, rs in enumerate(live):
        name = rs.metadata.name or ""
        if i == 0 and to_add != 0:
            sizes[name] = max(sizes[name] + to_add - added, 0)  # leftovers go to the largest
        plan.append((rs, sizes[name]))
    return plan, operation


def calculate_status(all_rss: Sequence[ReplicaSet | None], new_rs: ReplicaSet | None, d: Deployment,
                     now: dt.datetime | None = None) -> DeploymentStatus:
    """calculateStatus: counts over the ReplicaSets, observedGeneration, the Available condition."""
    available = available_replica_count(all_rss)
    total = spec_replica_count(all_rss)
    old = d.status or DeploymentStatus()
    status = DeploymentStatus(
        observed_generation=d.metadata.generation,
        replicas=actual_replica_count(all_rss),
        updated_replicas=actual_replica_count([new_rs]),
        ready_replicas=ready_replica_count(all_rss),
        available_replicas=available,
        unavailable_replicas=max(total - available, 0),
        collision_count=old.collision_count,
        conditions=[c.model_copy() for c in old.conditions or []] or None,
    )
    if available >= replicas(d) - max_unavailable(d):
        set_condition(status, new_condition(AVAILABLE, "True", MINIMUM_REPLICAS_AVAILABLE,
                                            "Deployment has minimum availability.", now))
    else:
        set_condition(status, new_condition(AVAILABLE, "False", MINIMUM_REPLICAS_UNAVAILABLE,
                                            "Deployment does not have minimum availability.", now))
    return status


class SyncContext(Protocol):
    """What a sync uses of the controller: its client, event recorder and caches."""

    client: ApiClient
    recorder: EventRecorder
    rs_informer: Informer[ReplicaSet]
    pod_informer: Informer[Pod]


class DeploymentSync:
    """One syncDeployment: the Deployment (a private copy, kept current as it is written) and the
    steps of sync.go; progress.py, rolling.py and recreate.py add theirs."""

    def __init__(self, ctl: SyncContext, cached: Deployment) -> None:
        self.ctl = ctl
        self.client = ctl.client
        self.d = cached.model_copy(deep=True)
        self._persisted_annotations = dict(cached.metadata.annotations or {})

    @property
    def ns(self) -> str:
        return self.d.metadata.namespace or ""

    async def sync_status_only(self, rss: list[ReplicaSet]) -> float | None:
        new_rs, old_rss = await self.get_all_replicasets_and_sync_revision(rss, False)
        await self.sync_deployment_status([*old_rss, new_rs], new_rs)
        return None

    async def sync(self, rss: list[ReplicaSet]) -> float | None:
        """Scaling events and paused Deployments: resize, no rollout."""
        new_rs, old_rss = await self.get_all_replicasets_and_sync_revision(rss, False)
        await self.scale(new_rs, old_rss)
        if self.d.spec and self.d.spec.paused:
            await self.cleanup(old_rss)
        await self.sync_deployment_status([*old_rss, new_rs], new_rs)
        return None

    async def check_paused_conditions(self) -> None:
        d = self.d
        if not has_progress_deadline(d):
            return
        cond = get_condition(d.status, PROGRESSING)
        if cond is not None and cond.reason == TIMED_OUT:
            return  # the reported lack of progress stays
        paused_cond = cond is not None and cond.reason == PAUSED
        status = (d.status or DeploymentStatus()).model_copy(deep=True)
        if d.spec and d.spec.paused and not paused_cond:
            set_condition(status, new_condition(PROGRESSING, "Unknown", PAUSED, "Deployment is paused"))
        elif not (d.spec and d.spec.paused) and paused_cond:
            set_condition(status, new_condition(PROGRESSING, "Unknown", RESUMED, "Deployment is resumed"))
        else:
            return
        d.status = status
        await self.write_status()

    async def is_scaling_event(self, rss: list[ReplicaSet]) -> bool:
        """An active ReplicaSet was sized for another spec.replicas than the Deployment has now."""
        new_rs, old_rss = await self.get_all_replicasets_and_sync_revision(rss, False)
        for rs in active([*old_rss, new_rs]):
            desired = desired_replicas_annotation(rs)
            if desired is not None and desired != replicas(self.d):
                return True
        return False

    # -- new and old ReplicaSets ----------------------------------------------------------------

    async def get_all_replicasets_and_sync_revision(
            self, rss: list[ReplicaSet], create: bool) -> tuple[ReplicaSet | None, list[ReplicaSet]]:
        _, all_old = find_old_replicasets(self.d, rss)
        new_rs = await self.get_new_replicaset(rss, all_old, create)
        return new_rs, all_old

    async def get_new_replicaset(self, rss: list[ReplicaSet], old_rss: list[ReplicaSet],
                                 create: bool) -> ReplicaSet | None:
        """The new ReplicaSet with its revision synced (and the Deployment's); created if asked."""
        d = self.d
        assert d.spec is not None
        existing = find_new_replicaset(d, rss)
        new_revision = str(max_revision(old_rss) + 1)
        if existing is not None:
            rs = existing.model_copy(deep=True)
            annotations_updated = set_new_replicaset_annotations(d, rs, new_revision, True)
            assert rs.spec is not None
            if annotations_updated or (rs.spec.min_ready_seconds or 0) != (d.spec.min_ready_seconds or 0):
                rs.spec.min_ready_seconds = d.spec.min_ready_seconds
                return await self.client.update(rs)
            needs_update = self.set_revision((rs.metadata.annotations or {}).get(REVISION_ANNOTATION, ""))
            if has_progress_deadline(d) and get_condition(d.status, PROGRESSING) is None:
                status = (d.status or DeploymentStatus()).model_copy(deep=True)
                set_condition(status, new_condition(PROGRESSING, "True", FOUND_NEW_REPLICASET,
                                                    f'Found new replica set "{rs.metadata.name}"'))
                d.status = status
                needs_update = True
            if needs_update:
                await self.write_status()
            return rs
        if not create:
            return None

        collision_count = d.status.collision_count if d.status else None
        pod_template_hash = compute_hash(d.spec.template, collision_count)
        template = new_replicaset_template(d, pod_template_hash)
        assert template.metadata is not None
        new_rs = ReplicaSet(
            metadata=ObjectMeta(name=f"{d.metadata.name}-{pod_template_hash}", namespace=self.ns,
                                owner_references=[new_controller_ref(d, "apps/v1", "Deployment")],
                                labels=dict(template.metadata.labels or {})),
            spec=ReplicaSetSpec(replicas=0, min_ready_seconds=d.spec.min_ready_seconds,
                                selector=selector_with_hash(d.spec.selector, pod_template_hash), template=template),
        )
        assert new_rs.spec is not None
        new_rs.spec.replicas = new_rs_new_replicas(d, [*old_rss, new_rs], new_rs)
        set_new_replicaset_annotations(d, new_rs, new_revision, False)
        already_exists = False
        try:
            created = await self.client.create(new_rs)
        except ApiError as e:
            if e.is_already_exists:
                already_exists = True
                found = self.ctl.rs_informer.store.get_by_name(new_rs.metadata.name or "", self.ns)
                if found is None:
                    found = await self.client.get(ReplicaSet, new_rs.metadata.name or "", self.ns)
                ref = controller_ref(found)
                if (ref is not None and ref.uid == d.metadata.uid and found.spec is not None
                        and equal_ignore_hash(d.spec.template, found.spec.template)):
                    created = found
                else:
                    # A hash collision: another template hashed to this name. Bump collisionCount so
                    # the next sync computes another hash.
                    status = (d.status or DeploymentStatus()).model_copy(deep=True)
                    status.collision_count = (status.collision_count or 0) + 1
                    d.status = status
                    await self.write_status()
                    log.info("deployment %s/%s: hash collision on %s, collisionCount now %d", self.ns,
                             d.metadata.name, new_rs.metadata.name, status.collision_count)
                    raise
            elif namespace_terminating(e):
                raise
            else:
                msg = f'Failed to create new replica set "{new_rs.metadata.name}": {e.message or e}'
                if has_progress_deadline(d):
                    status = (d.status or DeploymentStatus()).model_copy(deep=True)
                    set_condition(status, new_condition(PROGRESSING, "False", FAILED_RS_CREATE, msg))
                    d.status = status
                    with contextlib.suppress(ApiError):  # the create failure is the news
                        await self.write_status()
                self.ctl.recorder.event(d, "Warning", FAILED_RS_CREATE, msg)
                raise
        if not already_exists and replicas(new_rs) > 0:
            self.ctl.recorder.event(d, "Normal", "ScalingReplicaSet",
                                    f"Scaled up replica set {created.metadata.name} to {replicas(new_rs)}")
        needs_update = self.set_revision(new_revision)
        if not already_exists and has_progress_deadline(d):
            status = (d.status or DeploymentStatus()).model_copy(deep=True)
            set_condition(status, new_condition(PROGRESSING, "True", NEW_REPLICASET_CREATED,
                                                f'Created new replica set "{created.metadata.name}"'))
            d.status = status
            needs_update = True
        if needs_update:
            await self.write_status()
        return created

    def set_revision(self, rev: str) -> bool:
        """SetDeploymentRevision on our copy; True if it changed."""
        annotations = dict(self.d.metadata.annotations or {})
        if annotations.get(REVISION_ANNOTATION) == rev:
            return False
        annotations[REVISION_ANNOTATION] = rev
        self.d.metadata.annotations = annotations
        return True

    # -- scaling --------------------------------------------------------------------------------

    async def scale(self, new_rs: ReplicaSet | None, old_rss: list[ReplicaSet]) -> None:
        """Resize for spec.replicas: the only active (or latest) ReplicaSet takes it all; old ones go
        to 0 once the new one is saturated; otherwise, in a rollout, proportionally."""
        d = self.d
        target = find_active_or_latest(new_rs, old_rss)
        if target is not None:
            if replicas(target) != replicas(d):
                await self.scale_replicaset_and_record_event(target, replicas(d))
            return
        if is_saturated(d, new_rs):
            for old in active(old_rss):
                await self.scale_replicaset_and_record_event(old, 0)
            return
        if is_rolling_update(d):
            plan, operation = proportional_scale(d, [*old_rss, new_rs])
            for rs, size in plan:
                await self.scale_replicaset(rs, size, operation)

    async def scale_replicaset_and_record_event(self, rs: ReplicaSet, new_scale: int) -> tuple[bool, ReplicaSet]:
        if replicas(rs) == new_scale:
            return False, rs
        return await self.scale_replicaset(rs, new_scale, "up" if replicas(rs) < new_scale else "down")

    async def scale_replicaset(self, rs: ReplicaSet, new_scale: int, operation: str) -> tuple[bool, ReplicaSet]:
        """Write the new size and the desired/max replicas annotations; record ScalingReplicaSet."""
        d = self.d
        size_changes = replicas(rs) != new_scale
        desired, max_replicas = replicas(d), replicas(d) + max_surge(d)
        if not size_changes and not replicas_annotations_need_update(rs, desired, max_replicas):
            return False, rs
        old_scale = replicas(rs)
        copy = rs.model_copy(deep=True)
        assert copy.spec is not None
        copy.spec.replicas = new_scale
        set_replicas_annotations(copy, desired, max_replicas)
        updated = await self.client.update(copy)
        if size_changes:
            message = f"Scaled {operation} replica set {rs.metadata.name} to {new_scale} from {old_scale}"
            self.ctl.recorder.event(d, "Normal", "ScalingReplicaSet", message)
        return size_changes, updated

    async def cleanup(self, old_rss: list[ReplicaSet]) -> None:
        """cleanupDeployment: delete the oldest old ReplicaSets beyond revisionHistoryLimit, only
        those scaled to 0 whose controller has seen that."""
        d = self.d
        limit = d.spec.revision_history_limit if d.spec else None
        if limit is None:
            return
        cleanable = [rs for rs in old_rss if rs.metadata.deletion_timestamp is None]
        diff = len(cleanable) - limit
        if diff <= 0:
            return
        for rs in by_revision(cleanable)[:diff]:
            if (status_int(rs, "replicas") != 0 or replicas(rs) != 0
                    or (rs.metadata.generation or 0) > status_int(rs, "observed_generation")):
                continue
            log.info("deployment %s/%s: deleting old replica set %s", self.ns, d.metadata.name, rs.metadata.name)
            try:
                await self.client.delete(ReplicaSet, rs.metadata.name or "", self.ns)
            except ApiError as e:
                if not e.is_not_found:
                    raise

    # -- status ---------------------------------------------------------------------------------

    async def sync_deployment_status(self, all_rss: Sequence[ReplicaSet | None], new_rs: ReplicaSet | None) -> None:
        status = calculate_status(all_rss, new_rs, self.d)
        if status_equal(self.d.status, status):
            return
        self.d.status = status
        await self.write_status()

    async def write_status(self) -> None:
        """Write the Deployment's status, and first its revision annotation if that changed.

        Upstream sends both in one UpdateStatus (its status strategy keeps metadata changes other
        than labels); this apiserver's /status keeps only .status, so the annotation goes in a
        merge patch of the object itself (which leaves the generation alone)."""
        d = self.d
        annotations = d.metadata.annotations or {}
        changed = {k: v for k, v in annotations.items() if self._persisted_annotations.get(k) != v}
        if changed:
            # the resourceVersion makes the patch a compare-and-swap, as the PUT of upstream is
            patch = {"metadata": {"annotations": changed, "resourceVersion": d.metadata.resource_version}}
            patched = await self.client.patch(Deployment, d.metadata.name or "", patch, "merge", self.ns)
            d.metadata.resource_version = patched.metadata.resource_version
            self._persisted_annotations.update(changed)
        written = await self.client.update_status(d)
        d.metadata.resource_version = written.metadata.resource_version
