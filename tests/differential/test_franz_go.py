"""franz-go (kgo, kadm) against pykbroker and Apache Kafka: the same Go scenarios
(compat/go/cmd/franzgo), the same observations.  Every scenario runs against both brokers at
once, and the scenarios of a side run at once too (a franz-go process each: client_runs.py), so
the module takes its longest scenario's time.

- ``eos``: the exactly-once loop (``kgo.GroupTransactSession``, transaction version 2) with the
  answers to one EndTxn lost, so that franz-go recovers through KIP-360 InitProducerId with the
  epoch from before the EndTxn's bump.  Both brokers must let it recover (no PRODUCER_FENCED) and
  end with exactly one read_committed output per input.
- ``admin``: kadm's topic and config calls: the same report.
- ``roundtrip``: every codec franz-go has (none, gzip, snappy, lz4, zstd), the shared data set
  (null/empty/binary keys and values, 6 KiB values, duplicate/empty/non-ASCII/binary headers,
  out-of-order CreateTime timestamps) through franz-go's default (idempotent) producer, read back
  byte-exact at the produced offsets; and what the broker stored, read with raw Fetches (every
  record's offset, key, value, headers, timestamp pattern, its batch's codec, timestamp type and
  producer id): equal.
- ``idempotent``: batches in flight on 3 partitions, every record once, in order, at its offset,
  one producer id (its value differs between two brokers: compared as a count), the same records
  stored at the same offsets.
- ``group``: franz-go's consumer group with explicit commits with range and cooperative-sticky
  (client-side assignors, JoinGroup/SyncGroup) and KIP-848 (ConsumerGroupHeartbeat, the broker's
  ``uniform`` assignor): a member processes a third and leaves, two more resume from its commits.
  Equal: every record once, the first member's commits being what it processed, the committed
  offsets at the end offsets, and the broker's view of the group afterwards (committed offsets
  per partition, state, group type, classic and KIP-848 descriptions).  How many records the
  first member took past its third (franz-go polls 25 at a time) and how the rest split between
  the two later members is timing: compared as relations.

Skipped without a Go toolchain."""
from __future__ import annotations

import pytest

from go import gobuild  # noqa: E402

from .client_runs import assert_stored_codecs, group_view, run_jobs, same_roundtrip, side_results, stored
from .helpers import explain

gobuild.require_toolchain("the franz-go scenario")

RECORDS = 300
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
BALANCERS = ["range", "cooperative-sticky", "consumer"]


def _eos(t, binary):
    rep = gobuild.run(binary, t.bootstrap, "eos", prefix="diff-eos", records=400, per_txn=20, txn_hold="20ms",
                      lose_end_txn=3, balancer="cooperative-sticky", timeout="120s")
    return {"recover_errors": rep["recover_errors"], "end_errors": rep["end_errors"],
            "produce_errors": rep["produce_errors"], "recovered": rep["recovered"],
            "lost_answers": rep["lost_end_txn_answers"] >= 1, "caught_up": rep["group_caught_up"],
            "exactly_once": sorted(rep["output"]) == sorted("out-" + v for v in rep["input"])}


def _admin(t, binary):
    rep = gobuild.run(binary, t.bootstrap, "admin", prefix="diff-adm")
    # how often a describe had to be repeated until the change showed is timing (Kafka too
    # shows an incremental alter a moment after answering it), not compared
    rep.pop("describe_retries")
    return rep


def _roundtrip(t, binary):
    rep = gobuild.run(binary, t.bootstrap, "roundtrip", prefix="diff-fg-rt", records=RECORDS)
    return {"report": rep, "stored": {c: stored(t, "diff-fg-rt-rt-" + c) for c in rep}}


