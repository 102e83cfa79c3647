"""Leader election with real processes against the session's apiserver: two controller-managers, then
schedulers, campaign for one Lease in kube-system (short timings: lease 4 s, renew deadline 3 s,
retry 0.5 s). Exactly one acts; kill -9 of the leader hands the Lease to the standby, never before
the dead leader's lease ran out, and the work goes on; a stopped leader releases the Lease as
upstream does; a leader whose Lease is taken away exits at once with "leaderelection lost".

Each test has a Lease name (and the schedulers a scheduler name) of its own, so nothing else in the
session campaigns or schedules with them; processes, Leases and Nodes are removed even on failure.
Who acted is read from each process's own log (a standby controller-manager never starts a
controller; each scheduler logs every pod it bound at -v 4) and from the Lease itself.
"""

from __future__ import annotations

import datetime as dt
import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.cluster import ApiServer, wait_for
from tests.controller_process import ControllerProcess
from tests.integration.test_deployment_controller import d_path, deployment
from tests.integration.test_replicaset_controller import ok, pods_path
from tests.scheduler_process import SchedulerProcess

LEASE_SECONDS = 4
TIMINGS = ("--leader-elect=true", "--leader-elect-lease-duration", f"{LEASE_SECONDS}s",
           "--leader-elect-renew-deadline", "3s", "--leader-elect-retry-period", "500ms")
TAKEOVER_DEADLINE = 30.0  # generous for a loaded machine; the figure itself is asserted against the Lease times


def lease_path(name: str) -> str:
    return f"/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/{name}"


def get_lease(api: httpx.Client, name: str) -> dict[str, Any] | None:
    r = api.get(lease_path(name))
    if r.status_code == 404:
        return None
    return ok(r)


def held_by(api: httpx.Client, name: str, identity: str) -> dict[str, Any] | None:
    lease = get_lease(api, name)
    return lease if lease is not None and lease["spec"].get("holderIdentity") == identity else None


def micro(text: str) -> dt.datetime:
    return dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ")


@pytest.fixture
def lease_name(api: httpx.Client) -> Iterator[str]:
    name = f"le-{uuid.uuid4().hex[:8]}"
    yield name
    api.delete(lease_path(name))


def kill_and_check_takeover(api: httpx.Client, lease: str, leader: Any, standby: Any) -> dict[str, Any]:
    """kill -9 the leader; the standby gets the Lease, but not before the dead leader's lease ran out."""
    leader.kill()
    dead = held_by(api, lease, leader.identity())
    assert dead is not None, "the standby took a lease that was still valid"
    last_renew = micro(dead["spec"]["renewTime"])
    taken = wait_for(lambda: held_by(api, lease, standby.identity()), TAKEOVER_DEADLINE,
                     what=f"the standby to take the lease over\n{standby.log_tail()}")
    assert isinstance(taken, dict)
    acquired = micro(taken["spec"]["acquireTime"])
    assert acquired >= last_renew + dt.timedelta(seconds=LEASE_SECONDS), (last_renew, acquired)
    assert taken["spec"]["leaseTransitions"] == dead["spec"]["leaseTransitions"] + 1
    print(f"takeover {(acquired - last_renew).total_seconds():.2f}s after the dead leader's last renewal")
    return taken


def steal_and_check_exit(api: httpx.Client, lease: str, leader: Any) -> None:
    """Another holder writes the Lease: the leader exits 1 at once and never writes it back."""
    current = get_lease(api, lease)
    assert current is not None
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    current["spec"].update(holderIdentity="thief", leaseDurationSeconds=60, renewTime=now, acquireTime=now)
    stolen = ok(api.put(lease_path(lease), json=current))
    started = time.monotonic()
    wait_for(lambda: not leader.alive(), 20, what=f"the robbed leader to exit\n{leader.log_tail()}")
    print(f"the robbed leader exited {time.monotonic() - started:.2f}s after the Lease was taken")
    assert leader.process.proc.returncode == 1
    assert "leaderelection lost" in leader.log_text()
    after = get_lease(api, lease)
    assert after is not None and after["metadata"]["resourceVersion"] == stolen["metadata"]["resourceVersion"]


