"""``pykbroker groups list|describe|reset-offsets|delete``, the operations of Kafka's
``kafka-consumer-groups.sh``.

Requests: ListGroups (list), DescribeGroups or ConsumerGroupDescribe (members, assignment,
state), OffsetFetch (committed offsets), ListOffsets (log end offsets: lag = log end - committed,
as Kafka's tool computes it, read_uncommitted), OffsetCommit (reset-offsets --execute, with no
member id and generation -1: allowed only while the group has no members), DeleteGroups.

reset-offsets follows Kafka's tool: the group must be inactive (Empty, or Dead/unknown: offsets
are then created); ``--to-offset`` and ``--shift-by`` are clamped to [earliest, latest] of each
partition; ``--to-timestamp`` takes the first offset at or after the time, the latest offset if
none is; ``--shift-by`` needs a committed offset.  Without ``--execute`` nothing is written
(``--dry-run``, the default, prints the plan).
"""
from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from . import action_parser, action_parsers
from .common import (EXIT_USAGE, ToolError, admin, ck, cluster_topics, error_name, kafka_message, print_json,
                     print_table, result, retrying, wait_seconds)
from .offsets import list_offsets

if TYPE_CHECKING:
    import argparse

    from . import Subparsers

EXAMPLES = """  pykbroker groups list
  pykbroker groups describe --group billing
  pykbroker groups reset-offsets --group billing --topic orders --to-earliest            # dry run: the plan
  pykbroker groups reset-offsets --group billing --topic orders:0,1 --shift-by -10 --execute
  pykbroker groups reset-offsets --group billing --all-topics --to-datetime 2024-05-01T00:00:00Z --execute
  pykbroker groups delete --group billing --json"""


def add_arguments(sub: Subparsers, name: str, help: str) -> None:
    gsub = action_parsers(sub, name, help, "Manage consumer groups (kafka-consumer-groups.sh's operations).", EXAMPLES)
    action_parser(gsub, "list", "group ids with state and type", EXAMPLES)
    dp = action_parser(gsub, "describe", "per partition: committed offset, log end, lag, owner; members", EXAMPLES)
    dg = dp.add_mutually_exclusive_group(required=True)
    dg.add_argument("--group", action="append", help="repeatable")
    dg.add_argument("--all-groups", action="store_true")
    rp = action_parser(gsub, "reset-offsets", "move a group's committed offsets (dry run unless --execute)", EXAMPLES)
    rp.add_argument("--group", required=True)
    tg = rp.add_mutually_exclusive_group(required=True)
    tg.add_argument("-t", "--topic", action="append", metavar="TOPIC[:P,P...]",
                    help="a topic, optionally some of its partitions, repeatable")
    tg.add_argument("--all-topics", action="store_true", help="every topic the group has offsets for")
    to = rp.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true")
    to.add_argument("--to-latest", action="store_true")
    to.add_argument("--to-current", action="store_true")
    to.add_argument("--to-offset", type=int, metavar="N")
    to.add_argument("--to-timestamp", type=int, metavar="MS", help="ms since the epoch")
    to.add_argument("--to-datetime", metavar="ISO8601", help="e.g. 2024-05-01T12:00:00Z (no zone: UTC)")
    to.add_argument("--shift-by", type=int, metavar="N", help="add N (negative: back) to the committed offset")
    mode = rp.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="only print the plan (the default)")
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    xp = action_parser(gsub, "delete", "delete groups (they must have no members)", EXAMPLES)
    xp.add_argument("--group", action="append", required=True, help="repeatable")


def _name(enum_value: Any) -> str | None:
    return enum_value.name.lower() if enum_value is not None else None


def list_groups(args: argparse.Namespace) -> list[dict]:
    res = result(admin(args).list_consumer_groups(request_timeout=wait_seconds(args)), "list groups",
                 wait_seconds(args))
    if res.errors:
        raise ToolError("list groups: %s" % "; ".join(kafka_message(e) for e in res.errors))
    return sorted(({"group": g.group_id, "state": _name(g.state), "type": _name(getattr(g, "type", None)),
                    "simple": g.is_simple_consumer_group} for g in res.valid), key=lambda g: g["group"])


def committed(args: argparse.Namespace, group: str) -> dict:
    """{(topic, partition): offset} the group has committed."""
    ckm = ck()
    what = "committed offsets of %s" % group
    try:
        res = retrying(args, lambda: admin(args).list_consumer_group_offsets(
            [ckm.ConsumerGroupTopicPartitions(group)], request_timeout=wait_seconds(args))[group], what)
    except ToolError:
        raise
    except Exception as e:
        raise ToolError("%s: %s" % (what, kafka_message(e))) from None
    return {(tp.topic, tp.partition): tp.offset for tp in res.topic_partitions if tp.offset >= 0}


