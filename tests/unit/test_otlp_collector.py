"""tests/otlp_collector.py: an export is counted as it comes and made into spans when they are asked for, in order."""

from __future__ import annotations

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from machinery.tracing import STEP_DURATION
from tests.otlp_collector import Collector


class _Keep(SpanExporter):
    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def export(self, spans: object) -> SpanExportResult:
        self.spans.extend(spans)  # type: ignore[call-overload]
        return SpanExportResult.SUCCESS


def _spans(*names: str) -> list[ReadableSpan]:
    kept = _Keep()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(kept))
    tracer = provider.get_tracer("test")
    for name in names:
        span = tracer.start_span(name, attributes={"k8s.verb": "create"})
        span.add_event("apiserver.etcd", {"k8s.etcd.op": "txn", STEP_DURATION: 5}, timestamp=100)
        span.end()
    return kept.spans


def test_exports_are_counted_at_once_and_decoded_when_asked_in_order() -> None:
    collector = Collector({"apiserver.request"})
    collector.Export(encode_spans(_spans("apiserver.request", "other")), None)
    collector.Export(encode_spans(_spans("apiserver.request")), None)
    assert (collector.received, collector.exports) == (3, 2)
    assert collector.spans == []  # nothing decoded yet
    first, second = collector.find("apiserver.request", {"k8s.verb": "create"})
    assert first.start_ns < second.start_ns
    assert [(s.name, s.start_ns, s.end_ns, s.attributes) for s in first.steps] == [
        ("apiserver.etcd", 100, 105, {"k8s.etcd.op": "txn"})]
    collector.Export(encode_spans(_spans("apiserver.request")), None)
    assert len(collector.snapshot()) == 3  # the earlier spans once each, the new export's after them
    assert collector.snapshot()[:2] == [first, second]
