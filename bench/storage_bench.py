"""What pod volumes and dynamic claims cost at pod start (issue 12), on one cluster of real processes:
etcd, the apiserver, the controller-manager (persistentvolume-binder, pvc-protection, pv-protection), the
scheduler, one kubelet on this host's Docker and the local-path provisioner (after its install).

    python -m bench.storage_bench [--quick] [--reps N] [--keep]

(a) volumes: a busybox pod given to the node (spec.nodeName) with 2 configMap volumes, 1 secret volume (a
    tmpfs) and a persistentVolumeClaim (a claim bound beforehand to a hostPath volume), against the same pod
    without volumes, alternating (each first every other time), N times each: creation → Running as a watch
    sees it. The ratio of the medians is the figure (target ≤ 1.3x); the ratio of the fastest of each is in
    the JSON too (steadier on a loaded machine).
(b) claim → Running: a claim of the default class local-path (WaitForFirstConsumer) and a pod using it are
    created together on the warm node (images present, pods ran there): the scheduler picks the node and
    writes selected-node, the provisioner's helper pod makes the directory, the volume is created and
    bound, the kubelet mounts it. Claim creation → claim Bound and → pod Running, N times (target: Running
    p50 ≤ 2 s). Claims and volumes are deleted between repetitions (untimed).

Writes _output/bench/storage.json; bench.report reads it.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from tests.cluster import REPO, ApiServer, Etcd, make_workdir, wait_for
from tests.controller_process import ControllerProcess
from tests.local_path_process import ProvisionerProcess, install
from tests.node_process import BUSYBOX, KubeletProcess, cleanup, ensure_images, free_pod_cidrs
from tests.scheduler_process import SchedulerProcess

OUTPUT = REPO / "_output" / "bench"
JSONDict = dict[str, Any]
TARGET_RATIO = 1.3
TARGET_CLAIM_S = 2.0


@contextmanager
def cluster(workdir: Path) -> Iterator[tuple[httpx.Client, str, Path]]:
    etcd = Etcd(workdir)
    etcd.start()
    apiserver = ApiServer(workdir, etcd, "--etcd-compaction-interval", "0")
    started: list[Any] = []
    kubelet = None
    try:
        apiserver.start()
        api = httpx.Client(base_url=apiserver.url, timeout=30)
        base = workdir / "local-path"
        install(apiserver.url, base)
        for process in (ControllerProcess(workdir, apiserver.url, ["persistentvolume-binder", "pvc-protection",
                                                                    "pv-protection"]),
                        SchedulerProcess(workdir, apiserver.url)):
            process.start()
            started.append(process)
        kubelet = KubeletProcess(workdir, apiserver, f"sb-{uuid.uuid4().hex[:6]}", free_pod_cidrs(1)[0])
        kubelet.start(api)
        provisioner = ProvisionerProcess(workdir, apiserver.url, base)
        provisioner.start()
        started.append(provisioner)
        yield api, kubelet.node, base
    finally:
        for process in started:
            process.stop()
        if kubelet is not None:
            cleanup([kubelet])
        apiserver.stop()
        etcd.stop()


def running(pod: JSONDict) -> bool:
    status = pod.get("status") or {}
    statuses = status.get("containerStatuses") or []
    return status.get("phase") == "Running" and bool(statuses) and all("running" in (c.get("state") or {})
                                                                       for c in statuses)


def watch_until(api: httpx.Client, path: str, name: str, since: str, done: Any, timeout: float = 120) -> float:
    """perf_counter() when the watch of `path` from `since` first shows `name` with done(obj)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        params = {"watch": "true", "resourceVersion": since, "fieldSelector": f"metadata.name={name}",
                  "timeoutSeconds": str(int(timeout))}
        with api.stream("GET", path, params=params, timeout=timeout) as r:
            for line in r.iter_lines():
                if not line:
                    continue
                event = json.loads(line)
                obj = event.get("object") or {}
                since = (obj.get("metadata") or {}).get("resourceVersion") or since
                if event.get("type") in ("ADDED", "MODIFIED") and done(obj):
                    return time.perf_counter()
    raise TimeoutError(f"{path}/{name} not done after {timeout}s")


