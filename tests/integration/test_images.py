"""The images pods run (hack/images.sh, hack/guestbook-images.sh) stop on SIGTERM, as the kubelet's graceful stop
expects.

A process that is PID 1 of its namespace gets no default action for a signal it has no handler for: busybox
httpd as PID 1 ignored SIGTERM, so every pod of minik8s/httpd:1 waited out its whole grace period on delete
and on each step of a rollout. `docker stop` sends SIGTERM and, after its timeout, SIGKILL: an exit by
SIGTERM (143, or 0 from a handler) and not by SIGKILL (137) is the proof, with no clock in the test.
"""

from __future__ import annotations

import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from tests.cluster import wait_for
from tests.node_process import GUESTBOOK, HTTPD, PAUSE, REDIS, ensure_guestbook_images, ensure_images

LABEL = "io.minik8s.test"
RUN = f"images-{uuid.uuid4().hex[:6]}"  # the label value of this run's containers


def handles_sigterm(pid: int) -> bool:
    """Is process pid past the point where a SIGTERM would be lost: it catches SIGTERM (SigCgt in
    /proc/PID/status), or it has started its child (tini sets up its signal forwarding before it forks)?"""
    status = Path(f"/proc/{pid}/status").read_text().splitlines()
    if any(line.startswith("SigCgt:") and int(line.split()[1], 16) & (1 << (signal.SIGTERM - 1)) for line in status):
        return True
    return bool(Path(f"/proc/{pid}/task/{pid}/children").read_text().strip())


@pytest.fixture(scope="module")
def client() -> Iterator[docker.DockerClient]:
    try:
        client = docker.from_env()
        client.ping()
    except Exception as e:
        pytest.skip(f"no Docker engine: {e}")
    ensure_images()
    ensure_guestbook_images()
    yield client
    for container in client.containers.list(all=True, filters={"label": f"{LABEL}={RUN}"}):
        container.remove(force=True)
    client.close()


@pytest.mark.parametrize("image", [PAUSE, HTTPD, REDIS, GUESTBOOK])
def test_the_image_as_it_starts_by_default_exits_on_sigterm(client: docker.DockerClient, image: str) -> None:
    container = client.containers.run(image, detach=True, labels={LABEL: RUN})
    try:
        container.reload()
        assert container.status == "running", f"{image} did not stay up: {container.logs()!r}"
        # a SIGTERM that comes before PID 1 has installed its handler (tini still starting) is ignored, as for
        # any image: wait until PID 1 catches it or has forked its child, then stop it
        pid = container.attrs["State"]["Pid"]
        wait_for(lambda: handles_sigterm(pid), 30, 0.05, what=f"{image}'s PID 1 handling SIGTERM")
        start = time.monotonic()
        container.stop(timeout=60)  # SIGTERM, then SIGKILL after 60 s
        took = time.monotonic() - start
        container.reload()
        code = container.attrs["State"]["ExitCode"]
        assert code in (0, 143), f"{image} ignored SIGTERM and was killed (exit {code}): its PID 1 needs a handler"
        print(f"{image}: stopped by SIGTERM in {took:.2f}s (exit {code})")  # the figure, not an assertion
    finally:
        container.remove(force=True)
