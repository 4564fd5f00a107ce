"""A coordinator reloads __consumer_offsets larger than one read (coordinator/internal_log.py reads
1 MiB at a time): every read must end on a whole batch, because a Fetch-style byte slice ends
inside one and the loader parses whole batches only."""
import pytest

import pykbroker


@pytest.mark.timeout(90)   # a failed load leaves committed() retrying COORDINATOR_LOAD_IN_PROGRESS for ever
def test_offsets_reload_across_more_than_one_read_chunk(tmp_path):
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    b = pykbroker.Broker(log_dir=str(tmp_path / "data"),
                         config={"offsets.topic.num.partitions": 1}).start()
    try:
        topic = "reload-large"
        b.create_topic(topic, partitions=10)
        c = KafkaConsumer(bootstrap_servers=b.bootstrap, group_id="g-large", enable_auto_commit=False)
        tps = [TopicPartition(topic, p) for p in range(10)]
        c.assign(tps)
        # 40 commits of 10 offsets with 4,000 bytes of metadata each (the default limit is 4,096):
        # about 1.6 MB of batches of about 40 KB, so the 1 MiB read boundary falls inside one
        for i in range(40):
            c.commit({tp: OffsetAndMetadata(i * 10 + tp.partition, "%04d" % i + "m" * 3996, -1) for tp in tps})
        c.close()
        b.restart(clean=False)
        c = KafkaConsumer(bootstrap_servers=b.bootstrap, group_id="g-large", enable_auto_commit=False)
        got = {tp.partition: c.committed(tp, metadata=True) for tp in tps}
        c.close()
        assert {p: (om.offset, om.metadata[:4]) for p, om in got.items()} == \
            {p: (390 + p, "0039") for p in range(10)}
    finally:
        b.stop()