def leader_events(api: httpx.Client, lease: str) -> list[str]:
    items = ok(api.get("/api/v1/namespaces/kube-system/events"))["items"]
    return [e["message"] for e in items if e["involvedObject"].get("kind") == "Lease"
            and e["involvedObject"].get("name") == lease and e["reason"] == "LeaderElection"]


# -- controller-manager ---------------------------------------------------------------------------------


def pods_of(api: httpx.Client, ns: str, app: str) -> list[dict[str, Any]]:
    return ok(api.get(pods_path(ns), params={"labelSelector": f"app={app}"}))["items"]


def test_two_controller_managers_one_acts_and_the_standby_takes_over_a_killed_leader(
        api: httpx.Client, namespace: str, apiserver: ApiServer, workdir: Path, lease_name: str) -> None:
    flags = (*TIMINGS, "--leader-elect-resource-name", lease_name)
    a = ControllerProcess(workdir, apiserver.url, ["deployment", "replicaset"], *flags)
    b = ControllerProcess(workdir, apiserver.url, ["deployment", "replicaset"], *flags)
    try:
        a.start()  # alone, it takes the new Lease at once, then starts its controllers
        b.start(wait_synced=False)
        lease = held_by(api, lease_name, a.identity())
        assert lease is not None
        assert lease["spec"]["leaseDurationSeconds"] == LEASE_SECONDS and lease["spec"]["leaseTransitions"] == 0
        wait_for(lambda: f"{a.identity()} became leader" in leader_events(api, lease_name), 20,
                 what="the LeaderElection event on the Lease")

        # the leader reconciles; the standby has built no controller and started no informer
        ok(api.post(d_path(namespace), json=deployment("first", replicas=2)))
        wait_for(lambda: len(pods_of(api, namespace, "first")) == 2, 30, what="the leader to make 2 pods")
        assert "caches synced" not in b.log_text() and "started deployment" not in b.log_text()
        assert "started deployment" in a.log_text()

        kill_and_check_takeover(api, lease_name, a, b)
        # the new leader works: a Deployment made after the kill gets its pods
        ok(api.post(d_path(namespace), json=deployment("second", replicas=2)))
        wait_for(lambda: len(pods_of(api, namespace, "second")) == 2, 30,
                 what=f"the new leader to make 2 pods\n{b.log_tail()}")
        assert len(pods_of(api, namespace, "first")) == 2  # nothing made twice
        wait_for(lambda: f"{b.identity()} became leader" in leader_events(api, lease_name), 20,
                 what="the new leader's LeaderElection event")

        steal_and_check_exit(api, lease_name, b)
    finally:
        a.stop()
        b.stop()


# -- scheduler ------------------------------------------------------------------------------------------

BOUND = re.compile(r"bound (\S+)/(\S+) to (\S+)")
BIND_FAILED = re.compile(r"binding \S+ to \S+ failed")


def bound_by(process: SchedulerProcess, namespace: str) -> list[str]:
    """Pods this scheduler process logged as bound (in the test's namespace), in order."""
    return [m.group(2) for m in BOUND.finditer(process.log_text()) if m.group(1) == namespace]


