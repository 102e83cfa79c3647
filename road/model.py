"""Spans and Events → the road of an object: which object each span is about, its steps, the watch deliveries
joined to the writes they carry, SLO marks, and the tree of owned objects (pure logic, no I/O).

The join follows the tracing contract (issue 15, TRACING-CONTRACT.md):

- a span is about the object named by its `k8s.object.uid` attributes; a span without them (the
  apiserver's `apiserver.etcd` step, which road/otlp.py made of an event of the request's span, the kubelet's
  `kubelet.run_pod_sandbox`) is about the object of its nearest
  ancestor that names one. A batch exporter sends children before their parents (a child ends first), so
  a span whose parent has not come yet waits, bounded, until it does;
- reads (`apiserver.request` with verb get, list or watch) are no steps, nor their children;
- `informer.event` (a watch delivery to a component) is joined to the write whose `k8s.etcd.revision` is the
  event's `k8s.object.resource_version` on the same object: its delay is from the etcd commit (the write's
  `apiserver.etcd` child, else the request's end) to the delivery;
- a mutating API call is marked against upstream's SLO (≤ 1 s); a Pod's first `kubelet.status` with phase
  Running against pod start-up (≤ 5 s from the Pod's create);
- the road of an object holds the roads of the objects it owns (controller ownerReferences from the
  informers, `k8s.owner.uid` from the spans): Deployment → ReplicaSets → Pods.

Memory is bounded, oldest first: at most `max_steps` spans and Events per object (the oldest received is
dropped), `max_objects` objects (the one updated longest ago is dropped with its road), `max_pending`
spans waiting for their parent and `max_index` span ids remembered for the ancestor lookup.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from machinery.api.road_v1alpha1 import GROUP_VERSION
from machinery.timeutil import format_rfc3339_micro, parse_rfc3339

Obj = dict[str, Any]

READ_VERBS = frozenset({"get", "list", "watch"})
MUTATING_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})
# upstream's SLOs (sig-scalability/slos): mutating API call latency ≤ 1 s (p99), pod start-up ≤ 5 s (p99)
API_CALL_SLO = ("mutating-api-call-latency", 1.0)
POD_STARTUP_SLO = ("pod-startup-latency", 5.0)
OBJECT_PREFIX = "k8s.object."
OWNER_PREFIX = "k8s.owner."
IGNORED = ""  # in the span index: a span that is no step (a read), nor are its children
SETTLE_QUIET = 0.5  # a settled object's road is Done after this long without a new step
QUIET_DONE = 10.0  # any road is Done after this long without a new step


@dataclass(slots=True)
class Span:
    """One finished span as received over OTLP (times in seconds since the epoch)."""

    trace_id: str
    span_id: str
    parent_id: str
    name: str
    kind: str
    start: float
    end: float
    attrs: dict[str, Any] = field(default_factory=dict)
    resource: dict[str, Any] = field(default_factory=dict)
    status: str = "unset"  # unset | ok | error
    received: float = 0.0


@dataclass(slots=True)
class ObjectRef:
    uid: str
    kind: str = ""
    api_version: str = ""
    namespace: str = ""
    name: str = ""
    owner_uid: str = ""
    owner_kind: str = ""
    owner_name: str = ""
    created: float | None = None  # metadata.creationTimestamp, when an informer saw the object

    def as_dict(self) -> Obj:
        out: Obj = {"apiVersion": self.api_version, "kind": self.kind, "name": self.name, "uid": self.uid}
        if self.namespace:
            out["namespace"] = self.namespace
        return out


@dataclass(slots=True)
class EventStep:
    uid: str
    time: float
    lane: str
    reason: str
    type: str
    message: str
    count: int
    received: float


@dataclass
class _Record:
    ref: ObjectRef
    spans: OrderedDict[str, Span] = field(default_factory=OrderedDict)
    events: OrderedDict[str, EventStep] = field(default_factory=OrderedDict)
    children: set[str] = field(default_factory=set)
    live: Obj | None = None  # the object as an informer has it now (None: not watched, or gone)
    updated: float = 0.0  # when a step last came (time.time())


def object_ref_of(attrs: dict[str, Any]) -> ObjectRef | None:
    uid = attrs.get("k8s.object.uid")
    if not uid:
        return None
    return ObjectRef(str(uid), str(attrs.get("k8s.object.kind") or ""), str(attrs.get("k8s.object.api_version") or ""),
                     str(attrs.get("k8s.object.namespace") or ""), str(attrs.get("k8s.object.name") or ""),
                     str(attrs.get("k8s.owner.uid") or ""), str(attrs.get("k8s.owner.kind") or ""),
                     str(attrs.get("k8s.owner.name") or ""))


def object_ref_from_wire(obj: Obj) -> ObjectRef | None:
    """The ref of an API object (a dict as the API serves it), its controller owner included."""
    meta = obj.get("metadata") or {}
    uid = meta.get("uid")
    if not uid:
        return None
    owner = next((o for o in meta.get("ownerReferences") or () if o.get("controller")), None) or {}
    created = parse_rfc3339(meta.get("creationTimestamp"))
    return ObjectRef(uid, obj.get("kind") or "", obj.get("apiVersion") or "", meta.get("namespace") or "",
                     meta.get("name") or "", owner.get("uid") or "", owner.get("kind") or "", owner.get("name") or "",
                     created.timestamp() if created else None)


class Store:
    """Spans and Events by object, bounded; `version` grows with every change (the Road's resourceVersion)."""

    def __init__(self, *, max_objects: int = 2000, max_steps: int = 500, max_pending: int = 10_000,
                 max_index: int = 200_000, clock: Callable[[], float] = time.time) -> None:
        self.max_objects = max_objects
        self.max_steps = max_steps
        self.max_pending = max_pending
        self.max_index = max_index
        self.clock = clock
        self.version = 0
        self._objects: OrderedDict[str, _Record] = OrderedDict()
        self._names: dict[tuple[str, str, str], str] = {}  # (kind, namespace, name) -> uid
        self._index: OrderedDict[str, str] = OrderedDict()  # span id -> object uid (IGNORED: no step)
        self._pending: OrderedDict[str, list[Span]] = OrderedDict()  # parent span id -> spans waiting
        self._pending_count = 0
        self.evicted_objects = 0
        self.evicted_steps = 0
        self.dropped_pending = 0

    # -- objects ---------------------------------------------------------------------------------------

    def _record(self, ref: ObjectRef) -> _Record:
        rec = self._objects.get(ref.uid)
        if rec is None:
            rec = self._objects[ref.uid] = _Record(ref)
            while len(self._objects) > self.max_objects:
                uid, old = self._objects.popitem(last=False)
                self.evicted_objects += 1
                key = (old.ref.kind, old.ref.namespace, old.ref.name)
                if self._names.get(key) == uid:
                    del self._names[key]
        else:
            known = rec.ref
            for name in ("kind", "api_version", "namespace", "name", "owner_uid", "owner_kind", "owner_name"):
                value = getattr(ref, name)
                if value and not getattr(known, name):
                    setattr(known, name, value)
            if ref.created is not None:
                known.created = ref.created
        r = rec.ref
        if r.kind and r.name:
            self._names[(r.kind, r.namespace, r.name)] = r.uid
        if r.owner_uid:
            owner = self._objects.get(r.owner_uid)
            if owner is None:
                owner = self._record(ObjectRef(r.owner_uid, r.owner_kind, "", r.namespace, r.owner_name))
            owner.children.add(r.uid)
        return rec

    def observe(self, obj: Obj) -> None:
        """An informer's add or update: the object as it is now (owner, creation time, status)."""
        ref = object_ref_from_wire(obj)
        if ref is None:
            return
        rec = self._record(ref)
        rec.live = obj
        self.version += 1

    def forget_live(self, obj: Obj) -> None:
        """An informer's delete: the object is gone; its road stays until evicted."""
        uid = (obj.get("metadata") or {}).get("uid")
        rec = self._objects.get(uid or "")
        if rec is not None:
            rec.live = None
            self.version += 1

    def uid_for(self, kind: str, namespace: str, name: str) -> str | None:
        return self._names.get((kind, namespace, name))

    def ref(self, uid: str) -> ObjectRef | None:
        rec = self._objects.get(uid)
        return rec.ref if rec else None

    def live(self, uid: str) -> Obj | None:
        rec = self._objects.get(uid)
        return rec.live if rec else None

    def __len__(self) -> int:
        return len(self._objects)

    def step_count(self, uid: str) -> int:
        rec = self._objects.get(uid)
        return len(rec.spans) + len(rec.events) if rec else 0

    def pending_count(self) -> int:
        return self._pending_count

    # -- spans -----------------------------------------------------------------------------------------

    def add_spans(self, spans: Iterable[Span]) -> set[str]:
        """Attach spans to their objects; the uids of the objects that got a step."""
        touched: set[str] = set()
        for span in spans:
            if not span.received:
                span.received = self.clock()
            self._place(span, touched)
        if touched:
            self.version += 1
        return touched

    def _remember(self, span_id: str, uid: str) -> None:
        self._index[span_id] = uid
        self._index.move_to_end(span_id)
        while len(self._index) > self.max_index:
            self._index.popitem(last=False)

    def _place(self, span: Span, touched: set[str]) -> None:
        ignored = span.name == "apiserver.request" and span.attrs.get("k8s.verb") in READ_VERBS
        ref = None if ignored else object_ref_of(span.attrs)
        if ignored:
            uid = IGNORED
        elif ref is not None:
            uid = ref.uid
        elif span.parent_id:
            parent_uid = self._index.get(span.parent_id)
            if parent_uid is None:  # the parent has not come yet: wait for it
                self._pending.setdefault(span.parent_id, []).append(span)
                self._pending_count += 1
                while self._pending_count > self.max_pending and self._pending:
                    _, dropped = self._pending.popitem(last=False)
                    self._pending_count -= len(dropped)
                    self.dropped_pending += len(dropped)
                return
            uid = parent_uid
        else:
            uid = IGNORED  # a root span about no object
        self._remember(span.span_id, uid)
        if uid:
            rec = self._record(ref) if ref is not None else self._objects.get(uid)
            if rec is not None:
                self._add_step(rec, span)
                touched.add(uid)
        for child in self._pending.pop(span.span_id, ()):
            self._pending_count -= 1
            self._place(child, touched)

    def _add_step(self, rec: _Record, span: Span) -> None:
        rec.spans[span.span_id] = span
        rec.updated = self.clock()
        self._objects.move_to_end(rec.ref.uid)
        while len(rec.spans) + len(rec.events) > self.max_steps:
            self._drop_oldest(rec)

    def _drop_oldest(self, rec: _Record) -> None:
        first_span = next(iter(rec.spans.values()), None)
        first_event = next(iter(rec.events.values()), None)
        if first_event is None or (first_span is not None and first_span.received <= first_event.received):
            rec.spans.popitem(last=False)
        else:
            rec.events.popitem(last=False)
        self.evicted_steps += 1

    # -- events ----------------------------------------------------------------------------------------

    def add_event(self, event: Obj) -> str | None:
        """A core/v1 Event about an object: a step of its road (updated in place when the Event is)."""
        involved = event.get("involvedObject") or {}
        uid = involved.get("uid")
        meta = event.get("metadata") or {}
        if not uid or not meta.get("uid"):
            return None
        rec = self._record(ObjectRef(uid, involved.get("kind") or "", involved.get("apiVersion") or "",
                                     involved.get("namespace") or "", involved.get("name") or ""))
        when = None
        for key in ("eventTime", "lastTimestamp", "firstTimestamp"):
            when = parse_rfc3339(event.get(key))
            if when is not None:
                break
        if when is None:
            when = parse_rfc3339(meta.get("creationTimestamp"))
        source = event.get("source") or {}
        lane = event.get("reportingComponent") or source.get("component") or ""
        host = source.get("host") or ""
        if host and host not in lane:
            lane = f"{lane}/{host}"
        now = self.clock()
        rec.events[meta["uid"]] = EventStep(meta["uid"], when.timestamp() if when else now, lane,
                                            event.get("reason") or "", event.get("type") or "",
                                            event.get("message") or "", int(event.get("count") or 1), now)
        rec.updated = now
        self._objects.move_to_end(uid)
        while len(rec.spans) + len(rec.events) > self.max_steps:
            self._drop_oldest(rec)
        self.version += 1
        return str(uid)

    # -- roads -----------------------------------------------------------------------------------------

    def tree(self, uid: str, max_depth: int = 4) -> list[tuple[int, str]]:
        """(depth, uid) of the object and what it owns, depth first."""
        out: list[tuple[int, str]] = []
        seen: set[str] = set()

        def walk(u: str, depth: int) -> None:
            if u in seen or depth > max_depth:
                return
            seen.add(u)
            out.append((depth, u))
            rec = self._objects.get(u)
            if rec is None:
                return
            kids = [self._objects[c] for c in rec.children if c in self._objects]
            for kid in sorted(kids, key=_first_time):
                walk(kid.ref.uid, depth + 1)

        walk(uid, 0)
        return out

    def road(self, uid: str, now: float | None = None) -> Obj:
        """The Road object of `uid`: its steps, and nested the roads of what it owns."""
        now = self.clock() if now is None else now
        nodes = self.tree(uid)
        starts = [t for _, u in nodes if (rec := self._objects.get(u)) is not None
                  for t in ([s.start for s in rec.spans.values()] + [e.time for e in rec.events.values()])]
        origin = min(starts) if starts else now
        built: dict[str, Obj] = {}
        for depth, u in nodes:
            built[u] = self._road_of(u, depth, origin)
        for depth, u in nodes:
            rec = self._objects.get(u)
            if rec is not None:
                built[u]["roads"] = [built[c] for d, c in nodes if c in rec.children and c in built and d == depth + 1]
        top = built[uid]
        top["metadata"]["resourceVersion"] = str(self.version)
        top["status"] = self.status(uid, now)
        return top

    def _road_of(self, uid: str, depth: int, origin: float) -> Obj:
        rec = self._objects.get(uid)
        ref = rec.ref if rec else ObjectRef(uid)
        steps = self.steps(uid, origin) if rec else []
        first = steps[0]["time"] if steps else None
        return {"apiVersion": GROUP_VERSION, "kind": "Road",
                "metadata": {"name": ref.name, **({"namespace": ref.namespace} if ref.namespace else {}),
                             "uid": ref.uid},
                "object": ref.as_dict(), "depth": depth, "start": first, "steps": steps, "roads": []}

    def steps(self, uid: str, origin: float) -> list[Obj]:
        rec = self._objects.get(uid)
        if rec is None:
            return []
        ref = rec.ref
        spans = rec.spans
        out: list[Obj] = []
        # writes by etcd revision, for the watch deliveries
        writes: dict[int, tuple[Span, float]] = {}
        for s in spans.values():
            if s.name == "apiserver.request" and "k8s.etcd.revision" in s.attrs:
                try:
                    revision = int(s.attrs["k8s.etcd.revision"])
                except (TypeError, ValueError):
                    continue
                committed = s.end
                for c in spans.values():
                    if c.parent_id == s.span_id and c.name == "apiserver.etcd":
                        committed = min(committed, c.end)
                writes[revision] = (s, committed)
        created = None
        for s in spans.values():
            if (s.name == "apiserver.request" and s.attrs.get("k8s.verb") == "create"
                    and not s.attrs.get("k8s.subresource")):
                created = s.start if created is None else min(created, s.start)
        if created is None and ref.created is not None:
            created = ref.created
        running_marked = False
        for s in sorted(spans.values(), key=lambda s: (s.start, s.end)):
            step = self._span_step(s, ref, origin)
            if s.parent_id in spans:
                step["parent"] = s.parent_id
            if s.name == "informer.event":
                try:
                    rv = int(s.attrs.get("k8s.object.resource_version") or "")
                except ValueError:
                    rv = -1
                write = writes.get(rv)
                if write is not None:
                    step["cause"] = write[0].span_id
                    step["delay"] = round(max(0.0, s.start - write[1]), 6)
            if s.name == "apiserver.request" and s.attrs.get("k8s.verb") in MUTATING_VERBS:
                name, limit = API_CALL_SLO
                seconds = s.end - s.start
                step["slo"] = {"name": name, "limitSeconds": limit, "seconds": round(seconds, 6),
                               "met": seconds <= limit}
            if (ref.kind == "Pod" and not running_marked and s.name == "kubelet.status"
                    and s.attrs.get("k8s.pod.phase") == "Running" and created is not None):
                running_marked = True
                name, limit = POD_STARTUP_SLO
                seconds = s.end - created
                step["slo"] = {"name": name, "limitSeconds": limit, "seconds": round(seconds, 6),
                               "met": seconds <= limit}
            out.append(step)
        for e in rec.events.values():
            details = {"type": e.type, "message": e.message}
            if e.count > 1:
                details["count"] = str(e.count)
            out.append({"id": f"event/{e.uid}", "time": format_rfc3339_micro(e.time),
                        "offset": round(e.time - origin, 6), "duration": 0.0, "lane": e.lane,
                        "step": f"event {e.reason}", "details": details, "source": "event",
                        "object": ref.as_dict(), "_t": e.time})
        out.sort(key=lambda st: (st["_t"], st.get("_d", 0)))
        depth_of: dict[str, int] = {}
        for st in out:
            parent = st.get("parent")
            st["level"] = depth_of.get(parent, -1) + 1 if parent else 0
            depth_of[st["id"]] = st["level"]
            st.pop("_t", None)
            st.pop("_d", None)
        return out

    def _span_step(self, s: Span, ref: ObjectRef, origin: float) -> Obj:
        return {"id": s.span_id, "time": format_rfc3339_micro(s.start), "offset": round(s.start - origin, 6),
                "duration": round(max(0.0, s.end - s.start), 6), "lane": lane_of(s), "step": what(s),
                "details": details_of(s), "source": "span", "span": s.name, "traceID": s.trace_id,
                "object": ref.as_dict(), **({"error": True} if s.status == "error" else {}),
                "_t": s.start, "_d": -s.end}

    def status(self, uid: str, now: float) -> Obj:
        """InProgress or Done: Done once the object has settled (settled()) and no step came for a moment,
        or once no step came for QUIET_DONE seconds, whatever the object's state."""
        nodes = self.tree(uid)
        last = max((rec.updated for _, u in nodes if (rec := self._objects.get(u)) is not None), default=0.0)
        quiet = now - last if last else QUIET_DONE
        rec = self._objects.get(uid)
        done_state = settled(rec.live) if rec is not None and rec.live is not None else None
        done = (done_state is True and quiet >= SETTLE_QUIET) or quiet >= QUIET_DONE
        out: Obj = {"phase": "Done" if done else "InProgress"}
        steps = sum(len(r.spans) + len(r.events) for _, u in nodes if (r := self._objects.get(u)) is not None)
        out["steps"] = steps
        out["objects"] = len(nodes)
        return out


def _first_time(rec: _Record) -> float:
    times = [s.start for s in rec.spans.values()] + [e.time for e in rec.events.values()]
    return min(times) if times else (rec.ref.created or float("inf"))


def settled(obj: Obj) -> bool | None:
    """Has the object reached what its spec asks (None: no rule for its kind)?"""
    kind = obj.get("kind")
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    if meta.get("deletionTimestamp"):
        return False
    if kind in ("Deployment", "ReplicaSet", "StatefulSet"):
        want = spec.get("replicas", 1)
        if (status.get("observedGeneration") or 0) < (meta.get("generation") or 0):
            return False
        fields = ["replicas", "readyReplicas", "availableReplicas"]
        if kind == "Deployment":
            fields.append("updatedReplicas")
        return all((status.get(f) or 0) == want for f in fields)
    if kind == "Pod":
        phase = status.get("phase")
        if phase in ("Succeeded", "Failed"):
            return True
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or ())
        return phase == "Running" and ready
    return None


