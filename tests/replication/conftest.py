import pytest

from pykbroker.testing.memory_cluster import ClusterRunner

# Short lag/backoff so ISR changes and reconnections happen within a test's patience; everything
# else keeps Kafka's defaults.
CLUSTER_CONFIG = {
    "replica.lag.time.max.ms": "4000",   # 2 s dropped live followers on a loaded 2-core machine
    "replica.fetch.backoff.ms": "200",
    "replica.fetch.wait.max.ms": "200",
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "3",
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.num.partitions": "3",
    "transaction.state.log.replication.factor": "3",
    "default.replication.factor": "3",
    "log.segment.bytes": str(1 << 20),
}


@pytest.fixture
def cluster(tmp_path):
    """Three in-process brokers (ids 1-3) sharing an in-memory controller."""
    with ClusterRunner(str(tmp_path), 3, CLUSTER_CONFIG) as c:
        yield c
