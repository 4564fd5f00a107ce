"""Broker-level durability with the fault-injecting file system and real clients.

* flush.messages=1 (topic) or log.flush.interval.messages=1 (broker): a confluent-kafka
  producer's acknowledged records all survive a power cut in the middle of producing;
  with the default flush policy the loss is measured (printed), not hidden.
* two log dirs, an I/O error on one: only that dir's partitions go offline
  (KAFKA_STORAGE_ERROR on Produce/Fetch/ListOffsets, no leader in Metadata) while a real
  producer and consumer keep using the partitions of the other dir; a restart brings it back.
"""
import errno
import os
import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from pykbroker.storage.faultfs import FaultFS

from pykbroker.protocol.wire import WireClient, create_topic, fetch, fetch_part, make_batch, produce, produce_part

from .inproc import InProcessBroker

KAFKA_STORAGE_ERROR = 56
LEADER_NOT_AVAILABLE = 5


def consume_all(bootstrap, topic, partitions, timeout=20.0):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "g-%f" % time.time(),
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, p, 0) for p in partitions])
    out = {}
    deadline = time.time() + timeout
    idle = 0
    tps = [TopicPartition(topic, p) for p in partitions]

    def at_the_end():
        # every partition read to its high watermark: nothing more to wait 2 s of silence for
        try:
            ends = [c.get_watermark_offsets(tp, timeout=5, cached=False)[1] for tp in tps]
        except KafkaException:
            return False
        return all(pos.offset >= end or (pos.offset < 0 and end == 0) for pos, end in zip(c.position(tps), ends))

    while time.time() < deadline:
        m = c.poll(0.5)
        if m is None:
            idle += 1
            if out and (idle >= 4 or at_the_end()):
                break
            continue
        idle = 0
        if m.error():
            continue
        out[(m.partition(), m.offset())] = m.value()
    c.close()
    return out


def produce_until_crash(b, fs, topic, n, crash_after_acks):
    """Produce ``n`` messages one batch each; pull the plug once ``crash_after_acks`` were
    acknowledged.  Returns {offset: value} of the acknowledged ones."""
    acked = {}

    def cb(err, msg):
        if err is None:
            acked[msg.offset()] = msg.value()

    p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "linger.ms": 0,
                  "message.timeout.ms": 4000, "retries": 2, "enable.idempotence": False})
    crashed = False
    for i in range(n):
        p.produce(topic, b"value-%05d" % i, partition=0, on_delivery=cb)
        p.poll(0)
        if i % 10 == 9:
            p.flush(10)
        if not crashed and len(acked) >= crash_after_acks:
            fs.crash()
            crashed = True
            # a few more in flight while the power is gone: none may be acknowledged
            for j in range(20):
                p.produce(topic, b"value-late-%05d" % j, partition=0, on_delivery=cb)
            break
    p.flush(15)
    assert crashed
    return acked


@pytest.mark.parametrize("how", ["topic flush.messages=1", "broker log.flush.interval.messages=1", "default",
                                 "default, segment.bytes=2048"])
def test_power_loss_while_producing(tmp_path, how):
    root = str(tmp_path / "data")
    fs = FaultFS(root)
    dirs = [os.path.join(root, "d0")]
    overrides = {"log.flush.interval.messages": "1"} if how.startswith("broker") else {}
    b = InProcessBroker(dirs, fs, overrides).start()
    topic_cfg = {"flush.messages": "1"} if how.startswith("topic") else {}
    if "segment.bytes" in how:
        topic_cfg["segment.bytes"] = how.split("segment.bytes=")[1]
    try:
        create_topic(b, "t", 1, topic_cfg)
        acked = produce_until_crash(b, fs, "t", 400, 250)
        bases = [s.base_offset for s in b.broker.replica_manager.get_partition("t", 0).log.segments]
    finally:
        b.stop()
    fs.restart("drop")
    b2 = InProcessBroker(dirs, fs, overrides, port=0).start()
    try:
        got = consume_all(b2.bootstrap, "t", [0], timeout=5 if how == "default" else 20)
    finally:
        b2.stop()
    recovered = {o: v for (p, o), v in got.items()}
    lost = [o for o in acked if recovered.get(o) != acked[o]]
    print("[durability] broker power loss, %-38s acked=%d recovered=%d acked_lost=%d"
          % (how, len(acked), len(recovered), len(lost)))
    # what survived is exactly what was produced, in order, without holes
    assert sorted(recovered) == list(range(len(recovered)))
    for o, v in recovered.items():
        assert v.startswith(b"value-")
    assert not any(v.startswith(b"value-late") for v in acked.values())
    if "segment.bytes" in how:
        # rolled segments are flushed in the background (Kafka's roll): a power cut loses only
        # the active segment and at most the one whose flush was still running
        print("[durability]   segments at the crash: %d, active from offset %d; lost only at or "
              "after offset %s" % (len(bases), bases[-1], min(lost) if lost else "-"))
        assert len(bases) > 3
        assert len(recovered) >= bases[-2]
        assert all(o >= bases[-2] for o in lost)
    elif how == "default":
        assert len(lost) == len(acked) - len([o for o in acked if o in recovered])
    else:
        assert lost == [], lost[:10]
        assert len(acked) >= 250


