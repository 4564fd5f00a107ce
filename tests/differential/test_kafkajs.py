"""kafkajs (compat/node/kafkajs.js) against pykbroker and Apache Kafka: the same scenarios, the same
observations.  Two kafkajs processes per side, the two sides at once (client_runs.py), so the
module takes its longest process's time.

- ``admin``: the report (createTopics twice, metadata, describeConfigs values and sources, the
  non-incremental alterConfigs, createPartitions and a shrink, deleteTopicRecords on a delete and
  a compacted topic, offsets by timestamp, listGroups / describeGroups, setOffsets /
  fetchOffsets, deleteGroups, deleteTopics, an unknown topic's configs) must be equal;
- ``txn``/``eos``: transactions committed and aborted must read back the same;
  consume-transform-produce with sendOffsets and an aborted round must be exactly once on both;
- ``roundtrip``: the codecs kafkajs has without native modules (none, gzip, snappy through
  kafkajs-snappy) with the shared data set (null/empty/binary keys and values, 6 KiB values,
  duplicate/empty/non-ASCII/binary headers, out-of-order CreateTime timestamps): the report
  (byte-exact reads at the offsets the produce answers named, the base offsets of the three
  sends, the batches decompressed) and what the broker stored, read with raw Fetches (every
  record's offset, key, value, headers, timestamp pattern, its batch's codec and timestamp
  type): equal;
- ``idempotent``: kafkajs's idempotent producer, every record once, in order, sequence = offset,
  one producer id (its number differs between two brokers: compared as a count), the same records
  stored at the same offsets;
- ``group``: kafkajs's consumer group (its one assigner, RoundRobinAssigner, eager): member A
  processes a third of each partition, commits and leaves; B resumes from A's commits with every
  partition, C joins (a rebalance) and the two share the rest.  Equal: every record once, A's
  share and commits, B's first assignment, the split of the three partitions between B and C as
  sizes (which member gets two follows the random member ids' order), the committed offsets at
  the end, and the broker's view of the group afterwards.  How many records B and C each
  processed is timing.

Skipped (a failure in CI) without node/npm or compat/node's packages."""
from __future__ import annotations

import os

import pytest

from tests.node import noderun
from tests.node.noderun import packages  # noqa: F401 (autouse: waits for the packages)

from .client_runs import assert_stored_codecs, attempt, group_view, run_jobs, same_roundtrip, side_results, stored
from .helpers import explain

noderun.skip_module_unless_usable()

RECORDS = 120
# the scenarios of each kafkajs process (a side's two run at once): ~8 s each here
PROCESSES = (["admin", "group"], ["roundtrip", "idempotent", "txn", "eos"])


def _observe(t, scenarios):
    """One kafkajs process running ``scenarios``: {name: observations, or the failure kept for
    the test reading it}, with what the broker holds read after the process ended."""
    rep = noderun.start("kafkajs.js", t.bootstrap, scenarios, prefix="diff-kjs", rf=1, records=RECORDS).report()
    post = {"roundtrip": lambda r: {"report": r, "stored": {c: stored(t, x["topic"]) for c, x in r.items()}},
            "idempotent": lambda r: _idempotent(t, r),
            "group": lambda r: _group(r, group_view(t, "diff-kjs-grp-g", "diff-kjs-grp"))}
    return {name: attempt(lambda name=name: post.get(name, lambda r: r)(noderun.scenario(rep, name)))
            for name in scenarios}


def _idempotent(t, r):
    r["producer_ids"] = len(r["producer_ids"])   # the broker's number, one of them
    # kafkajs stamps these records when it sends them: their timestamps are the run's clock
    return {"report": r, "stored": stored(t, "diff-kjs-idem", timestamps=False)}


def _group(r, view):
    a, b, c = (r["members"][m] for m in "ABC")
    c_first = next((x for x in c["assignments"] if x), [])
    return {"problems": r["problems"], "duplicates": r["duplicates"], "missing": r["missing"],
            "first_processed": a["per"], "committed_by_first": r["committed_by_first"],
            "a_assignments": a["assignments"], "b_first_assignment": b["assignments"][0],
            "b_rejoined": b["joins"] >= 2,
            # C came while B held all three (eager: B gave them all up and rejoined): the two
            # shared them, one got two
            "split_after_c_joined": sorted([len(b["assignments"][1]) if b["joins"] >= 2 else -1, len(c_first)]),
            "processed": a["processed"] + b["processed"] + c["processed"],
            "committed_at_end": r["committed_at_end"], "broker_view": view}


@pytest.fixture(scope="module")
def runs(both):
    """Every scenario of the module, against each broker, at once: {name: result} per side."""
    def side(t):
        procs = run_jobs({str(i): (lambda names=names: _observe(t, names)) for i, names in enumerate(PROCESSES)})
        # a process that failed as a whole fails each of its scenarios' tests
        return {name: (procs[str(i)][name] if isinstance(procs[str(i)], dict) else procs[str(i)])
                for i, names in enumerate(PROCESSES) for name in names}
    return both.at_once(side)


def test_admin_client_same_report(runs):
    p, k = side_results(runs, "admin")
    assert p == k, explain(p, k)
    assert p["delete_records_compacted_error"] == ["POLICY_VIOLATION"] and p["partitions_after_create"] == 5, p


def _transactions(txn, eos):
    return {"txn": txn, "eos_exactly_once": sorted(eos["output"]) == sorted("out-in-%d" % i for i in range(RECORDS)),
            "eos_aborted_visible_uncommitted": eos["output_read_uncommitted"] - len(eos["output"]),
            "eos_committed_at_end": eos["committed_at_end"], "eos_problems": eos["problems"]}


def test_transactions_same_reads(runs):
    (pt, kt), (pe, ke) = side_results(runs, "txn"), side_results(runs, "eos")
    p, k = _transactions(pt, pe), _transactions(kt, ke)
    assert p == k, explain(p, k)
    assert p["eos_exactly_once"] and p["eos_aborted_visible_uncommitted"] == 10, p


def test_produce_consume_codecs(runs):
    p, k = side_results(runs, "roundtrip")
    rep = same_roundtrip(p, k)
    assert sorted(rep) == ["gzip", "none", "snappy"], rep
    assert all(r["mismatches"] == [] and r["read"] == RECORDS and r["offsets_dense"] for r in rep.values()), rep
    # kafkajs's round trip is not idempotent: no producer id
    assert_stored_codecs(p["stored"], {"none": 0, "gzip": 1, "snappy": 2}, RECORDS, idempotent=False)


def test_idempotent_producer(runs):
    p, k = side_results(runs, "idempotent")
    assert p == k, explain(p, k)
    r = p["report"]
    assert r["read"] == RECORDS * 10 and r["producer_ids"] == 1 and r["producer_epochs"] == [0], r
    assert (r["duplicates"], r["missing"], r["out_of_order"], r["offset_errors"], r["sequence_errors"]) == (0, 0, 0, 0, 0), r
    assert all(x[8] for rs in p["stored"].values() for x in rs), "stored without a producer id"


def test_group_rebalance_and_committed_offsets(runs):
    p, k = side_results(runs, "group")
    assert p == k, explain(p, k)
    assert p["problems"] == [] and (p["duplicates"], p["missing"]) == (0, 0) and p["processed"] == RECORDS, p
    assert p["committed_by_first"] == 3 * (RECORDS // 9) and p["b_first_assignment"] == [0, 1, 2], p
    assert p["b_rejoined"] and p["split_after_c_joined"] == [1, 2] and p["committed_at_end"], p
    assert p["broker_view"]["listed"] == [["Empty", "classic", "consumer"]], p


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
