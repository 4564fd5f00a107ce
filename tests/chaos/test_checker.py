"""The history checker (compat/chaos/checker.py) on synthetic histories: each anomaly it
knows is planted in an otherwise clean history and must be found, under its own name only; the
clean histories must pass."""
from __future__ import annotations

import json

from compat.chaos.checker import (READ_COMMITTED, Assign, Commit, History, Poll, Send, Txn, check)


def clean(n=10, partitions=2, producers=("a", "b")) -> History:
    """Producers write n values each, round-robin over partitions, every one acknowledged at the
    next offset; a final reader after the heal reads every partition whole."""
    h = History()
    t = 0.0
    nxt = {p: 0 for p in range(partitions)}
    for i in range(n):
        for proc in producers:
            part = i % partitions
            t += 0.01
            h.add(Send(proc, "%s-%d" % (proc, i), part, t, offset=nxt[part], ack_time=t + 0.005))
            nxt[part] += 1
    h.heal = t + 1
    final_read(h, t + 2)
    return h


def final_read(h: History, t: float, consumer="final") -> None:
    log = {}
    for s in h.sends:
        if s.acked:
            log.setdefault(s.partition, []).append((s.offset, s.value))
    h.add(Assign(consumer, t))
    h.add(Poll(consumer, t + 0.1, {p: sorted(v) for p, v in log.items()}))


def kinds(h, **kw):
    r = check(h, **kw)
    return set(r.counts), r


def test_clean_history_passes():
    got, r = kinds(clean())
    assert got == set(), r.anomalies
    assert r.acked == 20 and r.read == 20 and r.lost == 0 and r.duplicated == 0
    assert 0 < r.p99 < 0.01


def test_lost_write():
    h = clean()
    h.polls[-1].records[0] = [x for x in h.polls[-1].records[0] if x[1] != "a-4"]
    got, r = kinds(h)
    # the final reader also stepped over the offset the acknowledgement names
    assert got == {"lost", "poll-skip"} and r.lost == 1
    assert "a-4" in r.anomalies["lost"][0]


def test_lost_spans_say_which_partition_lost_writes_sent_when():
    # p0 loses the writes sent 1.0-1.4 s and 4.0-4.2 s (two cuts), p1 one write at 2.0 s
    h = History()
    for i in range(60):
        for part in (0, 1):
            h.add(Send("a", "a-%d-%d" % (part, i), part, 0.1 * i, offset=i, ack_time=0.1 * i + 0.01))
    gone = {(0, i) for i in list(range(10, 15)) + list(range(40, 43))} | {(1, 20)}
    h.heal = 7.0
    h.add(Assign("final", 8.0))
    h.add(Poll("final", 8.1, {part: [(s.offset, s.value) for s in h.sends if s.partition == part
                                     and (part, s.offset) not in gone] for part in (0, 1)}))
    r = check(h)
    assert r.lost == 9
    assert r.lost_spans == [[0, 1.0, 1.4, 5], [0, 4.0, 4.2, 3], [1, 2.0, 2.0, 1]]
    assert check(clean()).lost_spans == []


def test_lost_after_heal_even_if_read_before():
    h = clean()
    rec = h.polls[-1].records
    # read during the fault, truncated away after it
    h.add(Poll("early", h.heal - 0.5, {0: [(0, "a-0")]}))
    rec[0] = [x for x in rec[0] if x[1] != "a-0"]
    got, r = kinds(h)
    assert "lost" in got and "not after" in r.anomalies["lost"][0]


def test_unseen_within_bound():
    h = clean()
    h.polls[-1].time = h.heal + 30
    assert kinds(h, bound=10)[0] == {"unseen-within-bound"}
    assert kinds(h, bound=60)[0] == set()


def test_duplicate():
    h = clean()
    recs = h.polls[-1].records[0]
    recs.append((recs[-1][0] + 1, "a-0"))   # written twice: a retry the broker did not dedupe
    got, r = kinds(h)
    assert got == {"duplicate"} and r.duplicated == 1


