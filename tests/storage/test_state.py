"""Producer state (idempotence), leader epoch cache, checkpoints, LogManager."""
import os

import pytest
import trio

from pykbroker.protocol.records import Record, encode_batch
from pykbroker.storage.log_validator import validate_produce_records
from pykbroker.storage import (
    LeaderEpochCache, LeaderEpochCheckpointFile, LogConfig, LogManager, OffsetCheckpointFile,
    ProducerStateError, ProducerStateManager, load_log,
)
from pykbroker.storage.checkpoints import CleanShutdownFile
from pykbroker.storage.producer_state import (
    APPEND, INVALID_PRODUCER_EPOCH, OUT_OF_ORDER_SEQUENCE_NUMBER,
)

T0 = 1_700_000_000_000
PID = 4242


def pbatch(seq, n=2, epoch=0, pid=PID, ts=T0):
    return validate_produce_records(encode_batch(
        [Record(None, ts + i, None, b"v%d" % (seq + i)) for i in range(n)],
        producer_id=pid, producer_epoch=epoch, base_sequence=seq), 1 << 20)


@pytest.fixture
def lg(tmp_path):
    return load_log(str(tmp_path / "t-0"), LogConfig(segment_bytes=400))


# ------------------------------------------------------------ idempotence

def test_duplicate_returns_original_offsets(lg):
    a = lg.append(pbatch(0), 0)
    b = lg.append(pbatch(2), 0)
    leo = lg.log_end_offset
    for seq, first in ((0, a.first_offset), (2, b.first_offset)):
        d = lg.append(pbatch(seq), 0)
        assert d.duplicate and d.first_offset == first and d.last_offset == first + 1
    assert lg.log_end_offset == leo
    # only the last 5 batches are remembered
    for s in range(4, 14, 2):
        lg.append(pbatch(s), 0)
    with pytest.raises(ProducerStateError) as ei:
        lg.append(pbatch(0), 0)
    assert ei.value.code == OUT_OF_ORDER_SEQUENCE_NUMBER
    assert lg.append(pbatch(4), 0).duplicate        # oldest of the 5 retained

def test_sequence_gap_and_fencing(lg):
    lg.append(pbatch(0, epoch=3), 0)
    for bad_seq in (5, 1, 3):
        with pytest.raises(ProducerStateError) as ei:
            lg.append(pbatch(bad_seq, epoch=3), 0)
        assert ei.value.code == OUT_OF_ORDER_SEQUENCE_NUMBER
    with pytest.raises(ProducerStateError) as ei:
        lg.append(pbatch(2, epoch=2), 0)
    assert ei.value.code == INVALID_PRODUCER_EPOCH
    # a new epoch must start at 0
    with pytest.raises(ProducerStateError) as ei:
        lg.append(pbatch(7, epoch=4), 0)
    assert ei.value.code == OUT_OF_ORDER_SEQUENCE_NUMBER
    lg.append(pbatch(0, epoch=4), 0)
    with pytest.raises(ProducerStateError):
        lg.append(pbatch(2, epoch=3), 0)   # old epoch now fenced
    # failed appends did not write anything
    assert lg.log_end_offset == 4


def test_unknown_producer_any_sequence_and_wrap():
    ps = ProducerStateManager()
    assert ps.check(1, 0, 12345, 12346) == APPEND     # KIP-360: no UNKNOWN_PRODUCER_ID
    ps.update(1, 0, 2**31 - 2, 2**31 - 1, 0, 1, T0)
    assert ps.check(1, 0, 0, 4) == APPEND             # sequence wraps at int32 max
    assert ps.check(1, 0, 1, 4) == OUT_OF_ORDER_SEQUENCE_NUMBER
    assert ps.check(1, 0, 2**31 - 2, 2**31 - 1) == ("duplicate", 0, 1, T0)


def test_wrapping_batch_via_log(lg):
    lg.append(pbatch(2**31 - 1, n=3), 0)                # seqs MAX, 0, 1
    assert lg.append(pbatch(2, n=1), 0).first_offset == 3


