"""The ResourceQuota admission plugin (upstream plugin/pkg/admission/resourcequota: admission.go,
controller.go checkRequest; the evaluators of pkg/quota/v1, shared in machinery/quota.py).

Last of the validating plugins, on every namespaced CREATE (and on the UPDATE of a Service or a claim, for
what the update adds: a Service turned NodePort, a claim grown): the namespace's quotas that match the
object (its resources among their hard limits; their scopes, for pods) are read fresh from etcd;
the object's usage is added to each one's status.used and checked against spec.hard:

  pods "x" is forbidden: exceeded quota: q, requested: pods=1, used: pods=2, limited: pods=2
  pods "x" is forbidden: failed quota: q: must specify limits.cpu for: app; requests.memory for: app
  pods "x" is forbidden: status unknown for quota: q, resources: pods   (the controller has not run yet)

and the new usage is written to each quota's status before the object is stored, every write a
compare-and-swap on the quota's resourceVersion: two creates racing for the last unit (through one
apiserver or two) cannot both win; the loser reads the quotas whose write it lost again and is checked
against their new usage (those it already charged are not charged twice), as upstream's checkQuotas.
A create refused later leaves usage charged that nothing uses; the resource-quota controller recomputes
status.used from what exists and gives it back, as upstream.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from apiserver import errors
from apiserver.admission.interfaces import AdmissionAttributes
from machinery.quantity import Quantity
from machinery.quota import add, format_list, parse_list, pod_missing_constraints, pretty, quota_matches, usage_of
from machinery.types import Obj

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 20
# the kinds whose usage an update can grow (upstream's evaluators that handle UPDATE): a Service's type
# and ports (node ports, load balancers), a claim's requested storage
UPDATED_USAGE = frozenset({("", "services"), ("", "persistentvolumeclaims")})


@dataclass
class Quotas:
    """How the plugin reaches ResourceQuotas: whether the watch cache holds any in a namespace (no
    quota, no cost), the namespace's quotas from etcd, and a /status write that is a compare-and-swap
    on the quota's metadata.resourceVersion (errors.ApiError 409 when someone wrote in between)."""

    any_in: Callable[[str], bool]
    list: Callable[[str], Awaitable[list[Obj]]]
    update_status: Callable[[Obj], Awaitable[Obj]]


async def admit(a: AdmissionAttributes, quotas: Quotas) -> None:
    info = a.store.info
    if a.subresource or a.obj is None or not info.namespaced or not a.namespace:
        return
    if a.operation == "UPDATE" and (info.group, info.plural) not in UPDATED_USAGE:
        return
    if a.operation not in ("CREATE", "UPDATE"):
        return
    if not quotas.any_in(a.namespace):
        return
    written: set[str] = set()  # charged already: a retry checks only the quotas whose write lost
    for _ in range(MAX_ATTEMPTS):
        current = [q for q in await quotas.list(a.namespace) if q["metadata"]["name"] not in written]
        updates = check(a, current)
        if not updates or a.dry_run:
            return
        lost = False
        for quota in updates:
            try:
                await quotas.update_status(quota)
                written.add(quota["metadata"]["name"])
            except errors.ApiError as e:
                if e.code != 409:
                    raise
                lost = True
        if not lost:
            return
        log.debug("quota in %s changed while admitting %s/%s; checking again", a.namespace, info.plural, a.name)
    raise errors.internal("resource quota evaluation timed out")


def check(a: AdmissionAttributes, quotas: list[Obj]) -> list[Obj]:
    """checkRequest: refuse (errors.ApiError 403) when any matching quota would be exceeded; else the
    quotas to write, each with its new status.used and the resourceVersion it was read at."""
    assert a.obj is not None
    info = a.store.info
    delta = usage_of(info.group, info.plural, a.obj)
    if a.operation == "UPDATE" and a.old is not None:  # only what grows is charged
        before = usage_of(info.group, info.plural, a.old)
        delta = {k: Quantity(v.value - before[k].value, v.format) if k in before else v for k, v in delta.items()}
        delta = {k: v for k, v in delta.items() if v.value > 0}
        if not delta:
            return []
    out = []
    for quota in sorted(quotas, key=lambda q: q["metadata"]["name"]):
        if not quota_matches(quota, info.group, info.plural, a.obj):
            continue
        name = quota["metadata"]["name"]
        hard = parse_list((quota.get("spec") or {}).get("hard"))
        if (info.group, info.plural) == ("", "pods"):
            missing = pod_missing_constraints(a.obj, hard)
            if missing is not None:
                raise errors.forbidden(info, a.name, f"failed quota: {name}: {missing}")
        status = quota.get("status") or {}
        used = parse_list(status.get("used"))
        unknown = sorted(n for n in hard if n not in used or n not in (status.get("hard") or {}))
        if unknown:
            raise errors.forbidden(info, a.name, f"status unknown for quota: {name}, resources: {','.join(unknown)}")
        requested = {k: v for k, v in delta.items() if k in hard}
        if not requested:
            continue
        new_used = add(used, requested)
        failed = sorted(k for k, v in requested.items() if new_used[k] > hard[k] and not v.is_zero())
        if failed:
            raise errors.forbidden(info, a.name, f"exceeded quota: {name}, "
                                   f"requested: {pretty({k: requested[k] for k in failed})}, "
                                   f"used: {pretty({k: used[k] for k in failed})}, "
                                   f"limited: {pretty({k: hard[k] for k in failed})}")
        updated = dict(quota)
        updated["status"] = {**status, "used": {**(status.get("used") or {}), **format_list(
            {k: new_used[k] for k in requested})}}
        out.append(updated)
    return out