def create(api: httpx.Client, path: str, body: JSONDict) -> JSONDict:
    r = api.post(path, json=body)
    r.raise_for_status()
    return r.json()  # type: ignore[no-any-return]


def delete_and_wait(api: httpx.Client, path: str, timeout: float = 120) -> None:
    api.delete(path, params={"gracePeriodSeconds": 0})
    wait_for(lambda: api.get(path).status_code == 404, timeout, interval=0.1, what=f"{path} gone")


def pod_body(name: str, node: str | None, volumes: bool, claim: str) -> JSONDict:
    container: JSONDict = {"name": "c", "image": BUSYBOX, "command": ["sleep", "3600"]}
    spec: JSONDict = {"terminationGracePeriodSeconds": 0, "containers": [container]}
    if node:
        spec["nodeName"] = node
    if volumes:
        container["volumeMounts"] = [{"name": "cfg-a", "mountPath": "/etc/a"}, {"name": "cfg-b", "mountPath": "/etc/b"},
                                     {"name": "secret", "mountPath": "/etc/secret"},
                                     {"name": "data", "mountPath": "/data"}]
        spec["volumes"] = [{"name": "cfg-a", "configMap": {"name": "cfg-a"}},
                           {"name": "cfg-b", "configMap": {"name": "cfg-b"}},
                           {"name": "secret", "secret": {"secretName": "secret"}},
                           {"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def summary(values: list[float]) -> JSONDict:
    if not values:
        return {"n": 0}
    ordered = sorted(values)
    return {"n": len(values), "p50": round(statistics.median(values), 4),
            "p90": round(ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))], 4),
            "min": round(ordered[0], 4), "max": round(ordered[-1], 4)}


def bench_volumes(api: httpx.Client, node: str, workdir: Path, reps: int) -> JSONDict:
    ns = f"sbv-{uuid.uuid4().hex[:6]}"
    create(api, "/api/v1/namespaces", {"metadata": {"name": ns}})
    for name in ("cfg-a", "cfg-b"):
        create(api, f"/api/v1/namespaces/{ns}/configmaps", {"metadata": {"name": name},
                                                            "data": {"app.conf": "x=1\n", "other": "y"}})
    create(api, f"/api/v1/namespaces/{ns}/secrets", {"metadata": {"name": "secret"},
                                                     "stringData": {"password": "p", "user": "u"}})
    directory = workdir / "static-volume"
    directory.mkdir()
    pv = f"sbv-{ns}"
    create(api, "/api/v1/persistentvolumes", {"metadata": {"name": pv}, "spec": {
        "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "",
        "hostPath": {"path": str(directory)}}})
    create(api, f"/api/v1/namespaces/{ns}/persistentvolumeclaims", {"metadata": {"name": "data"}, "spec": {
        "accessModes": ["ReadWriteOnce"], "storageClassName": "", "volumeName": pv,
        "resources": {"requests": {"storage": "1Gi"}}}})
    wait_for(lambda: (api.get(f"/api/v1/namespaces/{ns}/persistentvolumeclaims/data").json().get("status") or {})
             .get("phase") == "Bound", 60, what="the static claim Bound")
    times: dict[str, list[float]] = {"plain": [], "volumes": []}
    pods = f"/api/v1/namespaces/{ns}/pods"
    for i in range(reps + 1):  # the first pair warms the node (image, cgroups) and is not counted
        for kind in (("plain", "volumes") if i % 2 == 0 else ("volumes", "plain")):  # neither always first
            name = f"{kind}-{i}"
            start = time.perf_counter()
            made = create(api, pods, pod_body(name, node, kind == "volumes", "data"))
            seen = watch_until(api, pods, name, made["metadata"]["resourceVersion"], running)
            if i:
                times[kind].append(seen - start)
            delete_and_wait(api, f"{pods}/{name}")
    plain, volumes = summary(times["plain"]), summary(times["volumes"])
    ratio = round(volumes["p50"] / plain["p50"], 3) if plain.get("p50") else None
    # the fastest of each: what is left of the volumes' cost when the loaded machine lets both run undisturbed
    ratio_min = round(volumes["min"] / plain["min"], 3) if plain.get("min") else None
    return {"plain_s": plain, "volumes_s": volumes, "ratio": ratio, "ratio_min": ratio_min, "reps": reps,
            "volumes": "2 configMap, 1 secret, 1 persistentVolumeClaim (hostPath, bound beforehand)"}


