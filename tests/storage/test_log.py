import os

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from pykbroker.protocol import records as R
from pykbroker.protocol.records import Record, encode_batch, iter_batches, parse_header
from pykbroker.storage.log_validator import validate_produce_records
from pykbroker.storage import (
    FileRegion, LogConfig, LogSegment, OffsetIndex, OffsetOutOfRange, TimeIndex, load_log,
)
from pykbroker.storage.index import IndexCorrupt

CODECS = [R.CODEC_NONE, R.CODEC_GZIP, R.CODEC_SNAPPY, R.CODEC_LZ4, R.CODEC_ZSTD]
T0 = 1_700_000_000_000


def batch(n=3, ts=T0, codec=0, value=b"v" * 40, **kw):
    return encode_batch([Record(None, ts + i, b"k%d" % i, value, [("h", b"1")]) for i in range(n)],
                        codec=codec, **kw)


def append(lg, b, epoch=0, lat=None):
    return lg.append(validate_produce_records(b, 1 << 20), epoch, lat)


def read_bytes(regions):
    return b"".join(r.read() for r in regions)


def kp_decode(buf):
    mr = MemoryRecords(bytes(buf))
    out = []
    while (b := mr.next_batch()) is not None:
        assert b.validate_crc()
        out += [(r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers]) for r in b]
    return out


@pytest.fixture
def logdir(tmp_path):
    return str(tmp_path / "topic-0")


# ---------------------------------------------------------------- indexes

def test_offset_index_lookup_and_persist(tmp_path):
    idx = OffsetIndex(str(tmp_path / "x.index"), 100, 1000)
    assert idx.lookup(150) == (100, 0)
    for rel, pos in [(5, 100), (9, 300), (20, 800)]:
        idx.append(100 + rel, pos)
    idx.append(105, 900)  # non-monotonic offsets are ignored
    assert idx.lookup(99) == (100, 0)
    assert idx.lookup(105) == (105, 100)
    assert idx.lookup(115) == (109, 300)
    assert idx.lookup(10**9) == (120, 800)
    assert idx.lookup_position(799) == 300
    idx.persist(fsync=True)
    assert os.path.getsize(idx.path) == 24
    idx2 = OffsetIndex(idx.path, 100, 1000)
    idx2.load(log_size=1000)
    assert idx2.entries() == idx.entries()
    with pytest.raises(IndexCorrupt):
        OffsetIndex(idx.path, 100, 1000).load(log_size=500)   # position beyond the log
    idx.truncate_to_position(300)
    idx.persist()
    assert os.path.getsize(idx.path) == 8
    with open(idx.path, "ab") as f:
        f.write(b"\x01\x02\x03")
    with pytest.raises(IndexCorrupt):
        OffsetIndex(idx.path, 100, 1000).load(log_size=1000)


def test_time_index_lookup(tmp_path):
    ti = TimeIndex(str(tmp_path / "x.timeindex"), 50, 1000)
    assert ti.lookup(5) == (-1, 50)
    ti.maybe_append(1000, 55)
    ti.maybe_append(1000, 60)  # not larger: skipped
    ti.maybe_append(2000, 70)
    assert ti.entries() == [(1000, 55), (2000, 70)]
    assert ti.lookup(999) == (-1, 50)
    assert ti.lookup(1500) == (1000, 55)
    assert ti.lookup(5000) == (2000, 70)
    ti.persist()
    t2 = TimeIndex(ti.path, 50, 1000)
    t2.load()
    assert t2.entries() == ti.entries()
    ti.truncate_to_offset(70)
    assert ti.entries() == [(1000, 55)]


def test_index_is_sparse_and_used(logdir):
    lg = load_log(logdir, LogConfig(index_interval_bytes=1000))
    for i in range(100):
        append(lg, batch(ts=T0 + i * 10))
    seg = lg.active_segment
    size = len(batch())
    assert 0 < len(seg.offset_index) <= seg.size // 1000 + 1
    # every entry points at the start of the batch whose last offset it names
    for off, pos in seg.offset_index.entries():
        h = parse_header(os.pread(seg.fd, 61, pos))
        assert h.last_offset == off and pos % size == 0
    for off in range(300):
        assert seg.translate_offset(off).base_offset == off // 3 * 3


