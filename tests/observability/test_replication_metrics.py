"""Under-replicated partitions on a cluster: the scrape-time collector of `--metrics` over three
in-process brokers (pykbroker/testing/memory_cluster.py), rendered by prometheus_client as the
HTTP endpoint renders it."""
from __future__ import annotations

import re

from prometheus_client import generate_latest

from pykbroker.observability.metrics import BrokerMetrics
from pykbroker.testing.memory_cluster import ClusterRunner

from tests.replication.conftest import CLUSTER_CONFIG
from tests.replication.helpers import produce, wait_isr, wait_replicated


def scrape(cluster, node_id) -> str:
    broker = cluster.brokers[node_id]
    metrics = BrokerMetrics(lambda: (broker.replica_manager, broker.group_coordinator))
    # the collector reads the owners' state on their trio thread, as the endpoint does
    return cluster.call(lambda: generate_latest(metrics.registry).decode())


def sample(text, name, **labels) -> float | None:
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            got = dict(re.findall(r'(\w+)="([^"]*)"', line.split(" ")[0]))
            if got == {k: str(v) for k, v in labels.items()}:
                return float(line.rsplit(" ", 1)[1])
    return None


def test_under_replicated_partition_is_reported(tmp_path):
    with ClusterRunner(str(tmp_path), 3, CLUSTER_CONFIG) as cluster:
        cluster.create_topic("urp", 1, 3)
        st = cluster.state("urp", 0)
        leader = st.leader
        produce(cluster, leader, "urp", 0, [b"a", b"b", b"c"])
        wait_replicated(cluster, "urp", 0)
        text = scrape(cluster, leader)
        assert sample(text, "kafka_cluster_partition_underreplicated", topic="urp", partition=0) == 0
        assert sample(text, "kafka_cluster_partition_replicascount", topic="urp", partition=0) == 3
        assert sample(text, "kafka_log_log_logendoffset", topic="urp", partition=0) == 3
        follower = next(r for r in st.replicas if r != leader)
        # a follower's log end offset is exported too (local replicas), but not its partition gauges
        ftext = scrape(cluster, follower)
        assert sample(ftext, "kafka_cluster_partition_underreplicated", topic="urp", partition=0) is None

        cluster.stop_broker(follower)   # the controller drops it from the ISR
        wait_isr(cluster, "urp", 0, [r for r in st.replicas if r != follower], timeout=30)
        text = scrape(cluster, leader)
        assert sample(text, "kafka_cluster_partition_underreplicated", topic="urp", partition=0) == 1
        assert sample(text, "kafka_cluster_partition_insyncreplicascount", topic="urp", partition=0) == 2
        assert sample(text, "kafka_server_replicamanager_underreplicatedpartitions") >= 1
