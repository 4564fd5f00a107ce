"""kafkajs (compat/node/kafkajs.js) against pykbroker and Apache Kafka: the same scenarios, the same
observations.  The admin scenario's report (createTopics twice, metadata, describeConfigs values
and sources, the non-incremental alterConfigs, createPartitions and a shrink, deleteTopicRecords
on a delete and a compacted topic, offsets by timestamp, listGroups / describeGroups,
setOffsets / fetchOffsets, deleteGroups, deleteTopics, an unknown topic's configs) must be equal;
transactions committed and aborted must read back the same; consume-transform-produce with
sendOffsets and an aborted round must be exactly once on both.  Skipped (a failure in CI) without
node/npm or compat/node's packages."""
from __future__ import annotations

import os

import pytest

from tests.node import noderun
from tests.node.noderun import packages  # noqa: F401 (autouse: waits for the packages)

noderun.skip_module_unless_usable()


def _run(t, scenarios, prefix):
    rep = noderun.start("kafkajs.js", t.bootstrap, scenarios, prefix=prefix, rf=1, records=120).report()
    return {name: noderun.scenario(rep, name) for name in scenarios}


def test_admin_client_same_report(both):
    p, k = both.at_once(lambda t: _run(t, ["admin"], "diff-kjs-adm")["admin"])
    assert p == k
    assert p["delete_records_compacted_error"] == ["POLICY_VIOLATION"] and p["partitions_after_create"] == 5, p


def test_transactions_same_reads(both):
    def observe(t):
        r = _run(t, ["txn", "eos"], "diff-kjs-txn")
        eos = r["eos"]
        return {"txn": r["txn"], "eos_exactly_once": sorted(eos["output"]) == sorted("out-in-%d" % i for i in range(120)),
                "eos_aborted_visible_uncommitted": eos["output_read_uncommitted"] - len(eos["output"]),
                "eos_committed_at_end": eos["committed_at_end"], "eos_problems": eos["problems"]}
    p, k = both.at_once(observe)
    assert p == k
    assert p["eos_exactly_once"] and p["eos_aborted_visible_uncommitted"] == 10, p


class _KafkaCluster:
    """A KafkaClusterOracle seen as tests/client_brokers.run_killing_a_leader expects a cluster:
    ``brokers[0].bootstrap``, ``kill(node)`` (SIGKILL), ``start(node)`` (its restart)."""

    def __init__(self, k):
        self.k = k
        self.brokers = k.nodes
        self.bootstrap_servers = k.bootstrap

    def kill(self, node_id):
        self.k.node(node_id).kill()

    def start(self, node_id):
        self.k.restart(node_id)


@pytest.mark.skipif(os.environ.get("PYKBROKER_CHAOS_LONG") != "1",
                    reason="three Kafka JVMs for one client fault (~2 min): PYKBROKER_CHAOS_LONG=1 "
                           "(compat/node/README.md records the run)")
def test_leader_kill_send_without_a_partition_on_kafka_too(tmp_path):
    """kafkajs's leaderkill scenario (tests/node/test_kafkajs.py) against a 3-node Apache Kafka
    4.4 cluster (KRaft, RF 3, min.insync.replicas=2), partition 0's leader killed -9 and
    restarted: the same verdict as on pykbroker (every acknowledged record once, in order, at
    its offset), and kafkajs leaves partition 0 out of a resolved send there too (the records
    the scenario had to send again): a kafkajs fault, not pykbroker's."""
    import uuid

    from tests.client_brokers import run_killing_a_leader
    from .conftest import _load_oracle
    oracle = _load_oracle()
    k = oracle.KafkaClusterOracle(tmp_path / "kafka3", 3, {
        "broker.session.timeout.ms": "4000", "broker.heartbeat.interval.ms": "500",
        "default.replication.factor": "3", "min.insync.replicas": "2", "offsets.topic.num.partitions": "6",
        "group.initial.rebalance.delay.ms": "0"})
    try:
        k.start()
    except Exception as e:   # never a skip: a missing oracle is a failure
        pytest.fail("the Apache Kafka cluster could not be started: %s" % e, pytrace=False)
    try:
        prefix = "kjs-kill-%s" % uuid.uuid4().hex[:6]
        args = [noderun.node_binary(), str(noderun.PACKAGE / "kafkajs.js"), "--brokers", k.bootstrap,
                "--scenarios", "leaderkill", "--prefix", prefix, "--rf", "3", "--records", "3000", "--pace", "10",
                "--timeout", "200"]
        r = noderun.scenario(run_killing_a_leader(_KafkaCluster(k), args, prefix + "-idem"), "leaderkill")
    finally:
        k.stop()
    assert r["verdict"] == {"produced": 3000, "acknowledged": 3000, "read": 3000, "duplicates": 0, "missing": 0,
                            "out_of_order": 0, "offset_errors": 0}, r
    assert r["partition0_longest_ack_gap_ms"] >= 2000 and r["resent_after_kafkajs_dropped"] > 0, r