# -- how a span reads as a step -----------------------------------------------------------------------

def lane_of(s: Span) -> str:
    """Who did it: the user for an API request, else the component (and its node)."""
    if s.name == "apiserver.request":
        return str(s.attrs.get("enduser.id") or "system:anonymous")
    service = str(s.resource.get("service.name") or "unknown")
    node = s.resource.get("k8s.node.name") or (s.attrs.get("k8s.node.name") if service == "kubelet" else None)
    return f"{service}/{node}" if node else service


def _resource(s: Span) -> str:
    resource = str(s.attrs.get("k8s.resource") or "")
    sub = s.attrs.get("k8s.subresource")
    return f"{resource}/{sub}" if sub else resource


def what(s: Span) -> str:
    a = s.attrs
    n = s.name
    if n == "apiserver.request":
        code = a.get("http.response.status_code")
        return f"{a.get('k8s.verb', '?')} {_resource(s)}" + (f" → {code}" if code else "")
    if n == "apiserver.authenticate":
        return "authenticate"
    if n == "apiserver.authorize":
        return f"authorize: {a.get('k8s.authz.decision', '?')}"
    if n == "apiserver.admission":
        mutated = " (mutated)" if a.get("k8s.admission.mutated") else ""
        return f"admission {a.get('k8s.admission.phase', '')} {a.get('k8s.admission.plugin', '?')}{mutated}"
    if n == "apiserver.etcd":
        rev = a.get("k8s.etcd.revision")
        return f"etcd {a.get('k8s.etcd.op', '?')}" + (f" (revision {rev})" if rev is not None else "")
    if n == "informer.event":
        return f"watch {a.get('k8s.watch.event_type', '?')} {a.get('k8s.resource', '')}".rstrip()
    if n == "controller.sync":
        return f"sync {a.get('k8s.controller', '?')}: {a.get('k8s.sync.result', '?')}"
    if n == "scheduler.schedule_pod":
        result = a.get("k8s.scheduler.result", "?")
        node = a.get("k8s.scheduler.selected_node")
        return f"schedule: {result}" + (f" → {node}" if node else "")
    if n == "scheduler.bind":
        return "bind"
    if n == "kubelet.sync_pod":
        return f"sync pod ({a.get('k8s.sync.update_type', '?')})"
    if n == "kubelet.run_pod_sandbox":
        ip = a.get("k8s.pod.ip")
        return "run sandbox" + (f" (IP {ip})" if ip else "")
    if n == "kubelet.image":
        pulled = "pulled" if a.get("k8s.image.pulled") else "present"
        return f"image {a.get('k8s.image', '?')} {pulled}"
    if n in ("kubelet.create_container", "kubelet.start_container"):
        verb = "create" if n == "kubelet.create_container" else "start"
        return f"{verb} container {a.get('k8s.container.name', '?')}"
    if n == "kubelet.probe":
        return (f"{a.get('k8s.probe.type', '?')} probe {a.get('k8s.container.name', '')}: "
                f"{a.get('k8s.probe.result', '?')}")
    if n == "kubelet.status":
        ready = a.get("k8s.pod.ready")
        readiness = ", Ready" if ready else ", not Ready" if ready is False else ""
        return f"status {a.get('k8s.pod.phase', '?')}{readiness}"
    if n == "cni.add":
        ip = a.get("k8s.pod.ip")
        return "CNI ADD" + (f" (IP {ip})" if ip else "")
    if n.startswith("cri."):
        return f"CRI {n[4:]}"
    return n


# attributes every step already shows elsewhere (the object, the lane, the step's own wording)
_SHOWN = frozenset({"enduser.id", "k8s.verb", "k8s.resource", "k8s.subresource", "http.response.status_code"})


def details_of(s: Span) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in s.attrs.items():
        if key.startswith(OBJECT_PREFIX) and (key != "k8s.object.resource_version" or s.name != "informer.event"):
            continue
        if key.startswith(OWNER_PREFIX) or (key in _SHOWN and s.name == "apiserver.request"):
            continue
        out[key] = str(value).lower() if isinstance(value, bool) else str(value)
    return out
