"""The docker-compose cluster in high-availability mode (hack/compose-up.sh --ha: docker-compose.ha.yml on top of
docker-compose.yml): a three-member etcd (etcd-1..3, each with its own data volume) behind an apiserver given
all three endpoints, and a standby controller-manager and scheduler (leader election on Leases in
kube-system, 4s/3s/500ms timings).

Against real containers: etcd answers with three members and one leader, each member behind client and peer
TLS taking only the apiserver's client certificate; each Lease names one holder, one
of that component's two containers; `docker kill` of the member at the head of --etcd-servers (the one
the apiserver talks to) and writes go on (a Deployment created then gets its pods Running); started again,
that member catches up (its own revision reaches a write made after its return, and it holds the key
written while it was down); `docker kill` of the controller-manager holding its Lease and the standby takes
the Lease, and a Deployment created after gets its pods. hack/compose-down.sh --purge leaves no container,
network, volume, pod, bridge or state behind.

Bring-up, the project's settings and the leftovers check are test_compose_cluster's (compose_cluster_up),
with a control-plane network (MINIK8S_HA_NET) no other network on this host overlaps.
"""

from __future__ import annotations

import base64
import contextlib
import ipaddress
import json
import os
import random
import ssl
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import httpx
import pytest
import yaml

from tests.cluster import REPO, assert_etcd_takes_only_the_apiserver, wait_for
from tests.e2e.test_road import n_ready, wait_pods
from tests.integration.test_compose_cluster import ComposeCluster, compose_cluster_up, docker_ids, leftovers
from tests.integration.test_compose_cluster import compose_images as compose_images  # the session's image build
from tests.manifests import deployment

pytestmark = pytest.mark.compose

HTTPD = "minik8s/httpd:1"
HA_FILES = ("docker-compose.yml", "docker-compose.ha.yml")
MEMBERS = ("etcd-1", "etcd-2", "etcd-3")
LEASE_FLAGS = ["--leader-elect=true", "--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s",
               "--leader-elect-retry-period=500ms"]
DEFAULT_NET = "172.29.244"  # docker-compose.ha.yml's default MINIK8S_HA_NET

JSONDict = dict[str, Any]


def free_ha_net() -> str:
    """The first three octets of a 172.29.x.0/24 that no route and no Docker network on this host overlaps."""
    routes = subprocess.run(["ip", "-4", "route", "show"], capture_output=True, text=True, check=True).stdout
    used = []
    for line in routes.splitlines():
        with contextlib.suppress(ValueError, IndexError):
            used.append(ipaddress.ip_network(line.split()[0], strict=False))
    if networks := docker_ids("network", "ls", "-q"):
        for net in json.loads(subprocess.run(["docker", "network", "inspect", *networks], capture_output=True,
                                             text=True, check=True, timeout=60).stdout):
            for config in (net.get("IPAM") or {}).get("Config") or []:
                with contextlib.suppress(ValueError, KeyError):
                    used.append(ipaddress.ip_network(config["Subnet"], strict=False))
    free = [f"172.29.{i}" for i in range(200, 255)
            if not any(ipaddress.ip_network(f"172.29.{i}.0/24").overlaps(u) for u in used if u.version == 4)]
    assert free, "no free 172.29.200-254.0/24 for the test cluster's control-plane network"
    return random.choice(free)


@pytest.fixture(scope="module")
def ha_cluster(compose_images: float) -> Iterator[ComposeCluster]:
    with compose_cluster_up("ha", "--ha", files=HA_FILES, extra_env={"MINIK8S_HA_NET": free_ha_net()}) as cluster:
        print(f"compose-up.sh --ha --no-build: {cluster.up_seconds:.1f}s to 2 Ready nodes")
        yield cluster


# -- helpers -----------------------------------------------------------------------------------------


def member_url(cluster: ComposeCluster, member: str) -> str:
    """A member's client URL: its fixed address on the control-plane network, reachable from the host."""
    return f"https://{cluster.env['MINIK8S_HA_NET']}.1{member[-1]}:2379"