# ------------------------------------------------------------- append/read

@pytest.mark.parametrize("codec", CODECS)
def test_append_read_roundtrip_with_kafka_python(logdir, codec):
    lg = load_log(logdir, LogConfig())
    expected = []
    sent = []
    for i in range(5):
        recs = [Record(None, T0 + i * 100 + j, None if j == 0 else b"key%d" % j,
                       None if j == 1 else b"val%d-%d" % (i, j) * 30,
                       [] if j % 2 else [("a", b"b"), ("c", None)]) for j in range(4)]
        if i == 4:  # also a batch built by kafka-python's own encoder
            bb = DefaultRecordBatchBuilder(2, codec, False, -1, -1, -1, 1 << 20)
            for j, r in enumerate(recs):
                bb.append(j, r.timestamp, r.key, r.value, r.headers)
            b = bytes(bb.build())
        else:
            b = encode_batch(recs, codec=codec)
        sent.append(b)
        info = append(lg, b, epoch=3)
        assert info.first_offset == i * 4 and info.last_offset == i * 4 + 3
        expected += [(i * 4 + j, r.timestamp, r.key, r.value, list(r.headers)) for j, r in enumerate(recs)]
    data = read_bytes(lg.read(0, 1 << 20))
    assert kp_decode(data) == expected
    # byte-exact: the stored batch is the sent one with baseOffset/epoch patched
    for h, b in zip(iter_batches(data), sent):
        stored = bytearray(data[h.position:h.position + h.size])
        R.set_base_offset(stored, 0, 0)
        R.set_partition_leader_epoch(stored, 0, parse_header(b).partition_leader_epoch)
        assert bytes(stored) == b
        assert h.partition_leader_epoch == 3


def test_log_append_time(logdir):
    lg = load_log(logdir, LogConfig(message_timestamp_type="LogAppendTime"))
    info = append(lg, batch(4, codec=R.CODEC_GZIP), lat=T0 + 999)
    assert info.log_append_time == T0 + 999
    recs = kp_decode(read_bytes(lg.read(0, 1 << 20)))
    assert {r[1] for r in recs} == {T0 + 999}
    assert lg.offset_for_timestamp(T0 + 500) == (0, T0 + 999, 0)
    assert lg.max_timestamp_offset() == (0, T0 + 999, 0)
    # no time given: the log uses the current time for a LogAppendTime topic
    import time
    info = append(lg, batch(2))
    assert abs(info.log_append_time - time.time() * 1000) < 60_000
    h = list(iter_batches(read_bytes(lg.read(4, 1 << 20))))[0]
    assert h.timestamp_type == R.LOG_APPEND_TIME and h.max_timestamp == info.log_append_time


def test_read_inside_batch_returns_whole_batch(logdir):
    lg = load_log(logdir, LogConfig())
    for i in range(3):
        append(lg, batch(5, ts=T0 + i))
    regions = lg.read(7, 1 << 20)
    hs = list(iter_batches(read_bytes(regions)))
    assert [h.base_offset for h in hs] == [5, 10]


def test_max_offset_bound_and_min_one_batch(logdir):
    lg = load_log(logdir, LogConfig())
    for i in range(4):
        append(lg, batch(5))
    size = len(batch(5))
    assert [h.base_offset for h in iter_batches(read_bytes(lg.read(0, 1 << 20, max_offset=10)))] == [0, 5]
    # high watermark inside a batch excludes that batch
    assert [h.base_offset for h in iter_batches(read_bytes(lg.read(0, 1 << 20, max_offset=12)))] == [0, 5]
    assert lg.read(10, 1 << 20, max_offset=10) == []
    assert lg.read(12, 1 << 20, max_offset=12) == []
    # max_bytes, whole_batches: whole batches only; the first one even if it is too large
    assert sum(r.length for r in lg.read(0, size * 2 + 10, whole_batches=True)) == size * 2
    regions = lg.read(0, 10, whole_batches=True)
    assert sum(r.length for r in regions) == size
    assert lg.read(0, 10, min_one_batch=False, whole_batches=True) == []
    assert lg.read(20, 100) == []                        # at log end: empty
    with pytest.raises(OffsetOutOfRange):
        lg.read(21, 100)
    lg.delete_records_before(5)
    with pytest.raises(OffsetOutOfRange):
        lg.read(4, 100)
    assert lg.read(5, 1 << 20)[0].position == size


