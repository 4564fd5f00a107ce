"""Produce/Fetch round trips with real clients (kafka-python, confluent-kafka) against a real
pykbroker process: acks 0/1/all, idempotent producers, compression codecs, seek inside a batch,
beginning/end offsets, offsets_for_times, message too large."""
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KTP

from pykbroker.protocol.wire import create_topic

pytestmark = pytest.mark.timeout(90)


def topic_name(prefix):
    return "%s-%s" % (prefix, uuid.uuid4().hex[:8])


def confluent_consume(broker, topic, partition=0, start=0, count=None, timeout=15.0, **extra):
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g-" + uuid.uuid4().hex,
                  "enable.auto.commit": False, **extra})
    c.assign([TopicPartition(topic, partition, start)])
    out = []
    deadline = time.time() + timeout
    try:
        while time.time() < deadline and (count is None or len(out) < count):
            m = c.poll(0.5)
            if m is None:
                if count is None:
                    break
                continue
            if m.error():
                raise KafkaException(m.error())
            out.append(m)
    finally:
        c.close()
    return out


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_confluent_acks_roundtrip(broker, acks):
    t = topic_name("acks")
    create_topic(broker, t)
    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": acks, "linger.ms": 5})
    reports = []
    for i in range(50):
        p.produce(t, key=b"k%d" % i, value=b"value-%d" % i, partition=0,
                  on_delivery=lambda err, msg: reports.append((err, msg.offset())))
    assert p.flush(15) == 0
    assert all(err is None for err, _ in reports)
    if acks != "0":
        # Offsets come from the broker's answer: contiguous, starting at 0.
        assert sorted(o for _, o in reports) == list(range(50))
    msgs = confluent_consume(broker, t, count=50)
    assert [m.value() for m in msgs] == [b"value-%d" % i for i in range(50)]
    assert [m.offset() for m in msgs] == list(range(50))
    assert [m.key() for m in msgs] == [b"k%d" % i for i in range(50)]


def test_confluent_idempotent_producer(broker):
    t = topic_name("idem")
    create_topic(broker, t, partitions=3)
    p = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True,
                  "linger.ms": 2, "compression.type": "lz4"})
    errs = []
    for i in range(300):
        p.produce(t, value=b"m%d" % i, partition=i % 3,
                  on_delivery=lambda err, msg: errs.append(err))
    assert p.flush(20) == 0
    assert errs.count(None) == 300
    total = []
    for part in range(3):
        msgs = confluent_consume(broker, t, partition=part, count=100)
        assert [m.offset() for m in msgs] == list(range(100))
        total += [m.value() for m in msgs]
    assert sorted(total) == sorted(b"m%d" % i for i in range(300))


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd", None])
def test_kafka_python_roundtrip_codecs(broker, codec):
    t = topic_name("kp")
    create_topic(broker, t)
    # kafka-python 3.0 is idempotent by default: InitProducerId + sequenced batches.
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, compression_type=codec, linger_ms=20)
    futs = [p.send(t, key=b"%d" % i, value=b"x" * 100 + b"%d" % i, partition=0) for i in range(200)]
    p.flush()
    offsets = [f.get(10).offset for f in futs]
    assert offsets == list(range(200))
    p.close()
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, consumer_timeout_ms=5000)
    tp = KTP(t, 0)
    c.assign([tp])
    c.seek_to_beginning()
    # read up to the log end (200, asserted), not until 5 s without records: a record missing still
    # stops the loop at the timeout, short
    assert c.end_offsets([tp]) == {tp: 200}
    got = []
    for m in c:
        got.append((m.offset, m.value))
        if m.offset >= 199:
            break
    c.close()
    assert got == [(i, b"x" * 100 + b"%d" % i) for i in range(200)]


def test_seek_inside_batch_and_offsets(broker):
    t = topic_name("seek")
    create_topic(broker, t)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 200, "batch.num.messages": 1000})
    for i in range(100):
        p.produce(t, value=b"%d" % i, partition=0)
    assert p.flush(10) == 0
    # All 100 records went out in very few batches; seeking to 57 must start at 57 exactly.
    msgs = confluent_consume(broker, t, start=57, count=43)
    assert [m.offset() for m in msgs] == list(range(57, 100))
    assert msgs[0].value() == b"57"
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, consumer_timeout_ms=3000)
    tp = KTP(t, 0)
    assert c.beginning_offsets([tp]) == {tp: 0}
    assert c.end_offsets([tp]) == {tp: 100}
    c.assign([tp])
    c.seek(tp, 33)
    first = next(iter(c))
    assert (first.offset, first.value) == (33, b"33")
    c.close()


def test_offsets_for_times(broker):
    t = topic_name("ts")
    create_topic(broker, t)
    base = 1_700_000_000_000
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(10):
        p.produce(t, value=b"%d" % i, partition=0, timestamp=base + i * 1000)
        p.flush(10)  # one batch per record: the time index has real work to do
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g-" + uuid.uuid4().hex})
    try:
        # Exact hit, between two records (next record, its real timestamp), beyond the last.
        res = c.offsets_for_times([TopicPartition(t, 0, base + 3000)], timeout=10)
        assert res[0].offset == 3 and res[0].error is None
        res = c.offsets_for_times([TopicPartition(t, 0, base + 4500)], timeout=10)
        assert res[0].offset == 5
        res = c.offsets_for_times([TopicPartition(t, 0, base + 99_000)], timeout=10)
        assert res[0].offset == -1  # no match: offset -1, no error
        lo, hi = c.get_watermark_offsets(TopicPartition(t, 0), timeout=10)
        assert (lo, hi) == (0, 10)
    finally:
        c.close()
    kc = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    tp = KTP(t, 0)
    r = kc.offsets_for_times({tp: base + 4500})[tp]
    assert (r.offset, r.timestamp) == (5, base + 5000)  # the matched record's real timestamp
    assert kc.offsets_for_times({tp: base + 99_000})[tp] is None
    kc.close()


def test_message_too_large(broker):
    t = topic_name("big")
    create_topic(broker, t, configs={"max.message.bytes": "2000"})
    p = Producer({"bootstrap.servers": broker.bootstrap, "message.max.bytes": 100000,
                  "compression.type": "none", "retries": 0})
    res = []
    p.produce(t, value=b"y" * 5000, partition=0, on_delivery=lambda err, msg: res.append(err))
    p.flush(15)  # separate batches: Kafka rejects a whole batch, not single records
    p.produce(t, value=b"small", partition=0, on_delivery=lambda err, msg: res.append(err))
    p.flush(15)
    assert len(res) == 2
    assert res[0] is not None and res[0].name() == "MSG_SIZE_TOO_LARGE"
    assert res[1] is None
    msgs = confluent_consume(broker, t, count=1)
    assert [m.value() for m in msgs] == [b"small"]


def test_log_append_time_topic(broker):
    t = topic_name("lat")
    create_topic(broker, t, configs={"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    p = KafkaProducer(bootstrap_servers=broker.bootstrap)
    md = p.send(t, value=b"v", timestamp_ms=1000, partition=0).get(10)
    p.close()
    after = int(time.time() * 1000)
    # The producer learns the broker's append time from log_append_time_ms.
    assert before <= md.timestamp <= after
    msgs = confluent_consume(broker, t, count=1)
    ts_type, ts = msgs[0].timestamp()
    assert ts_type == 2  # TIMESTAMP_LOG_APPEND_TIME: the CRC was recomputed correctly
    assert ts == md.timestamp
