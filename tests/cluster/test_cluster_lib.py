"""pykbroker.local.cluster.Cluster on real processes: kill/start/stop/pause/resume and a
ZooKeeper restart, checked with real sockets and records read back over the wire."""
import os
import signal
import socket

import pytest

from pykbroker.local.broker_process import wait_until
from pykbroker.local.cluster import Cluster
from pykbroker.protocol.wire import WireClient, create_topic, fetch, fetch_part, make_batch, produce, \
    produce_part, decode_batches, wait_for_topic

from .helpers import assert_answers, pid_alive, port_open, proc_state, requires_zookeeper

pytestmark = requires_zookeeper


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    # a short ZooKeeper session: a broker started again right after a kill -9 waits for the old
    # process's session to expire (18 s by default)
    with Cluster(3, data_dir=str(tmp_path_factory.mktemp("cluster")),
                 overrides={"group.initial.rebalance.delay.ms": "0", "zookeeper.session.timeout.ms": "4000"}) as c:
        yield c


def values_at(bootstrap, topic):
    with WireClient(bootstrap) as c:
        p = fetch_part(fetch(c, topic, 0, 0))
        assert p["error_code"] == 0
        return [v for _base, _epoch, recs in decode_batches(p["records"]) for _off, _ts, v in recs]


def test_layout_and_addresses(cluster):
    assert [b.broker_id for b in cluster.brokers] == [1, 2, 3]
    assert cluster.bootstrap_servers == ",".join(b.bootstrap for b in cluster.brokers)
    assert cluster.zookeeper.connect_string == cluster.zookeeper_connect
    for b in cluster.brokers:
        assert b.data_dir == os.path.join(cluster.data_dir, "broker-%d" % b.broker_id)
        assert_answers(b.bootstrap)
        assert "--override" in open("/proc/%d/cmdline" % b.pid).read().replace("\0", " ")


def test_kill_and_start_same_port_same_data(cluster):
    b = cluster.broker(2)
    with WireClient(b.bootstrap) as c:
        # one replica, on broker 2 (the broker killed below)
        r = c.request(19, 5, {"topics": [{"name": "kill-me", "num_partitions": -1, "replication_factor": -1,
                                          "assignments": [{"partition_index": 0, "broker_ids": [2]}],
                                          "configs": []}], "timeout_ms": 30000, "validate_only": False})
        assert r["topics"][0]["error_code"] == 0, r
        wait_for_topic(c, "kill-me", 1)
        assert produce_part(produce(c, "kill-me", 0, make_batch([b"before-kill"])))["error_code"] == 0
    pid, port = b.pid, b.port
    cluster.kill(2)                                  # SIGKILL
    assert not pid_alive(pid) and not port_open(port) and b.pid is None
    cluster.start(2)
    assert b.port == port and b.pid != pid
    assert_answers(b.bootstrap)
    # the partition's only replica: leaderless once the old registration expired, led by
    # broker 2 again when the controller has seen it register
    wait_until(lambda: _leads(b.bootstrap, "kill-me"), timeout=30, what="broker 2 leading kill-me again")
    assert values_at(b.bootstrap, "kill-me") == [b"before-kill"]


def _leads(bootstrap, topic):
    with WireClient(bootstrap) as c:
        return fetch_part(fetch(c, topic, 0, 0))["error_code"] == 0


def test_stop_is_clean_and_start(cluster):
    b = cluster.broker(3)
    pid = b.pid
    assert cluster.stop(3) == 0                      # SIGTERM: clean exit status
    assert not pid_alive(pid) and not port_open(b.port)
    assert "clean shutdown recorded" in open(b.log_path).read()
    cluster.start(3)
    assert_answers(b.bootstrap)


def test_pause_resume(cluster):
    b = cluster.broker(1)
    cluster.pause(1)
    try:
        assert proc_state(b.pid) == "T"
        with pytest.raises(socket.timeout):
            with WireClient(b.bootstrap, timeout=1.0) as c:
                c.request(18, 3, {"client_software_name": "t", "client_software_version": "1"})
    finally:
        cluster.resume(1)
    assert_answers(b.bootstrap)


