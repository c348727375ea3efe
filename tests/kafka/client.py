#!/usr/bin/env python3
"""A real Kafka client (confluent-kafka, i.e. librdkafka) for partlog's broker tests.

    client.py create-topic BOOTSTRAP TOPIC [--partitions N] [--config KEY=VALUE]...
    client.py leaders      BOOTSTRAP TOPIC
    client.py produce      BOOTSTRAP TOPIC [--partition P | --partitioner NAME] [--compression C]
                           [--transactional-id ID [--abort]] [--idempotent]   < record lines
    client.py consume      BOOTSTRAP TOPIC [--partition P] [--from OFFSET]
                           [--isolation read_uncommitted|read_committed]
    client.py consume-group BOOTSTRAP TOPIC --group G --count N [--client-id ID] [--stay]

Records travel as one line each, tab-separated, the same format on stdin and stdout, so the Rust
harness (tests/common/broker.rs) needs no JSON parser:

    offset  timestamp  key  value  headers

- key and value: lowercase hex of the bytes; `-` for null (a null value is a tombstone), and an
  empty field for zero bytes;
- headers: `-` for none, else comma-separated `hexkey=hexvalue` (`hexkey=-` for a null value);
- on stdin (produce), offset is ignored (write `-`) and timestamp `-` means "now".

produce prints each record as the broker acknowledged it, with its offset, in input order. With
--partitioner NAME (librdkafka's `partitioner`, e.g. murmur2_random, Java's), the records name no
partition: the client's partitioner places them, and each line gets a sixth field, the partition.
consume prints every record from --from up to the end of the partition (it stops at the first
partition-EOF event), skipping control records as every consumer does.
consume-group subscribes to TOPIC in group G (the classic protocol, from the earliest offset),
reads N records, commits its positions synchronously and prints each committed partition as
`partition<TAB>offset`. With --stay it then exits without closing the consumer, so that it
stays a member of the group (its session lasts 5 minutes) and the group's record keeps it.

Every wait is bounded (--timeout, default 60 s); on a timeout or an error the script exits
non-zero with a message on stderr. Only 127.0.0.1 brokers are expected: nothing here resolves
other hosts.
"""

import argparse
import os
import sys
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def fail(message):
    print(f"client.py: {message}", file=sys.stderr)
    sys.exit(1)


def hex_or_null(data):
    return "-" if data is None else bytes(data).hex()


def parse_hex_or_null(field):
    return None if field == "-" else bytes.fromhex(field)


def format_headers(headers):
    if not headers:
        return "-"
    parts = []
    for key, value in headers:
        key_bytes = key.encode("utf-8") if isinstance(key, str) else bytes(key)
        parts.append(f"{key_bytes.hex()}={hex_or_null(value)}")
    return ",".join(parts)


def parse_headers(field):
    if field == "-":
        return []
    headers = []
    for part in field.split(","):
        key, _, value = part.partition("=")
        headers.append((bytes.fromhex(key).decode("utf-8"), parse_hex_or_null(value)))
    return headers


def format_record(offset, timestamp, key, value, headers):
    return "\t".join(
        [str(offset), str(timestamp), hex_or_null(key), hex_or_null(value), format_headers(headers)]
    )


def parse_input_line(line):
    """Returns (timestamp or None, key, value, headers) of one stdin record line."""
    fields = line.rstrip("\n").split("\t")
    if len(fields) != 5:
        fail(f"expected 5 tab-separated fields, got {len(fields)}: {line!r}")
    _offset, timestamp, key, value, headers = fields
    return (
        None if timestamp == "-" else int(timestamp),
        parse_hex_or_null(key),
        parse_hex_or_null(value),
        parse_headers(headers),
    )


def base_config(bootstrap):
    # A loopback single-node cluster: IPv4 only, quick retries, and no client-side DNS tricks.
    return {
        "bootstrap.servers": bootstrap,
        "broker.address.family": "v4",
        "socket.timeout.ms": 10000,
        "reconnect.backoff.ms": 50,
        "reconnect.backoff.max.ms": 500,
    }


def wait_for_leaders(bootstrap, topic, partitions, timeout):
    """Polls metadata until every partition of `topic` has a leader."""
    admin = AdminClient(base_config(bootstrap))
    deadline = time.monotonic() + timeout
    while True:
        try:
            metadata = admin.list_topics(topic=topic, timeout=5)
            described = metadata.topics.get(topic)
            if described is not None and described.error is None:
                leaders = [p.leader for p in described.partitions.values()]
                if len(leaders) == partitions and all(leader >= 0 for leader in leaders):
                    return
        except KafkaException:
            pass
        if time.monotonic() > deadline:
            fail(f"topic {topic} has no leader for all {partitions} partitions after {timeout}s")
        time.sleep(0.1)


