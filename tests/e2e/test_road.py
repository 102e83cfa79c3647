"""The whole road, end to end, on the process-based cluster (etcd, apiserver, controller-manager, scheduler,
two kubelets on real Docker and real CNI bridges), driven the way a user drives it: Deployments applied,
scaled, rolled and deleted with a real kubectl. Every scenario is Deployment-driven (the pod-level forms
of the same behaviours are tests/integration/test_kubelet.py's):

- the examples Deployment at 3 replicas: Running pods with 10.244.x.y IPs on both nodes answering HTTP
  from the host, a pod on one node fetching from a pod on the other, and the Events and the audit log of
  one pod showing the road in order (kubectl → deployment controller → replicaset controller → scheduler →
  kubelet);
- scale to 5 and back, roll to a new image and back (rollout undo), delete: nothing left;
- a two-container pod talking over localhost; a crash loop with growing back-off; an OOM-killed memory
  hog; a failing readiness probe keeping pods (and the Deployment) not Ready; a rollout to a missing image
  stuck in ImagePullBackOff while the old pods keep serving;
- kubelet kill -9 and restart: containers adopted, no duplicates, no replacement pods.

"Nothing left" means: no container labelled with the pod's uid, no address in the node's CNI host-local
directory, no process left in the pods' network namespaces and no new `ip netns` entry, no veth on the
node's bridge.
Every wait is a condition with a deadline; the session fixture removes everything, even on failure.
"""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import httpx
import yaml

from machinery.cri import api_pb2 as pb
from machinery.cri import api_pb2_grpc as rpc
from tests.cluster import REPO, wait_for
from tests.e2e.local_cluster import CLUSTER_CIDR, LocalCluster
from tests.kubectl import Kubectl
from tests.node_process import BUSYBOX, HTTPD, KubeletProcess

JSONDict = dict[str, Any]
PAGE_TITLE = "Welcome to minik8s httpd"
MISSING_IMAGE = "minik8s/does-not-exist:1"


# -- manifests ----------------------------------------------------------------------------------------


def deployment(name: str, containers: list[JSONDict], replicas: int = 1, **pod_spec: Any) -> JSONDict:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "labels": {"app": name}},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": containers, "terminationGracePeriodSeconds": 1, **pod_spec}}},
    }


def web_container(image: str = HTTPD, **extra: Any) -> JSONDict:
    return {"name": "httpd", "image": image, "ports": [{"containerPort": 80}],
            "readinessProbe": {"httpGet": {"path": "/", "port": 80}, "periodSeconds": 1}, **extra}


def busybox(name: str, script: str, **extra: Any) -> JSONDict:
    return {"name": name, "image": BUSYBOX, "command": ["sh", "-c", script], **extra}


def write_manifest(path: Path, *docs: JSONDict) -> Path:
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return path


# -- reading the cluster -------------------------------------------------------------------------------


def pods_of(api: httpx.Client, ns: str, app: str) -> list[JSONDict]:
    r = api.get(f"/api/v1/namespaces/{ns}/pods", params={"labelSelector": f"app={app}"})
    assert r.status_code == 200, r.text
    return sorted(r.json()["items"], key=lambda p: p["metadata"]["name"])


def get_json(api: httpx.Client, path: str) -> JSONDict:
    r = api.get(path)
    assert r.status_code == 200, r.text
    return r.json()


def phase(p: JSONDict) -> str:
    return (p.get("status") or {}).get("phase") or ""


def cstatus(p: JSONDict, name: str) -> JSONDict:
    return next((cs for cs in (p.get("status") or {}).get("containerStatuses") or [] if cs["name"] == name), {})


def condition(p: JSONDict, ctype: str) -> str:
    return next((c["status"] for c in (p.get("status") or {}).get("conditions") or [] if c["type"] == ctype), "")


def running(p: JSONDict) -> bool:
    statuses = (p.get("status") or {}).get("containerStatuses") or []
    return (phase(p) == "Running" and not p["metadata"].get("deletionTimestamp") and bool(statuses)
            and all("running" in cs["state"] for cs in statuses))


def ready(p: JSONDict) -> bool:
    return running(p) and condition(p, "Ready") == "True"


def waiting_reason(p: JSONDict, container: str) -> str:
    return ((cstatus(p, container).get("state") or {}).get("waiting") or {}).get("reason") or ""