def etcd_call(cluster: ComposeCluster, member: str, path: str, body: JSONDict | None = None) -> JSONDict:
    """One call to a member's own gRPC gateway (/v3/...): its answer, not the leader's. With the apiserver's
    etcd client certificate: etcd takes no other."""
    context = ssl.create_default_context(cafile=cluster.pki / "etcd" / "ca.crt")
    context.load_cert_chain(cluster.pki / "apiserver-etcd-client.crt", cluster.pki / "apiserver-etcd-client.key")
    r = httpx.post(f"{member_url(cluster, member)}{path}", json=body or {}, timeout=5, trust_env=False, verify=context)
    assert r.status_code == 200, (member, path, r.status_code, r.text)
    return r.json()


def member_revision(cluster: ComposeCluster, member: str) -> int:
    return int(etcd_call(cluster, member, "/v3/maintenance/status")["header"]["revision"])


def has_key(cluster: ComposeCluster, member: str, key: str) -> bool:
    """Is the key in this member's own store (a serializable read, answered without the leader)?"""
    found = etcd_call(cluster, member, "/v3/kv/range",
                      {"key": base64.b64encode(key.encode()).decode(), "serializable": True, "count_only": True})
    return int(found.get("count", 0)) == 1


def apiserver_etcd_member(cluster: ComposeCluster) -> str | None:
    """The member the apiserver's etcd client is connected to, while it has one established TCP connection to
    a :2379 (it opens one to another member when it moves on from one), from its container's network namespace."""
    members = apiserver_etcd_members(cluster)
    return members.pop() if len(members) == 1 else None


def apiserver_etcd_members(cluster: ComposeCluster) -> set[str]:
    """The members the apiserver's etcd client has an established TCP connection to."""
    pid = inspect(service_container(cluster, "apiserver"))["State"]["Pid"]
    remotes = set()
    for line in Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        address, port = fields[2].split(":")
        if fields[3] == "01" and int(port, 16) == 2379:  # ESTABLISHED
            remotes.add(str(ipaddress.IPv4Address(int(address, 16).to_bytes(4, "little"))))
    members = {member_url(cluster, m).split("//")[1].split(":")[0]: m for m in MEMBERS}
    return {members[r] for r in remotes if r in members}


def service_container(cluster: ComposeCluster, service: str) -> str:
    ids = docker_ids("ps", "-aq", "--filter", f"label=com.docker.compose.project={cluster.project}",
                     "--filter", f"label=com.docker.compose.service={service}")
    assert len(ids) == 1, (service, ids)
    return ids[0]


def inspect(container: str) -> JSONDict:
    done = subprocess.run(["docker", "inspect", container], capture_output=True, text=True, check=True, timeout=60)
    return json.loads(done.stdout)[0]


def lease_holder(api: httpx.Client, name: str) -> JSONDict:
    r = api.get(f"/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/{name}")
    assert r.status_code == 200, r.text
    return r.json()["spec"]


def holder_container(cluster: ComposeCluster, api: httpx.Client, lease: str, services: tuple[str, str]) -> str:
    """The service whose container holds the Lease (identities are <container hostname>_<uuid>)."""
    by_host = {inspect(service_container(cluster, s))["Config"]["Hostname"]: s for s in services}

    def holder() -> str | None:
        identity = lease_holder(api, lease).get("holderIdentity") or ""
        return by_host.get(identity.split("_", 1)[0])

    return str(wait_for(holder, 30, 0.2, what=f"Lease {lease} held by one of {services}"))


def create_with_retry(api: httpx.Client, path: str, body: JSONDict, timeout: float) -> JSONDict:
    """POST until it is in (a timed-out try may have landed: 409 then means it is there)."""
    name = body["metadata"]["name"]

    def attempt() -> JSONDict:
        r = api.post(path, json=body)
        if r.status_code == 409:
            r = api.get(f"{path}/{name}")
            assert r.status_code == 200, r.text
        assert r.status_code in (200, 201), f"{r.status_code} {r.text}"
        return r.json()

    return cast(JSONDict, wait_for(attempt, timeout, 0.1, what=f"POST {path} {name}"))


# -- tests -------------------------------------------------------------------------------------------


