"""The fd budget of segment files (pykbroker/storage/fdpool.py): logs on disk, a budget of 2.

Ten partitions' logs are written and read back (kafka-python decodes the bytes) while at most
two ``.log`` files are open in this process (counted in ``/proc/self/fd``); a Fetch-style region
of a segment deleted after it was made, with its file closed by the pool meanwhile, still reads
the bytes it named; a region pins its file only while its descriptor is in use.
"""
from __future__ import annotations

import os

import pytest

from pykbroker.storage import LogConfig, load_log
from pykbroker.storage.fdpool import POOL

from .test_log import append, batch, kp_decode, read_bytes


def open_log_files(root: str) -> int:
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink("/proc/self/fd/" + fd)
        except OSError:
            continue
        if target.startswith(root) and target.endswith(".log"):
            n += 1
    return n


@pytest.fixture
def budget2():
    POOL.set_budget(2)
    yield
    POOL.set_budget(None)


def test_ten_logs_within_two_open_files(tmp_path, budget2):
    root = str(tmp_path)
    logs = [load_log(os.path.join(root, "t-%d" % i), LogConfig()) for i in range(10)]
    for round_ in range(3):
        for i, lg in enumerate(logs):
            append(lg, batch(2, value=b"p%d-r%d" % (i, round_)))
            assert open_log_files(root) <= 2
    for i, lg in enumerate(logs):
        regions = lg.read(0, 1 << 20)
        got = kp_decode(read_bytes(regions))
        assert [v for (_, _, _, v, _) in got] == [b"p%d-r%d" % (i, r) for r in range(3) for _ in range(2)]
        assert [o for (o, *_rest) in got] == list(range(6))
        assert open_log_files(root) <= 2
    del regions   # the last read's regions would keep their segment readable past close
    for lg in logs:
        lg.close()
    assert open_log_files(root) == 0


def test_region_of_deleted_segment_still_reads(tmp_path, budget2):
    root = str(tmp_path)
    lg = load_log(os.path.join(root, "t-0"), LogConfig())
    append(lg, batch(3, value=b"kept"))
    regions = lg.read(0, 1 << 20)
    seg = lg.segments[0]
    # other logs push this segment's file out of the budget while the region waits
    others = [load_log(os.path.join(root, "o-%d" % i), LogConfig()) for i in range(3)]
    for o in others:
        append(o, batch(1))
    assert not seg._fdh.is_open
    seg.delete()   # the region holds it: opened before its files go
    assert not os.path.exists(seg.log_path)
    got = kp_decode(read_bytes(regions))
    assert [v for (_, _, _, v, _) in got] == [b"kept"] * 3
    # a sent region (unpinned) is closed for good once dropped: nothing leaks
    for r in regions:
        r.unpin()
    del regions, r
    assert seg._fdh.released and not seg._fdh.is_open
    for o in others:
        o.close()
    lg.close()
    assert open_log_files(root) == 0


def test_close_idle_closes_the_files_of_logs_never_closed(tmp_path):
    """What the suite's conftest does after each test: logs dropped without a close (as after a
    simulated crash) keep their files open until ``close_idle``; a pinned file stays open, and
    a closed one opens again on its next use."""
    root = str(tmp_path)
    logs = [load_log(os.path.join(root, "t-%d" % i), LogConfig()) for i in range(5)]
    for i, lg in enumerate(logs):
        append(lg, batch(2, value=b"v%d" % i))
    assert open_log_files(root) == 5
    with logs[0].active_segment._fdh.pinned():
        assert POOL.close_idle() >= 4
        assert open_log_files(root) == 1   # the pinned one
    POOL.close_idle()
    assert open_log_files(root) == 0
    append(logs[3], batch(1, value=b"again"))   # opens again
    assert open_log_files(root) == 1
    assert kp_decode(read_bytes(logs[3].read(0, 1 << 20)))[-1][3] == b"again"
