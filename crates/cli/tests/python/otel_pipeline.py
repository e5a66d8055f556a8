"""A producer and a consumer on confluent-kafka, instrumented by the real
opentelemetry-instrumentation-confluent-kafka, exporting spans and logs over
OTLP/HTTP (protobuf) with opentelemetry-exporter-otlp-proto-http.

usage: otel_pipeline.py BOOTSTRAP TOPIC GROUP OTLP_URL COUNT FAIL_INDEX
Produces COUNT records to partition 0 and prints each one's trace id and
offset; consumes them with GROUP, logging one line per record, and fails the
processing of record FAIL_INDEX (its span's status is an error); then flushes
and prints "done".
"""
import logging
import sys

import confluent_kafka
from opentelemetry import trace
from opentelemetry._logs import set_logger_provider
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.confluent_kafka import ConfluentKafkaInstrumentor
from opentelemetry.sdk._logs import LoggerProvider, LoggingHandler
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import Status, StatusCode

bootstrap, topic, group, otlp, count, fail = sys.argv[1:7]
count, fail = int(count), int(fail)

resource = Resource.create({"service.name": "shop-pipeline"})
tracer_provider = TracerProvider(resource=resource)
tracer_provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=otlp + "/v1/traces")))
trace.set_tracer_provider(tracer_provider)
logger_provider = LoggerProvider(resource=resource)
logger_provider.add_log_record_processor(SimpleLogRecordProcessor(OTLPLogExporter(endpoint=otlp + "/v1/logs")))
set_logger_provider(logger_provider)
log = logging.getLogger("billing")
log.setLevel(logging.INFO)
log.addHandler(LoggingHandler(level=logging.INFO, logger_provider=logger_provider))

instrumentor = ConfluentKafkaInstrumentor()
producer = instrumentor.instrument_producer(confluent_kafka.Producer({"bootstrap.servers": bootstrap}))
offsets = {}


def delivered(err, msg):
    if err is None:
        offsets[msg.value()] = msg.offset()


sent = []
for i in range(count):
    headers = []
    value = b"order-%d" % i
    producer.produce(topic, value=value, partition=0, headers=headers, on_delivery=delivered)
    traceparent = dict(headers).get("traceparent", b"").decode()
    sent.append((value, traceparent.split("-")[1] if traceparent else ""))
    producer.poll(0)
producer.flush(30)
for value, trace_id in sent:
    print("sent %s trace_id=%s offset=%d" % (value.decode(), trace_id, offsets.get(value, -1)), flush=True)

consumer = instrumentor.instrument_consumer(
    confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
)
consumer.subscribe([topic])
seen = 0
while seen < count:
    msg = consumer.poll(5)
    if msg is None or msg.error():
        continue
    index = int(msg.value().decode().split("-")[1])
    span = trace.get_current_span()
    if index == fail:
        log.error("charging %s failed: card declined", msg.value().decode())
        span.set_status(Status(StatusCode.ERROR, "CardDeclined"))
        span.set_attribute("error.type", "CardDeclined")
    else:
        log.info("charged %s", msg.value().decode())
    consumer.commit(message=msg, asynchronous=False)
    seen += 1
# Ends the last record's process span.
consumer.poll(0.5)
consumer.close()
tracer_provider.force_flush()
logger_provider.force_flush()
print("done", flush=True)