def wait_pods(api: httpx.Client, ns: str, app: str, check: Callable[[list[JSONDict]], object], timeout: float = 60,
              what: str = "", cluster: LocalCluster | None = None) -> list[JSONDict]:
    """Poll the app's pods until check(pods) holds; the failure shows their last status (and the logs)."""
    last: list[list[JSONDict]] = [[]]

    def probe() -> object:
        last[0] = pods_of(api, ns, app)
        return check(last[0])

    try:
        wait_for(probe, timeout, 0.1, what=what or f"pods of {app}")
    except TimeoutError as e:
        states = [{"name": p["metadata"]["name"], "node": p["spec"].get("nodeName"), "status": p.get("status")}
                  for p in last[0]]
        raise AssertionError(f"{e}\nlast pods: {json.dumps(states, indent=1)}"
                             + (f"\n{cluster.logs()}" if cluster else "")) from None
    return last[0]


def n_ready(n: int, image: str | None = None) -> Callable[[list[JSONDict]], bool]:
    """Exactly n pods, all Running and Ready (and running `image`), none terminating."""
    def check(pods: list[JSONDict]) -> bool:
        return len(pods) == n and all(ready(p) for p in pods) and (
            image is None or all(p["spec"]["containers"][0]["image"] == image for p in pods))
    return check


def events(api: httpx.Client, ns: str) -> list[JSONDict]:
    return get_json(api, f"/api/v1/namespaces/{ns}/events")["items"]


def events_about(api: httpx.Client, ns: str, kind: str, name: str) -> list[JSONDict]:
    return [e for e in events(api, ns) if e["involvedObject"].get("kind") == kind
            and e["involvedObject"].get("name") == name]


def recorded_at(event: JSONDict) -> int:
    """When the recorder created the event: its name is `<object>.<hex of the Unix time in ns>` (client-go's
    convention), a finer clock than firstTimestamp's seconds."""
    return int(event["metadata"]["name"].rsplit(".", 1)[1], 16)


def http_get(url: str, timeout: float = 5) -> httpx.Response:
    return httpx.get(url, timeout=timeout, trust_env=False)


@dataclass(frozen=True)
class RuntimeObject:
    """A sandbox or container as the node's CRI runtime lists it (the Docker shim's or containerd's)."""

    id: str
    labels: dict[str, str]
    sandbox: bool
    running: bool  # a READY sandbox, a RUNNING container
    pod_sandbox_id: str


def runtime_objects(k: KubeletProcess, **labels: str) -> list[RuntimeObject]:
    """The node's sandboxes and containers carrying `labels`, through CRI on the node's runtime socket."""
    assert k.runtime is not None
    out = []
    with grpc.insecure_channel(k.runtime.endpoint) as channel:
        stub = rpc.RuntimeServiceStub(channel)
        for s in stub.ListPodSandbox(pb.ListPodSandboxRequest(filter=pb.PodSandboxFilter(label_selector=labels)),
                                     timeout=10).items:
            out.append(RuntimeObject(s.id, dict(s.labels), True, s.state == pb.SANDBOX_READY, s.id))
        for c in stub.ListContainers(pb.ListContainersRequest(filter=pb.ContainerFilter(label_selector=labels)),
                                     timeout=10).containers:
            out.append(RuntimeObject(c.id, dict(c.labels), False, c.state == pb.CONTAINER_RUNNING, c.pod_sandbox_id))
    return out


def pod_containers(cluster: LocalCluster, uid: str) -> list[RuntimeObject]:
    """The pod's sandbox and containers, on whichever node holds them."""
    return [o for k in cluster.kubelets for o in runtime_objects(k, **{"io.kubernetes.pod.uid": uid})]


def node_containers(cluster: LocalCluster, node: str) -> list[RuntimeObject]:
    return runtime_objects(cluster.kubelet(node))


def netns_inode_of(sandbox_id: str) -> int | None:
    """The network namespace of the sandbox's process, found by its cgroup (Docker's and containerd's both name
    the container ID in it)."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if sandbox_id in (entry / "cgroup").read_text():
                    return os.stat(entry / "ns" / "net").st_ino
            except OSError:
                continue
    return None


def bridge_ports(bridge: str) -> list[str]:
    """Interfaces enslaved to the node's bridge: one veth per pod network namespace alive."""
    out = subprocess.run(["ip", "-o", "link", "show", "master", bridge], capture_output=True, text=True).stdout
    return [line.split(":")[1].strip().split("@")[0] for line in out.splitlines() if ":" in line]


