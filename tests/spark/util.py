"""Helpers for the Spark suite: topics, producing and reading back through real Python clients.

Spark's side is always Spark's own API; these helpers are the independent observer (confluent-kafka
and kafka-python), so an assertion never depends on Spark reading its own writes.
"""
from __future__ import annotations

import os
import time
import uuid

import pytest

QUICK = os.environ.get("PYKBROKER_QUICK") == "1"

# Every module of the Spark suite starts with this: skipped in quick mode, CI runs it.
skip_in_quick_mode = pytest.mark.skipif(
    QUICK, reason="PYKBROKER_QUICK=1: Spark suite skipped (a JVM plus the connector; CI runs it)")


def unique(prefix: str) -> str:
    return "%s-%s" % (prefix, uuid.uuid4().hex[:8])


def create_topic(bootstrap: str, name: str, partitions: int = 1, config: dict | None = None) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    fut = admin.create_topics([NewTopic(name, partitions, 1, config=config or {})],
                              operation_timeout=10)[name]
    fut.result(timeout=15)
    return name


def delete_records(bootstrap: str, topic: str, partition: int, before_offset: int) -> int:
    """DeleteRecords through confluent's AdminClient; returns the new log start offset."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futs = admin.delete_records([TopicPartition(topic, partition, before_offset)],
                                request_timeout=15)
    (res,) = [f.result(timeout=15) for f in futs.values()]
    return res.low_watermark


def produce(bootstrap: str, topic: str, records, idempotent: bool = True) -> list[tuple]:
    """records: iterable of dicts (partition, key, value, headers, timestamp).

    Returns the delivered (partition, offset, key, value) in delivery order, after a flush.
    """
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": idempotent,
                  "linger.ms": 5})
    delivered: list[tuple] = []
    errors: list = []

    def cb(err, msg):
        if err is not None:
            errors.append(err)
        else:
            delivered.append((msg.partition(), msg.offset(), msg.key(), msg.value()))

    for r in records:
        kw = {k: r[k] for k in ("partition", "key", "value", "headers", "timestamp") if k in r}
        p.produce(topic, on_delivery=cb, **kw)
        p.poll(0)
    left = p.flush(30)
    assert left == 0 and not errors, (left, errors)
    return delivered


def read_all(bootstrap: str, topic: str, partitions: int, timeout: float = 30.0) -> list[dict]:
    """Everything in the topic, through confluent-kafka (assign from the log start, read to the
    high watermark, read_uncommitted so the count matches the watermark)."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition, OFFSET_BEGINNING

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("reader"),
                  "enable.auto.commit": False, "isolation.level": "read_uncommitted",
                  "enable.partition.eof": True})
    try:
        ends = {}
        for p in range(partitions):
            lo, hi = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            if hi > lo:
                ends[p] = hi
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
        out: list[dict] = []
        done = set()
        deadline = time.monotonic() + timeout
        while len(done) < len(ends):
            assert time.monotonic() < deadline, "read_all timed out: %r of %r" % (done, ends)
            m = c.poll(1.0)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    if m.offset() >= ends.get(m.partition(), 0):
                        done.add(m.partition())
                    continue
                raise AssertionError(m.error())
            out.append({"partition": m.partition(), "offset": m.offset(), "key": m.key(),
                        "value": m.value(), "headers": m.headers() or [],
                        "timestamp": m.timestamp()[1]})
            if m.offset() + 1 >= ends[m.partition()]:
                done.add(m.partition())
        return out
    finally:
        c.close()


def read_all_kafka_python(bootstrap: str, topic: str, partitions: int) -> list[dict]:
    """The same, through kafka-python (a second, independent client implementation)."""
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                      auto_offset_reset="earliest", consumer_timeout_ms=3000)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        ends = c.end_offsets(tps)
        c.seek_to_beginning(*tps)
        out = []
        deadline = time.monotonic() + 30
        while any(c.position(tp) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline
            for tp, msgs in c.poll(timeout_ms=1000).items():
                for m in msgs:
                    out.append({"partition": m.partition, "offset": m.offset, "key": m.key,
                                "value": m.value, "headers": list(m.headers or [])})
        return out
    finally:
        c.close()
