"""The Service endpoint controllers as a real `python -m controllers` process over HTTPS, each under
its own service account and bootstrap role, against a real apiserver and etcd of this module's own:
EndpointSlices follow pods (scale up and down, a readiness flip, a pod terminating then gone, more
than 100 pods → two slices, named ports per pod, publishNotReadyAddresses), v1 Endpoints with ready
and not-ready addresses, a selector-less Service's hand-written Endpoints left alone and mirrored
into slices, a LoadBalancer Service given its nodes' addresses and losing them when its type changes,
and real kubectl listing the slices.

No kubelet runs here: the test plays the nodes (Node objects with a Ready condition and an
InternalIP) and writes pod status (podIP, Ready) through pods/status, as a kubelet would.
"""

from __future__ import annotations

import contextlib
import subprocess
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets
from websockets.sync.client import connect as ws_connect

from tests.auth_cluster import SecureApiServer, SecureKubectl
from tests.cluster import Etcd, free_port, ok, wait_for
from tests.controller_process import ControllerProcess
from tests.kubectl import find_kubectl

PREFIX = "svcep"
SLICE_MANAGER = "endpointslice-controller.k8s.io"
MIRROR_MANAGER = "endpointslicemirroring-controller.k8s.io"
NODES = {f"{PREFIX}-n1": "192.0.2.11", f"{PREFIX}-n2": "192.0.2.12"}
_ips = iter(f"10.250.{i // 250}.{i % 250 + 1}" for i in range(100_000))


