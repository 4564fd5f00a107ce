"""Retention with real clients against a real pykbroker process (retention check every 300 ms):
by size and by time, observed through ListOffsets (confluent get_watermark_offsets, kafka-python
beginning_offsets/end_offsets), consumption after the log start moved (auto.offset.reset
earliest / latest / error / none, as Apache Kafka's clients behave), and configs altered live
through the admin APIs."""
import os
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer
from kafka import TopicPartition as KTP
from kafka.errors import OffsetOutOfRangeError

from pykbroker.local.broker_process import BrokerProcess
from tests.configs.helpers import create, incremental, legacy, name as _name

pytestmark = pytest.mark.timeout(120)

OVERRIDES = {"group.initial.rebalance.delay.ms": "0", "log.retention.check.interval.ms": "300"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(str(tmp_path_factory.mktemp("ret") / "data"), OVERRIDES) as b:
        yield b


def _produce(broker, topic, n, size=100, timestamp=None, offsets=None):
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(n):
        def cb(err, msg, i=i):
            assert err is None, err
            if offsets is not None:
                offsets[msg.offset()] = msg.value()
        kw = {"timestamp": timestamp} if timestamp is not None else {}
        p.produce(topic, key=b"k%d" % i, value=(b"%06d-" % i) + b"x" * size, on_delivery=cb, **kw)
        p.flush(10)   # one batch per message: many small batches, many segments
    return p


def _watermarks(broker, topic):
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "wm-" + uuid.uuid4().hex})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    finally:
        c.close()


def _wait(pred, timeout=20.0, what="condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.2)
    raise AssertionError("timed out waiting for " + what)


def _retention_pass_ran(broker, admin):
    """Return once a retention pass has run over every log that exists now: a canary topic
    created now, holding one hour-old record under a 30-minute retention, loses it in the first
    pass that sees it, and a pass looks at every partition log the broker has."""
    canary = _name("ret-canary")
    create(admin, canary, config={"retention.ms": "1800000"})
    _produce(broker, canary, 1, timestamp=int(time.time() * 1000) - 3600_000)
    _wait(lambda: _watermarks(broker, canary) == (1, 1), what="a retention pass (canary expired)")


def _live_log_bytes(broker, topic):
    d = os.path.join(broker.data_dir, topic + "-0")
    return sum(os.path.getsize(os.path.join(d, n)) for n in os.listdir(d) if n.endswith(".log"))


def _consume(broker, topic, start, reset, count, timeout=15):
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "c-" + uuid.uuid4().hex,
                  "enable.auto.commit": False, "auto.offset.reset": reset})
    c.assign([TopicPartition(topic, 0, start)])
    out, errors = [], []
    deadline = time.time() + timeout
    try:
        while time.time() < deadline and len(out) < count and not errors:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                errors.append(m.error())
            else:
                out.append(m)
    finally:
        c.close()
    return out, errors


