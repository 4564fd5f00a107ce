"""Transactions across timeouts, restarts and kill -9 of a real broker process: timed-out
transactions are aborted with an epoch bump, transaction state and the aborted-transaction index
survive clean and unclean restarts (the index is rebuilt by recovery), a transaction whose
PrepareCommit was durable is completed after a crash (before its markers, or between them), and
an open transaction of a crashed broker is aborted once it times out.  DescribeTransactions and
ListTransactions show the coordinator's state."""
from __future__ import annotations

import glob
import os
import time

import pytest
from confluent_kafka import KafkaException, Producer

from pykbroker.local.broker_process import BrokerProcess, wait_until
from pykbroker.protocol import wire

from .helpers import create_topic, end_offsets, read_all, transaction, txn_producer, unique, values

pytestmark = pytest.mark.timeout(240)

OVERRIDES = {"group.initial.rebalance.delay.ms": "0",
             # check for timed-out transactions often (Kafka: every 10 s)
             "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200"}


@pytest.fixture
def txn_broker(tmp_path):
    with BrokerProcess(str(tmp_path / "data"), OVERRIDES) as b:
        yield b


def describe(bs, tid) -> dict:
    wire.call(bs, 10, 3, {"key": tid, "key_type": 1})
    return wire.call(bs, 65, 0, {"transactional_ids": [tid]})["transaction_states"][0]


def list_txns(bs, states=(), pids=(), duration=-1) -> list:
    r = wire.call(bs, 66, 1, {"state_filters": list(states), "producer_id_filters": list(pids),
                              "duration_filter": duration})
    assert r["error_code"] == 0, r
    return sorted((t["transactional_id"], t["producer_id"], t["transaction_state"]) for t in r["transaction_states"])


def test_describe_and_list_transactions(txn_broker):
    bs = txn_broker.bootstrap
    topic = create_topic(bs, unique("desc"), 2)
    tid_open, tid_done = unique("open"), unique("done")
    done = txn_producer(bs, tid_done)
    done.begin_transaction()
    done.produce(topic, value=b"x", partition=0)
    done.commit_transaction(30)
    p = txn_producer(bs, tid_open, **{"transaction.timeout.ms": 60000})
    p.begin_transaction()
    p.produce(topic, value=b"y", partition=1)
    p.produce(topic, value=b"y", partition=0)
    p.flush(10)
    d = describe(bs, tid_open)
    assert d["error_code"] == 0 and d["transaction_state"] == "Ongoing"
    assert d["transaction_timeout_ms"] == 60000 and d["producer_epoch"] == 0
    assert d["topics"] == [{"topic": topic, "partitions": [0, 1]}]
    assert d["transaction_start_time_ms"] > 0
    # the markers are written after EndTxn is answered: CompleteCommit follows shortly
    wait_until(lambda: describe(bs, tid_done)["transaction_state"] == "CompleteCommit", 10, what="completion")
    d2 = describe(bs, tid_done)
    # a completed transaction keeps its start time, as Kafka's prepareComplete does
    assert (d2["transaction_state"], d2["topics"]) == ("CompleteCommit", [])
    assert d2["transaction_start_time_ms"] > 0
    unknown = describe(bs, unique("nobody"))
    assert unknown["error_code"] == 105  # TRANSACTIONAL_ID_NOT_FOUND
    everything = list_txns(bs)
    assert (tid_open, d["producer_id"], "Ongoing") in everything
    assert (tid_done, d2["producer_id"], "CompleteCommit") in everything
    assert list_txns(bs, states=["Ongoing"]) == [(tid_open, d["producer_id"], "Ongoing")]
    assert list_txns(bs, pids=[d2["producer_id"]]) == [(tid_done, d2["producer_id"], "CompleteCommit")]
    assert list_txns(bs, states=["Ongoing"], duration=3_600_000) == []
    r = wire.call(bs, 66, 0, {"state_filters": ["NoSuchState"], "producer_id_filters": []})
    assert r["unknown_state_filters"] == ["NoSuchState"] and r["transaction_states"] == []
    p.abort_transaction(30)