@pytest.fixture
def node(api: httpx.Client) -> Iterator[tuple[str, str]]:
    """A Ready Node (registered as a kubelet would) that only this test's pods select."""
    run = uuid.uuid4().hex[:8]
    name = f"le-node-{run}"
    resources = {"cpu": "4", "memory": "8Gi", "pods": "110"}
    ok(api.post("/api/v1/nodes", json={
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"le-run": run}},
        "status": {"capacity": resources, "allocatable": resources,
                   "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}}))
    yield name, run
    api.delete(f"/api/v1/nodes/{name}")


def make_pods(api: httpx.Client, ns: str, names: list[str], scheduler: str, run: str) -> None:
    for name in names:
        ok(api.post(pods_path(ns), json={
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"schedulerName": scheduler, "nodeSelector": {"le-run": run},
                     "containers": [{"name": "c", "image": "minik8s/pause:3.9"}]}}))


def all_bound(api: httpx.Client, ns: str, names: list[str], node: str) -> bool:
    pods = {p["metadata"]["name"]: p for p in ok(api.get(pods_path(ns)))["items"]}
    return all(pods[n]["spec"].get("nodeName") == node for n in names)


def test_two_schedulers_bind_once_by_the_leader_hand_over_and_release_the_lease(
        api: httpx.Client, namespace: str, apiserver: ApiServer, workdir: Path, lease_name: str,
        node: tuple[str, str]) -> None:
    node_name, run = node
    scheduler = f"le-scheduler-{run}"
    flags = (*TIMINGS, "--leader-elect-resource-name", lease_name, "-v", "4")
    a, b, c = (SchedulerProcess(workdir, apiserver.url, scheduler, *flags) for _ in range(3))
    try:
        a.start()
        wait_for(lambda: held_by(api, lease_name, a.identity()), 20, what="the first scheduler to lead")
        b.start()  # caches warm, campaigning
        assert held_by(api, lease_name, a.identity()) is not None

        first = [f"before-{i}" for i in range(3)]
        make_pods(api, namespace, first, scheduler, run)
        wait_for(lambda: all_bound(api, namespace, first, node_name), 30, what="the leader to bind 3 pods")
        # the log line of a binding follows the API's answer to it: wait for it, do not race it
        wait_for(lambda: sorted(bound_by(a, namespace)) == first, 10, what=f"the leader's log to show 3 bindings\n"
                 f"{a.log_tail()}")
        assert bound_by(b, namespace) == []

        kill_and_check_takeover(api, lease_name, a, b)
        second = [f"after-{i}" for i in range(3)]
        make_pods(api, namespace, second, scheduler, run)
        wait_for(lambda: all_bound(api, namespace, second, node_name), 30,
                 what=f"the new leader to bind 3 pods\n{b.log_tail()}")
        wait_for(lambda: sorted(bound_by(b, namespace)) == second, 10,  # each pod bound once, by the one leader
                 what=f"the new leader's log to show 3 bindings\n{b.log_tail()}")
        assert not BIND_FAILED.search(a.log_text() + b.log_text())

        # a leader stopped on purpose gives the Lease back as upstream's release does
        before = held_by(api, lease_name, b.identity())
        assert before is not None
        b.stop()
        assert b.process.proc.returncode == 0 and "released lease" in b.log_text()
        released = get_lease(api, lease_name)
        assert released is not None
        spec = released["spec"]
        assert spec.get("holderIdentity", "") == "" and spec["leaseDurationSeconds"] == 1
        assert spec["leaseTransitions"] == before["spec"]["leaseTransitions"]
        assert spec["acquireTime"] == spec["renewTime"]

        # a newcomer takes a released Lease at its first try, counting a transition
        c.start()
        taken = wait_for(lambda: held_by(api, lease_name, c.identity()), 20, what="the newcomer to lead")
        assert isinstance(taken, dict) and taken["spec"]["leaseTransitions"] == spec["leaseTransitions"] + 1
        third = ["late-0"]
        make_pods(api, namespace, third, scheduler, run)
        wait_for(lambda: all_bound(api, namespace, third, node_name), 30, what="the newcomer to bind")
        wait_for(lambda: bound_by(c, namespace) == third, 10, what=f"the newcomer's log to show its binding\n"
                 f"{c.log_tail()}")

        steal_and_check_exit(api, lease_name, c)
    finally:
        for s in (a, b, c):
            s.stop()
