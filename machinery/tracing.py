"""OpenTelemetry tracing for every component, in one place (upstream: component-base/tracing and the
apiserver's and kubelet's TracingConfiguration).

`--tracing-config-file=FILE` names a `TracingConfiguration` (YAML or JSON,
`apiVersion: apiserver.config.k8s.io/v1beta1`): `endpoint` (host:port of an OTLP gRPC collector, default
`localhost:4317`) and `samplingRatePerMillion` (default 0, as upstream: only spans whose caller sampled
them). Spans are exported over OTLP/gRPC (insecure, as upstream's loopback collector) by a batch
processor with a 200 ms schedule; the sampler is ParentBased(TraceIdRatioBased(rate / 1e6)).

Without the flag nothing is set up: `TRACER` stays None, `span()` hands back one shared no-op context
manager and `inject()` returns the headers unchanged, so tracing costs a test of one global. An
unreachable collector changes nothing either: the exporter gives up a batch after a short deadline, its
complaints are logged at most once a minute, and shutting down waits at most two seconds for it.

W3C trace context (`traceparent`, `tracestate`) travels on every API request (machinery/client.py) and on
CRI gRPC calls; the apiserver and the CRI server extract it, so their spans are children of the caller's.
The span names and attributes are the tracing contract's (see the README's Tracing section).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import socket
import time
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from contextvars import ContextVar, Token
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import yaml
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Tracer
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

log = logging.getLogger(__name__)

GROUP = "apiserver.config.k8s.io"
VERSIONS = ("v1alpha1", "v1beta1", "v1")
KIND = "TracingConfiguration"
DEFAULT_ENDPOINT = "localhost:4317"
MAX_SAMPLING_RATE_PER_MILLION = 1_000_000
SCHEDULE_DELAY_MILLIS = 200  # the road's latency target is 500 ms from a step to the screen
EXPORT_TIMEOUT_SECONDS = 2.0  # one batch to an unreachable collector is given up after this
SHUTDOWN_TIMEOUT_MILLIS = 2000

INTERNAL = SpanKind.INTERNAL
SERVER = SpanKind.SERVER
CLIENT = SpanKind.CLIENT
CONSUMER = SpanKind.CONSUMER

TRACER: Tracer | None = None  # None: tracing is off (no flag), and nothing below costs anything
# samplingRatePerMillion / 1e6: 0 (upstream's default) samples no span that starts a trace, so one is not even
# started: only work a caller sampled (a traceparent with the sampled flag) is traced
ROOT_RATE = 0.0
_PROPAGATOR = TraceContextTextMapPropagator()
_processor: Any = None
_NOOP = contextlib.nullcontext()


class TracingConfigError(ValueError):
    """A TracingConfiguration that cannot be read or does not validate (upstream's messages)."""


@dataclass(frozen=True)
class TracingConfiguration:
    endpoint: str = DEFAULT_ENDPOINT
    sampling_rate_per_million: int = 0


def load_config(path: str) -> TracingConfiguration:
    """Read and validate the file, as upstream's ReadTracingConfiguration and ValidateTracingConfiguration."""
    if not path:
        raise TracingConfigError("tracing config file was empty")
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise TracingConfigError(f'unable to read tracing configuration from "{path}": {e}') from None
    try:
        doc = yaml.safe_load(data)  # YAML is a superset of JSON
    except yaml.YAMLError as e:
        raise TracingConfigError(f"unable to decode tracing configuration data: {e}") from None
    if not isinstance(doc, dict):
        raise TracingConfigError("unable to decode tracing configuration data: Object 'Kind' is missing in "
                                 f"'{data[:200].decode(errors='replace').strip()}'")
    return parse_config(doc)


def parse_config(doc: Mapping[str, Any]) -> TracingConfiguration:
    """A decoded TracingConfiguration document → the configuration, or TracingConfigError."""
    kind, api_version = doc.get("kind"), doc.get("apiVersion")
    prefix = "unable to decode tracing configuration data: "
    if not kind:
        raise TracingConfigError(prefix + "Object 'Kind' is missing")
    if not api_version:
        raise TracingConfigError(prefix + "Object 'apiVersion' is missing")
    group, _, version = str(api_version).rpartition("/")
    if group != GROUP or version not in VERSIONS or kind != KIND:
        raise TracingConfigError(prefix + f'no kind "{kind}" is registered for version "{api_version}" in scheme '
                                 '"k8s.io/apiserver/pkg/apis/apiserver/install/install.go:30"')
    errors: list[str] = []
    path = "tracingConfiguration"
    endpoint = doc.get("endpoint")
    if endpoint is None:
        endpoint = DEFAULT_ENDPOINT
    elif not isinstance(endpoint, str):
        raise TracingConfigError(prefix + "json: cannot unmarshal "
                                 f"{type(endpoint).__name__} into Go struct field TracingConfiguration.endpoint "
                                 "of type string")
    else:
        errors += _validate_endpoint(endpoint, f"{path}.endpoint")
    rate = doc.get("samplingRatePerMillion")
    if rate is None:
        rate = 0
    elif isinstance(rate, bool) or not isinstance(rate, int):
        raise TracingConfigError(prefix + "json: cannot unmarshal "
                                 f"{type(rate).__name__} into Go struct field "
                                 "TracingConfiguration.samplingRatePerMillion of type int32")
    else:
        if rate < 0:
            errors.append(f"{path}.samplingRatePerMillion: Invalid value: {rate}: sampling rate must be positive")
        if rate > MAX_SAMPLING_RATE_PER_MILLION:
            errors.append(f"{path}.samplingRatePerMillion: Invalid value: {rate}: sampling rate per million must "
                          "be less than or equal to one million")
    if errors:  # field.ErrorList.ToAggregate(): one error says itself, more are bracketed
        raise TracingConfigError(errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]")
    return TracingConfiguration(endpoint, rate)


def _validate_endpoint(endpoint: str, path: str) -> list[str]:
    """upstream validateEndpoint: a gRPC target, dns (host:port, the default), unix or unix-abstract."""
    target = endpoint if "//" in endpoint else "dns://" + endpoint
    try:
        scheme = urlsplit(target).scheme
    except ValueError as e:
        return [f'{path}: Invalid value: "{target}": {e}']
    if scheme not in ("dns", "unix", "unix-abstract"):
        return [f'{path}: Invalid value: "{target}": unsupported scheme: {scheme}.  Options are none, dns, unix, '
                "or unix-abstract.  See https://github.com/grpc/grpc/blob/master/doc/naming.md"]
    return []


class _OncePerMinute(logging.Filter):
    """One complaint a minute from the exporter and the batch processor: a collector that is away is worth a
    line, not a flood."""

    def __init__(self) -> None:
        super().__init__()
        self.last = -1e9

    def filter(self, record: logging.LogRecord) -> bool:
        now = time.monotonic()
        if now - self.last < 60:
            return False
        self.last = now
        return True


def setup(config_file: str | None, service_name: str, *, instance_id: str | None = None,
          attributes: Mapping[str, str] | None = None) -> bool:
    """Set tracing up for this process from --tracing-config-file (None: off, nothing happens).
    Raises TracingConfigError for a bad file. True when tracing is on."""
    global TRACER, ROOT_RATE, _processor
    if not config_file:
        return False
    config = load_config(config_file)
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

    resource = Resource.create({
        "service.name": service_name,
        "service.instance.id": instance_id or f"{socket.gethostname()}:{os.getpid()}",
        **(attributes or {}),
    })
    sampler = ParentBased(TraceIdRatioBased(config.sampling_rate_per_million / MAX_SAMPLING_RATE_PER_MILLION))
    provider = TracerProvider(resource=resource, sampler=sampler, shutdown_on_exit=False)
    exporter = OTLPSpanExporter(endpoint=config.endpoint, insecure=True,  # a gRPC target, as upstream dials it
                                timeout=EXPORT_TIMEOUT_SECONDS)
    for name in ("opentelemetry.exporter.otlp.proto.grpc.exporter", "opentelemetry.sdk._shared_internal"):
        logging.getLogger(name).addFilter(_OncePerMinute())
    _processor = BatchSpanProcessor(exporter, schedule_delay_millis=SCHEDULE_DELAY_MILLIS)
    provider.add_span_processor(_processor)
    TRACER = provider.get_tracer("minik8s")
    ROOT_RATE = config.sampling_rate_per_million / MAX_SAMPLING_RATE_PER_MILLION
    atexit.register(shutdown)
    log.info("tracing: exporting spans of %s to %s (sampling %d per million)", service_name, config.endpoint,
             config.sampling_rate_per_million)
    return True


def setup_or_exit(config_file: str | None, service_name: str, *, instance_id: str | None = None,
                  attributes: Mapping[str, str] | None = None) -> bool:
    """setup() for a component's main: a bad file ends the process (exit 1) with the reason."""
    try:
        return setup(config_file, service_name, instance_id=instance_id, attributes=attributes)
    except TracingConfigError as e:
        raise SystemExit(f"--tracing-config-file: {e}") from None


def add_flag(parser: Any) -> None:
    """The component flag, upstream's name."""
    parser.add_argument("--tracing-config-file", default=None,
                        help="file with an apiserver.config.k8s.io/v1beta1 TracingConfiguration (endpoint, "
                             "samplingRatePerMillion): spans exported over OTLP/gRPC; without it, no tracing")


def shutdown() -> None:
    """Send what is queued and stop, waiting at most two seconds (an unreachable collector does not hold
    the process)."""
    global TRACER, _processor
    processor, _processor = _processor, None
    TRACER = None
    if processor is not None:
        try:
            processor.shutdown(timeout_millis=SHUTDOWN_TIMEOUT_MILLIS)
        except Exception as e:  # tracing never fails the component
            log.debug("tracing shutdown: %s", e)


def force_flush(timeout_millis: int = 5000) -> None:
    if _processor is not None:
        _processor.force_flush(timeout_millis)


# -- spans ------------------------------------------------------------------------------------------------


def span(name: str, kind: SpanKind = INTERNAL, attributes: Mapping[str, Any] | None = None,
         context: otel_context.Context | None = None) -> contextlib.AbstractContextManager[Any]:
    """A span current for the `with` block (None as the target when tracing is off)."""
    tracer = TRACER
    if tracer is None or (ROOT_RATE == 0.0 and not _in_trace(context)):
        return _NOOP
    return tracer.start_as_current_span(name, context=context, kind=kind,
                                        attributes=_clean(attributes) if attributes else None)


def set_attributes(current: Any, attributes: Mapping[str, Any]) -> None:
    """Set attributes on a span from span() (or do nothing with the None of tracing off)."""
    if current is not None and current.is_recording():
        current.set_attributes(_clean(attributes))


STEP_DURATION = "k8s.step.duration_ns"  # a step event's duration (the event's time is when the step began)
# the sampled span the steps of the work under way are recorded on (the apiserver's request span: RequestTracing
# sets it): one lookup of a context variable, where finding the current span takes the API five calls, and
# authn, authz, each admission plugin and each etcd call ask
_STEP_SPAN: ContextVar[Any] = ContextVar("minik8s_step_span", default=None)


def steps_on(current: Any) -> Token[Any]:
    """Record the steps of what runs from here (in this task and the tasks it starts) on `current`, a sampled
    span; undo with steps_off(token)."""
    return _STEP_SPAN.set(current)


def steps_off(token: Token[Any]) -> None:
    _STEP_SPAN.reset(token)


def step_span() -> Any:
    """The sampled span a step here is recorded on (steps_on's, else the current span when it is sampled), or
    None: tracing off, no span, or one not sampled."""
    if TRACER is None:
        return None
    current = _STEP_SPAN.get()
    if current is None:
        current = trace.get_current_span()
        if not current.is_recording():
            return None
    return current


def record_step(name: str, start_ns: int, end_ns: int, attributes: Mapping[str, Any] | None = None,
                on: Any = None) -> None:
    """A step that already happened (its times measured by the caller), as an event of step_span(): named
    `name`, timed at the step's start, its duration in `k8s.step.duration_ns`. Upstream's apiserver records a
    request's steps the same way, as events on the request's one span (component-base/tracing,
    k8s.io/utils/trace); an event costs a fraction of a child span (no ids, sampler, processor or export of
    its own). The road server reads each such event as a child step of the span (road/otlp.py). `on`: the
    step_span() the caller already has."""
    current = on if on is not None else step_span()
    if current is None:
        return
    attrs = {k: v for k, v in attributes.items() if v is not None} if attributes else {}
    attrs[STEP_DURATION] = end_ns - start_ns
    current.add_event(name, attrs, timestamp=start_ns)


def _clean(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """OpenTelemetry takes no None values."""
    return {k: v for k, v in attributes.items() if v is not None}


# -- propagation ------------------------------------------------------------------------------------------


def inject(headers: dict[str, str] | None) -> dict[str, str] | None:
    """The headers with the current span's traceparent (and tracestate) added, when there is one."""
    if TRACER is None:
        return headers
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier)
    if not carrier:
        return headers
    return {**(headers or {}), **carrier}


def inject_metadata(metadata: Sequence[tuple[str, str]] | None = None) -> list[tuple[str, str]] | None:
    """gRPC metadata with the current trace context (None when there is none and none was given)."""
    if TRACER is None:
        return list(metadata) if metadata is not None else None
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier)
    if not carrier:
        return list(metadata) if metadata is not None else None
    return [*(metadata or ()), *carrier.items()]


