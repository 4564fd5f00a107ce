"""The Go scenario programs (built once per session) and the brokers they run against: one
broker and one 3-broker cluster (ZooKeeper + 3 ``pykbroker serve``, replication factor 3,
``min.insync.replicas=2``) for the whole directory (package scope), as tests/node does.  Each
module's scenarios use topic, group and transactional id names of their own (a random prefix),
so franz-go, sarama and kafka-go share them."""
import pytest

from tests.client_brokers import single_broker, three_brokers

from . import gobuild


@pytest.fixture(scope="session")
def gobin(tmp_path_factory):
    """The directory of the built compat/go scenario programs (franzgo, sarama, kafkago)."""
    if gobuild.go_binary() is None:
        pytest.skip("no Go toolchain (go on PATH or /usr/local/go/bin/go)")
    return gobuild.build_or_fail(tmp_path_factory.mktemp("gobin"))


@pytest.fixture(scope="package")
def single(tmp_path_factory):
    """One broker: {"bootstrap", "rf": 1}."""
    with single_broker(tmp_path_factory, "go-single") as b:
        yield {"bootstrap": b.bootstrap, "rf": 1}


@pytest.fixture(scope="package")
def cluster(tmp_path_factory):
    """Three brokers: {"bootstrap", "rf": 3, "cluster": the Cluster (kill/start)}."""
    with three_brokers(tmp_path_factory, "go-cluster") as c:
        yield {"bootstrap": c.bootstrap_servers, "rf": 3, "cluster": c}


@pytest.fixture(params=["single", "cluster"])
def target(request):
    """Each test once on the single broker and once on the cluster."""
    return request.getfixturevalue(request.param)
