"""A producer instrumented by the real ddtrace, with Data Streams Monitoring on.

usage: dsm_producer.py BOOTSTRAP TOPIC COUNT
Produces COUNT records to partition 0, prints what was acknowledged, then stays
alive so that the tracer's periodic flush sends its Data Streams payloads.
"""
import sys
import time

import ddtrace

ddtrace.patch(kafka=True)
import confluent_kafka  # noqa: E402  (must be imported after patching)

bootstrap, topic, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
acked = []


def delivered(err, msg):
    if err is None:
        acked.append(msg.offset())


for i in range(count):
    producer.produce(topic, value=b"order-%d" % i, partition=0, on_delivery=delivered)
    producer.poll(0)
producer.flush(30)
print("produced %d last_offset=%d" % (len(acked), max(acked)), flush=True)
while True:
    time.sleep(1)
