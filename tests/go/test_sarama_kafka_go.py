"""IBM/sarama and segmentio/kafka-go (the versions in compat/go/go.mod) against pykbroker: each
test once on one broker and once on the 3-broker cluster (replication factor 3,
``min.insync.replicas=2``; the fixtures are tests/go/conftest.py's).  The Go scenario programs
compat/go/cmd/sarama and cmd/kafkago report what the client read back.

- produce/consume with every codec both clients have (none, gzip, snappy, lz4, zstd): keys,
  values (6 KiB too), headers with duplicate keys, out-of-order CreateTime timestamps, read back
  byte-exact per partition at dense offsets.  sarama keeps null and empty keys/values apart;
  kafka-go's reader hands out an empty one as nil (the log keeps the difference), so only its
  bytes are compared;
- sarama's idempotent producer (``Producer.Idempotent``, one request in flight), also across a
  kill -9 of a partition leader on the cluster; kafka-go's Writer (acks all, not idempotent)
  across the same kill: no record it reported written lost, duplicates counted;
- each client's own consumer group (sarama: range, round-robin, sticky; kafka-go: range,
  round-robin) with explicit commits: a member processes a third and leaves, two more resume
  from its commits, every record once;
- sarama's transactional producer (``Producer.Transaction.ID``): two producers' transactions
  open at once and interleaved in the same partitions, some aborted, read back read_committed
  (exactly the committed records, in order, at the offsets the producer was told) and
  read_uncommitted (every record written); then consume-transform-produce with a sarama
  consumer group (AddMessageToTxn with the member's generation, KIP-447; AddOffsetsToTxn with
  the group id alone for transactions retried after an abort), members leaving with an aborted
  transaction and joining while transactions are open: the output read_committed is exactly
  one record per committed input, in order, and the group's offsets end one past each input
  partition's last record.  (sarama sends a transaction's offsets only at CommitTxn, so the
  aborted ones are the output records, never offsets.)

sarama speaks the versions of Kafka 2.8 (its default ``Config.Version``: InitProducerId v4,
AddPartitionsToTxn/AddOffsetsToTxn/EndTxn v3 (transaction version 1, explicit adds),
TxnOffsetCommit v3, Fetch v12), kafka-go mostly older ones: both exercise request versions the newer
clients do not send.
"""
from __future__ import annotations

import uuid

import pytest

from . import gobuild

if gobuild.go_binary() is None:
    pytest.skip("no Go toolchain (go on PATH or /usr/local/go/bin/go): the sarama and kafka-go scenarios "
                "of compat/go need one", allow_module_level=True)


def _prefix(name):
    return "%s-%s" % (name, uuid.uuid4().hex[:6])


# (null keys, empty keys, null values, 6 KiB values, headers) read back from 300 records
SHAPES = {"sarama": (75, 75, 32, 6, 800), "kafkago": (150, 0, 64, 6, 800)}


@pytest.mark.parametrize("client", ["sarama", "kafkago"])
def test_produce_consume_every_codec(gobin, target, client):
    rep = gobuild.run(gobin / client, target["bootstrap"], "roundtrip", prefix=_prefix(client), records=300,
                      rf=target["rf"])
    assert set(rep) == {"none", "gzip", "snappy", "lz4", "zstd"}
    for codec, r in rep.items():
        assert r["mismatches"] == [], (codec, r["mismatches"])
        assert r["produced"] == r["read"] == 300, (codec, r)
        assert (r["null_keys_read"], r["empty_keys_read"], r["null_values_read"], r["big_values_read"],
                r["headers_read"]) == SHAPES[client], (codec, r)


def test_sarama_idempotent_producer(gobin, target):
    rep = gobuild.run(gobin / "sarama", target["bootstrap"], "idempotent", prefix=_prefix("sa-idem"), records=2000,
                      rf=target["rf"])
    assert rep == {"produced": 2000, "read": 2000, "duplicates": 0, "missing": 0, "out_of_order": 0,
                   "offset_errors": 0}


def test_sarama_idempotent_producer_across_a_leader_kill(gobin, cluster):
    """kill -9 of partition 0's leader while sarama's idempotent producer writes 3000 records
    (then the broker's restart): sarama retries through the election; every acknowledged record
    read back once, in produce order per partition, at the offset its produce result named."""
    prefix = _prefix("sa-kill")
    args = [str(gobin / "sarama"), "-brokers", cluster["bootstrap"], "-scenario", "idempotent", "-prefix", prefix,
            "-rf", "3", "-records", "3000", "-pace", "2ms", "-v"]
    rep = gobuild.run_killing_a_leader(cluster["cluster"], args, prefix + "-idem")
    assert rep == {"produced": 3000, "read": 3000, "duplicates": 0, "missing": 0, "out_of_order": 0,
                   "offset_errors": 0}


