"""Log cleaner on a real on-disk log (no broker): latest value per key, offsets preserved,
tombstones after the delete horizon, producer batches, codecs, and crash recovery at every swap
step (the cleaner is stopped at the step by a hook, the log is then reloaded from disk)."""
import os

import pytest

from pykbroker.protocol.records import (
    CODEC_GZIP, CODEC_LZ4, CODEC_NONE, CODEC_SNAPPY, CODEC_ZSTD, DELETE_HORIZON_MASK,
    decode_records, encode_batch, iter_batches,
)
from pykbroker.storage.log_validator import validate_produce_records
from pykbroker.storage.cleaner import Cleaner, CleanerConfig, has_keyless_record, plan_cleaning
from pykbroker.storage.log_config import LogConfig
from pykbroker.storage.log_loader import load_log

NOW = 1_700_000_000_000


def _append(lg, recs, codec=CODEC_NONE, ts=NOW, **kw):
    batch = encode_batch([(None, ts, k, v) for k, v in recs], 0, codec, **kw)
    v = validate_produce_records(batch, 1 << 20)
    info = lg.append(v, 0)
    lg.high_watermark = lg.log_end_offset
    return info


def _read_all(lg):
    """[(offset, key, value)] of every record from the log start, plus batch headers."""
    out, heads = [], []
    off = lg.log_start_offset
    while off < lg.log_end_offset:
        regions = lg.read(off, 1 << 20, None, True)
        if not regions:
            break
        data = b"".join(r.read() for r in regions)
        for h in iter_batches(data):
            heads.append(h)
            for r in decode_records(data[h.position:h.position + h.size]):
                if r.offset >= off:
                    out.append((r.offset, r.key, r.value))
            off = max(off, h.next_offset)
    return out, heads


def _expected_latest(history):
    latest = {}
    for off, k, v in history:
        latest[k] = (off, v)
    return latest


def _mk(tmp_path, seg_bytes=600):
    return load_log(str(tmp_path / "t-0"), LogConfig(segment_bytes=seg_bytes))


CC = CleanerConfig(delete_retention_ms=1000, min_cleanable_ratio=0.0, segment_bytes=1 << 20)


def _fill(lg, rounds=6, keys=5, codec=CODEC_NONE):
    history = []
    for r in range(rounds):
        recs = [(b"k%d" % k, b"v%d-%d" % (k, r)) for k in range(keys)]
        info = _append(lg, recs, codec)
        history += [(info.first_offset + i, k, v) for i, (k, v) in enumerate(recs)]
    return history


@pytest.mark.parametrize("codec", [CODEC_NONE, CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4, CODEC_ZSTD])
def test_latest_value_per_key_offsets_preserved(tmp_path, codec):
    lg = _mk(tmp_path)
    history = _fill(lg, codec=codec)
    lg.roll()  # every batch is now in a non-active segment
    before = lg.size_in_bytes
    res = Cleaner(10_000).clean_log(lg, 0, NOW, CC)
    assert res is not None
    got, heads = _read_all(lg)
    latest = _expected_latest(history)
    assert got == sorted((off, k, v) for k, (off, v) in latest.items())
    assert lg.size_in_bytes < before
    assert all(h.codec == codec for h in heads)
    # reload from disk (clean and unclean): same content
    lg.close()
    for clean in (True, False):
        lg2 = load_log(lg.dir, LogConfig(segment_bytes=600), clean_shutdown=clean)
        lg2.high_watermark = lg2.log_end_offset
        assert _read_all(lg2)[0] == got
        lg2.close()
    assert not [n for n in os.listdir(lg.dir) if n.endswith((".cleaned", ".swap", ".deleted"))]


def test_active_segment_and_appends_untouched(tmp_path):
    lg = _mk(tmp_path)
    history = _fill(lg, rounds=4)
    active_base = lg.active_segment.base_offset
    Cleaner(10_000).clean_log(lg, 0, NOW, CC)
    got, _ = _read_all(lg)
    # everything in the active segment is still there, record for record
    assert [g for g in got if g[0] >= active_base] == [h for h in history if h[0] >= active_base]
    info = _append(lg, [(b"k0", b"after")])
    assert info.first_offset == history[-1][0] + 1
    assert _read_all(lg)[0][-1] == (info.first_offset, b"k0", b"after")


def test_tombstones_get_horizon_then_go(tmp_path):
    lg = _mk(tmp_path)
    _fill(lg, rounds=2, keys=3)
    tomb = _append(lg, [(b"k1", None)])
    lg.roll()
    Cleaner(1000).clean_log(lg, 0, NOW, CC)
    got, heads = _read_all(lg)
    assert (tomb.first_offset, b"k1", None) in got          # kept until the horizon
    th = [h for h in heads if h.base_offset == tomb.first_offset][0]
    assert th.attributes & DELETE_HORIZON_MASK and th.base_timestamp == NOW + 1000
    # the record timestamps are unchanged by the horizon rebase
    data = b"".join(r.read() for r in lg.read(tomb.first_offset, 1 << 20, None, True))
    assert decode_records(data[:th.size])[0].timestamp == NOW
    # before the horizon: still there; after: gone, and k1 has no value any more
    Cleaner(1000).clean_log(lg, lg.log_end_offset, NOW + 999, CC, force=True)
    assert (tomb.first_offset, b"k1", None) in _read_all(lg)[0]
    Cleaner(1000).clean_log(lg, lg.log_end_offset, NOW + 1001, CC, force=True)
    got = _read_all(lg)[0]
    assert [g for g in got if g[1] == b"k1"] == []
    assert sorted(k for _, k, _ in got) == [b"k0", b"k2"]


