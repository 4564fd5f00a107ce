"""Altered topic configs take effect on open partitions without a restart (real producers and
consumers see it) and survive clean restarts and kill -9."""
import glob
import os
import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.configs.helpers import create, describe, incremental, legacy, name, overrides, TOPIC_CONFIG


def _produce(bs, topic, value, timestamp=None):
    """Send one record; returns the delivery error (None when acknowledged)."""
    p = Producer({"bootstrap.servers": bs, "linger.ms": 0, "message.max.bytes": 10_000_000,
                  "message.send.max.retries": 0})
    out = []
    kw = {"timestamp": timestamp} if timestamp is not None else {}
    p.produce(topic, value=value, partition=0, on_delivery=lambda err, msg: out.append(err), **kw)
    assert p.flush(15) == 0
    return out[0]


def _consume_all(bs, topic, n):
    c = Consumer({"bootstrap.servers": bs, "group.id": name("g"), "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got = []
    deadline = time.time() + 15
    while len(got) < n and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m)
    c.close()
    assert len(got) == n
    return got


def test_max_message_bytes_and_timestamp_type_apply_live(broker):
    bs = broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bs})
    t = name("live")
    create(admin, t)
    big = b"x" * 20_000
    assert _produce(bs, t, big) is None
    assert incremental(admin, t, ("SET", "max.message.bytes", "4096")) is None
    err = _produce(bs, t, big)
    assert err is not None and err.code() == KafkaError.MSG_SIZE_TOO_LARGE
    assert _produce(bs, t, b"small", timestamp=1_000) is None
    assert incremental(admin, t, ("SET", "message.timestamp.type", "LogAppendTime")) is None
    before = int(time.time() * 1000)
    assert _produce(bs, t, b"stamped", timestamp=2_000) is None
    after = int(time.time() * 1000)
    assert incremental(admin, t, ("DELETE", "max.message.bytes", None)) is None
    assert _produce(bs, t, big) is None

    first, small, stamped, big_again = _consume_all(bs, t, 4)
    assert first.value() == big and big_again.value() == big
    assert small.timestamp() == (1, 1_000)  # CreateTime, the producer's timestamp
    ts_type, ts = stamped.timestamp()
    assert ts_type == 2 and before <= ts <= after + 1000  # LogAppendTime, the broker's clock


def test_segment_bytes_applies_live(broker):
    bs = broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bs})
    t = name("seg")
    create(admin, t)
    part_dir = os.path.join(broker.data_dir, "%s-0" % t)
    assert _produce(bs, t, b"a" * 1000) is None
    assert len(glob.glob(os.path.join(part_dir, "*.log"))) == 1
    assert incremental(admin, t, ("SET", "segment.bytes", "2048")) is None
    for _ in range(6):
        assert _produce(bs, t, b"b" * 1000) is None
    # Each ~1.1 KB batch fits once or twice per 2 KiB segment: the log rolled several times.
    assert len(glob.glob(os.path.join(part_dir, "*.log"))) >= 3
    assert len(_consume_all(bs, t, 7)) == 7


def test_configs_survive_clean_restart_and_kill9(fresh_broker):
    b = fresh_broker
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    t = name("dur")
    create(admin, t, config={"retention.ms": "60000"})
    assert incremental(admin, t, ("SET", "max.message.bytes", "4096"), ("APPEND", "cleanup.policy", "compact"),
                       ("SET", "message.timestamp.type", "LogAppendTime")) is None
    want = {"retention.ms": "60000", "max.message.bytes": "4096", "cleanup.policy": "delete,compact",
            "message.timestamp.type": "LogAppendTime"}
    assert overrides(admin, t) == want

    b.restart(clean=True)
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    assert overrides(admin, t) == want
    assert describe(admin, t)["max.message.bytes"] == ("4096", TOPIC_CONFIG)
    # Applied to the partition reopened at start-up, not only stored.
    err = _produce(b.bootstrap, t, b"x" * 20_000)
    assert err is not None and err.code() == KafkaError.MSG_SIZE_TOO_LARGE

    # Legacy full replacement, then a crash right after the acknowledgement.
    assert legacy(admin, t, {"flush.messages": "1", "message.timestamp.type": "LogAppendTime"}) is None
    b.restart(clean=False)
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    assert overrides(admin, t) == {"flush.messages": "1", "message.timestamp.type": "LogAppendTime"}
    assert _produce(b.bootstrap, t, b"x" * 20_000, timestamp=5_000) is None
    (m,) = _consume_all(b.bootstrap, t, 1)
    assert m.timestamp()[0] == 2 and m.timestamp()[1] > 5_000
