"""machinery/tracing.py: the TracingConfiguration file (upstream's decoding and validation messages), the
no-op when tracing is off, propagation, object attributes; and the span helpers of the controller worker,
the apiserver's authn/authz wrappers and admission, recorded by the SDK's in-memory exporter."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from machinery import tracing
from machinery.api.core_v1 import Pod
from machinery.tracing import TracingConfigError, TracingConfiguration, load_config

HEADER = "apiVersion: apiserver.config.k8s.io/v1beta1\nkind: TracingConfiguration\n"


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "tracing.yaml"
    path.write_text(text)
    return str(path)


def test_defaults_and_values(tmp_path: Path) -> None:
    assert load_config(write(tmp_path, HEADER)) == TracingConfiguration("localhost:4317", 0)
    assert load_config(write(tmp_path, HEADER + 'endpoint: "127.0.0.1:4317"\nsamplingRatePerMillion: 1000000\n')) \
        == TracingConfiguration("127.0.0.1:4317", 1_000_000)
    as_json = '{"apiVersion": "apiserver.config.k8s.io/v1alpha1", "kind": "TracingConfiguration", ' \
              '"endpoint": "unix:///run/otel.sock", "samplingRatePerMillion": 5}'
    assert load_config(write(tmp_path, as_json)) == TracingConfiguration("unix:///run/otel.sock", 5)


@pytest.mark.parametrize(("text", "message"), [
    (HEADER + "samplingRatePerMillion: -1\n",
     "tracingConfiguration.samplingRatePerMillion: Invalid value: -1: sampling rate must be positive"),
    (HEADER + "samplingRatePerMillion: 1000001\n",
     "tracingConfiguration.samplingRatePerMillion: Invalid value: 1000001: sampling rate per million must be less "
     "than or equal to one million"),
    (HEADER + 'endpoint: "http://127.0.0.1:4317"\n',
     'tracingConfiguration.endpoint: Invalid value: "http://127.0.0.1:4317": unsupported scheme: http.  Options '
     "are none, dns, unix, or unix-abstract.  See https://github.com/grpc/grpc/blob/master/doc/naming.md"),
    (HEADER + 'endpoint: "https://x:1"\nsamplingRatePerMillion: -5\n',
     '[tracingConfiguration.endpoint: Invalid value: "https://x:1": unsupported scheme: https.  Options are none, '
     "dns, unix, or unix-abstract.  See https://github.com/grpc/grpc/blob/master/doc/naming.md, "
     "tracingConfiguration.samplingRatePerMillion: Invalid value: -5: sampling rate must be positive]"),
    (HEADER + "samplingRatePerMillion: lots\n",
     "unable to decode tracing configuration data: json: cannot unmarshal str into Go struct field "
     "TracingConfiguration.samplingRatePerMillion of type int32"),
    ("apiVersion: apiserver.config.k8s.io/v1beta1\nkind: EncryptionConfiguration\n",
     'unable to decode tracing configuration data: no kind "EncryptionConfiguration" is registered for version '
     '"apiserver.config.k8s.io/v1beta1"'),
    ("kind: TracingConfiguration\n", "unable to decode tracing configuration data: Object 'apiVersion' is missing"),
    ("endpoint: x:1\n", "unable to decode tracing configuration data: Object 'Kind' is missing"),
    ("{not yaml: [", "unable to decode tracing configuration data: "),
])
def test_bad_files_say_why(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(TracingConfigError) as e:
        load_config(write(tmp_path, text))
    assert str(e.value).startswith(message)


def test_unreadable_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(TracingConfigError, match=f'unable to read tracing configuration from "{missing}"'):
        load_config(str(missing))
    with pytest.raises(SystemExit, match="--tracing-config-file: unable to read"):
        tracing.setup_or_exit(str(missing), "kube-scheduler")
    assert tracing.TRACER is None


def test_off_is_a_no_op() -> None:
    assert tracing.setup(None, "kube-apiserver") is False
    assert tracing.TRACER is None
    headers = {"Accept": "application/json"}
    assert tracing.inject(headers) is headers
    assert tracing.inject(None) is None
    assert tracing.inject_metadata() is None
    with tracing.span("x") as current:
        assert current is None
    tracing.set_attributes(current, {"a": 1})
    assert tracing.start_span("y") is None
    tracing.record_step("z", 1, 2, {"a": 1})  # nothing to record it on, nothing raised


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.TRACER, tracing.ROOT_RATE = provider.get_tracer("test"), 1.0
    try:
        yield exporter
    finally:
        tracing.TRACER, tracing.ROOT_RATE = None, 0.0
        provider.shutdown()


def test_rate_zero_traces_only_what_a_caller_sampled(spans: InMemorySpanExporter) -> None:
    """samplingRatePerMillion 0 (upstream's default): no span starts a trace, a caller's trace is joined."""
    tracing.ROOT_RATE = 0.0
    assert not tracing.active()
    with tracing.span("root") as root:
        assert root is None
    assert tracing.start_span("root") is None
    caller = tracing.extract({"traceparent": f"00-{'ab' * 16}-{'cd' * 8}-01"})
    with tracing.span("joined", context=caller) as joined:
        assert joined is not None and tracing.active()
        with tracing.span("child"):
            pass
    assert [s.name for s in spans.get_finished_spans()] == ["child", "joined"]


def test_propagation_round_trip(spans: InMemorySpanExporter) -> None:
    with tracing.span("caller") as caller:
        headers = tracing.inject({"Accept": "application/json"})
        metadata = tracing.inject_metadata([("x", "y")])
    assert headers is not None and headers["Accept"] == "application/json"
    trace_id = format(caller.get_span_context().trace_id, "032x")
    assert headers["traceparent"].startswith(f"00-{trace_id}-")
    assert metadata is not None and metadata[0] == ("x", "y") and metadata[1][0] == "traceparent"
    parent = tracing.extract_asgi([(b"traceparent", headers["traceparent"].encode()), (b"accept", b"*/*")])
    assert parent is not None
    with tracing.span("callee", context=parent):
        pass
    callee = next(s for s in spans.get_finished_spans() if s.name == "callee")
    assert callee.parent is not None and callee.parent.span_id == caller.get_span_context().span_id
    assert tracing.extract_asgi([(b"accept", b"*/*")]) is None


def test_object_attributes_of_dicts_and_models() -> None:
    obj = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
           "metadata": {"name": "web-1", "namespace": "default", "uid": "u1", "generation": 2, "resourceVersion": "7",
                        "ownerReferences": [{"kind": "Deployment", "name": "web", "uid": "u0", "controller": True}]}}
    assert tracing.object_attributes(obj) == {
        "k8s.object.uid": "u1", "k8s.object.kind": "ReplicaSet", "k8s.object.api_version": "apps/v1",
        "k8s.object.namespace": "default", "k8s.object.name": "web-1", "k8s.object.generation": 2,
        "k8s.object.resource_version": "7", "k8s.owner.uid": "u0", "k8s.owner.kind": "Deployment",
        "k8s.owner.name": "web"}
    pod = Pod.model_validate({"metadata": {"name": "p", "namespace": "ns", "uid": "u2", "resourceVersion": "9"}})
    assert tracing.object_attributes(pod, "v1", "Pod") == {
        "k8s.object.uid": "u2", "k8s.object.kind": "Pod", "k8s.object.api_version": "v1",
        "k8s.object.namespace": "ns", "k8s.object.name": "p", "k8s.object.resource_version": "9"}
    assert tracing.object_attributes(None) == {}


def test_controller_sync_span(spans: InMemorySpanExporter) -> None:
    from machinery.controller import Controller

    class Once(Controller):
        name = "replicaset"

        def __init__(self) -> None:
            super().__init__()
            self.seen: list[str] = []

        async def reconcile(self, key: str) -> float | None:
            self.seen.append(key)
            with tracing.span("inner"):
                pass
            if key == "ns/bad":
                raise ValueError("no")
            return 5.0 if key == "ns/later" else None

    async def run() -> None:
        c = Once()
        for key in ("ns/a", "ns/bad", "ns/later"):
            c.queue.add(key)
        worker = asyncio.create_task(c._worker())
        while len(c.seen) < 3:
            await asyncio.sleep(0.01)
        worker.cancel()
        c.queue.shutdown()

    asyncio.run(run())
    finished = spans.get_finished_spans()
    all_syncs = [s for s in finished if s.name == "controller.sync"]
    syncs = {s.attributes["k8s.queue.key"]: s for s in all_syncs}  # (ns/bad may have been retried already)
    assert {k: s.attributes["k8s.sync.result"] for k, s in syncs.items()} == {
        "ns/a": "ok", "ns/bad": "error", "ns/later": "requeue"}
    assert all(s.attributes["k8s.controller"] == "replicaset" and s.attributes["k8s.queue.wait_ms"] >= 0
               for s in all_syncs)
    inner = [s for s in finished if s.name == "inner"]
    assert sorted(s.parent.span_id for s in inner if s.parent) == sorted(s.context.span_id for s in all_syncs)


def test_authn_authz_and_admission_spans(spans: InMemorySpanExporter) -> None:
    from apiserver.tracing import TracedAuthenticator, TracedAuthorizer, plugin_span

    class User:
        name = "alice"

    class Authn:
        def authenticate(self, peercert: Any, authorization: bytes | None) -> Any:
            return User() if authorization else None

    class Authz:
        def authorize(self, a: Any) -> tuple[bool, str]:
            return (a == "ok", "because")

    class Info:
        plural = "pods"

    class Store:
        info = Info()

    class Attrs:
        obj: Any = {"metadata": {"name": "x"}}
        store = Store()

    with tracing.span("apiserver.request"):
        assert TracedAuthenticator(Authn()).authenticate(None, b"Bearer t").name == "alice"
        assert TracedAuthenticator(Authn()).authenticate(None, None) is None
        assert TracedAuthorizer(Authz()).authorize("ok") == (True, "because")
        assert TracedAuthorizer(Authz()).authorize("no") == (False, "because")
        a = Attrs()
        with plugin_span("ServiceAccount", "mutating", a):
            a.obj["spec"] = {"serviceAccountName": "default"}
        with plugin_span("Priority", "mutating", a):
            pass
        with pytest.raises(ValueError), plugin_span("PodSecurity", "validating", a):
            raise ValueError("denied")
        Info.plural = "configmaps"  # not a pod: the pod plugins take no part, the quota and webhooks do
        for plugin in ("Priority", "ResourceQuota", "my-webhook.example.com"):
            with plugin_span(plugin, "validating", a):
                pass
    finished = spans.get_finished_spans()
    # one span: each step an event on it, timed at the step's start, with its duration
    assert [s.name for s in finished] == ["apiserver.request"]
    request = finished[0]
    events = request.events
    for e in events:
        duration = e.attributes[tracing.STEP_DURATION]
        assert request.start_time <= e.timestamp <= e.timestamp + duration <= request.end_time
    steps = [(e.name, {k: v for k, v in (e.attributes or {}).items() if k != tracing.STEP_DURATION}) for e in events]
    authn = [a for n, a in steps if n == "apiserver.authenticate"]
    assert authn == [{"k8s.authn.result": "ok"}, {"k8s.authn.result": "unauthenticated"}]  # who: enduser.id
    assert [a["k8s.authz.decision"] for n, a in steps if n == "apiserver.authorize"] == ["allow", "deny"]
    plugins = [a["k8s.admission.plugin"] for n, a in steps if n == "apiserver.admission"]
    assert plugins == ["ServiceAccount", "Priority", "PodSecurity", "ResourceQuota", "my-webhook.example.com"]
    admission = {a["k8s.admission.plugin"]: a for n, a in steps if n == "apiserver.admission"}
    assert admission["ServiceAccount"]["k8s.admission.mutated"] is True
    assert admission["Priority"]["k8s.admission.mutated"] is False
    assert admission["PodSecurity"] == {"k8s.admission.plugin": "PodSecurity", "k8s.admission.phase": "validating",
                                        "k8s.admission.denied": True}  # a validating plugin mutates nothing
    assert admission["ResourceQuota"] == {"k8s.admission.plugin": "ResourceQuota", "k8s.admission.phase": "validating"}


def test_a_step_needs_a_sampled_span(spans: InMemorySpanExporter) -> None:
    tracing.record_step("apiserver.authenticate", 1, 2)  # no current span: no event, no span
    with tracing.detached():
        ctx = tracing.extract({"traceparent": "00-0123456789abcdef0123456789abcdef-0123456789abcdef-00"})
        with tracing.span("apiserver.request", context=ctx) as unsampled:
            assert not unsampled.is_recording()
            tracing.record_step("apiserver.authenticate", 1, 2)
    with tracing.span("apiserver.request"):
        tracing.record_step("apiserver.etcd", 100, 350, {"k8s.etcd.op": "txn", "k8s.etcd.revision": None})
    [request] = spans.get_finished_spans()
    [event] = request.events
    assert (event.name, event.timestamp, dict(event.attributes or {})) == (
        "apiserver.etcd", 100, {"k8s.etcd.op": "txn", tracing.STEP_DURATION: 250})


def test_etcd_calls_are_steps_of_the_request_span(spans: InMemorySpanExporter) -> None:
    from aetcd import rpc as rpc_pb2

    from apiserver.storage.etcd import EtcdStorage, StorageError

    class Fake:
        _traced_call = EtcdStorage._traced_call

        def __init__(self, answer: Any) -> None:
            self.answer = answer

        async def _call_etcd(self, service: str, method: str, request: Any, *, budget: float) -> Any:
            if isinstance(self.answer, Exception):
                raise self.answer
            return self.answer, False

    put = rpc_pb2.TxnRequest(success=[rpc_pb2.RequestOp(request_put=rpc_pb2.PutRequest(key=b"k", value=b"v"))])
    answer = rpc_pb2.TxnResponse(header=rpc_pb2.ResponseHeader(revision=42), succeeded=True)

    async def call(fake: Fake, method: str, request: Any) -> Any:
        return await EtcdStorage._call(fake, "KV", method, request)  # type: ignore[arg-type]

    with tracing.span("apiserver.request") as current:
        assert asyncio.run(call(Fake(answer), "Txn", put)) == (answer, False)
        with pytest.raises(StorageError):
            asyncio.run(call(Fake(StorageError("etcd: INVALID_ARGUMENT: bad")), "Range",
                             rpc_pb2.RangeRequest(key=b"k")))
        assert current.attributes["k8s.etcd.revision"] == 42  # the request's write
    [request] = spans.get_finished_spans()
    steps = [(e.name, {k: v for k, v in (e.attributes or {}).items() if k != tracing.STEP_DURATION})
             for e in request.events]
    assert steps == [("apiserver.etcd", {"k8s.etcd.op": "txn", "k8s.etcd.revision": 42}),
                     ("apiserver.etcd", {"k8s.etcd.op": "get", "error.type": "StorageError"})]


def test_request_tracing_records_the_steps_on_the_request_span(spans: InMemorySpanExporter) -> None:
    """RequestTracing makes its span the one steps go on (tracing.steps_on), also under a child span, and undoes
    it when the request ends; a created ConfigMap's attributes come from the answer."""
    from apiserver.tracing import RequestTracing

    seen: list[Any] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append(tracing.step_span())
        tracing.record_step("apiserver.authenticate", 1, 5, {"k8s.authn.result": "ok"})
        with tracing.span("inner"):  # a child span is current: the step still goes on the request's
            tracing.record_step("apiserver.etcd", 10, 30, {"k8s.etcd.op": "txn", "k8s.etcd.revision": 7})
        await send({"type": "http.response.start", "status": 201,
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": b'{"kind": "ConfigMap", "apiVersion": "v1", '
                    b'"metadata": {"name": "c", "namespace": "ns", "uid": "u1", "resourceVersion": "7"}}'})

    async def receive() -> Any:
        return {"type": "http.request", "body": b""}

    async def send(message: Any) -> None:
        pass

    scope = {"type": "http", "method": "POST", "path": "/api/v1/namespaces/ns/configmaps", "query_string": b"",
             "headers": [(b"user-agent", b"test/1")]}
    asyncio.run(RequestTracing(app)(scope, receive, send))
    assert tracing.step_span() is None  # undone
    request = next(s for s in spans.get_finished_spans() if s.name == "apiserver.request")
    assert [s.get_span_context() for s in seen] == [request.get_span_context()]
    assert [(e.name, e.timestamp, e.attributes[tracing.STEP_DURATION]) for e in request.events] == [
        ("apiserver.authenticate", 1, 4), ("apiserver.etcd", 10, 20)]
    attrs = dict(request.attributes or {})
    assert attrs["k8s.verb"] == "create" and attrs["http.response.status_code"] == 201
    assert attrs["k8s.object.uid"] == "u1" and attrs["k8s.etcd.revision"] == 7
    assert "k8s.subresource" not in attrs  # an empty one is not sent
    assert (attrs["k8s.object.namespace"], attrs["k8s.object.name"]) == ("ns", "c")