def bench_claims(api: httpx.Client, reps: int) -> JSONDict:
    ns = f"sbc-{uuid.uuid4().hex[:6]}"
    create(api, "/api/v1/namespaces", {"metadata": {"name": ns}})
    claims, pods = f"/api/v1/namespaces/{ns}/persistentvolumeclaims", f"/api/v1/namespaces/{ns}/pods"
    bound: list[float] = []
    started: list[float] = []
    for i in range(reps + 1):  # the first one warms the helper image and the provisioner's paths: not counted
        name = f"c-{i}"
        start = time.perf_counter()
        claim = create(api, claims, {"metadata": {"name": name}, "spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "16Mi"}}}})
        body = pod_body(name, None, False, name)
        body["spec"]["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
        body["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": name}}]
        made = create(api, pods, body)
        # each watch replays from the object's creation, so the second misses nothing while the first waits
        t_bound = watch_until(api, claims, name, claim["metadata"]["resourceVersion"],
                              lambda o: (o.get("status") or {}).get("phase") == "Bound")
        t_running = watch_until(api, pods, name, made["metadata"]["resourceVersion"], running)
        if i:
            bound.append(t_bound - start)
            started.append(t_running - start)
        delete_and_wait(api, f"{pods}/{name}")
        delete_and_wait(api, f"{claims}/{name}")
        delete_and_wait(api, f"/api/v1/persistentvolumes/pvc-{claim['metadata']['uid']}")  # gone already, or now
    return {"bound_s": summary(bound), "running_s": summary(started), "reps": reps}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.storage_bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="3 repetitions")
    p.add_argument("--reps", type=int, default=None, help="repetitions of each measurement (default 15)")
    p.add_argument("--output", default=str(OUTPUT / "storage.json"))
    p.add_argument("--keep", action="store_true", help="keep the work directory")
    args = p.parse_args(argv)
    reps = args.reps or (3 if args.quick else 15)
    ensure_images()
    workdir = make_workdir("minik8s-storage-bench-")
    try:
        with cluster(workdir) as (api, node, _base):
            volumes = bench_volumes(api, node, workdir, reps)
            claims = bench_claims(api, reps)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    result = {"volumes": volumes, "claims": claims,
              "targets": {"volumes_ratio": TARGET_RATIO, "claim_to_running_p50_s": TARGET_CLAIM_S}}
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(result, indent=2) + "\n")
    ratio = volumes["ratio"]
    running_p50 = claims["running_s"].get("p50")
    print(f"(a) pod start, 3 configMap/secret volumes + a PVC: p50 {volumes['volumes_s'].get('p50')} s vs "
          f"{volumes['plain_s'].get('p50')} s without volumes: {ratio}x, fastest of each "
          f"{volumes['ratio_min']}x (target ≤ {TARGET_RATIO}x: "
          f"{'met' if ratio is not None and ratio <= TARGET_RATIO else 'MISSED'})")
    print(f"(b) claim created → Bound p50 {claims['bound_s'].get('p50')} s, → pod Running p50 {running_p50} s "
          f"(target ≤ {TARGET_CLAIM_S} s: "
          f"{'met' if running_p50 is not None and running_p50 <= TARGET_CLAIM_S else 'MISSED'})")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
