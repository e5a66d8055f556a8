"""A producer and a consumer on confluent-kafka, instrumented by the real
opentelemetry-instrumentation-confluent-kafka, exporting spans and logs over
OTLP/HTTP (protobuf) with opentelemetry-exporter-otlp-proto-http.

usage: otel_pipeline.py BOOTSTRAP TOPIC GROUP OTLP_URL COUNT FAIL_INDEX [STEP_FAIL_INDEX DEAD_INDEX]
Produces COUNT records to partition 0 and prints each one's trace id and
offset; consumes them with GROUP, logging one line per record, and fails the
processing of record FAIL_INDEX (its span's status is an error). Record
STEP_FAIL_INDEX fails in a step of the application's own (a child span
`process_order` in error and an ERROR log line) while the instrumentation's
process span ends well. Record DEAD_INDEX is dead-lettered to TOPIC.dlq with
streamsight's provenance headers, through the instrumented producer, keeping
the message's own timestamp (as some DLQ writers do). Then flushes and prints
"done".
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
step_fail = int(sys.argv[7]) if len(sys.argv) > 7 else -1
dead = int(sys.argv[8]) if len(sys.argv) > 8 else -1
tracer = trace.get_tracer("refund-svc")

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
    # The topic by keyword, as many services write it.
    producer.produce(topic=topic, value=value, partition=0, headers=headers, on_delivery=delivered)
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
    elif index == step_fail:
        with tracer.start_as_current_span("process_order") as step:
            log.error("refunding %s failed: card expired", msg.value().decode())
            step.set_status(Status(StatusCode.ERROR, "CardExpired"))
            step.set_attribute("error.type", "CardExpired")
    elif index == dead:
        log.error("charging %s failed: dead-lettered", msg.value().decode())
        traceparent = dict(msg.headers() or []).get("traceparent", b"").decode()
        provenance = [
            ("streamsight.dlq.source.topic", msg.topic().encode()),
            ("streamsight.dlq.source.partition", str(msg.partition()).encode()),
            ("streamsight.dlq.source.offset", str(msg.offset()).encode()),
            ("streamsight.dlq.consumer.group", group.encode()),
            ("streamsight.dlq.stage", b"processing"),
            ("streamsight.dlq.error.class", b"CardDeclined"),
            ("streamsight.dlq.trace.id", traceparent.split("-")[1].encode() if traceparent else b""),
        ]
        producer.produce(topic + ".dlq", value=msg.value(), headers=provenance, timestamp=msg.timestamp()[1])
        producer.flush(30)
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