def _idempotent(t, binary):
    rep = gobuild.run(binary, t.bootstrap, "idempotent", prefix="diff-fg-idem", records=1500)
    rep["producer_ids"] = len(rep["producer_ids"])   # the broker's number, one of them
    # franz-go stamps these records when it produces them: their timestamps are the run's clock
    return {"report": rep, "stored": stored(t, "diff-fg-idem-idem", timestamps=False)}


def _group(t, binary, balancer):
    prefix = "diff-fg-grp-" + balancer
    rep = gobuild.run(binary, t.bootstrap, "group", prefix=prefix, records=RECORDS, balancer=balancer)
    first = rep["first_member_processed"]
    return {"produced": rep["produced"], "duplicates": rep["duplicates"], "missing": rep["missing"],
            "problems": rep["problems"], "committed_at_end": rep["committed_at_end"], "balancer": rep["balancer"],
            "processed": first + sum(rep["later_members_processed"]),
            "first_took_a_third": first >= RECORDS // 3,
            "first_committed_what_it_processed": rep["offsets_committed_by_first"] == first,
            "broker_view": group_view(t, prefix + "-grp-g", prefix + "-grp")}


@pytest.fixture(scope="module")
def runs(both, tmp_path_factory):
    """Every scenario of the module, against each broker, all at once."""
    binary = gobuild.build_or_fail(tmp_path_factory.mktemp("gobin")) / "franzgo"

    def side(t):
        jobs = {"eos": lambda: _eos(t, binary), "admin": lambda: _admin(t, binary),
                "roundtrip": lambda: _roundtrip(t, binary), "idempotent": lambda: _idempotent(t, binary)}
        for b in BALANCERS:
            jobs["group-" + b] = lambda b=b: _group(t, binary, b)
        return run_jobs(jobs)
    return both.at_once(side)


def test_group_transact_session_recovers_from_a_lost_end_txn_answer(runs):
    p, k = side_results(runs, "eos")
    assert p == k, explain(p, k)
    assert p["recovered"] == 1 and p["exactly_once"] and p["lost_answers"], p


def test_kadm_topics_and_configs(runs):
    """kadm's topic and config calls (create with configs, duplicate create, describe, incremental
    alter, create partitions, list, delete, describe an unknown topic): the same report."""
    p, k = side_results(runs, "admin")
    assert p == k, explain(p, k)
    assert p["partitions"] == [2, 5] and p["deleted"], p


def test_produce_consume_every_codec(runs):
    p, k = side_results(runs, "roundtrip")
    rep = same_roundtrip(p, k)
    assert sorted(rep) == sorted(CODECS), rep
    assert all(r["mismatches"] == [] and r["produced"] == r["read"] == RECORDS and r["offsets_dense"]
               for r in rep.values()), rep
    # franz-go's producer is idempotent: a producer id on every batch
    assert_stored_codecs(p["stored"], {c: i for i, c in enumerate(CODECS)}, RECORDS, idempotent=True)


def test_idempotent_producer(runs):
    p, k = side_results(runs, "idempotent")
    assert p == k, explain(p, k)
    rep = p["report"]
    assert rep["produced"] == rep["read"] == 1500 and rep["producer_ids"] == 1, rep
    assert (rep["duplicates"], rep["missing"], rep["out_of_order"], rep["offset_errors"]) == (0, 0, 0, 0), rep


@pytest.mark.parametrize("balancer", BALANCERS)
def test_group_commits_resume_across_members(runs, balancer):
    p, k = side_results(runs, "group-" + balancer)
    assert p == k, explain(p, k)
    assert p["problems"] == [] and (p["duplicates"], p["missing"]) == (0, 0), p
    assert p["processed"] == RECORDS and p["first_took_a_third"] and p["first_committed_what_it_processed"], p
    view = p["broker_view"]
    assert p["committed_at_end"] and sum(o for o, _ in view["offsets"].values()) == RECORDS, p
    # the group left Empty, of the type its protocol made it
    assert view["listed"] == [["Empty", "consumer" if balancer == "consumer" else "classic", "consumer"]], view
