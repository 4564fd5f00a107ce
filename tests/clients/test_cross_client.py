"""Behaviour real clients depend on beyond the plain round trip: the same stored bytes decoded
by three independent client decoders, fetch size limits smaller than a batch, long-poll woken by
new data, MESSAGE_TOO_LARGE, and admin errors (TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS)."""
import time

import pytest

from tests import needs

from .util import (ak_consume, ak_create_topic, assert_partitions_equal, by_partition,
                   ck_consume, ck_consumer, ck_create_topic, ck_produce, kp_consume,
                   kp_create_topic, kp_produce, make_records, run, unique_topic)

pytestmark = pytest.mark.timeout(60)


def test_one_log_three_decoders(broker):
    """confluent-kafka writes (zstd, null header values, null key and value together); the
    bytes are read back identically by kafka-python, aiokafka and confluent-kafka."""
    topic = unique_topic("x-3dec")
    ck_create_topic(broker.bootstrap, topic, 2)
    records = make_records(1500, 2, seed=601)
    ck_produce(broker.bootstrap, topic, records, "zstd", True)
    exp = by_partition(records)
    want = {p: (0, len(v)) for p, v in exp.items()}
    assert_partitions_equal(exp, kp_consume(broker.bootstrap, topic, want), what="kafka-python")
    assert_partitions_equal(exp, run(ak_consume(broker.bootstrap, topic, want)), what="aiokafka")
    assert_partitions_equal(exp, ck_consume(broker.bootstrap, topic, want), what="confluent")


def test_fetch_limits_smaller_than_a_batch(broker):
    """Per-partition and total fetch limits far below one batch: the broker still returns at
    least one whole batch each time, so every client makes progress and reads everything."""
    topic = unique_topic("x-small-fetch")
    kp_create_topic(broker.bootstrap, topic, 2)
    records = make_records(1500, 2, seed=602, null_header_values=False, null_key_and_value=False,
                           big_every=50, big_size=20000)
    kp_produce(broker.bootstrap, topic, records, "gzip", batch_size=64 * 1024, linger_ms=20)
    exp = by_partition(records)
    want = {p: (0, len(v)) for p, v in exp.items()}
    got = kp_consume(broker.bootstrap, topic, want, max_partition_fetch_bytes=512,
                     fetch_max_bytes=1024)
    assert_partitions_equal(exp, got, what="kafka-python small fetch")
    got = run(ak_consume(broker.bootstrap, topic, want, max_partition_fetch_bytes=512,
                         fetch_max_bytes=1024))
    assert_partitions_equal(exp, got, what="aiokafka small fetch")
    # (librdkafka floors: message.max.bytes >= 1000, fetch.max.bytes >= message.max.bytes)
    got = ck_consume(broker.bootstrap, topic, want, **{"fetch.message.max.bytes": 512,
                                                       "fetch.max.bytes": 1024,
                                                       "message.max.bytes": 1000})
    assert_partitions_equal(exp, got, what="confluent small fetch")


@pytest.mark.parametrize("client", ["confluent", "kafka-python"])
def test_long_poll_woken_by_new_data(broker, client):
    """A consumer waiting at the log end with an 8 s max wait gets a new record well before the
    wait expires: the broker completes the parked Fetch when data arrives."""
    topic = unique_topic("x-longpoll")
    kp_create_topic(broker.bootstrap, topic, 1)
    rec = make_records(1, 1, seed=603, null_header_values=False, null_key_and_value=False)
    if client == "confluent":
        from confluent_kafka import TopicPartition
        c = ck_consumer(broker.bootstrap, **{"fetch.wait.max.ms": 8000})
        try:
            c.assign([TopicPartition(topic, 0, 0)])
            c.consume(1, timeout=1.5)  # connected and parked in a long poll
            t0 = time.monotonic()
            kp_produce(broker.bootstrap, topic, rec, "none")
            got = []
            while not got and time.monotonic() - t0 < 10:
                got = [m for m in c.consume(1, timeout=0.1) if not m.error()]
            dt = time.monotonic() - t0
        finally:
            c.close()
    else:
        from kafka import KafkaConsumer, TopicPartition
        c = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None,
                          fetch_max_wait_ms=8000, request_timeout_ms=15000)
        try:
            tp = TopicPartition(topic, 0)
            c.assign([tp])
            c.seek(tp, 0)
            c.poll(timeout_ms=1500)
            t0 = time.monotonic()
            kp_produce(broker.bootstrap, topic, rec, "none")
            got = []
            while not got and time.monotonic() - t0 < 10:
                got = c.poll(timeout_ms=100).get(tp, [])
            dt = time.monotonic() - t0
        finally:
            c.close()
    assert got, "record never arrived"
    assert dt < 3.0, "long poll not woken by new data: record arrived after %.2fs" % dt


