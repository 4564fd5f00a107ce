"""Fetch sessions (KIP-227) with the Python clients: kafka-python (which implements
FetchSessionHandler) reads every record of a 50-partition topic through an incremental session
and keeps fetching incrementally while idle; confluent-kafka (librdkafka, which sends
sessionless fetches) still reads everything.  The broker's session cache counters say which
kinds of fetches it served."""
import time

import pytest

from tests import needs

import pykbroker
from pykbroker.embedded import TEST_CONFIG
from pykbroker.protocol import wire

pytestmark = pytest.mark.timeout(120)

PARTITIONS = 50


@pytest.fixture
def broker():
    # in-process and per test: the test reads the fetch-session counters on the broker's loop
    with pykbroker.Broker(config=TEST_CONFIG) as b:
        yield b


def _stats(b):
    return b._sync(lambda br: dict(br.replica_manager.fetch_sessions.stats))


def _seed(b, topic):
    b.create_topic(topic, PARTITIONS)
    sent = set()
    with wire.WireClient(b.bootstrap_servers) as c:
        for p in range(PARTITIONS):
            vals = [b"%s-p%d-%d" % (topic.encode(), p, i) for i in range(3)]
            assert wire.produce_part(wire.produce(c, topic, p, wire.make_batch(vals), acks=1))["error_code"] == 0
            sent.update((p, v) for v in vals)
    return sent


def test_kafka_python_consumer_uses_an_incremental_session(broker):
    from kafka import KafkaConsumer, TopicPartition
    topic = "fs-kafka-python"
    sent = _seed(broker, topic)
    before = _stats(broker)
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=None, fetch_max_wait_ms=100,
                      auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        c.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        got = set()
        deadline = time.monotonic() + 60
        while len(got) < len(sent) and time.monotonic() < deadline:
            for tp, recs in c.poll(timeout_ms=500).items():
                got.update((tp.partition, r.value) for r in recs)
        assert got == sent
        mid = _stats(broker)
        # idle: its fetches go on, incrementally, naming no partition
        end = time.monotonic() + 1.5
        while time.monotonic() < end:
            assert c.poll(timeout_ms=200) == {}
        after = _stats(broker)
    finally:
        c.close()
    assert after["sessions_created"] > before["sessions_created"], after
    assert after["incremental_fetches"] - mid["incremental_fetches"] >= 2, (mid, after)
    assert after["session_errors"] == before["session_errors"], after


def test_confluent_consumer_still_reads_everything(broker):
    confluent_kafka = needs.module("confluent_kafka")
    topic = "fs-confluent"
    sent = _seed(broker, topic)
    before = _stats(broker)
    c = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "fs-confluent",
                                  "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    try:
        c.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        got = set()
        deadline = time.monotonic() + 60
        while len(got) < len(sent) and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.add((m.partition(), m.value()))
        assert got == sent
    finally:
        c.close()
    after = _stats(broker)
    assert after["session_errors"] == before["session_errors"], after
