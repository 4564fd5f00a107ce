"""IBM/sarama against pykbroker and Apache Kafka: the same Go scenarios (compat/go/cmd/sarama,
sarama's Kafka 2.8 request versions), the same observations.  Every scenario runs against both
brokers at once, and the scenarios of a side run at once too (a sarama process each:
client_runs.py), so the module takes its longest scenario's time.

- ``txn``: transaction version 1 with explicit AddPartitionsToTxn/AddOffsetsToTxn, TxnOffsetCommit
  v3, Fetch v12.  Two producers' transactions interleaved in the same partitions, some aborted,
  read back read_committed and read_uncommitted; then consume-transform-produce with a sarama
  consumer group whose members leave with aborted transactions and rebalance while transactions
  are open: the same records at the same offsets, the same output, the same committed group
  offsets.  How many transactions each member ran is timing, not compared.
- ``roundtrip``: every codec sarama has (none, gzip, snappy, lz4, zstd), the shared data set
  (null/empty/binary keys and values told apart, 6 KiB values, duplicate/empty/non-ASCII/binary
  headers, out-of-order CreateTime timestamps) read back byte-exact at the offsets the producer
  was told; and what the broker stored, read with raw Fetches (every record's offset, key, value,
  headers, timestamp pattern, its batch's codec, timestamp type, no producer id): equal.
- ``idempotent``: ``Producer.Idempotent`` with one request in flight, every record once, in
  order, at its offset; the same records stored at the same offsets.
- ``group``: sarama's own consumer group (its client-side range, round-robin and sticky
  strategies; sarama has only the eager protocol) with manual commits: a member processes a
  third and leaves, two more resume from its commits.  Equal: every record once, the committed
  offsets, and the broker's view of the group afterwards (committed offsets per partition,
  state, type, descriptions).  How far the first member went past its third (its partitions are
  consumed concurrently) and how the rest split between the later two is timing: compared as
  relations.

Skipped without a Go toolchain."""
from __future__ import annotations

import pytest

from go import gobuild  # noqa: E402

from .client_runs import assert_stored_codecs, group_view, run_jobs, same_roundtrip, side_results, stored
from .helpers import explain

gobuild.require_toolchain("the sarama scenario")

RECORDS = 300
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
STRATEGIES = ["range", "roundrobin", "sticky"]


def _roundtrip(t, binary):
    rep = gobuild.run(binary, t.bootstrap, "roundtrip", prefix="diff-sa-rt", records=RECORDS)
    return {"report": rep, "stored": {c: stored(t, "diff-sa-rt-rt-" + c) for c in rep}}


def _idempotent(t, binary):
    rep = gobuild.run(binary, t.bootstrap, "idempotent", prefix="diff-sa-idem", records=1500)
    # sarama stamps these records when it produces them: their timestamps are the run's clock
    return {"report": rep, "stored": stored(t, "diff-sa-idem-idem", timestamps=False)}


def _group(t, binary, strategy):
    prefix = "diff-sa-grp-" + strategy
    rep = gobuild.run(binary, t.bootstrap, "group", prefix=prefix, records=RECORDS, balancer=strategy)
    return {"produced": rep["produced"], "duplicates": rep["duplicates"], "missing": rep["missing"],
            "problems": rep["problems"], "committed_total": rep["committed_total"],
            "processed": rep["first_member_processed"] + rep["later_members_processed"],
            "first_took_a_third": rep["first_member_processed"] >= RECORDS // 3,
            "broker_view": group_view(t, prefix + "-grp-g", prefix + "-grp")}


@pytest.fixture(scope="module")
def runs(both, tmp_path_factory):
    """Every scenario of the module, against each broker, all at once."""
    binary = gobuild.build_or_fail(tmp_path_factory.mktemp("gobin")) / "sarama"

    def side(t):
        jobs = {"txn": lambda: _txn(t, binary), "roundtrip": lambda: _roundtrip(t, binary),
                "idempotent": lambda: _idempotent(t, binary)}
        for s in STRATEGIES:
            jobs["group-" + s] = lambda s=s: _group(t, binary, s)
        return run_jobs(jobs)
    return both.at_once(side)


def _txn(t, binary):
    rep = gobuild.run(binary, t.bootstrap, "txn", prefix="diff-sa-txn", records=300, per_txn=10)
    one, ctp = rep["begin_commit_abort"], rep["consume_transform_produce"]
    # the sentinel's offset is 110 unless the last round's markers (written after EndTxn answers,
    # on both brokers) land behind it; compared as a range, the rest exactly
    one = dict(one)
    sentinels = one.pop("sentinel_offsets")
    one["sentinels_after_earlier_markers"] = all(108 <= o <= 110 for o in sentinels.values())
    return {"part1": one,
            "output_equal": ctp["output_equal"], "output_read": ctp["output_read_committed"],
            "output_mismatches": ctp["output_mismatches"], "problems": ctp["problems"],
            "group_offsets_one_past_sentinels": ctp["group_offsets"] == ctp["expected_group_offsets"] ==
            {p: o + 1 for p, o in sentinels.items()},
            "committed_records": ctp["first_member_committed_records"] + ctp["later_members_committed_records"],
            "aborted_then_retried": ctp["aborted_then_retried_txns"] >= 1,
            "final_aborted": ctp["first_member_final_aborted_txns"] >= 1,
            "rebalanced": ctp["generations_seen"] >= 3}


def test_sarama_transactions(runs):
    p, k = side_results(runs, "txn")
    assert p == k, explain(p, k)
    assert p["part1"]["read_committed_equal"] and p["part1"]["read_uncommitted"] == 303, p
    assert p["part1"]["sentinels_after_earlier_markers"], p
    assert p["output_equal"] and p["group_offsets_one_past_sentinels"], p


def test_sarama_produce_consume_every_codec(runs):
    p, k = side_results(runs, "roundtrip")
    rep = same_roundtrip(p, k)
    assert sorted(rep) == sorted(CODECS), rep
    assert all(r["mismatches"] == [] and r["produced"] == r["read"] == RECORDS for r in rep.values()), rep
    # sarama's round trip is not idempotent: no producer id
    assert_stored_codecs(p["stored"], {c: i for i, c in enumerate(CODECS)}, RECORDS, idempotent=False)


def test_sarama_idempotent_producer(runs):
    p, k = side_results(runs, "idempotent")
    assert p == k, explain(p, k)
    rep = p["report"]
    assert rep["produced"] == rep["read"] == 1500, rep
    assert (rep["duplicates"], rep["missing"], rep["out_of_order"], rep["offset_errors"]) == (0, 0, 0, 0), rep
    assert all(r[8] for rs in p["stored"].values() for r in rs), "stored without a producer id"


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_sarama_group_commits_resume_across_members(runs, strategy):
    p, k = side_results(runs, "group-" + strategy)
    assert p == k, explain(p, k)
    assert p["problems"] == [] and (p["duplicates"], p["missing"]) == (0, 0), p
    assert p["processed"] == RECORDS and p["first_took_a_third"], p
    view = p["broker_view"]
    assert p["committed_total"] == RECORDS and view["offsets"] == {str(i): [RECORDS // 3, 0] for i in range(3)}, p
    assert view["listed"] == [["Empty", "classic", "consumer"]], view
