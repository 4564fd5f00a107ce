"""Compaction with real clients against a real pykbroker process (cleaner backoff 200 ms):
a consumer reading a compacted topic from the beginning sees the latest value per key at its
original offset, tombstones disappear after delete.retention.ms, every codec survives the
rewrite, keyless records are refused, and __consumer_offsets is compacted with committed
offsets intact across a restart."""
import functools
import os
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KTP

from pykbroker.protocol.records import decode_records, iter_batches
from pykbroker.local.broker_process import BrokerProcess, wait_until
from tests.configs.helpers import create, incremental, name as _name

pytestmark = pytest.mark.timeout(150)

OVERRIDES = {"group.initial.rebalance.delay.ms": "0", "log.cleaner.backoff.ms": "200",
             "log.retention.check.interval.ms": "300"}
COMPACT = {"cleanup.policy": "compact", "segment.bytes": "2000", "min.cleanable.dirty.ratio": "0.01",
           "delete.retention.ms": "3000", "file.delete.delay.ms": "0"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(str(tmp_path_factory.mktemp("cmp") / "data"), OVERRIDES) as b:
        yield b


_wait = functools.partial(wait_until, timeout=40.0, interval=0.3)


def _produce(broker, topic, items, **conf):
    """items: [(key, value)] one batch each; returns [(offset, key, value)]."""
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, **conf})
    out = []
    for k, v in items:
        def cb(err, msg):
            assert err is None, err
            out.append((msg.offset(), msg.key(), msg.value()))
        p.produce(topic, key=k, value=v, on_delivery=cb)
        p.flush(10)
    return out


def _read_all(broker, topic):
    """Every record from the beginning to the high watermark: [(offset, key, value)]."""
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "r-" + uuid.uuid4().hex,
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "check.crcs": True})
    try:
        low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        c.assign([TopicPartition(topic, 0, low)])
        out = []
        deadline = time.time() + 20
        pos = low
        while pos < high and time.time() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    break
                raise KafkaException(m.error())
            out.append((m.offset(), m.key(), m.value()))
            pos = m.offset() + 1
        return out, high
    finally:
        c.close()


def _segments(broker, topic, partition=0):
    d = os.path.join(broker.data_dir, "%s-%d" % (topic, partition))
    return sorted(n for n in os.listdir(d) if n.endswith(".log"))


def _latest(history):
    latest = {}
    for off, k, v in history:
        latest[k] = (off, v)
    return latest


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_consumer_sees_latest_value_per_key(broker, codec):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = _name("cmp-" + codec)
    create(admin, topic, config=COMPACT)
    items = [(b"key-%d" % (i % 8), b"value-%03d-" % i + b"p" * 60) for i in range(120)]
    history = _produce(broker, topic, items, **{"compression.codec": codec})
    latest = _latest(history)

    def compacted():
        # The cleaner runs in rounds as segments roll: wait until it has caught up with every
        # segment below the active one (no key twice there), as it eventually must.
        active_base = int(_segments(broker, topic)[-1][:20])
        got, high = _read_all(broker, topic)
        cleaned_keys = [k for off, k, v in got if off < active_base]
        if len(got) < 60 and len(cleaned_keys) == len(set(cleaned_keys)):
            return got, active_base
        return None
    got, active_base = _wait(compacted, what="compaction of every non-active segment")
    # offsets preserved (gaps allowed), each record is exactly what was produced at that offset
    produced = {off: (k, v) for off, k, v in history}
    assert all(produced[off] == (k, v) for off, k, v in got)
    # every key's latest value is there, at its original offset
    assert {k: (off, v) for off, k, v in got if latest[k][0] == off} == latest
    # kafka-python reads the same compacted log (with gaps)
    kc = KafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                       enable_auto_commit=False, consumer_timeout_ms=5000)
    try:
        kc.assign([KTP(topic, 0)])
        recs = []
        for r in kc:
            recs.append((r.offset, r.key, r.value))
            if r.offset >= history[-1][0]:
                break
        assert [r for r in recs if r[0] < active_base] == [g for g in got if g[0] < active_base]
    finally:
        kc.close()


