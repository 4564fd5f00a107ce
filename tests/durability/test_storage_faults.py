"""Every fault class of the fault-injecting file system against the storage layer.

The oracle is independent of the loader: after the fault the segment files on disk are parsed
by ``model.valid_prefix_of_files`` and the reloaded log must hold exactly that prefix, which
must itself be a whole-batch prefix of what was written.  Each test prints its figures
(records written/acked/recovered, acknowledged records lost, bytes truncated); run with ``-s``
to see them.
"""
import errno
import os
import random

import pytest

from pykbroker.storage.log_validator import validate_produce_records
from pykbroker.storage import KafkaStorageError, LogConfig

from .model import (T0, TOPIC, checkpoint_recovery_points, log_bytes, make_batch, produce, recover_and_check,
                    shutdown)

NEVER = (1 << 63) - 1


def pdir(root):
    return os.path.join(root, "%s-0" % TOPIC)


def cfg(flush=NEVER, segment_bytes=16 * 1024):
    return LogConfig(segment_bytes=segment_bytes, index_interval_bytes=512,
                     flush_interval_messages=flush)


# --------------------------------------------------------------------------- power loss
@pytest.mark.parametrize("unsynced", ["drop", "zero"])
@pytest.mark.parametrize("seed", range(6))
def test_power_loss_flush_every_message_loses_no_ack(root, fs, unsynced, seed):
    """flush.messages=1: the power goes at a random write (torn or not); no acknowledged
    record is lost."""
    rng = random.Random(seed)
    fs.crash_after_writes(rng.randint(20, 400), tear=rng.choice([None, 1, 30, 200]))
    run = produce(root, fs, cfg(flush=1), 400, seed=seed, checkpoint_every=rng.choice([0, 25]))
    assert fs.crashed
    fs.restart(unsynced)
    figs, _, _ = recover_and_check("power-loss flush.messages=1 %s #%d" % (unsynced, seed), root, fs, run, cfg(1))
    assert figs.acked_lost == 0
    assert figs.records_recovered >= figs.acked_records


def test_power_loss_default_flush_measures_loss(root, fs):
    """Default flush policy (flush.messages=Long.MAX, no flush.ms): nothing is fsynced while
    running, so a power cut loses every record since the last flush — the trade-off."""
    run = produce(root, fs, cfg(), 300, checkpoint_every=50)
    fs.power_loss("drop")
    figs, _, _ = recover_and_check("power-loss default flush", root, fs, run, cfg())
    assert figs.acked_lost == figs.acked_records - figs.records_recovered
    assert figs.acked_lost > 0


def test_power_loss_after_explicit_flush_keeps_flushed(root, fs):
    run = produce(root, fs, cfg(), 200)
    run.log.flush()
    flushed_leo = run.log.log_end_offset
    checkpoint_recovery_points(run.lm)
    more = produce(root, fs, cfg(), 50, seed=1, lm=run.lm)
    run.written += more.written
    fs.power_loss("drop")
    figs, _, lg = recover_and_check("power-loss after flush", root, fs, run, cfg())
    assert lg.log_end_offset == flushed_leo
    assert figs.acked_lost == figs.acked_records - flushed_leo


@pytest.mark.parametrize("flush", [10, 100])
def test_power_loss_flush_every_n(root, fs, flush):
    run = produce(root, fs, cfg(flush=flush), 300)
    fs.power_loss("drop")
    figs, _, _ = recover_and_check("power-loss flush.messages=%d" % flush, root, fs, run, cfg(flush))
    # at most the records appended since the last fsync (< flush, plus the last batch)
    assert figs.acked_lost < flush + 5


def test_process_crash_keeps_every_ack(root, fs):
    """kill -9: the page cache survives, so every acknowledged record does, whatever the
    flush policy."""
    run = produce(root, fs, cfg(), 300)
    fs.power_loss("keep")
    figs, _, _ = recover_and_check("process crash default flush", root, fs, run, cfg())
    assert figs.acked_lost == 0 and figs.bytes_truncated == 0


