"""Crash recovery: the recovered log must equal the longest valid prefix."""
import os
import shutil
import subprocess
import sys
import textwrap

import pytest
import trio
from hypothesis import HealthCheck, given, settings, strategies as st

from pykbroker.protocol.records import Record, encode_batch, iter_batches
from pykbroker.storage.log_validator import validate_produce_records
from pykbroker.storage import LogConfig, LogManager, load_log

T0 = 1_700_000_000_000


def batch(i, n=3, base_offset=0):
    return encode_batch([Record(None, T0 + i * 10 + j, b"k%03d" % i, b"value-%03d-%d" % (i, j) * 8, [])
                         for j in range(n)], base_offset=base_offset)


def fill(logdir, nbatches, cfg=None, close=False, epoch_every=None):
    lg = load_log(logdir, cfg or LogConfig(index_interval_bytes=300))
    for i in range(nbatches):
        epoch = i // epoch_every if epoch_every else 0
        lg.append(validate_produce_records(batch(i), 1 << 20), epoch)
    if close:
        lg.close()
    else:
        lg.flush()
    return lg


def all_bytes(lg):
    return b"".join(r.read() for r in lg.read(lg.log_start_offset, 1 << 30, min_one_batch=True, whole_batches=True))


def batch_offsets(lg):
    return [h.base_offset for h in iter_batches(all_bytes(lg))]


def seg_path(logdir, base=0, ext=".log"):
    return os.path.join(logdir, f"{base:020d}{ext}")


def check_consistent(lg):
    """Log is usable: reads, appends and index lookups agree."""
    offs = batch_offsets(lg)
    assert lg.log_end_offset == (offs[-1] + 3 if offs else lg.active_segment.base_offset)
    for o in offs:
        assert lg.read(o + 1, 1)[0].read()[:8] == o.to_bytes(8, "big")
    info = lg.append(validate_produce_records(batch(999), 1 << 20), 9)
    assert info.first_offset == lg.log_end_offset - 3
    return offs


@pytest.fixture
def logdir(tmp_path):
    return str(tmp_path / "t-0")


def test_clean_restart_keeps_everything(logdir):
    lg = fill(logdir, 50, close=True, epoch_every=20)
    lg2 = load_log(logdir, LogConfig(index_interval_bytes=300), recovery_point=150, clean_shutdown=True)
    assert lg2.log_end_offset == 150
    assert lg2.epoch_cache.entries == [(0, 0), (1, 60), (2, 120)]
    assert lg2.active_segment.offset_index.entries() == lg.active_segment.offset_index.entries()
    assert lg2.active_segment.time_index.entries() == lg.active_segment.time_index.entries()
    check_consistent(lg2)


@pytest.mark.parametrize("cut", [1, 30, 61, 100])
def test_torn_write_truncated_tail(logdir, cut):
    fill(logdir, 20)
    size = os.path.getsize(seg_path(logdir))
    blen = len(batch(0))
    with open(seg_path(logdir), "r+b") as f:
        f.truncate(size - cut)
    lg = load_log(logdir, LogConfig(), recovery_point=0, clean_shutdown=False)
    assert batch_offsets(lg) == list(range(0, 19 * 3, 3))
    assert os.path.getsize(seg_path(logdir)) == 19 * blen
    check_consistent(lg)


def test_flipped_bit_in_middle(logdir):
    fill(logdir, 20)
    blen = len(batch(0))
    with open(seg_path(logdir), "r+b") as f:
        pos = 7 * blen + 100
        f.seek(pos)
        b = f.read(1)
        f.seek(pos)
        f.write(bytes([b[0] ^ 0x10]))
    lg = load_log(logdir, LogConfig(), recovery_point=0, clean_shutdown=False)
    assert batch_offsets(lg) == list(range(0, 21, 3))
    check_consistent(lg)


def test_zero_filled_tail(logdir):
    fill(logdir, 10)
    with open(seg_path(logdir), "ab") as f:
        f.write(b"\x00" * 5000)
    lg = load_log(logdir, LogConfig(), recovery_point=0, clean_shutdown=False)
    assert batch_offsets(lg) == list(range(0, 30, 3))
    check_consistent(lg)


def test_corruption_deletes_later_segments(logdir):
    cfg = LogConfig(segment_bytes=len(batch(0)) * 5)
    fill(logdir, 20, cfg)
    assert len(os.listdir(logdir)) > 6
    with open(seg_path(logdir, 15), "r+b") as f:
        f.seek(len(batch(0)) + 100)  # inside the segment's second batch
        f.write(b"\xff\xff")
    lg = load_log(logdir, cfg, recovery_point=0, clean_shutdown=False)
    assert batch_offsets(lg) == list(range(0, 15 + 3, 3))
    assert [s.base_offset for s in lg.segments] == [0, 15]
    assert not os.path.exists(seg_path(logdir, 30))
    check_consistent(lg)