def create_topic(bootstrap, topic, partitions=1, config=None, timeout=60):
    admin = AdminClient(base_config(bootstrap))
    new_topic = NewTopic(topic, num_partitions=partitions, replication_factor=1, config=config or {})
    futures = admin.create_topics([new_topic], operation_timeout=timeout, request_timeout=timeout)
    try:
        futures[topic].result(timeout=timeout)
    except Exception as error:  # KafkaException or a timeout: either way the topic is not there
        fail(f"creating topic {topic}: {error}")
    wait_for_leaders(bootstrap, topic, partitions, timeout)


def leaders(bootstrap, topic, timeout=60):
    """[(partition, leader, [isr...])], leader -1 when none."""
    admin = AdminClient(base_config(bootstrap))
    try:
        metadata = admin.list_topics(topic=topic, timeout=timeout)
    except KafkaException as error:
        fail(f"metadata for {topic}: {error}")
    described = metadata.topics.get(topic)
    if described is None or described.error is not None:
        fail(f"metadata for {topic}: {None if described is None else described.error}")
    return sorted((p.id, p.leader, list(p.isrs)) for p in described.partitions.values())


class Acks:
    """Collects delivery reports by input position; a failed delivery is fatal."""

    def __init__(self):
        self.delivered = {}

    def for_record(self, index):
        def callback(error, message):
            if error is not None:
                fail(f"delivery failed: {error}")
            self.delivered[index] = message

        return callback


def produce(
    bootstrap,
    topic,
    records,
    partition=0,
    compression="none",
    transactional_id=None,
    abort=False,
    idempotent=False,
    extra_config=None,
    timeout=60,
    partitioner=None,
):
    """Sends `records` [(timestamp or None, key, value, headers)] as one batch where possible and
    returns the acknowledged [(offset, timestamp, key, value, headers, partition)] in input order.
    With a `partitioner`, the records name no partition and that librdkafka partitioner places
    them.

    With a transactional id, the records form one transaction, committed or (abort=True) aborted
    after they have been written to the log: the flush before the abort makes the broker store
    them, so the log holds aborted data followed by an ABORT marker."""
    config = base_config(bootstrap)
    config.update(
        {
            "compression.type": compression,
            # One batch per call: nothing is sent until flush().
            "linger.ms": 10000,
            "batch.num.messages": 100000,
            "acks": "all",
            "enable.idempotence": idempotent or transactional_id is not None,
        }
    )
    if transactional_id is not None:
        config["transactional.id"] = transactional_id
    if partitioner is not None:
        config["partitioner"] = partitioner
    config.update(extra_config or {})
    producer = Producer(config)
    acks = Acks()
    if transactional_id is not None:
        producer.init_transactions(timeout)
        producer.begin_transaction()
    for index, (timestamp, key, value, headers) in enumerate(records):
        kwargs = {"key": key, "value": value, "on_delivery": acks.for_record(index)}
        if partitioner is None:
            kwargs["partition"] = partition
        if timestamp is not None:
            kwargs["timestamp"] = timestamp
        if headers:
            kwargs["headers"] = headers
        producer.produce(topic, **kwargs)
    if producer.flush(timeout) != 0:
        fail(f"{len(producer)} records still unacknowledged after {timeout}s")
    if transactional_id is not None:
        if abort:
            producer.abort_transaction(timeout)
        else:
            producer.commit_transaction(timeout)
    if len(acks.delivered) != len(records):
        fail(f"{len(acks.delivered)} of {len(records)} records acknowledged")
    acked = []
    for index, (_timestamp, key, value, headers) in enumerate(records):
        message = acks.delivered[index]
        _type, timestamp = message.timestamp()
        acked.append((message.offset(), timestamp, key, value, headers, message.partition()))
    return acked


def consume(bootstrap, topic, partition=0, start=0, isolation="read_uncommitted", timeout=60):
    """Every record of the partition from `start` to its end, as
    [(offset, timestamp, key, value, headers)]."""
    config = base_config(bootstrap)
    config.update(
        {
            "group.id": "partlog-tests",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": isolation,
            "auto.offset.reset": "error",
        }
    )
    consumer = Consumer(config)
    consumer.assign([TopicPartition(topic, partition, start)])
    records = []
    deadline = time.monotonic() + timeout
    try:
        while True:
            if time.monotonic() > deadline:
                fail(f"no end of {topic}-{partition} after {timeout}s ({len(records)} records)")
            message = consumer.poll(0.5)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    return records
                fail(f"consuming {topic}-{partition}: {error}")
            _type, timestamp = message.timestamp()
            records.append(
                (message.offset(), timestamp, message.key(), message.value(), message.headers())
            )
    finally:
        consumer.close()


