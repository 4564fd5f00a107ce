"""Transactions on a 3-broker cluster: the transaction coordinator (leader of the id's
``__transaction_state`` partition) sends WriteTxnMarkers to the leaders of the transaction's other
partitions; a read_committed consumer sees exactly the committed records, from every partition.
Real processes, confluent-kafka on both sides."""
from __future__ import annotations

import signal
import time
import uuid

import pytest

from tests import needs
from tests.polling import poll_values

needs.module("kazoo.client")
ck = needs.module("confluent_kafka")
needs.require_zookeeper(allow_module_level=True)

from pykbroker.protocol import wire  # noqa: E402
from pykbroker.local.cluster import Cluster  # noqa: E402

from compat.chaos.common import create_replicated_topic  # noqa: E402

OVERRIDES = {"zookeeper.session.timeout.ms": "6000", "default.replication.factor": "3",
             "min.insync.replicas": "2", "offsets.topic.num.partitions": "3",
             "transaction.state.log.num.partitions": "3", "transaction.state.log.min.isr": "2",
             "group.initial.rebalance.delay.ms": "0"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with Cluster(3, str(tmp_path_factory.mktemp("txc")), overrides=OVERRIDES, zk_tick_time=500) as c:
        yield c


def _create(cluster, topic, partitions=3):
    m = create_replicated_topic(cluster, topic, partitions)
    return {p["partition_index"]: p["leader_id"] for p in m["topics"][0]["partitions"]}


def _read_committed(cluster, topic, partitions, expect, timeout=60.0):
    c = ck.Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "rc-" + uuid.uuid4().hex[:6],
                     "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                     "enable.auto.commit": False})
    c.assign([ck.TopicPartition(topic, p, 0) for p in range(partitions)])
    try:
        # then 2 s more: nothing else arrives (aborted records stay invisible)
        return [v.decode() for v in poll_values(c, expect, timeout, settle=2.0)]
    finally:
        c.close()


def _producer(cluster, tid):
    p = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": tid,
                     "transaction.timeout.ms": 60000, "log_level": 2})
    p.init_transactions(60)
    return p


def test_commit_and_abort_across_leaders(cluster):
    topic = "txc-" + uuid.uuid4().hex[:6]
    leaders = _create(cluster, topic)
    assert len(set(leaders.values())) == 3, leaders   # the transaction spans three leaders
    p = _producer(cluster, "tx-" + topic)
    p.begin_transaction()
    for i in range(30):
        p.produce(topic, ("c%d" % i).encode(), partition=i % 3)
    p.commit_transaction(60)
    p.begin_transaction()
    for i in range(30):
        p.produce(topic, ("a%d" % i).encode(), partition=i % 3)
    # Delivered first, so the aborted records are in all three leaders' logs and the abort
    # writes markers there (checked by the LSO below); librdkafka otherwise purges queued records
    # and may send EndTxn while its AddPartitionsToTxn is still being retried.
    assert p.flush(60) == 0
    p.abort_transaction(60)
    p.begin_transaction()
    for i in range(30, 45):
        p.produce(topic, ("c%d" % i).encode(), partition=i % 3)
    p.commit_transaction(60)
    got = _read_committed(cluster, topic, 3, 45)
    assert sorted(got) == sorted("c%d" % i for i in range(45)), got
    # every partition's last stable offset reached its end: no marker is missing
    for part in range(3):
        lso = wire.list_offsets(("127.0.0.1", cluster.broker(leaders[part]).port), topic, part, -1,
                                isolation_level=1)
        hw = wire.list_offsets(("127.0.0.1", cluster.broker(leaders[part]).port), topic, part, -1)
        assert lso["error_code"] == 0 and lso["offset"] == hw["offset"], (part, lso, hw)


def test_transactions_survive_a_coordinator_kill(cluster):
    topic = "txk-" + uuid.uuid4().hex[:6]
    _create(cluster, topic)
    tid = "tk-" + topic
    p = _producer(cluster, tid)
    p.begin_transaction()
    for i in range(20):
        p.produce(topic, ("k%d" % i).encode(), partition=i % 3)
    p.commit_transaction(60)
    # the coordinator of tid: FindCoordinator(key_type=1)
    with wire.WireClient(("127.0.0.1", cluster.brokers[0].port)) as c:
        fc = c.request(10, 3, {"key": tid, "key_type": 1})
    assert fc["error_code"] == 0, fc
    victim = fc["node_id"]
    cluster.kill(victim, signal.SIGKILL)
    try:
        p.begin_transaction()
        for i in range(20, 40):
            p.produce(topic, ("k%d" % i).encode(), partition=i % 3)
        p.commit_transaction(120)   # the new coordinator (another ISR member) takes over
    finally:
        cluster.start(victim)
    got = _read_committed(cluster, topic, 3, 40, timeout=90)
    assert sorted(got) == sorted("k%d" % i for i in range(40)), got


def _coordinator(cluster, key, key_type):
    with wire.WireClient(("127.0.0.1", cluster.brokers[0].port)) as c:
        deadline = time.monotonic() + 30
        while True:
            fc = c.request(10, 3, {"key": key, "key_type": key_type})
            if fc["error_code"] == 0 or time.monotonic() > deadline:
                assert fc["error_code"] == 0, fc
                return fc["node_id"]
            time.sleep(0.2)


