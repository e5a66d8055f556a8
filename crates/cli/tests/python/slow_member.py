"""A confluent-kafka group member whose processing outlasts max.poll.interval.ms.

usage: slow_member.py BOOTSTRAP TOPIC GROUP CLIENT_ID STALLS STALL_MS
Joins GROUP with max.poll.interval.ms = session.timeout.ms = half of STALL_MS,
and STALLS times: reads a record, commits it, prints "read P O", then does not
poll for STALL_MS ("stalled N"), as a handler stuck on one record would. librdkafka then
leaves the group by itself; the next poll joins it again with a new member id.
Prints "done" and leaves cleanly after the last stall.
"""
import sys
import time

import confluent_kafka

bootstrap, topic, group, client_id, stalls, stall_ms = sys.argv[1:7]
stall_ms = int(stall_ms)
consumer = confluent_kafka.Consumer(
    {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "client.id": client_id,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": stall_ms // 2,
        "heartbeat.interval.ms": max(100, stall_ms // 10),
        "max.poll.interval.ms": stall_ms // 2,
    }
)
consumer.subscribe([topic])
for n in range(1, int(stalls) + 1):
    while True:
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            break
    try:
        consumer.commit(message=msg, asynchronous=False)
    except confluent_kafka.KafkaException:
        pass  # the group moved on while this member was out: what a stuck handler meets
    print("read %d %d" % (msg.partition(), msg.offset()), flush=True)
    time.sleep(stall_ms / 1000)
    print("stalled %d" % n, flush=True)
consumer.close()
print("done", flush=True)
