"""The work the failure tests start and the invariants they check after the failure.

- Work: the Deployment `web` in `default` (pause containers, so that a 2-core machine runs ten of them on
  two kubelets in seconds), rolled to a new template version or scaled.
- Never more pods than replicas + maxSurge: judged on every state the pods went through, replayed from a
  watch at the resourceVersion before the change (`pod_history`), not on polls that could miss a peak.
- No object lost: the objects that existed before the failure keep their uids, and every Lease whose
  create was acknowledged (201) while the failure happened is still there (`LeaseWriter`).
- Nothing leaked on a node: every Docker container of the node belongs to a pod the API has, every running
  pod has one running sandbox whose address is the pod's IP in the CNI host-local store, every lease is held
  by a running sandbox, the node bridge has one veth per lease (one per attached network namespace), and no
  pod on a node with a live kubelet stays Terminating (the kubelet confirms every deletion it carried out).
- Watch consumers end where the cluster is: an informer run in the test process (`InformerThread`) and
  each kubelet's pod cache (its `/pods`) equal a fresh list.
"""

from __future__ import annotations

import asyncio
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Any

import docker
import httpx
from pydantic import BaseModel

from cni import host
from kubelet.types.labels import POD_UID as LABEL_POD_UID
from machinery.api.core_v1 import Pod
from machinery.client import ApiClient
from machinery.informer import Informer
from machinery.kubeconfig import ClientConfig
from tests.cluster import wait_for
from tests.e2e.local_cluster import LocalCluster
from tests.integration.test_deployment_controller import pod_history
from tests.node_process import BUSYBOX, PAUSE, KubeletProcess

# what the Docker shim labels its containers with (besides the kubelet's CRI labels), as cri-dockerd does
LABEL_MANAGED = "io.minik8s.managed"
LABEL_NODE = "io.minik8s.node"
LABEL_CONTAINER_TYPE = "io.kubernetes.docker.type"  # podsandbox | container

JSONDict = dict[str, Any]

NS = "default"
APP = "web"
SELECTOR = f"app={APP}"
VERSION = "failure-test/version"  # a template annotation: changing it rolls the Deployment
DEPLOYMENT = f"/apis/apps/v1/namespaces/{NS}/deployments/{APP}"
PODS = f"/api/v1/namespaces/{NS}/pods"
LEASES = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases"


def ok(r: httpx.Response) -> JSONDict:
    assert r.is_success, f"{r.request.method} {r.request.url}: {r.status_code} {r.text}"
    return r.json()


def wait(cluster: LocalCluster, condition: Callable[[], object], timeout: float, what: str) -> object:
    """wait_for, failing with the components' logs (the cluster's work dir is gone after the test)."""
    try:
        return wait_for(condition, timeout, 0.2, what=what)
    except TimeoutError as e:
        raise AssertionError(f"{e}\n{cluster.logs(40)}") from None


# -- the work -----------------------------------------------------------------------------------


# PID 1 of its container without a handler: SIGTERM does nothing, the kubelet kills it when the grace is over
SLOW_TO_STOP = {"name": "app", "image": BUSYBOX, "imagePullPolicy": "Never", "command": ["sleep", "3600"]}


def create_deployment(api: httpx.Client, replicas: int, max_surge: int, max_unavailable: int, *,
                      container: JSONDict | None = None, grace: int = 1) -> None:
    ok(api.post(f"/apis/apps/v1/namespaces/{NS}/deployments", json={
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": APP, "labels": {"app": APP}},
        "spec": {
            "replicas": replicas, "selector": {"matchLabels": {"app": APP}},
            "strategy": {"type": "RollingUpdate",
                         "rollingUpdate": {"maxSurge": max_surge, "maxUnavailable": max_unavailable}},
            "template": {"metadata": {"labels": {"app": APP}, "annotations": {VERSION: "1"}},
                         "spec": {"terminationGracePeriodSeconds": grace, "containers": [
                             container or {"name": "app", "image": PAUSE, "imagePullPolicy": "Never"}]}},
        },
    }))


def set_version(api: httpx.Client, version: str) -> None:
    patch = {"spec": {"template": {"metadata": {"annotations": {VERSION: version}}}}}
    ok(api.patch(DEPLOYMENT, json=patch, headers={"content-type": "application/merge-patch+json"}))


def scale(api: httpx.Client, replicas: int) -> None:
    ok(api.patch(DEPLOYMENT, json={"spec": {"replicas": replicas}},
                 headers={"content-type": "application/merge-patch+json"}))


def pods(api: httpx.Client) -> list[JSONDict]:
    return ok(api.get(PODS, params={"labelSelector": SELECTOR}))["items"]


def active(items: list[JSONDict]) -> list[JSONDict]:
    return [p for p in items if not p["metadata"].get("deletionTimestamp")]


