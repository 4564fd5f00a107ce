"""confluent-kafka 2.16 (librdkafka) end to end: AdminClient CreateTopics, produce under every
codec with idempotence on and off, consume back byte-exact per partition, seek to an offset
(inside a batch) and to a timestamp, ListOffsets through the AdminClient."""
import time

import pytest

from .util import (CODECS, N, PARTITIONS, assert_acks_match, assert_partitions_equal, by_partition,
                   ck_consume, ck_consumer, ck_create_topic, ck_msg_to_rec, ck_produce,
                   first_index_at_or_after, make_records, unique_topic)

pytestmark = pytest.mark.timeout(60)

@pytest.mark.parametrize("idempotence", [True, False], ids=["idempotent", "plain"])
@pytest.mark.parametrize("codec", CODECS)
def test_produce_consume_roundtrip(broker, codec, idempotence):
    topic = unique_topic("ck-%s-%s" % (codec, "idem" if idempotence else "plain"))
    ck_create_topic(broker.bootstrap, topic, PARTITIONS)
    records = make_records(N, PARTITIONS, seed=200 + CODECS.index(codec) + 10 * idempotence)
    acks = ck_produce(broker.bootstrap, topic, records, codec, idempotence)
    assert_acks_match(records, acks)
    exp = by_partition(records)
    want = {p: (0, len(v)) for p, v in exp.items()}
    # librdkafka reads read_committed by default; check read_uncommitted too.
    got = ck_consume(broker.bootstrap, topic, want)
    assert_partitions_equal(exp, got, what="confluent/%s/%s" % (codec, idempotence))
    if codec == "zstd":
        got = ck_consume(broker.bootstrap, topic, want, **{"isolation.level": "read_uncommitted"})
        assert_partitions_equal(exp, got, what="confluent/read_uncommitted")


@pytest.fixture(scope="module")
def seeded(broker):
    topic = unique_topic("ck-seek")
    ck_create_topic(broker.bootstrap, topic, 2)
    records = make_records(2000, 2, seed=9)
    assert_acks_match(records, ck_produce(broker.bootstrap, topic, records, "lz4", True))
    return topic, by_partition(records)


def test_watermarks(broker, seeded):
    from confluent_kafka import TopicPartition
    topic, exp = seeded
    c = ck_consumer(broker.bootstrap)
    try:
        for p, recs in exp.items():
            assert c.get_watermark_offsets(TopicPartition(topic, p), timeout=10) == (0, len(recs))
    finally:
        c.close()


def test_seek_to_offset_inside_batch(broker, seeded):
    from confluent_kafka import TopicPartition
    topic, exp = seeded
    recs = exp[0]
    start = len(recs) // 2 + 1
    got = ck_consume(broker.bootstrap, topic, {0: (start, len(recs) - start)})
    assert_partitions_equal({0: recs[start:]}, got, start={0: start}, what="seek")
    # Seek backwards on a live consumer.
    c = ck_consumer(broker.bootstrap)
    try:
        c.assign([TopicPartition(topic, 1, 100)])
        seen = []
        deadline = time.monotonic() + 20
        while len(seen) < 20 and time.monotonic() < deadline:
            seen += [m for m in c.consume(20, timeout=0.5) if not m.error()]
        assert [m.offset() for m in seen[:20]] == list(range(100, 120))
        c.seek(TopicPartition(topic, 1, 5))
        again = []
        while len(again) < 5 and time.monotonic() < deadline:
            again += [m for m in c.consume(5, timeout=0.5) if not m.error()]
        assert [(m.offset(), ck_msg_to_rec(m)) for m in again[:5]] == [
            (5 + i, r) for i, r in enumerate(exp[1][5:10])]
    finally:
        c.close()


def test_offsets_for_times_and_seek(broker, seeded):
    from confluent_kafka import TopicPartition
    topic, exp = seeded
    c = ck_consumer(broker.bootstrap)
    try:
        for p, recs in exp.items():
            for idx in (0, len(recs) // 3, len(recs) // 2 + 7, len(recs) - 1):
                target = recs[idx].timestamp
                want = first_index_at_or_after(recs, target)
                [res] = c.offsets_for_times([TopicPartition(topic, p, target)], timeout=10)
                assert res.error is None and res.offset == want, (p, idx, res)
            [res] = c.offsets_for_times([TopicPartition(topic, p, 0)], timeout=10)
            assert res.offset == 0
            late = max(r.timestamp for r in recs) + 1
            [res] = c.offsets_for_times([TopicPartition(topic, p, late)], timeout=10)
            assert res.error is None and res.offset == -1, res  # no match: -1, not an error
    finally:
        c.close()
    recs = exp[1]
    i = first_index_at_or_after(recs, recs[len(recs) // 2].timestamp)
    got = ck_consume(broker.bootstrap, topic, {1: (i, len(recs) - i)})
    assert_partitions_equal({1: recs[i:]}, got, start={1: i}, what="seek-by-time")


def test_admin_list_offsets(broker, seeded):
    from confluent_kafka import IsolationLevel, TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec
    topic, exp = seeded
    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    recs = exp[0]
    tp = TopicPartition(topic, 0)
    mid = recs[len(recs) // 2].timestamp
    imax = max(range(len(recs)), key=lambda i: (recs[i].timestamp, -i))
    cases = [(OffsetSpec.earliest(), 0, None), (OffsetSpec.latest(), len(recs), None),
             (OffsetSpec.for_timestamp(mid), first_index_at_or_after(recs, mid), None),
             (OffsetSpec.max_timestamp(), imax, recs[imax].timestamp)]
    for spec, want_off, want_ts in cases:
        for iso in (IsolationLevel.READ_UNCOMMITTED, IsolationLevel.READ_COMMITTED):
            fut = a.list_offsets({tp: spec}, isolation_level=iso, request_timeout=15)[tp]
            res = fut.result(timeout=20)
            assert res.offset == want_off, (spec, iso, res)
            if want_ts is not None:
                assert res.timestamp == want_ts, (spec, res)