def _describe_group(args: argparse.Namespace, group: str) -> Any:
    return retrying(args, lambda: admin(args).describe_consumer_groups(
        [group], request_timeout=wait_seconds(args))[group], "describe group %s" % group)


def _describe_one(args: argparse.Namespace, group: str) -> dict:
    try:
        d = _describe_group(args, group)
    except ToolError:
        raise
    except Exception as e:
        if error_name(e) in ("GROUP_ID_NOT_FOUND",):
            raise ToolError("consumer group %r does not exist" % group) from None
        raise ToolError("describe group %s: %s" % (group, kafka_message(e))) from None
    state = _name(d.state)
    offsets = committed(args, group)
    if state == "dead" and not offsets:
        raise ToolError("consumer group %r does not exist" % group)
    members, owner = [], {}
    for m in sorted(d.members, key=lambda m: (m.client_id, m.member_id)):
        assignment = sorted((tp.topic, tp.partition) for tp in (m.assignment.topic_partitions if m.assignment else []))
        members.append({"member_id": m.member_id, "client_id": m.client_id, "host": m.host,
                        "group_instance_id": m.group_instance_id,
                        "assignment": [{"topic": t, "partition": p} for t, p in assignment]})
        for tp in assignment:
            owner[tp] = m
    tps = sorted(set(offsets) | set(owner))
    ends = {}
    if tps:
        from confluent_kafka.admin import OffsetSpec
        ends = list_offsets(args, tps, {"latest": OffsetSpec.latest()})
    rows = []
    for tp in tps:
        cur, end = offsets.get(tp), ends.get(tp, {}).get("latest")
        m = owner.get(tp)
        rows.append({"topic": tp[0], "partition": tp[1], "current_offset": cur, "log_end_offset": end,
                     "lag": (end - cur) if cur is not None and end is not None else None,
                     "member_id": m.member_id if m else None, "client_id": m.client_id if m else None,
                     "host": m.host if m else None})
    return {"group": group, "state": state, "type": _name(getattr(d, "type", None)),
            "protocol": d.partition_assignor or None,
            "coordinator": d.coordinator.id if d.coordinator is not None else None,
            "members": members, "offsets": rows}


def _parse_time(args: argparse.Namespace) -> int | None:
    if args.to_timestamp is not None:
        return args.to_timestamp
    if args.to_datetime is None:
        return None
    text = args.to_datetime.replace("Z", "+00:00")
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        raise ToolError("--to-datetime expects ISO 8601 (2024-05-01T12:00:00Z), got %r" % args.to_datetime,
                        EXIT_USAGE) from None
    if dt.tzinfo is None:
        from datetime import timezone
        dt = dt.replace(tzinfo=timezone.utc)
    return int(dt.timestamp() * 1000)


def _reset_targets(args: argparse.Namespace, offsets: dict) -> list[tuple[str, int]]:
    if args.all_topics:
        return sorted(offsets)
    md = cluster_topics(args)
    tps: list = []
    for spec in args.topic:
        topic, _, parts = spec.partition(":")
        if topic not in md.topics or md.topics[topic].error is not None:
            raise ToolError("topic %r does not exist" % topic)
        have = sorted(md.topics[topic].partitions)
        if parts:
            try:
                want = [int(p) for p in parts.split(",") if p.strip()]
            except ValueError:
                raise ToolError("--topic expects TOPIC or TOPIC:P,P..., got %r" % spec, EXIT_USAGE) from None
            missing = [p for p in want if p not in have]
            if missing:
                raise ToolError("topic %s has no partition %s" % (topic, ",".join(map(str, missing))))
            have = want
        tps.extend((topic, p) for p in have)
    return sorted(set(tps))


