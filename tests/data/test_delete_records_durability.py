"""DeleteRecords through real admin clients, and the data path's durability: clean restart,
kill -9 with ``flush.messages=1``, log start offset and idempotent producer state surviving a
restart."""
import uuid

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer
from kafka import TopicPartition as KTP

from pykbroker.protocol.wire import (WireClient, create_topic, decode_batches, fetch, fetch_part, make_batch, produce,
                                    produce_part)

pytestmark = pytest.mark.timeout(90)


def produce_n(broker, topic, n, start=0, **kw):
    offs = []
    with WireClient(broker) as c:
        for i in range(start, start + n):
            p = produce_part(produce(c, topic, 0, make_batch([b"r%d" % i]), **kw))
            assert p["error_code"] == 0
            offs.append(p["base_offset"])
    return offs


def read_all(broker, topic, offset=0):
    out = []
    with WireClient(broker) as c:
        while True:
            f = fetch_part(fetch(c, topic, 0, offset))
            assert f["error_code"] == 0, f
            recs = [(o, v) for _, _, rs in decode_batches(f["records"]) for o, _, v in rs]
            if not recs:
                return out, f
            out += [r for r in recs if r[0] >= offset]
            offset = recs[-1][0] + 1


def test_delete_records_confluent_admin(broker):
    t = "del-" + uuid.uuid4().hex[:8]
    create_topic(broker, t)
    produce_n(broker, t, 10)
    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    res = a.delete_records([TopicPartition(t, 0, 4)], operation_timeout=10)
    low = list(res.values())[0].result(15)
    assert low.low_watermark == 4  # low watermark = new log start offset
    recs, f = read_all(broker, t, 4)
    assert [o for o, _ in recs] == list(range(4, 10)) and f["log_start_offset"] == 4
    with WireClient(broker) as c:
        assert fetch_part(fetch(c, t, 0, 2))["error_code"] == 1  # OFFSET_OUT_OF_RANGE below the start
        # Beyond the high watermark: OFFSET_OUT_OF_RANGE, low watermark -1.
        r = c.request(21, 2, {"topics": [{"name": t, "partitions": [{"partition_index": 0, "offset": 11}]}],
                              "timeout_ms": 5000})
        p = r["topics"][0]["partitions"][0]
        assert (p["error_code"], p["low_watermark"]) == (1, -1)
        # -1 = up to the high watermark; moving back is a no-op returning the current start.
        r = c.request(21, 0, {"topics": [{"name": t, "partitions": [{"partition_index": 0, "offset": -1}]}],
                              "timeout_ms": 5000})
        assert r["topics"][0]["partitions"][0]["low_watermark"] == 10
        r = c.request(21, 1, {"topics": [{"name": t, "partitions": [{"partition_index": 0, "offset": 3}]}],
                              "timeout_ms": 5000})
        assert r["topics"][0]["partitions"][0]["low_watermark"] == 10
    kc = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    tp = KTP(t, 0)
    assert kc.beginning_offsets([tp]) == {tp: 10} and kc.end_offsets([tp]) == {tp: 10}
    kc.close()


def test_delete_records_compacted_topic_policy_violation(broker):
    t = "delc-" + uuid.uuid4().hex[:8]
    create_topic(broker, t, configs={"cleanup.policy": "compact"})
    with WireClient(broker) as c:
        r = c.request(21, 2, {"topics": [{"name": t, "partitions": [{"partition_index": 0, "offset": 0}]}],
                              "timeout_ms": 5000})
        assert r["topics"][0]["partitions"][0]["error_code"] == 44  # POLICY_VIOLATION


def test_clean_restart_keeps_everything(fresh_broker):
    t = "rs-" + uuid.uuid4().hex[:8]
    create_topic(fresh_broker, t)
    produce_n(fresh_broker, t, 20)
    with WireClient(fresh_broker) as c:
        r = c.request(21, 2, {"topics": [{"name": t, "partitions": [{"partition_index": 0, "offset": 5}]}],
                              "timeout_ms": 5000})
        assert r["topics"][0]["partitions"][0]["low_watermark"] == 5
    fresh_broker.restart(clean=True)
    recs, f = read_all(fresh_broker, t, 5)
    assert recs == [(i, b"r%d" % i) for i in range(5, 20)]
    assert (f["high_watermark"], f["log_start_offset"]) == (20, 5)
    assert produce_n(fresh_broker, t, 1, start=20) == [20]


