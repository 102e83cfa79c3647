"""The ResourceQuota, LimitRanger and Priority admission plugins as functions over fake sources: messages,
usage arithmetic, and the quota plugin's compare-and-swap retry (only the quotas whose write lost are checked
and charged again)."""

from __future__ import annotations

import asyncio
import copy
from dataclasses import dataclass
from typing import Any

import pytest

from apiserver import errors
from apiserver.admission import limitranger, resourcequota
from apiserver.admission.interfaces import AdmissionAttributes
from apiserver.admission.priority import PriorityClasses, admit_pod
from machinery.api.resources import ResourceInfo, resource_for
from machinery.quota import calculate_usage, pod_usage, usage_of


@dataclass
class FakeStore:
    info: ResourceInfo

    def redecode(self, obj: Any, operation: str, old: Any, subresource: Any) -> Any:
        return obj


def attrs(plural: str, obj: dict[str, Any], operation: str = "CREATE", old: dict[str, Any] | None = None,
          namespace: str = "ns") -> AdmissionAttributes:
    info = resource_for("", plural)
    assert info is not None
    return AdmissionAttributes(operation, FakeStore(info), namespace, obj["metadata"]["name"], None, obj, old,
                               None, False)


def pod(name: str, **resources: dict[str, str]) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "app", "image": "x"}
    if resources:
        container["resources"] = resources
    return {"metadata": {"name": name}, "spec": {"containers": [container]}}


def quota(name: str, hard: dict[str, str], used: dict[str, str] | None = None, rv: str = "1",
          **spec: Any) -> dict[str, Any]:
    used = used if used is not None else {k: "0" for k in hard}
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": rv},
            "spec": {"hard": hard, **spec}, "status": {"hard": hard, "used": used}}


class FakeQuotas:
    """etcd as the plugin sees it: quotas by name, a write that loses once for the names in `lose`."""

    def __init__(self, *quotas: dict[str, Any], lose: tuple[str, ...] = ()) -> None:
        self.quotas = {q["metadata"]["name"]: q for q in quotas}
        self.lose = set(lose)
        self.writes: list[str] = []

    def source(self) -> resourcequota.Quotas:
        async def listed(namespace: str) -> list[dict[str, Any]]:
            return [copy.deepcopy(q) for q in self.quotas.values()]

        async def write(q: dict[str, Any]) -> dict[str, Any]:
            name = q["metadata"]["name"]
            if name in self.lose:
                self.lose.discard(name)
                # someone else charged one pod meanwhile
                stored = self.quotas[name]
                stored["status"]["used"]["pods"] = str(int(stored["status"]["used"]["pods"]) + 1)
                stored["metadata"]["resourceVersion"] = str(int(stored["metadata"]["resourceVersion"]) + 1)
                raise errors.conflict(resource_for("", "resourcequotas"), name)  # type: ignore[arg-type]
            assert q["metadata"]["resourceVersion"] == self.quotas[name]["metadata"]["resourceVersion"]
            self.writes.append(name)
            self.quotas[name] = q
            return q

        return resourcequota.Quotas(lambda ns: bool(self.quotas), listed, write)


def admit(fake: FakeQuotas, a: AdmissionAttributes) -> None:
    asyncio.run(resourcequota.admit(a, fake.source()))


def test_exceeded_and_charged() -> None:
    fake = FakeQuotas(quota("q", {"pods": "2"}, {"pods": "1"}))
    admit(fake, attrs("pods", pod("a")))
    assert fake.quotas["q"]["status"]["used"] == {"pods": "2"}
    with pytest.raises(errors.ApiError) as e:
        admit(fake, attrs("pods", pod("b")))
    assert e.value.code == 403
    assert e.value.message == ('pods "b" is forbidden: exceeded quota: q, requested: pods=1, used: pods=2, '
                               'limited: pods=2')


def test_must_specify_and_status_unknown() -> None:
    fake = FakeQuotas(quota("compute", {"limits.cpu": "2", "requests.memory": "1Gi"}))
    with pytest.raises(errors.ApiError) as e:
        admit(fake, attrs("pods", pod("a", requests={"cpu": "1"})))
    assert e.value.message == ('pods "a" is forbidden: failed quota: compute: must specify limits.cpu for: app; '
                               'requests.memory for: app')
    fresh = quota("fresh", {"pods": "2"})
    del fresh["status"]
    with pytest.raises(errors.ApiError) as e:
        admit(FakeQuotas(fresh), attrs("pods", pod("a")))
    assert e.value.message == 'pods "a" is forbidden: status unknown for quota: fresh, resources: pods'


def test_a_lost_write_is_retried_for_that_quota_only() -> None:
    fake = FakeQuotas(quota("a", {"pods": "5"}), quota("b", {"pods": "5"}), lose=("b",))
    admit(fake, attrs("pods", pod("p")))
    assert fake.writes == ["a", "b"]  # a once, b after its fresh read
    assert fake.quotas["a"]["status"]["used"]["pods"] == "1"
    assert fake.quotas["b"]["status"]["used"]["pods"] == "2"  # the other writer's pod and ours


