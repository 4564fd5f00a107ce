"""DeleteRecords removes whole segments the way Kafka's segment deletion does: the log start
offset moves at once, the segments wholly below it are renamed to ``.deleted`` off the event
loop, and unlinked only after the topic's ``file.delete.delay.ms``.  A reader that already holds
a file region of such a segment (a fetch response being sent) still gets every byte."""
import os
import socket
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from pykbroker.storage.fs import REAL_FS
from pykbroker.local.broker_process import wait_until
from pykbroker.protocol.records import iter_batches
from pykbroker.protocol.wire import create_topic
from tests.durability.inproc import InProcessBroker

pytestmark = pytest.mark.timeout(90)


def _segments(d):
    names = os.listdir(d)
    live = sorted(int(n[:20]) for n in names if n.endswith(".log"))
    deleted = sorted(int(n[:20]) for n in names if n.endswith(".log.deleted"))
    return live, deleted


def _produce(bootstrap, topic, n):
    errors = []
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all"})
    for i in range(n):
        p.produce(topic, key=b"k%d" % i, value=b"value-%04d-" % i + b"x" * 90, partition=0,
                  on_delivery=lambda err, msg: err and errors.append(err))
        p.poll(0)
        if i % 10 == 9:
            p.flush(10)
    assert p.flush(10) == 0 and not errors


def _delete_records(bootstrap, topic, offset):
    a = AdminClient({"bootstrap.servers": bootstrap})
    res = a.delete_records([TopicPartition(topic, 0, offset)], operation_timeout=10)
    return list(res.values())[0].result(15).low_watermark


def _consume(bootstrap, topic, n):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "g-%f" % time.time(),
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, 0, -2)])    # OFFSET_BEGINNING: the new log start
    out = []
    deadline = time.time() + 20
    while len(out) < n and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            out.append((m.offset(), m.value()[:11]))
    c.close()
    return out


@pytest.fixture
def inproc(tmp_path):
    b = InProcessBroker([str(tmp_path / "data")], REAL_FS).start()
    yield b
    b.stop()


def test_delete_records_renames_then_unlinks_after_delay(inproc):
    b = inproc
    t = "dr-files"
    create_topic(b, t, 1, {"segment.bytes": "4096", "file.delete.delay.ms": "1500"})
    _produce(b.bootstrap, t, 200)
    d = os.path.join(b.log_dirs[0], "%s-0" % t)
    live, deleted = _segments(d)
    assert len(live) >= 5 and not deleted
    assert _delete_records(b.bootstrap, t, 140) == 140
    doomed = [base for i, base in enumerate(live) if i + 1 < len(live) and live[i + 1] <= 140]
    assert doomed
    # answered: the segments below the new start are renamed, not yet unlinked
    live2, deleted2 = _segments(d)
    assert deleted2 == doomed and live2 == [x for x in live if x not in doomed]
    for base in doomed:
        for suffix in (".index.deleted", ".timeindex.deleted"):
            assert os.path.exists(os.path.join(d, "%020d%s" % (base, suffix)))
    rm = b.broker.replica_manager
    assert b.call(lambda: rm.get_partition(t, 0).log.log_start_offset) == 140
    # consumers start at the new log start and read the rest
    got = _consume(b.bootstrap, t, 60)
    assert [o for o, _ in got] == list(range(140, 200))
    assert got[0][1] == b"value-0140-"
    # after file.delete.delay.ms the files are gone
    t0 = time.time()
    wait_until(lambda: not _segments(d)[1], timeout=10, what=".deleted files to be unlinked")
    assert time.time() - t0 < 10
    assert not [n for n in os.listdir(d) if n.endswith(".deleted")]


def test_reader_of_a_deleted_segment_completes(inproc):
    """A fetch's file regions (what the connection hands to sendfile) taken before DeleteRecords
    are sent in full after the segment was renamed and unlinked (file.delete.delay.ms=0)."""
    b = inproc
    t = "dr-reader"
    create_topic(b, t, 1, {"segment.bytes": "4096", "file.delete.delay.ms": "0"})
    _produce(b.bootstrap, t, 150)
    part = b.call(lambda: b.broker.replica_manager.get_partition(t, 0))
    # a Fetch read stays in one segment (Kafka's rule), so a reader of the first three segments
    # holds the regions of three reads, as three fetches being sent would
    regions: list = []
    offset = 0
    for _ in range(3):
        res = b.call(lambda: part.read_records(offset, 1 << 20, True, False))
        assert res.error == 0 and len(res.records.parts) == 1
        regions += res.records.parts
        offset = [h.next_offset for h in iter_batches(res.records.parts[0].read())][-1]
    assert len({r.fd for r in regions}) == 3   # three segment files
    expected = b"".join(r.read() for r in regions)
    assert _delete_records(b.bootstrap, t, 120) == 120
    d = os.path.join(b.log_dirs[0], "%s-0" % t)
    wait_until(lambda: not _segments(d)[1], timeout=10, what=".deleted files to be unlinked")
    assert _segments(d)[0][0] > 0      # the first segments are really gone from the directory
    sent = bytearray()
    a, c = socket.socketpair()
    try:
        for r in regions:
            pos, left = r.position, r.length
            while left:
                n = os.sendfile(a.fileno(), r.fd, pos, left)
                assert n > 0
                pos += n
                left -= n
                while True:
                    c.setblocking(False)
                    try:
                        chunk = c.recv(1 << 20)
                    except BlockingIOError:
                        break
                    sent += chunk
    finally:
        a.close()
        c.setblocking(True)
        while True:
            chunk = c.recv(1 << 20)
            if not chunk:
                break
            sent += chunk
        c.close()
    assert bytes(sent) == expected
    del regions, res
