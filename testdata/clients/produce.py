"""Produce events as a real client writes them, for fraudwatch's tests
(cmd/fraudwatch/app/clients_test.go): Python's confluent-kafka, that is
librdkafka, with the settings a payments team's services use.

    python produce.py BROKERS TOPIC CODEC MODE PARTITION < events

CODEC is librdkafka's compression.type (none, gzip, snappy, lz4, zstd).
MODE is idempotent (enable.idempotence), acks-all, or transactions
(transactional.id): then a line COMMIT commits the events before it and a
line ABORT aborts them, after they were written to the log. Every other
non-empty line is an event, sent as it is to PARTITION, keyed by its
customer. Exits non-zero when a delivery or a transaction fails.
"""
import json
import sys

from confluent_kafka import Producer

brokers, topic, codec, mode, partition = sys.argv[1:6]
conf = {"bootstrap.servers": brokers, "compression.type": codec, "linger.ms": 5}
if mode == "idempotent":
    conf["enable.idempotence"] = True
elif mode == "acks-all":
    conf["acks"] = "all"
elif mode == "transactions":
    conf["transactional.id"] = "fraudwatch-test-" + topic
else:
    sys.exit("mode: idempotent, acks-all or transactions")
producer = Producer(conf)
failed = []


def delivered(err, _msg):
    if err is not None:
        failed.append(str(err))


def send(line):
    key = json.loads(line).get("customer_id", "").encode()
    producer.produce(topic, value=line.encode(), key=key, partition=int(partition), on_delivery=delivered)


if mode == "transactions":
    producer.init_transactions(30)
    producer.begin_transaction()
for line in sys.stdin:
    line = line.strip()
    if line in ("COMMIT", "ABORT") and mode == "transactions":
        producer.flush(30)  # the events are in the log before the marker
        if line == "COMMIT":
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
        producer.begin_transaction()
    elif line:
        send(line)
if mode == "transactions":
    producer.abort_transaction(30)  # the last one, begun and empty
if producer.flush(30) != 0:
    failed.append("undelivered after 30 s")
if failed:
    sys.exit("delivery failed: " + "; ".join(failed))
