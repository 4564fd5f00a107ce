"""``pykbroker topics list|describe|create|delete|alter-config|add-partitions``, the operations of
Kafka's ``kafka-topics.sh`` (and ``kafka-configs.sh --entity-type topics --alter``).

Requests: Metadata (list, describe), DescribeConfigs (describe: the topic's own overrides, what
Kafka's tool prints as ``Configs:``), CreateTopics, DeleteTopics, IncrementalAlterConfigs,
CreatePartitions.  ``--topic`` of list/describe is a name or a regular expression matching the
whole name, as Kafka's tool accepts.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import action_parser, action_parsers
from .common import (EXIT_USAGE, ToolError, admin, ck, cluster_topics, error_name, kafka_message,
                     parse_kv, print_json, result, wait_seconds)
from .offsets import select_topics

if TYPE_CHECKING:
    import argparse

    from . import Subparsers

EXAMPLES = """  pykbroker topics list
  pykbroker topics create --topic orders --partitions 6 --replication-factor 1 --config retention.ms=86400000
  pykbroker topics describe --topic orders
  pykbroker topics alter-config --topic orders --add-config cleanup.policy=compact --delete-config retention.ms
  pykbroker topics add-partitions --topic orders --partitions 12
  pykbroker topics delete --topic orders --json"""


def add_arguments(sub: Subparsers, name: str, help: str) -> None:
    tsub = action_parsers(sub, name, help, "Manage topics (kafka-topics.sh's operations).", EXAMPLES)
    lp = action_parser(tsub, "list", "topic names, one a line", EXAMPLES)
    lp.add_argument("-t", "--topic", action="append", help="only names matching this name/regex, repeatable")
    lp.add_argument("--exclude-internal", action="store_true", help="leave out internal topics (__*)")
    dp = action_parser(tsub, "describe", "partitions (leader, replicas, ISR) and config overrides", EXAMPLES)
    dp.add_argument("-t", "--topic", action="append", help="a name or regex, repeatable (default: all)")
    dp.add_argument("--exclude-internal", action="store_true", help="leave out internal topics (__*)")
    cp = action_parser(tsub, "create", "create a topic", EXAMPLES)
    cp.add_argument("-t", "--topic", required=True)
    cp.add_argument("--partitions", type=int, default=-1, help="default: the broker's num.partitions")
    cp.add_argument("--replication-factor", type=int, default=-1,
                    help="default: the broker's default.replication.factor")
    cp.add_argument("--config", action="append", metavar="KEY=VALUE", help="a topic config, repeatable")
    cp.add_argument("--if-not-exists", action="store_true", help="an existing topic is not an error")
    xp = action_parser(tsub, "delete", "delete topics", EXAMPLES)
    xp.add_argument("-t", "--topic", action="append", required=True, help="repeatable")
    xp.add_argument("--if-exists", action="store_true", help="a missing topic is not an error")
    ap = action_parser(tsub, "alter-config", "set or remove topic configs (IncrementalAlterConfigs)", EXAMPLES)
    ap.add_argument("-t", "--topic", required=True)
    ap.add_argument("--add-config", action="append", metavar="KEY=VALUE", help="set a config, repeatable")
    ap.add_argument("--delete-config", action="append", metavar="KEY", help="back to the default, repeatable")
    pp = action_parser(tsub, "add-partitions", "grow a topic to a number of partitions", EXAMPLES)
    pp.add_argument("-t", "--topic", required=True)
    pp.add_argument("--partitions", type=int, required=True, help="the new total number of partitions")


def _configs(args: argparse.Namespace, topics: list[str]) -> dict:
    """{topic: {name: value}} of the configs set on the topic itself (DYNAMIC_TOPIC_CONFIG)."""
    from confluent_kafka.admin import ConfigResource, ConfigSource
    if not topics:
        return {}
    a = admin(args)
    futs = a.describe_configs([ConfigResource("topic", t) for t in topics])
    out = {}
    for res, f in futs.items():
        entries = result(f, "describe configs of %s" % res.name, wait_seconds(args))
        out[res.name] = {k: e.value for k, e in sorted(entries.items())
                         if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value}
    return out


def topic_id(uuid: Any) -> str:
    """A topic id as Kafka's tools and the broker's log print it: URL-safe base64 without padding
    (Kafka's Uuid.toString).  librdkafka's str() uses the standard alphabet ('+', '/')."""
    import base64
    import struct
    raw = struct.pack(">qq", uuid.get_most_significant_bits(), uuid.get_least_significant_bits())
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def describe(args: argparse.Namespace) -> list[dict]:
    ck()
    from confluent_kafka import TopicCollection
    md = cluster_topics(args)
    names = select_topics(md, args.topic, include_internal=not args.exclude_internal)
    futs = admin(args).describe_topics(TopicCollection(names)) if names else {}
    configs = _configs(args, names)
    out = []
    for name in names:
        d = result(futs[name], "describe topic %s" % name, wait_seconds(args))
        out.append({
            "topic": name,
            "topic_id": topic_id(d.topic_id),
            "internal": d.is_internal,
            "partition_count": len(d.partitions),
            "replication_factor": len(d.partitions[0].replicas) if d.partitions else 0,
            "configs": configs.get(name, {}),
            "partitions": [{"partition": p.id,
                            "leader": p.leader.id if p.leader is not None else None,
                            "replicas": [r.id for r in p.replicas],
                            "isr": [r.id for r in p.isr]}
                           for p in sorted(d.partitions, key=lambda p: p.id)],
        })
    return out


def _each(args: argparse.Namespace, futs: dict, what: str, ok_errors: tuple[str, ...] = ()) -> dict:
    """{name: None or error name} after waiting on every future; the first unexpected error raises
    once all have been waited for (a partial success is reported, not hidden)."""
    outcome: dict[str, str | None] = {}
    failures = []
    for name, f in futs.items():
        try:
            f.result(timeout=wait_seconds(args))
            outcome[str(name)] = None
        except Exception as e:
            en = error_name(e)
            outcome[str(name)] = en or kafka_message(e)
            if en not in ok_errors:
                failures.append("%s %s: %s" % (what, name, kafka_message(e)))
    if failures:
        raise ToolError("; ".join(failures))
    return outcome


def run(args: argparse.Namespace) -> int:
    ck()
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions, NewTopic
    if args.action == "list":
        md = cluster_topics(args)
        names = select_topics(md, args.topic, include_internal=not args.exclude_internal) if args.topic \
            else [t for t in sorted(md.topics) if not (args.exclude_internal and t.startswith("__"))]
        if args.json:
            print_json(names)
        else:
            for n in names:
                print(n)
        return 0
    if args.action == "describe":
        topics = describe(args)
        if args.json:
            print_json(topics)
            return 0
        for t in topics:
            cfg = ",".join("%s=%s" % kv for kv in t["configs"].items())
            print("Topic: %s\tTopicId: %s\tPartitionCount: %d\tReplicationFactor: %d\tConfigs: %s"
                  % (t["topic"], t["topic_id"], t["partition_count"], t["replication_factor"], cfg))
            for p in t["partitions"]:
                print("\tTopic: %s\tPartition: %d\tLeader: %s\tReplicas: %s\tIsr: %s"
                      % (t["topic"], p["partition"], "none" if p["leader"] is None else p["leader"],
                         ",".join(map(str, p["replicas"])), ",".join(map(str, p["isr"]))))
        return 0
    a = admin(args)
    if args.action == "create":
        nt = NewTopic(args.topic, num_partitions=args.partitions, replication_factor=args.replication_factor,
                      config=parse_kv(args.config, "--config"))
        out = _each(args, a.create_topics([nt], operation_timeout=wait_seconds(args)), "create topic",
                    ok_errors=("TOPIC_ALREADY_EXISTS",) if args.if_not_exists else ())
        created = out[args.topic] is None
        if args.json:
            print_json({"topic": args.topic, "created": created})
        else:
            print(("Created topic %s." if created else "Topic %s already exists.") % args.topic)
        return 0
    if args.action == "delete":
        out = _each(args, a.delete_topics(args.topic, operation_timeout=wait_seconds(args)), "delete topic",
                    ok_errors=("UNKNOWN_TOPIC_OR_PART",) if args.if_exists else ())
        if args.json:
            print_json([{"topic": t, "deleted": out[t] is None} for t in args.topic])
        else:
            for t in args.topic:
                print(("Deleted topic %s." if out[t] is None else "Topic %s does not exist.") % t)
        return 0
    if args.action == "alter-config":
        sets = parse_kv(args.add_config, "--add-config")
        if not sets and not args.delete_config:
            raise ToolError("nothing to change: give --add-config and/or --delete-config", EXIT_USAGE)
        entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in sets.items()]
        entries += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE)
                    for k in args.delete_config or []]
        res = ConfigResource("topic", args.topic, incremental_configs=entries)
        for _, f in a.incremental_alter_configs([res]).items():
            result(f, "alter configs of %s" % args.topic, wait_seconds(args))
        if args.json:
            print_json({"topic": args.topic, "set": sets, "deleted": list(args.delete_config or [])})
        else:
            print("Completed updating config for topic %s." % args.topic)
        return 0
    if args.action == "add-partitions":
        _each(args, a.create_partitions([NewPartitions(args.topic, args.partitions)],
                                        operation_timeout=wait_seconds(args)),
              "add partitions to")
        if args.json:
            print_json({"topic": args.topic, "partitions": args.partitions})
        else:
            print("Topic %s now has %d partitions." % (args.topic, args.partitions))
        return 0
    raise ToolError("unknown action %r" % args.action, EXIT_USAGE)