def test_producer_state_rebuilt_after_restart(tmp_path):
    d = str(tmp_path / "t-0")
    cfg = LogConfig(segment_bytes=300)
    lg = load_log(d, cfg)
    for s in range(0, 20, 2):
        lg.append(pbatch(s), 0)
    first8 = lg.append(pbatch(20), 0).first_offset
    lg.flush()
    assert len(lg.segments) > 2
    # unclean restart, snapshots deleted -> rebuilt from batch headers only
    for name in os.listdir(d):
        if name.endswith(".snapshot"):
            os.remove(os.path.join(d, name))
    lg2 = load_log(d, cfg, recovery_point=0, clean_shutdown=False)
    d2 = lg2.append(pbatch(20), 0)
    assert d2.duplicate and d2.first_offset == first8
    with pytest.raises(ProducerStateError):
        lg2.append(pbatch(30), 0)
    lg2.append(pbatch(22), 0)
    lg2.close()
    assert any(n.endswith(".snapshot") for n in os.listdir(d))
    lg3 = load_log(d, cfg, recovery_point=lg2.log_end_offset, clean_shutdown=True)
    assert lg3.append(pbatch(22), 0).duplicate
    assert lg3.producer_state.producers[PID].epoch == 0


def test_snapshot_roundtrip_and_corruption(tmp_path):
    ps = ProducerStateManager(str(tmp_path))
    ps.update(1, 3, 0, 4, 10, 14, T0)
    ps.update(2, 0, 7, 7, 15, 15, T0 + 5, is_transactional=True)
    ps.take_snapshot(16)
    ps2 = ProducerStateManager(str(tmp_path))
    assert ps2.load_latest_snapshot(100) == 16
    assert ps2.check(1, 3, 0, 4) == ("duplicate", 10, 14, T0)
    assert ps2.producers[2].txn_first_offset == 15
    with open(ps.snapshot_path(16), "r+b") as f:
        f.seek(12)
        f.write(b"\xff")
    ps3 = ProducerStateManager(str(tmp_path))
    assert ps3.load_latest_snapshot(100) is None and ps3.producers == {}


def test_truncation_rewinds_producer_state(lg):
    lg.append(pbatch(0), 0)
    lg.append(pbatch(2), 0)
    lg.truncate_to(2)
    assert lg.append(pbatch(2), 0).duplicate is False
    assert lg.log_end_offset == 4


# ------------------------------------------------------- leader epoch cache

def test_epoch_cache_rules(tmp_path):
    ck = LeaderEpochCheckpointFile(str(tmp_path / "leader-epoch-checkpoint"))
    c = LeaderEpochCache(ck)
    assert c.end_offset_for_epoch(0, 0) == (-1, -1)
    c.assign(2, 10)
    c.assign(2, 15)        # same epoch, later offset: ignored
    c.assign(4, 20)
    c.assign(7, 35)
    assert c.entries == [(2, 10), (4, 20), (7, 35)]
    leo = 50
    assert c.end_offset_for_epoch(-1, leo) == (-1, -1)
    assert c.end_offset_for_epoch(7, leo) == (7, 50)      # latest -> log end
    assert c.end_offset_for_epoch(9, leo) == (-1, -1)     # newer than any known
    assert c.end_offset_for_epoch(4, leo) == (4, 35)
    assert c.end_offset_for_epoch(5, leo) == (4, 35)      # between: floor epoch, next start
    assert c.end_offset_for_epoch(1, leo) == (1, 10)      # older than all: requested, first start
    assert c.end_offset_for_epoch(2, leo) == (2, 20)
    assert [c.epoch_for_offset(o) for o in (5, 10, 19, 20, 34, 35, 99)] == [None, 2, 2, 4, 4, 7, 7]
    assert open(ck.path).read() == "0\n3\n2 10\n4 20\n7 35\n"
    assert LeaderEpochCache(ck, ck.read()).entries == c.entries
    c.truncate_from_end(30)
    assert c.entries == [(2, 10), (4, 20)]
    c.truncate_from_start(25)
    assert c.entries == [(4, 25)]
    c.assign(6, 40)
    c.assign(5, 30)        # lower epoch from a new leader history wipes higher ones
    assert c.entries == [(4, 25), (5, 30)]
    assert ck.read() == c.entries