def _duplicated_a0(batches_at):
    """clean(), with a-0 read again at the end of partition 0; ``batches_at(first, second)``
    gives the (producer id, epoch, sequence) of the two positions (None: not looked up)."""
    h = clean()
    recs = h.polls[-1].records[0]
    first = (0, [o for o, v in recs if v == "a-0"][0])
    second = (0, recs[-1][0] + 1)
    recs.append((second[1], "a-0"))
    for pos, ids in zip((first, second), batches_at):
        if ids is not None:
            h.batches[pos] = ids
    return h


def test_a_client_resend_after_an_epoch_bump_is_told_apart_from_a_duplicate_the_broker_let_in():
    # one producer id, epoch 0 then epoch 1 at sequence 0: the client wrote it again as new data
    got, r = kinds(_duplicated_a0([(7, 0, 159), (7, 1, 0)]))
    assert got == set() and r.ok and r.duplicated == 1 and r.client_duplicates == 1
    assert "a-0 read at" in r.client_anomalies["duplicate-after-epoch-bump"][0]
    # survives the history's JSON form (results keep histories for re-checking)
    h = _duplicated_a0([(7, 0, 159), (7, 1, 0)])
    assert check(History.from_dict(json.loads(json.dumps(h.to_dict())))).client_duplicates == 1
    # the same (producer id, epoch) twice: the broker's sequence check let a retry in again
    got, r = kinds(_duplicated_a0([(7, 0, 159), (7, 0, 159)]))
    assert got == {"duplicate"} and r.client_duplicates == 0
    # two producer ids (not one client's epochs), a non-idempotent producer, or a position not
    # looked up: a duplicate
    assert kinds(_duplicated_a0([(7, 0, 159), (8, 0, 0)]))[0] == {"duplicate"}
    assert kinds(_duplicated_a0([(-1, -1, -1), (-1, 0, -1)]))[0] == {"duplicate"}
    assert kinds(_duplicated_a0([(7, 0, 159), None]))[0] == {"duplicate"}


def test_inconsistent_offsets_two_values_at_one_offset():
    h = clean()
    # another consumer read a different value at offset 3 of partition 1 (two leaders' logs)
    h.add(Poll("c2", h.heal + 3, {1: [(3, "z-99")]}))
    got, r = kinds(h)
    assert "inconsistent-offsets" in got
    assert any("1@3 holds" in e for e in r.anomalies["inconsistent-offsets"])


def test_inconsistent_offsets_acknowledged_elsewhere():
    h = clean()
    # the last record of partition 1, acknowledged at its offset, read back 5 further on
    final = h.polls[-1].records[1]
    off, v = final[-1]
    final[-1] = (off + 5, v)
    got, r = kinds(h)
    # the reader also stepped over the offset the acknowledgement names
    assert got == {"inconsistent-offsets", "poll-skip"}
    assert "%s acknowledged at 1@%d, read at [(1, %d)]" % (v, off, off + 5) in r.anomalies["inconsistent-offsets"][0]


def test_nonmonotonic_send_acknowledgements():
    h = clean(producers=("a",), partitions=1)
    # a-5 and a-6 acknowledged at swapped offsets (and the log read back agrees)
    s5, s6 = h.sends[5], h.sends[6]
    s5.offset, s6.offset = s6.offset, s5.offset
    h.polls.clear()
    final_read(h, h.heal + 1)
    got, r = kinds(h)
    assert got == {"nonmonotonic-send"}
    assert r.counts["nonmonotonic-send"] == 2   # once from the acknowledgements, once from the log


def test_nonmonotonic_poll():
    h = clean(partitions=1)
    h.add(Assign("c", h.heal + 5))
    h.add(Poll("c", h.heal + 6, {0: [(0, "a-0"), (1, "b-0"), (2, "a-1")]}))
    h.add(Poll("c", h.heal + 7, {0: [(1, "b-0"), (2, "a-1")]}))   # went back without a seek
    got, r = kinds(h)
    assert got == {"nonmonotonic-poll"}
    # after a re-assignment starting again is fine
    h = clean(partitions=1)
    h.add(Assign("c", h.heal + 5))
    h.add(Poll("c", h.heal + 6, {0: [(0, "a-0"), (1, "b-0")]}))
    h.add(Assign("c", h.heal + 6.5))
    h.add(Poll("c", h.heal + 7, {0: [(0, "a-0"), (1, "b-0")]}))
    assert kinds(h)[0] == set()