def test_retention_by_size(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = _name("ret-size")
    create(admin, topic, config={"segment.bytes": "1000", "retention.bytes": "3000",
                                 "file.delete.delay.ms": "0"})
    offsets = {}
    _produce(broker, topic, 60, offsets=offsets)
    low, high = _wait(lambda: (lambda w: w if w[0] > 0 else None)(_watermarks(broker, topic)),
                      what="size retention")
    assert high == 60
    # Kafka's rule: delete the oldest segments while what remains stays >= retention.bytes
    _wait(lambda: 3000 <= _live_log_bytes(broker, topic) < 3000 + 1000, what="log size in bounds")
    low, high = _watermarks(broker, topic)
    assert 0 < low < 60
    # kafka-python's ListOffsets sees the same log start offset
    kc = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    try:
        tp = KTP(topic, 0)
        assert kc.beginning_offsets([tp])[tp] == low
        assert kc.end_offsets([tp])[tp] == 60
    finally:
        kc.close()
    # earliest from a position before the log start lands exactly on the new start
    msgs, errs = _consume(broker, topic, 0, "earliest", 60 - low)
    assert not errs
    assert [m.offset() for m in msgs] == list(range(low, 60))
    assert [m.value() for m in msgs] == [offsets[o] for o in range(low, 60)]
    # latest: jumps to the end, nothing to read
    msgs, errs = _consume(broker, topic, 0, "latest", 1, timeout=3)
    assert msgs == [] and errs == []
    # error: librdkafka reports the out-of-range position instead of resetting
    msgs, errs = _consume(broker, topic, 0, "error", 1)
    assert msgs == [] and errs and errs[0].code() == KafkaError._AUTO_OFFSET_RESET


def test_kafka_python_none_reset_raises(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = _name("ret-none")
    create(admin, topic, config={"segment.bytes": "1000", "retention.bytes": "1500"})
    _produce(broker, topic, 40)
    low, _ = _wait(lambda: (lambda w: w if w[0] > 0 else None)(_watermarks(broker, topic)),
                   what="retention")
    kc = KafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="none",
                       enable_auto_commit=False)
    try:
        tp = KTP(topic, 0)
        kc.assign([tp])
        kc.seek(tp, 0)
        with pytest.raises(OffsetOutOfRangeError):
            deadline = time.time() + 15
            while time.time() < deadline:
                kc.poll(timeout_ms=500)
        # seeking to the start it reports works
        kc.seek_to_beginning(tp)
        recs = []
        deadline = time.time() + 15
        while time.time() < deadline and len(recs) < 40 - low:
            for batch in kc.poll(timeout_ms=500).values():
                recs += batch
        assert [r.offset for r in recs] == list(range(low, 40))
    finally:
        kc.close()


def test_retention_by_time_altered_live(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = _name("ret-time")
    create(admin, topic, config={"segment.bytes": "1000"})
    now = int(time.time() * 1000)
    old = {}
    _produce(broker, topic, 20, timestamp=now - 3600_000, offsets=old)   # an hour old
    recent = {}
    _produce(broker, topic, 20, timestamp=now, offsets=recent)
    _retention_pass_ran(broker, admin)
    assert _watermarks(broker, topic) == (0, 40)     # default retention: 7 days, nothing goes
    # 30 minutes, set live through IncrementalAlterConfigs: the hour-old segments go
    assert incremental(admin, topic, ("SET", "retention.ms", "1800000")) is None
    low, high = _wait(lambda: (lambda w: w if w[0] > 0 else None)(_watermarks(broker, topic)),
                      what="time retention")
    assert high == 40 and 0 < low <= 20
    # the segment holding both old and recent records stays (its largest timestamp is recent)
    msgs, errs = _consume(broker, topic, 0, "earliest", 40 - low)
    assert not errs
    assert [m.offset() for m in msgs] == list(range(low, 40))
    assert all(m.offset() in recent for m in msgs if m.timestamp()[1] == now)
    kc = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    try:
        tp = KTP(topic, 0)
        assert kc.beginning_offsets([tp])[tp] == low
        # offsets_for_times of an old timestamp now answers the log start's first record
        assert kc.offsets_for_times({tp: now - 7200_000})[tp].offset == low
    finally:
        kc.close()


def test_expired_active_segment_rolled_and_deleted(broker):
    """All data expired (active segment included): Kafka rolls a new empty segment and deletes
    the old one, so the log start offset reaches the log end and earliest reads nothing."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = _name("ret-all")
    create(admin, topic)
    now = int(time.time() * 1000)
    _produce(broker, topic, 5, timestamp=now - 3600_000)
    assert _watermarks(broker, topic) == (0, 5)
    # legacy AlterConfigs (full replacement) takes effect live too
    assert legacy(admin, topic, {"retention.ms": "60000"}) is None
    _wait(lambda: _watermarks(broker, topic) == (5, 5), what="all expired")
    # appends continue at the same offsets
    offsets = {}
    _produce(broker, topic, 2, offsets=offsets)
    assert sorted(offsets) == [5, 6]
    msgs, errs = _consume(broker, topic, 0, "earliest", 2)
    assert [m.offset() for m in msgs] == [5, 6] and not errs


def test_retention_survives_restart(tmp_path):
    b = BrokerProcess(str(tmp_path / "data"), OVERRIDES)
    b.start()
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        topic = _name("ret-restart")
        create(admin, topic, config={"segment.bytes": "1000", "retention.bytes": "2000"})
        _produce(broker=b, topic=topic, n=40)
        low, _ = _wait(lambda: (lambda w: w if w[0] > 0 else None)(_watermarks(b, topic)),
                       what="retention")
        time.sleep(0.5)
        low, _ = _watermarks(b, topic)
        b.kill()          # crash: the log start offset must not go back
        b.start()
        low2, high2 = _watermarks(b, topic)
        assert high2 == 40 and low2 >= low
    finally:
        try:
            b.stop()
        except Exception:
            b.kill()
