"""franz-go's exactly-once loop (``kgo.GroupTransactSession``, transaction version 2) against
pykbroker and Apache Kafka: the same Go scenario (compat/go/cmd/franzgo ``-scenario eos``), with
the answers to one EndTxn lost so that franz-go recovers through KIP-360 InitProducerId with the
epoch from before the EndTxn's bump.  Both brokers must let it recover (no PRODUCER_FENCED) and
end with exactly one read_committed output per input.  Skipped without a Go toolchain."""
from __future__ import annotations

import pytest

from go import gobuild  # noqa: E402

gobuild.require_toolchain("the franz-go scenario")


@pytest.fixture(scope="module")
def franzgo(tmp_path_factory):
    return gobuild.build_or_fail(tmp_path_factory.mktemp("gobin")) / "franzgo"


def observe(t, binary):
    rep = gobuild.run(binary, t.bootstrap, "eos", prefix="diff-eos", records=400, per_txn=20, txn_hold="20ms",
                      lose_end_txn=3, balancer="cooperative-sticky", timeout="120s")
    return {"recover_errors": rep["recover_errors"], "end_errors": rep["end_errors"],
            "produce_errors": rep["produce_errors"], "recovered": rep["recovered"],
            "lost_answers": rep["lost_end_txn_answers"] >= 1, "caught_up": rep["group_caught_up"],
            "exactly_once": sorted(rep["output"]) == sorted("out-" + v for v in rep["input"])}


def test_group_transact_session_recovers_from_a_lost_end_txn_answer(both, franzgo):
    p, k = both.at_once(observe, franzgo)
    assert k == p
    assert p["recovered"] == 1 and p["exactly_once"] and p["lost_answers"], p


def test_kadm_topics_and_configs(both, franzgo):
    """kadm's topic and config calls (create with configs, duplicate create, describe, incremental
    alter, create partitions, list, delete, describe an unknown topic): the same report."""
    def observe_admin(t, b):
        rep = gobuild.run(b, t.bootstrap, "admin", prefix="diff-adm")
        # how often a describe had to be repeated until the change showed is timing (Kafka too
        # shows an incremental alter a moment after answering it), not compared
        rep.pop("describe_retries")
        return rep
    p, k = both.at_once(observe_admin, franzgo)
    assert p == k
    assert p["partitions"] == [2, 5] and p["deleted"], p