def test_timed_out_transaction_is_aborted_and_fenced(txn_broker):
    bs = txn_broker.bootstrap
    topic = create_topic(bs, unique("timeout"), 1)
    tid = unique("tid")
    p = txn_producer(bs, tid, **{"transaction.timeout.ms": 1500})
    p.begin_transaction()
    p.produce(topic, value=b"late", partition=0)
    p.flush(10)
    assert end_offsets(bs, topic, 1, 1) == [0]            # the open transaction holds the LSO
    wait_until(lambda: describe(bs, tid)["transaction_state"] == "CompleteAbort", 15, what="timeout abort")
    d = describe(bs, tid)
    assert d["producer_epoch"] == 1                       # aborted with an epoch bump
    assert end_offsets(bs, topic, 1, 1) == end_offsets(bs, topic, 1, 0) == [2]   # record + ABORT marker
    with pytest.raises(KafkaException):
        p.commit_transaction(10)
    assert read_all(bs, topic, 1, "read_committed", idle=1.0) == []
    # a new producer with the same id carries on
    p2 = txn_producer(bs, tid)
    p2.begin_transaction()
    p2.produce(topic, value=b"fresh", partition=0)
    p2.commit_transaction(30)
    assert [r[3] for r in read_all(bs, topic, 1, "read_committed", expect=1)] == [b"fresh"]
    assert describe(bs, tid)["producer_epoch"] == 2


def test_timed_out_transaction_version_2(txn_broker):
    """A transaction version 2 transaction (raw requests: Produce v12 adds the partition) that
    times out: aborted with one epoch bump and the client version kept, after which the old
    epoch's commit is INVALID_TXN_STATE and its abort a retry answered with the bumped epoch --
    the answers and __transaction_state records Kafka 4.4 gives for the same requests
    (observed against a real Kafka 4.4 broker, whose ``txn_log`` is the one below)."""
    from tests.differential import test_transactions as T
    from tests.differential.conftest import Target
    t = Target("pykbroker", txn_broker.bootstrap, 1, None)
    topic, tid = create_topic(txn_broker.bootstrap, unique("tv2-timeout"), 1), unique("tid")
    T._coordinator(t, tid)
    init = T._init(t, tid, timeout_ms=1500, version=5)
    pid, e0 = init["producer_id"], init["producer_epoch"]
    assert T._produce_v(t, tid, topic, 0, [b"x"], pid, e0, 0, 12) == 0
    wait_until(lambda: T._describe(t, tid, e0)[1] == "CompleteAbort", 30, what="timeout abort")
    assert T._describe(t, tid, e0) == (0, "CompleteAbort", 1, [])
    assert T._end_v5(t, tid, pid, e0, True, e0) == (48, -1, None)     # INVALID_TXN_STATE
    assert T._end_v5(t, tid, pid, e0, False, e0) == (0, 1, True)      # a retry: the bumped epoch
    assert T._txn_log(t, tid, pid, e0) == [
        (1, "Empty", 0, [], 0, 0, True, -1), (1, "Ongoing", 0, [(topic, 0)], 1, 2, True, -1),
        (1, "PrepareAbort", 1, [(topic, 0)], 1, 2, True, -1), (1, "CompleteAbort", 1, [], 0, 2, True, -1)]


def _three_transactions(bs, topic, tid):
    """A committed, an aborted and an open transaction over 2 partitions; returns the open producer."""
    p = txn_producer(bs, tid, **{"transaction.timeout.ms": 4000})
    p.begin_transaction()
    for i in range(6):
        p.produce(topic, value=b"c%d" % i, partition=i % 2)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(4):
        p.produce(topic, value=b"a%d" % i, partition=i % 2)
    p.flush(10)
    p.abort_transaction(30)
    p.begin_transaction()
    for i in range(2):
        p.produce(topic, value=b"o%d" % i, partition=i % 2)
    p.flush(10)
    return p