def test_the_ha_file_repeats_the_base_commands_with_ha_flags() -> None:
    """Compose merges no lists: docker-compose.ha.yml repeats the base commands; they must not drift apart."""
    base = yaml.safe_load((REPO / "docker-compose.yml").read_text())["services"]
    ha = yaml.safe_load((REPO / "docker-compose.ha.yml").read_text())["services"]
    endpoints = ",".join(f"https://${{MINIK8S_HA_NET:-{DEFAULT_NET}}}.1{m[-1]}:2379" for m in MEMBERS)
    want = [f"--etcd-servers={endpoints}" if a.startswith("--etcd-servers=") else a
            for a in base["apiserver"]["command"]]
    assert ha["apiserver"]["command"] == want
    for component in ("controller-manager", "scheduler"):
        assert ha[component]["command"] == base[component]["command"] + LEASE_FLAGS, component
        standby = ha[f"{component}-2"]
        assert standby["command"] == ha[component]["command"]
        for key in ("image", "init", "restart", "labels", "volumes", "depends_on"):
            assert standby[key] == base[component][key], (component, key)
    assert ha["etcd"] == {"scale": 0}
    # the pki service: the base file's command, and each member's certificates for its name and address
    assert ha["pki"]["command"] == base["pki"]["command"] + [
        f"--etcd-member={m}=${{MINIK8S_HA_NET:-{DEFAULT_NET}}}.1{m[-1]}" for m in MEMBERS]
    cluster = ",".join(f"{m}=https://${{MINIK8S_HA_NET:-{DEFAULT_NET}}}.1{m[-1]}:2380" for m in MEMBERS)
    # client and peer TLS as the base file's single etcd has them
    tls_flags = [f for f in base["etcd"]["command"] if f.startswith(("--client-cert-auth", "--trusted-ca-file",
                                                                      "--cert-file", "--key-file", "--peer-",
                                                                      "--listen-metrics-urls"))]
    assert len(tls_flags) == 9, tls_flags
    for member in MEMBERS:
        flags = ha[member]["command"]
        assert f"--name={member}" in flags and f"--initial-cluster={cluster}" in flags, member
        address = ha[member]["networks"]["default"]["ipv4_address"]
        assert f"--initial-advertise-peer-urls=https://{address}:2380" in flags, member
        assert f"--advertise-client-urls=https://{address}:2379" in flags, member
        assert [f for f in flags if f in tls_flags] == tls_flags, member
        pki_dir = f"${{MINIK8S_COMPOSE_OUT:-./_output/compose}}/pki/etcd/members/{member}"
        want = [f"{member}-data:/var/lib/etcd", f"{pki_dir}:/etc/kubernetes/pki/etcd:ro"]
        assert ha[member]["volumes"] == want, member


def test_three_etcd_members_and_one_holder_per_lease(ha_cluster: ComposeCluster) -> None:
    cluster = ha_cluster
    statuses = {m: etcd_call(cluster, m, "/v3/maintenance/status") for m in MEMBERS}
    assert len({s["header"]["cluster_id"] for s in statuses.values()}) == 1, statuses
    assert len({s["leader"] for s in statuses.values()}) == 1, statuses  # one leader, seen by all
    members = etcd_call(cluster, "etcd-2", "/v3/cluster/member/list")["members"]
    assert sorted((m["name"], m["clientURLs"][0]) for m in members) == [(m, member_url(cluster, m)) for m in MEMBERS]
    assert all(m["peerURLs"][0].startswith("https://") for m in members), members
    # each member refuses plain gRPC, TLS without a certificate and the cluster CA's kubernetes-admin
    # (issue 10, finding 7)
    for m in MEMBERS:
        assert_etcd_takes_only_the_apiserver(member_url(cluster, m), cluster.pki)

    # The single etcd of the base file is not there; the apiserver has all three members.
    assert not docker_ids("ps", "-aq", "--filter", f"label=com.docker.compose.project={cluster.project}",
                          "--filter", "label=com.docker.compose.service=etcd")
    flags = inspect(service_container(cluster, "apiserver"))["Config"]["Cmd"]
    assert f"--etcd-servers={','.join(member_url(cluster, m) for m in MEMBERS)}" in flags
    running = docker_ids("ps", "-q", "--filter", f"label=com.docker.compose.project={cluster.project}")
    # 3 etcd, apiserver, 2 controller-managers, 2 schedulers, the cluster DNS, kube-proxy, the local-path
    # provisioner, the metrics-server, the road server, 2 nodes
    assert len(running) == 15, running
    volumes = docker_ids("volume", "ls", "-q", "--filter", f"label=com.docker.compose.project={cluster.project}")
    assert sorted(volumes) == [f"{cluster.project}_{m}-data" for m in MEMBERS]

    with cluster.client() as api:
        for lease, services in (("kube-controller-manager", ("controller-manager", "controller-manager-2")),
                                ("kube-scheduler", ("scheduler", "scheduler-2"))):
            leader = holder_container(cluster, api, lease, services)
            spec = lease_holder(api, lease)
            assert spec["leaseDurationSeconds"] == 4, spec
            print(f"{lease}: held by {leader} ({spec['holderIdentity']})")


