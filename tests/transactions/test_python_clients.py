"""Transactions with the pure-Python clients: aiokafka's and kafka-python's transactional producers
(commit, abort, send_offsets_to_transaction), read back by read_committed and read_uncommitted
consumers of both libraries."""
from __future__ import annotations

import asyncio
import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from pykbroker.local.broker_process import wait_until

from .helpers import create_topic, end_offsets, read_all, unique, values

pytestmark = pytest.mark.timeout(180)


def test_aiokafka_transactional_producer(broker):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition as ATP

    bs = broker.bootstrap
    topic = create_topic(bs, unique("aio"), 2)
    group = unique("aiogrp")

    async def main():
        p = AIOKafkaProducer(bootstrap_servers=bs, transactional_id=unique("aiotid"), enable_idempotence=True)
        await p.start()
        try:
            async with p.transaction():
                for i in range(10):
                    await p.send(topic, b"c-%d" % i, partition=i % 2)
                await p.send_offsets_to_transaction({ATP(topic, 0): 5, ATP(topic, 1): 6}, group)
            await p.begin_transaction()
            for i in range(7):
                await p.send(topic, b"a-%d" % i, partition=i % 2)
            await p.send_offsets_to_transaction({ATP(topic, 0): 100, ATP(topic, 1): 100}, group)
            await p.abort_transaction()
            async with p.transaction():
                await p.send(topic, b"c-last", partition=0)
        finally:
            await p.stop()
        got = {}
        for iso in ("read_committed", "read_uncommitted"):
            c = AIOKafkaConsumer(bootstrap_servers=bs, isolation_level=iso, auto_offset_reset="earliest",
                                 enable_auto_commit=False)
            await c.start()
            try:
                tps = [ATP(topic, 0), ATP(topic, 1)]
                c.assign(tps)
                await c.seek_to_beginning()
                vals = []
                for _ in range(20):
                    batch = await c.getmany(timeout_ms=300)
                    for msgs in batch.values():
                        vals += [m.value for m in msgs]
                    # read to the end aiokafka's ListOffsets reports for its isolation level (the
                    # last stable offset for read_committed): nothing more to wait 6 s for
                    ends = await c.end_offsets(tps)
                    if all([await c.position(tp) >= ends[tp] for tp in tps]):
                        break
                got[iso] = sorted(vals)
            finally:
                await c.stop()
        return got

    got = asyncio.run(main())
    committed = [b"c-%d" % i for i in range(10)] + [b"c-last"]
    assert got["read_committed"] == sorted(committed)
    assert got["read_uncommitted"] == sorted(committed + [b"a-%d" % i for i in range(7)])
    # the committed transaction's offsets, not the aborted one's
    c = Consumer({"bootstrap.servers": bs, "group.id": group})
    assert [tp.offset for tp in c.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], 10)] == [5, 6]
    c.close()


def test_kafka_python_transactional_producer(broker):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.structs import OffsetAndMetadata, TopicPartition as KTP

    bs = broker.bootstrap
    topic = create_topic(bs, unique("kp"), 3)
    group = unique("kpgrp")
    p = KafkaProducer(bootstrap_servers=bs, transactional_id=unique("kptid"))
    p.init_transactions()
    p.begin_transaction()
    for i in range(9):
        p.send(topic, value=b"c-%d" % i, partition=i % 3)
    p.send_offsets_to_transaction({KTP(topic, 0): OffsetAndMetadata(3, "", -1)}, group)
    p.commit_transaction()
    p.begin_transaction()
    for i in range(6):
        p.send(topic, value=b"a-%d" % i, partition=i % 3)
    p.flush()
    p.abort_transaction()
    p.close()

    committed = [b"c-%d" % i for i in range(9)]
    assert values(read_all(bs, topic, 3, "read_committed", expect=9)) == sorted(committed)
    assert values(read_all(bs, topic, 3, "read_uncommitted", expect=15)) == \
        sorted(committed + [b"a-%d" % i for i in range(6)])
    # kafka-python's own consumer in read_committed mode skips the aborted records too
    kc = KafkaConsumer(bootstrap_servers=bs, isolation_level="read_committed", auto_offset_reset="earliest",
                       enable_auto_commit=False, consumer_timeout_ms=3000)
    ktps = [KTP(topic, p) for p in range(3)]
    kc.assign(ktps)
    got = []
    quiet_since = time.monotonic()
    while time.monotonic() - quiet_since < 3.0:   # as consumer_timeout_ms: 3 s without a record ends it
        for msgs in kc.poll(timeout_ms=200).values():
            got += [m.value for m in msgs]
            quiet_since = time.monotonic()
        # ... or the end: kafka-python's ListOffsets asks with read_committed (the last stable offset)
        ends = kc.end_offsets(ktps)
        if all(kc.position(tp) >= ends[tp] for tp in ktps):
            break
    assert sorted(got) == sorted(committed)
    kc.close()
    # the ABORT markers follow the EndTxn answer (as with Kafka)
    wait_until(lambda: end_offsets(bs, topic, 3, 1) == end_offsets(bs, topic, 3, 0) == [3 + 1 + 2 + 1] * 3, 10,
               what="the ABORT markers")
    c = Consumer({"bootstrap.servers": bs, "group.id": group})
    assert c.committed([TopicPartition(topic, 0)], 10)[0].offset == 3
    c.close()