def test_log_assigns_epochs_on_append(lg):
    for epoch in (0, 0, 3, 3, 5):
        lg.append(validate_produce_records(encode_batch([Record(None, T0, None, b"x")]), 1 << 20), epoch)
    assert lg.epoch_cache.entries == [(0, 0), (3, 2), (5, 4)]
    assert lg.end_offset_for_epoch(3) == (3, 4)
    assert lg.end_offset_for_epoch(5) == (5, 5)
    assert lg.epoch_for_offset(3) == 3


# --------------------------------------------------------------- checkpoints

def test_offset_checkpoint_roundtrip(tmp_path):
    ck = OffsetCheckpointFile(str(tmp_path / "recovery-point-offset-checkpoint"))
    assert ck.read() == {}
    data = {("orders", 0): 15, ("orders", 1): 0, ("my-topic.x", 12): 2**40}
    ck.write(data)
    assert ck.read() == data
    text = open(ck.path).read().splitlines()
    assert text[0] == "0" and text[1] == "3" and "orders 0 15" in text
    assert not os.path.exists(ck.path + ".tmp")
    with open(ck.path, "w") as f:
        f.write("0\n5\norders 0 1\n")     # count mismatch -> ignored, no exception
    assert ck.read() == {}
    with open(ck.path, "wb") as f:
        f.write(b"\x00\xff\xfe")
    assert ck.read() == {}


def test_log_manager_roundtrip(tmp_path):
    root = str(tmp_path / "logs")
    m = LogManager([root], default_config=LogConfig(segment_bytes=300))
    m.load_logs()
    assert not m.had_clean_shutdown
    a = m.get_or_create_log("orders", 0)
    b = m.get_or_create_log("my-topic-with-dashes", 3)
    for i in range(10):
        a.append(pbatch(i * 2), 0)
        b.append(validate_produce_records(encode_batch([Record(None, T0, None, b"x")]), 1 << 20), 1)
    a.delete_records_before(7)
    a.high_watermark = 18
    trio.run(m.shutdown)
    root_files = set(os.listdir(root))
    assert {"recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
            "replication-offset-checkpoint", ".kafka_cleanshutdown"} <= root_files
    assert OffsetCheckpointFile(os.path.join(root, "log-start-offset-checkpoint")).read() == {("orders", 0): 7}
    assert CleanShutdownFile(root).read_broker_epoch() == -1

    m2 = LogManager([root], default_config=LogConfig(segment_bytes=300))
    m2.load_logs()
    assert m2.had_clean_shutdown and not os.path.exists(os.path.join(root, ".kafka_cleanshutdown"))
    a2, b2 = m2.get_log("orders", 0), m2.get_log("my-topic-with-dashes", 3)
    assert (a2.log_start_offset, a2.log_end_offset, a2.high_watermark) == (7, 20, 18)
    assert (b2.log_end_offset, b2.epoch_cache.entries) == (10, [(1, 0)])
    assert a2.recovery_point == 20
    assert a2.append(pbatch(18), 0).duplicate
    trio.run(m2.delete_logs, [("orders", 0)])
    assert not os.path.exists(os.path.join(root, "orders-0"))
    trio.run(m2.shutdown)


def test_flush_messages_one_moves_recovery_point(tmp_path):
    lg = load_log(str(tmp_path / "t-0"), LogConfig(flush_interval_messages=1))
    lg.append(pbatch(0), 0)
    assert lg.recovery_point == 2 and lg.unflushed_messages == 0
    lg2 = load_log(str(tmp_path / "u-0"), LogConfig(flush_interval_messages=3))
    info = lg2.append(pbatch(0), 0, auto_flush=False)
    assert not info.flush_required and lg2.recovery_point == 0
    info = lg2.append(pbatch(2), 0, auto_flush=False)
    assert info.flush_required
    lg2.flush()
    assert lg2.recovery_point == 4 and lg2.unflushed_messages == 0


# ------------------------------------------- producer state vs log start offset

def _delete_below_start(lg):
    from pykbroker.storage.retention import deletable_segments
    for seg in lg.delete_segments(deletable_segments(lg, 0, None, None, False)[0]):
        seg.delete()


