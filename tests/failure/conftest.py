"""Fixtures of the failure tests: each test gets a private cluster of real processes (etcd — one member or
three —, apiserver, controller-manager, scheduler, two kubelets on the host's Docker), since it kills parts
of it. Everything is removed at the end, also when the test or the start-up fails."""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator, Sequence
from types import FrameType, SimpleNamespace

import pytest

from tests.cluster import ApiServer, Etcd
from tests.controller_process import ControllerProcess
from tests.e2e.local_cluster import LocalCluster
from tests.etcd_cluster import EtcdCluster
from tests.scheduler_process import SchedulerProcess

# Fast failure detection for a test, upstream's semantics: Ready=Unknown after 5 s without a heartbeat
# (test kubelets renew their lease every second), the unreachable node's pods evicted 2 s later.
FAST_NODE_LIFECYCLE = ("--node-monitor-grace-period", "5", "--node-monitor-period", "1",
                       "--pod-eviction-timeout", "2")
APISERVER_ARGS = ("--etcd-compaction-interval", "0",  # the tests replay pod watches from before the failure
                  "--watch-bookmark-interval", "1")


class FailureCluster(LocalCluster):
    """LocalCluster with the failure tests' knobs: a three-member etcd behind `--etcd-servers` if asked, and
    handles to kill and restart its parts."""

    def __init__(self, *, etcd_members: int = 1, controller_args: Sequence[str] = (),
                 apiserver_args: Sequence[str] = APISERVER_ARGS) -> None:
        super().__init__("fail", controller_args=controller_args)
        self.etcd: Etcd | EtcdCluster = EtcdCluster(self.workdir, etcd_members) if etcd_members > 1 else self.etcd
        self.apiserver = ApiServer(self.workdir, self.etcd, *apiserver_args)  # type: ignore[arg-type]
        self.extra_processes: list[ApiServer | ControllerProcess | SchedulerProcess] = []  # stopped with the rest

    def second_apiserver(self, *extra_args: str) -> ApiServer:
        """Another apiserver on the same etcd (its endpoints in reverse order, so with three members it
        most likely talks to another one than the first apiserver)."""
        reversed_endpoints = SimpleNamespace(endpoint=",".join(self.etcd.endpoint.split(",")[::-1]))
        server = ApiServer(self.workdir, reversed_endpoints, *APISERVER_ARGS, *extra_args)  # type: ignore[arg-type]
        self.extra_processes.append(server)
        server.start()
        return server

    def start_control_plane_only(self) -> FailureCluster:
        """etcd and the apiserver, nothing else (tests of the API layer)."""
        try:
            self.etcd.start()
            self.apiserver.start()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for process in self.extra_processes:
            process.stop()
        super().stop()


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # pytest then tears the fixtures down: the cluster is removed, not orphaned


@pytest.fixture
def make_cluster() -> Iterator[Callable[..., FailureCluster]]:
    """make_cluster(etcd_members=1, ...) → a FailureCluster, not started; stopped after the test."""
    previous = signal.signal(signal.SIGTERM, _terminate)
    made: list[FailureCluster] = []

    def make(**kwargs: object) -> FailureCluster:
        cluster = FailureCluster(**kwargs)  # type: ignore[arg-type]
        made.append(cluster)
        return cluster

    try:
        yield make
    finally:
        for cluster in made:
            cluster.stop()
        signal.signal(signal.SIGTERM, previous)
