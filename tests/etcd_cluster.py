"""A multi-member etcd as real `etcd` processes on loopback ports (`--initial-cluster` of all members),
for tests that kill a member and bring it back. A member restarts on its own data dir and ports, so it
rejoins as itself and catches up from the leader.

`EtcdCluster` stands in wherever a single `tests.cluster.Etcd` is taken: its `endpoint` is the
comma-separated list of every member, which is what `--etcd-servers` wants."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import httpx

from apiserver.storage.etcd import KV, EtcdStorage
from tests.cluster import EtcdTLSFiles, Process, free_port, wait_for

# etcd's raft timing for members on one host, as compose --ha runs them (docker-compose.ha.yml). etcd's tuning
# guide (etcd.io/docs/v3.5/tuning) sets the heartbeat around the round trip between members and the election
# timeout at ten round trips or more, slow disks included; its defaults, 100/1,000 ms, suit machines on a local
# network. On loopback or a bridge the round trip is tens of microseconds: 50/500 ms keep ten heartbeats per
# election timeout and leave a late heartbeat 450 ms of slack (no election was seen in a minute of writes at a
# load average of 10). A dead leader is then replaced in 0.5-1 s instead of 1-2 s (bench/etcd_failover_bench.py).
HEARTBEAT_MS = 50
ELECTION_TIMEOUT_MS = 500


class EtcdMember:
    def __init__(self, workdir: Path, name: str, token: str, tls: EtcdTLSFiles | None = None,
                 election_timeout_ms: int = ELECTION_TIMEOUT_MS) -> None:
        self.name = name
        self.election_timeout_ms = election_timeout_ms
        self.tls = tls
        scheme = "https" if tls else "http"
        self.client_port, self.peer_port = free_port(), free_port()
        self.endpoint = f"{scheme}://127.0.0.1:{self.client_port}"
        self.peer_url = f"{scheme}://127.0.0.1:{self.peer_port}"
        self.data_dir = workdir / f"etcd-{name}"
        self.log_path = workdir / f"etcd-{name}.log"
        self.token = token
        self.initial_cluster = ""  # set by the cluster once every member's peer URL is known
        self.process: Process | None = None

    def start(self) -> None:
        etcd = shutil.which("etcd") or "/usr/bin/etcd"
        self.process = Process(f"etcd-{self.name}", [
            etcd, "--name", self.name, "--data-dir", str(self.data_dir),
            "--listen-client-urls", self.endpoint, "--advertise-client-urls", self.endpoint,
            "--listen-peer-urls", self.peer_url, "--initial-advertise-peer-urls", self.peer_url,
            "--initial-cluster", self.initial_cluster, "--initial-cluster-token", self.token,
            "--initial-cluster-state", "new",  # ignored once the data dir exists: a restart rejoins
            "--heartbeat-interval", str(self.election_timeout_ms // 10),
            "--election-timeout", str(self.election_timeout_ms), "--log-level", "warn",
            *(self.tls.member_flags(self.name) if self.tls else []),
        ], self.log_path)
        self.process.start()

    def alive(self) -> bool:
        return self.process is not None and self.process.alive()

    def healthy(self) -> bool:
        """The member answers and sees a leader (etcd's /health is false without quorum)."""
        if not self.alive():
            raise RuntimeError(f"etcd member {self.name} exited:\n{self.log_tail()}")
        try:
            with self.http() as client:
                r = client.get(f"{self.endpoint}/health")
            return r.status_code == 200 and r.json().get("health") == "true"
        except (httpx.HTTPError, ValueError):
            return False

    def http(self) -> httpx.Client:
        return self.tls.http() if self.tls else httpx.Client(timeout=2, trust_env=False)

    def status(self) -> dict[str, Any]:
        """The member's own /v3/maintenance/status: its member_id (header) and the leader it follows."""
        with self.http() as client:
            r = client.post(f"{self.endpoint}/v3/maintenance/status", json={})
        r.raise_for_status()
        return r.json()

    def member_id(self) -> str:
        return str(self.status()["header"]["member_id"])

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()

    def log_tail(self, lines: int = 40) -> str:
        return self.process.log_tail(lines) if self.process is not None else ""

    def read(self, prefix: str, revision: int = 0) -> tuple[dict[str, KV], int]:
        """This member's own view (a serializable read, not forwarded to the leader): keys under prefix at
        `revision` (0: the newest it has applied) and the revision it has applied."""

        async def read() -> tuple[dict[str, KV], int]:
            storage = EtcdStorage([self.endpoint], self.tls.storage_tls() if self.tls else None)
            try:
                kvs, revision_now, _ = await storage.list(prefix, revision=revision, serializable=True)
                return {kv.key: kv for kv in kvs}, revision_now
            finally:
                await storage.close()

        return asyncio.run(read())


class EtcdCluster:
    def __init__(self, workdir: Path, size: int = 3, *, tls: bool = False,
                 election_timeout_ms: int = ELECTION_TIMEOUT_MS) -> None:
        """`tls`: client and peer TLS, client certificates required on both (etcd's CA under workdir);
        `election_timeout_ms`: etcd's --election-timeout (the heartbeat a tenth of it)."""
        token = f"minik8s-test-{free_port()}"
        names = [f"m{i}" for i in range(size)]
        self.tls = EtcdTLSFiles(workdir, names) if tls else None
        self.members = [EtcdMember(workdir, name, token, self.tls, election_timeout_ms) for name in names]
        initial = ",".join(f"{m.name}={m.peer_url}" for m in self.members)
        for m in self.members:
            m.initial_cluster = initial

    @property
    def endpoints(self) -> list[str]:
        return [m.endpoint for m in self.members]

    @property
    def endpoint(self) -> str:
        return ",".join(self.endpoints)

    @property
    def apiserver_args(self) -> list[str]:
        return self.tls.apiserver_args() if self.tls else []

    def leader(self) -> int | None:
        """The index of the member every live member follows, None while they disagree or have none."""
        live = [m for m in self.members if m.alive()]
        leaders = {m.status().get("leader") for m in live}
        if len(leaders) != 1:
            return None
        ids = {m.member_id(): i for i, m in enumerate(self.members) if m.alive()}
        return ids.get(str(leaders.pop()))

    def make_leader(self, index: int) -> None:
        """Hand raft leadership to member `index` (etcd's move-leader, asked of the current leader)."""
        wait_for(lambda: self.leader() is not None, 30, 0.1, what="an etcd leader")
        leader = self.leader()
        if leader != index:
            assert leader is not None
            with self.members[leader].http() as client:
                client.post(f"{self.members[leader].endpoint}/v3/maintenance/transfer-leadership",
                            json={"targetID": self.members[index].member_id()}).raise_for_status()
        wait_for(lambda: self.leader() == index, 30, 0.1, what=f"{self.members[index].name} the etcd leader")

    def start(self) -> None:
        try:
            for m in self.members:
                m.start()
            wait_for(lambda: all(m.healthy() for m in self.members), 30, 0.1, what="etcd cluster healthy")
        except BaseException:
            self.stop()  # never leave a half-started cluster behind
            raise

    def restart_member(self, index: int) -> None:
        member = self.members[index]
        member.start()
        wait_for(member.healthy, 30, 0.1, what=f"etcd member {member.name} back")

    def stop(self) -> None:
        for m in self.members:
            m.stop()