def test_offsets_and_produce_verified_by_a_coordinator_on_another_broker(cluster):
    """The group's coordinator, the transaction's coordinator and the output partition's leader
    are three different brokers: TxnOffsetCommit and the transactional Produce are verified
    with the transaction coordinator over the network (AddPartitionsToTxn v4 verify_only), as
    Kafka's brokers do, and a consume-transform-produce round commits output and offsets."""
    src, out = "txv-in-" + uuid.uuid4().hex[:6], "txv-out-" + uuid.uuid4().hex[:6]
    _create(cluster, src, 1)
    out_leaders = _create(cluster, out, 3)
    # ids whose coordinators are on different brokers, and an output partition led by a third
    for _ in range(500):
        tid, group = "txv-" + uuid.uuid4().hex[:8], "txv-g-" + uuid.uuid4().hex[:8]
        t_coord, g_coord = _coordinator(cluster, tid, 1), _coordinator(cluster, group, 0)
        third = [p for p, b in out_leaders.items() if b not in (t_coord, g_coord)]
        if t_coord != g_coord and third:
            break
    else:
        pytest.fail("no transactional id / group pair with coordinators on different brokers")
    out_part = third[0]
    pre = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for i in range(10):
        pre.produce(src, ("r%d" % i).encode(), partition=0)
    assert pre.flush(60) == 0
    c = ck.Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group,
                     "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                     "enable.auto.commit": False})
    p = _producer(cluster, tid)
    try:
        c.subscribe([src])
        msgs = []
        deadline = time.monotonic() + 60
        while len(msgs) < 10 and time.monotonic() < deadline:
            msgs += [m for m in c.consume(10, 1.0) if not m.error()]
        assert [m.value() for m in msgs] == [b"r%d" % i for i in range(10)]
        p.begin_transaction()
        for m in msgs:
            p.produce(out, b"out-" + m.value(), partition=out_part)
        p.send_offsets_to_transaction([ck.TopicPartition(src, 0, msgs[-1].offset() + 1)],
                                      c.consumer_group_metadata(), 60)
        p.commit_transaction(60)
        committed = c.committed([ck.TopicPartition(src, 0)], 30)
        assert committed[0].offset == 10, committed
    finally:
        c.close()
    assert sorted(_read_committed(cluster, out, 3, 10)) == sorted("out-r%d" % i for i in range(10))


def test_unverified_transactional_produce_refused_by_a_leader_away_from_the_coordinator(cluster):
    """KIP-890: a transactional batch for a partition that is not in the producer's transaction
    is refused (INVALID_TXN_STATE, as Kafka answers) even when the partition's leader must ask a
    transaction coordinator on another broker; once AddPartitionsToTxn added it, it is accepted."""
    topic = "txu-" + uuid.uuid4().hex[:6]
    leaders = _create(cluster, topic, 3)
    for _ in range(500):
        tid = "txu-" + uuid.uuid4().hex[:8]
        coord = _coordinator(cluster, tid, 1)
        away = [p for p, b in leaders.items() if b != coord]
        if away:
            break
    part = away[0]
    coord_addr = ("127.0.0.1", cluster.broker(coord).port)
    leader_addr = ("127.0.0.1", cluster.broker(leaders[part]).port)
    with wire.WireClient(coord_addr) as c:
        # the broker FindCoordinator named may not have taken up its __transaction_state
        # partition yet (it learns its leadership from the metadata log as the asked broker
        # did): NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS until it has, as with Kafka
        deadline = time.monotonic() + 30
        while True:
            r = c.request(22, 4, {"transactional_id": tid, "transaction_timeout_ms": 60000,
                                  "producer_id": -1, "producer_epoch": -1})
            if r["error_code"] not in (14, 15, 16) or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert r["error_code"] == 0, r
        pid, epoch = r["producer_id"], r["producer_epoch"]

    def produce(values, seq):
        body = {"transactional_id": tid, "acks": -1, "timeout_ms": 10000, "topic_data": [
            {"name": topic, "partition_data": [{"index": part, "records": wire.make_batch(
                values, pid, epoch, seq, transactional=True)}]}]}
        with wire.WireClient(leader_addr) as c:
            return wire.produce_part(c.request(0, 9, body))

    assert produce([b"early"], 0)["error_code"] == 48   # INVALID_TXN_STATE
    with wire.WireClient(coord_addr) as c:
        r = c.request(24, 3, {"v3_and_below_transactional_id": tid, "v3_and_below_producer_id": pid,
                              "v3_and_below_producer_epoch": epoch,
                              "v3_and_below_topics": [{"name": topic, "partitions": [part]}]})
        assert r["results_by_topic_v3_and_below"][0]["results_by_partition"][0]["partition_error_code"] == 0, r
    ok = produce([b"in-txn"], 0)
    assert ok["error_code"] == 0, ok
    with wire.WireClient(coord_addr) as c:
        r = c.request(26, 3, {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch,
                              "committed": True})
        assert r["error_code"] == 0, r
    assert _read_committed(cluster, topic, 3, 1) == ["in-txn"]