# --------------------------------------------------------------------------- torn writes
@pytest.mark.parametrize("keep", [1, 11, 60, 61, 62, -1])
def test_torn_last_write(root, fs, keep):
    """The last write reached the disk only partly: that batch is cut, the rest stays."""
    run = produce(root, fs, cfg(), 120)
    last = run.written[-1]
    keep = len(last.data) - 1 if keep == -1 else keep
    seg = run.log.active_segment.log_path
    fs.crash()
    fs.restart("keep", tear={seg: keep})
    figs, _, lg = recover_and_check("torn last write keep=%d" % keep, root, fs, run, cfg())
    assert lg.log_end_offset == last.first
    assert figs.bytes_truncated == keep


def test_crash_mid_write_torn_then_reappend(root, fs):
    fs.crash_after_writes(77, tear=45)
    run = produce(root, fs, cfg(), 200)
    fs.restart("keep")
    figs, lm, lg = recover_and_check("crash mid-write (torn 45 bytes)", root, fs, run, cfg())
    assert figs.bytes_truncated == 45 and figs.acked_lost == 0
    # appends continue at the recovered end and survive the next crash
    more = produce(root, fs, cfg(), 30, seed=3, lm=lm)
    run.written = [w for w in run.written if w.acked] + more.written
    fs.power_loss("keep")
    figs2, _, _ = recover_and_check("re-append after recovery", root, fs, run, cfg())
    assert figs2.acked_lost == 0


# --------------------------------------------------------------------------- zero fill
def test_zero_filled_unsynced_tail(root, fs):
    """Delayed allocation: the file size survived the power cut, the data did not (zeros)."""
    run = produce(root, fs, cfg(segment_bytes=1 << 20), 100)
    run.log.flush()
    flushed = run.log.log_end_offset
    flushed_size = run.log.active_segment.size
    more = produce(root, fs, cfg(segment_bytes=1 << 20), 40, seed=5, lm=run.lm)
    run.written += more.written
    fs.power_loss("zero")
    assert os.path.getsize(os.path.join(pdir(root), "%020d.log" % 0)) > flushed_size
    figs, _, lg = recover_and_check("zero-filled tail", root, fs, run, cfg(segment_bytes=1 << 20))
    assert lg.log_end_offset == flushed
    assert figs.bytes_truncated == figs.on_disk_bytes - flushed_size > 0


def test_zero_tail_at_rest(root, fs):
    run = produce(root, fs, cfg(segment_bytes=1 << 20), 60)
    run.log.flush()
    fs.power_loss("keep")
    fs.zero_tail(os.path.join(pdir(root), "%020d.log" % 0), 700)
    figs, _, _ = recover_and_check("zero tail 700 bytes at rest", root, fs, run, cfg(segment_bytes=1 << 20))
    assert figs.bytes_truncated >= 700


# --------------------------------------------------------------------------- bit flips
# offsets inside a batch: base offset, length, epoch, magic, crc, attributes, last delta,
# timestamps, producer id, record count, first record, last byte.  Not byte 12-15
# (partitionLeaderEpoch): as in Kafka it lies outside the CRC, so a flip there is undetectable.
@pytest.mark.parametrize("where", [0, 8, 16, 17, 21, 23, 27, 35, 43, 57, 61, -1])
def test_bit_flip_past_recovery_point(root, fs, where):
    """A flipped bit in the unflushed part: the log is cut at that batch, later segments are
    discarded."""
    run = produce(root, fs, cfg(segment_bytes=4096), 200)
    segs = run.log.segments
    assert len(segs) >= 4
    target = segs[1]
    fs.power_loss("keep")   # unclean, recovery point 0: everything is CRC-scanned
    # flip inside the 3rd batch of the second segment
    from pykbroker.protocol.records import iter_batches
    data = open(target.log_path, "rb").read()
    hs = list(iter_batches(data))
    h = hs[2]
    off = h.position + (h.size - 1 if where == -1 else where)
    fs.flip_bits(target.log_path, [off], mask=0x10)
    figs, _, lg = recover_and_check("bit flip at batch byte %d" % where, root, fs, run, cfg(segment_bytes=4096))
    assert lg.log_end_offset == h.base_offset
    assert len(lg.segments) == 2
    assert figs.bytes_truncated > 0


# --------------------------------------------------------------------------- indexes
@pytest.mark.parametrize("damage", ["delete-index", "delete-timeindex", "garbage-index",
                                    "odd-size-index", "garbage-timeindex", "delete-both"])
