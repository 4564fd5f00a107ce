"""The compatibility matrix's produce/consume/group scenarios against a 3-broker cluster
(ZooKeeper + 3 pykbroker processes, replication factor 3 by default, min.insync.replicas 2), with
the same real clients and the same assertions as against a single broker: the test functions
are the single-broker modules' own, run here with the cluster's bootstrap list.
"""
from __future__ import annotations

import pytest

from tests import needs

from . import util

needs.module("kazoo.client")
needs.require_zookeeper(allow_module_level=True)

from pykbroker.local.cluster import Cluster  # noqa: E402

from groups.test_group_clients import test_three_consumers_share_topic_exactly_once  # noqa: E402,F401
from .test_aiokafka import test_idempotent_producer_roundtrip  # noqa: E402,F401
from .test_aiokafka import test_produce_consume_roundtrip as test_aiokafka_roundtrip  # noqa: E402,F401
from .test_confluent import test_produce_consume_roundtrip as test_confluent_roundtrip  # noqa: E402,F401
from .test_cross_client import test_one_log_three_decoders  # noqa: E402,F401
from .test_kafka_python import test_produce_consume_roundtrip as test_kafka_python_roundtrip  # noqa: E402,F401
from .test_kcat import test_produce_consume_roundtrip as test_kcat_roundtrip  # noqa: E402,F401

OVERRIDES = {"default.replication.factor": "3", "min.insync.replicas": "2",
             "offsets.topic.replication.factor": "3", "offsets.topic.num.partitions": "5",
             "group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "1000",
             "zookeeper.session.timeout.ms": "6000"}


class _Bootstrap:
    def __init__(self, cluster):
        self.cluster = cluster
        self.bootstrap = cluster.bootstrap_servers


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    saved = util.AK_REPLICATION_FACTOR
    util.AK_REPLICATION_FACTOR = 3
    try:
        with Cluster(3, str(tmp_path_factory.mktemp("matrix-cluster")), overrides=OVERRIDES,
                     zk_tick_time=500) as c:
            yield _Bootstrap(c)
    finally:
        util.AK_REPLICATION_FACTOR = saved


@pytest.fixture(scope="module")
def gbroker(broker):
    return broker


def test_topics_are_replicated_three_times(broker):
    """What the scenarios above ran on: every topic they made has three in-sync replicas."""
    from pykbroker.protocol import wire
    m = wire.metadata(("127.0.0.1", broker.cluster.brokers[0].port), None)
    topics = [t for t in m["topics"] if not t["is_internal"]]
    assert topics
    for t in topics:
        for p in t["partitions"]:
            assert len(p["replica_nodes"]) == 3, (t["name"], p)
