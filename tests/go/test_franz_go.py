"""franz-go (github.com/twmb/franz-go/pkg/kgo and kadm, the version in compat/go/go.mod) against
pykbroker: one broker and a 3-broker cluster (ZooKeeper + 3 ``pykbroker serve``, replication
factor 3, ``min.insync.replicas=2``).  The scenarios are Go programs (compat/go/cmd/franzgo) that
report what the client read back; these tests judge the reports.

- produce/consume with every codec franz-go has: keys (null, empty, binary), values (null, empty,
  binary, 6 KiB), headers, out-of-order CreateTime timestamps, read back byte-exact at the
  produced offsets;
- the idempotent producer (franz-go's default) with batches in flight on three partitions;
- a consumer group (range, cooperative-sticky, KIP-848) whose members commit, leave, and resume
  from each other's commits: every record processed once;
- exactly-once consume-transform-produce with ``kgo.GroupTransactSession`` (transaction version
  2), members joining, leaving and coming back while transactions are open, output read
  read_committed: exactly one output per input.  One variant loses the answers to an EndTxn
  (the broker committed, the client never heard): franz-go's documented recovery re-runs
  InitProducerId with the epoch from before the EndTxn's bump (KIP-360), which must be answered
  as a retry, as Kafka does, not PRODUCER_FENCED.

Without a Go toolchain the module is skipped (tools/test.sh builds compat/go where there is one).
"""
from __future__ import annotations

import uuid

import pytest

from . import gobuild

if gobuild.go_binary() is None:
    pytest.skip("no Go toolchain (go on PATH or /usr/local/go/bin/go): the franz-go scenarios of compat/go "
                "need one", allow_module_level=True)


@pytest.fixture(scope="session")
def franzgo(gobin):
    return gobin / "franzgo"


# ``single``, ``cluster`` and ``target`` (each test on both): tests/go/conftest.py


def _prefix(name):
    return "%s-%s" % (name, uuid.uuid4().hex[:6])


def test_produce_consume_every_codec(franzgo, target):
    rep = gobuild.run(franzgo, target["bootstrap"], "roundtrip", prefix=_prefix("rt"), rf=target["rf"], records=300)
    assert set(rep) == {"none", "gzip", "snappy", "lz4", "zstd"}
    for codec, r in rep.items():
        assert r["mismatches"] == [], (codec, r["mismatches"])
        assert r["produced"] == r["read"] == 300 and r["offsets_dense"], (codec, r)
        # the record shapes were really there and came back distinct: 75 null and 75 empty keys,
        # 32 null values, six 6 KiB values, 200 records x 4 headers
        assert (r["null_keys_read"], r["empty_keys_read"], r["null_values_read"], r["big_values_read"],
                r["headers_read"]) == (75, 75, 32, 6, 800), (codec, r)
        assert r["compressed"] == (codec != "none"), (codec, r)


def test_idempotent_producer(franzgo, target):
    rep = gobuild.run(franzgo, target["bootstrap"], "idempotent", prefix=_prefix("idem"), rf=target["rf"],
                      records=3000)
    assert rep["produced"] == rep["read"] == 3000, rep
    assert (rep["duplicates"], rep["missing"], rep["out_of_order"], rep["offset_errors"]) == (0, 0, 0, 0), rep
    assert len(rep["producer_ids"]) == 1 and rep["producer_ids"][0] >= 0, rep


@pytest.mark.parametrize("balancer", ["range", "cooperative-sticky", "consumer"])
def test_group_commits_resume_across_members(franzgo, target, balancer):
    rep = gobuild.run(franzgo, target["bootstrap"], "group", prefix=_prefix("grp"), rf=target["rf"],
                      records=600, balancer=balancer)
    assert rep["problems"] == [], rep
    assert (rep["duplicates"], rep["missing"]) == (0, 0), rep
    # A processed and committed a third, B and C the rest from A's commits
    assert rep["first_member_processed"] >= 200 and rep["offsets_committed_by_first"] == rep["first_member_processed"]
    assert rep["first_member_processed"] + sum(rep["later_members_processed"]) == 600, rep
    assert rep["committed_at_end"], rep