def extract(carrier: Mapping[str, str]) -> otel_context.Context:
    """The caller's context from headers or gRPC metadata (lower-case keys)."""
    return _PROPAGATOR.extract(carrier)


def extract_asgi(headers: Sequence[tuple[bytes, bytes]]) -> otel_context.Context | None:
    """The caller's context from an ASGI scope's headers; None when it sent none."""
    carrier: MutableMapping[str, str] = {}
    for name, value in headers:
        if name == b"traceparent" or name == b"tracestate":
            carrier[name.decode("latin-1")] = value.decode("latin-1")
    return _PROPAGATOR.extract(carrier) if carrier else None


# -- object attributes ------------------------------------------------------------------------------------


def object_attributes(obj: Any, api_version: str | None = None, kind: str | None = None) -> dict[str, Any]:
    """The contract's k8s.object.* and k8s.owner.* attributes of an object (a wire-form dict or a model)."""
    if obj is None:
        return {}
    if isinstance(obj, Mapping):
        meta = obj.get("metadata") or {}
        if not isinstance(meta, Mapping):
            return {}
        get = meta.get
        owners = get("ownerReferences") or []
        owner = next((o for o in owners if isinstance(o, Mapping) and o.get("controller")), None)
        attrs: dict[str, Any] = {
            "k8s.object.uid": get("uid"),
            "k8s.object.kind": obj.get("kind") or kind,
            "k8s.object.api_version": obj.get("apiVersion") or api_version,
            "k8s.object.namespace": get("namespace"),
            "k8s.object.name": get("name"),
            "k8s.object.generation": get("generation"),
            "k8s.object.resource_version": get("resourceVersion"),
        }
        if owner is not None:
            attrs.update({"k8s.owner.uid": owner.get("uid"), "k8s.owner.kind": owner.get("kind"),
                          "k8s.owner.name": owner.get("name")})
    else:
        meta = getattr(obj, "metadata", None)
        if meta is None:
            return {}
        owners = getattr(meta, "owner_references", None) or []
        owner = next((o for o in owners if getattr(o, "controller", False)), None)
        attrs = {
            "k8s.object.uid": getattr(meta, "uid", None),
            "k8s.object.kind": getattr(obj, "kind", None) or kind,
            "k8s.object.api_version": getattr(obj, "api_version", None) or api_version,
            "k8s.object.namespace": getattr(meta, "namespace", None),
            "k8s.object.name": getattr(meta, "name", None),
            "k8s.object.generation": getattr(meta, "generation", None),
            "k8s.object.resource_version": getattr(meta, "resource_version", None),
        }
        if owner is not None:
            attrs.update({"k8s.owner.uid": owner.uid, "k8s.owner.kind": owner.kind, "k8s.owner.name": owner.name})
    generation = attrs.get("k8s.object.generation")
    if generation is not None and not isinstance(generation, int):
        attrs["k8s.object.generation"] = None
    return _clean(attrs)