def test_poll_skip():
    h = clean(partitions=1)
    h.add(Assign("c", h.heal + 5))
    h.add(Poll("c", h.heal + 6, {0: [(0, "a-0"), (1, "b-0")]}))
    h.add(Poll("c", h.heal + 7, {0: [(4, "a-2")]}))   # 2 and 3 hold records
    got, r = kinds(h)
    assert got == {"poll-skip"}
    assert "skipping 2 record(s) from offset 2" in r.anomalies["poll-skip"][0]


def test_gap_without_records_is_not_a_skip():
    # offsets 2-3 hold a transaction's control records: nothing to read there
    h = History()
    h.add(Send("a", "a-0", 0, 0.0, offset=0, ack_time=0.01))
    h.add(Send("a", "a-1", 0, 0.1, offset=1, ack_time=0.11))
    h.add(Send("a", "a-2", 0, 0.2, offset=4, ack_time=0.21))
    h.heal = 1.0
    h.add(Assign("c", 2.0))
    h.add(Poll("c", 2.1, {0: [(0, "a-0"), (1, "a-1")]}))
    h.add(Poll("c", 2.2, {0: [(4, "a-2")]}))
    assert kinds(h)[0] == set()


def txn_history(committed_reader_sees_aborted=False):
    """t1 commits a-0 at 0@0, t2 aborts a-1 at 0@1, t3 commits a-2 at 0@3 (2 is t2's marker)."""
    h = History()
    h.add(Txn("t1", "committed", "a"))
    h.add(Txn("t2", "aborted", "a"))
    h.add(Txn("t3", "committed", "a"))
    h.add(Send("a", "a-0", 0, 0.0, offset=0, ack_time=0.01, txn="t1"))
    h.add(Send("a", "a-1", 0, 0.1, offset=1, ack_time=0.11, txn="t2"))
    h.add(Send("a", "a-2", 0, 0.2, offset=3, ack_time=0.21, txn="t3"))
    h.heal = 1.0
    h.add(Assign("rc", 2.0))
    recs = [(0, "a-0"), (1, "a-1"), (3, "a-2")] if committed_reader_sees_aborted else [(0, "a-0"), (3, "a-2")]
    h.add(Poll("rc", 2.1, {0: recs}, isolation=READ_COMMITTED))
    # read_uncommitted sees everything: not an anomaly there
    h.add(Assign("ru", 2.0))
    h.add(Poll("ru", 2.1, {0: [(0, "a-0"), (1, "a-1"), (3, "a-2")]}))
    return h


def test_transactions_clean_and_aborted_read():
    assert kinds(txn_history())[0] == set()
    got, r = kinds(txn_history(committed_reader_sees_aborted=True))
    assert got == {"aborted-read"}
    assert "a-1" in r.anomalies["aborted-read"][0] and "t2" in r.anomalies["aborted-read"][0]


def test_aborted_record_not_read_is_not_lost_nor_skipped():
    h = txn_history()
    got, r = kinds(h)
    assert r.lost == 0 and got == set()


def _two_txn_history(order_p0, order_p1, t2_status="committed"):
    """t1 (committed) and t2 each write one value to partitions 0 and 1; order_pN is which txn's
    write comes first in partition N; then the partitions heal and are read to the end."""
    h = History()
    h.add(Txn("t1", "committed"))
    h.add(Txn("t2", t2_status))
    t = 0.0
    for part, order in ((0, order_p0), (1, order_p1)):
        for off, txn in enumerate(order):
            t += 0.01
            h.add(Send(txn, "%s-p%d" % (txn, part), part, t, offset=off, ack_time=t, txn=txn))
    h.heal = 1.0
    final_read(h, 2.0)
    return h


def test_g0_write_cycle():
    # t1 before t2 in partition 0, t2 before t1 in partition 1: no serial order explains both
    got, r = kinds(_two_txn_history(["t1", "t2"], ["t2", "t1"]))
    assert "G0" in got
    assert "t1 -ww-> t2 -ww-> t1" in r.anomalies["G0"][0]
    # the same writes in one order everywhere are fine
    assert kinds(_two_txn_history(["t1", "t2"], ["t1", "t2"]))[0] == set()


