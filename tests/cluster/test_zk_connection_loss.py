"""Admin writes across a lost ZooKeeper connection: a broker whose ZooKeeper link drops while its
write is in flight makes the write again once reconnected (Kafka's ZooKeeper client retries a
request until connected), and tells its own earlier write from someone else's when the lost one
had been applied.  The client (confluent-kafka's AdminClient) sees success, not
UNKNOWN_SERVER_ERROR, and the result is what it asked for.

The broker reaches ZooKeeper through a relay (``Cluster(zookeeper_relay=True)``) armed to cut the
connection exactly at the broker's next multi-op (ZooKeeper op 14: topic creation, new partitions
and config changes are each one multi-op), either before ZooKeeper sees it ("lost") or after
ZooKeeper applied it with the answer dropped ("applied").  ``relay.cuts`` proves the cut struck.
"""
from __future__ import annotations

import uuid

import pytest

from tests import needs

needs.module("kazoo.client")
needs.require_zookeeper(allow_module_level=True)
ck = needs.module("confluent_kafka")
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,  # noqa: E402
                                   NewPartitions, NewTopic)

from pykbroker.local.cluster import Cluster  # noqa: E402

MULTI = 14   # ZooKeeper's op code of a multi-op request
CASES = [pytest.param(False, id="lost"), pytest.param(True, id="applied")]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    overrides = {"zookeeper.session.timeout.ms": "6000", "offsets.topic.replication.factor": "1",
                 "group.initial.rebalance.delay.ms": "0"}
    with Cluster(1, str(tmp_path_factory.mktemp("zkloss")), overrides=overrides, zk_tick_time=500,
                 zookeeper_relay=True) as c:
        c.wait_registered()
        yield c


@pytest.fixture
def admin(cluster):
    return AdminClient({"bootstrap.servers": cluster.bootstrap_servers})


def _cut_around(relay, applied, fn):
    before = relay.cuts
    relay.cut_on_request({MULTI}, applied=applied)
    try:
        return fn()
    finally:
        relay.cut_on_request((), applied=False)   # disarm if it never struck
        assert relay.cuts == before + 1, "the broker's multi-op was not cut (no write in flight?)"


def _roundtrip(cluster, topic, partitions):
    """Every partition takes a record and gives it back (confluent-kafka)."""
    p = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    sent = {i: b"v-%d-%s" % (i, uuid.uuid4().hex[:6].encode()) for i in range(partitions)}
    for i, v in sent.items():
        p.produce(topic, v, partition=i)
    assert p.flush(30) == 0
    c = ck.Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "g-" + topic,
                     "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.assign([ck.TopicPartition(topic, i, 0) for i in range(partitions)])
    got = {}
    try:
        for _ in range(60):
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got[m.partition()] = m.value()
            if len(got) == partitions:
                break
    finally:
        c.close()
    assert got == sent


@pytest.mark.parametrize("applied", CASES)
def test_create_topic_across_a_lost_connection(cluster, admin, applied):
    topic = "zkloss-create-%s" % ("applied" if applied else "lost")

    def create():
        admin.create_topics([NewTopic(topic, 3, 1)], operation_timeout=30)[topic].result(timeout=60)
    _cut_around(cluster.zk_relay, applied, create)   # raises KafkaException on an error answer
    md = admin.list_topics(topic, timeout=10).topics[topic]
    assert md.error is None and len(md.partitions) == 3
    _roundtrip(cluster, topic, 3)
    # a second create is still refused: only the broker's own lost attempt counts as its own
    with pytest.raises(ck.KafkaException) as e:
        admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(timeout=30)
    assert e.value.args[0].code() == ck.KafkaError.TOPIC_ALREADY_EXISTS


@pytest.mark.parametrize("applied", CASES)
def test_create_partitions_across_a_lost_connection(cluster, admin, applied):
    topic = "zkloss-parts-%s" % ("applied" if applied else "lost")
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=60)
    _cut_around(cluster.zk_relay, applied,
                lambda: admin.create_partitions([NewPartitions(topic, 4)], operation_timeout=30)[topic].result(timeout=60))
    md = admin.list_topics(topic, timeout=10).topics[topic]
    assert len(md.partitions) == 4
    _roundtrip(cluster, topic, 4)


@pytest.mark.parametrize("applied", CASES)
def test_alter_topic_config_across_a_lost_connection(cluster, admin, applied):
    topic = "zkloss-config-%s" % ("applied" if applied else "lost")
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=60)
    res = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.ms", "123456789", incremental_operation=AlterConfigOpType.SET)])
    _cut_around(cluster.zk_relay, applied,
                lambda: list(admin.incremental_alter_configs([res]).values())[0].result(timeout=60))
    got = list(admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)]).values())[0].result(timeout=30)
    assert got["retention.ms"].value == "123456789"