@pytest.mark.parametrize("clean", [True, False])
def test_damaged_index_files(root, fs, damage, clean):
    c = cfg(segment_bytes=8192)
    run = produce(root, fs, c, 150)
    if clean:
        shutdown(run.lm)
        fs.power_loss("drop")   # a clean shutdown made everything durable
    else:
        fs.power_loss("keep")
    base = run.log.segments[1].base_offset
    p = os.path.join(pdir(root), "%020d" % base)
    kind, _, ext = damage.partition("-")
    for e in ([".index", ".timeindex"] if ext == "both" else ["." + ext]):
        if kind == "delete":
            fs.delete(p + e)
        elif kind == "garbage":
            fs.write_garbage(p + e, bytes(random.Random(1).randrange(256) for _ in range(96)))
        else:
            fs.write_garbage(p + e, b"\x00" * 13)
    figs, _, lg = recover_and_check("index %s (clean=%s)" % (damage, clean), root, fs, run, c)
    assert figs.acked_lost == 0 and figs.bytes_truncated == 0
    seg = [s for s in lg.segments if s.base_offset == base][0]
    assert len(seg.offset_index) > 0   # rebuilt
    # timestamp lookups into the damaged segment work again: for every record of every batch in
    # it, its own timestamp finds it (record j of batch i carries T0 + 10 i + j, all distinct and
    # increasing), and a timestamp between two batches finds the next batch's first record
    nxt = min((s.base_offset for s in lg.segments if s.base_offset > base), default=None)
    inside = [(i, w) for i, w in enumerate(run.written) if w.first >= base and (nxt is None or w.last < nxt)]
    assert len(inside) >= 3, "the damaged segment holds too few batches to test lookups"
    for i, w in inside:
        for j in range(w.last - w.first + 1):
            assert lg.offset_for_timestamp(T0 + 10 * i + j)[:2] == (w.first + j, T0 + 10 * i + j), (i, j)
        if i + 1 < len(run.written):
            assert lg.offset_for_timestamp(T0 + 10 * i + 9)[0] == run.written[i + 1].first, i


# --------------------------------------------------------------------------- ENOSPC / EIO / EROFS
@pytest.mark.parametrize("partial", [0, 33])
def test_enospc_fails_the_append_and_leaves_no_partial_batch(root, fs, partial):
    c = cfg(segment_bytes=8192)
    rule = fs.fail(errno.ENOSPC, ["pwrite"], under=pdir(root), after=60, once=True, partial=partial)
    run = produce(root, fs, c, 120, stop_on_error=False)
    assert rule.fired == 1 and isinstance(run.error, KafkaStorageError)
    assert len([w for w in run.written if w.acked]) == 119
    # the running log is consistent: exactly the acknowledged batches
    assert log_bytes(run.log) == b"".join(w.data for w in run.written)
    fs.power_loss("keep")
    figs, _, _ = recover_and_check("ENOSPC on write (partial=%d)" % partial, root, fs, run, c)
    assert figs.acked_lost == 0 and figs.bytes_truncated == 0


def test_fsync_error_is_not_acknowledged(root, fs):
    """flush.messages=1 and the fsync fails (EIO/ENOSPC): the append is not acknowledged; after
    a power cut no acknowledged record is missing."""
    fs.fail(errno.EIO, ["fsync"], under=pdir(root), after=40, once=True)
    run = produce(root, fs, cfg(flush=1), 80)
    assert isinstance(run.error, KafkaStorageError)
    assert not run.written[-1].acked
    fs.power_loss("drop")
    figs, _, _ = recover_and_check("EIO on fsync flush.messages=1", root, fs, run, cfg(1))
    assert figs.acked_lost == 0


