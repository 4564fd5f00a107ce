"""``pykbroker consume``: print records, like Kafka's ``kafka-console-consumer.sh`` (and kcat -C).

Where to start: the group's committed offsets (with ``--group``), else ``--from-beginning``,
``--offset earliest|latest|N`` or ``--from-timestamp MS`` (the first record at or after it, by
ListOffsets), else the end (Kafka's default).  When to stop: ``--max-messages N``, ``--timeout-ms``
without a record, ``--exit-at-end`` (every partition read up to its end as of when it was
reached: the high watermark, or the last stable offset with read_committed), or Ctrl-C.

Without ``--group`` the partitions are assigned directly and no offset is committed (librdkafka
needs a ``group.id`` all the same: an unused one is set).  With ``--group`` and no explicit
position, the consumer subscribes as a group member and commits; with a position (``--partition``,
``--offset``, ``--from-timestamp``) it is assigned and commits what it consumed to the group.

Formats: ``value`` prints the raw value bytes (``--print-key``: key, separator, value; a null
is printed as ``null`` as Kafka's tool does); ``json`` prints one object per record with topic,
partition, offset, timestamp, timestamp_type, key, value and headers; a key, value or header
value that is not UTF-8 is null there with its bytes in ``key_base64``/``value_base64``/base64.
"""
from __future__ import annotations

import base64
import json
import sys
import time
from typing import TYPE_CHECKING, Any

from . import add_common, parser
from .common import (EXIT_USAGE, Progress, ToolError, ck, client_config, cluster_topics, decode,
                     kafka_message, wait_seconds)

if TYPE_CHECKING:
    import argparse
    import types

    from confluent_kafka import Consumer, TopicPartition

    from . import Subparsers

EXAMPLES = """  pykbroker consume --topic orders --from-beginning --max-messages 10
  pykbroker consume --topic orders --from-beginning --exit-at-end --format json
  pykbroker consume --topic orders --group billing --isolation-level read_committed
  pykbroker consume --topic orders --partition 0 --offset 42 --print-key --key-separator ' => '
  pykbroker consume --topic orders --from-timestamp 1700000000000 --exit-at-end"""

UNUSED_GROUP = "pykbroker-console-consumer"   # never joined nor committed to (assign mode)
TIMESTAMP_TYPES = {0: None, 1: "CreateTime", 2: "LogAppendTime"}


def add_arguments(sub: Subparsers, name: str, help: str) -> None:
    p = parser(sub, name, help, "Consume records and print them.", EXAMPLES)
    add_common(p, json_output=False)
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("--group", help="consumer group (commits its offsets); default: none")
    start = p.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true", help="start at the earliest offset")
    start.add_argument("--offset", help="earliest, latest or an offset (each selected partition)")
    start.add_argument("--from-timestamp", type=int, metavar="MS",
                       help="start at the first record whose timestamp is at or after MS")
    p.add_argument("--partition", type=int, action="append", help="only this partition, repeatable")
    p.add_argument("--max-messages", type=int, help="stop after this many records")
    p.add_argument("--timeout-ms", type=int, help="stop when no record came for this long")
    p.add_argument("--exit-at-end", action="store_true", help="stop at the end of every partition")
    p.add_argument("--isolation-level", default="read_uncommitted", choices=["read_uncommitted", "read_committed"])
    p.add_argument("--format", default="value", choices=["value", "json"],
                   help="value: the value bytes, one a line; json: one JSON object a line")
    p.add_argument("--print-key", action="store_true", help="value format: print the key too")
    p.add_argument("--key-separator", default="\t", help="between key and value (default a tab)")
    p.add_argument("--progress", action="store_true", default=None,
                   help="show count and rate on stderr (default: only when stderr is a terminal)")
    p.add_argument("--no-progress", dest="progress", action="store_false")


def _bytes_field(obj: dict, name: str, data: bytes | None) -> None:
    text = decode(data)
    obj[name] = text
    if text is None and data is not None:
        obj[name + "_base64"] = base64.b64encode(data).decode()


# msg: a confluent_kafka.Message; Any because its annotations allow str keys/values and headers that a
# Consumer without deserializers never returns (bytes, and (key, value) pairs)
def to_json(msg: Any) -> str:
    ts_type, ts = msg.timestamp()
    obj = {"topic": msg.topic(), "partition": msg.partition(), "offset": msg.offset(),
           "timestamp": ts if ts_type else None, "timestamp_type": TIMESTAMP_TYPES.get(ts_type)}
    _bytes_field(obj, "key", msg.key())
    _bytes_field(obj, "value", msg.value())
    headers = []
    for k, v in msg.headers() or []:
        h = {"key": k}
        _bytes_field(h, "value", v)
        headers.append(h)
    obj["headers"] = headers
    return json.dumps(obj)


def _start_offset(args: argparse.Namespace, ckm: types.ModuleType) -> int:
    if args.from_beginning or args.offset == "earliest":
        return ckm.OFFSET_BEGINNING
    if args.offset in (None, "latest"):
        return ckm.OFFSET_END
    try:
        off = int(args.offset)
    except ValueError:
        raise ToolError("--offset expects earliest, latest or a number, got %r" % args.offset, EXIT_USAGE) from None
    if off < 0:
        raise ToolError("--offset must not be negative", EXIT_USAGE)
    return off


