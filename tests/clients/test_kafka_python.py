"""kafka-python 3.0 end to end: admin CreateTopics, produce under every codec, consume back
byte-exact per partition, seek to an offset (inside a batch) and to a timestamp."""
import pytest

from .util import (CODECS, N, PARTITIONS, assert_acks_match, assert_partitions_equal, by_partition,
                   first_index_at_or_after, kp_consume, kp_create_topic, kp_produce,
                   kp_seeded_topic, make_records, unique_topic)

pytestmark = pytest.mark.timeout(60)

@pytest.mark.parametrize("codec", CODECS)
def test_produce_consume_roundtrip(broker, codec):
    topic = unique_topic("kp-" + codec)
    kp_create_topic(broker.bootstrap, topic, PARTITIONS)
    # kafka-python cannot send a null header value (it requires bytes): empty values instead.
    records = make_records(N, PARTITIONS, seed=100 + CODECS.index(codec), null_header_values=False,
                           null_key_and_value=False)
    acks = kp_produce(broker.bootstrap, topic, records, codec)
    assert_acks_match(records, acks)
    exp = by_partition(records)
    got = kp_consume(broker.bootstrap, topic, {p: (0, len(v)) for p, v in exp.items()})
    assert_partitions_equal(exp, got, what="kafka-python/" + codec)


@pytest.fixture(scope="module")
def seeded(broker):
    """One topic produced once (zstd, so batches hold many records) for the seek tests."""
    return kp_seeded_topic(broker.bootstrap, "kp-seek", 7, "zstd")


def test_end_and_beginning_offsets(broker, seeded):
    from kafka import KafkaConsumer, TopicPartition
    topic, exp = seeded
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None)
    try:
        tps = [TopicPartition(topic, p) for p in exp]
        assert c.beginning_offsets(tps, timeout_ms=10000) == {tp: 0 for tp in tps}
        assert c.end_offsets(tps, timeout_ms=10000) == {tp: len(exp[tp.partition]) for tp in tps}
    finally:
        c.close()


def test_seek_to_offset_inside_batch(broker, seeded):
    from kafka import KafkaConsumer, TopicPartition
    topic, exp = seeded
    recs = exp[1]
    start = len(recs) // 2 + 1  # with zstd and linger this is inside a batch
    got = kp_consume(broker.bootstrap, topic, {1: (start, len(recs) - start)})
    assert_partitions_equal({1: recs[start:]}, got, start={1: start}, what="seek")
    # Seek backwards on a live consumer after reading further.
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, fetch_max_wait_ms=200)
    try:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        c.seek(tp, 10)
        seen = []
        while len(seen) < 50:
            seen += c.poll(timeout_ms=1000).get(tp, [])
        assert [m.offset for m in seen[:50]] == list(range(10, 60))
        c.seek(tp, 3)
        again = []
        while len(again) < 5:
            again += c.poll(timeout_ms=1000).get(tp, [])
        assert [(m.offset, m.key, m.value) for m in again[:5]] == [
            (3 + i, r.key, r.value) for i, r in enumerate(exp[0][3:8])]
    finally:
        c.close()


def test_offsets_for_times_and_seek(broker, seeded):
    from kafka import KafkaConsumer, TopicPartition
    topic, exp = seeded
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None)
    try:
        for p, recs in exp.items():
            tp = TopicPartition(topic, p)
            for idx in (0, 1, len(recs) // 3, len(recs) // 2 + 7, len(recs) - 1):
                target = recs[idx].timestamp
                want = first_index_at_or_after(recs, target)
                got = c.offsets_for_times({tp: target}, timeout_ms=10000)[tp]
                assert got is not None, (p, idx, target)
                assert (got.offset, got.timestamp) == (want, recs[want].timestamp), (p, idx)
            # Before everything: offset 0 with the first record's own timestamp.
            first = c.offsets_for_times({tp: 0}, timeout_ms=10000)[tp]
            assert first.offset == 0 and first.timestamp == recs[0].timestamp
            # After everything: no match (Kafka answers offset -1, timestamp -1, no error).
            late = max(r.timestamp for r in recs) + 1
            assert c.offsets_for_times({tp: late}, timeout_ms=10000)[tp] is None
    finally:
        c.close()
    recs = exp[0]
    target = recs[len(recs) // 2].timestamp
    i = first_index_at_or_after(recs, target)
    got = kp_consume(broker.bootstrap, topic, {0: (i, len(recs) - i)})
    assert_partitions_equal({0: recs[i:]}, got, start={0: i}, what="seek-by-time")