def test_recovery_point_limits_the_scan(logdir):
    cfg = LogConfig(segment_bytes=len(batch(0)) * 5)
    lg = fill(logdir, 20, cfg, close=True)
    # damage a segment below the recovery point: not scanned (indexes fine)
    with open(seg_path(logdir, 0), "r+b") as f:
        f.seek(200)
        f.write(b"\xff\xff")
    lg = load_log(logdir, cfg, recovery_point=60, clean_shutdown=False)
    assert lg.log_end_offset == 60


@pytest.mark.parametrize("what", ["delete", "garbage", "truncate", "time"])
def test_missing_or_corrupt_index_files(logdir, what):
    lg = fill(logdir, 60, close=True)
    entries = lg.active_segment.offset_index.entries()
    assert len(entries) > 3
    ip, tp = seg_path(logdir, 0, ".index"), seg_path(logdir, 0, ".timeindex")
    if what == "delete":
        os.remove(ip)
        os.remove(tp)
    elif what == "garbage":
        with open(ip, "wb") as f:
            f.write(os.urandom(64))
    elif what == "truncate":
        with open(ip, "r+b") as f:
            f.truncate(13)
    else:
        with open(tp, "wb") as f:
            f.write(b"\x00" * 24)
    for clean in (True, False):
        lg2 = load_log(logdir, LogConfig(index_interval_bytes=300), recovery_point=180, clean_shutdown=clean)
        assert lg2.log_end_offset == 180
        assert lg2.active_segment.offset_index.entries() == entries
        assert batch_offsets(lg2) == list(range(0, 180, 3))
        lg2.close()
    check_consistent(lg2 if False else load_log(logdir, LogConfig(), 180, True))


def test_stale_index_beyond_log_end_after_clean_flag(logdir):
    lg = fill(logdir, 30, close=True)
    with open(seg_path(logdir), "r+b") as f:
        f.truncate(len(batch(0)) * 10 + 5)  # shorter than the index says
    lg2 = load_log(logdir, LogConfig(), recovery_point=90, clean_shutdown=True)
    assert batch_offsets(lg2) == list(range(0, 30, 3))
    check_consistent(lg2)


def test_garbage_segment_file(logdir):
    os.makedirs(logdir)
    with open(seg_path(logdir), "wb") as f:
        f.write(os.urandom(10000))
    with open(seg_path(logdir, 0, ".index"), "wb") as f:
        f.write(os.urandom(100))
    with open(os.path.join(logdir, "leader-epoch-checkpoint"), "wb") as f:
        f.write(b"\xff\xfe garbage")
    with open(os.path.join(logdir, "00000000000000000042.snapshot"), "wb") as f:
        f.write(b"junk")
    for clean in (True, False):
        lg = load_log(logdir, LogConfig(), recovery_point=0, clean_shutdown=clean)
        assert lg.log_end_offset == 0 and lg.read(0, 100) == []
        assert lg.epoch_cache.entries == []
    check_consistent(lg)


def test_leftover_files_are_cleaned(logdir):
    fill(logdir, 3, close=True)
    for name in ("00000000000000000003.log.deleted", "00000000000000000099.index", "x.tmp"):
        open(os.path.join(logdir, name), "wb").close()
    lg = load_log(logdir, LogConfig(), 9, True)
    assert sorted(os.listdir(logdir)) == sorted(
        ["00000000000000000000.log", "00000000000000000000.index", "00000000000000000000.timeindex",
         "leader-epoch-checkpoint", "00000000000000000009.snapshot"])
    assert lg.log_end_offset == 9


def test_lost_epoch_checkpoint_rebuilt_from_headers(logdir):
    fill(logdir, 30, close=True, epoch_every=10)
    os.remove(os.path.join(logdir, "leader-epoch-checkpoint"))
    lg = load_log(logdir, LogConfig(), 90, True)
    assert lg.epoch_cache.entries == [(0, 0), (1, 30), (2, 60)]
    assert lg.end_offset_for_epoch(1) == (1, 60)


# ------------------------------------------------------------------ fuzzing

@settings(max_examples=int(os.environ.get("FUZZ_EXAMPLES", "60")), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=3000), prefix=st.integers(0, 4), clean=st.booleans(), rp=st.integers(0, 20),
       index=st.one_of(st.none(), st.binary(max_size=40)), timeindex=st.one_of(st.none(), st.binary(max_size=40)))
