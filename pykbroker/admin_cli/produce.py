"""``pykbroker produce``: one record per input line, like Kafka's ``kafka-console-producer.sh``.

Lines come from stdin or ``--file``, read as bytes (no decoding: any payload but a newline goes
through unchanged); the line's ``\\n`` is dropped and nothing else.  With ``--key-separator``
each line is ``KEY<sep>VALUE`` (split at the first separator; a line without one is an error, as
Kafka's ``parse.key=true``).  ``--header K=V`` adds headers to every record.  ``--acks`` and
``--compression`` are the producer's ``acks`` and ``compression.type``; the producer is
librdkafka's (batching, retries, idempotence off so that ``acks`` other than ``all`` work).

The run fails (exit 1) if any record was not delivered; the JSON summary says how many were.
"""
from __future__ import annotations

import sys
from typing import IO, TYPE_CHECKING, Any, Iterator

from . import add_common, parser
from .common import (EXIT_USAGE, Progress, ToolError, ck, client_config, kafka_message, parse_kv, print_json,
                     wait_seconds)

if TYPE_CHECKING:
    import argparse

    from . import Subparsers

EXAMPLES = """  printf 'a\\nb\\nc\\n' | pykbroker produce --topic orders
  pykbroker produce --topic orders --file orders.txt --key-separator : --acks 1 --compression zstd
  echo 'k1:v1' | pykbroker produce --topic orders --key-separator : --header source=cli --partition 0 --json"""


def add_arguments(sub: Subparsers, name: str, help: str) -> None:
    p = parser(sub, name, help, "Produce one record per line of stdin or a file.", EXAMPLES)
    add_common(p)
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("--file", help="read lines from this file (default stdin)")
    p.add_argument("--key-separator", metavar="SEP",
                   help="each line is KEY<SEP>VALUE (split at the first SEP); default: no key")
    p.add_argument("--header", action="append", metavar="KEY=VALUE", help="a header on every record, repeatable")
    p.add_argument("--partition", type=int, help="write every record to this partition (default: the partitioner)")
    p.add_argument("--acks", default="all", choices=["all", "-1", "0", "1"], help="default all")
    p.add_argument("--compression", default="none", choices=["none", "gzip", "snappy", "lz4", "zstd"],
                   help="compression.type of the producer (default none)")
    p.add_argument("--progress", action="store_true", default=None,
                   help="show count and rate on stderr (default: only when stderr is a terminal)")
    p.add_argument("--no-progress", dest="progress", action="store_false")


def _lines(fh: IO[bytes]) -> Iterator[bytes]:
    for raw in fh:
        yield raw[:-1] if raw.endswith(b"\n") else raw


def run(args: argparse.Namespace) -> int:
    ckm = ck()
    headers = [(k, v.encode()) for k, v in parse_kv(args.header, "--header").items()] or None
    sep = args.key_separator.encode() if args.key_separator is not None else None
    if sep == b"":
        raise ToolError("--key-separator must not be empty", EXIT_USAGE)
    conf = client_config(args, **{
        "acks": args.acks, "compression.type": args.compression,
        # acks=0/1 are not allowed with idempotence (librdkafka's default is off; say it)
        "enable.idempotence": args.acks in ("all", "-1"),
        "linger.ms": 5,
        # each record is given --timeout to be delivered (librdkafka's default is 300 s), so a
        # run against an unreachable broker ends with the records counted as failed
        "message.timeout.ms": int(wait_seconds(args) * 1000),
    })
    try:
        producer = ckm.Producer(conf)
    except Exception as e:
        raise ToolError("cannot create the producer: %s" % kafka_message(e), EXIT_USAGE) from None
    progress = Progress.from_args(args, "produced")
    state: dict[str, Any] = {"delivered": 0, "failed": 0, "first_error": None, "partitions": {}}

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            state["failed"] += 1
            state["first_error"] = state["first_error"] or "%s: %s" % (err.name(), err.str())
            return
        state["delivered"] += 1
        progress.add()
        part = state["partitions"].setdefault(str(msg.partition()), {"records": 0, "first_offset": None,
                                                                    "last_offset": None})
        part["records"] += 1
        off = msg.offset()
        if off is not None and off >= 0:   # acks=0: no offset comes back (-1)
            if part["first_offset"] is None or off < part["first_offset"]:
                part["first_offset"] = off
            if part["last_offset"] is None or off > part["last_offset"]:
                part["last_offset"] = off

    fh = open(args.file, "rb") if args.file else sys.stdin.buffer
    sent = 0
    try:
        for lineno, line in enumerate(_lines(fh), 1):
            key = None
            if sep is not None:
                key, found, value = line.partition(sep)
                if not found:
                    raise ToolError("line %d has no key separator %r" % (lineno, args.key_separator))
            else:
                value = line
            kw: dict[str, Any] = {"key": key, "value": value, "on_delivery": on_delivery}
            if headers:
                kw["headers"] = headers
            if args.partition is not None:
                kw["partition"] = args.partition
            while True:
                try:
                    producer.produce(args.topic, **kw)
                    break
                except BufferError:   # the local queue is full: let deliveries drain it
                    producer.poll(0.1)
                except ckm.KafkaException as e:
                    raise ToolError("produce to %s: %s" % (args.topic, kafka_message(e))) from None
            sent += 1
            producer.poll(0)
            if state["failed"] and state["delivered"] == 0 and sent > 1000:
                break   # nothing gets through (e.g. an unknown topic): stop reading
    finally:
        if args.file:
            fh.close()
        # message.timeout.ms bounds each record; the margin lets their failures be reported
        remaining = producer.flush(wait_seconds(args) + 10)
        progress.done()
    state["failed"] += remaining
    if remaining and state["first_error"] is None:
        state["first_error"] = "%d record(s) not delivered within --timeout" % remaining
    if args.json:
        print_json({"topic": args.topic, "records": state["delivered"], "failed": state["failed"],
                    "partitions": dict(sorted(state["partitions"].items(), key=lambda kv: int(kv[0])))})
    if state["failed"]:
        raise ToolError("%d of %d record(s) not delivered: %s" % (state["failed"], sent, state["first_error"]))
    return 0
