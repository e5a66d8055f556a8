"""A member of a consumer group, with the real confluent-kafka client.

usage: group_member.py BOOTSTRAP TOPIC GROUP CLIENT_ID COUNT [PROTOCOL [INSTANCE_ID]]
Joins GROUP (with PROTOCOL: classic, the default, or consumer: KIP-848's
server-side assignment, where the session is the broker's), reads COUNT records committing each (with 0: none, once assigned), printing "first P O" for the
first record it reads of each partition and then "read N". Then it stays a
member, its partitions paused, until a line "close" (or end of input) arrives
on stdin: then it leaves the group and exits (with INSTANCE_ID a static
member, KIP-345: closing does not leave, and the next start with the same id
takes its place without a rebalance).
"""
import sys
import threading

import confluent_kafka

bootstrap, topic, group, client_id, count = sys.argv[1:6]
protocol = sys.argv[6] if len(sys.argv) > 6 else "classic"
instance = sys.argv[7] if len(sys.argv) > 7 else None
count = int(count)
config = {
    "bootstrap.servers": bootstrap,
    "group.id": group,
    "client.id": client_id,
    "auto.offset.reset": "earliest",
    "enable.auto.commit": False,
    "group.protocol": protocol,
}
if protocol == "classic":
    config.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
if instance:
    config["group.instance.id"] = instance
consumer = confluent_kafka.Consumer(config)
consumer.subscribe([topic])
seen = 0
first = set()
# COUNT 0: a member that joins and commits nothing (one crash-looping before
# its first commit): it polls until it is assigned partitions.
while count == 0 and not consumer.assignment():
    consumer.poll(0.2)
while seen < count:
    msg = consumer.poll(0.5)
    if msg is None or msg.error():
        continue
    seen += 1
    if msg.partition() not in first:
        first.add(msg.partition())
        print("first %d %d" % (msg.partition(), msg.offset()), flush=True)
    consumer.commit(message=msg, asynchronous=False)
print("read %d" % seen, flush=True)

closing = threading.Event()


def wait_for_close():
    for line in sys.stdin:
        if line.strip() == "close":
            break
    closing.set()


threading.Thread(target=wait_for_close, daemon=True).start()
while not closing.is_set():
    consumer.pause(consumer.assignment())
    consumer.poll(0.2)
consumer.close()
print("closed", flush=True)
