"""Transactions on a 3-broker cluster: the transaction coordinator (leader of the id's
``__transaction_state`` partition) sends WriteTxnMarkers to the leaders of the transaction's other
partitions; a read_committed consumer sees exactly the committed records, from every partition.
Real processes, confluent-kafka on both sides."""
from __future__ import annotations

import signal
import time
import uuid

import pytest

zkserver = pytest.importorskip("pykbroker.cluster.zkserver")
pytest.importorskip("kazoo.client")
ck = pytest.importorskip("confluent_kafka")
if zkserver.available() is not None:
    pytest.skip(zkserver.available(), allow_module_level=True)

from pykbroker.testing import wire  # noqa: E402
from pykbroker.testing.cluster import Cluster  # noqa: E402

OVERRIDES = {"zookeeper.session.timeout.ms": "6000", "default.replication.factor": "3",
             "min.insync.replicas": "2", "offsets.topic.num.partitions": "3",
             "transaction.state.log.num.partitions": "3", "transaction.state.log.min.isr": "2",
             "group.initial.rebalance.delay.ms": "0"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with Cluster(3, str(tmp_path_factory.mktemp("txc")), overrides=OVERRIDES, zk_tick_time=500) as c:
        yield c


def _create(cluster, topic, partitions=3):
    with wire.WireClient(("127.0.0.1", cluster.brokers[0].port)) as c:
        r = c.request(19, 5, {"topics": [{"name": topic, "num_partitions": partitions, "replication_factor": 3,
                                          "assignments": [], "configs": []}],
                              "timeout_ms": 30000, "validate_only": False})
        assert r["topics"][0]["error_code"] == 0, r
        m = wire.wait_for_topic(c, topic, partitions, timeout=30)
    return {p["partition_index"]: p["leader_id"] for p in m["topics"][0]["partitions"]}


def _read_committed(cluster, topic, partitions, expect, timeout=60.0):
    c = ck.Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "rc-" + uuid.uuid4().hex[:6],
                     "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                     "enable.auto.commit": False})
    c.assign([ck.TopicPartition(topic, p, 0) for p in range(partitions)])
    got = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < expect and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value().decode())
        # nothing more arrives (aborted records stay invisible)
        end = time.monotonic() + 2.0
        while time.monotonic() < end:
            m = c.poll(0.2)
            if m is not None and not m.error():
                got.append(m.value().decode())
    finally:
        c.close()
    return got


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
