"""aiokafka 0.14 end to end: AIOKafkaAdminClient CreateTopics, produce under every codec,
consume back byte-exact per partition, seek to an offset (inside a batch) and to a timestamp."""
import asyncio

import pytest

from .util import (CODECS, N, PARTITIONS, ak_consume, ak_create_topic, ak_produce,
                   assert_acks_match, assert_partitions_equal, by_partition,
                   first_index_at_or_after, make_records, run, unique_topic)

pytestmark = pytest.mark.timeout(60)

@pytest.mark.parametrize("codec", CODECS)
def test_produce_consume_roundtrip(broker, codec):
    topic = unique_topic("ak-" + codec)

    async def go():
        await ak_create_topic(broker.bootstrap, topic, PARTITIONS)
        records = make_records(N, PARTITIONS, seed=300 + CODECS.index(codec),
                               null_key_and_value=False)
        assert_acks_match(records, await ak_produce(broker.bootstrap, topic, records, codec))
        exp = by_partition(records)
        got = await ak_consume(broker.bootstrap, topic, {p: (0, len(v)) for p, v in exp.items()})
        assert_partitions_equal(exp, got, what="aiokafka/" + codec)

    run(go(), 50)


def test_idempotent_producer_roundtrip(broker):
    topic = unique_topic("ak-idem")

    async def go():
        await ak_create_topic(broker.bootstrap, topic, PARTITIONS)
        records = make_records(N, PARTITIONS, seed=399, null_key_and_value=False)
        acks = await ak_produce(broker.bootstrap, topic, records, "gzip", enable_idempotence=True)
        assert_acks_match(records, acks)
        exp = by_partition(records)
        got = await ak_consume(broker.bootstrap, topic, {p: (0, len(v)) for p, v in exp.items()})
        assert_partitions_equal(exp, got, what="aiokafka/idempotent")

    run(go(), 50)


@pytest.fixture(scope="module")
def seeded(broker):
    topic = unique_topic("ak-seek")
    records = make_records(2000, 2, seed=11, null_key_and_value=False)

    async def go():
        await ak_create_topic(broker.bootstrap, topic, 2)
        assert_acks_match(records, await ak_produce(broker.bootstrap, topic, records, "snappy"))

    run(go())
    return topic, by_partition(records)


def test_seek_to_offset_inside_batch(broker, seeded):
    from aiokafka import AIOKafkaConsumer, TopicPartition
    topic, exp = seeded

    async def go():
        recs = exp[0]
        start = len(recs) // 2 + 1
        got = await ak_consume(broker.bootstrap, topic, {0: (start, len(recs) - start)})
        assert_partitions_equal({0: recs[start:]}, got, start={0: start}, what="seek")
        c = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None,
                             fetch_max_wait_ms=200)
        await c.start()
        try:
            tp = TopicPartition(topic, 1)
            c.assign([tp])
            b = await c.beginning_offsets([tp])
            e = await c.end_offsets([tp])
            assert (b[tp], e[tp]) == (0, len(exp[1]))
            c.seek(tp, 10)
            seen = []
            while len(seen) < 30:
                seen += (await c.getmany(tp, timeout_ms=1000)).get(tp, [])
            assert [m.offset for m in seen[:30]] == list(range(10, 40))
            c.seek(tp, 2)
            again = []
            while len(again) < 4:
                again += (await c.getmany(tp, timeout_ms=1000)).get(tp, [])
            assert [(m.offset, m.key, m.value) for m in again[:4]] == [
                (2 + i, r.key, r.value) for i, r in enumerate(exp[1][2:6])]
        finally:
            await c.stop()

    run(go())


def test_offsets_for_times_and_seek(broker, seeded):
    from aiokafka import AIOKafkaConsumer, TopicPartition
    topic, exp = seeded

    async def go():
        c = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None)
        await c.start()
        try:
            for p, recs in exp.items():
                tp = TopicPartition(topic, p)
                for idx in (0, len(recs) // 3, len(recs) // 2 + 7, len(recs) - 1):
                    target = recs[idx].timestamp
                    want = first_index_at_or_after(recs, target)
                    got = (await c.offsets_for_times({tp: target}))[tp]
                    assert got is not None, (p, idx)
                    assert (got.offset, got.timestamp) == (want, recs[want].timestamp), (p, idx)
                late = max(r.timestamp for r in recs) + 1
                assert (await c.offsets_for_times({tp: late}))[tp] is None
        finally:
            await c.stop()
        recs = exp[1]
        i = first_index_at_or_after(recs, recs[len(recs) // 2].timestamp)
        got = await ak_consume(broker.bootstrap, topic, {1: (i, len(recs) - i)})
        assert_partitions_equal({1: recs[i:]}, got, start={1: i}, what="seek-by-time")

    run(go())
