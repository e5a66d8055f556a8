"""Writes one batch per compression codec, and one transactional batch, with
the real confluent-kafka client.

usage: compressed_producer.py BOOTSTRAP TOPIC
Partition 0 gets, in order, a batch of three records compressed with each of
none, gzip, snappy, lz4 and zstd, then three records in a committed
transaction. Prints "wrote CODEC OFFSET VALUE" for each record, then "done".
"""
import sys

import confluent_kafka

bootstrap, topic = sys.argv[1:3]


def delivered(codec):
    def report(err, msg):
        if err is not None:
            sys.exit("delivery failed: %s" % err)
        print("wrote %s %d %s" % (codec, msg.offset(), msg.value().decode()), flush=True)

    return report


for codec in ["none", "gzip", "snappy", "lz4", "zstd"]:
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 50}
    )
    for i in range(3):
        value = ("%s record %d " % (codec, i)) + "x" * 200
        producer.produce(topic, value=value.encode(), key=("%s-%d" % (codec, i)).encode(), partition=0,
                         on_delivery=delivered(codec))
    producer.flush(30)

txn = confluent_kafka.Producer(
    {"bootstrap.servers": bootstrap, "transactional.id": "compressed-%s" % topic, "compression.type": "zstd"}
)
txn.init_transactions(30)
txn.begin_transaction()
for i in range(3):
    txn.produce(topic, value=("transactional record %d" % i).encode(), partition=0,
                on_delivery=delivered("transactional"))
txn.commit_transaction(30)
txn.flush(30)
print("done", flush=True)