def processes_in_netns(inodes: set[int], container_ids: set[str]) -> list[tuple[int, str]]:
    """Processes of these containers (by cgroup) still in one of these network namespaces (by inode: the
    kernel reuses a freed namespace's inode number, so a later pod of another test may carry it)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.stat(entry / "ns" / "net").st_ino not in inodes:
                    continue
                cgroup = (entry / "cgroup").read_text()
            except OSError:
                continue
            owner = next((cid for cid in container_ids if cid in cgroup), None)
            if owner:
                found.append((int(entry.name), owner[:12]))
    return found


def named_netns() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


class Footprint:
    """What a set of pods put on the host: their uids, IPs, nodes and sandbox network namespaces."""

    def __init__(self) -> None:
        self.uids: set[str] = set()
        self.ips: dict[str, str] = {}  # ip -> node
        self.netns: set[int] = set()   # inodes of the sandboxes' network namespaces
        self.container_ids: set[str] = set()

    def record(self, cluster: LocalCluster, pods: list[JSONDict]) -> None:
        for p in pods:
            uid = p["metadata"]["uid"]
            self.uids.add(uid)
            if ip := (p.get("status") or {}).get("podIP"):
                self.ips[ip] = p["spec"]["nodeName"]
            for c in pod_containers(cluster, uid):
                self.container_ids.add(c.id)
                if c.sandbox and c.running and (inode := netns_inode_of(c.id)) is not None:
                    self.netns.add(inode)


def assert_nothing_left(cluster: LocalCluster, api: httpx.Client, ns: str, footprint: Footprint,
                        netns_before: set[str]) -> None:
    """No pod object, container, IP lease, network namespace or bridge port of these pods remains."""
    def gone() -> bool:
        if get_json(api, f"/api/v1/namespaces/{ns}/pods")["items"]:
            return False
        if any(pod_containers(cluster, uid) for uid in footprint.uids):
            return False
        leases = set().union(*(k.leases() for k in cluster.kubelets))
        return not (set(footprint.ips) & leases)

    wait_for(gone, 60, 0.2, what=f"pods, containers and IP leases of {len(footprint.uids)} pods removed")
    assert footprint.ips, "the footprint recorded no pod IP"
    assert footprint.netns, "the footprint recorded no sandbox network namespace"
    # no process lives in any of the pods' network namespaces any more (Docker's own handle on them, the
    # file under /var/run/docker/netns, is garbage-collected by dockerd up to a minute later)
    left = processes_in_netns(footprint.netns, footprint.container_ids)
    assert not left, f"processes of the pods' containers still in their network namespaces: {left}"
    assert named_netns() <= netns_before, f"new named network namespaces: {named_netns() - netns_before}"
    for k in cluster.kubelets:
        remaining = [p for p in get_json(api, "/api/v1/pods")["items"] if p["spec"].get("nodeName") == k.node]
        if not remaining:  # every pod of the node is gone: no veth may be left on its bridge
            wait_for(lambda k=k: not bridge_ports(k.bridge), 15, 0.2, what=f"no veth left on {k.bridge}")
            assert not k.leases(), f"{k.node} still holds IP leases {k.leases()}"
            assert not node_containers(cluster, k.node), f"{k.node} still has containers"


# -- the road ---------------------------------------------------------------------------------------------


def test_examples_deployment_runs_on_both_nodes_answers_http_and_shows_the_road(
        local_cluster: LocalCluster, api: httpx.Client, namespace: str, kubectl: Kubectl, tmp_path: Path) -> None:
    netns_before = named_netns()
    example = yaml.safe_load((REPO / "examples" / "web-deployment.yaml").read_text())
    example["spec"]["replicas"] = 3
    # busybox httpd runs as PID 1 and ignores SIGTERM: each deleted pod would wait out the default 30 s grace
    example["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = 1
    manifest = write_manifest(tmp_path / "web.yaml", example)
    assert kubectl.run("apply", "-f", str(manifest)).ok().stdout.strip() == "deployment.apps/web created"

    pods = wait_pods(api, namespace, "web", n_ready(3), 60, "3 web pods Running and Ready", local_cluster)
    nodes = {k.node: k for k in local_cluster.kubelets}
    assert {p["spec"]["nodeName"] for p in pods} == set(nodes), "the 3 pods are not spread over both nodes"
    for p in pods:
        ip, node = p["status"]["podIP"], p["spec"]["nodeName"]
        assert ipaddress.ip_address(ip) in ipaddress.ip_network(CLUSTER_CIDR)
        assert ipaddress.ip_address(ip) in ipaddress.ip_network(nodes[node].pod_cidr)
        assert ipaddress.ip_network(nodes[node].pod_cidr).subnet_of(ipaddress.ip_network(local_cluster.ipam_cidr))
        assert p["status"]["podIPs"] == [{"ip": ip}] and p["status"]["hostIP"]
        page = http_get(f"http://{ip}/")
        assert page.status_code == 200 and PAGE_TITLE in page.text
    wait_for(lambda: get_json(api, f"/apis/apps/v1/namespaces/{namespace}/deployments/web")["status"]
             .get("availableReplicas") == 3, 20, 0.1, what="deployment status: 3 available")

    # a pod on one node fetches from a pod on the other, by pod IP (kubectl exec through the apiserver)
    node_a, node_b = sorted(nodes)
    pod_a = next(p for p in pods if p["spec"]["nodeName"] == node_a)
    pod_b = next(p for p in pods if p["spec"]["nodeName"] == node_b)
    fetched = kubectl.run("exec", pod_a["metadata"]["name"], "--", "timeout", "5", "wget", "-qO-",
                          f"http://{pod_b['status']['podIP']}/").ok()
    assert PAGE_TITLE in fetched.stdout
    # httpd on B logged A's own pod IP: no NAT between the nodes' pod networks
    wait_for(lambda: pod_a["status"]["podIP"] in kubectl.run("logs", pod_b["metadata"]["name"]).stdout, 10, 0.2,
             what="B's httpd log naming A's pod IP")

    # the Events of one pod show the road in order, each step by its own component
    pod = pod_b
    name, node = pod["metadata"]["name"], pod["spec"]["nodeName"]
    rs_name = next(o["name"] for o in pod["metadata"]["ownerReferences"] if o.get("controller"))

    def road() -> list[JSONDict] | None:
        scaled = [e for e in events_about(api, namespace, "Deployment", "web") if e["reason"] == "ScalingReplicaSet"
                  and f"replica set {rs_name} " in e["message"]]
        created = [e for e in events_about(api, namespace, "ReplicaSet", rs_name)
                   if e["reason"] == "SuccessfulCreate" and e["message"] == f"Created pod: {name}"]
        about_pod = events_about(api, namespace, "Pod", name)
        steps = [scaled, created] + [[e for e in about_pod if e["reason"] == r]
                                     for r in ("Scheduled", "Pulled", "Created", "Started")]
        return [found[0] for found in steps] if all(len(found) == 1 for found in steps) else None

    chain: list[JSONDict] = wait_for(road, 20, 0.2, what=f"the six events of {name}'s road")  # type: ignore[assignment]
    reasons = [e["reason"] for e in chain]
    assert reasons == ["ScalingReplicaSet", "SuccessfulCreate", "Scheduled", "Pulled", "Created", "Started"]
    # in the order kubectl sorts them (creation time, to the second) ...
    stamps = [e["firstTimestamp"] for e in chain]
    assert stamps == sorted(stamps), stamps
    # ... and on the recorders' nanosecond clock, every step after the one that caused it. SuccessfulCreate and
    # Scheduled are not ordered against each other: the scheduler sees the pod through its watch while the
    # replicaset controller is still reading the create's response, and its bind often wins that race (as it
    # can upstream); both come after the ReplicaSet was scaled up and before the kubelet's first step.
    at = {e["reason"]: recorded_at(e) for e in chain}
    timeline = {r: (t - at["ScalingReplicaSet"]) / 1e6 for r, t in at.items()}
    assert at["ScalingReplicaSet"] < at["SuccessfulCreate"], f"ms after ScalingReplicaSet: {timeline}"
    assert at["ScalingReplicaSet"] < at["Scheduled"], f"ms after ScalingReplicaSet: {timeline}"
    assert max(at["SuccessfulCreate"], at["Scheduled"]) < at["Pulled"] < at["Created"] < at["Started"], \
        f"ms after ScalingReplicaSet: {timeline}"
    components = [e["source"]["component"] for e in chain]
    assert components == ["deployment-controller", "replicaset-controller", "default-scheduler",
                          "kubelet", "kubelet", "kubelet"]
    assert all(e["source"].get("host") == node for e in chain[3:])
    assert chain[0]["message"] == f"Scaled up replica set {rs_name} to 3"
    assert chain[2]["message"] == f"Successfully assigned {namespace}/{name} to {node}"
    assert all(e["type"] == "Normal" for e in chain)
    # the audit log shows the same road as requests, each by its component (the plain port's user is
    # system:unsecured for all: the user agent names the identity), each received after the one it follows
    def audited(verb: str, resource: str, subresource: str | None, name: str, agent: str) -> JSONDict | None:
        return next((e for e in local_cluster.audit_events() if e["stage"] == "ResponseComplete"
                     and e["verb"] == verb and (e.get("objectRef") or {}).get("resource") == resource
                     and (e.get("objectRef") or {}).get("subresource") == subresource
                     and (e.get("objectRef") or {}).get("name") == name
                     and (e.get("objectRef") or {}).get("namespace") == namespace
                     and agent in (e.get("userAgent") or "")
                     and 200 <= (e.get("responseStatus") or {}).get("code", 0) < 300), None)

    sa = "minik8s/system:serviceaccount:kube-system:"
    steps = [("create", "deployments", None, "web", "kubectl"),
             ("create", "replicasets", None, rs_name, f"{sa}deployment-controller"),
             ("create", "pods", None, name, f"{sa}replicaset-controller"),
             ("create", "pods", "binding", name, "minik8s/system:kube-scheduler"),
             ("patch", "pods", "status", name, f"minik8s/system:node:{node}")]
    requests: list[JSONDict] = wait_for(  # type: ignore[assignment]
        lambda: all(found := [audited(*step) for step in steps]) and found, 10, 0.2, what="the road in the audit log")
    received = [e["requestReceivedTimestamp"] for e in requests]
    assert received == sorted(received) and len(set(received)) == len(received), list(zip(steps, received, strict=True))
    assert {e["user"]["username"] for e in requests} == {"system:unsecured"}

    # kubectl shows the same road, sorted as the users sort it
    listed = kubectl.run("get", "events", "--sort-by=.metadata.creationTimestamp").ok().stdout
    for reason in reasons:
        assert reason in listed

    # delete: nothing left
    footprint = Footprint()
    footprint.record(local_cluster, pods)
    alive = {cid for _, cid in processes_in_netns(footprint.netns, footprint.container_ids)}
    assert len(alive) == 6, "the check must see each pod's sandbox and app container in the pod's netns"
    kubectl.run("delete", "-f", str(manifest)).ok()
    assert_nothing_left(local_cluster, api, namespace, footprint, netns_before)
    assert get_json(api, f"/apis/apps/v1/namespaces/{namespace}/replicasets")["items"] == []


def test_scale_to_5_and_back_roll_to_a_new_image_and_back_then_delete_leaves_nothing(
        local_cluster: LocalCluster, api: httpx.Client, namespace: str, kubectl: Kubectl, httpd_b: str,
        tmp_path: Path) -> None:
    netns_before = named_netns()
    footprint = Footprint()
    manifest = write_manifest(tmp_path / "web.yaml", deployment("web", [web_container()], replicas=3))
    kubectl.run("apply", "-f", str(manifest)).ok()
    first = wait_pods(api, namespace, "web", n_ready(3, HTTPD), 60, "3 pods", local_cluster)
    footprint.record(local_cluster, first)

    def rollout_done() -> None:
        done = kubectl.run("rollout", "status", "deployment/web", "--timeout=90s", timeout=120)
        assert done.returncode == 0 and "successfully rolled out" in done.stdout, done

    # scale to 5: two more pods, the first three untouched
    kubectl.run("scale", "deployment/web", "--replicas=5").ok()
    five = wait_pods(api, namespace, "web", n_ready(5, HTTPD), 60, "5 pods", local_cluster)
    footprint.record(local_cluster, five)
    rollout_done()
    assert {p["metadata"]["uid"] for p in first} < {p["metadata"]["uid"] for p in five}
    assert {p["spec"]["nodeName"] for p in five} == set(local_cluster.node_names)

    # and back to 3: two pods (and their containers and addresses) go
    kubectl.run("scale", "deployment/web", "--replicas=3").ok()
    three = wait_pods(api, namespace, "web", n_ready(3, HTTPD), 60, "back to 3 pods", local_cluster)
    removed = [p for p in five if p["metadata"]["uid"] not in {q["metadata"]["uid"] for q in three}]
    assert len(removed) == 2
    leases = lambda: set().union(*(k.leases() for k in local_cluster.kubelets))  # noqa: E731
    wait_for(lambda: not any(pod_containers(local_cluster, p["metadata"]["uid"]) for p in removed)
             and not {p["status"]["podIP"] for p in removed} & leases(), 30, 0.2,
             what="the scaled-down pods' containers and addresses removed")

    # roll to a new image: new pods, the new page served; the old ReplicaSet scaled to 0 and kept
    kubectl.run("set", "image", "deployment/web", f"httpd={httpd_b}").ok()
    rollout_done()
    rolled = wait_pods(api, namespace, "web", n_ready(3, httpd_b), 60, f"3 pods of {httpd_b}", local_cluster)
    footprint.record(local_cluster, rolled)
    assert not {p["metadata"]["uid"] for p in rolled} & {p["metadata"]["uid"] for p in three}
    for p in rolled:
        page = http_get(f"http://{p['status']['podIP']}/version.txt")
        assert page.status_code == 200 and page.text == "b\n"
    sets = get_json(api, f"/apis/apps/v1/namespaces/{namespace}/replicasets")["items"]
    assert sorted((rs["spec"]["template"]["spec"]["containers"][0]["image"], rs["spec"]["replicas"]) for rs in sets) \
        == sorted([(HTTPD, 0), (httpd_b, 3)])
    deploy = get_json(api, f"/apis/apps/v1/namespaces/{namespace}/deployments/web")
    assert deploy["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2"
    history = kubectl.run("rollout", "history", "deployment/web").ok().stdout
    assert "1 " in history and "2 " in history

    # and back (rollout undo): the first template again, as revision 3
    kubectl.run("rollout", "undo", "deployment/web").ok()
    rollout_done()
    undone = wait_pods(api, namespace, "web", n_ready(3, HTTPD), 60, "3 pods of the first image again",
                       local_cluster)
    footprint.record(local_cluster, undone)
    for p in undone:
        assert http_get(f"http://{p['status']['podIP']}/version.txt").status_code == 404
        assert http_get(f"http://{p['status']['podIP']}/").status_code == 200
    deploy = get_json(api, f"/apis/apps/v1/namespaces/{namespace}/deployments/web")
    assert deploy["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "3"
    assert len(get_json(api, f"/apis/apps/v1/namespaces/{namespace}/replicasets")["items"]) == 2

    # delete: no Deployment, ReplicaSet, pod, container, address, netns or veth left
    kubectl.run("delete", "deployment", "web").ok()
    assert_nothing_left(local_cluster, api, namespace, footprint, netns_before)
    wait_for(lambda: get_json(api, f"/apis/apps/v1/namespaces/{namespace}/replicasets")["items"] == [], 30, 0.2,
             what="the ReplicaSets garbage-collected")
    assert api.get(f"/apis/apps/v1/namespaces/{namespace}/deployments/web").status_code == 404


def test_two_container_pod_talks_over_localhost(local_cluster: LocalCluster, api: httpx.Client, namespace: str,
                                                kubectl: Kubectl) -> None:
    sidecar = busybox("fetch", "until wget -qO- http://localhost:80/ > /tmp/page; do sleep 0.2; done; "
                               "grep -o '<title>.*</title>' /tmp/page; sleep 3600")
    r = api.post(f"/apis/apps/v1/namespaces/{namespace}/deployments",
                 json=deployment("duo", [web_container(), sidecar]))
    assert r.status_code == 201, r.text
    (pod,) = wait_pods(api, namespace, "duo", n_ready(1), 60, "the two-container pod Ready", local_cluster)
    name = pod["metadata"]["name"]
    wait_for(lambda: f"<title>{PAGE_TITLE}</title>" in kubectl.run("logs", name, "-c", "fetch").stdout, 15, 0.2,
             what="the sidecar fetched the page from localhost")
    # both containers share the sandbox's network namespace: one IP, one localhost
    assert PAGE_TITLE in kubectl.run("exec", name, "-c", "fetch", "--", "wget", "-qO-", "http://127.0.0.1/").ok().stdout
    containers = pod_containers(local_cluster, pod["metadata"]["uid"])
    (sandbox,) = [c for c in containers if c.sandbox]
    assert {c.pod_sandbox_id for c in containers if not c.sandbox} == {sandbox.id}
    assert len(containers) == 3


def test_crashing_container_restarts_with_growing_back_off(local_cluster: LocalCluster, api: httpx.Client,
                                                           namespace: str) -> None:
    base = local_cluster.backoff_base
    r = api.post(f"/apis/apps/v1/namespaces/{namespace}/deployments",
                 json=deployment("crasher", [busybox("c", "echo attempt; exit 3")]))
    assert r.status_code == 201, r.text
    first_seen: dict[int, float] = {}
    reasons: set[str] = set()

    def restarted_4_times(pods: list[JSONDict]) -> bool:
        if len(pods) != 1:
            return False
        cs = cstatus(pods[0], "c")
        first_seen.setdefault(cs.get("restartCount", 0), time.monotonic())
        reasons.add(waiting_reason(pods[0], "c"))
        return cs.get("restartCount", 0) >= 4

    (pod,) = wait_pods(api, namespace, "crasher", restarted_4_times, 60, "4 restarts", local_cluster)
    cs = cstatus(pod, "c")
    assert cs["lastState"]["terminated"]["exitCode"] == 3 and cs["lastState"]["terminated"]["reason"] == "Error"
    assert "CrashLoopBackOff" in reasons
    # the kubelet waits 0, base, 2·base, 4·base after successive exits: each gap longer than the one before
    gaps = [first_seen[i + 1] - first_seen[i] for i in range(1, 4)]
    assert gaps[1] > 1.6 * base and gaps[2] > 3.2 * base and gaps[2] > gaps[1] > gaps[0] * 0.9, (gaps, first_seen)
    # the same pod restarts in place: the ReplicaSet does not replace it
    assert [p["metadata"]["uid"] for p in pods_of(api, namespace, "crasher")] == [pod["metadata"]["uid"]]
    backoff = [e for e in events_about(api, namespace, "Pod", pod["metadata"]["name"]) if e["reason"] == "BackOff"]
    assert backoff and backoff[0]["type"] == "Warning"
    assert "Back-off restarting failed container" in backoff[0]["message"]


def test_memory_hog_is_oom_killed(local_cluster: LocalCluster, api: httpx.Client, namespace: str) -> None:
    # the short sleep lets Docker's OOM watch attach first (see test_kubelet's OOM test)
    hog = busybox("hog", "sleep 0.5; dd if=/dev/zero of=/dev/null bs=64M count=1",
                  resources={"limits": {"memory": "20Mi"}})
    r = api.post(f"/apis/apps/v1/namespaces/{namespace}/deployments", json=deployment("hog", [hog]))
    assert r.status_code == 201, r.text

    def oom_killed(pods: list[JSONDict]) -> bool:
        cs = cstatus(pods[0], "hog") if len(pods) == 1 else {}
        return any((cs.get(key) or {}).get("terminated", {}).get("reason") == "OOMKilled"
                   for key in ("state", "lastState"))

    (pod,) = wait_pods(api, namespace, "hog", oom_killed, 40, "the hog OOMKilled", local_cluster)
    cs = cstatus(pod, "hog")
    term = next(cs[key]["terminated"] for key in ("state", "lastState") if "terminated" in (cs.get(key) or {}))
    assert term["reason"] == "OOMKilled" and term["exitCode"] == 137
    assert any(c.labels.get("io.kubernetes.container.name") == "hog"
               for c in pod_containers(local_cluster, pod["metadata"]["uid"]))


def test_failing_readiness_probe_keeps_pods_and_deployment_not_ready(
        local_cluster: LocalCluster, api: httpx.Client, namespace: str, kubectl: Kubectl) -> None:
    probe = {"httpGet": {"path": "/ready.html", "port": 80}, "periodSeconds": 1}
    r = api.post(f"/apis/apps/v1/namespaces/{namespace}/deployments",
                 json=deployment("picky", [web_container(readinessProbe=probe)], replicas=2))
    assert r.status_code == 201, r.text
    pods = wait_pods(api, namespace, "picky", lambda ps: len(ps) == 2 and all(running(p) for p in ps), 60,
                     "2 pods running", local_cluster)

    # the probe keeps failing (httpd answers 404): at least three failures of each pod recorded, never Ready
    def failures(name: str) -> int:
        return sum(e.get("count") or 1 for e in events_about(api, namespace, "Pod", name)
                   if e["reason"] == "Unhealthy" and "Readiness probe failed" in e["message"])

    for p in pods:
        wait_for(lambda p=p: failures(p["metadata"]["name"]) >= 3, 20, 0.2, what="three readiness failures")
    pods = pods_of(api, namespace, "picky")
    assert all(running(p) and condition(p, "Ready") == "False" and not cstatus(p, "httpd")["ready"] for p in pods)
    deploy = get_json(api, f"/apis/apps/v1/namespaces/{namespace}/deployments/picky")
    assert not deploy["status"].get("readyReplicas") and not deploy["status"].get("availableReplicas")
    available = next(c for c in deploy["status"]["conditions"] if c["type"] == "Available")
    assert available["status"] == "False"

    # the page appears in one pod: that pod (only) turns Ready, and the Deployment counts it
    fixed = pods[0]["metadata"]["name"]
    kubectl.run("exec", fixed, "--", "sh", "-c", "echo ok > /var/www/ready.html").ok()
    wait_pods(api, namespace, "picky", lambda ps: {p["metadata"]["name"] for p in ps if ready(p)} == {fixed}, 20,
              "the fixed pod Ready")
    wait_for(lambda: get_json(api, f"/apis/apps/v1/namespaces/{namespace}/deployments/picky")["status"]
             .get("readyReplicas") == 1, 20, 0.2, what="deployment readyReplicas 1")


def test_rollout_to_a_missing_image_ends_in_image_pull_back_off_while_old_pods_serve(
        local_cluster: LocalCluster, api: httpx.Client, namespace: str, kubectl: Kubectl) -> None:
    r = api.post(f"/apis/apps/v1/namespaces/{namespace}/deployments",
                 json=deployment("web", [web_container()], replicas=2))
    assert r.status_code == 201, r.text
    old = wait_pods(api, namespace, "web", n_ready(2, HTTPD), 60, "2 pods", local_cluster)
    kubectl.run("set", "image", "deployment/web", f"httpd={MISSING_IMAGE}").ok()
    seen: set[str] = set()

    def new_pod_backing_off(pods: list[JSONDict]) -> bool:
        new = [p for p in pods if p["spec"]["containers"][0]["image"] == MISSING_IMAGE]
        for p in new:
            seen.add(waiting_reason(p, "httpd"))
        return len(new) == 1 and {"ErrImagePull", "ImagePullBackOff"} <= seen

    pods = wait_pods(api, namespace, "web", new_pod_backing_off, 40, "ErrImagePull then ImagePullBackOff",
                     local_cluster)
    new = next(p for p in pods if p["spec"]["containers"][0]["image"] == MISSING_IMAGE)
    assert phase(new) == "Pending"
    message = (cstatus(new, "httpd")["state"]["waiting"].get("message") or "")
    assert MISSING_IMAGE in message, message
    # maxUnavailable 25% of 2 rounds down to 0: both old pods keep running and serving
    still = [p for p in pods if p["spec"]["containers"][0]["image"] == HTTPD]
    assert {p["metadata"]["uid"] for p in still} == {p["metadata"]["uid"] for p in old}
    assert all(ready(p) for p in still)
    for p in still:
        assert http_get(f"http://{p['status']['podIP']}/").status_code == 200
    wait_for(lambda: {"Pulling", "Failed", "BackOff"}
             <= {e["reason"] for e in events_about(api, namespace, "Pod", new["metadata"]["name"])}, 20, 0.2,
             what="Pulling, Failed and BackOff events")
    assert all(k.process.alive() for k in local_cluster.kubelets)
    done = kubectl.run("rollout", "status", "deployment/web", "--timeout=2s")
    assert done.returncode != 0  # not rolled out, and kubectl says so

    # rollout undo: the stuck pod goes, the old ones stay
    kubectl.run("rollout", "undo", "deployment/web").ok()
    wait_pods(api, namespace, "web", lambda ps: {p["metadata"]["uid"] for p in ps}
              == {p["metadata"]["uid"] for p in old} and all(ready(p) for p in ps), 30,
              "only the old pods again", local_cluster)


def test_kubelet_kill_9_and_restart_adopts_its_pods_without_duplicates(
        local_cluster: LocalCluster, api: httpx.Client, namespace: str) -> None:
    netns_before = named_netns()
    r = api.post(f"/apis/apps/v1/namespaces/{namespace}/deployments",
                 json=deployment("steady", [web_container(), busybox("side", "sleep 3600")], replicas=4))
    assert r.status_code == 201, r.text
    pods = wait_pods(api, namespace, "steady", n_ready(4), 60, "4 pods", local_cluster)
    footprint = Footprint()
    footprint.record(local_cluster, pods)
    victim = local_cluster.kubelet(pods[0]["spec"]["nodeName"])
    mine = [p for p in pods if p["spec"]["nodeName"] == victim.node]
    before = {p["metadata"]["uid"]: sorted(c.id for c in pod_containers(local_cluster, p["metadata"]["uid"]))
              for p in mine}
    assert all(len(ids) == 3 for ids in before.values())
    on_node_before = sorted(c.id for c in node_containers(local_cluster, victim.node))

    victim.kill()  # kill -9: no chance to clean anything up; the pods' containers keep running
    assert all(c.running for c in node_containers(local_cluster, victim.node) if c.id in on_node_before and c.sandbox)
    victim.start(api)

    def adopted() -> bool:
        workers = victim.debug()["workers"]
        return all((workers.get(uid) or {}).get("syncs", 0) >= 1 for uid in before)

    wait_for(adopted, 30, 0.1, what=f"{victim.node} synced its {len(before)} pods after the restart")
    after = {uid: sorted(c.id for c in pod_containers(local_cluster, uid)) for uid in before}
    assert after == before, "the restarted kubelet started duplicate containers"
    assert sorted(c.id for c in node_containers(local_cluster, victim.node)) == on_node_before
    # a restarted kubelet probes readiness afresh (upstream does too), so a pod may be not Ready for a moment
    pods_now = wait_pods(api, namespace, "steady", n_ready(4), 30, "the 4 pods Ready after the restart",
                         local_cluster)
    assert [p["metadata"]["uid"] for p in pods_now] == [p["metadata"]["uid"] for p in pods], "pods were replaced"
    assert sorted(c.id for c in node_containers(local_cluster, victim.node)) == on_node_before
    for p in pods_now:
        assert all(cs["restartCount"] == 0 for cs in p["status"]["containerStatuses"])
        assert p["status"]["podIP"] == footprint_ip(pods, p["metadata"]["uid"])
        assert http_get(f"http://{p['status']['podIP']}/").status_code == 200
    assert {ip for ip, node in footprint.ips.items() if node == victim.node} <= victim.leases()

    # the restarted kubelet still does its job: deleting the Deployment leaves nothing behind
    assert api.delete(f"/apis/apps/v1/namespaces/{namespace}/deployments/steady",
                      params={"propagationPolicy": "Foreground"}).status_code == 200
    assert_nothing_left(local_cluster, api, namespace, footprint, netns_before)


def footprint_ip(pods: list[JSONDict], uid: str) -> str:
    return next(p["status"]["podIP"] for p in pods if p["metadata"]["uid"] == uid)