def test_g1c_circular_information_flow():
    # t1 writes x (p0); t2 reads x, writes y (p1); t1 also wrote p1 *after* y: t2 -ww-> t1 -wr-> t2
    h = History()
    for t in ("t1", "t2"):
        h.add(Txn(t, "committed"))
    h.add(Send("t1", "x", 0, 0.0, offset=0, ack_time=0.01, txn="t1"))
    h.add(Send("t2", "y", 1, 0.1, offset=0, ack_time=0.11, txn="t2"))
    h.add(Send("t1", "z", 1, 0.2, offset=1, ack_time=0.21, txn="t1"))
    h.add(Poll("t2", 0.05, {0: [(0, "x")]}, isolation=READ_COMMITTED, txn="t2"))
    h.heal = 1.0
    final_read(h, 2.0)
    got, r = kinds(h)
    assert got == {"G1c"}
    assert r.anomalies["G1c"][0] == "ww/wr cycle: t1 -wr-> t2 -ww-> t1"
    # the same without t1's later write to partition 1: information flows one way only
    h.sends = [s for s in h.sends if s.value != "z"]
    h.polls = [p for p in h.polls if p.consumer != "final"]
    final_read(h, 2.0)
    assert kinds(h)[0] == set()


def test_uncommitted_transactions_are_left_out_of_cycles():
    assert "G0" not in kinds(_two_txn_history(["t1", "t2"], ["t2", "t1"], t2_status="unknown"))[0]


def test_unavailability_and_latency_figures():
    h = History()
    for i in range(100):
        t = i * 0.1
        ack = t + (5.0 if i == 50 else 0.01)   # one send waited 5 s
        h.add(Send("a", "a-%d" % i, 0, t, offset=i, ack_time=ack))
    h.heal = 20
    final_read(h, 21)
    r = check(h)
    assert r.ok
    assert 0.009 < r.p50 < 0.011 and r.p99 >= 0.01
    # acks at 4.91 (i=49), then i=51 at 5.11 and i=50 at 10.0; then 5.21 ...
    assert abs(r.longest_unavailable - 0.2) < 1e-6
    h2 = History()
    for i in range(10):
        h2.add(Send("a", "a-%d" % i, 0, float(i), offset=i if i < 3 else None, ack_time=i + 0.01 if i < 3 else None,
                    error=None if i < 3 else "timed out"))
    final_read(h2, 20)
    r2 = check(h2)
    assert r2.failed == 7 and abs(r2.longest_unavailable - (9 - 2.01)) < 1e-6


def test_history_round_trips_through_json():
    h = txn_history(committed_reader_sees_aborted=True)
    h2 = History.from_dict(json.loads(json.dumps(h.to_dict())))
    assert check(h2).counts == check(h).counts == {"aborted-read": 1}


def test_unavailability_is_per_partition():
    # partition 0 acknowledges every 0.1 s throughout; partition 1 acknowledges nothing between
    # t=2 and t=7 (its leader was cut off): 5 s of unavailability, not 0.1
    h = History()
    for i in range(100):
        t = i * 0.1
        h.add(Send("a", "a-%d" % i, 0, t, offset=i, ack_time=t + 0.01))
        if not 2.0 < t < 7.0:
            h.add(Send("b", "b-%d" % i, 1, t, offset=len([s for s in h.sends if s.partition == 1]),
                       ack_time=t + 0.01))
    final_read(h, 20)
    r = check(h)
    assert r.ok and abs(r.longest_unavailable - 5.0) < 1e-6, r.longest_unavailable


