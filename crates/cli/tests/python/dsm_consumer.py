"""A consumer instrumented by the real ddtrace, with Data Streams Monitoring on.

usage: dsm_consumer.py BOOTSTRAP TOPIC GROUP COUNT
Reads COUNT records in GROUP, committing each one (ddtrace reports a commit only
when commit() is given a message or offsets), then stays alive for the flush.
"""
import sys
import time

import ddtrace

ddtrace.patch(kafka=True)
import confluent_kafka  # noqa: E402  (must be imported after patching)

bootstrap, topic, group, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
consumer = confluent_kafka.Consumer(
    {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
)
consumer.subscribe([topic])
seen = 0
while seen < count:
    msg = consumer.poll(1.0)
    if msg is None or msg.error():
        continue
    seen += 1
    consumer.commit(message=msg, asynchronous=False)
print("consumed %d" % seen, flush=True)
while True:
    time.sleep(1)