@pytest.mark.parametrize("clean", [True, False], ids=["clean", "kill9"])
def test_restart_with_open_transaction(txn_broker, clean):
    """After a restart the committed records are exactly what read_committed sees, the aborted list
    is still served (the kill -9 case loses the .txnindex files on purpose: recovery rebuilds
    them from the log), the open transaction still holds the LSO, and it is aborted once its
    timeout passes."""
    b = txn_broker
    topic = create_topic(b.bootstrap, unique("restart"), 2)
    tid = unique("tid")
    _three_transactions(b.bootstrap, topic, tid)
    # 3 + 1 commit marker + 2 + 1 abort marker + 1 open record = 8 per partition (the ABORT
    # markers follow the EndTxn answer)
    wait_until(lambda: end_offsets(b.bootstrap, topic, 2, 0) == [8, 8], 10, what="the ABORT markers")
    assert end_offsets(b.bootstrap, topic, 2, 1) == [7, 7]
    if clean:
        b.stop()
    else:
        b.kill()
        idx = glob.glob(os.path.join(b.data_dir, "%s-*" % topic, "*.txnindex"))
        assert len(idx) == 2
        for f in idx:
            os.remove(f)
    b.start()
    bs = b.bootstrap
    assert end_offsets(bs, topic, 2, 0) == [8, 8]
    rc = wire.fetch_part(wire.fetch(bs, topic, 0, 0, isolation_level=1))
    assert rc["last_stable_offset"] == 7 and rc["high_watermark"] == 8
    assert [a["first_offset"] for a in rc["aborted_transactions"]] == [4]
    assert values(read_all(bs, topic, 2, "read_committed", expect=6)) == sorted(b"c%d" % i for i in range(6))
    # the open transaction times out (4 s after it began) and is aborted: LSO = HW again
    wait_until(lambda: describe(bs, tid)["transaction_state"] == "CompleteAbort", 20, what="abort after restart")
    assert end_offsets(bs, topic, 2, 1) == end_offsets(bs, topic, 2, 0) == [9, 9]
    assert values(read_all(bs, topic, 2, "read_committed", expect=6)) == sorted(b"c%d" % i for i in range(6))
    rc = wire.fetch_part(wire.fetch(bs, topic, 1, 0, isolation_level=1))
    assert [a["first_offset"] for a in rc["aborted_transactions"]] == [4, 7]


@pytest.mark.parametrize("point", ["before-markers", "after-first-marker"])
def test_kill9_after_prepare_commit_completes_the_commit(tmp_path, monkeypatch, point):
    """EndTxn(commit) is answered once PrepareCommit is durable; a broker killed before (or
    between) the markers completes the commit when it comes back."""
    monkeypatch.setenv("PYKBROKER_TXN_PAUSE", point)
    b = BrokerProcess(str(tmp_path / "data"), OVERRIDES).start()
    try:
        bs = b.bootstrap
        topic = create_topic(bs, unique("prep"), 3)
        tid = unique("tid")
        p = txn_producer(bs, tid)
        p.begin_transaction()
        for i in range(9):
            p.produce(topic, value=b"v%d" % i, partition=i % 3)
        p.commit_transaction(30)          # answered: the commit is decided
        wait_until(lambda: "paused %s" % point in b.log_text(), 10, what="the pause hook")
        assert describe(bs, tid)["transaction_state"] == "PrepareCommit"
        # nothing is visible to read_committed yet (at most one partition has its marker)
        assert len(read_all(bs, topic, 3, "read_committed", idle=0.8)) <= (3 if point == "after-first-marker" else 0)
        b.kill()
        monkeypatch.delenv("PYKBROKER_TXN_PAUSE")
        b.start()
        bs = b.bootstrap
        wait_until(lambda: describe(bs, tid)["transaction_state"] == "CompleteCommit", 15, what="completion")
        assert values(read_all(bs, topic, 3, "read_committed", expect=9)) == sorted(b"v%d" % i for i in range(9))
        # 3 records + COMMIT marker per partition; the partition marked before the crash gets a
        # second (harmless) COMMIT marker when the coordinator completes again, as with Kafka
        assert end_offsets(bs, topic, 3, 1) == ([4, 4, 4] if point == "before-markers" else [5, 4, 4])
        # the producer's epoch is intact: a new transaction of the same producer works
        p.begin_transaction()
        p.produce(topic, value=b"after", partition=0)
        p.commit_transaction(30)
        assert b"after" in values(read_all(bs, topic, 3, "read_committed", expect=10))
    finally:
        b.kill()