# -- consume-transform-produce ----------------------------------------------------------------
def ctp_history(outputs_per_input=1, aborted_copy=False):
    """Inputs i-0..i-4 on partition 0 (plain acknowledged writes); a transactional application
    wrote o<k>:<input> to partition 1 in committed transactions; a read_committed final reader."""
    h = History()
    for i in range(5):
        h.add(Send("in", "i-%d" % i, 0, i * 0.1, offset=i, ack_time=i * 0.1 + 0.01))
    off = 0
    for i in range(5):
        for k in range(outputs_per_input if i == 2 else 1):
            t = "t%d.%d" % (i, k)
            h.add(Txn(t, "committed", "app"))
            h.add(Send("app", "o%d:i-%d" % (k, i), 1, 1 + i * 0.1, offset=off, ack_time=1.01 + i * 0.1, txn=t,
                       source="i-%d" % i))
            off += 2   # each transaction's commit marker follows its record
    if aborted_copy:
        h.add(Txn("tx", "aborted", "app"))
        h.add(Send("app", "ox:i-3", 1, 2.0, offset=off, ack_time=2.01, txn="tx", source="i-3"))
    h.heal = 3.0
    log = {}
    for s in h.sends:
        if s.acked and (s.txn is None or h.txns[s.txn].status == "committed"):
            log.setdefault(s.partition, []).append((s.offset, s.value))
    h.add(Assign("final", 4.0))
    h.add(Poll("final", 4.1, {p: sorted(v) for p, v in log.items()}, isolation=READ_COMMITTED))
    return h


def test_transform_exactly_once_clean():
    assert kinds(ctp_history())[0] == set()
    # an aborted attempt's output, not read by the read_committed reader, is no duplicate
    assert kinds(ctp_history(aborted_copy=True))[0] == set()


def test_transform_duplicate_and_lost():
    got, r = kinds(ctp_history(outputs_per_input=2))
    assert got == {"transform-duplicate"}
    assert "i-2 read through 2 outputs" in r.anomalies["transform-duplicate"][0]
    h = ctp_history()
    h.polls[-1].records[1] = [x for x in h.polls[-1].records[1] if x[1] != "o0:i-4"]
    got, r = kinds(h)
    # also a lost write (a committed transaction's acknowledged record nobody read)
    assert got == {"transform-lost", "lost"}
    assert r.anomalies["transform-lost"][0].startswith("input i-4 ")


# -- consumer groups with commits --------------------------------------------------------------
def group_history():
    """10 records on partition 0; member m1 reads 0-4 and commits 5, leaves; m2 is assigned the
    partition, starts at 5, reads to the end and commits 10; an observer reads 5 then 10."""
    h = History()
    for i in range(10):
        h.add(Send("p", "p-%d" % i, 0, i * 0.1, offset=i, ack_time=i * 0.1 + 0.01))
    h.heal = 1.5
    h.add(Assign("m1", 2.0, [0], group="g"))
    h.add(Poll("m1", 2.1, {0: [(i, "p-%d" % i) for i in range(5)]}))
    h.add(Commit("m1", 2.2, {0: 5}, "g", ack_time=2.25))
    h.add(Commit("obs", 2.3, {0: 5}, "g", ack_time=2.35, observed=True))
    h.add(Assign("m2", 3.0, [0], group="g"))
    h.add(Poll("m2", 3.1, {0: [(i, "p-%d" % i) for i in range(5, 10)]}))
    h.add(Commit("m2", 3.2, {0: 10}, "g", ack_time=3.25))
    h.add(Commit("obs", 3.3, {0: 10}, "g", ack_time=3.35, observed=True))
    return h


def test_group_commits_clean():
    got, r = kinds(group_history())
    assert got == set(), r.anomalies


def test_commit_backward():
    h = group_history()
    h.add(Commit("m1", 3.4, {0: 7}, "g", ack_time=3.45))   # a zombie's commit accepted
    got, r = kinds(h)
    assert got == {"commit-backward"}
    assert "m1 committed 7 for partition 0 of group g" in r.anomalies["commit-backward"][0]
    h = group_history()
    h.commits[-1].offsets = {0: 5}   # the observer reads an older offset after 10 was acknowledged
    got, r = kinds(h)
    assert got == {"commit-backward"}
    assert "observer read 5" in r.anomalies["commit-backward"][0]
    # a failed commit and an observer's read that started before the acknowledgement: fine
    h = group_history()
    h.add(Commit("m1", 3.4, {0: 7}, "g", ack_time=3.45, error="ILLEGAL_GENERATION"))
    h.add(Commit("obs", 3.21, {0: 5}, "g", ack_time=3.3, observed=True))
    assert kinds(h)[0] == set()