def reset(args: argparse.Namespace) -> dict:
    ckm = ck()
    from confluent_kafka.admin import OffsetSpec
    group = args.group
    try:
        state = _name(_describe_group(args, group).state)
    except ToolError:
        raise
    except Exception as e:
        if error_name(e) != "GROUP_ID_NOT_FOUND":
            raise ToolError("describe group %s: %s" % (group, kafka_message(e))) from None
        state = "dead"
    # Kafka's tool refuses while members may commit over the reset (OffsetCommit would fail anyway)
    if state not in ("empty", "dead", "unknown"):
        raise ToolError("assignments can only be reset if the group %r is inactive, but the current state is %s"
                        % (group, state))
    offsets = committed(args, group)
    tps = _reset_targets(args, offsets)
    at = _parse_time(args)
    specs = {"earliest": OffsetSpec.earliest(), "latest": OffsetSpec.latest()}
    if at is not None:
        specs["at"] = OffsetSpec.for_timestamp(at)
    bounds = list_offsets(args, tps, specs)
    plan = []
    for tp in tps:
        lo, hi, cur = bounds[tp]["earliest"], bounds[tp]["latest"], offsets.get(tp)
        if args.to_earliest:
            new = lo
        elif args.to_latest:
            new = hi
        elif args.to_current:
            new = cur if cur is not None else hi
        elif args.to_offset is not None:
            new = min(max(args.to_offset, lo), hi)
        elif at is not None:
            new = bounds[tp]["at"] if bounds[tp]["at"] >= 0 else hi
        else:
            if cur is None:
                raise ToolError("cannot shift the offset of %s-%d: the group has no committed offset there" % tp)
            new = min(max(cur + args.shift_by, lo), hi)
        plan.append({"topic": tp[0], "partition": tp[1], "current_offset": cur, "new_offset": new})
    if args.execute and plan:
        req = [ckm.ConsumerGroupTopicPartitions(group, [ckm.TopicPartition(r["topic"], r["partition"],
                                                                           r["new_offset"]) for r in plan])]
        what = "commit offsets of %s" % group
        try:
            res = retrying(args, lambda: admin(args).alter_consumer_group_offsets(
                req, request_timeout=wait_seconds(args))[group], what)
        except ToolError:
            raise
        except Exception as e:
            raise ToolError("%s: %s" % (what, kafka_message(e))) from None
        failed = [tp for tp in res.topic_partitions if tp.error is not None]
        if failed:
            raise ToolError("commit offsets of %s: %s" % (group, "; ".join(
                "%s-%d: %s" % (tp.topic, tp.partition, tp.error.str()) for tp in failed)))
    return {"group": group, "executed": bool(args.execute), "offsets": plan}


def run(args: argparse.Namespace) -> int:
    ck()
    if args.action == "list":
        groups = list_groups(args)
        if args.json:
            print_json(groups)
        else:
            print_table(["GROUP", "STATE", "TYPE"], [[g["group"], g["state"], g["type"]] for g in groups])
        return 0
    if args.action == "describe":
        names = args.group if args.group else [g["group"] for g in list_groups(args)]
        groups = [_describe_one(args, g) for g in names]
        if args.json:
            print_json(groups)
            return 0
        for i, g in enumerate(groups):
            if i:
                print()
            print("Group %s: state %s, %d member(s), coordinator %s, assignor %s"
                  % (g["group"], g["state"], len(g["members"]), g["coordinator"], g["protocol"] or "-"))
            print()
            print_table(["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
                         "HOST", "CLIENT-ID"],
                        [[g["group"], r["topic"], r["partition"], r["current_offset"], r["log_end_offset"], r["lag"],
                          r["member_id"], r["host"], r["client_id"]] for r in g["offsets"]])
            if g["members"]:
                print()
                print_table(["CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"],
                            [[m["member_id"], m["host"], m["client_id"], len(m["assignment"]),
                              ",".join("%s-%d" % (a["topic"], a["partition"]) for a in m["assignment"]) or "-"]
                             for m in g["members"]])
        return 0
    if args.action == "reset-offsets":
        plan = reset(args)
        if args.json:
            print_json(plan)
        else:
            print_table(["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"],
                        [[plan["group"], r["topic"], r["partition"], r["current_offset"], r["new_offset"]]
                         for r in plan["offsets"]])
            if not args.execute:
                print("\n(dry run: nothing was changed; add --execute to commit these offsets)")
        return 0
    if args.action == "delete":
        outcome: dict[str, str | None] = {}
        failures = []
        for g in args.group:
            try:
                retrying(args, lambda: admin(args).delete_consumer_groups(
                    [g], request_timeout=wait_seconds(args))[g], "delete group %s" % g)
                outcome[g] = None
            except Exception as e:
                outcome[g] = error_name(e) or kafka_message(e)
                failures.append("delete group %s: %s" % (g, kafka_message(e)))
        if args.json:
            print_json([{"group": g, "deleted": outcome[g] is None, "error": outcome[g]} for g in args.group])
        else:
            for g in args.group:
                print("Deleted group %s." % g if outcome[g] is None else "Group %s not deleted: %s" % (g, outcome[g]))
        if failures:
            raise ToolError("; ".join(failures))
        return 0
    raise ToolError("unknown action %r" % args.action, EXIT_USAGE)
