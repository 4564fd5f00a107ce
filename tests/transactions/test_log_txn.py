"""Transactions in the storage layer, on a real on-disk log (no broker): open transactions and the
first unstable offset, COMMIT/ABORT markers and their epoch checks, the ``.txnindex`` (written,
collected for a fetch range, rebuilt by recovery after an unclean stop, truncated), and the log
cleaner (it never cleans past the first unstable offset and drops aborted records)."""
import os

import pytest

from pykbroker.protocol.errors import ErrorCode
from pykbroker.protocol.records import (CONTROL_ABORT, CONTROL_COMMIT, control_type, decode_records, encode_batch,
                                        iter_batches)
from pykbroker.storage.log_validator import validate_produce_records
from pykbroker.storage.cleaner import Cleaner, CleanerConfig
from pykbroker.storage.errors import ProducerStateError
from pykbroker.storage.log_config import LogConfig
from pykbroker.storage.log_loader import load_log
from pykbroker.storage.txn_index import AbortedTxn

NOW = 1_700_000_000_000
PID = 4242
CC = CleanerConfig(delete_retention_ms=1000, min_cleanable_ratio=0.0, segment_bytes=1 << 20)


def _append(lg, recs, pid=-1, epoch=-1, seq=-1, txn=False):
    batch = encode_batch([(None, NOW, k, v) for k, v in recs], 0, producer_id=pid, producer_epoch=epoch,
                         base_sequence=seq, is_transactional=txn)
    info = lg.append(validate_produce_records(batch, 1 << 20), 0)
    lg.high_watermark = lg.log_end_offset
    return info


def _marker(lg, commit, pid=PID, epoch=0, coordinator_epoch=0):
    info = lg.append_end_txn_marker(pid, epoch, commit, coordinator_epoch, 0, NOW)
    lg.high_watermark = lg.log_end_offset
    return info.first_offset


def _records(lg):
    out = []
    off = lg.log_start_offset
    data = b"".join(r.read() for r in lg.read(off, 1 << 24, None, True))
    for h in iter_batches(data):
        body = data[h.position:h.position + h.size]
        if h.is_control:
            out.append((h.base_offset, "COMMIT" if control_type(body) == CONTROL_COMMIT else "ABORT"))
        else:
            out += [(r.offset, r.key, r.value) for r in decode_records(body)]
    return out


def test_open_transactions_bound_the_first_unstable_offset(tmp_path):
    lg = load_log(str(tmp_path / "t-0"), LogConfig())
    _append(lg, [(b"p", b"plain")])
    assert lg.first_unstable_offset() is None
    _append(lg, [(b"a", b"1"), (b"b", b"1")], PID, 0, 0, txn=True)           # opens at offset 1
    _append(lg, [(b"c", b"1")], PID + 1, 0, 0, txn=True)                     # opens at offset 3
    assert lg.first_unstable_offset() == 1
    # a plain write from a producer with an open transaction is refused
    with pytest.raises(ProducerStateError) as e:
        _append(lg, [(b"x", b"x")], PID, 0, 2)
    assert e.value.code == ErrorCode.INVALID_TXN_STATE
    assert _marker(lg, False) == 4
    assert lg.first_unstable_offset() == 3
    # the abort is indexed with the LSO of that moment (the other transaction's start)
    assert lg.collect_aborted_txns(0, 100) == [AbortedTxn(PID, 1, 4, 3)]
    assert _marker(lg, True, pid=PID + 1) == 5
    assert lg.first_unstable_offset() is None
    assert lg.collect_aborted_txns(5, 100) == []
    # an older epoch or coordinator epoch cannot write a marker
    _marker(lg, True, epoch=3, coordinator_epoch=2)       # a bumped epoch is taken
    with pytest.raises(ProducerStateError) as e:
        _marker(lg, False, epoch=2, coordinator_epoch=2)
    assert e.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
    with pytest.raises(ProducerStateError) as e:
        _marker(lg, False, epoch=3, coordinator_epoch=1)
    assert e.value.code == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    assert [r[1] if len(r) == 2 else r[2] for r in _records(lg)] == \
        [b"plain", b"1", b"1", b"1", "ABORT", "COMMIT", "COMMIT"]


def test_txn_index_survives_restart_and_is_rebuilt_by_recovery(tmp_path):
    d = str(tmp_path / "t-0")
    lg = load_log(d, LogConfig(segment_bytes=400))
    for i in range(4):
        _append(lg, [(b"k%d" % i, b"x" * 50)], PID, 0, i, txn=True)
        _marker(lg, i % 2 == 1)                  # aborts: transactions 0 and 2
        _append(lg, [(b"n%d" % i, b"y" * 50)])
    _append(lg, [(b"open", b"o")], PID, 0, 4, txn=True)
    expected = lg.collect_aborted_txns(0, lg.log_end_offset)
    assert [(e.first_offset, e.last_offset) for e in expected] == [(0, 1), (6, 7)]
    files = [f for f in os.listdir(d) if f.endswith(".txnindex")]
    assert files
    lso, leo = lg.first_unstable_offset(), lg.log_end_offset
    lg.close()
    # clean restart: indexes read back from the files, the open transaction still open
    lg = load_log(d, LogConfig(segment_bytes=400), recovery_point=leo, clean_shutdown=True)
    assert lg.collect_aborted_txns(0, leo) == expected and lg.first_unstable_offset() == lso
    lg.close()
    # unclean restart with the index files gone: recovery rebuilds them from the markers
    for f in files:
        os.remove(os.path.join(d, f))
    lg = load_log(d, LogConfig(segment_bytes=400), recovery_point=0, clean_shutdown=False)
    assert lg.collect_aborted_txns(0, leo) == expected
    # replayed transactions count as unstable until the high watermark passes their markers
    # (the partition sets it from its checkpoint right after loading)
    lg.high_watermark = leo
    assert lg.first_unstable_offset() == lso
    # truncation below a marker drops its entry
    lg.truncate_to(7)
    assert [(e.first_offset, e.last_offset) for e in lg.collect_aborted_txns(0, 100)] == [(0, 1)]
    lg.close()


def test_cleaner_respects_transactions(tmp_path):
    lg = load_log(str(tmp_path / "t-0"), LogConfig(segment_bytes=1 << 20))
    _append(lg, [(b"a", b"a1"), (b"b", b"b1")])                         # 0-1
    _append(lg, [(b"a", b"a-aborted"), (b"c", b"c-aborted")], PID, 0, 0, txn=True)   # 2-3
    _marker(lg, False)                                                   # 4
    _append(lg, [(b"b", b"b2")], PID, 0, 2, txn=True)                    # 5
    _marker(lg, True)                                                    # 6
    _append(lg, [(b"a", b"a-open")], PID + 1, 0, 0, txn=True)            # 7: open
    _append(lg, [(b"z", b"z")])                                          # 8
    lg.roll()
    Cleaner(10_000).clean_log(lg, 0, NOW, CC)
    got = _records(lg)
    # the aborted records are gone and did not shadow a1; b1 is shadowed by the committed b2;
    # nothing from the open transaction on is cleaned
    assert got == [(0, b"a", b"a1"), (4, "ABORT"), (5, b"b", b"b2"), (6, "COMMIT"),
                   (7, b"a", b"a-open"), (8, b"z", b"z")]