EOS_VARIANTS = {
    "range": dict(balancer="range"),
    "cooperative-sticky-static": dict(balancer="cooperative-sticky", static="true"),
    "kip848": dict(balancer="consumer"),
    # an EndTxn committed by the broker whose answers the client never gets
    "lost-end-txn-answer": dict(balancer="range", lose_end_txn=3),
}


@pytest.mark.parametrize("variant", list(EOS_VARIANTS))
def test_group_transact_session_exactly_once(franzgo, target, variant):
    flags = EOS_VARIANTS[variant]
    rep = gobuild.run(franzgo, target["bootstrap"], "eos", prefix=_prefix("eos"), rf=target["rf"], records=600,
                      per_txn=20, txn_hold="20ms", timeout="120s", **flags)
    assert rep["recover_errors"] == [], rep["recover_errors"]
    assert rep["end_errors"] == [] and rep["produce_errors"] == [], rep
    assert rep["group_caught_up"], rep
    # read_committed: one output per input, nothing else (no duplicate, no aborted record)
    assert len(rep["input"]) == 600
    assert sorted(rep["output"]) == sorted("out-" + v for v in rep["input"])
    assert rep["committed_txns"] >= 10 and rep["revocations"] >= 2, rep   # rebalances happened
    if "lose_end_txn" in flags:
        assert rep["lost_end_txn_answers"] >= 1 and rep["recovered"] == 1, rep


def test_kadm_topics_and_configs(franzgo, target):
    rep = gobuild.run(franzgo, target["bootstrap"], "admin", prefix=_prefix("adm"), rf=target["rf"])
    assert rep["brokers"] == (1 if target["rf"] == 1 else 3)
    assert rep["created"] and rep["duplicate_create_error"].startswith("TOPIC_ALREADY_EXISTS"), rep
    assert rep["described"] == {"cleanup.policy": "compact@DYNAMIC_TOPIC_CONFIG",
                                "retention.ms": "3600000@DYNAMIC_TOPIC_CONFIG",
                                "max.message.bytes": "1048588@DEFAULT_CONFIG",
                                "segment.bytes": "1073741824@DEFAULT_CONFIG"}, rep
    # incremental alter: max.message.bytes set, retention.ms deleted (back to the default)
    assert rep["after_alter"] == {"cleanup.policy": "compact@DYNAMIC_TOPIC_CONFIG",
                                  "retention.ms": "604800000@DEFAULT_CONFIG",
                                  "max.message.bytes": "2000000@DYNAMIC_TOPIC_CONFIG",
                                  "segment.bytes": "1073741824@DEFAULT_CONFIG"}, rep
    assert rep["partitions"] == [2, 5] and rep["listed"] and rep["deleted"] and not rep["listed_after_delete"], rep
    assert rep["unknown_topic_describe_error"].startswith("UNKNOWN_TOPIC_OR_PARTITION"), rep


def test_idempotent_producer_across_a_leader_kill(franzgo, cluster):
    """kill -9 of a partition's leader while franz-go's idempotent producer writes to it, then the
    broker's restart: every acknowledged record read back once, in produce order per partition,
    at the offset its produce result named, offsets dense, one producer id.  The broker comes
    back, so the module's other cluster tests are unaffected."""
    prefix = _prefix("kill")
    args = [str(franzgo), "-brokers", cluster["bootstrap"], "-scenario", "idempotent", "-prefix", prefix,
            "-rf", "3", "-records", "3000", "-pace", "2ms", "-timeout", "240s"]
    rep = gobuild.run_killing_a_leader(cluster["cluster"], args, prefix + "-idem")
    assert rep["produced"] == rep["read"] == 3000, rep
    assert (rep["duplicates"], rep["missing"], rep["out_of_order"], rep["offset_errors"]) == (0, 0, 0, 0), rep
    assert len(rep["producer_ids"]) == 1, rep