def test_fetch_read_is_kafkas_byte_slice(logdir):
    """The default read is Kafka's (LogSegment.read / LocalLog.read), what a Fetch answers: a
    byte slice of max_bytes from the start of the batch holding the fetch offset, possibly
    ending inside a batch; the first batch whole when larger (KIP-74, min_one_batch); the
    high watermark's batch boundary as the end; one segment per read."""
    size = len(batch(5))
    lg = load_log(logdir, LogConfig(segment_bytes=size * 3))
    for i in range(5):
        append(lg, batch(5))
    assert [s.base_offset for s in lg.segments] == [0, 15]   # 3 batches, then 2
    whole = read_bytes(lg.read(0, 1 << 20, whole_batches=True))

    # two whole batches and the first 10 bytes of the third: exactly max_bytes
    (region,) = lg.read(0, size * 2 + 10)
    assert (region.position, region.length) == (0, size * 2 + 10)
    data = region.read()
    assert data == whole[:size * 2 + 10]
    # two whole batches, then the first 10 bytes of batch 10..14 (clients leave it over)
    assert [h.base_offset for h in iter_batches(data[:size * 2])] == [0, 5]
    assert parse_header(data[size * 2:size * 2 + 10] + whole[size * 2 + 10:size * 3]).base_offset == 10
    # from the batch holding the offset (7 is in 5..9), cut at max_bytes
    (region,) = lg.read(7, size + 1)
    assert (region.position, region.length) == (size, size + 1)
    # KIP-74: the first batch whole even when larger than max_bytes...
    (region,) = lg.read(0, 10)
    assert region.length == size
    # ...and without min_one_batch (a later partition of the response) nothing when the first
    # batch does not fit (Kafka's firstEntryIncomplete: empty), the slice when it does
    assert lg.read(0, 10, min_one_batch=False) == []
    assert lg.read(0, size - 1, min_one_batch=False) == []
    (region,) = lg.read(0, size + 10, min_one_batch=False)
    assert region.length == size + 10
    # the high watermark (exclusive, a batch boundary) ends the slice
    (region,) = lg.read(0, 1 << 20, max_offset=10)
    assert region.length == size * 2
    (region,) = lg.read(0, size * 2 + 10, max_offset=10)
    assert region.length == size * 2
    assert lg.read(10, 1 << 20, max_offset=10) == []
    # one segment per read: the first segment's three batches, not the next segment's
    (region,) = lg.read(0, 1 << 20)
    assert region.length == size * 3
    (region,) = lg.read(15, 1 << 20)
    assert region.length == size * 2
    assert [h.base_offset for h in iter_batches(region.read())] == [15, 20]


def test_file_region_is_sendfile_ready(logdir):
    lg = load_log(logdir, LogConfig())
    append(lg, batch(3))
    (region,) = lg.read(0, 1 << 20)
    assert isinstance(region, FileRegion)
    fd, pos, length = region
    assert os.pread(fd, length, pos) == region.read()
    r, w = os.pipe()
    try:
        import socket
        a, b = socket.socketpair()
        sent = os.sendfile(a.fileno(), region.fd, region.position, region.length)
        assert sent == region.length and b.recv(1 << 16) == region.read()
        a.close(); b.close()
    finally:
        os.close(r); os.close(w)


def _delete_below_start(lg):
    """What the broker does after DeleteRecords: retention's log-start rule picks the segments,
    delete_segments renames them to .deleted, and the unlink comes later."""
    from pykbroker.storage.retention import deletable_segments
    doomed, reason = deletable_segments(lg, 0, None, None, False)
    assert reason in ("log start", "")
    return lg.delete_segments(doomed)