def test_message_too_large(broker):
    """A record above the broker's message.max.bytes is refused with MESSAGE_TOO_LARGE (the
    client-side limit is raised so the request reaches the broker); one just below passes."""
    from confluent_kafka import KafkaError, Producer
    topic = unique_topic("x-large")
    ck_create_topic(broker.bootstrap, topic, 1)
    p = Producer({"bootstrap.servers": broker.bootstrap, "message.max.bytes": 10_000_000,
                  "enable.idempotence": False, "acks": 1, "message.timeout.ms": 15000})
    res = {}
    p.produce(topic, value=b"x" * 2_000_000, partition=0,
              on_delivery=lambda err, msg: res.__setitem__("big", err))
    p.flush(20)
    p.produce(topic, value=b"y" * 900_000, key=b"k", partition=0,
              on_delivery=lambda err, msg: res.__setitem__("ok", (err, msg.offset())))
    p.flush(20)
    assert res["big"] is not None and res["big"].code() == KafkaError.MSG_SIZE_TOO_LARGE, res
    assert res["ok"] == (None, 0), res
    [(off, rec)] = ck_consume(broker.bootstrap, topic, {0: (0, 1)})[0]
    assert (off, rec.key, rec.value) == (0, b"k", b"y" * 900_000)


def test_admin_errors_each_client(broker):
    """TOPIC_ALREADY_EXISTS (36) and INVALID_PARTITIONS (37) through every client's admin API."""
    from confluent_kafka import KafkaError, KafkaException
    from kafka.errors import InvalidPartitionsError, TopicAlreadyExistsError
    topic = unique_topic("x-admin")
    kp_create_topic(broker.bootstrap, topic, 2)
    with pytest.raises(TopicAlreadyExistsError):
        kp_create_topic(broker.bootstrap, topic, 2)
    with pytest.raises(KafkaException) as ei:
        ck_create_topic(broker.bootstrap, topic, 2)
    assert ei.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS
    with pytest.raises(AssertionError, match=r"36"):
        run(ak_create_topic(broker.bootstrap, topic, 2))
    bad = unique_topic("x-bad")
    with pytest.raises(InvalidPartitionsError):
        kp_create_topic(broker.bootstrap, bad, 0)
    with pytest.raises(KafkaException) as ei:
        ck_create_topic(broker.bootstrap, bad, 0)
    assert ei.value.args[0].code() == KafkaError.INVALID_PARTITIONS
    # The existing topic is unchanged and the bad one was not created.
    from confluent_kafka.admin import AdminClient
    md = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10)
    assert len(md.topics[topic].partitions) == 2
    assert bad not in md.topics


def test_log_append_time_topic(broker):
    """message.timestamp.type=LogAppendTime: the broker stamps its own time (max timestamp
    rewritten, CRC recomputed) and every client reads type LogAppendTime with that time, CRCs
    checked, compressed and uncompressed."""
    from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, TopicPartition
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP
    topic = unique_topic("x-lat")
    ck_create_topic(broker.bootstrap, topic, 2, {"message.timestamp.type": "LogAppendTime"})
    records = make_records(600, 2, seed=604, null_header_values=False, null_key_and_value=False)
    t0 = int(time.time() * 1000)
    half = len(records) // 2
    kp_produce(broker.bootstrap, topic, records[:half], "lz4", check_ts=False)
    kp_produce(broker.bootstrap, topic, records[half:], "none", check_ts=False)
    t1 = int(time.time() * 1000)
    exp = by_partition(records)
    # kafka-python (check_crcs on by default)
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, check_crcs=True,
                      auto_offset_reset="earliest", fetch_max_wait_ms=200)
    seen = {}
    try:
        c.assign([KTP(topic, p) for p in exp])
        deadline = time.monotonic() + 20
        while sum(len(v) for v in seen.values()) < len(records) and time.monotonic() < deadline:
            for tp, msgs in c.poll(timeout_ms=300).items():
                seen.setdefault(tp.partition, []).extend(msgs)
    finally:
        c.close()
    for p, recs in exp.items():
        ms = seen.get(p, [])
        assert [(m.key, m.value) for m in ms] == [(r.key, r.value) for r in recs]
        assert all(m.timestamp_type == 1 for m in ms), "kafka-python: not LogAppendTime"
        assert all(t0 - 1000 <= m.timestamp <= t1 + 1000 for m in ms), "append time out of window"
    # confluent-kafka (check.crcs on)
    cc = ck_consumer(broker.bootstrap)
    try:
        cc.assign([TopicPartition(topic, p, 0) for p in exp])
        n, deadline = 0, time.monotonic() + 20
        while n < len(records) and time.monotonic() < deadline:
            for m in cc.consume(500, timeout=0.3):
                assert m.error() is None, m.error()
                tstype, ts = m.timestamp()
                assert tstype == TIMESTAMP_LOG_APPEND_TIME and t0 - 1000 <= ts <= t1 + 1000
                n += 1
        assert n == len(records)
    finally:
        cc.close()