@contextlib.contextmanager
def detached() -> Iterator[None]:
    """Run a block with no current span (a background task started from within a span)."""
    token = otel_context.attach(otel_context.Context())
    try:
        yield
    finally:
        otel_context.detach(token)


def current_span() -> Any:
    return trace.get_current_span() if TRACER is not None else None


def start_span(name: str, attributes: Mapping[str, Any] | None = None, kind: SpanKind = INTERNAL) -> Any:
    """A span the caller ends (end_span), child of the current one; None when tracing is off."""
    tracer = TRACER
    if tracer is None or (ROOT_RATE == 0.0 and not _in_trace()):
        return None
    return tracer.start_span(name, kind=kind, attributes=_clean(attributes) if attributes else None)


def active() -> bool:
    """Would a span started here be sampled, possibly? (tracing on, and roots sampled or a trace to join)"""
    return TRACER is not None and (ROOT_RATE > 0.0 or _in_trace())


def _in_trace(context: otel_context.Context | None = None) -> bool:
    """Is there a trace to join (a current span, or the caller's in `context`)?"""
    return trace.get_current_span(context).get_span_context().is_valid


def end_span(current: Any, attributes: Mapping[str, Any] | None = None) -> None:
    if current is None:
        return
    if attributes and current.is_recording():
        current.set_attributes(_clean(attributes))
    current.end()


def use_span(current: Any) -> contextlib.AbstractContextManager[Any]:
    """Make a span from start_span current for a block, without ending it."""
    if current is None:
        return _NOOP
    return trace.use_span(current, end_on_exit=False)
