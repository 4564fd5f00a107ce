"""IBM/sarama's transactional producer against pykbroker and Apache Kafka: the same Go scenario
(compat/go/cmd/sarama ``-scenario txn``, sarama's Kafka 2.8 request versions: transaction
version 1 with explicit AddPartitionsToTxn/AddOffsetsToTxn, TxnOffsetCommit v3, Fetch v12).
Two producers' transactions interleaved in the same partitions, some aborted, read back
read_committed and read_uncommitted; then consume-transform-produce with a sarama consumer group
whose members leave with aborted transactions and rebalance while transactions are open.  Both
brokers must give the same observations: the same records at the same offsets, the same output,
the same committed group offsets.  How many transactions each member ran is timing, not
compared.  Skipped without a Go toolchain."""
from __future__ import annotations

import pytest

from go import gobuild  # noqa: E402

gobuild.require_toolchain("the sarama scenario")


@pytest.fixture(scope="module")
def sarama(tmp_path_factory):
    return gobuild.build_or_fail(tmp_path_factory.mktemp("gobin")) / "sarama"


def observe(t, binary):
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


def test_sarama_transactions(both, sarama):
    p, k = both.at_once(observe, sarama)
    assert p == k
    assert p["part1"]["read_committed_equal"] and p["part1"]["read_uncommitted"] == 303, p
    assert p["part1"]["sentinels_after_earlier_markers"], p
    assert p["output_equal"] and p["group_offsets_one_past_sentinels"], p
