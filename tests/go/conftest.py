"""The Go scenario programs (built once per session) and the brokers they run against: one
broker and one 3-broker cluster (ZooKeeper + 3 ``pykbroker serve``, replication factor 3,
``min.insync.replicas=2``) for the whole directory (package scope), as tests/node does.  Each
module's scenarios use topic, group and transactional id names of their own (a random prefix),
so franz-go, sarama and kafka-go share them."""
import pytest

from tests import needs

from pykbroker.local.broker_process import BrokerProcess

from . import gobuild

OVERRIDES = {"group.initial.rebalance.delay.ms": "0"}
CLUSTER_OVERRIDES = {**OVERRIDES, "zookeeper.session.timeout.ms": "6000", "default.replication.factor": "3",
                     "min.insync.replicas": "2", "offsets.topic.num.partitions": "6",
                     "transaction.state.log.num.partitions": "6", "transaction.state.log.min.isr": "2"}


@pytest.fixture(scope="session")
def gobin(tmp_path_factory):
    """The directory of the built compat/go scenario programs (franzgo, sarama, kafkago)."""
    if gobuild.go_binary() is None:
        pytest.skip("no Go toolchain (go on PATH or /usr/local/go/bin/go)")
    try:
        return gobuild.build(tmp_path_factory.mktemp("gobin"))
    except Exception as e:   # a failed build fails every test (never a skip)
        pytest.fail(str(e), pytrace=False)


@pytest.fixture(scope="package")
def single(tmp_path_factory):
    """One broker: {"bootstrap", "rf": 1}."""
    b = BrokerProcess(str(tmp_path_factory.mktemp("go-single")), OVERRIDES)
    b.start()
    yield {"bootstrap": b.bootstrap, "rf": 1}
    b.stop()


@pytest.fixture(scope="package")
def cluster(tmp_path_factory):
    """Three brokers: {"bootstrap", "rf": 3, "cluster": the Cluster (kill/start)}."""
    needs.module("kazoo.client")
    needs.require_zookeeper()
    from pykbroker.local.cluster import Cluster
    with Cluster(3, str(tmp_path_factory.mktemp("go-cluster")), overrides=CLUSTER_OVERRIDES,
                 zk_tick_time=500) as c:
        yield {"bootstrap": c.bootstrap_servers, "rf": 3, "cluster": c}


@pytest.fixture(params=["single", "cluster"])
def target(request):
    """Each test once on the single broker and once on the cluster."""
    return request.getfixturevalue(request.param)
