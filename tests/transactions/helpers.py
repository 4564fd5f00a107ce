"""Shared helpers of the transaction tests: confluent-kafka producers/consumers driven through their
public API, records read back as (partition, offset, key, value)."""
from __future__ import annotations

import time
import uuid

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from pykbroker.protocol import wire


def unique(prefix: str) -> str:
    return "%s-%s" % (prefix, uuid.uuid4().hex[:8])


def create_topic(bootstrap: str, name: str, partitions: int = 3, configs: dict | None = None) -> str:
    a = AdminClient({"bootstrap.servers": bootstrap})
    a.create_topics([NewTopic(name, partitions, 1, config=configs or {})])[name].result(30)
    wire.wait_for_topic(bootstrap, name, partitions)
    return name


def transaction(p: Producer, topic: str, records, commit: bool = True) -> None:
    """One transaction of ``p``: produce ``records`` ((key, value, partition) each), then commit
    it, or flush and abort it."""
    p.begin_transaction()
    for key, value, partition in records:
        p.produce(topic, key=key, value=value, partition=partition)
    if commit:
        p.commit_transaction(30)
    else:
        p.flush()
        p.abort_transaction(30)


def txn_producer(bootstrap: str, txn_id: str, **extra) -> Producer:
    conf = {"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5}
    conf.update(extra)
    p = Producer(conf)
    p.init_transactions(30)
    return p


def read_all(bootstrap: str, topic: str, partitions: int, isolation: str, expect: int | None = None,
             timeout: float = 15.0, idle: float = 1.5) -> list[tuple]:
    """Every record of the topic from offset 0 with an assigned consumer: (partition, offset, key,
    value), in per-partition order.  Stops after ``idle`` seconds without a new one (once at
    least ``expect`` or when ``expect`` is None); with ``expect``, also as soon as it has that
    many and has read every partition to the end the broker reports for its isolation level
    (librdkafka's watermark query asks with it: the last stable offset for read_committed, the
    high watermark else): nothing more is readable then, so the idle wait would only add time."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("reader"), "isolation.level": isolation,
                  "enable.auto.commit": False, "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100})
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out = []
    deadline = time.monotonic() + timeout
    last = time.monotonic()

    def at_the_end() -> bool:
        try:
            ends = [c.get_watermark_offsets(tp, timeout=5, cached=False)[1] for tp in tps]
        except KafkaException:
            return False   # unknown now: the idle rule decides
        # -1001 (no position yet): nothing fetched from that partition, only right for an empty one
        return all(pos.offset >= end or (pos.offset < 0 and end == 0)
                   for pos, end in zip(c.position(tps), ends))

    try:
        while time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                if expect is not None and len(out) < expect:
                    continue
                if time.monotonic() - last > idle or (expect is not None and at_the_end()):
                    break
                continue
            if m.error():
                raise KafkaException(m.error())
            out.append((m.partition(), m.offset(), m.key(), m.value()))
            last = time.monotonic()
    finally:
        c.close()
    return out


def values(recs) -> list:
    return sorted(r[3] for r in recs)


def end_offsets(bootstrap: str, topic: str, partitions: int, isolation_level: int) -> list[int]:
    """ListOffsets LATEST per partition (isolation 1 = read_committed: the LSO)."""
    return [wire.list_offsets(bootstrap, topic, p, -1, isolation_level=isolation_level)["offset"]
            for p in range(partitions)]