def test_restart_zookeeper(cluster):
    zk = cluster.zookeeper
    pid, port = zk.pid, zk.port
    cluster.restart_zookeeper(down_seconds=0.5)
    assert not pid_alive(pid) and zk.port == port and zk.pid != pid
    from kazoo.client import KazooClient
    k = KazooClient(hosts=zk.connect_string)
    k.start(timeout=15)
    try:
        assert k.exists("/zookeeper") is not None
    finally:
        k.stop()
        k.close()
    for b in cluster.brokers:
        assert_answers(b.bootstrap)


def test_failed_start_shows_log_tail(tmp_path):
    c = Cluster(1, data_dir=str(tmp_path / "c"), overrides={"num.partitions": "not-a-number"})
    with pytest.raises(RuntimeError) as e:
        c.start()
    msg = str(e.value)
    assert "broker 1 exited" in msg and "num.partitions" in msg
    assert c.zookeeper.pid is None                   # what was started is stopped again


def test_external_zookeeper_and_registrations(tmp_path):
    from kazoo.client import KazooClient

    from pykbroker.local.zookeeper import ZooKeeperServer

    with ZooKeeperServer(str(tmp_path / "zk")) as zk:
        with Cluster(1, data_dir=str(tmp_path / "c"), zookeeper=zk.connect_string) as c:
            assert c.zookeeper is None and c.describe()["zookeeper"]["managed"] is False
            b = c.broker(1)
            pid = b.pid
            assert "zookeeper.connect=%s" % zk.connect_string in open("/proc/%d/cmdline" % b.pid).read().split("\0")
            with pytest.raises(RuntimeError, match="external"):
                c.restart_zookeeper()
            # registrations are read from ZooKeeper itself: an ephemeral znode made here by
            # another session (what a broker's registration is) is seen, and gone with it
            k = KazooClient(hosts=zk.connect_string)
            k.start(timeout=15)
            try:
                k.create("/brokers/ids/7", b"{}", ephemeral=True, makepath=True)
                assert 7 in c.registered_broker_ids()
                assert c.wait_registered(c.registered_broker_ids() | {7}, timeout=5) >= {7}
            finally:
                k.stop()
                k.close()
            assert 7 not in c.registered_broker_ids()
        assert zk.running() and not pid_alive(pid)   # ours stopped, the external one not


def test_all_down_and_up_same_ports(tmp_path):
    with Cluster(2, data_dir=str(tmp_path / "c")) as c:
        before = {b.broker_id: (b.port, b.pid) for b in c.brokers}
        zk_pid = c.zookeeper.pid
        c.stop_all(zookeeper=False)
        assert c.zookeeper.pid == zk_pid and all(b.pid is None for b in c.brokers)
        assert not any(port_open(p) for p, _ in before.values())
        c.start()
        for b in c.brokers:
            assert b.port == before[b.broker_id][0] and b.pid != before[b.broker_id][1]
            assert_answers(b.bootstrap)
        assert c.zookeeper.pid == zk_pid                 # a running ZooKeeper is left alone


def test_first_start_moves_off_a_port_taken_meanwhile(tmp_path, monkeypatch):
    """A port picked free can be taken by another process before the broker binds it."""
    import pykbroker.local.cluster as mod

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    picks = [taken.getsockname()[1]]
    real = mod.free_port
    monkeypatch.setattr(mod, "free_port", lambda host="127.0.0.1": picks.pop() if picks else real(host))
    try:
        with Cluster(1, data_dir=str(tmp_path / "c")) as c:
            b = c.broker(1)
            assert b.port != taken.getsockname()[1]
            assert_answers(b.bootstrap)
            assert "Address already in use" in open(b.log_path).read()
    finally:
        taken.close()


def test_first_start_moves_off_a_port_a_kafka_broker_took_meanwhile(tmp_path, monkeypatch):
    """The process taking the port speaks Kafka (another broker): its ApiVersions answer must
    not count as this broker's readiness (it exits, "Address already in use"); it moves on."""
    import pykbroker
    import pykbroker.local.cluster as mod

    with pykbroker.Broker() as other:
        taken = int(other.bootstrap_servers.rsplit(":", 1)[1])
        picks = [taken]
        real = mod.free_port
        monkeypatch.setattr(mod, "free_port", lambda host="127.0.0.1": picks.pop() if picks else real(host))
        with Cluster(1, data_dir=str(tmp_path / "c")) as c:
            b = c.broker(1)
            assert b.port != taken
            assert mod._listens(b.pid, b.port) is True and mod._listens(b.pid, taken) is False
            assert_answers(b.bootstrap)
            assert "Address already in use" in open(b.log_path).read()
