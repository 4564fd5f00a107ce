"""``pykbroker offsets``: the earliest and latest offset of each partition (ListOffsets), like
Kafka's ``kafka-get-offsets.sh``; ``--time`` adds the offset at a timestamp (the first record
whose timestamp is at or after it; -1 when there is none, Kafka's answer)."""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Sequence

from . import add_common, parser
from .common import ToolError, wait_seconds, admin, ck, cluster_topics, kafka_message, print_json, print_table

if TYPE_CHECKING:
    import argparse

    from . import Subparsers

EXAMPLES = """  pykbroker offsets --topic orders
  pykbroker offsets --topic 'orders.*' --json
  pykbroker offsets --topic orders --time 1700000000000   # offset at a timestamp (ms)"""


def add_arguments(sub: Subparsers, name: str, help: str) -> None:
    p = parser(sub, name, help, "Earliest and latest offset of each partition of the topics.", EXAMPLES)
    add_common(p)
    p.add_argument("-t", "--topic", action="append", metavar="TOPIC",
                   help="a topic name or a regular expression (whole name), repeatable; default all "
                        "non-internal topics")
    p.add_argument("--partition", type=int, action="append", help="only this partition, repeatable")
    p.add_argument("--time", type=int, metavar="MS", help="also the offset at this timestamp (ms since the epoch)")


def select_topics(md: Any, patterns: Sequence[str] | None, include_internal: bool = False) -> list[str]:
    names = sorted(md.topics)
    if not patterns:
        return [t for t in names if include_internal or not t.startswith("__")]
    out = []
    for p in patterns:
        if p in md.topics:
            out.append(p)
            continue
        try:
            rx = re.compile(p)
        except re.error:
            rx = None
        hits = [t for t in names if rx is not None and rx.fullmatch(t)]
        if not hits:
            raise ToolError("topic %r does not exist" % p)
        out.extend(hits)
    return sorted(set(out))


def list_offsets(args: argparse.Namespace, tps: list[tuple[str, int]], specs: dict) -> dict:
    """{(topic, partition): {name: offset}} for each name -> OffsetSpec in ``specs``."""
    ckm = ck()
    from confluent_kafka.admin import OffsetSpec  # noqa: F401  (ck() checked the import)
    a = admin(args)
    out: dict[tuple[str, int], dict] = {tp: {} for tp in tps}
    for name, spec in specs.items():
        if not tps:
            break
        req = {ckm.TopicPartition(t, p): spec for t, p in tps}
        futs = a.list_offsets(req, request_timeout=wait_seconds(args))
        for tp, f in futs.items():
            try:
                out[(tp.topic, tp.partition)][name] = f.result(timeout=wait_seconds(args)).offset
            except Exception as e:
                raise ToolError("list offsets of %s-%d: %s" % (tp.topic, tp.partition, kafka_message(e))) from None
    return out


def run(args: argparse.Namespace) -> int:
    ck()
    from confluent_kafka.admin import OffsetSpec
    md = cluster_topics(args)
    topics = select_topics(md, args.topic)
    tps = [(t, p) for t in topics for p in sorted(md.topics[t].partitions)
           if not args.partition or p in args.partition]
    specs = {"earliest": OffsetSpec.earliest(), "latest": OffsetSpec.latest()}
    if args.time is not None:
        specs["at_time"] = OffsetSpec.for_timestamp(args.time)
    offs = list_offsets(args, tps, specs)
    rows = [{"topic": t, "partition": p, **offs[(t, p)]} for t, p in tps]
    if args.json:
        print_json(rows)
        return 0
    header = ["TOPIC", "PARTITION", "EARLIEST", "LATEST"] + (["AT-TIME"] if args.time is not None else [])
    print_table(header, [[r["topic"], r["partition"], r["earliest"], r["latest"]]
                         + ([r["at_time"]] if args.time is not None else []) for r in rows])
    return 0
