"""Preemption end to end: the scheduler as a real process, a real kubelet running the pods in Docker. A node
full with a low-priority pod gets a high-priority one: the scheduler nominates the node, marks the victim
with the DisruptionTarget condition and deletes it gracefully (the kubelet stops its container), and binds
the preemptor there once the victim is gone; the pod then runs. A pod with preemptionPolicy Never waits. Of two
victims either of which would do, the one a PodDisruptionBudget protects is spared (upstream's best effort)."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.cluster import ApiServer, wait_for
from tests.node_process import BUSYBOX
from tests.scheduler_process import SchedulerProcess

SCHED = "/apis/scheduling.k8s.io/v1/priorityclasses"


@pytest.fixture(scope="module")
def scheduler(workdir: Path, apiserver: ApiServer) -> Iterator[SchedulerProcess]:
    process = SchedulerProcess(workdir, apiserver.url)
    process.start()
    yield process
    process.stop()


@pytest.fixture(scope="module")
def classes(apiserver: ApiServer) -> Iterator[tuple[str, str, str]]:
    suffix = uuid.uuid4().hex[:6]
    low, high, never = f"low-{suffix}", f"high-{suffix}", f"never-{suffix}"
    with httpx.Client(base_url=apiserver.url, timeout=10) as api:
        for name, value, policy in ((low, 10, None), (high, 1000, None), (never, 1000, "Never")):
            body: dict[str, Any] = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                    "metadata": {"name": name}, "value": value}
            if policy:
                body["preemptionPolicy"] = policy
            r = api.post(SCHED, json=body)
            assert r.status_code == 201, r.text
        yield low, high, never
        for name in (low, high, never):
            api.delete(f"{SCHED}/{name}")


def sleeper(name: str, node: str, cpu: str, priority_class: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": name}},
            "spec": {"nodeSelector": {"kubernetes.io/hostname": node}, "priorityClassName": priority_class,
                     "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "main", "image": BUSYBOX, "imagePullPolicy": "IfNotPresent",
                                     "command": ["sh", "-c", "sleep 3600"],
                                     "resources": {"requests": {"cpu": cpu}}}], **spec}}


def get(api: httpx.Client, ns: str, name: str) -> dict[str, Any] | None:
    r = api.get(f"/api/v1/namespaces/{ns}/pods/{name}")
    return r.json() if r.status_code == 200 else None


def running(api: httpx.Client, ns: str, name: str) -> bool:
    pod = get(api, ns, name)
    return bool(pod and pod["spec"].get("nodeName") and (pod.get("status") or {}).get("phase") == "Running")


def events(api: httpx.Client, ns: str, name: str, reason: str) -> list[dict[str, Any]]:
    items = api.get(f"/api/v1/namespaces/{ns}/events").json()["items"]
    return [e for e in items if e["involvedObject"]["name"] == name and e["reason"] == reason]


def test_high_priority_pod_preempts_on_a_full_node(api: httpx.Client, namespace: str, kubelet_node: str,
                                                    scheduler: SchedulerProcess, classes: tuple[str, str, str]) -> None:
    low, high, never_class = classes
    node = api.get(f"/api/v1/nodes/{kubelet_node}").json()
    cpu_millis = int(float(node["status"]["allocatable"]["cpu"].rstrip("m")) *
                     (1 if node["status"]["allocatable"]["cpu"].endswith("m") else 1000))
    big = f"{cpu_millis * 3 // 4}m"  # three quarters: two never fit together
    pods = f"/api/v1/namespaces/{namespace}/pods"
    assert api.post(pods, json=sleeper("victim", kubelet_node, big, low)).status_code == 201
    wait_for(lambda: running(api, namespace, "victim"), 90, what="the low-priority pod running")
    victim_uid = get(api, namespace, "victim")["metadata"]["uid"]  # type: ignore[index]

    # a class with preemptionPolicy Never: its pod waits, nobody is evicted for it
    never = sleeper("polite", kubelet_node, big, never_class)
    created = api.post(pods, json=never).json()
    assert created["spec"]["priority"] == 1000 and created["spec"]["preemptionPolicy"] == "Never"
    failed = wait_for(lambda: events(api, namespace, "polite", "FailedScheduling"), 30, what="polite waits")
    assert "preemption: not eligible due to preemptionPolicy=Never." in failed[0]["message"]  # type: ignore[index]
    assert running(api, namespace, "victim")
    assert api.delete(f"{pods}/polite").status_code == 200

    assert api.post(pods, json=sleeper("important", kubelet_node, big, high)).status_code == 201
    nominated = wait_for(lambda: (get(api, namespace, "important") or {}).get("status", {}).get("nominatedNodeName"),
                         60, what="the preemptor nominated")
    assert nominated == kubelet_node
    preempted = wait_for(lambda: events(api, namespace, "victim", "Preempted"), 30, what="the Preempted event")
    assert preempted[0]["message"].startswith("Preempted by pod ")  # type: ignore[index]
    assert preempted[0]["message"].endswith(f" on node {kubelet_node}")  # type: ignore[index]

    def victim_state() -> str | None:
        pod = get(api, namespace, "victim")
        if pod is None or pod["metadata"]["uid"] != victim_uid:
            return "gone"
        conditions = {c["type"]: c for c in pod["status"].get("conditions") or []}
        target = conditions.get("DisruptionTarget")
        if target is not None:
            assert target["status"] == "True" and target["reason"] == "PreemptionByScheduler"
            assert target["message"] == "default-scheduler: preempting to accommodate a higher priority pod"
            assert pod["metadata"].get("deletionTimestamp")
        return None

    wait_for(victim_state, 60, what="the victim gone")
    wait_for(lambda: running(api, namespace, "important"), 90, what="the preemptor running on the node")
    assert get(api, namespace, "important")["spec"]["nodeName"] == kubelet_node  # type: ignore[index]
    # the node is this module's: leave it empty for the next test
    assert api.delete(f"{pods}/important", params={"gracePeriodSeconds": 0}).status_code == 200
    wait_for(lambda: get(api, namespace, "important") is None, 60, what="important gone")


def test_preemption_spares_the_pod_a_disruption_budget_protects(api: httpx.Client, namespace: str,
                                                                 kubelet_node: str, scheduler: SchedulerProcess,
                                                                 classes: tuple[str, str, str]) -> None:
    low, high, _ = classes
    pods = f"/api/v1/namespaces/{namespace}/pods"
    node = api.get(f"/api/v1/nodes/{kubelet_node}").json()
    cpu = node["status"]["allocatable"]["cpu"]
    cpu_millis = int(float(cpu.rstrip("m")) * (1 if cpu.endswith("m") else 1000))
    share = f"{cpu_millis * 2 // 5}m"  # two fit side by side, a third does not: one of them must go

    def start_of(name: str) -> dt.datetime | None:
        started = ((get(api, namespace, name) or {}).get("status") or {}).get("startTime")
        return dt.datetime.fromisoformat(started.replace("Z", "+00:00")) if started and running(api, namespace, name) \
            else None

    # the budget first: the scheduler's PDB informer has it long before the preemptor comes (two pods start
    # in between)
    budgets = f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets"
    budget = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "guard"},
              "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "guarded"}}}}
    created = api.post(budgets, json=budget)
    assert created.status_code == 201, created.text
    # no disruption controller in this module: write the status it would (nothing may be disrupted)
    status = {**created.json(), "status": {"disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1,
                                           "expectedPods": 1, "observedGeneration": 1}}
    assert api.put(f"{budgets}/guard/status", json=status).status_code == 200
    # "free" starts first, so it is the more important of two equal-priority pods: without a budget the later
    # "guarded" would be the victim (the more important pod is given back first)
    assert api.post(pods, json=sleeper("free", kubelet_node, share, low)).status_code == 201
    free_started = wait_for(lambda: start_of("free"), 90, what="free running")
    wait_for(lambda: dt.datetime.now(dt.UTC) > free_started + dt.timedelta(seconds=1), 5,  # type: ignore[operator]
             what="a later start second for guarded")
    assert api.post(pods, json=sleeper("guarded", kubelet_node, share, low)).status_code == 201
    guarded_started = wait_for(lambda: start_of("guarded"), 90, what="guarded running")
    assert guarded_started > free_started  # type: ignore[operator]

    assert api.post(pods, json=sleeper("urgent", kubelet_node, share, high)).status_code == 201
    preempted = wait_for(lambda: events(api, namespace, "free", "Preempted") or
                         events(api, namespace, "guarded", "Preempted"), 60, what="a Preempted event")
    assert preempted[0]["involvedObject"]["name"] == "free"  # type: ignore[index]
    wait_for(lambda: running(api, namespace, "urgent"), 90, what="the preemptor running")
    assert running(api, namespace, "guarded")
    for name in ("urgent", "guarded", "free"):
        api.delete(f"{pods}/{name}", params={"gracePeriodSeconds": 0})
    assert api.delete(f"{budgets}/guard").status_code == 200