def _dir_of(b, topic, p):
    return b.broker.log_manager.dir_of((topic, p))


def _broker_on_two_dirs(tmp_path, partitions):
    """An in-process broker on log dirs d0 and d1 under one FaultFS, with topic "t" of that
    many partitions: -> (fs, [d0, d1], broker, {partition: its dir})."""
    root = str(tmp_path / "data")
    fs = FaultFS(root)
    dirs = [os.path.join(root, "d0"), os.path.join(root, "d1")]
    b = InProcessBroker(dirs, fs).start()
    try:
        create_topic(b, "t", partitions)
        return fs, dirs, b, {p: _dir_of(b, "t", p) for p in range(partitions)}
    except BaseException:
        b.stop()
        raise


def test_disk_error_on_one_log_dir_takes_only_its_partitions_offline(tmp_path):
    fs, dirs, b, where = _broker_on_two_dirs(tmp_path, 4)
    try:
        bad_dir = dirs[1]
        bad = [p for p in range(4) if where[p] == bad_dir]
        good = [p for p in range(4) if where[p] != bad_dir]
        assert bad and good
        # some data everywhere first
        pr = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "linger.ms": 0})
        for p in range(4):
            for i in range(5):
                pr.produce("t", b"before-%d-%d" % (p, i), partition=p)
        assert pr.flush(15) == 0
        # the disk under d1 starts failing
        fs.fail(errno.EIO, ["pwrite", "fsync", "pread", "ftruncate", "create", "open_write"], under=bad_dir)
        with WireClient(b) as c:
            r = produce_part(produce(c, "t", bad[0], make_batch([b"x"])))
            assert r["error_code"] == KAFKA_STORAGE_ERROR
            for p in bad:   # the whole dir is offline now, not only the partition that failed
                assert produce_part(produce(c, "t", p, make_batch([b"y"])))["error_code"] == KAFKA_STORAGE_ERROR
                assert fetch_part(fetch(c, "t", p, 0))["error_code"] == KAFKA_STORAGE_ERROR
                lo = c.request(2, 5, {"replica_id": -1, "isolation_level": 0, "topics": [
                    {"name": "t", "partitions": [{"partition_index": p, "current_leader_epoch": -1,
                                                  "timestamp": -1}]}]})
                assert lo["topics"][0]["partitions"][0]["error_code"] == KAFKA_STORAGE_ERROR
            md = c.request(3, 12, {"topics": [{"name": "t", "topic_id": bytes(16)}],
                                   "allow_auto_topic_creation": False,
                                   "include_topic_authorized_operations": False})
            parts = {x["partition_index"]: x for x in md["topics"][0]["partitions"]}
            for p in bad:
                assert parts[p]["error_code"] == LEADER_NOT_AVAILABLE
                assert parts[p]["leader_id"] == -1
                assert parts[p]["offline_replicas"] == [b.broker.node_id]
            for p in good:
                assert parts[p]["error_code"] == 0 and parts[p]["offline_replicas"] == []
                assert produce_part(produce(c, "t", p, make_batch([b"raw-ok"])))["error_code"] == 0
        # confluent's metadata view agrees
        md2 = pr.list_topics("t", timeout=10).topics["t"].partitions
        for p in bad:
            assert md2[p].leader == -1
        # a real producer and consumer keep using the healthy dir
        for p in good:
            for i in range(5):
                pr.produce("t", b"after-%d-%d" % (p, i), partition=p)
        assert pr.flush(15) == 0
        got = consume_all(b.bootstrap, "t", good)
        for p in good:
            vals = [v for (pp, o), v in sorted(got.items()) if pp == p]
            assert vals == [b"before-%d-%d" % (p, i) for i in range(5)] + [b"raw-ok"] + \
                [b"after-%d-%d" % (p, i) for i in range(5)]
        # new partitions avoid the failed dir
        create_topic(b, "fresh", 2)
        assert {_dir_of(b, "fresh", p) for p in range(2)} == {dirs[0]}
        lm = b.broker.log_manager
        assert lm.offline_dirs == {bad_dir}
    finally:
        b.stop()
    # the failed dir got no clean-shutdown marker; after the disk is repaired a restart
    # recovers it and every acknowledged record is there
    assert not os.path.exists(os.path.join(bad_dir, ".kafka_cleanshutdown"))
    assert os.path.exists(os.path.join(dirs[0], ".kafka_cleanshutdown"))
    fs.clear_faults()
    b2 = InProcessBroker(dirs, fs).start()
    try:
        got = consume_all(b2.bootstrap, "t", list(range(4)))
        for p in bad:
            vals = [v for (pp, o), v in sorted(got.items()) if pp == p]
            assert vals == [b"before-%d-%d" % (p, i) for i in range(5)]
    finally:
        b2.stop()


