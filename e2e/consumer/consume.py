"""A consumer hivedr did not write: Confluent's Python client with the schema
registry's Avro deserializer reads hivedr's topics (TestConsumer*).

Reads the committed records (isolation.level read_committed) of the given
topics from their beginning and prints each as one JSON line: topic,
partition, offset, timestamp (ms), key, headers and value, the value as the
deserializer returns it (a dict per record, unions unwrapped) with
timestamp-millis values written as RFC 3339 UTC with milliseconds, the way
`hivedr cat` prints them. Stops after --expect records, or when --timeout
seconds pass without reaching that many (exit 1).
"""

import argparse
import datetime
import json
import sys
import time
import uuid

from confluent_kafka import Consumer, KafkaError
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext


def plain(v):
    """Makes v JSON-able: datetimes as hivedr cat's RFC 3339 strings."""
    if isinstance(v, datetime.datetime):
        v = v.astimezone(datetime.timezone.utc)
        return v.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (v.microsecond // 1000)
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    return v


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--brokers", required=True)
    ap.add_argument("--registry", required=True)
    ap.add_argument("--expect", type=int, required=True)
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("topics", nargs="+")
    args = ap.parse_args()

    # No reader schema: every record is decoded with its writer's schema,
    # fetched from the registry by the ID in its header, as hivedr does.
    deser = AvroDeserializer(SchemaRegistryClient({"url": args.registry}))
    consumer = Consumer({
        "bootstrap.servers": args.brokers,
        "group.id": "hivedr-e2e-py-" + uuid.uuid4().hex,
        "isolation.level": "read_committed",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    })
    consumer.subscribe(args.topics)
    got = 0
    deadline = time.monotonic() + args.timeout
    try:
        while got < args.expect and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    continue
                raise SystemExit("consume: %s" % msg.error())
            value = deser(msg.value(), SerializationContext(msg.topic(), MessageField.VALUE, msg.headers()))
            print(json.dumps({
                "topic": msg.topic(),
                "partition": msg.partition(),
                "offset": msg.offset(),
                "timestamp_ms": msg.timestamp()[1],
                "key": msg.key().decode() if msg.key() is not None else "",
                "headers": {k: v.decode() for k, v in (msg.headers() or [])},
                "value": plain(value),
            }, sort_keys=True))
            got += 1
    finally:
        consumer.close()
    if got < args.expect:
        print("consume: %d records of %d in %ss" % (got, args.expect, args.timeout), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