def is_ready(p: JSONDict) -> bool:
    conditions = (p.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def rollout_complete(api: httpx.Client, replicas: int, version: str) -> bool:
    """As `kubectl rollout status` sees it, and every pod of the Deployment Running, Ready, at `version`."""
    d = ok(api.get(DEPLOYMENT))
    st = d.get("status") or {}
    if st.get("observedGeneration", 0) < d["metadata"]["generation"]:
        return False
    if not (st.get("updatedReplicas") == st.get("readyReplicas") == st.get("availableReplicas")
            == st.get("replicas") == replicas):
        return False
    live = active(pods(api))
    return len(live) == replicas and all(
        p["status"].get("phase") == "Running" and is_ready(p)
        and p["metadata"].get("annotations", {}).get(VERSION) == version for p in live)


def pod_list(api: httpx.Client) -> JSONDict:
    """A list whose resourceVersion a later `max_pods_since` replays from."""
    return ok(api.get(PODS, params={"labelSelector": SELECTOR}))


def max_pods_since(api: httpx.Client, since: JSONDict) -> int:
    """The most pods (not being deleted) there were at once since the list `since`: every state, from a watch."""
    return max(total for total, _ in pod_history(api, NS, SELECTOR, since))


# -- no object lost -----------------------------------------------------------------------------

WATCHED_KINDS = ("/api/v1/nodes", "/api/v1/namespaces", LEASES,
                 f"/apis/apps/v1/namespaces/{NS}/deployments", f"/apis/apps/v1/namespaces/{NS}/replicasets")


def object_uids(api: httpx.Client) -> dict[str, str]:
    """collection/name → uid of the objects a failure must not lose (pods come and go on purpose)."""
    out = {}
    for collection in WATCHED_KINDS:
        for item in ok(api.get(collection))["items"]:
            out[f"{collection}/{item['metadata']['name']}"] = item["metadata"]["uid"]
    return out


def lost_objects(api: httpx.Client, before: dict[str, str]) -> list[str]:
    now = object_uids(api)
    return sorted(key for key, uid in before.items() if now.get(key) != uid)


class LeaseWriter:
    """Creates Leases (the simplest namespaced object) one after another on a thread until stopped, remembering
    every create the apiserver acknowledged (201): an acknowledged write must survive whatever happens next."""

    def __init__(self, url: str, prefix: str = "w") -> None:
        self.url = url
        self.prefix = prefix
        self.acked: list[tuple[float, str, str]] = []  # (monotonic time, name, uid)
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        with httpx.Client(base_url=self.url, timeout=5) as api:
            i = 0
            while not self._stop.is_set():
                name = f"{self.prefix}-{i}"
                i += 1
                try:
                    r = api.post(LEASES, json={"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                               "metadata": {"name": name}, "spec": {"holderIdentity": name}})
                    if r.status_code == 201:
                        self.acked.append((time.monotonic(), name, r.json()["metadata"]["uid"]))
                    else:
                        self.failures += 1
                except httpx.HTTPError:
                    self.failures += 1
                self._stop.wait(0.2)  # a steady trickle, not load

    def acked_since(self, t: float) -> int:
        return sum(1 for at, _, _ in self.acked if at >= t)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def missing(self, api: httpx.Client) -> list[str]:
        """Acknowledged Leases that are not there (or not the same object)."""
        have = {c["metadata"]["name"]: c["metadata"]["uid"] for c in ok(api.get(LEASES))["items"]}
        return [name for _, name, uid in self.acked if have.get(name) != uid]


# -- nothing leaked on the nodes ------------------------------------------------------------------


def node_leaks(kubelet: KubeletProcess, api: httpx.Client) -> list[str]:
    """What the node holds that the API does not account for, or the other way round (empty: consistent)."""
    node = kubelet.node
    api_pods = {p["metadata"]["uid"]: p for p in ok(api.get(
        "/api/v1/pods", params={"fieldSelector": f"spec.nodeName={node}"}))["items"]}
    client = docker.from_env()
    try:
        containers = client.containers.list(all=True, filters={"label": [f"{LABEL_MANAGED}=true",
                                                                          f"{LABEL_NODE}={node}"]})
    finally:
        client.close()
    problems = [f"container {c.name} of pod uid {c.labels.get(LABEL_POD_UID)}, which the API does not have"
                for c in containers if c.labels.get(LABEL_POD_UID) not in api_pods]
    sandboxes = {c.id: c.labels.get(LABEL_POD_UID) for c in containers
                 if c.labels.get(LABEL_CONTAINER_TYPE) == "podsandbox" and c.status == "running"}
    leases = host.leases(kubelet.lease_dir)
    problems += [f"address {ip} leased to {cid[:12]}, no running sandbox" for ip, cid in leases.items()
                 if cid not in sandboxes]
    for uid, p in api_pods.items():
        if p["metadata"].get("deletionTimestamp"):
            if kubelet.process.alive():  # a live kubelet finishes every deletion (its grace is a second or two)
                problems.append(f"pod {p['metadata']['name']} still terminating")
            continue
        if (p.get("status") or {}).get("phase") != "Running":
            continue
        own = [cid for cid, owner in sandboxes.items() if owner == uid]
        ip = p["status"].get("podIP")
        if len(own) != 1:
            problems.append(f"pod {p['metadata']['name']} has {len(own)} running sandboxes")
        elif leases.get(ip or "") != own[0]:
            problems.append(f"pod {p['metadata']['name']}'s IP {ip} is not leased to its sandbox")
    links = subprocess.run(["ip", "-o", "link", "show", "master", kubelet.bridge], capture_output=True, text=True)
    veths = len(links.stdout.splitlines()) if links.returncode == 0 else 0
    if veths != len(leases):  # one veth per attached network namespace, each with its address
        problems.append(f"{veths} veths on {kubelet.bridge} for {len(leases)} leased addresses")
    return problems


def wait_no_leaks(cluster: LocalCluster, api: httpx.Client, kubelets: list[KubeletProcess]) -> None:
    """The nodes settle to exactly what the API holds (a kubelet removes a deleted pod's containers, network
    and address soon after, never never)."""
    found: list[str] = []

    def clean() -> bool:
        found[:] = [f"{k.node}: {p}" for k in kubelets for p in node_leaks(k, api)]
        return not found

    try:
        wait_for(clean, 30, 0.5, what="nodes to hold exactly what the API has")
    except TimeoutError as e:
        raise AssertionError(f"{e}; leaked or missing on the nodes: {found}\n{cluster.logs(30)}") from None


# -- watch consumers end with the cluster's state -----------------------------------------------


class InformerThread:
    """An informer (machinery/informer.py, default back-off; pods unless told) on its own event loop in the test
    process: a watch consumer that has to ride out whatever the test does to the cluster."""

    def __init__(self, url: str, model: type[BaseModel] = Pod, namespace: str = NS) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

        async def start() -> tuple[ApiClient, Informer[Any]]:
            client = ApiClient(ClientConfig(server=url))
            informer = Informer(client, model, namespace)
            informer.start()
            if not await informer.wait_for_sync(30):
                raise TimeoutError("the test's informer did not sync")
            return client, informer

        self.client, self.informer = self._call(start())

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(60)

    def cache(self) -> dict[str, str]:
        """key → resourceVersion of what the informer holds."""

        async def read() -> dict[str, str]:
            return {self.informer.store.key(o): o.metadata.resource_version or "" for o in self.informer.list()}

        return self._call(read())

    def close(self) -> None:
        async def stop() -> None:
            self.informer.stop()
            if self.informer._task is not None:
                await asyncio.gather(self.informer._task, return_exceptions=True)
            await self.client.close()

        try:
            self._call(stop())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            self.loop.close()


def fresh(api: httpx.Client, path: str, **params: str) -> dict[str, str]:
    items = ok(api.get(path, params=params))["items"]
    return {f"{p['metadata']['namespace']}/{p['metadata']['name']}": p["metadata"]["resourceVersion"] for p in items}


def kubelet_cache(kubelet: KubeletProcess) -> dict[str, str]:
    """The kubelet's pod informer (its `/pods` serves the cache, as upstream's read-only endpoint does)."""
    items = kubelet.pods()
    return {f"{p['metadata']['namespace']}/{p['metadata']['name']}": p["metadata"]["resourceVersion"] for p in items}


def wait_caches_match(cluster: LocalCluster, api: httpx.Client, informer: InformerThread,
                      kubelets: list[KubeletProcess]) -> None:
    """Every watch consumer's cache equals a fresh list of the same view (they may lag a moment, not stay off)."""
    diff: list[str] = []

    def same(name: str, cache: dict[str, str], truth: dict[str, str]) -> None:
        if cache != truth:
            wrong = sorted(k for k in cache.keys() | truth.keys() if cache.get(k) != truth.get(k))
            diff.append(f"{name}: {[(k, cache.get(k), truth.get(k)) for k in wrong]}")

    def match() -> bool:
        diff.clear()
        same("test informer", informer.cache(), fresh(api, PODS))
        for k in kubelets:
            truth = fresh(api, "/api/v1/pods", fieldSelector=f"spec.nodeName={k.node}")
            same(f"kubelet {k.node}", kubelet_cache(k), truth)
        return not diff

    try:
        wait_for(match, 30, 0.5, what="watch caches to equal a fresh list")
    except TimeoutError as e:
        raise AssertionError(f"{e}; caches differ from a fresh list (key, cache, list): {diff}\n"
                             f"{cluster.logs(30)}") from None


def assert_nothing_lost_or_leaked(cluster: LocalCluster, api: httpx.Client, before: dict[str, str],
                                  informer: InformerThread, writer: LeaseWriter | None = None,
                                  watching: list[KubeletProcess] | None = None) -> None:
    """The invariants every failure test ends on: no object lost (nor any write the apiserver acknowledged), no
    container, address or bridge leaked, and every watch consumer's cache (the test's informer, the kubelets in
    `watching`, all of them by default) equal to a fresh list."""
    if writer is not None:
        writer.stop()
        assert writer.missing(api) == []
    assert lost_objects(api, before) == []
    wait_no_leaks(cluster, api, cluster.kubelets)
    wait_caches_match(cluster, api, informer, cluster.kubelets if watching is None else watching)