def test_offset_out_of_range_reset(broker):
    """A fetch position past the log end gets OFFSET_OUT_OF_RANGE: kafka-python with
    auto_offset_reset=earliest starts over at 0; librdkafka with auto.offset.reset=error
    surfaces the error to the application."""
    from confluent_kafka import KafkaError, TopicPartition
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP
    topic = unique_topic("x-oor")
    kp_create_topic(broker.bootstrap, topic, 1)
    records = make_records(50, 1, seed=605, null_header_values=False, null_key_and_value=False)
    kp_produce(broker.bootstrap, topic, records, "none")
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None,
                      auto_offset_reset="earliest", fetch_max_wait_ms=200)
    try:
        tp = KTP(topic, 0)
        c.assign([tp])
        c.seek(tp, 10_000)
        got = []
        deadline = time.monotonic() + 15
        while len(got) < 50 and time.monotonic() < deadline:
            got += c.poll(timeout_ms=300).get(tp, [])
        assert [m.offset for m in got] == list(range(50))
    finally:
        c.close()
    cc = ck_consumer(broker.bootstrap, **{"auto.offset.reset": "error"})
    try:
        cc.assign([TopicPartition(topic, 0, 10_000)])
        err = None
        deadline = time.monotonic() + 15
        while err is None and time.monotonic() < deadline:
            for m in cc.consume(10, timeout=0.3):
                assert m.error() is not None, "read a record at offset %d" % m.offset()
                err = m.error()
        assert err is not None and err.code() == KafkaError._AUTO_OFFSET_RESET, err
        assert "out of range" in err.str().lower() or "OFFSET_OUT_OF_RANGE" in err.str(), err
    finally:
        cc.close()


def test_delete_records(broker):
    """AdminClient.delete_records moves the log start offset: low watermark, earliest offset,
    timestamp lookups and consumption from the beginning all start there."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient
    topic = unique_topic("x-delrec")
    ck_create_topic(broker.bootstrap, topic, 1)
    records = make_records(500, 1, seed=606)
    ck_produce(broker.bootstrap, topic, records, "gzip", True)
    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    tp = TopicPartition(topic, 0, 123)
    res = a.delete_records([tp], request_timeout=15)[tp].result(timeout=20)
    assert res.low_watermark == 123, res
    c = ck_consumer(broker.bootstrap)
    try:
        assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (123, 500)
        [r] = c.offsets_for_times([TopicPartition(topic, 0, 0)], timeout=10)
        assert r.offset == 123, r
    finally:
        c.close()
    from confluent_kafka import OFFSET_BEGINNING
    got = ck_consume(broker.bootstrap, topic, {0: (OFFSET_BEGINNING, 377)})
    assert [o for o, _ in got[0]] == list(range(123, 500))
    assert [r for _, r in got[0]] == records[123:]


def test_auto_create_on_produce_not_on_admin_metadata(broker):
    """auto.create.topics.enable (default true): a producer's Metadata request
    (AllowAutoTopicCreation=true) creates the topic with num.partitions (default 1); a
    librdkafka consumer's lookup (allow.auto.create.topics=false by default, so
    AllowAutoTopicCreation=false) gets UNKNOWN_TOPIC_OR_PARTITION and creates nothing.
    (librdkafka's AdminClient.list_topics(topic=...) sends AllowAutoTopicCreation=true, as a
    producer handle does: it would create the topic on Apache Kafka too.)"""
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient
    auto = unique_topic("x-auto")
    rec = make_records(5, 1, seed=607, null_header_values=False, null_key_and_value=False)
    kp_produce(broker.bootstrap, auto, rec, "none")
    got = kp_consume(broker.bootstrap, auto, {0: (0, 5)})
    assert [r for _, r in got[0]] == rec
    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert len(a.list_topics(timeout=10).topics[auto].partitions) == 1
    ghost = unique_topic("x-ghost")
    c = ck_consumer(broker.bootstrap)
    try:
        md = c.list_topics(topic=ghost, timeout=10)
    finally:
        c.close()
    assert md.topics[ghost].error is not None
    assert md.topics[ghost].error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert ghost not in a.list_topics(timeout=10).topics


@needs.kcat_skipif(__import__("shutil").which("kcat"))
def test_kcat_metadata_listing(broker):
    """kcat -L -J: the broker (advertised host:port), the topic with its partitions, leader,
    replicas and ISR as a single broker has them."""
    import json

    from .util import kcat
    topic = unique_topic("x-meta")
    kp_create_topic(broker.bootstrap, topic, 3)
    md = json.loads(kcat(["-L", "-J", "-b", broker.bootstrap, "-t", topic]))
    [b] = md["brokers"]
    assert b["name"] == broker.bootstrap, md["brokers"]
    [t] = md["topics"]
    assert t["topic"] == topic and "error" not in t, t
    parts = sorted(t["partitions"], key=lambda p: p["partition"])
    assert [p["partition"] for p in parts] == [0, 1, 2]
    for p in parts:
        assert p["leader"] == b["id"], p
        assert [r["id"] for r in p["replicas"]] == [b["id"]], p
        assert [r["id"] for r in p["isrs"]] == [b["id"]], p