def test_log_dir_failing_at_startup(tmp_path):
    """A dir whose partitions cannot even be opened comes up offline; the rest serves."""
    fs, dirs, b, where = _broker_on_two_dirs(tmp_path, 2)
    b.stop()
    bad = [p for p in range(2) if where[p] == dirs[1]]
    good = [p for p in range(2) if where[p] == dirs[0]]
    fs.fail(errno.EIO, ["open", "pread", "listdir", "create", "open_write"], under=dirs[1])
    b2 = InProcessBroker(dirs, fs).start()
    try:
        with WireClient(b2) as c:
            for p in bad:
                assert produce_part(produce(c, "t", p, make_batch([b"x"])))["error_code"] == KAFKA_STORAGE_ERROR
                assert fetch_part(fetch(c, "t", p, 0))["error_code"] == KAFKA_STORAGE_ERROR
            for p in good:
                assert produce_part(produce(c, "t", p, make_batch([b"ok"])))["error_code"] == 0
                assert fetch_part(fetch(c, "t", p, 0))["error_code"] == 0
    finally:
        b2.stop()


def _read_n(bootstrap, topic, partitions, n, timeout=30.0):
    """{(partition, offset): value} of the first ``n`` records a confluent-kafka consumer reads
    from the start of ``partitions`` (then one poll more, for anything past them)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "g-%f" % time.time(),
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in partitions])
    out = {}
    deadline = time.time() + timeout
    try:
        while len(out) < n and time.time() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                out[(m.partition(), m.offset())] = m.value()
        m = c.poll(0.5)
        if m is not None and not m.error():
            out[(m.partition(), m.offset())] = m.value()
    finally:
        c.close()
    return out


def test_new_partitions_synced_together_survive_power_loss(tmp_path):
    """A topic's new logs are made durable together (one syncfs per dir before the names,
    one after: LogManager.create_logs), not with five fsyncs each; a power cut right after
    CreateTopics loses none of them, and each still knows its leader epoch."""
    fs, dirs, b, where = _broker_on_two_dirs(tmp_path, 1)
    try:
        syncs = fs.fsyncs + fs.dir_fsyncs
        create_topic(b, "many", 40)
        # two syncfs per dir for the logs; the metadata file's own write is the rest
        assert fs.fsyncs + fs.dir_fsyncs - syncs <= 8, (fs.fsyncs, fs.dir_fsyncs, syncs)
        where = {p: _dir_of(b, "many", p) for p in range(40)}
        assert set(where.values()) == set(dirs)
        fs.crash()
    finally:
        b.stop()
    fs.restart("drop")
    b2 = InProcessBroker(dirs, fs).start()
    try:
        for p, d in where.items():
            with open(os.path.join(d, "many-%d" % p, "leader-epoch-checkpoint")) as f:
                assert f.read().split("\n")[:3] == ["0", "1", "0 0"]
        with WireClient(b2) as c:
            for p in range(40):
                assert produce_part(produce(c, "many", p, make_batch([b"v%d" % p])))["error_code"] == 0
        got = _read_n(b2.bootstrap, "many", range(40), 40)
        assert got == {(p, 0): b"v%d" % p for p in range(40)}
    finally:
        b2.stop()


def test_a_dir_failing_its_sync_while_partitions_are_made_goes_offline_alone(tmp_path):
    """The batch sync of new logs fails on one dir: that dir goes offline (the creation is
    rolled back, as any I/O error while a topic's logs are made); made again, the topic's
    partitions all go to the healthy dir and serve."""
    fs, dirs, b, _ = _broker_on_two_dirs(tmp_path, 1)
    try:
        fs.fail(errno.EIO, ["syncfs"], under=dirs[1], once=True)
        with pytest.raises(AssertionError):
            create_topic(b, "split", 4)
        lm = b.broker.log_manager
        assert lm.offline_dirs == {dirs[1]}
        create_topic(b, "split", 4)
        assert {lm.dir_of(("split", p)) for p in range(4)} == {dirs[0]}
        with WireClient(b) as c:
            for p in range(4):
                assert produce_part(produce(c, "split", p, make_batch([b"ok"])))["error_code"] == 0
        got = _read_n(b.bootstrap, "split", range(4), 4)
        assert got == {(p, 0): b"ok" for p in range(4)}
    finally:
        b.stop()
