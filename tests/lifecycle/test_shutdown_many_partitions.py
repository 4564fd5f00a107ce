"""A clean shutdown of a broker process with many partitions (storage/manager.py: every log
closed without per-file fsyncs, then one syncfs per log dir, the temp files of the producer
snapshots and leader-epoch checkpoints renamed, a second syncfs, the recovery points and the
clean-shutdown marker last).  Real process, SIGTERM: the marker is there, no temp file is left,
every partition has its leader-epoch checkpoint and its producer snapshot at the log end; the
restart recovers nothing, reads every record back, and an idempotent producer's retried batch is
recognised as a duplicate on every partition (its state came back from the snapshots)."""
import os

from pykbroker.local.broker_process import BrokerProcess
from pykbroker.protocol.wire import WireClient, fetch, fetch_part, init_producer_id, make_batch

from tests.conftest import TEST_OVERRIDES

TOPICS, PARTITIONS = 4, 100


def _create(c, names):
    r = c.request(19, 5, {"topics": [{"name": n, "num_partitions": PARTITIONS, "replication_factor": 1,
                                      "assignments": [], "configs": []} for n in names],
                          "timeout_ms": 300000, "validate_only": False})
    assert all(t["error_code"] == 0 for t in r["topics"]), r


def _produce(c, name, pid, epoch):
    """One idempotent batch (sequence 0) to every partition of ``name``: [(error, base offset)]."""
    r = c.request(0, 9, {"transactional_id": None, "acks": -1, "timeout_ms": 30000, "topic_data": [
        {"name": name, "partition_data": [
            {"index": p, "records": make_batch([b"%s-%d" % (name.encode(), p)], producer_id=pid,
                                               producer_epoch=epoch, base_sequence=0)}
            for p in range(PARTITIONS)]}]})
    parts = sorted(r["responses"][0]["partition_responses"], key=lambda x: x["index"])
    return [(x["error_code"], x["base_offset"]) for x in parts]


def test_clean_shutdown_with_many_partitions(tmp_path):
    data = str(tmp_path / "data")
    names = ["many-%d" % i for i in range(TOPICS)]
    b = BrokerProcess(data, dict(TEST_OVERRIDES)).start(60)
    try:
        with WireClient(("127.0.0.1", b.port), timeout=300) as c:
            _create(c, names)
            pid, epoch = init_producer_id(c)
            for n in names:
                assert _produce(c, n, pid, epoch) == [(0, 0)] * PARTITIONS
        b.stop(timeout=600)
        assert os.path.exists(os.path.join(data, ".kafka_cleanshutdown"))
        left = [os.path.join(d, f) for d, _, fs in os.walk(data) for f in fs if f.endswith(".tmp")]
        assert left == []
        for n in names:
            for p in range(PARTITIONS):
                d = os.path.join(data, "%s-%d" % (n, p))
                files = set(os.listdir(d))
                assert "00000000000000000001.snapshot" in files, (d, files)
                with open(os.path.join(d, "leader-epoch-checkpoint")) as f:
                    assert f.read() == "0\n1\n0 0\n", d
        n0 = len(b.lines)
        b.start(120)
        assert not [line for line in b.lines[n0:] if "recover" in line.lower()], b.log_text()[-3000:]
        with WireClient(("127.0.0.1", b.port), timeout=300) as c:
            for n in names:
                # the same batch again: a duplicate (offset 0 again, nothing appended)
                assert _produce(c, n, pid, epoch) == [(0, 0)] * PARTITIONS
            for n in names:
                for p in (0, PARTITIONS // 2, PARTITIONS - 1):
                    part = fetch_part(fetch(c, n, p, 0))
                    assert part["high_watermark"] == 1
                    assert b"%s-%d" % (n.encode(), p) in bytes(part["records"])
    finally:
        b.kill()
