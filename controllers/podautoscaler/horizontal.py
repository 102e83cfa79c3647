"""The HorizontalPodAutoscaler controller (upstream pkg/controller/podautoscaler/horizontal.go).

Every HPA is looked at once per `--horizontal-pod-autoscaler-sync-period` (15 s): its target's scale
subresource is read (any kind the apiserver serves with `scale`), the pods its selector picks are measured
through `metrics.k8s.io` (resource metrics: Utilization against the pods' requests, or AverageValue), and
the largest proposal over the metrics becomes the recommendation. Without `behavior` it is stabilized over
`--horizontal-pod-autoscaler-downscale-stabilization` (5 m) and limited to doubling per step; with one,
the scale-up and scale-down stabilization windows take the lowest / highest recent recommendation, and
the policies (Pods/Percent per periodSeconds, selectPolicy Max/Min/Disabled) bound the change against the
scale events of their periods. The result is clamped to minReplicas..maxReplicas and written to the
target's scale; the status carries currentReplicas, desiredReplicas, currentMetrics, lastScaleTime and
the AbleToScale / ScalingActive / ScalingLimited conditions with upstream's reasons; events
SuccessfulRescale ("New size: 3; reason: cpu resource utilization (percentage of request) above
target"), FailedGetScale, FailedRescale, FailedGetResourceMetric, FailedComputeMetricsReplicas.
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Callable
from fractions import Fraction
from typing import Any

from controllers.podautoscaler.replica_calculator import (
    CPU_INITIALIZATION_PERIOD,
    DEFAULT_TOLERANCE,
    DELAY_OF_INITIAL_READINESS_STATUS,
    MetricsError,
    PodMetric,
    Proposal,
    ScaleEvent,
    rate_limited,
    resource_replicas,
    rules_limited,
    stabilize,
)
from machinery.api.autoscaling_v2 import HorizontalPodAutoscaler
from machinery.api.core_v1 import Pod
from machinery.api.resources import resource_for, resource_for_kind
from machinery.client import ApiClient, ApiError, ApiUnavailable, ClientError
from machinery.controller import Controller
from machinery.events import EventRecorder
from machinery.informer import Informer, SharedInformerFactory, meta_namespace_key
from machinery.quantity import Quantity, parse_quantity
from machinery.selectors import SelectorError, parse_label_selector
from machinery.timeutil import format_rfc3339, parse_rfc3339

log = logging.getLogger(__name__)

Obj = dict[str, Any]
SYNC_PERIOD = 15.0
DOWNSCALE_STABILIZATION = 300.0
METRICS_PATH = "/apis/metrics.k8s.io/v1beta1/namespaces/{namespace}/pods"
_HPA = resource_for("autoscaling", "horizontalpodautoscalers")


class ScaleError(Exception):
    pass


def set_condition(status: Obj, type_: str, value: str, reason: str, message: str, now: float) -> None:
    """setCondition: the transition time moves only when the status does."""
    conditions: list[Obj] = status.setdefault("conditions", [])
    for c in conditions:
        if c["type"] == type_:
            if c["status"] != value:
                c["lastTransitionTime"] = format_rfc3339(now)
            c.update(status=value, reason=reason, message=message)
            return
    conditions.append({"type": type_, "status": value, "lastTransitionTime": format_rfc3339(now),
                       "reason": reason, "message": message})


def _milli(milli: int) -> str:
    return str(Quantity(Fraction(milli, 1000)))


class HorizontalController(Controller):
    name = "horizontalpodautoscaling"  # the --controllers name, as the logs and tests know it

    def __init__(self, client: ApiClient, informers: SharedInformerFactory, *, workers: int = 5,
                 sync_period: float = SYNC_PERIOD, downscale_stabilization: float = DOWNSCALE_STABILIZATION,
                 tolerance: float = DEFAULT_TOLERANCE, cpu_initialization_period: float = CPU_INITIALIZATION_PERIOD,
                 initial_readiness_delay: float = DELAY_OF_INITIAL_READINESS_STATUS,
                 clock: Callable[[], float] = time.time) -> None:
        super().__init__(workers)
        self.client = client
        self.sync_period = sync_period
        self.downscale_stabilization = downscale_stabilization
        self.tolerance = tolerance
        self.cpu_initialization_period = cpu_initialization_period
        self.initial_readiness_delay = initial_readiness_delay
        self.clock = clock
        self.recorder = EventRecorder(client, "horizontal-pod-autoscaler")
        self.hpas: Informer[HorizontalPodAutoscaler] = informers.informer_for(HorizontalPodAutoscaler)
        self.pods: Informer[Pod] = informers.informer_for(Pod)
        # new HPAs are looked at at once, then every sync period (reconcile's answer); updates, our own
        # status writes among them, wait for that turn as upstream's fixed-interval queue makes them
        self.hpas.add_event_handler(on_add=lambda obj: self.queue.add(meta_namespace_key(obj)),
                                    on_delete=self._forget)
        self.informers += [self.hpas, self.pods]
        self.recommendations: dict[str, list[tuple[float, int]]] = {}
        self.scale_up_events: dict[str, list[ScaleEvent]] = {}
        self.scale_down_events: dict[str, list[ScaleEvent]] = {}

    def _forget(self, obj: Any) -> None:
        key = meta_namespace_key(obj)
        for table in (self.recommendations, self.scale_up_events, self.scale_down_events):
            table.pop(key, None)

    async def reconcile(self, key: str) -> float | None:
        hpa = self.hpas.store.get(key)
        if hpa is None:
            return None
        try:
            await self.reconcile_autoscaler(hpa.to_dict(), key)
        except (ApiError, ApiUnavailable, ClientError, ScaleError, MetricsError) as e:
            log.info("%s: %s", key, e)
        return self.sync_period

    # -- one HPA -----------------------------------------------------------------------------------

    async def reconcile_autoscaler(self, hpa: Obj, key: str) -> None:
        now = self.clock()
        model = HorizontalPodAutoscaler.from_dict(hpa)
        spec, original = hpa["spec"], copy.deepcopy(hpa.get("status") or {})
        status: Obj = copy.deepcopy(original)
        status.setdefault("desiredReplicas", 0)
        namespace = hpa["metadata"]["namespace"]
        ref = spec["scaleTargetRef"]
        reference = f"{ref['kind']}/{ref['name']}"
        try:
            info, scale = await self._get_scale(namespace, ref)
        except ScaleError as e:
            set_condition(status, "AbleToScale", "False", "FailedGetScale",
                          f"the HPA controller was unable to get the target's current scale: {e}", now)
            self.recorder.event(model, "Warning", "FailedGetScale", str(e))
            await self._update_status(hpa, original, status)
            raise ScaleError(f"failed to query scale subresource for {reference}: {e}") from None
        set_condition(status, "AbleToScale", "True", "SucceededGetScale",
                      "the HPA controller was able to get the target's current scale", now)
        current = int((scale.get("spec") or {}).get("replicas") or 0)
        status["currentReplicas"] = int((scale.get("status") or {}).get("replicas") or 0)
        min_replicas = int(spec.get("minReplicas") or 1)
        max_replicas = int(spec["maxReplicas"])
        rescale_reason = ""
        metric_statuses: list[Obj] = []
        if current == 0 and min_replicas != 0:
            desired = 0
            set_condition(status, "ScalingActive", "False", "ScalingDisabled",
                          "scaling is disabled since the replica count of the target is zero", now)
        elif current > max_replicas:
            rescale_reason, desired = "Current number of replicas above Spec.MaxReplicas", max_replicas
        elif current < min_replicas:
            rescale_reason, desired = "Current number of replicas below Spec.MinReplicas", min_replicas
        else:
            try:
                proposal, metric_name, metric_statuses = await self._replicas_for_metrics(
                    model, hpa, scale, status, current, now)
            except MetricsError as e:
                if metric_statuses:
                    status["currentMetrics"] = metric_statuses
                await self._update_status(hpa, original, status)
                self.recorder.event(model, "Warning", "FailedComputeMetricsReplicas", str(e))
                raise MetricsError(f"failed to compute desired number of replicas based on listed metrics for "
                                   f"{reference}: {e}") from None
            if spec.get("behavior") is None:
                desired = self._normalize(key, status, current, proposal, min_replicas, max_replicas, now)
            else:
                desired = self._normalize_with_behaviors(key, spec["behavior"], status, current, proposal,
                                                         min_replicas, max_replicas, now)
            if desired > current:
                rescale_reason = f"{metric_name} above target"
            elif desired < current:
                rescale_reason = "All metrics below target"
        if desired != current:
            try:
                await self._update_scale(info, namespace, ref["name"], scale, desired)
            except (ApiError, ApiUnavailable, ClientError) as e:
                set_condition(status, "AbleToScale", "False", "FailedUpdateScale",
                              f"the HPA controller was unable to update the target scale: {e}", now)
                self.recorder.event(model, "Warning", "FailedRescale",
                                    f"New size: {desired}; reason: {rescale_reason}; error: {e}")
                await self._update_status(hpa, original, status)
                raise
            set_condition(status, "AbleToScale", "True", "SucceededRescale",
                          f"the HPA controller was able to update the target scale to {desired}", now)
            self.recorder.event(model, "Normal", "SuccessfulRescale", f"New size: {desired}; reason: {rescale_reason}")
            self._store_scale_event(key, spec.get("behavior"), current, desired, now)
            log.info("successful rescale of %s, old size: %d, new size: %d, reason: %s", key, current, desired,
                     rescale_reason)
            status["lastScaleTime"] = format_rfc3339(now)
        status["desiredReplicas"] = desired
        if metric_statuses:
            status["currentMetrics"] = metric_statuses
        else:
            status.pop("currentMetrics", None)
        status["observedGeneration"] = hpa["metadata"].get("generation")
        await self._update_status(hpa, original, status)

    async def _get_scale(self, namespace: str, ref: Obj) -> tuple[Any, Obj]:
        api_version = ref.get("apiVersion") or ""
        info = resource_for_kind(api_version, ref["kind"])
        if info is None or "scale" not in info.subresources:
            group = api_version.rpartition("/")[0] if "/" in api_version else ""
            raise ScaleError(f'unable to determine resource for scale target reference: no matches for kind '
                             f'"{ref["kind"]}" in group "{group}"')
        try:
            return info, await self.client.get_raw(info, ref["name"], namespace, subresource="scale")
        except ApiError as e:
            raise ScaleError(e.message) from None

    async def _update_scale(self, info: Any, namespace: str, name: str, scale: Obj, replicas: int) -> None:
        body = copy.deepcopy(scale)
        body.setdefault("spec", {})["replicas"] = replicas
        await self.client.update_raw(info, name, body, namespace, subresource="scale")

    async def _update_status(self, hpa: Obj, original: Obj, status: Obj) -> None:
        if status == original:
            return
        assert _HPA is not None
        body = {**hpa, "status": status}
        await self.client.update_raw(_HPA, hpa["metadata"]["name"], body, hpa["metadata"]["namespace"],
                                     subresource="status")

    # -- metrics -----------------------------------------------------------------------------------

    async def _replicas_for_metrics(self, model: HorizontalPodAutoscaler, hpa: Obj, scale: Obj, status: Obj,
                                    current: int, now: float) -> tuple[int, str, list[Obj]]:
        """computeReplicasForMetrics: the largest proposal; an error when every metric failed, or some
        failed and the rest would scale down."""
        selector_text = (scale.get("status") or {}).get("selector") or ""
        if not selector_text:
            message = "selector is required"
            set_condition(status, "ScalingActive", "False", "InvalidSelector",
                          "the HPA target's scale is missing a selector", now)
            self.recorder.event(model, "Warning", "SelectorRequired", message)
            raise MetricsError(message)
        try:
            selector = parse_label_selector(selector_text)
        except SelectorError as e:
            set_condition(status, "ScalingActive", "False", "InvalidSelector",
                          f"the HPA target's scale has an invalid selector: {e}", now)
            self.recorder.event(model, "Warning", "InvalidSelector", str(e))
            raise MetricsError(f"couldn't convert selector into a corresponding internal selector object: {e}") \
                from None
        namespace = hpa["metadata"]["namespace"]
        pods = [p for p in self.pods.list() if p.metadata.namespace == namespace
                and selector.matches(p.metadata.labels or {})]
        specs = hpa["spec"].get("metrics") or []
        statuses: list[Obj] = [{"type": ""} for _ in specs]
        replicas, metric_name = 0, ""
        invalid = 0
        first_error: MetricsError | None = None
        first_condition: tuple[str, str] | None = None
        for i, metric in enumerate(specs):
            try:
                proposal, name = await self._replicas_for_metric(namespace, selector_text, pods, metric, current,
                                                                 statuses, i, now)
            except MetricsError as e:
                if first_error is None:
                    first_error = e
                    first_condition = (e.args[1] if len(e.args) > 1 else "FailedGetResourceMetric",
                                       f"the HPA was unable to compute the replica count: {e.args[0]}")
                    self.recorder.event(model, "Warning", first_condition[0], str(e.args[0]))
                invalid += 1
                continue
            if replicas == 0 or proposal > replicas:
                replicas, metric_name = proposal, name
        statuses = [s for s in statuses if s.get("type")]
        if first_error is not None and (invalid >= len(specs) or replicas < current):
            assert first_condition is not None
            set_condition(status, "ScalingActive", "False", first_condition[0], first_condition[1], now)
            raise _with_statuses(MetricsError(f"invalid metrics ({invalid} invalid out of {len(specs)}), first "
                                              f"error is: {first_error.args[0]}"), statuses)
        set_condition(status, "ScalingActive", "True", "ValidMetricFound",
                      f"the HPA was able to successfully calculate a replica count from {metric_name}", now)
        return replicas, metric_name, statuses

    async def _pod_metrics(self, namespace: str, selector: str, resource: str, container: str) -> dict[str, PodMetric]:
        """The resource metrics client: each pod's usage of `resource` (milli-units) summed over its
        containers (or the one named); a pod missing the resource in a container is left out."""
        try:
            answer = await self.client.request("GET", METRICS_PATH.format(namespace=namespace),
                                               params={"labelSelector": selector})
        except (ApiError, ApiUnavailable, ClientError) as e:
            raise MetricsError(f"unable to get metrics for resource {resource}: unable to fetch metrics from "
                               f"resource metrics API: {e}") from None
        items = (answer or {}).get("items") or []
        if not items:
            raise MetricsError(f"unable to get metrics for resource {resource}: no metrics returned from resource "
                               "metrics API")
        out: dict[str, PodMetric] = {}
        for item in items:
            total, complete = 0, True
            containers = [c for c in item.get("containers") or [] if not container or c.get("name") == container]
            for c in containers:
                usage = (c.get("usage") or {}).get(resource)
                if usage is None:
                    complete = False
                    break
                total += parse_quantity(usage).milli_value()
            if not complete or not containers:
                continue
            stamp = parse_rfc3339(item.get("timestamp"))
            window = _duration(item.get("window"))
            out[item["metadata"]["name"]] = PodMetric(stamp.timestamp() if stamp else self.clock(), window, total)
        return out

    async def _replicas_for_metric(self, namespace: str, selector: str, pods: list[Pod], metric: Obj, current: int,
                                   statuses: list[Obj], index: int, now: float) -> tuple[int, str]:
        kind = metric.get("type")
        if kind not in ("Resource", "ContainerResource"):
            raise MetricsError(f"unknown metric source type {kind!r}: only resource metrics are served here",
                               "InvalidMetricSourceType")
        field = "resource" if kind == "Resource" else "containerResource"
        source = metric[field]
        resource, container = source["name"], source.get("container", "")
        target = source.get("target") or {}
        utilization = target.get("averageUtilization")
        try:
            if utilization is None and target.get("averageValue") is None:
                raise MetricsError("invalid resource metric source: neither an average utilization target nor an "
                                   "average value (usage) target was set")
            metrics = await self._pod_metrics(namespace, selector, resource, container)
            if utilization is not None:
                try:
                    proposal = self._calculate(current, int(utilization), resource, pods, metrics, now, True,
                                               container)
                except MetricsError as e:
                    raise MetricsError(f"failed to get {resource} utilization: {e}") from None
            else:
                target_milli = parse_quantity(target["averageValue"]).milli_value()
                try:
                    proposal = self._calculate(current, target_milli, resource, pods, metrics, now, False,
                                               container)
                except MetricsError as e:
                    raise MetricsError(f"failed to get {resource} usage: {e}") from None
        except MetricsError as e:
            reason = "FailedGetResourceMetric" if kind == "Resource" else "FailedGetContainerResourceMetric"
            raise MetricsError(f"failed to get {resource} resource metric value: {e}", reason) from None
        current_value: Obj = {"averageValue": _milli(proposal.raw)}
        if proposal.utilization is not None:
            current_value["averageUtilization"] = proposal.utilization
        entry: Obj = {"name": resource, "current": current_value}
        if container:
            entry["container"] = container
        statuses[index] = {"type": kind, field: entry}
        what = f"{resource} resource utilization (percentage of request)" if utilization is not None \
            else f"{resource} resource"
        if container:
            what = f"{resource} container resource utilization (percentage of request)" if utilization is not None \
                else f"{resource} container resource"
        return proposal.replicas, what

    def _calculate(self, current: int, target: int, resource: str, pods: list[Pod], metrics: dict[str, PodMetric],
                   now: float, utilization: bool, container: str) -> Proposal:
        return resource_replicas(current, target, resource, pods, metrics, now, utilization=utilization,
                                 tolerance=self.tolerance, container=container,
                                 cpu_initialization_period=self.cpu_initialization_period,
                                 delay_of_initial_readiness_status=self.initial_readiness_delay)

    # -- normalization -----------------------------------------------------------------------------

    def _normalize(self, key: str, status: Obj, current: int, proposal: int, min_replicas: int, max_replicas: int,
                   now: float) -> int:
        """normalizeDesiredReplicas: the highest recommendation of the downscale stabilization window."""
        recs = [(t, r) for t, r in self.recommendations.get(key, []) if t > now - self.downscale_stabilization]
        recs.append((now, proposal))
        self.recommendations[key] = recs
        stabilized = max(r for _, r in recs)
        if stabilized != proposal:
            set_condition(status, "AbleToScale", "True", "ScaleDownStabilized",
                          "recent recommendations were higher than current one, applying the highest recent "
                          "recommendation", now)
        else:
            set_condition(status, "AbleToScale", "True", "ReadyForNewScale", "recommended size matches current size",
                          now)
        desired, reason, message = rules_limited(current, stabilized, min_replicas, max_replicas)
        set_condition(status, "ScalingLimited", "False" if desired == stabilized else "True", reason, message, now)
        return desired

    def _normalize_with_behaviors(self, key: str, behavior: Obj, status: Obj, current: int, proposal: int,
                                  min_replicas: int, max_replicas: int, now: float) -> int:
        """normalizeDesiredReplicasWithBehaviors: stabilize within the windows, then the policies' rate."""
        up, down = behavior.get("scaleUp") or {}, behavior.get("scaleDown") or {}
        up_window = int(up.get("stabilizationWindowSeconds") or 0)
        down_window = down.get("stabilizationWindowSeconds")
        down_window = int(DOWNSCALE_STABILIZATION if down_window is None else down_window)
        stabilized, self.recommendations[key] = stabilize(self.recommendations.get(key, []), now, current, proposal,
                                                          up_window, down_window)
        if stabilized != proposal:
            if proposal >= current:
                set_condition(status, "AbleToScale", "True", "ScaleUpStabilized",
                              "recent recommendations were lower than current one, applying the lowest recent "
                              "recommendation", now)
            else:
                set_condition(status, "AbleToScale", "True", "ScaleDownStabilized",
                              "recent recommendations were higher than current one, applying the highest recent "
                              "recommendation", now)
        else:
            set_condition(status, "AbleToScale", "True", "ReadyForNewScale", "recommended size matches current size",
                          now)
        longest = max([int(p["periodSeconds"]) for p in (up.get("policies") or []) + (down.get("policies") or [])],
                      default=0)
        for table in (self.scale_up_events, self.scale_down_events):
            table[key] = [e for e in table.get(key, []) if e.timestamp > now - longest]
        desired, reason, message = rate_limited(current, stabilized, min_replicas, max_replicas, up, down,
                                                self.scale_up_events.get(key, []),
                                                self.scale_down_events.get(key, []), now)
        set_condition(status, "ScalingLimited", "False" if desired == stabilized else "True", reason, message, now)
        return desired

    def _store_scale_event(self, key: str, behavior: Obj | None, previous: int, new: int, now: float) -> None:
        if behavior is None:
            return
        if new > previous:
            self.scale_up_events.setdefault(key, []).append(ScaleEvent(now, new - previous))
        elif new < previous:
            self.scale_down_events.setdefault(key, []).append(ScaleEvent(now, previous - new))


def _with_statuses(error: MetricsError, statuses: list[Obj]) -> MetricsError:
    error.statuses = statuses  # type: ignore[attr-defined]
    return error


def _duration(value: Any) -> float:
    from machinery.timeutil import parse_go_duration

    try:
        return parse_go_duration(value) if value else 0.0
    except ValueError:
        return 0.0