def test_region_survives_segment_deletion(logdir):
    import socket
    lg = load_log(logdir, LogConfig(segment_bytes=500))
    for _ in range(6):
        append(lg, batch(3))
    assert len(lg.segments) > 2
    (region,) = lg.read(0, 100)
    before = region.read()
    lg.delete_records_before(lg.log_end_offset)
    removed = _delete_below_start(lg)
    assert removed and not os.path.exists(os.path.join(logdir, "00000000000000000000.log"))
    assert os.path.exists(os.path.join(logdir, "00000000000000000000.log.deleted"))
    assert region.read() == before           # renamed: the fd still reads it
    for seg in removed:                      # file.delete.delay.ms later
        seg.delete()
    assert not [n for n in os.listdir(logdir) if n.endswith(".deleted")]
    assert region.read() == before           # unlinked: close is deferred while the region lives
    a, b = socket.socketpair()
    try:                                     # and a sendfile of it still completes
        assert os.sendfile(a.fileno(), region.fd, region.position, region.length) == region.length
        assert b.recv(1 << 16) == before
    finally:
        a.close(); b.close()


def test_roll_at_segment_size(logdir):
    size = len(batch(3))
    lg = load_log(logdir, LogConfig(segment_bytes=size * 4))
    for i in range(10):
        append(lg, batch(3))
    segs = lg.segments
    assert [s.base_offset for s in segs] == [0, 12, 24]
    assert all(s.size <= size * 4 for s in segs)
    names = sorted(os.listdir(logdir))
    assert "00000000000000000012.log" in names and "00000000000000000012.index" in names
    assert "00000000000000000012.timeindex" in names
    # reads span segments
    assert [h.base_offset for h in iter_batches(read_bytes(lg.read(0, 1 << 20, whole_batches=True)))] == \
        list(range(0, 30, 3))
    # an append larger than segment.bytes is refused (Kafka: RECORD_LIST_TOO_LARGE)
    lg2 = load_log(logdir + "x", LogConfig(segment_bytes=size - 1))
    with pytest.raises(R.RecordError) as ei:
        append(lg2, batch(3))
    assert ei.value.code == R.RECORD_LIST_TOO_LARGE
    # one that fills a segment exactly goes into a fresh segment each time
    lg3 = load_log(logdir + "y", LogConfig(segment_bytes=size))
    append(lg3, batch(3)); append(lg3, batch(3))
    assert [s.base_offset for s in lg3.segments] == [0, 3]


def test_roll_when_index_full(logdir):
    lg = load_log(logdir, LogConfig(index_interval_bytes=1, segment_index_bytes=8 * 3))
    for i in range(12):
        append(lg, batch(1))
    assert len(lg.segments) > 1
    assert all(len(s.offset_index) <= 3 for s in lg.segments)


def test_segment_ms_roll(logdir):
    lg = load_log(logdir, LogConfig(segment_ms=1000))
    append(lg, batch(1, ts=T0))
    append(lg, batch(1, ts=T0 + 500))
    append(lg, batch(1, ts=T0 + 1500))
    assert [s.base_offset for s in lg.segments] == [0, 2]


# -------------------------------------------------------------- timestamps