def test_tombstones_removed_after_delete_retention(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = _name("cmp-tomb")
    create(admin, topic, config=COMPACT)
    history = _produce(broker, topic, [(b"k%d" % (i % 6), b"v%d" % i + b"q" * 80) for i in range(60)])
    tombs = _produce(broker, topic, [(b"k0", None), (b"k1", None)])
    # more writes so the tombstones leave the active segment
    history += _produce(broker, topic, [(b"f%d" % (i % 4), b"w%d" % i + b"q" * 80) for i in range(60)])
    t0 = time.time()
    seen_tombstone = [False]

    def tombstones_gone():
        got, _ = _read_all(broker, topic)
        keys = {k for _, k, _ in got}
        if any(k in (b"k0", b"k1") and v is None for _, k, v in got):
            seen_tombstone[0] = True
        return got if not keys & {b"k0", b"k1"} else None
    got = _wait(tombstones_gone, timeout=60, what="tombstones removed")
    # not before delete.retention.ms (3 s) counted from the first cleaning that kept them
    assert time.time() - t0 >= 3.0
    assert seen_tombstone[0]
    assert {k for _, k, _ in got} >= {b"k2", b"k3", b"k4", b"k5"}
    latest = _latest(history)
    for off, k, v in got:
        if k in latest and latest[k][0] == off:
            assert v == latest[k][1]


def test_keyless_records_refused_on_compacted_topic(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = _name("cmp-nokey")
    create(admin, topic, config={"cleanup.policy": "compact"})
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "retries": 0})
    errs = []
    p.produce(topic, value=b"no key", on_delivery=lambda e, m: errs.append(e))
    p.flush(10)
    assert errs and errs[0] is not None and errs[0].code() == KafkaError.INVALID_RECORD
    ok = []
    p.produce(topic, key=b"k", value=b"keyed", on_delivery=lambda e, m: ok.append(e))
    p.flush(10)
    assert ok == [None]
    # kafka-python sees the same refusal
    kp = KafkaProducer(bootstrap_servers=broker.bootstrap, retries=0)
    try:
        with pytest.raises(Exception) as ei:
            kp.send(topic, value=b"no key").get(timeout=10)
        assert "InvalidRecord" in type(ei.value).__name__ or "87" in str(ei.value)
    finally:
        kp.close()
    # a delete-policy topic switched to compact live refuses them from then on
    t2 = _name("cmp-switch")
    create(admin, t2)
    assert _produce(broker, t2, [(None, b"fine")])[0][0] == 0
    assert incremental(admin, t2, ("SET", "cleanup.policy", "compact")) is None
    errs = []
    p.produce(t2, value=b"now refused", on_delivery=lambda e, m: errs.append(e))
    p.flush(10)
    assert errs[0] is not None and errs[0].code() == KafkaError.INVALID_RECORD


def test_consumer_offsets_compacted_and_intact(tmp_path):
    b = BrokerProcess(str(tmp_path / "data"), dict(OVERRIDES, **{
        "offsets.topic.num.partitions": "1", "offsets.topic.segment.bytes": "4000"}))
    b.start()
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        topic = _name("cmp-src")
        create(admin, topic)
        _produce(b, topic, [(b"k", b"v%d" % i) for i in range(5)])
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "grp-compact",
                      "enable.auto.commit": False})
        for i in range(200):
            c.commit(offsets=[TopicPartition(topic, 0, i % 5 + 1)], asynchronous=False)
        c.commit(offsets=[TopicPartition(topic, 0, 3)], asynchronous=False)
        c.close()

        def records_in_offsets_log():
            d = os.path.join(b.data_dir, "__consumer_offsets-0")
            n = 0
            for name in os.listdir(d):
                if name.endswith(".log"):
                    data = open(os.path.join(d, name), "rb").read()
                    for h in iter_batches(data):
                        n += len(decode_records(data[h.position:h.position + h.size]))
            return n
        _wait(lambda: records_in_offsets_log() < 100, what="__consumer_offsets compaction")
        b.stop()
        b.start()
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "grp-compact"})
        try:
            (tp,) = c.committed([TopicPartition(topic, 0)], timeout=15)
            assert tp.offset == 3
        finally:
            c.close()
    finally:
        try:
            b.stop()
        except Exception:
            b.kill()
