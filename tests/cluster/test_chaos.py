"""Short fault runs (compat/chaos/chaos.py) on real processes: ZooKeeper + 3 brokers, RF 3,
min.insync.replicas=2, idempotent acks=all confluent-kafka producers, and the nemesis of each
scenario.  Kafka's rule is checked on what a consumer reads back afterwards: no acknowledged
record lost, none duplicated, none at another offset than acknowledged, producers' order kept.

CI runs every scenario (about 30 s each) but zk-blips, which runs with ``PYKBROKER_CHAOS_LONG=1``
(the fault tests/cluster/test_zk_blips.py checks on every run, see LONG_ONLY); the kill-leader run
has a Java kafka-clients producer beside the two confluent-kafka ones (one run checks both kinds
of client's acknowledgements); ``PYKBROKER_QUICK=1`` skips them all (cluster tests,
tests/conftest.py).  The full-length runs are
``python compat/chaos/chaos.py [--java]`` (docs/cluster.md's table).

Each run draws the nemesis's seed and prints it (shown with a failure); ``PYKBROKER_CHAOS_SEED=N``
replays that schedule.  Records a first read-back missed and a later one found are printed too
(``Report.late``).
"""
from __future__ import annotations

import os

import pytest

from tests import needs

needs.module("kazoo.client")
needs.module("confluent_kafka")
needs.require_zookeeper(allow_module_level=True)

from compat.chaos import chaos  # noqa: E402

SEED = int(os.environ["PYKBROKER_CHAOS_SEED"]) if os.environ.get("PYKBROKER_CHAOS_SEED") else None


def _print(report):
    print(chaos.Report.HEADER)
    print(report.row())
    print("seed %d, read late %d" % (report.seed, report.late))
# kill-leader runs in test_java_and_python_producers_kill_leader: the same run with a Java producer
# added beside the two confluent-kafka ones, checked for both (one 30 s cluster run, not two).
SCENARIOS = [s for s in chaos.SCENARIOS if s != "kill-leader"]
# zk-blips only with PYKBROKER_CHAOS_LONG=1 (as the long runs of tests/chaos/test_partitions.py):
# its fault -- every ZooKeeper link dropped every few seconds while a leader that is not the
# controller is killed -9 -- is what tests/cluster/test_zk_blips.py runs on every suite run and
# checks more tightly (a new leader within the session timeout + 5 s, nothing acknowledged lost,
# duplicated or moved, the controller never stepping down), with Apache Kafka 3.9's run of the
# same fault beside it (tests/differential/test_zk_blips_oracle.py).  This 30 s run adds only
# more kills of the same kind (about 37 s of suite time).
LONG = os.environ.get("PYKBROKER_CHAOS_LONG") == "1"
LONG_ONLY = {"zk-blips": "PYKBROKER_CHAOS_LONG=1: the same fault as tests/cluster/test_zk_blips.py "
                         "(blips + a non-controller leader killed), checked there on every run"}


@pytest.mark.parametrize("scenario", [pytest.param(s, marks=pytest.mark.skipif(not LONG, reason=LONG_ONLY[s]))
                                      if s in LONG_ONLY else s for s in SCENARIOS])
def test_no_acknowledged_record_lost(scenario, tmp_path):
    seconds = 30.0
    report = chaos.run(scenario, seconds=seconds, interval=8.0, partitions=3, producers=2, rate=150,
                       data_dir=str(tmp_path / "cluster"), log=print, seed=SEED)
    _print(report)
    assert report.faults >= 1, "the nemesis never struck"
    assert report.acked > 1000, report
    assert report.lost == 0 and report.duplicates == 0 and report.inconsistent == 0, \
        "%s\n%s" % (report.row(), "\n".join(report.examples))
    # everything acknowledged was read back, plus at most what was written but not acknowledged
    assert report.acked <= report.consumed <= report.sent


@pytest.mark.timeout(900)   # the first Java test of a session may build compat/java
def test_java_and_python_producers_kill_leader(tmp_path):
    """The kill-leader scenario: two confluent-kafka producers, as every scenario above, and an
    idempotent acks=all Java producer (kafka-clients 3.9, a JVM of its own) beside them; the
    checker covers the acknowledgements of all three."""
    report = chaos.run("kill-leader", seconds=30.0, interval=8.0, partitions=3, producers=2, rate=150,
                       data_dir=str(tmp_path / "cluster"), log=print, java_producers=1, seed=SEED)
    _print(report)
    assert report.faults >= 1, "the nemesis never struck"
    # the confluent-kafka producers' share as in the other scenarios, the Java producer's its own
    assert report.acked - report.java_acked > 1000, report
    assert report.java_acked > 500, report
    assert report.lost == 0 and report.duplicates == 0 and report.inconsistent == 0, \
        "%s\n%s" % (report.row(), "\n".join(report.examples))
    assert report.acked <= report.consumed <= report.sent


def test_exactly_once_consume_transform_produce_under_leader_kills(tmp_path):
    """Issue 12's fault run: a transactional consume-transform-produce application
    (send_offsets_to_transaction, read_committed) while input/output leaders are killed with
    kill -9: the committed output is the input, each record exactly once."""
    from compat.chaos import chaos_eos
    report = chaos_eos.run(seconds=30.0, interval=8.0, records=5000, data_dir=str(tmp_path / "eos"),
                           log=print, seed=SEED)
    print(report.row())
    print("seed %d" % report.seed)
    assert report.faults >= 1, "the nemesis never struck"
    assert report.ok, "%s\n%s" % (report.row(), "\n".join(report.examples))