def test_offset_for_timestamp(logdir):
    lg = load_log(logdir, LogConfig(segment_bytes=2000, index_interval_bytes=200))
    for i in range(40):
        # out-of-order record timestamps inside batches
        recs = [Record(None, T0 + i * 100 + d, None, b"x" * 30) for d in (50, 10, 30)]
        append(lg, encode_batch(recs), epoch=i // 10)
    assert len(lg.segments) > 2
    assert lg.offset_for_timestamp(0) == (0, T0 + 50, 0)
    assert lg.offset_for_timestamp(T0 + 20) == (0, T0 + 50, 0)
    assert lg.offset_for_timestamp(T0 + 51) == (3, T0 + 150, 0)
    assert lg.offset_for_timestamp(T0 + 1525) == (45, T0 + 1550, 1)
    assert lg.offset_for_timestamp(T0 + 1551) == (48, T0 + 1650, 1)
    assert lg.offset_for_timestamp(T0 + 3950) == (117, T0 + 3950, 3)
    assert lg.offset_for_timestamp(T0 + 3951) is None
    assert lg.max_timestamp_offset() == (117, T0 + 3950, 3)
    lg.delete_records_before(10)
    assert lg.offset_for_timestamp(0)[0] == 10


def test_max_timestamp_first_record_wins(logdir):
    lg = load_log(logdir, LogConfig())
    assert lg.max_timestamp_offset() is None
    append(lg, encode_batch([Record(None, T0 + d, None, b"x") for d in (1, 9, 3)]))
    append(lg, encode_batch([Record(None, T0 + d, None, b"x") for d in (9, 2)]))
    assert lg.max_timestamp_offset() == (1, T0 + 9, 0)


# --------------------------------------------------------------- truncation

def test_truncate_to(logdir):
    lg = load_log(logdir, LogConfig(segment_bytes=len(batch(3)) * 3))
    for i in range(10):
        append(lg, batch(3, ts=T0 + i * 10), epoch=i // 4)
    assert lg.end_offset_for_epoch(1) == (1, 24)
    assert lg.truncate_to(13)                  # inside batch 12..14: batch removed
    assert lg.log_end_offset == 12
    assert [s.base_offset for s in lg.segments] == [0, 9]
    assert lg.epoch_cache.entries == [(0, 0)]      # epoch 1 started at 12: gone
    assert lg.max_timestamp_offset()[1] == T0 + 30 + 2
    assert lg.offset_for_timestamp(T0 + 60) is None
    info = append(lg, batch(3), epoch=5)
    assert info.first_offset == 12
    assert lg.epoch_cache.entries == [(0, 0), (5, 12)]
    assert not lg.truncate_to(100)
    assert lg.truncate_to(0) and lg.log_end_offset == 0 and lg.read(0, 100) == []
    lg.close()
    lg = load_log(logdir, LogConfig(), clean_shutdown=True)
    assert lg.log_end_offset == 0


def test_truncate_below_log_start(logdir):
    lg = load_log(logdir, LogConfig())
    for _ in range(3):
        append(lg, batch(3))
    lg.delete_records_before(6)
    lg.truncate_to(3)
    assert (lg.log_start_offset, lg.log_end_offset) == (3, 3)
    assert append(lg, batch(1)).first_offset == 3


def test_delete_records_before(logdir):
    lg = load_log(logdir, LogConfig(segment_bytes=len(batch(3)) * 2))
    for _ in range(8):
        append(lg, batch(3))
    assert [s.base_offset for s in lg.segments] == [0, 6, 12, 18]
    assert lg.delete_records_before(13) == 13
    # only the log start moves (Kafka's maybeIncrementLogStartOffset): no file I/O here
    assert [s.base_offset for s in lg.segments] == [0, 6, 12, 18]
    assert lg.log_start_offset == 13
    with pytest.raises(OffsetOutOfRange):
        lg.read(12, 1 << 20)
    removed = _delete_below_start(lg)
    assert [s.base_offset for s in removed] == [0, 6]
    assert [s.base_offset for s in lg.segments] == [12, 18]
    assert lg.log_start_offset == 13
    assert not os.path.exists(os.path.join(logdir, "00000000000000000006.log"))
    assert os.path.exists(os.path.join(logdir, "00000000000000000006.log.deleted"))
    assert os.path.exists(os.path.join(logdir, "00000000000000000006.index.deleted"))
    for seg in removed:
        seg.delete()
    assert not [n for n in os.listdir(logdir) if n.endswith(".deleted")]
    assert lg.read(13, 1 << 20)[0].position == 0   # batch 12..14 returned whole
    assert lg.delete_records_before(5) == 13       # never moves backwards
    with pytest.raises(OffsetOutOfRange):
        lg.delete_records_before(100)
    lg.delete_records_before(24)                   # up to the log end
    _delete_below_start(lg)
    assert [s.base_offset for s in lg.segments] == [18]   # the active segment stays
    assert lg.read(24, 100) == []


def test_delete_records_then_crash_before_unlink(logdir):
    """.deleted leftovers of a crash between rename and unlink are removed at load; the log
    start comes from the checkpoint (here: passed in), never from the leftovers."""
    lg = load_log(logdir, LogConfig(segment_bytes=len(batch(3)) * 2))
    for _ in range(8):
        append(lg, batch(3))
    lg.delete_records_before(13)
    _delete_below_start(lg)
    lg.flush()
    lg2 = load_log(logdir, LogConfig(segment_bytes=len(batch(3)) * 2), recovery_point=0,
                   log_start_offset=13)
    assert not [n for n in os.listdir(logdir) if n.endswith(".deleted")]
    assert (lg2.log_start_offset, lg2.log_end_offset) == (13, 24)
    assert [s.base_offset for s in lg2.segments] == [12, 18]


def test_append_as_follower_and_spanning_reads(logdir, tmp_path):
    leader = load_log(logdir, LogConfig(segment_bytes=len(batch(3)) * 3, index_interval_bytes=1))
    for i in range(10):
        append(leader, batch(3, ts=T0 + i), epoch=i // 5)
    # a follower copies whole fetch responses, several batches at a time
    follower = load_log(str(tmp_path / "f-0"), LogConfig(segment_bytes=len(batch(3)) * 4,
                                                         index_interval_bytes=1))
    off = 0
    while off < leader.log_end_offset:
        data = read_bytes(leader.read(off, len(batch(3)) * 2 + 5, whole_batches=True))
        first, last = follower.append_as_follower(bytearray(data))
        assert first == off
        off = last + 1
    assert read_bytes(follower.read(0, 1 << 20, whole_batches=True)) == \
        read_bytes(leader.read(0, 1 << 20, whole_batches=True))
    assert follower.epoch_cache.entries == leader.epoch_cache.entries == [(0, 0), (1, 15)]
    for o in range(30):
        assert parse_header(follower.read(o, 1)[0].read()).base_offset == o // 3 * 3
    # reads spanning segments return one region per segment, whole batches
    regions = follower.read(4, len(batch(3)) * 5, whole_batches=True)
    assert len(regions) == 2
    assert [h.base_offset for h in iter_batches(read_bytes(regions))] == [3, 6, 9, 12, 15]


def test_concurrent_flush_and_append(logdir):
    import threading
    lg = load_log(logdir, LogConfig(segment_bytes=2000))
    stop = threading.Event()
    errors = []

    def flusher():
        try:
            while not stop.is_set():
                lg.flush()
        except Exception as e:  # pragma: no cover
            errors.append(e)

    t = threading.Thread(target=flusher)
    t.start()
    try:
        for i in range(300):
            append(lg, batch(2, ts=T0 + i))
            if i % 50 == 49:
                lg.truncate_to(lg.log_end_offset - 4)
    finally:
        stop.set()
        t.join()
    assert not errors
    lg.flush()
    assert lg.recovery_point == lg.log_end_offset
    assert all(not s.unflushed for s in lg.segments)
    before = read_bytes(lg.read(0, 1 << 30))
    lg.close()
    lg2 = load_log(logdir, LogConfig(segment_bytes=2000), recovery_point=0, clean_shutdown=False)
    assert read_bytes(lg2.read(0, 1 << 30)) == before
    assert lg2.log_end_offset == lg.log_end_offset


def test_pwrite_finishes_a_short_write(tmp_path, monkeypatch):
    # The kernel may write less than asked (a signal, a full disk's last blocks): FileSystem.pwrite
    # writes the rest from where the short write stopped.  Here every call writes at most 3 bytes.
    from pykbroker.storage import fs as fsmod

    real = os.pwrite
    calls = []

    def short(fd, data, pos):
        calls.append(pos)
        return real(fd, bytes(data[:3]), pos)

    path = str(tmp_path / "f")
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    try:
        real(fd, b"HEAD", 0)
        monkeypatch.setattr(fsmod.os, "pwrite", short)
        fsmod.REAL_FS.pwrite(fd, bytearray(b"0123456789"), 4)
    finally:
        os.close(fd)
    with open(path, "rb") as f:
        assert f.read() == b"HEAD0123456789"
    assert calls == [4, 7, 10, 13]
