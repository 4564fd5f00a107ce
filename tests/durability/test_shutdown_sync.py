"""The clean shutdown's deferred sync (LogManager.shutdown): every log is closed without per-file
fsyncs (snapshots and leader-epoch checkpoints as temp files), one syncfs per log dir makes it
durable, the temp files are renamed into place, a second syncfs makes the names durable, and only
then are the recovery points and the clean-shutdown marker written.  Against the fault-injecting
file system (storage/faultfs.py: only fsync / syncfs make content and names durable): a power cut
after the shutdown keeps everything; a power cut at any point of it leaves every file old or new
and no marker unless all was durable; a failing syncfs leaves no marker."""
import errno
import os

import pytest

from pykbroker.storage.log_validator import validate_produce_records
from pykbroker.storage import LogConfig
from pykbroker.storage.checkpoints import LeaderEpochCheckpointFile
from pykbroker.storage.faultfs import FaultFS

from .model import make_batch, produce, recover_and_check, shutdown, start

PARTITIONS = 40
MARKER = ".kafka_cleanshutdown"


def cfg():
    return LogConfig(segment_bytes=8 * 1024, index_interval_bytes=512, flush_interval_messages=1)


def _many(root, fs, n=PARTITIONS):
    """Partition 0 of TOPIC through the durability model (its records checked on reload), and
    n - 1 more partitions of another topic with a few appends each."""
    run = produce(root, fs, cfg(), 60)
    for p in range(1, n):
        lg = run.lm.get_or_create_log("other", p)
        for i in range(3):
            lg.append(validate_produce_records(make_batch(i, 2), 1 << 20), 0)
    return run


def _files(root):
    return [os.path.join(d, f) for d, _, fs_ in os.walk(root) for f in fs_]


def _check_partition_files(root, lm_logs):
    for (topic, p), leo in lm_logs.items():
        d = os.path.join(root, "%s-%d" % (topic, p))
        assert os.path.exists(os.path.join(d, "%020d.snapshot" % leo)), (topic, p, sorted(os.listdir(d)))
        assert LeaderEpochCheckpointFile(os.path.join(d, "leader-epoch-checkpoint")).read() == [(0, 0)]


def test_clean_shutdown_syncs_once_per_dir_and_survives_a_power_cut(root, fs):
    run = _many(root, fs)
    leos = {tp: lg.log_end_offset for tp, lg in run.lm.logs.items()}
    before = fs.fsyncs + fs.dir_fsyncs
    shutdown(run.lm)
    # two syncfs and the three root checkpoints (file + dir each) and the marker, whatever
    # the number of partitions (the per-log close used some 5 fsyncs a partition)
    assert fs.fsyncs + fs.dir_fsyncs - before <= 12 < PARTITIONS
    fs.power_loss("drop")     # only what was synced survives
    assert os.path.exists(os.path.join(root, MARKER))
    assert not [f for f in _files(root) if f.endswith(".tmp")]
    _check_partition_files(root, leos)
    figs, lm, _ = recover_and_check("clean shutdown then power cut", root, fs, run, cfg())
    assert figs.acked_lost == 0 and figs.bytes_truncated == 0
    # the recovery points moved to the log ends: the next start trusted them
    ck = open(os.path.join(root, "recovery-point-offset-checkpoint")).read().split("\n")
    assert int(ck[1]) == PARTITIONS and {tuple(l.split()) for l in ck[2:] if l} == \
        {(t, str(p), str(leo)) for (t, p), leo in leos.items()}


@pytest.mark.parametrize("crash_at", [0, 1, 3, 10, 25, 60, 90, 118])
@pytest.mark.parametrize("unsynced", ["drop", "zero"])
def test_power_cut_during_the_shutdown(root, fs, crash_at, unsynced):
    """The power goes after ``crash_at`` more writes of the shutdown (torn or not): no acked
    record is lost, every leader-epoch checkpoint and snapshot on disk reads (old or new), and
    a marker exists only if the shutdown got to the end."""
    run = _many(root, fs)
    fs.crash_after_writes(crash_at, tear=7)
    halted = []
    run.lm.halt_hook = lambda status, message: halted.append(message)   # the process would end here
    shutdown(run.lm)          # logs its I/O errors (the failed dir halts the broker: recorded)
    reached_end = not fs.crashed
    fs.restart(unsynced)
    assert os.path.exists(os.path.join(root, MARKER)) == reached_end
    for f in _files(root):
        if f.endswith("leader-epoch-checkpoint"):
            assert LeaderEpochCheckpointFile(f).read() == [(0, 0)], f
    figs, lm, _ = recover_and_check("power cut %d writes into the shutdown (%s)" % (crash_at, unsynced),
                                    root, fs, run, cfg())
    assert figs.acked_lost == 0
    for p in range(1, PARTITIONS):
        assert lm.get_or_create_log("other", p).log_end_offset == 6


def test_failing_syncfs_leaves_no_marker(root, fs):
    run = _many(root, fs, 5)
    fs.fail(errno.EIO, ops={"syncfs"}, once=True)
    run.lm.halt_hook = lambda status, message: None
    shutdown(run.lm)
    assert not os.path.exists(os.path.join(root, MARKER))
    fs.power_loss("keep")
    figs, _, _ = recover_and_check("syncfs failed at shutdown", root, fs, run, cfg())
    assert figs.acked_lost == 0 and figs.bytes_truncated == 0


def test_without_syncfs_each_log_syncs_as_it_closes(root):
    class NoSyncfs(FaultFS):
        supports_sync_filesystem = False
    fs = NoSyncfs(root)
    run = _many(root, fs, 5)
    leos = {tp: lg.log_end_offset for tp, lg in run.lm.logs.items()}
    shutdown(run.lm)
    fs.power_loss("drop")
    assert os.path.exists(os.path.join(root, MARKER))
    _check_partition_files(root, leos)
    start(root, fs, cfg())