def test_fuzz_segment_file_never_raises(tmp_path_factory, data, prefix, clean, rp, index, timeindex):
    d = str(tmp_path_factory.mktemp("fuzz") / "t-0")
    os.makedirs(d)
    valid = b"".join(batch(i, base_offset=3 * i) for i in range(prefix))
    with open(seg_path(d), "wb") as f:
        f.write(valid + data)
    for ext, content in ((".index", index), (".timeindex", timeindex)):
        if content is not None:   # garbage index files must not fool the loader
            with open(seg_path(d, 0, ext), "wb") as f:
                f.write(content)
    lg = load_log(d, LogConfig(index_interval_bytes=100), recovery_point=rp, clean_shutdown=clean)
    first = all_bytes(lg)
    # the valid prefix always survives (no index files exist, so even the
    # "clean" load falls back to a scan)
    assert first[:len(valid)] == valid
    lg.close()
    lg2 = load_log(d, LogConfig(index_interval_bytes=100), recovery_point=0, clean_shutdown=False)
    assert all_bytes(lg2) == first           # re-reading is stable
    lg2.close()
    lg3 = load_log(d, LogConfig(index_interval_bytes=100), recovery_point=lg2.log_end_offset,
                   clean_shutdown=True)
    assert all_bytes(lg3) == first
    check_consistent(lg3)
    shutil.rmtree(d, ignore_errors=True)


# -------------------------------------------------------------- kill -9 test

CHILD = textwrap.dedent("""
    import sys
    from pykbroker.protocol.records import Record, encode_batch
    from pykbroker.storage.log_validator import validate_produce_records
    from pykbroker.storage import LogManager, LogConfig
    mgr = LogManager([sys.argv[1]], default_config=LogConfig(flush_interval_messages=1, segment_bytes=20000))
    mgr.load_logs()
    lg = mgr.get_or_create_log("t", 0)
    i = 0
    while True:
        b = encode_batch([Record(None, 1000 + i, b"k", b"payload-%d" % i * 20, [])])
        info = lg.append(validate_produce_records(b, 1 << 20), 0)
        print(info.first_offset, i, flush=True)
        i += 1
""")


def test_kill_9_mid_append_keeps_acknowledged(tmp_path):
    from pykbroker.protocol.records import decode_records
    root = str(tmp_path / "logs")
    env = dict(os.environ, PYTHONPATH=os.getcwd() + os.pathsep + os.environ.get("PYTHONPATH", ""))
    acked = {}
    for round_ in range(2):
        p = subprocess.Popen([sys.executable, "-c", CHILD, root], stdout=subprocess.PIPE, env=env)
        count = 0
        while count < 150:
            line = p.stdout.readline()
            if not line:
                break
            off, i = map(int, line.split())
            acked[off] = b"payload-%d" % i * 20
            count += 1
        p.kill()  # SIGKILL, most likely mid-append
        rest = p.stdout.read()
        p.wait()
        for line in rest.splitlines():  # printed after append returned: acked too
            off, i = map(int, line.split())
            acked[off] = b"payload-%d" % i * 20
        mgr = LogManager([root], default_config=LogConfig())
        mgr.load_logs()
        assert not mgr.had_clean_shutdown
        lg = mgr.get_log("t", 0)
        got = {}
        for r in lg.read(0, 1 << 30, whole_batches=True):
            data = r.read()
            for h in iter_batches(data):
                for rec in decode_records(data[h.position:h.position + h.size]):
                    got[rec.offset] = rec.value
        for off, val in acked.items():
            assert got.get(off) == val, off
        assert max(got) + 1 == lg.log_end_offset
        trio.run(mgr.shutdown)
    assert len(acked) >= 300


def test_lazy_index_damaged_in_the_middle_is_rebuilt(logdir):
    lg = fill(logdir, 60, close=True)
    entries = lg.segments[0].offset_index.entries()
    ip = seg_path(logdir, 0, ".index")
    with open(ip, "r+b") as f:       # last entry intact, one in the middle garbage
        f.seek(8 * (len(entries) // 2))
        f.write(b"\x7f\xff\xff\xff\x00\x00\x00\x01")
    lg2 = load_log(logdir, LogConfig(index_interval_bytes=300), recovery_point=180, clean_shutdown=True)
    seg = lg2.segments[0]
    assert seg.offset_index.is_lazy          # only size + last entry were read
    assert lg2.log_end_offset == 180
    for o in range(0, 180, 7):               # first lookup loads, detects, rebuilds
        assert lg2.read(o, 1)[0].read()[:8] == (o // 3 * 3).to_bytes(8, "big")
    assert seg.offset_index.entries() == entries
    lg2.close()
    with open(ip, "rb") as f:
        assert len(f.read()) == 8 * len(entries)


def test_startup_reads_only_index_tails(logdir):
    cfg = LogConfig(segment_bytes=len(batch(0)) * 10, index_interval_bytes=100)
    fill(logdir, 100, cfg, close=True)
    lg = load_log(logdir, cfg, recovery_point=300, clean_shutdown=True)
    assert len(lg.segments) == 10
    assert all(s.offset_index.is_lazy and s.time_index.is_lazy for s in lg.segments)
    assert lg.max_timestamp_offset() == (299, T0 + 99 * 10 + 2, 0)
    assert lg.offset_for_timestamp(T0 + 555) == (168, T0 + 560, 0)
    check_consistent(lg)