def test_commit_skip_on_reassignment():
    h = group_history()
    # m2 starts at 7 although the group committed 5: 5 and 6 are never processed
    h.polls[-1].records[0] = [(i, "p-%d" % i) for i in range(7, 10)]
    h.add(Poll("final", 4.0, {0: [(i, "p-%d" % i) for i in range(10)]}))
    got, r = kinds(h)
    assert got == {"commit-skip"}
    ex = r.anomalies["commit-skip"]
    assert any("started at offset 7; the group had committed 5 and offset 5 holds a record" in e for e in ex), ex
    assert any("m2 committed 10 for partition 0 of group g (t=3.250) but no member had read offset 5" in e for e in ex), ex


def test_commit_of_unknown_outcome_on_reassignment():
    """A commit that failed or was not answered yet may have been applied (the campaign's split
    with the controller frozen: a write the old coordinator failed with NOT_COORDINATOR was in
    its successor's log): a member starting at its offset skips nothing; one starting past it
    does."""
    def history(start, error="NOT_COORDINATOR", ack=2.9):
        h = group_history()
        h.add(Poll("m1", 2.5, {0: [(i, "p-%d" % i) for i in range(5, 8)]}))
        h.add(Commit("m1", 2.6, {0: 8}, "g", ack_time=ack, error=error))
        h.polls[1].records[0] = [(i, "p-%d" % i) for i in range(start, 10)]   # m2's first read
        h.add(Poll("final", 4.0, {0: [(i, "p-%d" % i) for i in range(10)]}))
        return h
    assert kinds(history(8))[0] == set()
    assert kinds(history(8, error=None, ack=3.15))[0] == set()   # acknowledged after m2's first read
    for start in (9, 7):   # past every commit that may have been applied, or below the unknown one
        got, r = kinds(history(start))
        assert got == {"commit-skip"}, r.anomalies
        assert any("started at offset %d" % start in e for e in r.anomalies["commit-skip"]), r.anomalies
    assert any("had committed 5 (8 by a commit of unknown outcome) and offset 8 holds" in e
               for e in check(history(9)).anomalies["commit-skip"])


def test_commit_over_unread_records():
    h = group_history()
    h.polls[0].records[0] = [(i, "p-%d" % i) for i in range(3)]   # m1 read 0-2, committed 5
    h.add(Poll("final", 4.0, {0: [(i, "p-%d" % i) for i in range(10)]}))
    got, r = kinds(h)
    assert got == {"commit-skip"}
    assert "m1 committed 5" in r.anomalies["commit-skip"][0] and "offset 3" in r.anomalies["commit-skip"][0]


def test_commits_round_trip_through_json():
    h = group_history()
    h.add(Commit("m1", 3.4, {0: 7}, "g", ack_time=3.45))
    h2 = History.from_dict(json.loads(json.dumps(h.to_dict())))
    assert check(h2).counts == check(h).counts == {"commit-backward": 1}


def test_unknown_transaction_read_committed_counts_as_committed():
    h = txn_history()
    h.txns["t3"].status = "unknown"   # its commit timed out; a read_committed reader read a-2
    got, r = kinds(h)
    assert got == set()
    # inferred committed, it takes part in cycles
    h = _two_txn_history(["t1", "t2"], ["t2", "t1"], t2_status="unknown")
    h.polls[-1].isolation = READ_COMMITTED
    assert "G0" in kinds(h)[0]
    # an unknown one never read is neither lost nor a read_committed skip
    h = txn_history()
    h.txns["t3"].status = "unknown"
    for p in h.polls:
        p.records[0] = [x for x in p.records[0] if x[1] != "a-2"]
    got, r = kinds(h)
    assert got == set(), r.anomalies


def test_acknowledged_without_offset_must_still_be_read():
    h = clean()
    s = h.sends[3]
    s.offset = None   # delivered, offset unknown (an idempotent retry answered as a duplicate)
    got, r = kinds(h)
    assert got == set() and r.acked_without_offset == 1
    h.polls[-1].records = {p: [x for x in recs if x[1] != s.value] for p, recs in h.polls[-1].records.items()}
    got, r = kinds(h)
    assert "lost" in got and r.lost == 1 and "%s acknowledged at %d@?" % (s.value, s.partition) in r.anomalies["lost"][0]
