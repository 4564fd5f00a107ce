"""The brokers the client matrices of tests/go and tests/node run against, set up once per
directory: one ``pykbroker serve`` and one 3-broker cluster (ZooKeeper + 3 ``pykbroker serve``,
replication factor 3, ``min.insync.replicas=2``, the internal topics small so the cluster is
up quickly)."""
from __future__ import annotations

import contextlib

from tests import needs

from pykbroker.local.broker_process import BrokerProcess

# a group forms at once: the scenarios time their members, not the broker's grace delay
OVERRIDES = {"group.initial.rebalance.delay.ms": "0"}
CLUSTER_OVERRIDES = {**OVERRIDES, "zookeeper.session.timeout.ms": "6000", "default.replication.factor": "3",
                     "min.insync.replicas": "2", "offsets.topic.num.partitions": "6",
                     "transaction.state.log.num.partitions": "6", "transaction.state.log.min.isr": "2"}


@contextlib.contextmanager
def single_broker(tmp_path_factory, name: str):
    """One broker process in a fresh directory named ``name``, stopped on exit."""
    b = BrokerProcess(str(tmp_path_factory.mktemp(name)), OVERRIDES)
    b.start()
    try:
        yield b
    finally:
        b.stop()


@contextlib.contextmanager
def three_brokers(tmp_path_factory, name: str):
    """The 3-broker cluster (pykbroker.local.cluster.Cluster); skips without kazoo or ZooKeeper."""
    needs.module("kazoo.client")
    needs.require_zookeeper()
    from pykbroker.local.cluster import Cluster
    with Cluster(3, str(tmp_path_factory.mktemp(name)), overrides=CLUSTER_OVERRIDES, zk_tick_time=500) as c:
        yield c