@pytest.mark.parametrize("err", [errno.EROFS, errno.EACCES])
def test_read_only_directory(root, fs, err):
    """The directory turns read-only: appends fail with KafkaStorageError, reads still work,
    nothing acknowledged is lost once the disk is back."""
    c = cfg(segment_bytes=8192)
    run = produce(root, fs, c, 60)
    before = log_bytes(run.log)
    fs.read_only(root, err)
    with pytest.raises(KafkaStorageError):
        run.log.append(validate_produce_records(make_batch(999, 2), 1 << 20), 0)
    with pytest.raises(KafkaStorageError):
        run.log.flush()
    with pytest.raises(OSError):
        checkpoint_recovery_points(run.lm)
    assert log_bytes(run.log) == before
    fs.clear_faults()
    fs.power_loss("keep")
    figs, _, _ = recover_and_check("read-only dir (%s)" % errno.errorcode[err], root, fs, run, c)
    assert figs.acked_lost == 0


# --------------------------------------------------------------------------- markers, checkpoints
def test_clean_marker_removal_is_durable(root, fs):
    """Clean shutdown, restart (the marker is removed), unflushed appends, power cut with a
    torn write: the next start must not trust the marker and must recover the segment."""
    c = cfg(segment_bytes=1 << 20)
    run = produce(root, fs, c, 50)
    shutdown(run.lm)
    fs.power_loss("drop")
    more = produce(root, fs, c, 30, seed=9)   # fresh LogManager: marker consumed
    run.written += more.written
    fs.crash()
    fs.restart("keep", tear={more.log.active_segment.log_path: 17})
    assert not os.path.exists(os.path.join(root, ".kafka_cleanshutdown"))
    figs, _, _ = recover_and_check("torn write after a clean restart", root, fs, run, c)
    assert figs.bytes_truncated == 17


def test_torn_checkpoint_write_keeps_previous(root, fs):
    """A power cut while a checkpoint is replaced leaves the previous one (temp + rename)."""
    c = cfg(segment_bytes=4096, flush=1)
    run = produce(root, fs, c, 100, checkpoint_every=10)
    fs.crash_after_writes(0, tear=5)      # the next write (the checkpoint's temp file) is torn
    with pytest.raises(OSError):
        checkpoint_recovery_points(run.lm)
    fs.restart("keep")
    ck = open(os.path.join(root, "recovery-point-offset-checkpoint")).read().split("\n")
    assert ck[0] == "0" and ck[1] == "1"
    figs, _, _ = recover_and_check("torn checkpoint write", root, fs, run, c)
    assert figs.acked_lost == 0


@pytest.mark.parametrize("name", ["recovery-point-offset-checkpoint", "leader-epoch-checkpoint",
                                  "snapshot"])
def test_garbage_checkpoints_and_snapshots(root, fs, name):
    c = cfg(segment_bytes=4096)
    run = produce(root, fs, c, 120, checkpoint_every=30)
    shutdown(run.lm)
    fs.power_loss("drop")
    if name == "snapshot":
        paths = [os.path.join(pdir(root), n) for n in os.listdir(pdir(root)) if n.endswith(".snapshot")]
        assert paths
    elif name == "leader-epoch-checkpoint":
        paths = [os.path.join(pdir(root), name)]
    else:
        paths = [os.path.join(root, name)]
    for p in paths:
        fs.write_garbage(p, b"0\n2\nt 0 99999999\n\xff\xfe garbage")
    figs, _, lg = recover_and_check("garbage %s" % name, root, fs, run, c)
    assert figs.acked_lost == 0
    assert lg.end_offset_for_epoch(0) == (0, lg.log_end_offset)


# --------------------------------------------------------------------------- random crash points
@pytest.mark.parametrize("seed", range(30))
def test_random_crash_points(root, fs, seed):
    rng = random.Random(1000 + seed)
    flush = rng.choice([1, 1, 7, NEVER])
    c = cfg(flush=flush, segment_bytes=rng.choice([2048, 6000, 1 << 20]))
    unsynced = rng.choice(["drop", "zero", "keep"])
    fs.crash_after_writes(rng.randint(1, 600), tear=rng.choice([None, 3, 64, 500]))
    run = produce(root, fs, c, 300, seed=seed, checkpoint_every=rng.choice([0, 10, 50]))
    if not fs.crashed:
        fs.crash()
    fs.restart(unsynced)
    figs, _, _ = recover_and_check("random #%d flush=%s %s" % (seed, flush if flush != NEVER else "default", unsynced),
                                   root, fs, run, c)
    if flush == 1 or unsynced == "keep":
        assert figs.acked_lost == 0