def test_writes_go_on_with_an_etcd_member_down_and_it_catches_up(ha_cluster: ComposeCluster) -> None:
    cluster = ha_cluster
    # The worst member to lose: the one the apiserver's connection is on, made the raft leader as well, so
    # the apiserver has to move and the cluster has to elect.
    victim = str(wait_for(lambda: apiserver_etcd_member(cluster), 30, 0.2, what="the apiserver's etcd connection"))
    others = [m for m in MEMBERS if m != victim]
    ids = {m: etcd_call(cluster, m, "/v3/maintenance/status")["header"]["member_id"] for m in MEMBERS}
    leader = next(m for m in MEMBERS if ids[m] == etcd_call(cluster, m, "/v3/maintenance/status")["leader"])
    if leader != victim:
        etcd_call(cluster, leader, "/v3/maintenance/transfer-leadership", {"targetID": ids[victim]})
    wait_for(lambda: all(etcd_call(cluster, m, "/v3/maintenance/status")["leader"] == ids[victim] for m in MEMBERS),
             30, 0.2, what=f"{victim} the raft leader")
    container = service_container(cluster, victim)
    with cluster.client() as api:
        subprocess.run(["docker", "kill", container], check=True, capture_output=True, timeout=60)
        killed = time.monotonic()
        assert inspect(container)["State"]["Running"] is False

        # The first write after the kill, retried (a write caught in the election answers 503) until in.
        created = create_with_retry(api, "/apis/apps/v1/namespaces/default/deployments",
                                    deployment("while-down", 2, HTTPD), 60)
        resumed = time.monotonic() - killed
        wait_pods(api, "default", "while-down", n_ready(2, HTTPD), 120, f"2 pods Running with {victim} down")
        running = time.monotonic() - killed
        assert inspect(container)["State"]["Running"] is False, f"{victim} came back by itself: nothing was proven"
        assert apiserver_etcd_members(cluster) and apiserver_etcd_members(cluster) <= set(others)
        key = f"/registry/deployments/default/{created['metadata']['name']}"
        assert all(has_key(cluster, m, key) for m in others)

        # Back: it catches up with what was written while it was down and after.
        subprocess.run(["docker", "start", container], check=True, capture_output=True, timeout=60)
        started = time.monotonic()
        after = create_with_retry(api, "/apis/apps/v1/namespaces/default/deployments", deployment("after", 1, HTTPD),
                                  60)
        target = int(after["metadata"]["resourceVersion"])  # the etcd revision of that write

        def caught_up() -> bool:
            return member_revision(cluster, victim) >= target

        wait_for(caught_up, 60, 0.2, what=f"{victim}'s revision at {target}")
        caught = time.monotonic() - started
        assert has_key(cluster, victim, key), f"{victim} lacks {key}, written while it was down"
        statuses = [etcd_call(cluster, m, "/v3/maintenance/status") for m in MEMBERS]
        assert len({s["leader"] for s in statuses}) == 1, statuses
        wait_pods(api, "default", "after", n_ready(1, HTTPD), 120, "the pod of a Deployment made after")
        for name in ("while-down", "after"):
            api.delete(f"/apis/apps/v1/namespaces/default/deployments/{name}")
    print(f"{victim} (the apiserver's member and the raft leader) killed: first write in after {resumed:.1f}s, "
          f"2 pods Running after {running:.1f}s; started again: caught up to revision {target} in {caught:.1f}s")


