"""ZooKeeper connection blips with a leader killed, on Apache Kafka 3.9.1 in ZooKeeper mode (the
exact oracle for pykbroker's ZooKeeper controller: the differential cluster tests compare with
KRaft, whose rules differ) and on pykbroker, measured the same way one after the other
(``compat.chaos.chaos.blip_failover``): ZooKeeper 3.8 and 3 brokers whose ZooKeeper links
go through a relay dropping them every 2 s (sessions kept, 6 s session timeout), an idempotent
acks=all confluent-kafka producer, and the leader of the partition (not the controller) killed
-9.  Kafka's controller ignores a disconnect within its session: both clusters must elect a new
leader once the dead broker's session expires and lose no acknowledged record; pykbroker's
new-leader time is checked against Kafka's.  pykbroker's run is made once a session and also
checked by tests/cluster/test_zk_blips.py (the ``zk_blips_pykbroker_run`` fixture, tests/conftest.py).
"""
from __future__ import annotations

import pytest

from tests import needs
from tests.ports import free_port


from .conftest import _load_oracle

# Java + the Debian 'zookeeper' jars (tools/test.sh installs them), as in tests/cluster
pytestmark = pytest.mark.skipif(needs.zookeeper_missing() is not None,
                                reason=needs.missing(needs.zookeeper_missing() or ""))
needs.module("kazoo.client")
needs.module("confluent_kafka")

from pykbroker.local.zookeeper import ZooKeeperServer  # noqa: E402
from compat.chaos import chaos  # noqa: E402
from pykbroker.local.relay import TcpRelay  # noqa: E402

# the same settings for both clusters; pykbroker's run is the one tests/cluster/test_zk_blips.py
# checks too, made once a session
from tests.cluster.helpers import BLIP_EVERY_S, BLIP_SESSION_S as SESSION_S, BLIP_SETTINGS as SETTINGS  # noqa: E402


def kafka_zk_mode(tmp_path):
    oracle = _load_oracle()
    with ZooKeeperServer(str(tmp_path / "zk"), tick_time=500) as zk, \
            TcpRelay("127.0.0.1", zk.port) as relay:
        brokers = [oracle.KafkaZkBroker(tmp_path / ("kafka-%d" % i), i, relay.address, dict(SETTINGS))
                   for i in (1, 2, 3)]
        try:
            ports: set = set()
            for b in brokers:   # three distinct ports before the starts run side by side
                while not b.port or b.port in ports:
                    b.port = free_port()
                ports.add(b.port)
            _start_side_by_side(brokers)
            _wait_all_listed({b.node_id: b.port for b in brokers})   # the cluster is whole
            byid = {b.node_id: b for b in brokers}
            return chaos.blip_failover({b.node_id: b.port for b in brokers}, lambda bid: byid[bid].kill(),
                                       relay, SESSION_S, blip_every=BLIP_EVERY_S)
        except oracle.OracleUnavailable as e:   # never a skip: the oracle is part of what CI checks
            pytest.fail("Apache Kafka %s (ZooKeeper mode) could not be started: %s"
                        % (oracle.ZK_MODE_VERSION, e), pytrace=False)
        finally:
            for b in brokers:
                b.kill()


def _start_side_by_side(brokers):
    """Start the brokers' JVMs at once, not one after another (each start waits until its broker
    answers: three JVM start-ups in a row cost about 10 s more on 2 loaded cores); the first
    failure is raised once all have returned."""
    import threading
    errors = []

    def start(b):
        try:
            b.start()
        except BaseException as e:   # raised below
            errors.append(e)
    threads = [threading.Thread(target=start, args=(b,)) for b in brokers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def _wait_all_listed(ports, timeout=60.0):
    import time
    deadline = time.monotonic() + timeout
    for port in ports.values():
        while len(chaos.wire.metadata(("127.0.0.1", port), [])["brokers"]) < len(ports):
            if time.monotonic() > deadline:
                raise AssertionError("the Kafka brokers do not all see each other")
            time.sleep(0.2)


def check(name, res):
    assert res.new_leader is not None, "%s: no new leader %.0f s after the kill" % (name, SESSION_S + 10)
    r = res.report
    assert res.acked_at_kill > 0 and r.acked > res.acked_at_kill, "%s: %s" % (name, r.row())
    assert r.lost == 0 and r.duplicates == 0 and r.inconsistent == 0, \
        "%s: %s\n%s" % (name, r.row(), "\n".join(r.examples))


@pytest.mark.timeout(600)
def test_blips_then_a_leader_killed_like_kafka_3_9_in_zookeeper_mode(tmp_path, zk_blips_pykbroker_run):
    kafka = kafka_zk_mode(tmp_path)
    pyk, _controller_log = zk_blips_pykbroker_run
    print("new leader after the kill: Kafka %.1f s, pykbroker %.1f s (session timeout %.0f s); "
          "acknowledged: Kafka %d, pykbroker %d, 0 lost"
          % (kafka.seconds_to_new_leader or -1, pyk.seconds_to_new_leader or -1, SESSION_S,
             kafka.report.acked, pyk.report.acked))
    check("Apache Kafka", kafka)
    check("pykbroker", pyk)
    # both notice the death at the dead broker's session expiry; pykbroker's election after it
    # is no slower than Kafka's by more than its polling of Metadata
    assert pyk.seconds_to_new_leader <= kafka.seconds_to_new_leader + 2.0, (pyk, kafka)