def test_last_batch_of_producer_kept_empty(tmp_path):
    lg = _mk(tmp_path)
    pid = 4242
    _append(lg, [(b"a", b"1")], producer_id=pid, producer_epoch=3, base_sequence=0)
    last = _append(lg, [(b"a", b"2"), (b"b", b"x")], producer_id=pid, producer_epoch=3, base_sequence=1)
    _append(lg, [(b"a", b"3"), (b"b", b"y")])   # a plain producer supersedes both keys
    lg.roll()
    Cleaner(1000).clean_log(lg, 0, NOW, CC)
    got, heads = _read_all(lg)
    assert got == [(last.first_offset + 2, b"a", b"3"), (last.first_offset + 3, b"b", b"y")]
    kept = [h for h in heads if h.producer_id == pid]
    assert len(kept) == 1 and kept[0].records_count == 0
    assert (kept[0].base_offset, kept[0].last_offset) == (last.first_offset, last.last_offset)
    assert (kept[0].producer_epoch, kept[0].base_sequence, kept[0].last_sequence) == (3, 1, 2)
    # idempotent state survives a reload: the next sequence is accepted, a duplicate is not re-appended
    lg.close()
    lg2 = load_log(lg.dir, LogConfig(segment_bytes=600))
    assert lg2.producer_state.producers[pid].last_seq == 2


def test_partially_kept_batch_keeps_boundaries(tmp_path):
    lg = _mk(tmp_path)
    b1 = _append(lg, [(b"a", b"1"), (b"b", b"1"), (b"c", b"1")], CODEC_GZIP,
                 producer_id=7, producer_epoch=0, base_sequence=0)
    _append(lg, [(b"b", b"2")], producer_id=7, producer_epoch=0, base_sequence=3)
    lg.roll()
    Cleaner(1000).clean_log(lg, 0, NOW, CC)
    got, heads = _read_all(lg)
    assert got == [(b1.first_offset, b"a", b"1"), (b1.first_offset + 2, b"c", b"1"),
                   (b1.first_offset + 3, b"b", b"2")]
    h = heads[0]
    assert (h.base_offset, h.last_offset_delta, h.records_count, h.codec) == (b1.first_offset, 2, 2, CODEC_GZIP)
    assert (h.producer_id, h.base_sequence, h.last_sequence) == (7, 0, 2)


def test_plan_respects_ratio_and_lags(tmp_path):
    lg = _mk(tmp_path)
    _fill(lg, rounds=6)
    assert plan_cleaning(lg, 0, NOW, CleanerConfig(min_cleanable_ratio=0.5)) is not None
    # everything younger than min.compaction.lag.ms: nothing cleanable
    assert plan_cleaning(lg, 0, NOW, CleanerConfig(min_compaction_lag_ms=10_000)) is None
    # all clean (first dirty at the active segment): ratio 0
    end = lg.active_segment.base_offset
    assert plan_cleaning(lg, end, NOW, CleanerConfig(min_cleanable_ratio=0.0)) is None


def test_bounded_offset_map_cleans_in_rounds(tmp_path):
    lg = _mk(tmp_path, seg_bytes=400)
    history = _fill(lg, rounds=8, keys=4)
    lg.roll()
    first_dirty, rounds = 0, 0
    while True:
        res = Cleaner(6).clean_log(lg, first_dirty, NOW, CC)   # room for ~6 keys per round
        if res is None:
            break
        first_dirty = res[0]
        rounds += 1
        assert rounds < 50
    assert rounds > 1
    latest = _expected_latest(history)
    assert _read_all(lg)[0] == sorted((off, k, v) for k, (off, v) in latest.items())


@pytest.mark.parametrize("step", ["cleaned", "swap", "deleted"])
def test_crash_at_each_swap_step_recovers(tmp_path, step):
    lg = _mk(tmp_path)
    history = _fill(lg, rounds=6)
    lg.roll()
    lg.flush()
    original, _ = _read_all(lg)
    latest = _expected_latest(history)
    cleaned = sorted((off, k, v) for k, (off, v) in latest.items())

    class Crash(Exception):
        pass

    def hook(s):
        if s == step:
            raise Crash(s)

    with pytest.raises(Crash):
        Cleaner(10_000, hook=hook).clean_log(lg, 0, NOW, CC)
    names = os.listdir(lg.dir)
    if step == "cleaned":
        assert any(n.endswith(".log.cleaned") for n in names)
    else:
        assert any(n.endswith(".log.swap") for n in names)
    # crash: the Log object is abandoned (no close), the directory reloaded as after kill -9
    for clean in (False,):
        lg2 = load_log(lg.dir, LogConfig(segment_bytes=600), clean_shutdown=clean)
        lg2.high_watermark = lg2.log_end_offset
        got, _ = _read_all(lg2)
        assert got == (original if step == "cleaned" else cleaned)
        assert not [n for n in os.listdir(lg.dir) if n.endswith((".cleaned", ".swap", ".deleted"))]
        # the recovered log is still cleanable and appendable
        Cleaner(10_000).clean_log(lg2, 0, NOW, CC)
        assert _read_all(lg2)[0] == cleaned
        info = _append(lg2, [(b"k9", b"new")])
        assert info.first_offset == history[-1][0] + 1
        lg2.close()


def test_keyless_detection():
    assert has_keyless_record(encode_batch([(None, NOW, b"k", b"v"), (None, NOW, None, b"v")]))
    assert not has_keyless_record(encode_batch([(None, NOW, b"k", b"v")], codec=CODEC_LZ4))
