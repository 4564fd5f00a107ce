"""Transactions with confluent-kafka (librdkafka): commit, abort, several partitions, fencing, the
last stable offset, aborted-transaction lists, and exactly-once consume-transform-produce with
send_offsets_to_transaction.  Every assertion is on records (or offsets) read back."""
from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from pykbroker.protocol.records import CONTROL_ABORT, CONTROL_COMMIT, control_type, iter_batches
from pykbroker.local.broker_process import wait_until
from pykbroker.protocol import wire

from .helpers import create_topic, end_offsets, read_all, transaction, txn_producer, unique, values

pytestmark = pytest.mark.timeout(180)


def test_commit_and_abort_across_partitions(broker):
    bs = broker.bootstrap
    topic = create_topic(bs, unique("tx"), 3)
    p = txn_producer(bs, unique("tid"))
    transaction(p, topic, [(b"k%d" % i, b"commit-1-%d" % i, i % 3) for i in range(30)])
    transaction(p, topic, [(b"k%d" % i, b"abort-%d" % i, i % 3) for i in range(30)], commit=False)
    transaction(p, topic, [(b"k%d" % i, b"commit-2-%d" % i, i % 3) for i in range(12)])

    committed = [b"commit-1-%d" % i for i in range(30)] + [b"commit-2-%d" % i for i in range(12)]
    rc = read_all(bs, topic, 3, "read_committed", expect=42)
    assert values(rc) == sorted(committed)
    # per partition: the first transaction's records, then the third's, in produce order
    for part in range(3):
        got = [r[3] for r in rc if r[0] == part]
        assert got == [b"commit-1-%d" % i for i in range(part, 30, 3)] + \
            [b"commit-2-%d" % i for i in range(part, 12, 3)]
    ru = read_all(bs, topic, 3, "read_uncommitted", expect=72)
    assert values(ru) == sorted(committed + [b"abort-%d" % i for i in range(30)])
    # each transaction ends with a control record that takes an offset: 3 markers per partition
    assert end_offsets(bs, topic, 3, 0) == [10 + 10 + 4 + 3] * 3
    assert end_offsets(bs, topic, 3, 1) == [27] * 3


def test_open_transaction_holds_the_last_stable_offset(broker):
    bs = broker.bootstrap
    topic = create_topic(bs, unique("lso"), 1)
    plain = Producer({"bootstrap.servers": bs})
    plain.produce(topic, value=b"before", partition=0)
    plain.flush(10)
    p = txn_producer(bs, unique("tid"))
    p.begin_transaction()
    p.produce(topic, value=b"in-txn", partition=0)
    p.flush(10)
    plain.produce(topic, value=b"after", partition=0)
    plain.flush(10)
    # LSO = first offset of the open transaction; the high watermark is past everything
    assert end_offsets(bs, topic, 1, 1) == [1]
    assert end_offsets(bs, topic, 1, 0) == [3]
    f = wire.fetch_part(wire.fetch(bs, topic, 0, 0, isolation_level=1))
    assert (f["high_watermark"], f["last_stable_offset"]) == (3, 1)
    assert [r[3] for r in read_all(bs, topic, 1, "read_committed", idle=1.0)] == [b"before"]
    assert [r[3] for r in read_all(bs, topic, 1, "read_uncommitted", expect=3)] == [b"before", b"in-txn", b"after"]
    p.commit_transaction(30)
    # the COMMIT marker follows the EndTxn answer (as with Kafka): the LSO moves once it is written
    wait_until(lambda: end_offsets(bs, topic, 1, 1) == [4], 10, what="the LSO after commit")
    assert [r[3] for r in read_all(bs, topic, 1, "read_committed", expect=3)] == [b"before", b"in-txn", b"after"]


def test_fetch_returns_aborted_transactions(broker):
    bs = broker.bootstrap
    topic = create_topic(bs, unique("ab"), 1)
    tid = unique("tid")
    p = txn_producer(bs, tid)
    transaction(p, topic, [(None, b"x%d" % i, 0) for i in range(5)], commit=False)
    transaction(p, topic, [(None, b"ok", 0)])
    wait_until(lambda: end_offsets(bs, topic, 1, 1) == [8], 10, what="the COMMIT marker")
    rc = wire.fetch_part(wire.fetch(bs, topic, 0, 0, isolation_level=1))
    ru = wire.fetch_part(wire.fetch(bs, topic, 0, 0, isolation_level=0))
    batches = list(iter_batches(bytes(rc["records"])))
    pid = batches[0].producer_id
    assert rc["aborted_transactions"] == [{"producer_id": pid, "first_offset": 0}]
    assert ru["aborted_transactions"] is None
    # the data batch, the ABORT marker at 5, the committed batch at 6, the COMMIT marker at 7
    assert [(b.base_offset, b.is_control, b.is_transactional) for b in batches] == \
        [(0, False, True), (5, True, True), (6, False, True), (7, True, True)]
    assert [control_type(bytes(rc["records"])[b.position:b.position + b.size]) for b in batches if b.is_control] \
        == [CONTROL_ABORT, CONTROL_COMMIT]
    # fetching from past the aborted transaction does not list it
    rc2 = wire.fetch_part(wire.fetch(bs, topic, 0, 6, isolation_level=1))
    assert rc2["aborted_transactions"] == []


