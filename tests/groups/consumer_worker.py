"""A consumer-group member as its own process, for the group tests (one of three client libraries).

    python consumer_worker.py LIB BOOTSTRAP TOPIC GROUP OUT [--assignor NAME] [--instance ID]
                              [--session-ms N] [--protocol classic|consumer] [--debug CONTEXTS]

It consumes with manual commits *after processing*: each polled message is written to OUT as
``R <partition> <offset> <value>`` (flushed) and then its offset+1 is committed synchronously.
Every change of the assignment is written as ``A <p,p,...>`` (and ``E <error>`` on failure).
The client's own per-generation callbacks are logged as ``G <generation> <p,p,...>``: the full
assignment of a completed rebalance (confluent: ``on_assign`` under an eager assignor, the
generation read from ``consumer_group_metadata()``; kafka-python: the assignor's
``on_assignment(assignment, generation)``, called for every completed join, eager or
cooperative) — the tests check that no partition is owned twice in one generation.
It stops cleanly (closing the consumer, i.e. leaving the group) when ``OUT.stop`` appears;
tests also ``kill -9`` it.
"""
import argparse
import asyncio
import os
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("lib")
    ap.add_argument("bootstrap")
    ap.add_argument("topic")
    ap.add_argument("group")
    ap.add_argument("out")
    ap.add_argument("--assignor", default=None)
    ap.add_argument("--instance", default=None)
    ap.add_argument("--session-ms", type=int, default=3000)
    ap.add_argument("--protocol", default="classic")
    ap.add_argument("--debug", default=None, help="librdkafka debug contexts (logged to stderr)")
    ap.add_argument("--poll-ms", type=int, default=1000,
                    help="kafka-python poll timeout (long polls keep clear of a kafka-python 3.0 "
                         "join race, see compat/matrix.md)")
    a = ap.parse_args()
    out = open(a.out, "a", buffering=1)
    stop_file = a.out + ".stop"
    state = {"asg": None}

    def note_generation(gen, parts):
        out.write("G %d %s\n" % (gen, ",".join(map(str, sorted(parts)))))
    a.note_generation = note_generation

    def note_assignment(parts):
        s = sorted(parts)
        if s != state["asg"]:
            state["asg"] = s
            out.write("A %s\n" % ",".join(map(str, s)))

    if a.lib == "confluent":
        run_confluent(a, out, stop_file, note_assignment)
    elif a.lib == "kafka-python":
        run_kafka_python(a, out, stop_file, note_assignment)
    elif a.lib == "aiokafka":
        asyncio.run(run_aiokafka(a, out, stop_file, note_assignment))
    out.write("X\n")


def run_confluent(a, out, stop_file, note):
    from confluent_kafka import Consumer, TopicPartition

    conf = {"bootstrap.servers": a.bootstrap, "group.id": a.group, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "topic.metadata.refresh.interval.ms": 2000}
    if a.protocol == "consumer":
        conf["group.protocol"] = "consumer"
    else:
        conf.update({"session.timeout.ms": a.session_ms, "heartbeat.interval.ms": max(a.session_ms // 6, 100)})
        if a.assignor:
            conf["partition.assignment.strategy"] = a.assignor
    if a.instance:
        conf["group.instance.id"] = a.instance
    if a.debug:
        conf["debug"] = a.debug
    c = Consumer(conf)

    def on_assign(consumer, parts):
        if a.protocol == "classic" and "cooperative" not in (a.assignor or ""):
            # librdkafka's serialized group metadata: b"CGMDv2:" + int32 generation (host order) ...
            md = consumer.consumer_group_metadata()
            a.note_generation(int.from_bytes(md[7:11], sys.byteorder, signed=True), [tp.partition for tp in parts])
    c.subscribe([a.topic], on_assign=on_assign)
    try:
        while not os.path.exists(stop_file):
            msgs = c.consume(100, 0.2)
            note([tp.partition for tp in c.assignment()])
            done = {}
            for m in msgs:
                if m.error():
                    out.write("E %s\n" % m.error())
                    continue
                out.write("R %d %d %s\n" % (m.partition(), m.offset(), m.value().decode()))
                done[m.partition()] = m.offset() + 1
            if done:
                try:
                    c.commit(offsets=[TopicPartition(a.topic, p, o) for p, o in done.items()], asynchronous=False)
                except Exception as e:
                    out.write("E commit %s\n" % e)
    finally:
        c.close()


def run_kafka_python(a, out, stop_file, note):
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

    base = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor,
            "cooperative-sticky": CooperativeStickyAssignor}[a.assignor or "range"]

    class Recording(base):
        def on_assignment(self, assignment, generation):
            a.note_generation(generation, [p for _, p in assignment.partitions()])
            return super().on_assignment(assignment, generation)

    kw = dict(bootstrap_servers=a.bootstrap, group_id=a.group, enable_auto_commit=False,
              auto_offset_reset="earliest", session_timeout_ms=a.session_ms,
              heartbeat_interval_ms=max(a.session_ms // 6, 100), metadata_max_age_ms=2000,
              partition_assignment_strategy=[Recording()])
    if a.instance:
        kw["group_instance_id"] = a.instance
    c = KafkaConsumer(**kw)
    # The topic's metadata before the first JoinGroup: kafka-python 3.0.12 joins with whatever
    # metadata it holds, and a member whose first (empty) assignment is then overtaken by the
    # topic's metadata can lose its next JoinGroup/SyncGroup round (compat/matrix.md) and stay
    # unassigned until expelled.  Its own API fetches it; Java's consumer joins on fresh metadata.
    c.partitions_for_topic(a.topic)
    c.subscribe([a.topic])
    try:
        while not os.path.exists(stop_file):
            batches = c.poll(a.poll_ms)
            note([tp.partition for tp in c.assignment()])
            done = record(batches, out)
            if done:
                try:
                    c.commit({tp: OffsetAndMetadata(o, "", -1) for tp, o in done.items()})
                except Exception as e:
                    out.write("E commit %r\n" % e)
    finally:
        c.close()


def record(batches, out):
    """One "R partition offset value" line per message polled; returns the offsets to commit."""
    done = {}
    for tp, msgs in batches.items():
        for m in msgs:
            out.write("R %d %d %s\n" % (m.partition, m.offset, m.value.decode()))
            done[tp] = m.offset + 1
    return done


async def run_aiokafka(a, out, stop_file, note):
    from aiokafka import AIOKafkaConsumer

    c = AIOKafkaConsumer(a.topic, bootstrap_servers=a.bootstrap, group_id=a.group, enable_auto_commit=False,
                         auto_offset_reset="earliest", session_timeout_ms=a.session_ms,
                         heartbeat_interval_ms=max(a.session_ms // 6, 100), metadata_max_age_ms=2000)
    await c.start()
    try:
        while not os.path.exists(stop_file):
            batches = await c.getmany(timeout_ms=200)
            note([tp.partition for tp in c.assignment()])
            done = record(batches, out)
            if done:
                try:
                    await c.commit(done)
                except Exception as e:
                    out.write("E commit %r\n" % e)
    finally:
        await c.stop()


if __name__ == "__main__":
    main()