def run(args: argparse.Namespace) -> int:
    ckm = ck()
    if args.max_messages is not None and args.max_messages < 0:
        raise ToolError("--max-messages must not be negative", EXIT_USAGE)
    start = _start_offset(args, ckm)
    subscribe = args.group is not None and not (args.partition or args.offset or args.from_timestamp is not None)
    conf = client_config(args, **{
        "group.id": args.group or UNUSED_GROUP,
        "enable.auto.commit": args.group is not None,
        # a group without committed offsets starts where Kafka's console consumer does
        "auto.offset.reset": "earliest" if args.from_beginning else "latest",
        "isolation.level": args.isolation_level,
        "enable.partition.eof": True,
    })
    try:
        consumer = ckm.Consumer(conf)
    except Exception as e:
        raise ToolError("cannot create the consumer: %s" % kafka_message(e), EXIT_USAGE) from None
    assigned: set = set()
    at_end: set = set()
    try:
        if subscribe:
            def on_assign(c: Consumer, parts: list[TopicPartition]) -> None:
                assigned.update((p.topic, p.partition) for p in parts)

            def on_revoke(c: Consumer, parts: list[TopicPartition]) -> None:
                for p in parts:
                    assigned.discard((p.topic, p.partition))
                    at_end.discard((p.topic, p.partition))
            consumer.subscribe([args.topic], on_assign=on_assign, on_revoke=on_revoke)
        else:
            md = cluster_topics(args)
            if args.topic not in md.topics or md.topics[args.topic].error is not None:
                raise ToolError("topic %r does not exist" % args.topic)
            parts = sorted(md.topics[args.topic].partitions)
            if args.partition:
                missing = [p for p in args.partition if p not in parts]
                if missing:
                    raise ToolError("topic %s has no partition %s" % (args.topic, ",".join(map(str, missing))))
                parts = sorted(set(args.partition))
            tps = [ckm.TopicPartition(args.topic, p, start) for p in parts]
            if args.from_timestamp is not None:
                want = [ckm.TopicPartition(args.topic, p, args.from_timestamp) for p in parts]
                try:
                    found = consumer.offsets_for_times(want, timeout=wait_seconds(args))
                except ckm.KafkaException as e:
                    raise ToolError("offsets for timestamp: %s" % kafka_message(e)) from None
                # no record at or after the timestamp: -1, i.e. start at the end
                tps = [ckm.TopicPartition(args.topic, t.partition, t.offset if t.offset >= 0 else ckm.OFFSET_END)
                       for t in found]
            consumer.assign(tps)
            assigned.update((args.topic, p) for p in parts)
        count = _loop(args, ckm, consumer, assigned, at_end)
    finally:
        try:
            consumer.close()   # commits (group) and leaves the group
        except Exception:
            pass
    # After the close, as Kafka's console consumer reports it: whatever librdkafka logs to stderr
    # while closing comes before, so the count stays the last line.
    print("Processed a total of %d messages" % count, file=sys.stderr)
    return 0


def _loop(args: argparse.Namespace, ckm: types.ModuleType, consumer: Consumer, assigned: set,
          at_end: set) -> int:
    """Prints records until a stop condition; the number printed."""
    import signal

    def on_term(signum: int, frame: types.FrameType | None) -> None:
        raise KeyboardInterrupt
    # SIGTERM ends the run as Ctrl-C does: the consumer closes, so a group member leaves at once
    # (killed, it would stay a member until its session times out and block reset-offsets)
    signal.signal(signal.SIGTERM, on_term)
    out = sys.stdout.buffer
    sep = args.key_separator.encode()
    progress = Progress.from_args(args, "consumed")
    count = 0
    last = time.monotonic()
    try:
        while args.max_messages is None or count < args.max_messages:
            if args.exit_at_end and assigned and assigned <= at_end:
                break
            if args.timeout_ms is not None and (time.monotonic() - last) * 1000 >= args.timeout_ms:
                break
            want = 500 if args.max_messages is None else min(500, args.max_messages - count)
            msgs = consumer.consume(num_messages=want, timeout=0.2)
            for msg in msgs:
                err = msg.error()
                if err is not None:
                    if err.code() == ckm.KafkaError._PARTITION_EOF:
                        at_end.add((msg.topic(), msg.partition()))
                        continue
                    if err.fatal() or not err.retriable() and err.code() in (
                            ckm.KafkaError.UNKNOWN_TOPIC_OR_PART, ckm.KafkaError._UNKNOWN_TOPIC,
                            ckm.KafkaError.TOPIC_AUTHORIZATION_FAILED, ckm.KafkaError.GROUP_AUTHORIZATION_FAILED):
                        raise ToolError("consume from %s: %s: %s" % (args.topic, err.name(), err.str()))
                    print("pykbroker consume: %s: %s" % (err.name(), err.str()), file=sys.stderr)
                    continue
                at_end.discard((msg.topic(), msg.partition()))
                last = time.monotonic()
                count += 1
                progress.add()
                if args.format == "json":
                    out.write(to_json(msg).encode() + b"\n")
                else:
                    value = msg.value()
                    line = b"null" if value is None else value
                    if args.print_key:
                        key = msg.key()
                        line = (b"null" if key is None else key) + sep + line
                    out.write(line + b"\n")
                if args.max_messages is not None and count >= args.max_messages:
                    break
            if msgs:
                out.flush()
    except KeyboardInterrupt:
        pass   # Ctrl-C ends a run normally (Kafka's tool too): the count below, exit 0
    out.flush()
    progress.done()
    return count