def test_the_retry_sees_the_winner_and_refuses() -> None:
    fake = FakeQuotas(quota("last", {"pods": "2"}, {"pods": "1"}), lose=("last",))
    with pytest.raises(errors.ApiError) as e:
        admit(fake, attrs("pods", pod("p")))
    assert "exceeded quota: last, requested: pods=1, used: pods=2, limited: pods=2" in e.value.message
    assert fake.writes == []


def test_updates_charge_only_what_grows() -> None:
    fake = FakeQuotas(quota("q", {"services.nodeports": "3", "services": "3"}, {"services.nodeports": "0",
                                                                              "services": "1"}))
    old = {"metadata": {"name": "s"}, "spec": {"type": "ClusterIP", "ports": [{"port": 1}, {"port": 2}]}}
    new = {"metadata": {"name": "s"}, "spec": {"type": "NodePort", "ports": [{"port": 1}, {"port": 2}]}}
    admit(fake, attrs("services", new, "UPDATE", old))
    assert fake.quotas["q"]["status"]["used"] == {"services.nodeports": "2", "services": "1"}
    admit(fake, attrs("services", new, "UPDATE", new))  # nothing grows: nothing written
    assert fake.writes == ["q"]
    # pods are charged on create only
    admit(FakeQuotas(quota("p", {"pods": "0"})), attrs("pods", pod("x"), "UPDATE", pod("x")))


def test_usage_of_pods_and_scopes() -> None:
    p = pod("a", requests={"cpu": "250m", "memory": "64Mi"}, limits={"cpu": "500m"})
    p["spec"]["initContainers"] = [{"name": "init", "resources": {"requests": {"cpu": "1"}}}]
    usage = {k: str(v) for k, v in pod_usage(p).items()}
    assert usage == {"pods": "1", "count/pods": "1", "cpu": "1", "requests.cpu": "1", "memory": "64Mi",
                     "requests.memory": "64Mi", "limits.cpu": "500m"}
    done = copy.deepcopy(p)
    done["status"] = {"phase": "Succeeded"}
    assert {k: str(v) for k, v in pod_usage(done).items()} == {"count/pods": "1"}
    q = quota("t", {"pods": "9"}, scopes=["Terminating"])
    assert calculate_usage(q, {("", "pods"): [p]}) == calculate_usage(q, {})
    p["spec"]["activeDeadlineSeconds"] = 30
    assert str(calculate_usage(q, {("", "pods"): [p]})["pods"]) == "1"
    assert {k: str(v) for k, v in usage_of("apps", "deployments", {}).items()} == {"count/deployments.apps": "1"}


# -- LimitRanger ----------------------------------------------------------------------------------------------


def test_limit_ranger_defaults_and_refusals() -> None:
    ranges = [{"spec": {"limits": [{"type": "Container", "default": {"cpu": "500m"}, "defaultRequest": {"cpu": "100m"},
                                    "max": {"cpu": "1"}, "maxLimitRequestRatio": {"cpu": "5"}}]}}]
    a = attrs("pods", pod("a"))
    assert limitranger.mutate(a, lambda ns: ranges)
    assert a.obj is not None and a.obj["spec"]["containers"][0]["resources"] == {
        "requests": {"cpu": "100m"}, "limits": {"cpu": "500m"}}
    limitranger.validate(a, lambda ns: ranges)  # 500m / 100m: a ratio of 5, the most allowed
    greedy = attrs("pods", pod("g", requests={"cpu": "100m"}, limits={"cpu": "1"}))
    with pytest.raises(errors.ApiError) as e:
        limitranger.validate(greedy, lambda ns: ranges)
    assert e.value.message == ('pods "g" is forbidden: cpu max limit to request ratio per Container is 5, but '
                               'provided ratio is 10.000000')
    assert not limitranger.mutate(attrs("pods", pod("n")), lambda ns: [])


# -- Priority ---------------------------------------------------------------------------------------------------


def test_priority_admission() -> None:
    classes = {"high": {"metadata": {"name": "high"}, "value": 100, "preemptionPolicy": "PreemptLowerPriority"}}

    async def get(name: str) -> dict[str, Any] | None:
        return classes.get(name)

    source = PriorityClasses(get, lambda: list(classes.values()))
    a = attrs("pods", {**pod("p"), "spec": {**pod("p")["spec"], "priorityClassName": "high"}})
    asyncio.run(admit_pod(a, source))
    assert a.obj is not None and a.obj["spec"]["priority"] == 100
    plain = attrs("pods", pod("q"))
    asyncio.run(admit_pod(plain, source))
    assert plain.obj is not None and plain.obj["spec"]["priority"] == 0
    assert plain.obj["spec"]["preemptionPolicy"] == "PreemptLowerPriority"
    classes["high"]["globalDefault"] = True
    defaulted = attrs("pods", pod("r"))
    asyncio.run(admit_pod(defaulted, source))
    assert defaulted.obj is not None and defaulted.obj["spec"]["priorityClassName"] == "high"
    lost = attrs("pods", {**pod("s"), "spec": {**pod("s")["spec"], "priorityClassName": "nope"}})
    with pytest.raises(errors.ApiError) as e:
        asyncio.run(admit_pod(lost, source))
    assert e.value.message == 'pods "s" is forbidden: no PriorityClass with name nope was found'