def test_the_standby_controller_manager_takes_over(ha_cluster: ComposeCluster) -> None:
    cluster = ha_cluster
    services = ("controller-manager", "controller-manager-2")
    with cluster.client() as api:
        leader = holder_container(cluster, api, "kube-controller-manager", services)
        standby = next(s for s in services if s != leader)
        before = lease_holder(api, "kube-controller-manager")
        container = service_container(cluster, leader)
        subprocess.run(["docker", "kill", container], check=True, capture_output=True, timeout=60)
        killed = time.monotonic()

        standby_host = inspect(service_container(cluster, standby))["Config"]["Hostname"]

        def taken_over() -> JSONDict | None:
            spec = lease_holder(api, "kube-controller-manager")
            return spec if (spec.get("holderIdentity") or "").startswith(f"{standby_host}_") else None

        after = cast(JSONDict, wait_for(taken_over, 60, 0.1, what=f"{standby} holding the Lease"))
        took = time.monotonic() - killed
        assert after["holderIdentity"] != before["holderIdentity"]
        assert after.get("leaseTransitions", 0) > before.get("leaseTransitions", 0), (before, after)
        assert inspect(container)["State"]["Running"] is False, f"{leader} came back by itself"

        # The new leader acts: a Deployment made now gets its ReplicaSet and pods.
        create_with_retry(api, "/apis/apps/v1/namespaces/default/deployments", deployment("after-takeover", 2, HTTPD),
                          30)
        wait_pods(api, "default", "after-takeover", n_ready(2, HTTPD), 120, "2 pods under the new leader")
        done = time.monotonic() - killed
        api.delete("/apis/apps/v1/namespaces/default/deployments/after-takeover")
    print(f"{leader} killed: {standby} holds the Lease after {took:.1f}s; a new Deployment's 2 pods Running "
          f"{done:.1f}s after the kill")


def test_compose_up_refuses_to_switch_a_running_project_out_of_ha(ha_cluster: ComposeCluster) -> None:
    """Without --ha, `up` would scale etcd-1..3 away as orphans and start an empty single etcd: refused."""
    cluster = ha_cluster
    project = f"label=com.docker.compose.project={cluster.project}"
    before = sorted(docker_ids("ps", "-q", "--filter", project))
    done = cluster.run(str(REPO / "hack" / "compose-up.sh"), "--no-build", timeout=120)
    assert done.returncode != 0
    assert f"project {cluster.project} runs in ha mode: run hack/compose-up.sh with --ha" in done.stderr, done.stderr
    assert sorted(docker_ids("ps", "-q", "--filter", project)) == before


def test_a_malformed_ha_net_is_refused() -> None:
    env = {**os.environ, "COMPOSE_PROJECT_NAME": "minik8s-ha-never", "MINIK8S_HA_NET": "172.29.1.0/24"}
    done = subprocess.run([str(REPO / "hack" / "compose-down.sh")], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode != 0
    assert "MINIK8S_HA_NET=172.29.1.0/24: want the first three octets of a /24" in done.stderr, done.stderr


def test_ha_down_leaves_nothing_behind(ha_cluster: ComposeCluster) -> None:
    cluster = ha_cluster
    start = time.monotonic()
    done = cluster.run(str(REPO / "hack" / "compose-down.sh"), "--purge", timeout=240)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    assert leftovers(cluster) == []
    assert not docker_ids("volume", "ls", "-q", "--filter", f"label=com.docker.compose.project={cluster.project}")
    assert not cluster.workdir.exists(), sorted(cluster.workdir.rglob("*"))
    print(f"compose-down.sh --purge (HA): {time.monotonic() - start:.1f}s")
