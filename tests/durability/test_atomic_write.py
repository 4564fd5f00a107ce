"""``FileSystem.write_file_atomic`` (temp file, fsync, rename, fsync of the directory) through
FaultFS: whatever step fails or loses power, the file holds the old content or the new one,
never a torn or empty mix.  Every small state file (checkpoints, producer id block,
meta.properties) is written by this one routine."""
import errno
import os

import pytest

from pykbroker.cluster.producer_ids import BLOCK_SIZE, ProducerIdManager
from pykbroker.storage.faultfs import FaultFS

OLD = b"version=1\nold content that is fairly long\n"
NEW = b"version=1\nnew\n"
# every seam operation write_file_atomic performs, in order
STEPS = ["create", "open_write", "pwrite", "fsync", "rename", "fsync_dir"]


@pytest.fixture
def fs(tmp_path):
    return FaultFS(str(tmp_path / "root"))


def seeded(fs):
    path = os.path.join(fs.root, "state")
    fs.write_file_atomic(path, OLD)
    return path


def after_power_loss(fs, path, unsynced):
    fs.restart(unsynced)
    with open(path, "rb") as fh:
        return fh.read()


@pytest.mark.parametrize("unsynced", ["drop", "keep", "zero"])
@pytest.mark.parametrize("step", STEPS)
def test_error_at_any_step_leaves_old_or_new(fs, step, unsynced):
    path = seeded(fs)
    # the temp file may exist from an earlier interrupted write: then its open is "open_write"
    if step == "open_write":
        with open(path + ".tmp", "wb") as fh:
            fh.write(b"leftover")
    fs.fail(errno.EIO, [step], under=fs.root, once=True)
    try:
        fs.write_file_atomic(path, NEW)
        failed = False
    except OSError:
        failed = True
    assert failed, "the injected %s fault did not fire" % step
    with open(path, "rb") as fh:
        live = fh.read()
    # before the rename the old file is untouched; a failed directory fsync leaves the new name
    assert live == (NEW if step == "fsync_dir" else OLD)
    fs.crash()
    assert after_power_loss(fs, path, unsynced) in (OLD, NEW)


@pytest.mark.parametrize("unsynced", ["drop", "keep", "zero"])
@pytest.mark.parametrize("tear", [None, 0, 1, 5])
def test_power_cut_during_the_write_leaves_old(fs, tear, unsynced):
    path = seeded(fs)
    fs.crash_after_writes(0, tear=tear)
    with pytest.raises(OSError):
        fs.write_file_atomic(path, NEW)
    assert fs.crashed
    assert after_power_loss(fs, path, unsynced) == OLD


@pytest.mark.parametrize("unsynced", ["drop", "keep", "zero"])
@pytest.mark.parametrize("cut_after", range(len(STEPS)))
def test_power_cut_between_steps_leaves_old_or_new(fs, cut_after, unsynced):
    """The power goes after the first ``cut_after`` steps succeeded (the next one fails)."""
    path = seeded(fs)
    seen = []
    real_check = fs._check

    def check(op, p, data_len=0):
        if op in STEPS and p is not None and os.path.dirname(p) == fs.root:
            if len(seen) == cut_after:
                fs.crashed = True
            seen.append(op)
        return real_check(op, p, data_len)

    fs._check = check
    try:
        fs.write_file_atomic(path, NEW)
    except OSError:
        pass
    got = after_power_loss(fs, path, unsynced)
    assert got in (OLD, NEW)
    if cut_after == 0:
        assert got == OLD


def test_completed_write_survives_power_loss(fs):
    path = seeded(fs)
    fs.write_file_atomic(path, NEW)
    assert fs.durable_content(path) == NEW
    assert after_power_loss(fs, path, "drop") == NEW


def test_producer_id_block_goes_through_the_seam(fs):
    """The producer id block is written by the same routine: a failed write of the next block
    leaves the previous one, so no id handed out before is ever reused."""
    m = ProducerIdManager(fs.root, fs)
    m._write(BLOCK_SIZE)
    assert ProducerIdManager(fs.root, fs)._durable_end == BLOCK_SIZE
    fs.crash_after_writes(0, tear=3)
    with pytest.raises(OSError):
        m._write(2 * BLOCK_SIZE)
    fs.restart("drop")
    assert ProducerIdManager(fs.root, fs)._durable_end == BLOCK_SIZE