def _snapshots(d):
    return sorted(int(n[:20]) for n in os.listdir(d) if n.endswith(".snapshot"))


def test_producers_below_log_start_are_kept_in_memory(tmp_path):
    """Kafka 4 keeps a producer whose batches all lie below a new log start offset
    (onLogStartOffsetIncremented removes nothing): a retry is still a duplicate, the next
    sequence goes on, a gap is still refused."""
    d = str(tmp_path / "t-0")
    lg = load_log(d, LogConfig(segment_bytes=300))
    other = 777
    for s in range(0, 10, 2):
        last = lg.append(pbatch(s), 0)
    for s in range(0, 20, 2):
        lg.append(pbatch(s, pid=other), 0)
    assert len(lg.segments) > 3
    lg.high_watermark = lg.log_end_offset
    lg.delete_records_before(last.last_offset + 11)       # every PID batch now below the start
    _delete_below_start(lg)
    assert lg.segments[0].base_offset > last.first_offset
    assert PID in lg.producer_state.producers
    d2 = lg.append(pbatch(8), 0)
    assert d2.duplicate and d2.first_offset == last.first_offset
    with pytest.raises(ProducerStateError) as ei:
        lg.append(pbatch(14), 0)
    assert ei.value.code == OUT_OF_ORDER_SEQUENCE_NUMBER
    assert not lg.append(pbatch(10), 0).duplicate
    # a clean restart keeps it too: the close snapshot is above the log start
    lg.close()
    lg2 = load_log(d, LogConfig(segment_bytes=300), recovery_point=lg.log_end_offset,
                   clean_shutdown=True, log_start_offset=lg.log_start_offset)
    assert lg2.append(pbatch(10), 0).duplicate
    assert lg2.producer_state.producers[PID].last_seq == 11


def test_producer_known_only_below_log_start_forgotten_on_reload(tmp_path):
    """Snapshots at or below the log start are dropped when state is rebuilt (Kafka's
    truncateAndReload at load): DeleteRecords up to the log end, then a restart, forgets the
    producer; it is then accepted at any sequence and tracked again from there."""
    d = str(tmp_path / "t-0")
    cfg = LogConfig(segment_bytes=300)
    lg = load_log(d, cfg)
    for s in range(0, 10, 2):
        lg.append(pbatch(s), 0)
    leo = lg.log_end_offset
    lg.high_watermark = leo
    lg.delete_records_before(leo)
    _delete_below_start(lg)
    lg.close()                                           # snapshot at leo == log start
    assert leo in _snapshots(d)
    lg2 = load_log(d, cfg, recovery_point=leo, clean_shutdown=True, log_start_offset=leo)
    assert _snapshots(d) == [] and lg2.producer_state.producers == {}
    info = lg2.append(pbatch(77), 0)                     # unknown producer: any sequence
    assert not info.duplicate and info.first_offset == leo
    assert lg2.append(pbatch(77), 0).duplicate           # and tracked from there
    with pytest.raises(ProducerStateError):
        lg2.append(pbatch(10), 0)
    assert lg2.append(pbatch(79), 0).first_offset == leo + 2


def test_truncation_drops_snapshots_below_log_start_and_truncated_producers(tmp_path):
    d = str(tmp_path / "t-0")
    lg = load_log(d, LogConfig(segment_bytes=300))
    for s in range(0, 12, 2):
        lg.append(pbatch(s, pid=1), 0)                    # offsets 0..11
    lg.roll()
    late = lg.append(pbatch(0, pid=2), 0)                 # pid 2 only after the roll
    assert 12 in _snapshots(d)
    lg.high_watermark = lg.log_end_offset
    lg.delete_records_before(12)
    lg.truncate_to(late.first_offset)                     # pid 2's only batch truncated away
    assert 2 not in lg.producer_state.producers
    assert all(o > 12 for o in _snapshots(d))             # snapshot at the log start dropped
    # pid 1 is known only from data below the start, and no snapshot above it: forgotten
    assert lg.producer_state.producers == {}
    assert not lg.append(pbatch(0, pid=2), 0).duplicate   # the truncated batch is appended again
    assert not lg.append(pbatch(500, pid=1), 0).duplicate
