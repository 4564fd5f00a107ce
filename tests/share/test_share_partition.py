"""The sans-IO share partition (pykbroker/share/partition.py): acquisition by batch, per-offset
acknowledgement, delivery-count limit, lock expiry, control batches, record-limit mode."""
from collections import namedtuple

import pytest

from pykbroker.share.partition import (ACKNOWLEDGED, ARCHIVED, AVAILABLE, InvalidRecordState, SharePartition)

H = namedtuple("H", "base_offset last_offset_delta attributes")


def batch(first, n, control=False):
    return H(first, n - 1, 0x20 if control else 0)


def states(sp):
    return [(r.first, r.last, r.state, r.count) for r in sp.ranges]


def test_acquire_by_batch_then_acknowledge_per_offset():
    sp = SharePartition(10, lock_ms=1000, delivery_limit=3, max_in_flight=100)
    got, used = sp.acquire("a", [batch(8, 4), batch(12, 3)], now=0.0, max_records=100, strict=False)
    assert got == [(10, 14, 1)] and used == [0, 1]          # offsets below the SPSO are never delivered
    assert sp.next_offset == 15
    sp.acknowledge("a", [(10, 14, [1, 2, 3, 1, 2])], now=0.5)
    assert sp.start_offset == 11                              # 10 accepted: the SPSO moves over it
    assert states(sp) == [(11, 11, AVAILABLE, 1), (12, 12, ARCHIVED, 1), (13, 13, ACKNOWLEDGED, 1),
                          (14, 14, AVAILABLE, 1)]
    # redelivery: only the available offsets, with their count + 1
    got, _ = sp.acquire("b", [batch(8, 4), batch(12, 3)], now=1.0, max_records=100, strict=False)
    assert got == [(11, 11, 2), (14, 14, 2)]
    with pytest.raises(InvalidRecordState):
        sp.acknowledge("a", [(11, 11, [1])], now=1.0)        # acquired by b, not a
    sp.acknowledge("b", [(11, 11, [1]), (14, 14, [1])], now=1.0)
    assert sp.start_offset == 15 and sp.ranges == []


def test_delivery_limit_and_lock_expiry():
    sp = SharePartition(0, lock_ms=1000, delivery_limit=2, max_in_flight=100)
    assert sp.acquire("a", [batch(0, 2)], 0.0, 100, False)[0] == [(0, 1, 1)]
    assert not sp.expire_locks(0.5)
    assert sp.expire_locks(1.0)                               # lock over: available again
    assert sp.acquire("a", [batch(0, 2)], 1.0, 100, False)[0] == [(0, 1, 2)]
    assert sp.next_deadline() == 2.0
    sp.acknowledge("a", [(0, 1, [2])], 1.5)                   # released at the limit: archived
    assert sp.start_offset == 2 and sp.ranges == []


def test_control_batches_are_archived_and_record_limit_cuts():
    sp = SharePartition(0, lock_ms=1000, delivery_limit=5, max_in_flight=100)
    got, used = sp.acquire("a", [batch(0, 1, control=True), batch(1, 10)], 0.0, 4, strict=True)
    assert got == [(1, 4, 1)] and used == [1]
    assert sp.start_offset == 1 and sp.next_offset == 5
    got, _ = sp.acquire("a", [batch(1, 10)], 0.0, 100, strict=False)
    assert got == [(5, 10, 1)]


def test_in_flight_limit_and_session_release():
    sp = SharePartition(0, lock_ms=1000, delivery_limit=5, max_in_flight=3)
    assert sp.acquire("a", [batch(0, 3), batch(3, 3)], 0.0, 100, False)[0] == [(0, 2, 1)]
    assert not sp.has_available(6)                           # 3 in flight: no more locks
    assert sp.release_member("a")
    assert sp.fetch_offset() == 0 and sp.has_available(6)
