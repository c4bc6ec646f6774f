"""W3C trace context through message headers, with OpenTelemetry itself.

doc/headers.md shows a producer (``send``, ``publish``) and a worker
(``process_one``) written against ``opentelemetry-api``.  This module runs
exactly that block (the page's ``python tracing`` fence), with
``opentelemetry-sdk``'s tracer provider and an in-memory span exporter in
place of the application's, and checks what a user of a tracing backend
relies on: the worker's span is in the producer's trace, with the
producer's span as its parent, on the first delivery, on the delivery after
a failed attempt, and in every channel a topic publish reaches.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

PAGE = Path(__file__).resolve().parents[2] / "doc" / "headers.md"


def doc_block() -> str:
    found = re.findall(r"^```python tracing\n(.*?)^```$", PAGE.read_text(), re.M | re.S)
    assert len(found) == 1, f"{PAGE}: expected one ```python tracing block, found {len(found)}"
    return found[0]


@pytest.fixture
def traced():
    """The doc's block, its tracer taken from an SDK provider whose spans end
    in memory."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    namespace: dict = {}
    exec(compile(doc_block(), str(PAGE), "exec"), namespace)  # noqa: S102 - the documented code, on purpose
    namespace["tracer"] = provider.get_tracer("shop.orders")
    yield namespace, exporter, provider.get_tracer("test")
    provider.shutdown()


def spans_named(exporter, prefix):
    return [s for s in exporter.get_finished_spans() if s.name.startswith(prefix)]


def test_the_workers_span_is_a_child_of_the_producers(db, traced):
    doc, exporter, test_tracer = traced
    producer, worker = db.connect(), db.connect()
    handled = []
    with test_tracer.start_as_current_span("POST /orders") as request:
        message_id = doc["send"](producer, "orders", b"order 42")
    headers = producer.execute("SELECT headers FROM lonnymq.message WHERE id = %s", (message_id,)).fetchone()[0]
    assert set(headers) == {"traceparent"}, headers
    assert doc["process_one"](worker, handled.append) == message_id
    assert handled == [b"order 42"]
    assert doc["process_one"](worker, handled.append) is None  # nothing more

    (send,) = spans_named(exporter, "send orders")
    (process,) = spans_named(exporter, "process orders")
    trace_id = request.get_span_context().trace_id
    assert send.context.trace_id == trace_id and send.kind == SpanKind.PRODUCER
    assert process.context.trace_id == trace_id, "the worker's span is not in the producer's trace"
    assert process.parent.span_id == send.context.span_id, "the worker's parent is not the producer's span"
    assert process.parent.is_remote and process.kind == SpanKind.CONSUMER
    version, header_trace_id, header_span_id, flags = headers["traceparent"].split("-")
    assert (version, header_trace_id, header_span_id) == ("00", f"{trace_id:032x}", f"{send.context.span_id:016x}")
    assert int(flags, 16) & 1, "the sampled flag is carried"
    assert process.attributes["messaging.message.id"] == str(message_id)


def test_the_delivery_after_a_failed_attempt_joins_the_same_trace(db, traced):
    doc, exporter, test_tracer = traced
    producer, worker = db.connect(), db.connect()
    producer.execute("SELECT lonnymq.channel_set('retried', p_max_attempts => 3, p_backoff_base_ms => 0)")
    with test_tracer.start_as_current_span("nightly import") as root:
        message_id = doc["send"](producer, "retried", b"flaky")
    attempts = []

    def handle(content):
        attempts.append(content)
        if len(attempts) == 1:
            raise RuntimeError("the first attempt fails")

    assert doc["process_one"](worker, handle) == message_id
    assert doc["process_one"](worker, handle) == message_id
    assert attempts == [b"flaky", b"flaky"]
    assert producer.execute("SELECT count(*) FROM lonnymq.message WHERE id = %s", (message_id,)).fetchone()[0] == 0

    (send,) = spans_named(exporter, "send retried")
    first, second = spans_named(exporter, "process retried")
    assert [s.attributes["messaging.lonnymq.attempt"] for s in (first, second)] == [1, 2]
    assert first.status.status_code == StatusCode.ERROR and second.status.status_code != StatusCode.ERROR
    for span in (first, second):
        assert span.context.trace_id == root.get_span_context().trace_id
        assert span.parent.span_id == send.context.span_id


def test_every_channel_a_publish_reaches_joins_the_publishers_trace(db, traced):
    doc, exporter, test_tracer = traced
    producer, worker = db.connect(), db.connect()
    producer.execute("SELECT lonnymq.topic_bind('order.*', 'mail'), lonnymq.topic_bind('order.*', 'billing')")
    with test_tracer.start_as_current_span("checkout") as root:
        assert doc["publish"](producer, "order.paid", b"paid") == 2
    handled = []
    while doc["process_one"](worker, handled.append) is not None:
        pass
    assert handled == [b"paid", b"paid"]

    (publish,) = spans_named(exporter, "publish order.paid")
    processed = spans_named(exporter, "process ")
    assert sorted(s.attributes["messaging.destination.name"] for s in processed) == ["billing", "mail"]
    for span in processed:
        assert span.context.trace_id == root.get_span_context().trace_id
        assert span.parent.span_id == publish.context.span_id


def test_without_a_tracer_provider_the_headers_stay_empty(db):
    """The documented code with opentelemetry-api alone (no SDK configured):
    no trace to carry, and the message goes through."""
    namespace: dict = {}
    exec(compile(doc_block(), str(PAGE), "exec"), namespace)  # noqa: S102
    producer, worker = db.connect(), db.connect()
    message_id = namespace["send"](producer, "plain", b"x")
    assert producer.execute("SELECT headers FROM lonnymq.message WHERE id = %s", (message_id,)).fetchone()[0] == {}
    assert namespace["process_one"](worker, lambda content: None) == message_id