def test_kill9_loop_keeps_transactions_atomic(txn_broker):
    """A transactional producer commits batches of 3 records over 3 partitions while the broker is
    killed (-9) three times.  Afterwards every transaction is all-or-nothing under
    read_committed, and every one whose commit was acknowledged is there."""
    b = txn_broker
    topic = create_topic(b.bootstrap, unique("chaos"), 3)
    tid = unique("tid")
    acked, attempted = set(), set()
    n = 0
    for round_ in range(3):
        p = txn_producer(b.bootstrap, tid, **{"transaction.timeout.ms": 5000, "message.timeout.ms": 5000})
        kill_after = time.monotonic() + 1.0 + 0.4 * round_
        try:
            while time.monotonic() < kill_after + 5:
                p.begin_transaction()
                attempted.add(n)
                for i in range(3):
                    p.produce(topic, value=b"t%d-%d" % (n, i), partition=i)
                killed = time.monotonic() > kill_after and b.proc is not None
                if killed:
                    b.kill()
                # the commit of the transaction the kill interrupted cannot succeed (the broker
                # is down until the round's end): 2 s to fail, not the usual 5, which only waited
                p.commit_transaction(2 if killed else 5)
                acked.add(n)
                n += 1
        except KafkaException:
            n += 1
        if b.proc is not None:
            b.kill()
        b.start()
    bs = b.bootstrap
    # in-doubt transactions resolve (committed or timed out and aborted) before the LSO frees
    wait_until(lambda: end_offsets(bs, topic, 3, 1) == end_offsets(bs, topic, 3, 0), 30, what="stable log")
    got = read_all(bs, topic, 3, "read_committed", expect=len(acked) * 3)
    by_txn: dict = {}
    for r in got:
        t, i = r[3].decode()[1:].split("-")
        by_txn.setdefault(int(t), set()).add(int(i))
    assert all(v == {0, 1, 2} for v in by_txn.values()), by_txn
    assert acked <= set(by_txn), (sorted(acked - set(by_txn)))
    assert len(got) == 3 * len(by_txn)     # no duplicates
    assert acked, "no transaction was acknowledged"


def test_idle_transactional_id_expires(tmp_path):
    overrides = dict(OVERRIDES, **{"transactional.id.expiration.ms": "1500",
                                   "transaction.remove.expired.transaction.cleanup.interval.ms": "300"})
    with BrokerProcess(str(tmp_path / "data"), overrides) as b:
        bs = b.bootstrap
        topic = create_topic(bs, unique("exp"), 1)
        tid = unique("tid")
        p = txn_producer(bs, tid)
        transaction(p, topic, [(None, b"v", 0)])
        first = describe(bs, tid)
        assert first["transaction_state"] in ("PrepareCommit", "CompleteCommit")
        wait_until(lambda: describe(bs, tid)["error_code"] == 105, 15, what="expiry")
        # gone for good: a restart replays the tombstone
        b.restart()
        assert describe(b.bootstrap, tid)["error_code"] == 105
        # the id starts afresh: a new producer id, epoch 0
        r = wire.call(b.bootstrap, 22, 4, {"transactional_id": tid, "transaction_timeout_ms": 60000,
                                           "producer_id": -1, "producer_epoch": -1})
        assert r["error_code"] == 0 and r["producer_epoch"] == 0 and r["producer_id"] != first["producer_id"]
        assert [x[3] for x in read_all(b.bootstrap, topic, 1, "read_committed", expect=1)] == [b"v"]
