"""Committed offsets survive broker restarts (clean SIGTERM and kill -9): a consumer process kept
running across the restart resumes from its committed offsets with nothing lost, and OffsetFetch
returns the committed metadata and leader epoch afterwards."""
import pytest

from pykbroker.local.broker_process import wait_until

from .helpers import Worker, consumed, create_topic, produce, start_broker, unique, wait_consumed, wait_stable


@pytest.mark.parametrize("clean", [True, False], ids=["sigterm", "kill9"])
def test_offsets_survive_broker_restart(tmp_path, clean):
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    b = start_broker(str(tmp_path / "data"))
    topic, group, meta_group = unique("rs"), unique("g"), unique("m")
    try:
        create_topic(b.bootstrap, topic)
        w = Worker(tmp_path, "confluent", b.bootstrap, topic, group, "w0", session_ms=10000)
        wait_stable([w])
        produce(b.bootstrap, topic, 300)
        wait_consumed([w], 300)
        # a second group commits with metadata and leader epochs (the OffsetFetch check)
        c = KafkaConsumer(bootstrap_servers=b.bootstrap, group_id=meta_group, enable_auto_commit=False)
        tps = {TopicPartition(topic, p): OffsetAndMetadata(10 + p, "checkpoint-%d" % p, 0) for p in range(6)}
        c.assign(list(tps))
        c.commit(tps)
        c.close()
        b.restart(clean=clean)
        produce(b.bootstrap, topic, 300, start=300)
        seen = wait_consumed([w], 600, timeout=60)
        assert sorted(seen) == list(range(600)), "records lost across the restart"
        dups = sum(n - 1 for n in seen.values())
        # resumed from committed offsets, not from the beginning: at most a few in-flight dups
        assert dups < 60, dups
        print("restart (%s): %d duplicate(s)" % ("clean" if clean else "kill -9", dups))
        c = KafkaConsumer(bootstrap_servers=b.bootstrap, group_id=meta_group, enable_auto_commit=False)
        for tp, om in tps.items():
            got = c.committed(tp, metadata=True)
            assert (got.offset, got.metadata, got.leader_epoch) == (om.offset, om.metadata, 0), got
        c.close()
        w.stop()
        # a brand-new consumer in the first group starts exactly at the committed end
        w2 = Worker(tmp_path, "kafka-python", b.bootstrap, topic, group, "w1", session_ms=10000)
        wait_stable([w2])
        produce(b.bootstrap, topic, 6, start=600)
        wait_until(lambda: len(w2.records()) >= 6, 20, 0.1, "new consumer got the new records")
        assert sorted(v for _, _, v in w2.records()) == list(range(600, 606))
        w2.stop()
    finally:
        b.stop()
