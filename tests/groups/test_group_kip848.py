"""KIP-848 (group.protocol=consumer) with confluent-kafka/librdkafka: three members share a
6-partition topic through server-side assignment, and survive a member's kill -9."""
import time

import pytest

from tests import against

from .helpers import (GROUP_OVERRIDES, Worker, create_topic, produce, start_broker, unique, wait_consumed,
                      wait_stable)

SESSION_MS = 3000


@pytest.fixture(scope="module")
def kbroker(tmp_path_factory):
    extra = {"group.consumer.session.timeout.ms": str(SESSION_MS), "group.consumer.heartbeat.interval.ms": "300"}
    if against.AGAINST_KAFKA:   # tests/against.py
        yield against.kafka_broker(tmp_path_factory, {**GROUP_OVERRIDES, **extra})
        return
    b = start_broker(str(tmp_path_factory.mktemp("k848") / "data"), **extra)
    yield b
    b.stop()


def test_consumer_protocol_three_members_and_kill9(kbroker, tmp_path):
    topic, group = unique("k848"), unique("g")
    create_topic(kbroker.bootstrap, topic)
    workers = [Worker(tmp_path, "confluent", kbroker.bootstrap, topic, group, "k%d" % i, protocol="consumer")
               for i in range(3)]
    try:
        asgs = wait_stable(workers, timeout=40, each=2)
        assert all(len(a) == 2 for a in asgs), asgs
        produce(kbroker.bootstrap, topic, 300)
        seen = wait_consumed(workers, 300)
        assert sorted(seen) == list(range(300)) and max(seen.values()) == 1
        from confluent_kafka.admin import AdminClient
        a = AdminClient({"bootstrap.servers": kbroker.bootstrap})
        d = a.describe_consumer_groups([group])[group].result(20)
        assert len(d.members) == 3 and str(d.state).endswith("STABLE"), d
        workers[0].kill9()
        t0 = time.monotonic()
        produce(kbroker.bootstrap, topic, 300, start=300)
        wait_stable(workers[1:], timeout=SESSION_MS / 1000 + 10)
        moved = time.monotonic() - t0
        assert moved < SESSION_MS / 1000 + 5, moved
        seen = wait_consumed(workers, 600)
        assert sorted(seen) == list(range(600))
        print("KIP-848: partitions moved %.1fs after kill -9; %d duplicate(s)" % (moved, sum(c - 1 for c in seen.values())))
    finally:
        for w in workers:
            if w.alive():
                w.stop()
