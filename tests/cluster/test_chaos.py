"""Short fault runs (compat/chaos/chaos.py) on real processes: ZooKeeper + 3 brokers, RF 3,
min.insync.replicas=2, idempotent acks=all confluent-kafka producers, and the nemesis of each
scenario.  Kafka's rule is checked on what a consumer reads back afterwards: no acknowledged
record lost, none duplicated, none at another offset than acknowledged, producers' order kept.

CI runs every scenario (20-30 s each, ``RUNS``) but zk-blips, which runs with ``PYKBROKER_CHAOS_LONG=1``
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

import functools
import os

import pytest

from tests import background, needs

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


# Each run's length, the seconds between its faults, and the faults it must have injected.  A
# fault every 4 s instead of 8 s lets a shorter run inject at least the faults of the former
# 30 s runs whatever a restart takes (r s): bounce's n-th SIGTERM comes at 4n + (n-1)r s of 24
# (8n + (n-1)r of 30 before), so 2 of them when r < 16 s (r < 14 before), 1 at the very least
# (a broker restart took over 12 s on 2 cores under a load of 20); pause-leader's second SIGSTOP
# (the first at 2 s, 5-15 s long) comes by 19.5 s of 22, so 2 always, the second longer than a
# blink; zookeeper's one fault (at 2 s, ZooKeeper down 10 s: longer than the 6 s sessions).
# The gaps only shorten the quiet time between faults, never a fault.  kill-leader keeps 30 s:
# its Java producer (a JVM start) acknowledged too few records for its check in 22 s on a loaded
# machine.  all-down ends its run once its brokers are back (its length is the fault's); zk-blips
# (long mode) keeps its 30 s schedule.
RUNS = {"kill-leader": (30.0, 8.0, 1), "bounce": (24.0, 4.0, 1), "pause-leader": (22.0, 4.0, 2),
        "zookeeper": (20.0, 4.0, 1), "all-down": (30.0, 8.0, 1), "zk-blips": (30.0, 8.0, 1)}


@pytest.mark.parametrize("scenario", [pytest.param(s, marks=pytest.mark.skipif(not LONG, reason=LONG_ONLY[s]))
                                      if s in LONG_ONLY else s for s in SCENARIOS])
def test_no_acknowledged_record_lost(scenario, tmp_path):
    seconds, interval, min_faults = RUNS[scenario]
    report = chaos.run(scenario, seconds=seconds, interval=interval, partitions=3, producers=2, rate=150,
                       data_dir=str(tmp_path / "cluster"), log=print, seed=SEED)
    _print(report)
    assert report.faults >= min_faults, "the nemesis struck %d time(s), not %d" % (report.faults, min_faults)
    assert report.acked > 1000, report
    assert report.lost == 0 and report.duplicates == 0 and report.inconsistent == 0, \
        "%s\n%s" % (report.row(), "\n".join(report.examples))
    # everything acknowledged was read back, plus at most what was written but not acknowledged
    assert report.acked <= report.consumed <= report.sent


def _eos_run(data_dir, run):
    from compat.chaos import chaos_eos
    # 22 s with a kill every 4 s (30 s and 8 s before): the n-th kill comes at 4n + (n-1)(2 + r) s,
    # r its victim's restart (its ZooKeeper session's expiry included), 8n + (n-1)(3 + r) before,
    # so at least as many kills as the former run for any r; the application's transactions are
    # spread over 80% of the run either way
    return chaos_eos.run(seconds=22.0, interval=4.0, records=5000, data_dir=str(data_dir), log=run.log, seed=SEED)


@pytest.fixture(scope="module", autouse=True)
def eos_run(request, tmp_path_factory):
    """The exactly-once fault run (about 45 s, mostly its fault schedule and the application's
    paced transactions) starts with the module, beside the runs of the tests before its own: its
    cluster, topics, transactional id and group are its own, and its checks are its own (no
    timing bound; the other runs' checks neither).  About 44 s of the module's time saved."""
    yield from background.ahead(request, "test_chaos.py::test_exactly_once_consume_transform_produce_under_leader_kills",
                                functools.partial(_eos_run, tmp_path_factory.mktemp("eos")), "eos-kill-leader")


def _java_kill_leader_run(data_dir, after, run):
    """The kill-leader run with a Java producer beside the two confluent-kafka ones, once the run
    ``after`` (the exactly-once run, started with the module) has ended."""
    if after is not None:
        after.join()
    seconds, interval, _min_faults = RUNS["kill-leader"]
    return chaos.run("kill-leader", seconds=seconds, interval=interval, partitions=3, producers=2, rate=150,
                     data_dir=str(data_dir), log=run.log, java_producers=1, seed=SEED)


@pytest.fixture(scope="module", autouse=True)
def java_kill_leader_run(request, tmp_path_factory, eos_run):
    """The kill-leader run with its Java producer (about 48 s: a JVM start, the 30 s schedule and
    the read-back; the first Java run of a session may build compat/java first) in the same
    background thread as the exactly-once run, after it: the two together last about as long as
    the scenarios of test_no_acknowledged_record_lost, which run meanwhile, so at most two
    clusters are up at once, as before.  Its own cluster, topic and checks (no timing bound; the
    overlapped runs' checks neither).  About 45 s of the module's time saved."""
    yield from background.ahead(
        request, "test_chaos.py::test_java_and_python_producers_kill_leader",
        functools.partial(_java_kill_leader_run, tmp_path_factory.mktemp("java-kill-leader"), eos_run),
        "java-kill-leader")


@pytest.mark.timeout(900)   # the first Java test of a session may build compat/java
def test_java_and_python_producers_kill_leader(java_kill_leader_run):
    """The kill-leader scenario: two confluent-kafka producers, as every scenario above, and an
    idempotent acks=all Java producer (kafka-clients 3.9, a JVM of its own) beside them; the
    checker covers the acknowledgements of all three."""
    _seconds, _interval, min_faults = RUNS["kill-leader"]
    report = java_kill_leader_run.result()
    _print(report)
    assert report.faults >= min_faults, "the nemesis struck %d time(s), not %d" % (report.faults, min_faults)
    # the confluent-kafka producers' share as in the other scenarios, the Java producer's its own
    assert report.acked - report.java_acked > 1000, report
    assert report.java_acked > 500, report
    assert report.lost == 0 and report.duplicates == 0 and report.inconsistent == 0, \
        "%s\n%s" % (report.row(), "\n".join(report.examples))
    assert report.acked <= report.consumed <= report.sent


def test_exactly_once_consume_transform_produce_under_leader_kills(eos_run):
    """Issue 12's fault run: a transactional consume-transform-produce application
    (send_offsets_to_transaction, read_committed) while input/output leaders are killed with
    kill -9: the committed output is the input, each record exactly once."""
    report = eos_run.result()
    print(report.row())
    print("seed %d" % report.seed)
    assert report.faults >= 1, "the nemesis never struck"
    assert report.ok, "%s\n%s" % (report.row(), "\n".join(report.examples))
