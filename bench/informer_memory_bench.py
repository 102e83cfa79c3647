"""Informer cache memory per Pod (issue 19): what one cached Pod costs, before and after the informer's
transform and compaction, in one run.

    python -m bench.informer_memory_bench [--pods 3000] [--rounds 3] [--quick] [--json PATH]

The pods are the density benchmark's (bench/density_bench.py), as its apiserver serves them once Running:
created by the ReplicaSet controller from a Deployment of 100 (ownerReference, pod-template-hash), defaulted,
bound to one of 100 nodes, their status written by the hollow kubelet (five conditions, IPs, a container
status), and two managedFields entries (kube-controller-manager's Update, the kubelet's status Update). Each
pod is one watch line (JSON bytes) fed through `decode_watch_line` and `Informer.handle_event`, the path every
watched object takes into a cache. Per variant, in a fresh informer:

- KB per pod: tracemalloc's traced memory after the pods are cached minus before, divided by the pods
  (the cache only: the lines themselves are allocated before);
- CPU µs per event, decode and cache (without tracemalloc), best of `--rounds` rounds alternated
  between the variants, and its ratio to the baseline's.

Variants: `as decoded` (the baseline: the informer before issue 19's work), `managedFields stripped`
(`strip_managed_fields`, the controller-manager's and scheduler's transform), `+ shared fields sets`
(compaction with string interning and sub-object sharing off), `+ interned strings` (sub-object sharing off),
`+ shared sub-objects` (equal sub-objects of cached pods are one object), `+ unique values left alone` (the values
of one pod alone, its uid, resourceVersion, name, IP and container ID, neither interned nor their parts entered in
the table of shared sub-objects), `+ split field dicts` (each cached model's fields in a dict whose keys are
shared with every cached model of its class: the informer as the controller-manager and the scheduler run it),
and `compacted, managedFields kept` (every other component's informers).
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
import tracemalloc
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import orjson

import machinery.informer as informer_module
from machinery.api.core_v1 import Pod
from machinery.api.meta import ObjectMeta
from machinery.client import decode_watch_line
from machinery.informer import (
    NAMESPACE_INDEX,
    NODE_NAME_INDEX,
    Informer,
    namespace_index,
    node_name_index,
    strip_managed_fields,
)

REPO = Path(__file__).resolve().parent.parent
OUTPUT = REPO / "_output" / "bench"
NODES = 100
PER_DEPLOYMENT = 100
PER_SECOND = 100  # the density benchmark's creation rate: pods of one second share their timestamps


def _fields(*names: str) -> dict[str, Any]:
    return {f"f:{n}": {} for n in names}


def pod_line(i: int) -> bytes:
    """The i-th pod of a density run, as one watch line (MODIFIED, Running)."""
    deployment = f"density-{i // PER_DEPLOYMENT:04d}"
    template_hash = f"{abs(hash(deployment)) % 16**10:010x}"
    rs = f"{deployment}-{template_hash}"
    rs_uid = str(uuid.UUID(int=i // PER_DEPLOYMENT + 1))
    uid = str(uuid.uuid4())
    node = i % NODES
    host_ip, pod_ip = f"100.96.{node // 250}.{node % 250 + 1}", f"100.64.{node}.{i // NODES % 250 + 2}"
    second = i // PER_SECOND
    ts = f"2026-11-24T17:{4 + second // 60:02d}:{second % 60:02d}Z"
    condition_types = ["PodScheduled", "PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready"]
    status_fields: dict[str, Any] = {
        "f:conditions": {f'k:{{"type":"{t}"}}': {".": {}, **_fields("lastTransitionTime", "status", "type")}
                         for t in condition_types[1:]},
        "f:containerStatuses": {}, "f:hostIP": {},
        "f:hostIPs": {".": {}, f'k:{{"ip":"{host_ip}"}}': {".": {}, "f:ip": {}}},
        "f:phase": {}, "f:podIP": {}, "f:podIPs": {".": {}, f'k:{{"ip":"{pod_ip}"}}': {".": {}, "f:ip": {}}},
        "f:startTime": {}}
    spec_fields: dict[str, Any] = {
        "f:containers": {".": {}, 'k:{"name":"pause"}': {
            ".": {}, **_fields("image", "imagePullPolicy", "name"),
            "f:resources": {"f:requests": {".": {}, **_fields("cpu", "memory")}},
            **_fields("terminationMessagePath", "terminationMessagePolicy")}},
        **_fields("dnsPolicy", "restartPolicy", "schedulerName", "securityContext", "terminationGracePeriodSeconds")}
    pod = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "generateName": f"{rs}-", "namespace": "density",
            "labels": {"app": deployment, "group": "density", "pod-template-hash": template_hash},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs, "uid": rs_uid,
                                 "controller": True, "blockOwnerDeletion": True}],
            "creationTimestamp": ts, "uid": uid, "generation": 2, "name": f"{rs}-{i:05x}",
            "managedFields": [
                {"manager": "hollow-kubelet", "operation": "Update", "apiVersion": "v1", "time": ts,
                 "fieldsType": "FieldsV1", "fieldsV1": {"f:status": status_fields}, "subresource": "status"},
                {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1", "time": ts,
                 "fieldsType": "FieldsV1", "fieldsV1": {
                     "f:metadata": {"f:generateName": {},
                                    "f:labels": {".": {}, **_fields("app", "group", "pod-template-hash")},
                                    "f:ownerReferences": {".": {}, f'k:{{"uid":"{rs_uid}"}}': {
                                        ".": {}, **_fields("apiVersion", "blockOwnerDeletion", "controller", "kind",
                                                           "name", "uid")}}},
                     "f:spec": spec_fields}}],
            "resourceVersion": str(1000 + 3 * i)},
        "spec": {
            "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.9",
                            "resources": {"requests": {"cpu": "10m", "memory": "10Mi"}},
                            "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
                            "imagePullPolicy": "IfNotPresent"}],
            "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
            "securityContext": {}, "schedulerName": "default-scheduler", "enableServiceLinks": True, "priority": 0,
            "preemptionPolicy": "PreemptLowerPriority", "nodeName": f"hollow-{node:03d}"},
        "status": {
            "phase": "Running",
            "conditions": [{"type": t, "status": "True", "lastTransitionTime": ts} for t in condition_types],
            "hostIP": host_ip, "hostIPs": [{"ip": host_ip}], "podIP": pod_ip, "podIPs": [{"ip": pod_ip}],
            "startTime": ts,
            "containerStatuses": [{
                "name": "pause", "state": {"running": {"startedAt": ts}}, "lastState": {}, "ready": True,
                "restartCount": 0, "image": "registry.k8s.io/pause:3.9",
                "imageID": "registry.k8s.io/pause:3.9@sha256:" + "0" * 64,
                "containerID": f"hollow://{uid[:8]}-pause", "started": True}],
            "qosClass": "Burstable"}}
    return orjson.dumps({"type": "MODIFIED", "object": pod})


class _AsDecoded(Informer[Any]):
    """The informer before issue 19: every object cached as decoded (or only transformed)."""

    def _prepare(self, obj: Any) -> Any:
        return obj if self._transform is None else self._transform(obj)


@contextmanager
def _compaction(*, interning: bool = True, sharing: bool = True, unique: bool = False,
                split: bool = False) -> Iterator[None]:
    """The informer's compaction with string interning and/or sub-object sharing turned off (the informer
    before those steps), its table of shared sub-objects empty (every variant starts from nothing). Without
    `unique`, the values of one object alone are interned and their parts entered in the table as any other
    (the informer before that step: only an ObjectMeta, by its resourceVersion, was kept out of the table). Without
    `split`, cached models keep the `__dict__` pydantic built (the informer before that step)."""
    saved = (informer_module._intern, informer_module._share_parts, informer_module._UNIQUE_FIELDS,
             informer_module._intern_unique, informer_module._split_fields)
    if not interning:
        informer_module._intern = lambda s: s
    informer_module._share_parts = sharing
    if not unique:
        informer_module._UNIQUE_FIELDS = {ObjectMeta: frozenset({"resource_version"})}
        informer_module._intern_unique = True
    informer_module._split_fields = split
    informer_module._SHARED.clear()
    try:
        yield
    finally:
        (informer_module._intern, informer_module._share_parts, informer_module._UNIQUE_FIELDS,
         informer_module._intern_unique, informer_module._split_fields) = saved
        informer_module._SHARED.clear()


VARIANTS: dict[str, tuple[Callable[[], Informer[Any]], Callable[[], Any]]] = {
    "as decoded": (lambda: _AsDecoded(cast(Any, None), Pod), _compaction),
    "managedFields stripped": (lambda: _AsDecoded(cast(Any, None), Pod, transform=strip_managed_fields),
                               _compaction),
    "+ shared fields sets": (lambda: Informer(cast(Any, None), Pod, transform=strip_managed_fields),
                             lambda: _compaction(interning=False, sharing=False)),
    "+ interned strings": (lambda: Informer(cast(Any, None), Pod, transform=strip_managed_fields),
                           lambda: _compaction(sharing=False)),
    "+ shared sub-objects": (lambda: Informer(cast(Any, None), Pod, transform=strip_managed_fields), _compaction),
    "+ unique values left alone": (lambda: Informer(cast(Any, None), Pod, transform=strip_managed_fields),
                                   lambda: _compaction(unique=True)),
    "+ split field dicts": (lambda: Informer(cast(Any, None), Pod, transform=strip_managed_fields),
                            lambda: _compaction(unique=True, split=True)),
    "compacted, managedFields kept": (lambda: Informer(cast(Any, None), Pod),
                                      lambda: _compaction(unique=True, split=True)),
}
BASELINE, FULL = "as decoded", "+ split field dicts"


def _index(informer: Informer[Any]) -> None:
    # the indexes the controller-manager's and the scheduler's pod informers keep
    informer.add_indexers({NAMESPACE_INDEX: namespace_index, NODE_NAME_INDEX: node_name_index})


def fill(informer: Informer[Any], lines: list[bytes]) -> None:
    for line in lines:
        event = decode_watch_line(line, Pod)
        assert event is not None
        informer.handle_event(event.type, event.object, event.resource_version)


def kb_per_pod(variant: str, lines: list[bytes]) -> float:
    make, context = VARIANTS[variant]
    with context():
        gc.collect()
        tracemalloc.start()
        try:
            informer = make()
            _index(informer)
            before = tracemalloc.get_traced_memory()[0]
            fill(informer, lines)
            gc.collect()
            after = tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()
    assert len(informer.store) == len(lines)
    del informer
    return (after - before) / len(lines) / 1024


def us_per_event(variant: str, lines: list[bytes]) -> float:
    make, context = VARIANTS[variant]
    with context():
        informer = make()
        _index(informer)
        gc.collect()
        started = time.process_time()
        fill(informer, lines)
        spent = time.process_time() - started
    del informer
    return spent / len(lines) * 1e6


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="informer_memory_bench", description=__doc__.split("\n\n", 1)[0])
    p.add_argument("--pods", type=int, default=3000, help="pods cached per variant (default %(default)s)")
    p.add_argument("--rounds", type=int, default=3, help="CPU rounds, variants alternated (default %(default)s)")
    p.add_argument("--quick", action="store_true", help="300 pods, 1 round (a smoke run)")
    p.add_argument("--json", type=Path, default=OUTPUT / "informer_memory.json")
    args = p.parse_args(argv)
    if args.quick:
        args.pods, args.rounds = 300, 1
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    lines = [pod_line(i) for i in range(args.pods)]
    out: dict[str, Any] = {"pods": args.pods, "rounds": args.rounds, "line_bytes": sum(map(len, lines)) // len(lines),
                           "baseline": BASELINE, "full": FULL, "variants": {}}
    for name in VARIANTS:
        out["variants"][name] = {"kb_per_pod": round(kb_per_pod(name, lines), 2)}
    cpu: dict[str, list[float]] = {name: [] for name in VARIANTS}
    for r in range(args.rounds):  # A B .. B A: alternated, so load drifts reach every variant alike
        for name in (VARIANTS if r % 2 == 0 else reversed(list(VARIANTS))):
            cpu[name].append(us_per_event(name, lines))
    base_kb = out["variants"][BASELINE]["kb_per_pod"]
    base_us = min(cpu[BASELINE])
    print(f"{args.pods} density pods in one informer cache (watch line {out['line_bytes']} bytes); baseline "
          f"{BASELINE!r}, same run:")
    for name, v in out["variants"].items():
        v["us_per_event"] = round(min(cpu[name]), 1)
        v["kb_ratio"] = round(v["kb_per_pod"] / base_kb, 3)
        v["cpu_ratio"] = round(v["us_per_event"] / base_us, 3)
        print(f"  {name:<32} {v['kb_per_pod']:6.2f} KB/pod ({v['kb_ratio']:.2f}x)   "
              f"{v['us_per_event']:6.1f} µs/event ({v['cpu_ratio']:.2f}x)")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(out, indent=1))
    print(f"JSON: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