def test_kafka_go_writer_across_a_leader_kill(gobin, cluster):
    """kill -9 of partition 0's leader while kafka-go's Writer (RequiredAcks all, asynchronous,
    retrying what it calls temporary errors, metadata refreshed each second) writes 3000 records
    to 3 partitions, then the broker's restart: every record kafka-go reported as written is read
    back, at the offset kafka-go reported.  kafka-go is not idempotent: a batch retried after a
    lost answer may be in the log twice (allowed, counted, printed), a loss is not."""
    prefix = _prefix("kg-kill")
    args = [str(gobin / "kafkago"), "-brokers", cluster["bootstrap"], "-scenario", "acks", "-prefix", prefix,
            "-rf", "3", "-records", "3000", "-pace", "2ms", "-timeout", "240s", "-v"]
    rep = gobuild.run_killing_a_leader(cluster["cluster"], args, prefix + "-acks")
    print("kafka-go across a leader kill: %d acked, %d failed, %d duplicates in the log, %d failed records in "
          "the log, errors %s" % (rep["acked"], rep["failed"], rep["duplicates"], rep["failed_in_log"], rep["errors"]))
    assert rep["attempted"] == 3000 and rep["acked"] + rep["failed"] == 3000, rep
    assert rep["acked"] >= 1500, rep   # the other partitions and partition 0 after the election
    assert (rep["missing"], rep["offset_errors"]) == (0, 0), rep
    # the log holds exactly what was acknowledged, plus retried copies and failed-but-written records
    assert rep["read"] == sum(rep["log_end_offsets"]) == rep["acked"] + rep["duplicates"] + rep["failed_in_log"], rep


@pytest.mark.parametrize("client,balancer", [("sarama", "range"), ("sarama", "roundrobin"), ("sarama", "sticky"),
                                             ("kafkago", "range"), ("kafkago", "roundrobin")])
def test_group_commits_resume_across_members(gobin, target, client, balancer):
    rep = gobuild.run(gobin / client, target["bootstrap"], "group", prefix=_prefix(client), records=300,
                      balancer=balancer, rf=target["rf"])
    assert rep["problems"] == [], rep
    assert (rep["duplicates"], rep["missing"]) == (0, 0), rep
    assert rep["first_member_processed"] >= 100 and rep["first_member_processed"] + rep["later_members_processed"] == 300
    assert rep["committed_total"] == 300, rep   # the group's offsets at the end offsets
    if client == "kafkago":
        assert rep["committed"] == {"0": 100, "1": 100, "2": 100}, rep


def test_sarama_transactions(gobin, target):
    rep = gobuild.run(gobin / "sarama", target["bootstrap"], "txn", prefix=_prefix("sa-txn"), records=300,
                      per_txn=10, rf=target["rf"])
    one = rep["begin_commit_abort"]
    # 5 rounds of 4 chunks of 15 records (X, Y, X, Y): rounds 0 and 3 abort Y's, rounds 1 and 4
    # X's, round 2 neither; then one committed sentinel per partition
    assert (one["written"], one["committed_written"], one["aborted_written"]) == (303, 180, 120), one
    assert one["mismatches"] == [] and one["read_committed_equal"], one
    assert (one["read_committed"], one["aborted_seen_read_committed"], one["duplicates_read_committed"]) == \
        (183, 0, 0), one
    assert one["read_uncommitted"] == 303, one   # the aborted records were in the log
    # each partition: 100 records and two markers per round (one per producer), then the sentinel.
    # EndTxn answers once Prepare* is durable and the markers follow (Kafka's coordinator does the
    # same), so the last round's two markers may land after the sentinel: a later producer waits
    # for nothing.  Every earlier marker is in place before its producer's next AddPartitionsToTxn
    # (CONCURRENT_TRANSACTIONS until then).
    assert all(108 <= one["sentinel_offsets"][p] <= 110 for p in ("0", "1", "2")), one

    ctp = rep["consume_transform_produce"]
    assert ctp["problems"] == [] and ctp["output_mismatches"] == [], ctp
    # read_committed: "out-"+value of every committed input, once, in input order per partition
    assert ctp["output_equal"] and ctp["output_read_committed"] == 180, ctp
    assert ctp["group_offsets"] == ctp["expected_group_offsets"] == \
        {p: one["sentinel_offsets"][p] + 1 for p in ("0", "1", "2")}, ctp
    # the first member left with its last transactions aborted; the others took over from its
    # commits; aborted-and-retried transactions happened; a rebalance while the second member
    # held partitions (generations: first member, second alone, second and third)
    assert ctp["first_member_final_aborted_txns"] >= 1 and ctp["aborted_then_retried_txns"] >= 1, ctp
    assert ctp["first_member_committed_records"] >= 60, ctp
    assert ctp["first_member_committed_records"] + ctp["later_members_committed_records"] == 180, ctp
    assert ctp["generations_seen"] >= 3, ctp
