"""One broker and one 3-broker cluster for the whole directory (package scope): each client's
module runs its Node processes against them, with topic and group names of its own."""
import pytest

from tests import needs

from pykbroker.local.broker_process import BrokerProcess

OVERRIDES = {"group.initial.rebalance.delay.ms": "0"}
# as tests/go: replication factor 3, min.insync.replicas 2, internal topics small
CLUSTER_OVERRIDES = {**OVERRIDES, "zookeeper.session.timeout.ms": "6000", "default.replication.factor": "3",
                     "min.insync.replicas": "2", "offsets.topic.num.partitions": "6",
                     "transaction.state.log.num.partitions": "6", "transaction.state.log.min.isr": "2"}


@pytest.fixture(scope="package")
def node_broker(tmp_path_factory):
    b = BrokerProcess(str(tmp_path_factory.mktemp("node-single")), OVERRIDES)
    b.start()
    yield b
    b.stop()


@pytest.fixture(scope="package")
def node_cluster(tmp_path_factory):
    needs.module("kazoo.client")
    needs.require_zookeeper()
    from pykbroker.local.cluster import Cluster
    with Cluster(3, str(tmp_path_factory.mktemp("node-cluster")), overrides=CLUSTER_OVERRIDES,
                 zk_tick_time=500) as c:
        yield c