@pytest.fixture(scope="module")
def secure(workdir: Path, own_etcd: Etcd) -> Iterator[SecureApiServer]:
    server = SecureApiServer(workdir, own_etcd).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def nodes(admin: httpx.Client) -> Iterator[dict[str, str]]:
    """Two Ready nodes with InternalIPs (no kubelet behind them)."""
    try:
        for name, ip in NODES.items():
            ok(admin.post("/api/v1/nodes", json={"metadata": {"name": name}}))
            ok(admin.patch(f"/api/v1/nodes/{name}/status", headers=MERGE, json={"status": {
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
                "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}]}}))
        yield dict(NODES)
    finally:
        for name in NODES:
            admin.delete(f"/api/v1/nodes/{name}")


@pytest.fixture(scope="module")
def cm(workdir: Path, secure: SecureApiServer, nodes: dict[str, str]) -> Iterator[ControllerProcess]:
    chosen = ["endpointslice", "endpoint", "endpointslicemirroring", "servicelb", "garbagecollector"]
    process = ControllerProcess(workdir, secure.secure_url, chosen,
                                "--kubeconfig", str(secure.kubeconfig("controller-manager")))
    try:
        process.start()
        yield process
    finally:
        process.stop()


@pytest.fixture
def ns(admin: httpx.Client, cm: ControllerProcess) -> Iterator[str]:
    name = f"{PREFIX}-{uuid.uuid4().hex[:6]}"
    ok(admin.post("/api/v1/namespaces", json={"metadata": {"name": name}}))
    yield name
    admin.delete(f"/api/v1/namespaces/{name}")


# -- helpers ----------------------------------------------------------------------------------------

MERGE = {"content-type": "application/merge-patch+json"}
RBAC = "/apis/rbac.authorization.k8s.io/v1"


def make_service(admin: httpx.Client, ns: str, name: str = "web", *, selector: dict[str, str] | None = None,
                 ports: list[dict[str, Any]] | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"type": "ClusterIP", "ports": ports or [
        {"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080}]}
    if selector is not None:
        body["selector"] = selector
    body.update(spec)
    return ok(admin.post(f"/api/v1/namespaces/{ns}/services",
                         json={"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": body}))


def make_pod(admin: httpx.Client, ns: str, name: str, *, ready: bool = True, node: str = f"{PREFIX}-n1",
             labels: dict[str, str] | None = None, ports: list[dict[str, Any]] | None = None) -> str:
    """A pod bound to `node`, with status written as its kubelet would; returns its IP."""
    ok(admin.post(f"/api/v1/namespaces/{ns}/pods", json={
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels or {"app": "web"}},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox:1.36", "ports": ports or []}]}}))
    ip = next(_ips)
    set_ready(admin, ns, name, ready, ip=ip)
    return ip


def set_ready(admin: httpx.Client, ns: str, name: str, ready: bool, ip: str | None = None) -> None:
    status: dict[str, Any] = {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": _now()}]}
    if ip is not None:
        status.update(podIP=ip, podIPs=[{"ip": ip}])
    ok(admin.patch(f"/api/v1/namespaces/{ns}/pods/{name}/status", headers=MERGE, json={"status": status}))


def _now() -> str:
    import datetime as dt

    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def slices(admin: httpx.Client, ns: str, service: str = "web") -> list[dict[str, Any]]:
    return ok(admin.get(f"/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices",
                        params={"labelSelector": f"kubernetes.io/service-name={service}"}))["items"]


def endpoints_of(admin: httpx.Client, ns: str, service: str = "web") -> dict[str, dict[str, Any]]:
    """IP -> endpoint, over every slice of the Service."""
    return {ep["addresses"][0]: ep for s in slices(admin, ns, service) for ep in s.get("endpoints") or []}


def conditions(ep: dict[str, Any]) -> tuple[bool, bool, bool]:
    c = ep["conditions"]
    return c.get("ready"), c.get("serving"), c.get("terminating")


def wait_endpoints(admin: httpx.Client, ns: str, check: Any, what: str, service: str = "web",
                   timeout: float = 20) -> dict[str, dict[str, Any]]:
    def current() -> dict[str, dict[str, Any]] | None:
        eps = endpoints_of(admin, ns, service)
        return eps if check(eps) else None

    found = wait_for(current, timeout, what=what)
    assert isinstance(found, dict)
    return found


# -- EndpointSlices ---------------------------------------------------------------------------------


def test_slices_follow_pods_readiness_and_termination(admin: httpx.Client, ns: str) -> None:
    svc = make_service(admin, ns, selector={"app": "web"})
    ips = [make_pod(admin, ns, f"web-{i}", node=f"{PREFIX}-n{i % 2 + 1}") for i in range(3)]
    make_pod(admin, ns, "other", labels={"app": "other"})  # not selected
    eps = wait_endpoints(admin, ns, lambda e: set(e) == set(ips), "three endpoints")
    assert all(conditions(ep) == (True, True, False) for ep in eps.values())
    (slice_,) = slices(admin, ns)
    meta = slice_["metadata"]
    assert meta["name"].startswith("web-") and len(meta["name"]) == len("web-") + 5
    assert meta["labels"]["endpointslice.kubernetes.io/managed-by"] == SLICE_MANAGER
    (owner,) = meta["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == ("Service", "web",
                                                                                   svc["metadata"]["uid"], True)
    assert slice_["addressType"] == "IPv4"
    assert slice_["ports"] == [{"name": "http", "port": 8080, "protocol": "TCP"}]
    assert "endpoints.kubernetes.io/last-change-trigger-time" in meta["annotations"]
    assert eps[ips[1]]["nodeName"] == f"{PREFIX}-n2" and eps[ips[1]]["targetRef"]["name"] == "web-1"
    name = meta["name"]

    # readiness flip: in place, same slice
    set_ready(admin, ns, "web-0", False)
    wait_endpoints(admin, ns, lambda e: conditions(e[ips[0]]) == (False, False, False), "web-0 not ready")
    # scale up
    ips.append(make_pod(admin, ns, "web-3"))
    wait_endpoints(admin, ns, lambda e: ips[3] in e, "a fourth endpoint")
    assert [s["metadata"]["name"] for s in slices(admin, ns)] == [name]  # updated in place, not recreated
    # a graceful delete: terminating (still serving) first, gone when the pod is
    ok(admin.delete(f"/api/v1/namespaces/{ns}/pods/web-1"))
    wait_endpoints(admin, ns, lambda e: conditions(e[ips[1]]) == (False, True, True), "web-1 terminating")
    ok(admin.delete(f"/api/v1/namespaces/{ns}/pods/web-1", params={"gracePeriodSeconds": "0"}))
    wait_endpoints(admin, ns, lambda e: ips[1] not in e and len(e) == 3, "web-1 gone")
    # scale to zero: one placeholder slice stays
    for pod in ("web-0", "web-2", "web-3"):
        ok(admin.delete(f"/api/v1/namespaces/{ns}/pods/{pod}", params={"gracePeriodSeconds": "0"}))
    wait_for(lambda: [len(s.get("endpoints") or []) for s in slices(admin, ns)] == [0], 20,
             what="one empty placeholder slice")


def test_a_deleted_slice_comes_back_and_a_new_selector_moves_the_endpoints(admin: httpx.Client, ns: str) -> None:
    make_service(admin, ns, selector={"app": "web"})
    web = make_pod(admin, ns, "web")
    api = make_pod(admin, ns, "api", labels={"app": "api"})
    wait_endpoints(admin, ns, lambda e: set(e) == {web}, "the web pod's endpoint")
    (slice_,) = slices(admin, ns)
    ok(admin.delete(f"/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices/{slice_['metadata']['name']}"))
    wait_for(lambda: [s["metadata"]["uid"] for s in slices(admin, ns)] not in ([], [slice_["metadata"]["uid"]]), 20,
             what="a new slice in place of the deleted one")
    assert set(endpoints_of(admin, ns)) == {web}
    ok(admin.patch(f"/api/v1/namespaces/{ns}/services/web", headers=MERGE, json={"spec": {"selector": {"app": "api"}}}))
    wait_endpoints(admin, ns, lambda e: set(e) == {api}, "the endpoints to follow the new selector")


def test_more_than_100_pods_make_two_slices(admin: httpx.Client, ns: str) -> None:
    make_service(admin, ns, selector={"app": "web"})
    for i in range(105):
        make_pod(admin, ns, f"web-{i}")
    wait_endpoints(admin, ns, lambda e: len(e) == 105, "105 endpoints", timeout=40)
    # how the 105 split depends on how they arrived (as upstream, a slice fills until a batch no longer fits)
    sizes = [len(s["endpoints"]) for s in slices(admin, ns)]
    assert len(sizes) == 2 and max(sizes) <= 100 and sum(sizes) == 105


def test_named_target_ports_resolve_per_pod(admin: httpx.Client, ns: str) -> None:
    make_service(admin, ns, selector={"app": "web"},
                 ports=[{"name": "http", "port": 80, "protocol": "TCP", "targetPort": "web"}])
    a = make_pod(admin, ns, "a", ports=[{"name": "web", "containerPort": 8080}])
    b = make_pod(admin, ns, "b", ports=[{"name": "web", "containerPort": 9090}])
    wait_endpoints(admin, ns, lambda e: {a, b} <= set(e), "both pods")
    by_port = {s["ports"][0]["port"]: [ep["addresses"][0] for ep in s["endpoints"]] for s in slices(admin, ns)}
    assert by_port == {8080: [a], 9090: [b]}


def test_publish_not_ready_addresses_makes_every_endpoint_ready(admin: httpx.Client, ns: str) -> None:
    make_service(admin, ns, selector={"app": "web"}, publishNotReadyAddresses=True, clusterIP="None")
    ip = make_pod(admin, ns, "a", ready=False)
    eps = wait_endpoints(admin, ns, lambda e: ip in e, "the not-ready pod")
    assert conditions(eps[ip]) == (True, False, False)
    (slice_,) = slices(admin, ns)
    assert slice_["metadata"]["labels"]["service.kubernetes.io/headless"] == ""


# -- Endpoints --------------------------------------------------------------------------------------


def test_endpoints_list_ready_and_not_ready_addresses(admin: httpx.Client, ns: str) -> None:
    make_service(admin, ns, selector={"app": "web"})
    ready = make_pod(admin, ns, "a")
    not_ready = make_pod(admin, ns, "b", ready=False)

    def subsets() -> list[dict[str, Any]] | None:
        r = admin.get(f"/api/v1/namespaces/{ns}/endpoints/web")
        found = r.json().get("subsets") if r.status_code == 200 else None
        return found if found and len(found[0].get("addresses", [])) + len(found[0].get("notReadyAddresses", [])) == 2 \
            else None

    found = wait_for(subsets, 20, what="the Endpoints with both pods")
    assert isinstance(found, list)
    (subset,) = found
    assert [a["ip"] for a in subset["addresses"]] == [ready]
    assert [a["ip"] for a in subset["notReadyAddresses"]] == [not_ready]
    assert subset["ports"] == [{"name": "http", "port": 8080, "protocol": "TCP"}]
    # the Service goes: so do its Endpoints (by the endpoint controller) and slices (garbage collector)
    ok(admin.delete(f"/api/v1/namespaces/{ns}/services/web"))
    wait_for(lambda: admin.get(f"/api/v1/namespaces/{ns}/endpoints/web").status_code == 404, 20,
             what="the Endpoints to go with the Service")
    wait_for(lambda: not slices(admin, ns), 20, what="the slices to go with the Service")


# -- selector-less Services -------------------------------------------------------------------------


def test_selectorless_service_endpoints_are_left_alone_and_mirrored(admin: httpx.Client, ns: str) -> None:
    make_pod(admin, ns, "a")  # would match, if the Service selected anything
    make_service(admin, ns, "ext")
    hand_written = {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "ext"}, "subsets": [
        {"addresses": [{"ip": "192.0.2.50"}], "notReadyAddresses": [{"ip": "192.0.2.51"}],
         "ports": [{"name": "http", "port": 8443, "protocol": "TCP"}]}]}
    ok(admin.post(f"/api/v1/namespaces/{ns}/endpoints", json=hand_written))
    eps = wait_endpoints(admin, ns, lambda e: {"192.0.2.50", "192.0.2.51"} <= set(e), "the mirrored slice",
                         service="ext")
    assert eps["192.0.2.50"]["conditions"]["ready"] is True and eps["192.0.2.51"]["conditions"]["ready"] is False
    (slice_,) = slices(admin, ns, "ext")
    assert slice_["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"] == MIRROR_MANAGER
    assert slice_["metadata"]["ownerReferences"][0]["kind"] == "Endpoints"
    assert slice_["ports"] == [{"name": "http", "port": 8443, "protocol": "TCP"}]
    stored = ok(admin.get(f"/api/v1/namespaces/{ns}/endpoints/ext"))
    assert stored["subsets"] == hand_written["subsets"]  # the endpoint controller did not touch it
    # an edit is mirrored; skip-mirror removes the mirror
    stored["subsets"][0]["addresses"].append({"ip": "192.0.2.52"})
    ok(admin.put(f"/api/v1/namespaces/{ns}/endpoints/ext", json=stored))
    wait_endpoints(admin, ns, lambda e: "192.0.2.52" in e, "the edit mirrored", service="ext")
    ok(admin.patch(f"/api/v1/namespaces/{ns}/endpoints/ext", headers=MERGE,
                   json={"metadata": {"labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}}}))
    wait_for(lambda: not slices(admin, ns, "ext"), 20, what="the mirror removed")


def test_mirroring_stops_at_1000_addresses_per_subset_and_says_so(admin: httpx.Client, ns: str) -> None:
    make_service(admin, ns, "big")
    addresses = [{"ip": f"198.18.{i // 250}.{i % 250 + 1}"} for i in range(1001)]
    ok(admin.post(f"/api/v1/namespaces/{ns}/endpoints", json={
        "metadata": {"name": "big"}, "subsets": [{"addresses": addresses, "ports": [{"port": 80}]}]}))
    wait_endpoints(admin, ns, lambda e: len(e) == 1000, "1000 mirrored endpoints", service="big")
    assert [len(s["endpoints"]) for s in slices(admin, ns, "big")] == [1000]

    def warning() -> list[str]:
        return [e["message"] for e in ok(admin.get(f"/api/v1/namespaces/{ns}/events"))["items"]
                if e["reason"] == "TooManyAddressesToMirror" and e["involvedObject"]["kind"] == "Endpoints"]

    messages = wait_for(warning, 10, what="the TooManyAddressesToMirror event")
    assert messages == ["A max of 1000 addresses can be mirrored to EndpointSlices per Endpoints subset. "
                        "1 addresses were skipped"]


# -- LoadBalancer -----------------------------------------------------------------------------------


def test_load_balancer_gets_the_nodes_addresses_and_loses_them(admin: httpx.Client, ns: str,
                                                               nodes: dict[str, str]) -> None:
    make_service(admin, ns, selector={"app": "web"}, type="LoadBalancer")

    def ingress() -> list[dict[str, Any]]:
        svc = ok(admin.get(f"/api/v1/namespaces/{ns}/services/web"))
        return ((svc.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []

    wait_for(lambda: len(ingress()) == 2, 20, what="the load balancer's ingress")
    assert ingress() == [{"ip": ip, "ipMode": "VIP"} for ip in sorted(nodes.values())]

    def reasons() -> set[str]:  # events are written after the status, in the background
        return {e["reason"] for e in ok(admin.get(f"/api/v1/namespaces/{ns}/events"))["items"]}

    wait_for(lambda: {"EnsuringLoadBalancer", "EnsuredLoadBalancer"} <= reasons(), 10, what="the events")
    ok(admin.patch(f"/api/v1/namespaces/{ns}/services/web", headers=MERGE, json={"spec": {"type": "ClusterIP"}}))
    wait_for(lambda: ingress() == [], 20, what="the ingress removed with the type")
    wait_for(lambda: {"DeletingLoadBalancer", "DeletedLoadBalancer"} <= reasons(), 10, what="the deletion events")


# -- identities and kubectl -------------------------------------------------------------------------


def test_each_controller_writes_as_its_own_service_account(secure: SecureApiServer, admin: httpx.Client,
                                                           ns: str) -> None:
    make_service(admin, ns, selector={"app": "web"}, type="LoadBalancer")
    make_pod(admin, ns, "a")
    make_service(admin, ns, "ext")
    ok(admin.post(f"/api/v1/namespaces/{ns}/endpoints", json={
        "metadata": {"name": "ext"}, "subsets": [{"addresses": [{"ip": "192.0.2.60"}], "ports": [{"port": 80}]}]}))
    wait_endpoints(admin, ns, lambda e: len(e) == 1, "one endpoint")
    wait_endpoints(admin, ns, lambda e: len(e) == 1, "the mirrored endpoint", service="ext")
    # who wrote what in this namespace (slices are created with generateName: the audit names no slice)
    wanted = {("endpointslices", ""): {"endpointslice-controller", "endpointslicemirroring-controller"},
              ("endpoints", ""): {"endpoint-controller"},
              ("services", "status"): {"service-controller"}}
    for (resource, sub), writers in wanted.items():
        def wrote(e: dict[str, Any], r: str = resource, s: str = sub) -> bool:
            ref = e.get("objectRef") or {}
            return (e.get("verb") in ("create", "update", "patch") and ref.get("resource") == r
                    and ref.get("subresource", "") == s and ref.get("namespace") == ns
                    and e["user"]["username"] != "kubernetes-admin")

        expected = {f"system:serviceaccount:kube-system:{a}" for a in writers}
        def writers_seen(w: Any = wrote) -> set[str]:
            return {e["user"]["username"] for e in secure.audit_events() if w(e)}

        wait_for(lambda f=writers_seen, x=expected: f() == x, 10,  # type: ignore[misc]
                 what=f"writes of {resource} by {writers}")
    # and none of the four was ever refused anything (its role misses no rule)
    accounts = {f"system:serviceaccount:kube-system:{a}" for writers in wanted.values() for a in writers}
    refused = [(e["user"]["username"], e["verb"], e["objectRef"]) for e in secure.audit_events()
               if e["user"]["username"] in accounts and e["responseStatus"]["code"] == 403]
    assert refused == []


@pytest.mark.kubectl
@pytest.mark.parametrize("version", ["1.27", "1.33"])
def test_kubectl_gets_endpointslices(secure: SecureApiServer, admin: httpx.Client, ns: str, version: str,
                                     tmp_path: Path) -> None:
    binary = find_kubectl(version)
    if binary is None:
        pytest.skip(f"kubectl.{version} is not installed")
    make_service(admin, ns, selector={"app": "web"})
    ip = make_pod(admin, ns, "a")
    wait_endpoints(admin, ns, lambda e: ip in e, "one endpoint")
    kubectl = SecureKubectl(binary, version, secure, "admin", tmp_path / "admin", ns)
    table = kubectl.run("get", "endpointslices", "-l", "kubernetes.io/service-name=web").ok().stdout.splitlines()
    assert table[0].split() == ["NAME", "ADDRESSTYPE", "PORTS", "ENDPOINTS", "AGE"]
    assert table[1].split()[:4] == [table[1].split()[0], "IPv4", "8080", ip] and table[1].startswith("web-")
    listed = kubectl.run("get", "endpointslices", "-l", "kubernetes.io/service-name=web", "-o",
                         "jsonpath={.items[0].endpoints[0].addresses[0]}").ok().stdout
    assert listed == ip
    assert kubectl.run("get", "endpoints", "web", "-o", "jsonpath={.subsets[0].addresses[0].ip}").ok().stdout == ip
    # a LoadBalancer shows its nodes' addresses as EXTERNAL-IP, not <pending>
    make_service(admin, ns, "lb", selector={"app": "web"}, type="LoadBalancer")
    external = ",".join(sorted(NODES.values()))

    def external_ip() -> str:
        rows = kubectl.run("get", "svc", "lb").ok().stdout.splitlines()
        return rows[1].split()[rows[0].split().index("EXTERNAL-IP")]

    wait_for(lambda: external_ip() == external, 20, what=f"EXTERNAL-IP {external}")


# -- failures -------------------------------------------------------------------------------------


def test_refused_writes_raise_events_and_are_retried(admin: httpx.Client, ns: str) -> None:
    """Without the right to create slices and Endpoints (their roles cut down), each controller says so on
    the Service (upstream's FailedToUpdateEndpointSlices / FailedToUpdateEndpoint) and writes nothing; with
    the rights back, its retries succeed."""
    roles = {name: ok(admin.get(f"{RBAC}/clusterroles/system:controller:{name}"))
             for name in ("endpointslice-controller", "endpoint-controller")}
    try:
        for role in roles.values():
            cut = [r for r in role["rules"] if not {"endpointslices", "endpoints"} & set(r.get("resources", []))]
            ok(admin.put(f"{RBAC}/clusterroles/{role['metadata']['name']}",
                         json={**role, "rules": cut, "metadata": {**role["metadata"], "resourceVersion": None}}))
        make_pod(admin, ns, "a")
        make_service(admin, ns, selector={"app": "web"})

        def warnings() -> set[str]:
            return {e["reason"] for e in ok(admin.get(f"/api/v1/namespaces/{ns}/events"))["items"]
                    if e["type"] == "Warning" and e["involvedObject"]["name"] == "web"}

        wait_for(lambda: {"FailedToUpdateEndpointSlices", "FailedToUpdateEndpoint"} <= warnings(), 20,
                 what="both controllers' warnings")
        messages = [e["message"] for e in ok(admin.get(f"/api/v1/namespaces/{ns}/events"))["items"]]
        assert any(m.startswith(f"Error updating Endpoint Slices for Service {ns}/web:") and "forbidden" in m
                   for m in messages), messages
        assert slices(admin, ns) == []
        assert admin.get(f"/api/v1/namespaces/{ns}/endpoints/web").status_code == 404
    finally:
        for role in roles.values():
            current = ok(admin.get(f"{RBAC}/clusterroles/{role['metadata']['name']}"))
            ok(admin.put(f"{RBAC}/clusterroles/{role['metadata']['name']}", json={**current, "rules": role["rules"]}))
    wait_endpoints(admin, ns, lambda e: len(e) == 1, "the slice once allowed again", timeout=40)
    wait_for(lambda: admin.get(f"/api/v1/namespaces/{ns}/endpoints/web").status_code == 200, 40,
             what="the Endpoints once allowed again")


# -- a real kubelet: readiness from a probe -----------------------------------------------------------


@pytest.fixture(scope="module")
def kubelet(secure: SecureApiServer, workdir: Path) -> Iterator[Any]:
    """A real kubelet (Docker) on this module's apiserver; skipped without a Docker engine."""
    try:
        import docker

        docker.from_env().ping()
    except Exception as e:
        pytest.skip(f"no Docker engine to run a kubelet's pods: {e}")
    from tests.node_process import cleanup, ensure_images, free_pod_cidrs

    ensure_images()
    node = secure.kubelet(workdir, f"{PREFIX}-{uuid.uuid4().hex[:6]}", free_pod_cidrs(1)[0])
    try:
        with secure.client("admin") as api:
            node.start(api, timeout=60)
        yield node
    finally:
        cleanup([node])
        with secure.client("admin") as api:
            api.delete(f"/api/v1/nodes/{node.node}")


def test_readiness_probe_of_a_real_pod_drives_its_endpoint(admin: httpx.Client, ns: str, kubelet: Any) -> None:
    """Not ready until the probe passes, ready while it does, not ready when it fails again, terminating
    while the kubelet stops it (sleep as PID 1 ignores SIGTERM: the whole grace period), then gone."""
    from tests.node_process import BUSYBOX

    make_service(admin, ns, selector={"app": "probed"})
    script = "sleep 3; touch /tmp/ready; sleep 6; rm /tmp/ready; exec sleep 3600"
    ok(admin.post(f"/api/v1/namespaces/{ns}/pods", json={
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probed", "labels": {"app": "probed"}},
        "spec": {"nodeName": kubelet.node, "terminationGracePeriodSeconds": 4, "containers": [{
            "name": "main", "image": BUSYBOX, "command": ["sh", "-c", script],
            "readinessProbe": {"exec": {"command": ["test", "-f", "/tmp/ready"]}, "periodSeconds": 1,
                               "failureThreshold": 1}}]}}))

    def state() -> tuple[bool, bool, bool] | None:
        eps = list(endpoints_of(admin, ns).values())
        return conditions(eps[0]) if eps else None

    def log() -> str:
        return str(kubelet.log_tail())

    wait_for(lambda: state() == (False, False, False), 60, 0.1, what=f"the pod's not-ready endpoint\n{log()}")
    wait_for(lambda: state() == (True, True, False), 20, 0.1, what="the endpoint ready once the probe passes")
    wait_for(lambda: state() == (False, False, False), 20, 0.1, what="the endpoint not ready once it fails")
    ok(admin.delete(f"/api/v1/namespaces/{ns}/pods/probed"))
    wait_for(lambda: state() == (False, False, True), 10, 0.1, what="the endpoint terminating")
    wait_for(lambda: state() is None, 30, 0.2, what="the endpoint gone with the pod")


# -- pods/proxy, services/proxy, nodes/proxy ------------------------------------------------------------


def test_the_apiserver_proxies_to_pods_services_and_kubelets(secure: SecureApiServer, admin: httpx.Client,
                                                             ns: str, kubelet: Any, tmp_path: Path) -> None:
    """kubectl proxy's and `get --raw`'s way in: the apiserver relays HTTP to a pod, to a ready endpoint of a
    Service (its port by name, or the only one), and to a kubelet over its client TLS; with upstream's
    refusals: no endpoint (503), a port the Service lacks (503), an address it may not dial (400)."""
    from tests.node_process import HTTPD

    make_service(admin, ns, "site", selector={"app": "site"},
                 ports=[{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 80}])
    ok(admin.post(f"/api/v1/namespaces/{ns}/pods", json={
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "site", "labels": {"app": "site"}},
        "spec": {"nodeName": kubelet.node, "terminationGracePeriodSeconds": 1,
                 "containers": [{"name": "httpd", "image": HTTPD, "ports": [{"containerPort": 80}],
                                 "readinessProbe": {"tcpSocket": {"port": 80}, "periodSeconds": 1}}]}}))
    wait_endpoints(admin, ns, lambda eps: any(conditions(e)[0] for e in eps.values()), "a ready site endpoint",
                   service="site", timeout=60)
    welcome = "Welcome to minik8s httpd"
    for path in (f"/api/v1/namespaces/{ns}/pods/site/proxy/", f"/api/v1/namespaces/{ns}/pods/http:site:80/proxy/",
                 f"/api/v1/namespaces/{ns}/services/site/proxy/", f"/api/v1/namespaces/{ns}/services/site:http/proxy/",
                 f"/api/v1/namespaces/{ns}/services/http:site:80/proxy/index.html"):
        r = admin.get(path)
        assert r.status_code == 200 and welcome in r.text, (path, r.status_code, r.text)
    missing = admin.get(f"/api/v1/namespaces/{ns}/pods/site/proxy/nothing-here")
    assert missing.status_code == 404 and "404" in missing.text  # the pod's own answer, passed on
    # the kubelet, through the apiserver's client certificate
    node = admin.get(f"/api/v1/nodes/{kubelet.node}/proxy/healthz")
    assert (node.status_code, node.text) == (200, "ok")
    pods = admin.get(f"/api/v1/nodes/{kubelet.node}/proxy/pods").json()
    assert any(p["metadata"]["name"] == "site" for p in pods["items"])
    # refusals
    make_service(admin, ns, "empty", selector={"app": "nobody"})
    empty = admin.get(f"/api/v1/namespaces/{ns}/services/empty/proxy/")
    assert (empty.status_code, empty.json()["reason"]) == (503, "ServiceUnavailable")
    assert empty.json()["message"] == 'no endpoints available for service "empty"'
    wrong_port = admin.get(f"/api/v1/namespaces/{ns}/services/site:grpc/proxy/")
    assert wrong_port.status_code == 503
    assert wrong_port.json()["message"] == 'no service port "grpc" found for service "site"'
    assert admin.get(f"/api/v1/namespaces/{ns}/services/gone/proxy/").status_code == 404
    assert admin.get(f"/api/v1/namespaces/{ns}/pods/ftp:site:80/proxy/").status_code == 400
    # a pod that claims the host's loopback is not dialled (the apiserver's own ports are there)
    ok(admin.post(f"/api/v1/namespaces/{ns}/pods", json={
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "loopback"},
        "spec": {"nodeName": f"{PREFIX}-n1", "containers": [{"name": "c", "image": "busybox"}]}}))
    set_ready(admin, ns, "loopback", True, ip="127.0.0.1")
    refused = admin.get(f"/api/v1/namespaces/{ns}/pods/loopback:{secure.secure_url.rsplit(':', 1)[1]}/proxy/api")
    assert (refused.status_code, refused.json()["message"]) == (400, "address not allowed")
    # real kubectl: get --raw, and kubectl proxy in front of the apiserver
    binary = find_kubectl("1.33")
    if binary is None:
        pytest.skip("kubectl.1.33 is not installed")
    kubectl = SecureKubectl(binary, "1.33", secure, "admin", tmp_path / "admin", ns)
    raw = kubectl.run("get", "--raw", f"/api/v1/namespaces/{ns}/services/site:http/proxy/").ok().stdout
    assert welcome in raw
    assert kubectl.run("get", "--raw", f"/api/v1/nodes/{kubelet.node}/proxy/healthz").ok().stdout == "ok"
    port = free_port()
    proxy = subprocess.Popen([str(binary), "--kubeconfig", str(kubectl.kubeconfig), "proxy", f"--port={port}"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}/api/v1/namespaces/{ns}/services/site/proxy/"

        def through_kubectl_proxy() -> str | None:
            try:
                r = httpx.get(url, timeout=5, trust_env=False)
            except httpx.HTTPError:
                return None
            return r.text if r.status_code == 200 else None

        assert welcome in wait_for(through_kubectl_proxy, 15, 0.1, what="the Service through kubectl proxy")
    finally:
        proxy.terminate()
        proxy.wait(10)
    ok(admin.delete(f"/api/v1/namespaces/{ns}/pods/site"))


def test_proxy_is_authorized_as_its_own_subresource(secure: SecureApiServer, admin: httpx.Client, ns: str) -> None:
    """view may not proxy (upstream: pods/proxy and services/proxy are edit's); the verb is the method's."""
    secure.issue("proxy-viewer", "vera")
    ok(admin.post(f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings", json={
        "metadata": {"name": "vera-views"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                                        "kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "vera"}]}))
    make_service(admin, ns, "guarded", selector={"app": "guarded"})
    with secure.client("proxy-viewer") as vera:
        wait_for(lambda: vera.get(f"/api/v1/namespaces/{ns}/services/guarded").status_code == 200, 10,
                 what="vera to read the Service")
        r = vera.get(f"/api/v1/namespaces/{ns}/services/guarded/proxy/")
        assert r.status_code == 403
        assert r.json()["message"] == (f'services "guarded" is forbidden: User "vera" cannot get resource '
                                       f'"services/proxy" in API group "" in the namespace "{ns}"')
        r = vera.post(f"/api/v1/namespaces/{ns}/pods/anything:8080/proxy/x", content=b"{}")
        assert r.status_code == 403 and 'cannot create resource "pods/proxy"' in r.json()["message"]
        # a websocket too: the gate stands before the upgrade
        with pytest.raises(websockets.exceptions.InvalidStatus) as refused:
            ws_connect(f"{wss(secure)}/api/v1/namespaces/{ns}/services/guarded/proxy/",
                       ssl=secure.ssl_context("proxy-viewer"), open_timeout=10)
        assert refused.value.response.status_code == 403
        assert b'cannot get resource \\"services/proxy\\"' in refused.value.response.body


# -- links in HTML answers and redirects, protocol upgrades (upstream's proxy Transport and UpgradeAwareHandler) --


def wss(secure: SecureApiServer) -> str:
    return secure.secure_url.replace("https://", "wss://", 1)


@contextlib.contextmanager
def kubectl_proxy(secure: SecureApiServer, tmp_path: Path, ns: str) -> Iterator[str]:
    """Real `kubectl proxy` as admin in front of the apiserver; its http://127.0.0.1:PORT."""
    binary = find_kubectl("1.33")
    if binary is None:
        pytest.skip("kubectl.1.33 is not installed")
    kubectl = SecureKubectl(binary, "1.33", secure, "admin", tmp_path / "admin", ns)
    port = free_port()
    proxy = subprocess.Popen([str(binary), "--kubeconfig", str(kubectl.kubeconfig), "proxy", f"--port={port}"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        def up() -> bool:
            try:
                return httpx.get(f"{base}/version", timeout=5, trust_env=False).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(up, 15, 0.1, what="kubectl proxy answering")
        yield base
    finally:
        proxy.terminate()
        proxy.wait(10)


# the pages pod: busybox httpd with a page of links, its gzip twin, a directory (httpd redirects /d to /d/) and two
# CGI scripts answering what the proxy must refuse: a Location that does not parse, an HTML body that is no gzip
PAGES_SCRIPT = r"""
mkdir -p /w/d /w/cgi-bin
{ printf '<html><head><link rel="stylesheet" href="/style.css"></head><body>\n'
  printf '<a href="/d/">d</a> <a href="rel">r</a> <a href="http://example.com/">e</a> <img src="/i.png" alt="/x">\n'
  printf '</body></html>\n'; } > /w/index.html
gzip -k /w/index.html
echo 'in d' > /w/d/index.html
printf '#!/bin/sh\nprintf "Location: http://[::1/x\\r\\n\\r\\n"\n' > /w/cgi-bin/badlocation
printf '#!/bin/sh\nprintf "Content-Type: text/html\\r\\nContent-Encoding: gzip\\r\\n\\r\\n<html>no gzip</html>"\n' \
  > /w/cgi-bin/badgzip
chmod +x /w/cgi-bin/*
exec httpd -f -v -p 80 -h /w
"""


def test_links_in_html_answers_and_redirects_go_through_the_proxy(secure: SecureApiServer, admin: httpx.Client,
                                                                  ns: str, kubelet: Any, tmp_path: Path) -> None:
    """A real pod's page through kubectl proxy: its absolute links and its redirects point under the proxy (plain and
    gzip), relative links and other hosts' stay; the proxy's root without a slash is redirected to it; a Location
    that does not parse and a body that does not decode are 500s."""
    from tests.node_process import HTTPD

    make_service(admin, ns, "pages", selector={"app": "pages"},
                 ports=[{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 80}])
    ok(admin.post(f"/api/v1/namespaces/{ns}/pods", json={
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "pages", "labels": {"app": "pages"}},
        "spec": {"nodeName": kubelet.node, "terminationGracePeriodSeconds": 1,
                 "containers": [{"name": "httpd", "image": HTTPD, "args": ["sh", "-c", PAGES_SCRIPT],
                                 "readinessProbe": {"tcpSocket": {"port": 80}, "periodSeconds": 1}}]}}))
    wait_endpoints(admin, ns, lambda eps: any(conditions(e)[0] for e in eps.values()), "a ready pages endpoint",
                   service="pages", timeout=60)
    svc = f"/api/v1/namespaces/{ns}/services/pages/proxy"
    pod = f"/api/v1/namespaces/{ns}/pods/pages/proxy"
    with kubectl_proxy(secure, tmp_path, ns) as base, httpx.Client(base_url=base, timeout=10, trust_env=False) as c:
        for prefix in (svc, pod):
            page = c.get(f"{prefix}/", headers={"Accept-Encoding": "identity"})
            assert page.status_code == 200 and "content-encoding" not in page.headers, page.headers
            assert f'<a href="{prefix}/d/">d</a>' in page.text, page.text
            assert f'<link rel="stylesheet" href="{prefix}/style.css">' in page.text
            assert f'<img src="{prefix}/i.png" alt="/x">' in page.text
            assert '<a href="rel">r</a> <a href="http://example.com/">e</a>' in page.text
            assert int(page.headers["content-length"]) == len(page.content)
            # the same page gzip encoded (httpd sends index.html.gz): decoded, rewritten, encoded again
            zipped = c.get(f"{prefix}/index.html", headers={"Accept-Encoding": "gzip"})
            assert zipped.headers.get("content-encoding") == "gzip", zipped.headers
            assert f'<a href="{prefix}/d/">d</a>' in zipped.text
            # httpd redirects a directory to its slash: the Location is the proxy's
            moved = c.get(f"{prefix}/d")
            assert moved.status_code == 302 and moved.headers["location"] == f"{prefix}/d/", moved.headers
            assert c.get(f"{prefix}/d", follow_redirects=True).text == "in d\n"
        root = c.get(svc)
        assert (root.status_code, root.headers["location"]) == (301, f"{svc}/")
        assert c.get(svc, follow_redirects=True).status_code == 200
        # what the proxy cannot rewrite: upstream's 500s, nothing of the backend's answer passed on
        bad = c.get(f"{pod}/cgi-bin/badlocation")
        assert bad.status_code == 500 and bad.json()["reason"] == "InternalError", bad.text
        assert bad.json()["message"].startswith("Internal error occurred: error trying to parse Location header: ")
        broken = c.get(f"{pod}/cgi-bin/badgzip")
        assert broken.status_code == 500 and "reason" not in broken.json(), broken.text
        assert broken.json()["message"].startswith("errorf making gzip reader: "), broken.text
    ok(admin.delete(f"/api/v1/namespaces/{ns}/pods/pages"))


ECHO = websockets.Subprotocol("echo.minik8s.io")


def host_address() -> str:
    """This host's address towards the outside (a global unicast one, which the apiserver may dial)."""
    route = subprocess.run(["ip", "-4", "route", "get", "192.0.2.1"], capture_output=True, text=True, check=True,
                           timeout=10).stdout.split()
    return route[route.index("src") + 1]


@contextlib.contextmanager
def echo_server(host: str) -> Iterator[tuple[int, list[Any]]]:
    """A real websocket server (the websockets library) on host: it echoes every message, but answers /refuse with a
    403 and /plain with a 200 (no upgrade); yields its port and the handshake requests it received."""
    from websockets.http11 import Request as WsRequest
    from websockets.sync.server import ServerConnection, serve

    requests: list[Any] = []

    def handler(ws: ServerConnection) -> None:
        for message in ws:
            ws.send(message)

    def process_request(conn: ServerConnection, request: WsRequest) -> Any:
        requests.append(request)
        if request.path.startswith("/refuse"):
            return conn.respond(403, "no websockets here\n")
        return conn.respond(200, "just a page\n") if request.path.startswith("/plain") else None

    server = serve(handler, host, 0, process_request=process_request, subprotocols=[ECHO],
                   compression=None)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.socket.getsockname()[1], requests
    finally:
        server.shutdown()
        thread.join(10)


def test_websockets_are_spliced_to_pods_and_services(secure: SecureApiServer, admin: httpx.Client, ns: str,
                                                     tmp_path: Path) -> None:
    """A websocket through pods/proxy and services/proxy (directly, and through kubectl proxy) reaches the real
    server behind the pod's address with its subprotocol, messages both ways unchanged; the backend's refusal is
    passed on, a backend that does not upgrade or does not answer is 500, a Service without endpoints 503."""
    from websockets.sync.client import connect

    host = host_address()
    with echo_server(host) as (port, requests):
        make_service(admin, ns, "echo", selector={"app": "echo"},
                     ports=[{"name": "ws", "port": 80, "protocol": "TCP", "targetPort": port}])
        ok(admin.post(f"/api/v1/namespaces/{ns}/pods", json={
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "echo", "labels": {"app": "echo"}},
            "spec": {"nodeName": f"{PREFIX}-n1", "containers": [{"name": "c", "image": "busybox:1.36"}]}}))
        set_ready(admin, ns, "echo", True, ip=host)  # the pod's address is this host's, where the server listens
        wait_endpoints(admin, ns, lambda eps: any(conditions(e)[0] for e in eps.values()), "a ready echo endpoint",
                       service="echo")
        big = bytes(range(256)) * 1024  # 256 KiB: many frames' worth through the splice
        admin_tls = secure.ssl_context("admin")
        with kubectl_proxy(secure, tmp_path, ns) as base:
            for url, tls in ((f"{wss(secure)}/api/v1/namespaces/{ns}/pods/echo:{port}/proxy/chat?x=1", admin_tls),
                             (f"{wss(secure)}/api/v1/namespaces/{ns}/services/echo/proxy/chat", admin_tls),
                             (base.replace("http://", "ws://") + f"/api/v1/namespaces/{ns}/services/echo:ws/proxy/",
                              None)):
                with connect(url, ssl=tls, subprotocols=[ECHO], open_timeout=15, compression=None,
                             max_size=None) as ws:
                    assert ws.subprotocol == "echo.minik8s.io"
                    for message in ("hello", big, b""):
                        ws.send(message)
                        assert ws.recv(timeout=15) == message
        paths = [r.path for r in requests]
        assert paths == ["/chat?x=1", "/chat", "/"], paths
        requests.clear()
        assert all(r.headers.get("Authorization") is None for r in requests)  # the caller's credentials stay behind
        assert all(r.headers.get("X-Forwarded-For") for r in requests)

        def refusal(url: str) -> tuple[int, bytes]:
            with pytest.raises(websockets.exceptions.InvalidStatus) as e:
                ws_connect(url, ssl=admin_tls, open_timeout=15)
            return e.value.response.status_code, bytes(e.value.response.body or b"")

        # the backend refuses: its answer, as it came
        assert refusal(f"{wss(secure)}/api/v1/namespaces/{ns}/pods/echo:{port}/proxy/refuse") == \
            (403, b"no websockets here\n")
        # the backend answers, but does not upgrade: 500
        code, body = refusal(f"{wss(secure)}/api/v1/namespaces/{ns}/pods/echo:{port}/proxy/plain")
        assert code == 500 and b"invalid upgrade response: status code 200" in body, body
    # nothing listens there any more: the dial error
    code, body = refusal(f"{wss(secure)}/api/v1/namespaces/{ns}/pods/echo:{port}/proxy/")
    assert code == 500 and f"dial tcp {host}:{port}".encode() in body, body
    make_service(admin, ns, "nobody", selector={"app": "nobody"})
    code, body = refusal(f"{wss(secure)}/api/v1/namespaces/{ns}/services/nobody/proxy/")
    assert code == 503 and b'no endpoints available for service \\"nobody\\"' in body, body