def test_second_producer_fences_the_first(broker):
    bs = broker.bootstrap
    topic = create_topic(bs, unique("fence"), 2)
    tid = unique("tid")
    p1 = txn_producer(bs, tid)
    p1.begin_transaction()
    p1.produce(topic, value=b"from-p1", partition=0)
    p1.flush(10)
    # the new producer aborts p1's open transaction and bumps the epoch
    p2 = txn_producer(bs, tid)
    transaction(p2, topic, [(None, b"from-p2", 1)])
    with pytest.raises(KafkaException) as e:
        p1.commit_transaction(30)
    assert e.value.args[0].fatal() or "fenced" in str(e.value).lower()
    assert [r[3] for r in read_all(bs, topic, 2, "read_committed", expect=1)] == [b"from-p2"]
    assert values(read_all(bs, topic, 2, "read_uncommitted", expect=2)) == [b"from-p1", b"from-p2"]


def _offset_fetch(bs, group, topic, partitions, require_stable):
    r = wire.call(bs, 9, 7, {"group_id": group, "require_stable": require_stable,
                             "topics": [{"name": topic, "partition_indexes": list(range(partitions))}]})
    return [(p["committed_offset"], p["error_code"]) for p in r["topics"][0]["partitions"]]


def test_transactional_offsets_are_pending_until_commit(broker):
    bs = broker.bootstrap
    topic = create_topic(bs, unique("off"), 2)
    group = unique("grp")
    c = Consumer({"bootstrap.servers": bs, "group.id": group})
    p = txn_producer(bs, unique("tid"))
    for outcome in ("abort", "commit"):
        p.begin_transaction()
        p.produce(topic, value=b"v", partition=0)
        p.send_offsets_to_transaction([TopicPartition(topic, 0, 7), TopicPartition(topic, 1, 9)],
                                      c.consumer_group_metadata(), 30)
        p.flush(10)
        # pending: not visible as committed; require_stable says UNSTABLE_OFFSET_COMMIT (88)
        assert _offset_fetch(bs, group, topic, 2, False) == [(-1, 0), (-1, 0)]
        assert _offset_fetch(bs, group, topic, 2, True) == [(-1, 88), (-1, 88)]
        if outcome == "abort":
            p.abort_transaction(30)
            wire_ok = lambda: _offset_fetch(bs, group, topic, 2, True) == [(-1, 0), (-1, 0)]  # noqa: E731
        else:
            p.commit_transaction(30)
            wire_ok = lambda: _offset_fetch(bs, group, topic, 2, True) == [(7, 0), (9, 0)]  # noqa: E731
        wait_until(wire_ok, 10, what="offsets after %s" % outcome)
    assert c.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], 10)[1].offset == 9
    c.close()


def run_eos_pipeline(bs, inp, out, group, tid, n, abort_rounds=(1,), partitions=3):
    """Consume ``inp`` (read_committed), produce upper-cased values to ``out`` and commit the
    consumer's positions in the same transaction; the rounds in ``abort_rounds`` are aborted and
    the consumer rewound to its committed offsets, so they are processed again."""
    c = Consumer({"bootstrap.servers": bs, "group.id": group, "isolation.level": "read_committed",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest", "session.timeout.ms": 10000})
    c.subscribe([inp])
    p = txn_producer(bs, tid)
    done = 0
    rnd = 0
    deadline = time.monotonic() + 120
    try:
        while done < n:
            assert time.monotonic() < deadline, "pipeline stalled at %d/%d" % (done, n)
            msgs = [m for m in c.consume(200, 1.0) if not m.error()]
            if not msgs:
                continue
            p.begin_transaction()
            for m in msgs:
                p.produce(out, key=m.key(), value=m.value().upper(), partition=m.partition())
            p.send_offsets_to_transaction(c.position(c.assignment()), c.consumer_group_metadata(), 30)
            if rnd in abort_rounds:
                # sent before the abort: librdkafka purges what is still queued when it aborts,
                # and the aborted records must be in the log for read_uncommitted readers
                p.flush(30)
                p.abort_transaction(30)
                # rewind to what the group committed (the aborted offsets never were)
                for tp in c.committed(c.assignment(), 30):
                    c.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else 0))
            else:
                p.commit_transaction(30)
                done += len(msgs)
            rnd += 1
    finally:
        c.close()
    return rnd


def test_consume_transform_produce_exactly_once(broker):
    bs = broker.bootstrap
    inp = create_topic(bs, unique("in"), 3)
    out = create_topic(bs, unique("out"), 3)
    n = 600
    plain = Producer({"bootstrap.servers": bs, "linger.ms": 20})
    for i in range(n):
        plain.produce(inp, key=b"%d" % i, value=b"rec-%d" % i, partition=i % 3)
    plain.flush(30)
    group = unique("eos")
    run_eos_pipeline(bs, inp, out, group, unique("tid"), n, abort_rounds=(0, 2))
    got = read_all(bs, out, 3, "read_committed", expect=n)
    assert sorted(r[3] for r in got) == sorted(b"REC-%d" % i for i in range(n))
    # the group's committed offsets are the input's end: everything consumed exactly once
    c = Consumer({"bootstrap.servers": bs, "group.id": group})
    committed = c.committed([TopicPartition(inp, p) for p in range(3)], 10)
    c.close()
    assert [tp.offset for tp in committed] == end_offsets(bs, inp, 3, 0)
    # the aborted rounds are visible to read_uncommitted readers only
    assert len(read_all(bs, out, 3, "read_uncommitted", expect=n + 1)) > n