def test_kill9_with_flush_messages_1_loses_nothing_acknowledged(fresh_broker):
    # SIGKILL keeps the page cache, so this checks recovery of acknowledged data after a crash
    # (segment scan past the recovery point), with the fsync-before-ack path exercised.
    t = "k9-" + uuid.uuid4().hex[:8]
    create_topic(fresh_broker, t, configs={"flush.messages": "1"})
    acked = produce_n(fresh_broker, t, 30, acks=1)
    assert acked == list(range(30))
    fresh_broker.restart(clean=False)  # SIGKILL
    recs, f = read_all(fresh_broker, t)
    assert recs == [(i, b"r%d" % i) for i in range(30)]
    assert f["high_watermark"] == 30
    assert produce_n(fresh_broker, t, 1, start=30) == [30]


def test_idempotent_state_survives_kill9(fresh_broker):
    t = "ik-" + uuid.uuid4().hex[:8]
    create_topic(fresh_broker, t)
    with WireClient(fresh_broker) as c:
        pid = c.request(22, 4, {"transactional_id": None, "transaction_timeout_ms": 1000,
                                "producer_id": -1, "producer_epoch": -1})["producer_id"]
        b0 = make_batch([b"a", b"b"], pid, 0, 0)
        assert produce_part(produce(c, t, 0, b0))["base_offset"] == 0
    fresh_broker.restart(clean=False)
    with WireClient(fresh_broker) as c:
        # The retry after the crash is still recognised as a duplicate (state rebuilt from the log).
        p = produce_part(produce(c, t, 0, b0))
        assert (p["error_code"], p["base_offset"]) == (0, 0)
        p = produce_part(produce(c, t, 0, make_batch([b"z"], pid, 0, 7)))
        assert p["error_code"] == 45
        p = produce_part(produce(c, t, 0, make_batch([b"c"], pid, 0, 2)))
        assert (p["error_code"], p["base_offset"]) == (0, 2)
    recs, _ = read_all(fresh_broker, t)
    assert [v for _, v in recs] == [b"a", b"b", b"c"]


def test_idempotent_producer_continues_after_delete_records_and_restart(fresh_broker):
    """DeleteRecords up to the high watermark, then a restart: the producer's state lived only
    in data below the new log start, so the broker forgets it (as Kafka's truncateAndReload
    does).  A live idempotent confluent-kafka producer keeps going at its next sequence and is
    accepted (unknown producer, KIP-360): nothing fails, nothing is duplicated or lost.  Before
    the restart the state is still there (a raw retry of the last batch is a duplicate)."""
    from confluent_kafka import Producer
    t = "idr-" + uuid.uuid4().hex[:8]
    create_topic(fresh_broker, t)
    with WireClient(fresh_broker) as c:
        pid = c.request(22, 4, {"transactional_id": None, "transaction_timeout_ms": 1000,
                                "producer_id": -1, "producer_epoch": -1})["producer_id"]
        for i in range(3):
            assert produce_part(produce(c, t, 0, make_batch([b"raw%d" % i], pid, 0, i)))["error_code"] == 0
        r = c.request(21, 2, {"topics": [{"name": t, "partitions": [{"partition_index": 0, "offset": -1}]}],
                              "timeout_ms": 5000})
        assert r["topics"][0]["partitions"][0]["low_watermark"] == 3
        # kept in memory although all its batches are below the log start
        p = produce_part(produce(c, t, 0, make_batch([b"raw2"], pid, 0, 2)))
        assert (p["error_code"], p["base_offset"]) == (0, 2)

    errors, offsets = [], []

    def cb(err, msg):
        if err is not None:
            errors.append(err)
        else:
            offsets.append(msg.offset())

    pr = Producer({"bootstrap.servers": fresh_broker.bootstrap, "enable.idempotence": True,
                   "linger.ms": 0, "message.timeout.ms": 30000})
    for i in range(20):
        pr.produce(t, b"before-%d" % i, partition=0, on_delivery=cb)
    assert pr.flush(15) == 0
    a = AdminClient({"bootstrap.servers": fresh_broker.bootstrap})
    res = a.delete_records([TopicPartition(t, 0, 23)], operation_timeout=10)
    assert list(res.values())[0].result(15).low_watermark == 23
    fresh_broker.restart(clean=True)
    with WireClient(fresh_broker) as c:
        # the raw producer was forgotten: any sequence is accepted now
        p = produce_part(produce(c, t, 0, make_batch([b"raw-late"], pid, 0, 50)))
        assert (p["error_code"], p["base_offset"]) == (0, 23)
    for i in range(20):
        pr.produce(t, b"after-%d" % i, partition=0, on_delivery=cb)
    assert pr.flush(30) == 0
    assert errors == []
    assert sorted(offsets) == list(range(3, 23)) + list(range(24, 44))
    recs, f = read_all(fresh_broker, t, 23)
    assert [v for _, v in recs] == [b"raw-late"] + [b"after-%d" % i for i in range(20)]
    assert f["log_start_offset"] == 23
