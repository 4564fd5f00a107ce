"""A rolled segment is flushed in the background, as Kafka does: the recovery point follows the
rolls even with the default (never) flush policy, so an unclean restart only re-scans the tail."""
import os

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from pykbroker.storage.checkpoints import OffsetCheckpointFile
from pykbroker.local.broker_process import BrokerProcess, wait_until

pytestmark = pytest.mark.timeout(90)


def test_recovery_point_follows_segment_rolls(tmp_path):
    data = str(tmp_path / "data")
    with BrokerProcess(data, {"log.flush.offset.checkpoint.interval.ms": "200"}) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic("rolls", 1, 1, config={"segment.bytes": "4096"})])["rolls"].result(10)
        p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0})
        for i in range(300):
            p.produce("rolls", key=b"k%d" % i, value=b"v" * 100)
            p.poll(0)
            if i % 20 == 19:
                p.flush(10)
        assert p.flush(10) == 0
        seg_dir = os.path.join(data, "rolls-0")
        active_base = max(int(f[:20]) for f in os.listdir(seg_dir) if f.endswith(".log"))
        assert active_base > 0, "the topic should have rolled several segments"
        ckpt = OffsetCheckpointFile(os.path.join(data, "recovery-point-offset-checkpoint"))
        # Nothing asked for a flush (default flush.messages): only the rolls move the point.
        rp = wait_until(lambda: ckpt.read().get(("rolls", 0), 0) >= active_base and ckpt.read()[("rolls", 0)],
                        timeout=20, what="recovery point to reach the active segment's base")
        assert rp >= active_base