def consume_group(bootstrap, topic, group, count, client_id, stay, timeout=60):
    """Reads `count` records of `topic` as a member of `group`, commits, and returns the
    committed [(partition, offset)]. With `stay`, the caller exits without closing."""
    config = base_config(bootstrap)
    config.update(
        {
            "group.id": group,
            "client.id": client_id,
            "group.protocol": "classic",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            # Long enough that the member outlives this process until the test stops the broker.
            "session.timeout.ms": 300000,
        }
    )
    consumer = Consumer(config)
    consumer.subscribe([topic])
    read = 0
    deadline = time.monotonic() + timeout
    while read < count:
        if time.monotonic() > deadline:
            fail(f"{read} of {count} records of {topic} read in group {group} after {timeout}s")
        message = consumer.poll(0.5)
        if message is None:
            continue
        if message.error() is not None:
            fail(f"consuming {topic} in group {group}: {message.error()}")
        read += 1
    committed = consumer.commit(asynchronous=False)
    for tp in committed:
        if tp.error is not None:
            fail(f"commit of {tp.topic}-{tp.partition} failed: {tp.error}")
    if not stay:
        consumer.close()
    return sorted((tp.partition, tp.offset) for tp in committed)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)

    create = commands.add_parser("create-topic")
    create.add_argument("--partitions", type=int, default=1)
    create.add_argument("--config", action="append", default=[], metavar="KEY=VALUE")

    commands.add_parser("leaders")

    send = commands.add_parser("produce")
    send.add_argument("--partition", type=int, default=0)
    send.add_argument("--partitioner")
    send.add_argument("--compression", default="none")
    send.add_argument("--transactional-id")
    send.add_argument("--abort", action="store_true")
    send.add_argument("--idempotent", action="store_true")

    receive = commands.add_parser("consume")
    receive.add_argument("--partition", type=int, default=0)
    receive.add_argument("--from", dest="start", type=int, default=0)
    receive.add_argument(
        "--isolation", choices=["read_uncommitted", "read_committed"], default="read_uncommitted"
    )

    member = commands.add_parser("consume-group")
    member.add_argument("--group", required=True)
    member.add_argument("--count", type=int, required=True)
    member.add_argument("--client-id", default="partlog-tests")
    member.add_argument("--stay", action="store_true")

    for command in (create, commands.choices["leaders"], send, receive, member):
        command.add_argument("bootstrap")
        command.add_argument("topic")
        command.add_argument("--timeout", type=float, default=60)

    args = parser.parse_args()
    if args.command == "create-topic":
        config = dict(item.split("=", 1) for item in args.config)
        create_topic(args.bootstrap, args.topic, args.partitions, config, args.timeout)
    elif args.command == "leaders":
        for partition, leader, isr in leaders(args.bootstrap, args.topic, args.timeout):
            print(f"{partition}\t{leader}\t{','.join(map(str, isr)) or '-'}")
    elif args.command == "produce":
        records = [parse_input_line(line) for line in sys.stdin if line.strip()]
        acked = produce(
            args.bootstrap,
            args.topic,
            records,
            partition=args.partition,
            compression=args.compression,
            transactional_id=args.transactional_id,
            abort=args.abort,
            idempotent=args.idempotent,
            timeout=args.timeout,
            partitioner=args.partitioner,
        )
        for *record, partition in acked:
            line = format_record(*record)
            print(f"{line}\t{partition}" if args.partitioner else line)
    elif args.command == "consume":
        for record in consume(
            args.bootstrap, args.topic, args.partition, args.start, args.isolation, args.timeout
        ):
            print(format_record(*record))
    elif args.command == "consume-group":
        committed = consume_group(
            args.bootstrap,
            args.topic,
            args.group,
            args.count,
            args.client_id,
            args.stay,
            args.timeout,
        )
        for partition, offset in committed:
            print(f"{partition}\t{offset}")
        if args.stay:
            sys.stdout.flush()
            # No close, no destructors: the member does not leave the group.
            os._exit(0)


if __name__ == "__main__":
    main()
